// Internal: PodVec, a growable array of trivially copyable values in its
// own anonymous mapping (the unpickler's pools, read buffers of unknown
// length). Its resident size is what has been written, not its capacity.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

namespace snapdiff::detail {

// A growable array of trivially copyable values in its own anonymous mapping:
// large ones are backed by transparent huge pages (page faults are a large
// part of parsing a big snapshot otherwise) and grow with mremap, which moves
// page tables instead of copying bytes. Grown items are left uninitialised.
template <class T>
class PodVec {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  PodVec() = default;
  ~PodVec() { release(); }
  PodVec(const PodVec&) = delete;
  PodVec& operator=(const PodVec&) = delete;

  T* data() { return p_; }
  const T* data() const { return p_; }
  size_t size() const { return n_; }
  size_t capacity() const { return cap_; }
  bool empty() const { return n_ == 0; }
  T& operator[](size_t i) { return p_[i]; }
  const T& operator[](size_t i) const { return p_[i]; }
  T& back() { return p_[n_ - 1]; }
  T* begin() { return p_; }
  T* end() { return p_ + n_; }
  void reserve(size_t n) {
    if (n > cap_) grow_to(n);
  }
  // New items (if any) are not initialised.
  void resize(size_t n) {
    if (n > cap_) grow_to(n);
    n_ = n;
  }
  void push_back(const T& v) {
    if (n_ == cap_) grow_to(n_ + 1);
    p_[n_++] = v;
  }
  // Only when size() < capacity().
  void push_back_unchecked(const T& v) { p_[n_++] = v; }
  void pop_back() { --n_; }
  void clear() { n_ = 0; }
  void swap(PodVec& o) {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    std::swap(cap_, o.cap_);
    std::swap(bytes_, o.bytes_);
  }

 private:
  [[gnu::noinline]] void grow_to(size_t want) {
    size_t ncap = cap_ * 2 > want ? cap_ * 2 : want;
    size_t bytes = round_bytes(ncap * sizeof(T));
    if (bytes / sizeof(T) < want) throw std::bad_alloc();
    void* q;
    if (!p_) {
      q = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    } else {
      q = ::mremap(p_, bytes_, bytes, MREMAP_MAYMOVE);
    }
    if (q == MAP_FAILED) throw std::bad_alloc();
    if (bytes >= kHuge) ::madvise(q, bytes, MADV_HUGEPAGE);
    p_ = static_cast<T*>(q);
    bytes_ = bytes;
    cap_ = bytes / sizeof(T);
  }
  static size_t round_bytes(size_t b) {
    if (b < (size_t(64) << 10)) return size_t(64) << 10;
    if (b < kHuge) return (b + 4095) & ~size_t(4095);
    return (b + kHuge - 1) & ~(kHuge - 1);
  }
  void release() {
    if (p_) ::munmap(p_, bytes_);
    p_ = nullptr;
    n_ = cap_ = bytes_ = 0;
  }
  static constexpr size_t kHuge = size_t(2) << 20;
  T* p_ = nullptr;
  size_t n_ = 0, cap_ = 0, bytes_ = 0;
};

}  // namespace snapdiff::detail
