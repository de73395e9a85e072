// The join of a snapshot with a kernel recording (join_kernel_recording) and
// the kernel of each allocation, on hand-made traces.
#include <catch2/catch.hpp>

#include "snapdiff/analysis/analysis.hpp"
#include "snapdiff/analysis/kernel_join.hpp"
#include "snapdiff/error.hpp"
#include "snapdiff/input/input.hpp"
#include "test_util.hpp"

using namespace snapdiff;

namespace {

constexpr uint64_t kMiB = 1 << 20;

Event ev(EventKind k, uint64_t addr, uint64_t size, int64_t t, uint64_t stream = 0) {
  Event e;
  e.kind = k;
  e.addr = addr;
  e.size = size;
  e.time_us = t;
  e.stream = stream;
  return e;
}

// A snapshot: two segments cudaMalloc'd at 1,000 and 5,000 us, allocations
// in them at the times given (stream 7).
Trace snapshot_with(const std::vector<int64_t>& alloc_times) {
  Trace t;
  Device& d = t.device(0);
  d.has_trace = true;
  d.events.push_back(ev(EventKind::SegmentAlloc, 0x7f0000000000, 20 * kMiB, 1000, 7));
  uint64_t a = 0x7f0000000000;
  bool second = false;
  for (int64_t at : alloc_times) {
    if (at >= 5000 && !second) {
      d.events.push_back(ev(EventKind::SegmentAlloc, 0x7f0002000000, 40 * kMiB, 5000, 7));
      second = true;
      a = 0x7f0002000000;
    }
    d.events.push_back(ev(EventKind::Alloc, a, kMiB, at, 7));
    a += kMiB;
  }
  return t;
}

DriverMemoryEvent drv(uint32_t pid, DriverMemoryKind k, uint64_t addr, uint64_t size, int64_t t,
                      MemoryCaller c = MemoryCaller::PyTorch) {
  DriverMemoryEvent e;
  e.pid = pid;
  e.kind = k;
  e.addr = addr;
  e.size = size;
  e.time_us = t;
  e.caller = c;
  return e;
}

KernelLaunch launch(Trace& t, uint32_t pid, const char* name, int64_t time, uint64_t stream = 7) {
  KernelLaunch k;
  k.pid = pid;
  k.name = t.strings.intern(name);
  k.time_us = time;
  k.stream = stream;
  return k;
}

// The recording of the same run: process `pid`, its clock `skew` us behind
// the snapshot's; the two cudaMallocs and launches at the times given.
void add_process(Trace& r, uint32_t pid, int64_t skew, const std::vector<std::pair<const char*, int64_t>>& kernels) {
  r.driver_memory.push_back(drv(pid, DriverMemoryKind::Alloc, 0x7f0000000000, 20 * kMiB, 1000 - skew));
  r.driver_memory.push_back(drv(pid, DriverMemoryKind::Alloc, 0x7f0002000000, 40 * kMiB, 5000 - skew + 3));
  r.driver_memory.push_back(drv(pid, DriverMemoryKind::Alloc, 0x7e0000000000, 8 * kMiB, 900 - skew, MemoryCaller::Nccl));
  for (auto& [n, time] : kernels) r.kernels.push_back(launch(r, pid, n, time - skew));
  DeviceMemorySample s;
  s.pid = pid;
  s.time_us = 9000 - skew;
  s.total_bytes = 80ull << 30;
  s.free_bytes = 70ull << 30;
  r.device_memory.push_back(s);
}

}  // namespace

TEST_CASE("a kernel recording joins its snapshot: the process, the offset and the copied launches", "[analysis]") {
  Trace snap = snapshot_with({2000, 3000, 6000});
  Trace rec;
  add_process(rec, 41, 250, {{"gemm_a", 2000}, {"relu", 3500}, {"gemm_b", 6500}});
  const auto [joined, j] = join_kernel_recording(std::move(snap), rec, "run.kernels.snap", "run.pickle");
  CHECK(j.pid == 41);
  CHECK(j.processes == 1);
  CHECK(j.segment_events == 2);
  CHECK(j.matched_segments == 2);
  CHECK(j.offset_measured);
  // Differences 250 and 247: the median of two is their mean.
  CHECK(j.offset_us == 248.5);
  CHECK(j.offset_spread_us == 0.75);
  REQUIRE(j.kernels == 3);
  CHECK(j.driver_memory_events == 3);
  CHECK(j.samples == 1);
  REQUIRE(joined.kernels.size() == 3);
  // Shifted by the rounded offset (249 us: llround(248.5)).
  CHECK(joined.kernels[0].time_us == 2000 - 250 + 249);
  CHECK(joined.strings.get(joined.kernels[2].name) == "gemm_b");
  CHECK(joined.device_memory[0].time_us == 9000 - 250 + 249);
  // Each allocation has a launch on its stream after it.
  CHECK(j.allocations == 3);
  CHECK(j.allocations_with_kernel == 3);
  CHECK(j.allocations_before_kernels == 0);
}

TEST_CASE("a kernel recording: the process whose cudaMallocs are the snapshot's segments is picked", "[analysis]") {
  Trace snap = snapshot_with({2000, 6000});
  Trace rec;
  // Process 10 (a fork child, say) made other segments; process 20 made these.
  rec.driver_memory.push_back(drv(10, DriverMemoryKind::Alloc, 0x7f0000000000, 2 * kMiB, 990));
  rec.kernels.push_back(launch(rec, 10, "child_a", 1500));
  rec.kernels.push_back(launch(rec, 10, "child_b", 1600));
  rec.kernels.push_back(launch(rec, 10, "child_c", 1700));
  add_process(rec, 20, -40, {{"parent", 2100}});
  std::stable_sort(rec.kernels.begin(), rec.kernels.end(),
                   [](const KernelLaunch& a, const KernelLaunch& b) { return a.time_us < b.time_us; });
  const auto [joined, j] = join_kernel_recording(std::move(snap), rec, "run.kernels.snap", "run.pickle");
  CHECK(j.processes == 2);
  CHECK(j.pid == 20);
  CHECK(j.matched_segments == 2);
  CHECK(j.offset_us < 0);
  REQUIRE(joined.kernels.size() == 1);
  CHECK(joined.strings.get(joined.kernels[0].name) == "parent");
}

TEST_CASE("a kernel recording of another run is refused, naming both files", "[analysis]") {
  SECTION("no overlap in time") {
    Trace snap = snapshot_with({2000});
    Trace rec;
    add_process(rec, 5, -100'000'000, {{"k", 2000}});
    try {
      join_kernel_recording(std::move(snap), rec, "other.kernels.snap", "run.pickle");
      FAIL("accepted");
    } catch (const InputError& e) {
      CHECK_THAT(e.describe(), Catch::Matchers::Contains("other.kernels.snap") &&
                                            Catch::Matchers::Contains("run.pickle") &&
                                            Catch::Matchers::Contains("same time"));
    }
  }
  SECTION("overlapping, and no segment matched") {
    Trace snap = snapshot_with({2000, 6000});
    Trace rec;
    rec.driver_memory.push_back(drv(5, DriverMemoryKind::Alloc, 0x7a0000000000, 20 * kMiB, 1000));
    rec.kernels.push_back(launch(rec, 5, "k", 500));
    rec.kernels.push_back(launch(rec, 5, "k", 8000));
    try {
      join_kernel_recording(std::move(snap), rec, "other.kernels.snap", "run.pickle");
      FAIL("accepted");
    } catch (const InputError& e) {
      CHECK_THAT(e.describe(), Catch::Matchers::Contains("other.kernels.snap") &&
                                            Catch::Matchers::Contains("run.pickle") &&
                                            Catch::Matchers::Contains("segment"));
    }
  }
}

TEST_CASE("a kernel recording joins a snapshot without segment events on time alone, offset not measured",
          "[analysis]") {
  Trace snap;
  Device& d = snap.device(0);
  d.has_trace = true;
  d.events.push_back(ev(EventKind::Alloc, 0x7f0000100000, kMiB, 1000, 7));  // before the recording began
  d.events.push_back(ev(EventKind::Alloc, 0x7f0000000000, kMiB, 2000, 7));
  Segment s;
  s.addr = 0x7f0000000000;
  s.total_size = 20 * kMiB;
  d.segments.push_back(s);
  Trace rec;
  DeviceMemorySample m;
  m.pid = 3;
  m.time_us = 1500;
  m.total_bytes = 1 << 30;
  rec.device_memory.push_back(m);
  rec.kernels.push_back(launch(rec, 3, "k", 2001));
  const auto [joined, j] = join_kernel_recording(std::move(snap), rec, "r.snap", "s.pickle");
  CHECK(j.pid == 3);
  CHECK_FALSE(j.offset_measured);
  CHECK(j.matched_segments == 0);
  CHECK(joined.kernels.size() == 1);
  CHECK(joined.kernels[0].time_us == 2001);
  CHECK(j.recording_first_us == 1500);
  CHECK(j.allocations == 2);
  CHECK(j.allocations_before_kernels == 1);
  // The one before the recording gets none, though a launch follows it.
  CHECK(j.allocations_with_kernel == 1);
  const StreamLaunches sl(joined, j.recording_first_us);
  CHECK(sl.first_at_or_after(0, 7, 1000) == -1);
  CHECK(sl.first_at_or_after(0, 7, 2000) == 0);
}

TEST_CASE("a dump-time segment held by the process accepts a recording whose cudaMallocs were not matched",
          "[analysis]") {
  Trace snap = snapshot_with({2000});
  Segment s;
  s.addr = 0x7f0000000000;
  s.total_size = 20 * kMiB;
  snap.device(0).segments.push_back(s);
  Trace rec;
  // The cudaMalloc is recorded with another size (no pair), but the address
  // is held at the recording's end.
  rec.driver_memory.push_back(drv(9, DriverMemoryKind::Alloc, 0x7f0000000000, 22 * kMiB, 1000));
  rec.kernels.push_back(launch(rec, 9, "k", 2500));
  const auto [joined, j] = join_kernel_recording(std::move(snap), rec, "r.snap", "s.pickle");
  CHECK(j.pid == 9);
  CHECK(j.matched_segments == 0);
  CHECK(j.dump_segments_found == 1);
  CHECK_FALSE(j.offset_measured);
}

TEST_CASE("the kernel of an allocation: the first launch on its stream at or after it", "[analysis]") {
  Trace t;
  Device& d = t.device(0);
  d.has_trace = true;
  d.events.push_back(ev(EventKind::Alloc, 0x1000, 512, 100, 7));   // 0: launch at the same us counts
  d.events.push_back(ev(EventKind::Alloc, 0x2000, 512, 101, 7));   // 1
  d.events.push_back(ev(EventKind::Alloc, 0x3000, 512, 150, 9));   // 2: only stream 9's launch
  d.events.push_back(ev(EventKind::FreeRequested, 0x2000, 512, 300, 7));  // 3: frees event 1
  d.events.push_back(ev(EventKind::Alloc, 0x4000, 512, 900, 7));   // 4: nothing launched after
  t.kernels.push_back(launch(t, 0, "at_100", 100));
  t.kernels.push_back(launch(t, 0, "s9", 120, 9));
  t.kernels.push_back(launch(t, 0, "at_200", 200));
  t.kernels.push_back(launch(t, 0, "at_300", 300));
  t.kernels.push_back(launch(t, 0, "at_400", 400));
  t.kernels.push_back(launch(t, 0, "s9_late", 500, 9));
  const StreamLaunches sl(t);
  CHECK(sl.first_time(0) == 100);
  CHECK(sl.first_time(1) == kNoTime);
  const Analysis a = analyze(t, ReportOptions{});
  const Attribution& at = a.devices[0].attr;
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < at.allocations.size(); ++i) ids.push_back(i);
  const std::vector<AllocationKernels> k = allocation_kernels(sl, d, at, ids);
  auto name = [&](int64_t i) { return i < 0 ? std::string("-") : std::string(t.strings.get(t.kernels[size_t(i)].name)); };
  REQUIRE(k.size() == 4);
  // By allocation time: 0x1000, 0x2000, 0x3000, 0x4000.
  auto of = [&](uint64_t addr) {
    for (size_t i = 0; i < ids.size(); ++i)
      if (at.allocations[ids[i]].addr == addr) return k[i];
    FAIL("no allocation");
    return AllocationKernels{};
  };
  CHECK(name(of(0x1000).kernel) == "at_100");
  CHECK(of(0x1000).while_live == 4);  // alive at the end: every launch on stream 7 from 100 on
  CHECK(name(of(0x1000).last) == "at_400");
  CHECK(name(of(0x2000).kernel) == "at_200");
  CHECK(of(0x2000).while_live == 2);  // 200 and 300 (the free's microsecond included)
  CHECK(name(of(0x2000).last) == "at_300");
  CHECK(name(of(0x3000).kernel) == "s9_late");
  CHECK(of(0x4000).kernel == -1);
  CHECK(of(0x4000).while_live == 0);
  // At the moment of event 2 (time 150): 0x1000 lived through at_100 only.
  const std::vector<AllocationKernels> m = allocation_kernels(sl, d, at, ids, 2);
  for (size_t i = 0; i < ids.size(); ++i)
    if (at.allocations[ids[i]].addr == 0x1000) {
      CHECK(m[i].while_live == 1);
      CHECK(name(m[i].last) == "at_100");
    }
}

TEST_CASE("BY KERNEL for an input with launches and no ops: rows, coverage and the unknown finding's kernel",
          "[analysis]") {
  Trace t;
  Device& d = t.device(0);
  d.has_trace = true;
  const FrameId f = t.intern_frame({t.strings.intern("fwd"), t.strings.intern("m.py"), 1});
  const StackId st = t.stacks.intern(&f, 1);
  Event a = ev(EventKind::Alloc, 0x1000000, kMiB, 10), b = ev(EventKind::Alloc, 0x2000000, 2 * kMiB, 20),
        c = ev(EventKind::Alloc, 0x3000000, 512, 30);
  a.stack = b.stack = c.stack = st;
  d.events = {a, b, c};
  t.kernels.push_back(launch(t, 0, "gemm", 11, 0));
  t.kernels.push_back(launch(t, 0, "void at::native::foo<float>(int)", 20, 0));  // same us as b
  t.kernels.push_back(launch(t, 0, "other_stream", 40, 5));                       // not c's stream
  ReportOptions ro;
  const Report r = analyze_report(t, ro);
  REQUIRE(r.devices.size() == 1);
  const DeviceView& v = r.devices[0];
  CHECK_FALSE(v.has_ops);
  REQUIRE(v.kernels_only);
  REQUIRE(v.by_kernel.size() == 3);
  CHECK(v.by_kernel[0].kernel == "at::native::foo<…>");
  CHECK(v.by_kernel[0].bytes == int64_t(2 * kMiB));
  CHECK(v.by_kernel[0].other == "fwd (m.py:1)");
  CHECK(v.by_kernel[1].kernel == "gemm");
  CHECK(v.by_kernel[1].bytes == int64_t(kMiB));
  CHECK(v.by_kernel[2].kernel.empty());
  CHECK(v.by_kernel[2].bytes == 512);
  CHECK(v.kernel_coverage.allocations == 3);
  CHECK(v.kernel_coverage.with_kernel == 2);
  CHECK(v.kernel_coverage.bytes == int64_t(3 * kMiB + 512));
  CHECK(v.kernel_coverage.bytes_with_kernel == int64_t(3 * kMiB));
  bool named = false;
  for (const Finding& fi : v.findings)
    if (auto* u = std::get_if<UnknownFacts>(&fi.facts)) {
      named = true;
      CHECK(u->kernel == "at::native::foo<…>");
      CHECK(u->kernel_bytes == int64_t(2 * kMiB));
    }
  CHECK(named);
  // The peak's unknown part names it too.
  bool part = false;
  for (const Finding& fi : v.findings)
    if (auto* pk = std::get_if<PeakFacts>(&fi.facts))
      for (const PeakFacts::Part& p : pk->parts)
        if (p.category == "unknown") {
          part = true;
          CHECK(p.kernel == "at::native::foo<…>");
          CHECK(p.kernel_bytes == int64_t(2 * kMiB));
        }
  CHECK(part);
}

TEST_CASE("snapcapture's recordings: at least 99% of the allocations live at the peak have a kernel", "[analysis]") {
  size_t seen = 0;
  for (const char* name : {"bf16.snap", "fp8_no_pw.snap", "fp8_pw.snap"}) {
    const std::string path = std::string(SNAPDIFF_SOURCE_DIR) + "/sample_snapshots/" + name;
    if (!std::filesystem::exists(path)) continue;
    const Trace t = load_trace(path);
    REQUIRE_FALSE(t.kernels.empty());
    const Report r = analyze_report(t, ReportOptions{});
    for (const DeviceView& v : r.devices) {
      INFO(name << " cuda:" << v.device);
      REQUIRE(v.kernel_coverage.present);
      CHECK(v.kernel_coverage.allocations == v.peak_live_allocations);
      CHECK(v.kernel_coverage.with_kernel * 100 >= v.kernel_coverage.allocations * 99);
      CHECK(v.kernel_coverage.bytes_with_kernel * 100 >= v.kernel_coverage.bytes * 99);
      ++seen;
    }
  }
  CHECK(seen == 3);
}

TEST_CASE("a kernel recording: each segment event takes the nearest call of its size at its address", "[analysis]") {
  // One address made and freed 5 times (at 10,000 us steps); the recording
  // has 7 calls there: the right size at +100 us of each but the third
  // (-40 us and +40 us: the earlier wins a tie), one of another size nearer,
  // and one 2 s away (beyond the bound). Mappings: one too large, one that fits.
  Trace snap;
  Device& d = snap.device(0);
  d.has_trace = true;
  const uint64_t a = 0x7f0000000000;
  for (int i = 0; i < 5; ++i) {
    d.events.push_back(ev(EventKind::SegmentAlloc, a, 20 * kMiB, 10'000 * (i + 1)));
    d.events.push_back(ev(EventKind::SegmentFree, a, 20 * kMiB, 10'000 * (i + 1) + 5));
  }
  d.events.push_back(ev(EventKind::SegmentMap, a + 64 * kMiB, 40 * kMiB, 60'000));
  Trace rec;
  for (int i : {0, 1, 3, 4}) rec.driver_memory.push_back(drv(5, DriverMemoryKind::Alloc, a, 20 * kMiB, 10'000 * (i + 1) - 100));
  rec.driver_memory.push_back(drv(5, DriverMemoryKind::Alloc, a, 20 * kMiB, 30'000 - 40));
  rec.driver_memory.push_back(drv(5, DriverMemoryKind::Alloc, a, 20 * kMiB, 30'000 + 40));
  rec.driver_memory.push_back(drv(5, DriverMemoryKind::Alloc, a, 2 * kMiB, 30'000 - 1));
  rec.driver_memory.push_back(drv(5, DriverMemoryKind::Alloc, a, 20 * kMiB, 2'050'000));
  rec.driver_memory.push_back(drv(5, DriverMemoryKind::Map, a + 64 * kMiB, 80 * kMiB, 60'000));
  rec.driver_memory.push_back(drv(5, DriverMemoryKind::Map, a + 64 * kMiB, 20 * kMiB, 60'000 - 7));
  const auto [joined, j] = join_kernel_recording(std::move(snap), rec, "r.kernels.snap", "s.pickle");
  CHECK(j.segment_events == 6);
  CHECK(j.matched_segments == 6);
  // Differences 100 x 4, 40 (the earlier of the tie) and 7: the median is 100.
  CHECK(j.offset_us == 100);
}
