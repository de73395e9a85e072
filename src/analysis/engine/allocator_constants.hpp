// The CUDA caching allocator's size constants (c10/cuda/CUDACachingAllocator.cpp),
// shared by the replay and the what-if model: written once here.
#pragma once

#include <cstdint>

namespace snapdiff::alloc {

inline constexpr uint64_t kMinBlock = 512;                  // every request is rounded up to a multiple
inline constexpr uint64_t kSmallSize = uint64_t(1) << 20;   // requests up to this size use the small pool
inline constexpr uint64_t kSmallBuffer = uint64_t(2) << 20;   // a small-pool segment
inline constexpr uint64_t kLargeBuffer = uint64_t(20) << 20;  // the segment for requests below kMinLargeAlloc
inline constexpr uint64_t kMinLargeAlloc = uint64_t(10) << 20;
inline constexpr uint64_t kRoundLarge = uint64_t(2) << 20;  // larger segments are rounded up to a multiple

}  // namespace snapdiff::alloc
