#include "cli/alloc_meter.hpp"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <new>

#include "input/memory_budget.hpp"
#include "snapdiff/error.hpp"

namespace {

// Armed only while a bound is alive; outside it operator new costs one
// relaxed load more than malloc.
std::atomic<bool> g_armed{false};
std::atomic<int64_t> g_net{0};  // bytes allocated less bytes freed while armed
int64_t g_room = 0;
std::atomic<bool> g_tripped{false};
// malloc's own header per chunk: what a tree of small nodes (a JSON
// document) costs beyond the bytes handed out.
constexpr int64_t kChunkHeader = 16;

void* counted(void* p) {
  if (p && g_armed.load(std::memory_order_relaxed)) {
    const int64_t n = int64_t(malloc_usable_size(p)) + kChunkHeader;
    if (g_net.fetch_add(n, std::memory_order_relaxed) + n > g_room) {
      g_net.fetch_sub(n, std::memory_order_relaxed);
      std::free(p);
      // Once: what unwinds from here may allocate (destructors that are
      // noexcept, like nlohmann's iterative tree destroy) and must not fail.
      g_tripped.store(true, std::memory_order_relaxed);
      g_armed.store(false, std::memory_order_relaxed);
      return nullptr;
    }
  }
  return p;
}

void uncount(void* p) {
  if (p && g_armed.load(std::memory_order_relaxed))
    g_net.fetch_sub(int64_t(malloc_usable_size(p)) + kChunkHeader, std::memory_order_relaxed);
}

void* new_or_throw(std::size_t n) {
  if (n == 0) n = 1;
  void* p = counted(std::malloc(n));
  if (!p) throw std::bad_alloc();
  return p;
}

void* aligned_new_or_throw(std::size_t n, std::align_val_t al) {
  const std::size_t a = std::size_t(al);
  std::size_t m = (n + a - 1) / a * a;
  if (m == 0) m = a;
  void* p = counted(std::aligned_alloc(a, m));
  if (!p) throw std::bad_alloc();
  return p;
}

}  // namespace

// The executable's allocation functions (replaceable, [new.delete]): malloc
// and free with the count above.
void* operator new(std::size_t n) { return new_or_throw(n); }
void* operator new[](std::size_t n) { return new_or_throw(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return new_or_throw(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return new_or_throw(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new(std::size_t n, std::align_val_t a) { return aligned_new_or_throw(n, a); }
void* operator new[](std::size_t n, std::align_val_t a) { return aligned_new_or_throw(n, a); }
void operator delete(void* p) noexcept { uncount(p), std::free(p); }
void operator delete[](void* p) noexcept { uncount(p), std::free(p); }
void operator delete(void* p, std::size_t) noexcept { uncount(p), std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { uncount(p), std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { uncount(p), std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { uncount(p), std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { uncount(p), std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { uncount(p), std::free(p); }

namespace snapdiff::cli {

uint64_t resident_bytes() {
  // /proc/self/statm: size resident shared text lib data dt, in pages.
  std::FILE* f = std::fopen("/proc/self/statm", "re");
  if (!f) return 0;
  unsigned long long size = 0, resident = 0;
  const bool ok = std::fscanf(f, "%llu %llu", &size, &resident) == 2;
  std::fclose(f);
  return ok ? uint64_t(resident) * uint64_t(::sysconf(_SC_PAGESIZE)) : 0;
}

// Under AddressSanitizer the resident size is mostly the sanitizer's
// (shadow memory, the quarantine of freed blocks): not what the program
// holds, so the prediction stands alone there.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitizedHeap = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitizedHeap = true;
#else
constexpr bool kSanitizedHeap = false;
#endif
#else
constexpr bool kSanitizedHeap = false;
#endif

uint64_t render_room(const LoadOptions& lo, uint64_t held) {
  if (lo.max_memory_bytes == 0) return 0;
  // What is resident now when it can be read (the model, its analysis, the
  // program), else the prediction.
  const uint64_t now = kSanitizedHeap ? held : std::max(resident_bytes(), held);
  return lo.max_memory_bytes > now ? lo.max_memory_bytes - now : 1;
}

void with_render_bound(uint64_t room, uint64_t limit, const std::string& file, const std::function<void()>& fn) {
  if (room == 0) {
    fn();
    return;
  }
  struct Arm {
    explicit Arm(uint64_t r) {
      g_room = int64_t(std::min<uint64_t>(r, uint64_t(INT64_MAX) / 2));
      g_net.store(0);
      g_tripped.store(false);
      g_armed.store(true);
    }
    ~Arm() { g_armed.store(false); }
  };
  try {
    Arm arm(room);
    fn();
  } catch (const std::bad_alloc&) {
    if (!g_tripped.load()) throw;
    InputError e("rendering the report needs more than the limit of " + detail::memory_text(limit) +
                 " of memory (raise it with --max-memory, or show fewer rows with -n)");
    e.set_file(file);
    throw e;
  }
}

}  // namespace snapdiff::cli
