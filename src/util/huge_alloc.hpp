// Internal: an allocator that puts arrays of 2 MiB and more on 2 MiB
// boundaries with transparent huge pages asked for, so that filling them
// takes one page fault per 2 MiB instead of 512 (a 4 KiB fault costs
// microseconds on the VMs measured; docs/performance.md). Smaller arrays
// come from operator new as usual.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <new>
#include <vector>

namespace snapdiff::detail {

template <class T>
struct HugeAllocator {
  using value_type = T;
  static constexpr size_t kHuge = size_t(2) << 20;
  HugeAllocator() = default;
  template <class U>
  HugeAllocator(const HugeAllocator<U>&) {}
  T* allocate(size_t n) {
    if (n > size_t(-1) / sizeof(T)) throw std::bad_alloc();
    const size_t bytes = n * sizeof(T);
    if (bytes < kHuge) return static_cast<T*>(::operator new(bytes));
    const size_t rounded = (bytes + kHuge - 1) & ~(kHuge - 1);
    void* p = std::aligned_alloc(kHuge, rounded);
    if (!p) throw std::bad_alloc();
    ::madvise(p, rounded, MADV_HUGEPAGE);
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) {
    if (n * sizeof(T) < kHuge) ::operator delete(p);
    else std::free(p);
  }
  template <class U>
  bool operator==(const HugeAllocator<U>&) const {
    return true;
  }
};

template <class T>
using HugeVec = std::vector<T, HugeAllocator<T>>;

}  // namespace snapdiff::detail
