// capture/inject/demangle.hpp — kernel names demangled within a bound.
//
// A mangled C++ name is small, but what it demangles to need not be: each
// back-reference (S_, S0_, T_, ...) prints a whole earlier component again,
// so a few hundred bytes whose components each refer to the one before twice
// demangle to gigabytes (2^levels), and abi::__cxa_demangle builds all of it
// (issue 37: 384 bytes of log, 1.1 GB of name, 16 s). So the name is first
// parsed, once and linearly, for an upper bound of its demangled length:
// every component's length, each back-reference costing the largest
// component before it, each pack expansion its pattern times the longest
// pack. Only a name bounded by kMaxDemangledBytes (16 KiB) is demangled;
// any other, or one the bound's parser does not follow, or nested deeper
// than kMaxDemangleDepth, keeps its mangled name (docs/capture.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace snapcapture::log {

// The longest demangled kernel name: PyTorch's longest, a reduction inside
// three lambdas, is about 3 KB.
constexpr uint64_t kMaxDemangledBytes = uint64_t(16) << 10;
// Components nested deeper than this are not followed (the name is kept).
constexpr int kMaxDemangleDepth = 256;
// Mangled names longer than this are kept as they are, unparsed.
constexpr size_t kMaxMangledBytes = size_t(64) << 10;

// An upper bound of the length of `mangled`'s demangled text (a name
// starting with _Z), or nullopt when the bound's parser does not follow it
// or finds it nested deeper than kMaxDemangleDepth. Linear in its length.
std::optional<uint64_t> demangled_length_bound(std::string_view mangled);

// "_ZN2at6native..." -> "void at::native::...": a name that is not mangled
// C++ (extern "C" kernels, a graph launch's API name), that does not
// demangle, or whose bound passes `max_bytes`, is kept as it is.
std::string demangle_kernel_name(std::string_view name, uint64_t max_bytes = kMaxDemangledBytes);

}  // namespace snapcapture::log
