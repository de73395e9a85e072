// snapcapture's caching allocator on a fake device: the block rules, and the
// strongest check there is — snapdiff's replay of what it recorded gives the
// allocator's own counters exactly.
#include <catch2/catch.hpp>
#include <random>

#include "caching_allocator.hpp"
#include "snapdiff/input.hpp"
#include "snapdiff/replay.hpp"
#include "snapdiff/report.hpp"

using namespace snapcapture;

namespace {
// Hands out 2 MiB-aligned addresses up to a capacity; reuses freed ranges of
// the same size.
class FakeDevice : public DeviceApi {
 public:
  explicit FakeDevice(uint64_t capacity) : capacity_(capacity) {}
  uint64_t malloc(uint64_t bytes) override {
    if (used_ + bytes > capacity_) return 0;
    used_ += bytes;
    uint64_t a = next_;
    next_ += (bytes + (uint64_t(2) << 20) - 1) / (uint64_t(2) << 20) * (uint64_t(2) << 20);
    sizes_[a] = bytes;
    ++mallocs;
    return a;
  }
  void free(uint64_t addr) override {
    used_ -= sizes_.at(addr);
    sizes_.erase(addr);
    ++frees;
  }
  int64_t now_us() override { return t_ += 3; }
  int mallocs = 0, frees = 0;

 private:
  uint64_t capacity_, used_ = 0, next_ = uint64_t(0x7f0000000000);
  int64_t t_ = 1'000'000;
  std::map<uint64_t, uint64_t> sizes_;
};
constexpr uint64_t MiB = uint64_t(1) << 20;
}  // namespace

TEST_CASE("rounding, pools and segment sizes follow PyTorch", "[capture]") {
  CHECK(CachingAllocator::round_size(1) == 512);
  CHECK(CachingAllocator::round_size(513) == 1024);
  CHECK(CachingAllocator::segment_size(512) == 2 * MiB);
  CHECK(CachingAllocator::segment_size(MiB) == 2 * MiB);
  CHECK(CachingAllocator::segment_size(MiB + 512) == 20 * MiB);
  CHECK(CachingAllocator::segment_size(10 * MiB) == 10 * MiB);
  CHECK(CachingAllocator::segment_size(11 * MiB + 1) == 12 * MiB);

  FakeDevice dev(uint64_t(1) << 34);
  CachingAllocator a(dev, 0);
  uint64_t p = a.allocate(100);
  CHECK(a.stats().requested == 100);
  CHECK(a.stats().allocated == 512);
  CHECK(a.stats().reserved == int64_t(2 * MiB));
  uint64_t q = a.allocate(100);
  CHECK(q == p + 512);  // split from the same small segment
  // Large: 5 MiB from a 20 MiB segment, split (15 MiB left > 1 MiB).
  uint64_t l = a.allocate(5 * MiB);
  CHECK(a.stats().reserved == int64_t(22 * MiB));
  // 14.5 MiB: fits the 15 MiB remainder; 512 KiB left <= 1 MiB, so unsplit:
  // allocated counts the whole 15 MiB block.
  int64_t before = a.stats().allocated;
  uint64_t m = a.allocate(14 * MiB + MiB / 2);
  CHECK(m == l + 5 * MiB);
  CHECK(a.stats().allocated - before == int64_t(15 * MiB));
  CHECK(a.stats().reserved == int64_t(22 * MiB));
}

TEST_CASE("frees merge with free neighbours; best fit picks the smallest block", "[capture]") {
  FakeDevice dev(uint64_t(1) << 34);
  CachingAllocator a(dev, 0);
  uint64_t x = a.allocate(2 * MiB);  // 20 MiB segment: [2][18 free]
  uint64_t y = a.allocate(3 * MiB);  // [2][3][15 free]
  uint64_t z = a.allocate(4 * MiB);  // [2][3][4][11 free]
  a.deallocate(y);                   // [2][3 free][4][11 free]
  // 2.5 MiB: best fit is the 3 MiB hole, not the 11 MiB tail.
  uint64_t w = a.allocate(2 * MiB + MiB / 2);
  CHECK(w == y);
  a.deallocate(w);
  a.deallocate(z);  // [2][3+4+11 merged]
  uint64_t v = a.allocate(17 * MiB);
  CHECK(v == y);
  a.deallocate(v);
  a.deallocate(x);  // the whole segment is free again
  CHECK(a.stats().allocated == 0);
  a.empty_cache();
  CHECK(a.stats().reserved == 0);
  CHECK(dev.frees == 1);
}

TEST_CASE("out of memory: the cache is released and retried, then an oom event", "[capture]") {
  FakeDevice dev(40 * MiB);
  CachingAllocator a(dev, 0);
  uint64_t p = a.allocate(15 * MiB);  // 20 MiB segment
  a.deallocate(p);                    // cached, free
  uint64_t q = a.allocate(30 * MiB);  // needs 30 MiB: only fits once the cache is released
  CHECK(q != 0);
  CHECK(dev.frees == 1);
  CHECK_THROWS_AS(a.allocate(30 * MiB), OutOfMemory);
  snapdiff::Trace t = a.to_trace();
  bool oom = false;
  for (const auto& e : t.devices[0].events) oom |= e.kind == snapdiff::EventKind::Oom;
  CHECK(oom);
}

TEST_CASE("snapdiff's replay of the recording equals the allocator's own counters", "[capture]") {
  FakeDevice dev(uint64_t(1) << 36);
  CachingAllocator a(dev, 0);
  std::mt19937_64 rng(42);
  std::vector<uint64_t> live;
  for (int i = 0; i < 4000; ++i) {
    if (i % 500 == 0) a.push_scope("iter " + std::to_string(i / 500));
    if (i % 500 == 499) a.pop_scope();
    if (!live.empty() && rng() % 5 < 2) {
      size_t k = rng() % live.size();
      a.deallocate(live[k]);
      live[k] = live.back();
      live.pop_back();
    } else {
      uint64_t size;
      switch (rng() % 4) {
        case 0: size = 1 + rng() % 4096; break;
        case 1: size = 1 + rng() % MiB; break;
        case 2: size = MiB + rng() % (9 * MiB); break;
        default: size = 10 * MiB + rng() % (40 * MiB); break;
      }
      live.push_back(a.allocate(size, rng() % 8 == 0 ? 7 : 0));
    }
    if (i == 3000) a.empty_cache();
  }
  snapdiff::Trace t = a.to_trace();
  // Through the .snap format, as snapcapture writes it.
  snapdiff::Trace back = snapdiff::load_trace_from_memory(snapdiff::write_snap_json(t), "capture.snap");
  for (const snapdiff::Trace* tr : {&t, &back}) {
    snapdiff::DeviceReplay r = snapdiff::replay_device(*tr, tr->devices[0]);
    CHECK(r.inconsistencies == 0);
    CHECK_FALSE(r.truncated);
    CHECK(r.peak_requested.bytes == a.stats().peak_requested);
    CHECK(r.peak_allocated.bytes == a.stats().peak_allocated);
    CHECK(r.peak_reserved.bytes == a.stats().peak_reserved);
    CHECK(r.end.requested == a.stats().requested);
    CHECK(r.end.allocated == a.stats().allocated);
    CHECK(r.end.reserved == a.stats().reserved);
    CHECK(r.end_check.matches());
  }
  // Scope labels become the stack of each event.
  const auto& ev = back.devices[0].events;
  bool labelled = false;
  for (const auto& e : ev)
    if (e.stack != 0) labelled |= back.strings.get(back.frames[back.stacks.node(e.stack).frame].name).rfind("iter ", 0) == 0;
  CHECK(labelled);
}
