// snapcapture's caching allocator on a fake device: the block rules, and the
// strongest check there is — snapdiff's replay of what it recorded gives the
// allocator's own counters exactly.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <random>

#include "caching_allocator.hpp"
#include "snapdiff/input/input.hpp"
#include "snapdiff/analysis/replay.hpp"
#include "snapdiff/analysis/analysis.hpp"
#include "snapdiff/report/report.hpp"

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

TEST_CASE("kernel launches and device-memory samples are recorded with scopes, times and reserved bytes", "[capture]") {
  FakeDevice dev(uint64_t(1) << 34);
  CachingAllocator a(dev, 2);
  const uint64_t total = uint64_t(80) << 30, context = 500 * MiB;
  // What cudaMemGetInfo would say: the context plus the allocator's segments.
  auto sample = [&](const std::string& label) {
    a.record_device_memory(label, total - context - uint64_t(a.stats().reserved), total);
  };
  sample("start");
  a.record_kernel("init_weights");  // outside every scope
  a.push_scope("iter 1");
  a.push_scope("forward");
  uint64_t x = a.allocate(8 * MiB);
  a.record_kernel("gemm_fwd", 7);
  a.pop_scope();
  a.push_scope("backward");
  uint64_t y = a.allocate(30 * MiB);  // the peak
  a.record_kernel("gemm_bwd");
  a.record_kernel("gemm_fwd");  // the same name in another scope
  a.deallocate(y);
  a.pop_scope();
  a.pop_scope();
  sample("after iteration 1");
  a.deallocate(x);
  for (int i = 0; i < 20000; ++i) a.record_kernel("elementwise");  // many launches, one interned name

  snapdiff::Trace t = a.to_trace();
  REQUIRE(t.kernels.size() == 20004);
  REQUIRE(t.device_memory.size() == 2);
  auto names = [&](const snapdiff::Trace& tr, snapdiff::StackId s) {
    std::vector<std::string> out;  // outermost first
    for (snapdiff::FrameId f : tr.stacks.frames(s)) {
      CHECK(tr.strings.get(tr.frames[f].file) == "snapcapture");
      out.insert(out.begin(), std::string(tr.strings.get(tr.frames[f].name)));
    }
    return out;
  };
  using V = std::vector<std::string>;
  const auto& k = t.kernels;
  CHECK(t.strings.get(k[0].name) == "init_weights");
  CHECK(k[0].stack == 0);
  CHECK(t.strings.get(k[1].name) == "gemm_fwd");
  CHECK(names(t, k[1].stack) == V{"iter 1", "forward"});
  CHECK(k[1].stream == 7);
  CHECK(names(t, k[2].stack) == V{"iter 1", "backward"});
  CHECK(k[3].name == k[1].name);
  CHECK(k[3].stack == k[2].stack);
  CHECK(k[4].stack == 0);
  for (size_t i = 0; i < k.size(); ++i) {
    CHECK(k[i].device == 2);
    if (i) CHECK(k[i].time_us > k[i - 1].time_us);  // every record reads the clock
  }
  // The kernel stacks are the allocation events' stacks: same scope, same id.
  const auto& ev = t.devices[0].events;
  for (const auto& e : ev)
    if (e.kind == snapdiff::EventKind::Alloc && e.size == 30 * MiB) CHECK(e.stack == k[2].stack);
  // Reserved bytes at each sample: none at the start, both segments after iteration 1.
  CHECK(t.device_memory[0].reserved_bytes == 0);
  CHECK(t.device_memory[1].reserved_bytes == 20 * MiB + 30 * MiB);
  CHECK(t.strings.get(t.device_memory[1].label) == "after iteration 1");
  CHECK(t.device_memory[1].total_bytes == total);
  CHECK(t.device_memory[0].time_us < ev.front().time_us);

  // Through .snap and into the report.
  snapdiff::Trace back = snapdiff::load_trace_from_memory(snapdiff::write_snap_json(t), "capture.snap");
  REQUIRE(back.kernels.size() == t.kernels.size());
  CHECK(names(back, back.kernels[2].stack) == V{"iter 1", "backward"});
  CHECK(back.device_memory[1].reserved_bytes == 50 * MiB);
  snapdiff::Analysis r = snapdiff::analyze(back, {});
  REQUIRE(r.devices.size() == 1);
  const snapdiff::DeviceAnalysis& d = r.devices[0];
  CHECK(r.kernel_launches == 20004);
  // The peak is the 30 MiB alloc: gemm_fwd in the forward scope launched
  // before it, gemm_bwd after it.
  REQUIRE(d.kernel_before_index == 1);
  REQUIRE(d.kernel_after_index == 2);
  REQUIRE(r.device_memory.size() == 2);
  CHECK(r.device_memory[0].outside_bytes == int64_t(context));
  CHECK(r.device_memory[1].outside_bytes == int64_t(context));
  CHECK(r.device_memory[1].used_bytes == int64_t(context + 50 * MiB));
  CHECK(r.device_memory[0].since_first_event_us < 0);
  CHECK(r.outside_min_bytes == int64_t(context));
  CHECK(r.outside_max_bytes == int64_t(context));
  std::string text = snapdiff::render_text(report_view(r), snapdiff::kMaxTextWidth);
  CHECK(text.find("  kernels     20,004 launches\n") != std::string::npos);
  CHECK(text.find("  last kernel gemm_fwd  (") != std::string::npos);
  CHECK(text.find(", stream 0x7)  in iter 1 / forward\n") != std::string::npos);
  CHECK(text.find("  next kernel gemm_bwd  (") != std::string::npos);
  CHECK(text.find(")  in iter 1 / backward\n") != std::string::npos);
  CHECK(text.find("\nDEVICE MEMORY OUTSIDE THE ALLOCATOR") != std::string::npos);
  CHECK(text.find("after iteration 1\n") != std::string::npos);
  CHECK(text.find("  outside the allocator: min 500.0 MiB, max 500.0 MiB  (CUDA context, library handles and modules)") !=
        std::string::npos);
  auto j = nlohmann::json::parse(snapdiff::render_json(report_view(r)));
  CHECK(j["input"]["kernel_launches"] == 20004);
  for (const auto* p : {&j["peak"], &j["devices"][0]["peak"]}) {
    CHECK((*p)["kernel_before"]["name"] == "gemm_fwd");
    CHECK((*p)["kernel_before"]["stack"][0]["name"] == "forward");  // innermost first
    CHECK((*p)["kernel_before"]["stack"][1]["name"] == "iter 1");
    CHECK((*p)["kernel_after"]["name"] == "gemm_bwd");
    CHECK((*p)["kernel_after"]["time_us"] == back.kernels[2].time_us);
  }
  CHECK(j["device_memory"]["samples"].size() == 2);
  CHECK(j["device_memory"]["samples"][1]["outside_bytes"] == int64_t(context));
  CHECK(j["device_memory"]["samples"][1]["reserved_bytes"] == int64_t(50 * MiB));
  CHECK(j["device_memory"]["outside_min_bytes"] == int64_t(context));
  CHECK(j["device_memory"]["outside_max_bytes"] == int64_t(context));
}

TEST_CASE("no kernel launches or samples: no new report fields", "[capture]") {
  FakeDevice dev(uint64_t(1) << 34);
  CachingAllocator a(dev, 0);
  a.deallocate(a.allocate(MiB));
  snapdiff::Trace t = a.to_trace();
  CHECK(t.kernels.empty());
  CHECK(t.device_memory.empty());
  snapdiff::Analysis r = snapdiff::analyze(t, {});
  auto j = nlohmann::json::parse(snapdiff::render_json(report_view(r)));
  CHECK_FALSE(j["input"].contains("kernel_launches"));
  CHECK_FALSE(j["peak"].contains("kernel_before"));
  CHECK_FALSE(j.contains("device_memory"));
  std::string text = snapdiff::render_text(report_view(r), snapdiff::kMaxTextWidth);
  CHECK(text.find("kernel") == std::string::npos);
  CHECK(text.find("DEVICE MEMORY") == std::string::npos);
}
