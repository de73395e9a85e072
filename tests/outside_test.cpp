// Device memory outside the allocator from driver calls (src/analysis/outside.cpp):
// hand-made traces whose every figure follows from the calls written here —
// Alloc/Free pairs by caller, NCCL's create-map-release-unmap, expandable
// segments' map/unmap, async pools, two processes, the context as used minus
// recorded, the at-peak choice and the total device peak — and the text and
// JSON of the section.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <string>

#include "snapdiff/analysis/analysis.hpp"
#include "snapdiff/analysis/chart_data.hpp"
#include "snapdiff/analysis/outside.hpp"
#include "snapdiff/report/chart.hpp"
#include "snapdiff/report/report.hpp"
#include "snapdiff/report/report_read.hpp"
#include "test_util.hpp"

using namespace snapdiff;

namespace {

constexpr uint64_t MiB = uint64_t(1) << 20;
constexpr int64_t T0 = 1'700'000'000'000'000;  // the recording's clock: Unix-epoch microseconds
// A moment of the test, in milliseconds from T0.
constexpr int64_t at(int64_t ms) { return T0 + ms * 1000; }
constexpr uint64_t kTotal = uint64_t(80) << 30;

struct Builder {
  Trace t;
  Builder() { t.device(0).has_trace = true; }

  // The allocator's history on device 0.
  void ev(EventKind k, uint64_t addr, uint64_t size, int64_t ms) {
    Event e;
    e.kind = k;
    e.action = t.strings.intern(event_kind_name(k));
    e.addr = addr;
    e.size = size;
    e.time_us = at(ms);
    t.devices[0].events.push_back(e);
  }
  // A driver call.
  void drv(DriverMemoryKind k, int64_t ms, MemoryCaller c, std::string_view library, uint64_t addr, uint64_t size,
           uint64_t handle = 0, uint32_t pid = 41, int device = 0) {
    DriverMemoryEvent e;
    e.device = device;
    e.time_us = at(ms);
    e.pid = pid;
    e.kind = k;
    e.caller = c;
    e.addr = addr;
    e.size = size;
    e.handle = handle;
    e.library = t.strings.intern(library);
    t.driver_memory.push_back(e);
  }
  // A cudaMemGetInfo sample: `used` bytes in use on the device.
  void sample(int64_t ms, uint64_t used, const char* label = "interval", int device = 0) {
    DeviceMemorySample s;
    s.device = device;
    s.time_us = at(ms);
    s.total_bytes = kTotal;
    s.free_bytes = kTotal - used;
    s.label = t.strings.intern(label);
    s.pid = 41;
    t.device_memory.push_back(s);
  }
};

const OutsideRow& row(const OutsideDevice& d, MemoryCaller c, uint32_t pid = 41, std::string_view library = "") {
  for (const OutsideRow& r : d.rows)
    if (!r.context && r.caller == c && r.pid == pid && (c != MemoryCaller::Other || r.library == library)) return r;
  FAIL("no row " << memory_caller_name(c) << " of process " << pid);
  throw 0;
}
const OutsideRow& context_row(const OutsideDevice& d) {
  REQUIRE(!d.rows.empty());
  REQUIRE(d.rows.back().context);
  return d.rows.back();
}

constexpr uint64_t kSeg = 0x7f0000000000, kNccl = 0x7f1000000000, kCublas = 0x7f2000000000, kFoo = 0x7f3000000000;

// One process: the allocator takes a 20 MiB segment (its cudaMalloc seen by
// the driver), allocates 16 MiB in it (the peak, at +110), frees it, and
// allocates 8 MiB later; NCCL, cuBLAS and libfoo take memory of their own;
// samples see a 500 MiB context, 10 MiB more at +108 (another process).
Builder alloc_free_run() {
  Builder b;
  b.drv(DriverMemoryKind::Free, 40, MemoryCaller::Nccl, "libnccl.so.2", 0xdead000, 0);  // made before the recording
  b.drv(DriverMemoryKind::Alloc, 50, MemoryCaller::Nccl, "libnccl.so.2", kNccl, 64 * MiB);
  b.drv(DriverMemoryKind::Alloc, 90, MemoryCaller::PyTorch, "libc10_cuda.so", kSeg, 20 * MiB);
  b.ev(EventKind::SegmentAlloc, kSeg, 20 * MiB, 100);
  b.drv(DriverMemoryKind::Alloc, 105, MemoryCaller::Cublas, "libcublasLt.so.13", kCublas, 32 * MiB);
  b.ev(EventKind::Alloc, kSeg, 16 * MiB, 110);
  b.drv(DriverMemoryKind::Alloc, 120, MemoryCaller::Other, "libfoo.so", kFoo, 4 * MiB);
  b.drv(DriverMemoryKind::Free, 130, MemoryCaller::Other, "libfoo.so", kFoo, 0);
  b.drv(DriverMemoryKind::Free, 150, MemoryCaller::Nccl, "libnccl.so.2", kNccl, 0);
  b.ev(EventKind::FreeRequested, kSeg, 16 * MiB, 200);
  b.ev(EventKind::FreeCompleted, kSeg, 16 * MiB, 201);
  b.ev(EventKind::Alloc, kSeg, 8 * MiB, 250);
  b.ev(EventKind::FreeRequested, kSeg, 8 * MiB, 260);
  b.ev(EventKind::FreeCompleted, kSeg, 8 * MiB, 261);
  b.sample(10, 500 * MiB, "start");
  b.sample(108, (500 + 20 + 64 + 32 + 10) * MiB);
  b.sample(400, (500 + 20 + 32) * MiB, "exit");
  return b;
}

int64_t mib(int64_t n) { return n * int64_t(MiB); }

// The text with every run of spaces and line breaks as one space: the
// sentences are wrapped at 100 columns, the table's columns padded.
std::string flat(const std::string& text) {
  std::string out;
  for (char c : text) {
    const bool space = c == ' ' || c == '\n';
    if (space && (out.empty() || out.back() == ' ')) continue;
    out += space ? ' ' : c;
  }
  return out;
}

}  // namespace

TEST_CASE("outside the allocator: Alloc/Free pairs by caller, the context as used minus recorded, at the peak and at exit",
          "[analysis]") {
  Builder b = alloc_free_run();
  Analysis a = analyze(b.t, {});
  REQUIRE(a.devices.size() == 1);
  REQUIRE(a.devices[0].peak_event.time_us == at(110));  // the 16 MiB allocation
  REQUIRE(a.outside.size() == 1);
  const OutsideDevice& d = a.outside[0];
  CHECK(d.device == 0);
  CHECK(d.pids == std::vector<uint32_t>{41});
  CHECK(d.snapshot_pid == 41);
  CHECK(d.driver_events == 7);
  CHECK(d.unmatched_frees == 1);
  CHECK(d.samples == 3);
  CHECK(d.peak_time_us == at(110));
  CHECK(d.peak_sample_time_us == at(108));  // the last sample at or before the peak
  CHECK(d.exit_time_us == at(400));
  CHECK(d.exit_from_sample);
  // Rows: PyTorch first, then the libraries, the context last.
  REQUIRE(d.rows.size() == 5);
  CHECK(d.rows[0].caller == MemoryCaller::PyTorch);
  CHECK(d.rows[1].caller == MemoryCaller::Nccl);
  CHECK(d.rows[2].caller == MemoryCaller::Cublas);
  CHECK(d.rows[3].caller == MemoryCaller::Other);
  CHECK(outside_row_name(d.rows[3]) == "libfoo.so");
  const OutsideRow& pt = row(d, MemoryCaller::PyTorch);
  CHECK(pt.at_peak == mib(20));
  CHECK(pt.at_exit == mib(20));
  const OutsideRow& nccl = row(d, MemoryCaller::Nccl);
  CHECK(nccl.at_peak_known);
  CHECK(nccl.at_peak == mib(64));
  CHECK(nccl.at_exit == 0);  // freed at +150
  CHECK(nccl.max_bytes == mib(64));
  CHECK(nccl.max_time_us == at(50));
  const OutsideRow& cublas = row(d, MemoryCaller::Cublas);
  CHECK(cublas.at_peak == mib(32));
  CHECK(cublas.at_exit == mib(32));
  const OutsideRow& foo = row(d, MemoryCaller::Other, 41, "libfoo.so");
  CHECK(foo.at_peak == 0);  // allocated after the peak
  CHECK(foo.at_exit == 0);
  CHECK(foo.max_bytes == mib(4));
  CHECK(foo.max_time_us == at(120));
  // Context and unrecorded: each sample's used bytes minus what was recorded as held then.
  const OutsideRow& ctx = context_row(d);
  CHECK(ctx.at_peak_known);
  CHECK(ctx.at_peak == mib(510));  // the sample at +108: 626 - (20 + 64 + 32)
  CHECK(ctx.at_exit == mib(500));  // 552 - (20 + 32)
  CHECK(ctx.max_bytes == mib(510));
  CHECK(ctx.max_time_us == at(108));
  CHECK(d.outside_at_peak_known);
  CHECK(d.outside_at_peak == mib(64 + 32 + 0 + 510));
  CHECK(d.outside_at_exit == mib(32 + 500));
  // The total device peak is at +120 (libfoo's 4 MiB on top of NCCL and
  // cuBLAS, the context of the sample at +108), not at the allocator's peak.
  REQUIRE(d.device_peak_known);
  CHECK(d.device_peak.time_us == at(120));
  CHECK(d.device_peak.reserved == mib(20));
  CHECK(d.device_peak.outside == mib(64 + 32 + 4 + 510));
  CHECK(d.device_peak.bytes == mib(630));
  CHECK(d.peak_allocated == mib(16));
  CHECK(d.peak_reserved == mib(20));
  // The one sample within the replayed history (+100 to +261) agrees.
  CHECK(d.checked_samples == 1);
  CHECK(d.mismatched_samples == 0);
  CHECK(d.total_bytes == kTotal);
  // Over time: every row at each sample.
  REQUIRE(d.over_time.size() == 3);
  CHECK(d.over_time[1].time_us == at(108));
  CHECK(d.over_time[1].used == mib(626));
  CHECK(outside_sample_bytes(d, 1) == std::vector<int64_t>{mib(20), mib(64), mib(32), 0, mib(510)});
  CHECK(outside_sample_bytes(d, 0) == std::vector<int64_t>{0, 0, 0, 0, mib(500)});
  CHECK(d.over_time[2].label == "exit");
  CHECK(outside_sample_bytes(d, 2) == std::vector<int64_t>{mib(20), 0, mib(32), 0, mib(500)});
  // Each sample keeps only what changed since the one before.
  CHECK(d.over_time[0].changes.size() == 1);
  REQUIRE(d.over_time[2].changes.size() == 2);
  CHECK(d.over_time[2].changes[0].row == 1);
  CHECK(d.over_time[2].changes[0].bytes == 0);
  CHECK(d.over_time[2].changes[1].row == 4);
}

TEST_CASE("outside the allocator: NCCL's create-map-release-unmap, expandable segments' map/unmap, a handle released unmapped",
          "[analysis]") {
  Builder b;
  const uint64_t x = 0x7f4000000000, y = 0x7f5000000000;
  using K = DriverMemoryKind;
  // cuDNN makes physical memory and releases it before any mapping.
  b.drv(K::Create, 5, MemoryCaller::Cudnn, "libcudnn_ops.so.9", 0, 2 * MiB, 3);
  b.drv(K::Release, 6, MemoryCaller::Cudnn, "libcudnn_ops.so.9", 0, 2 * MiB, 3);
  // NCCL: two handles mapped side by side, each released right after mapping.
  b.drv(K::Create, 10, MemoryCaller::Nccl, "libnccl.so.2", 0, 8 * MiB, 1);
  b.drv(K::Map, 11, MemoryCaller::Nccl, "libnccl.so.2", x, 8 * MiB, 1);
  b.drv(K::Release, 12, MemoryCaller::Nccl, "libnccl.so.2", 0, 8 * MiB, 1);
  b.drv(K::Create, 13, MemoryCaller::Nccl, "libnccl.so.2", 0, 8 * MiB, 4);
  b.drv(K::Map, 14, MemoryCaller::Nccl, "libnccl.so.2", x + 8 * MiB, 8 * MiB, 4);
  b.drv(K::Release, 15, MemoryCaller::Nccl, "libnccl.so.2", 0, 8 * MiB, 4);
  // PyTorch's expandable segment keeps its handle while mapped.
  b.drv(K::Create, 20, MemoryCaller::PyTorch, "libc10_cuda.so", 0, 20 * MiB, 2);
  b.drv(K::Map, 21, MemoryCaller::PyTorch, "libc10_cuda.so", y, 20 * MiB, 2);
  b.drv(K::Unmap, 40, MemoryCaller::PyTorch, "libc10_cuda.so", y, 20 * MiB);
  b.drv(K::Release, 41, MemoryCaller::PyTorch, "libc10_cuda.so", 0, 20 * MiB, 2);
  // One unmap gives back both of NCCL's handles.
  b.drv(K::Unmap, 50, MemoryCaller::Nccl, "libnccl.so.2", x, 16 * MiB);

  AllocatorSide side;
  side.device = 0;
  side.times = {at(20), at(30), at(40)};
  side.reserved = {int64_t(20 * MiB), int64_t(20 * MiB), 0};
  side.first_time_us = at(20);
  side.peak_time_us = at(30);
  side.peak_reserved = int64_t(20 * MiB);
  std::vector<OutsideDevice> out = outside_allocator(b.t, {side});
  REQUIRE(out.size() == 1);
  const OutsideDevice& d = out[0];
  CHECK(d.unmatched_frees == 0);
  CHECK(d.rows.size() == 3);  // no samples: no context row
  const OutsideRow& nccl = row(d, MemoryCaller::Nccl);
  CHECK(nccl.at_peak == mib(16));  // released, still mapped
  CHECK(nccl.max_bytes == mib(16));
  CHECK(nccl.max_time_us == at(13));
  CHECK(nccl.at_exit == 0);  // after the unmap at +50, the last driver call
  const OutsideRow& pt = row(d, MemoryCaller::PyTorch);
  CHECK(pt.at_peak == mib(20));
  CHECK(pt.max_bytes == mib(20));
  CHECK(pt.at_exit == 0);
  const OutsideRow& cudnn = row(d, MemoryCaller::Cudnn);
  CHECK(cudnn.at_peak == 0);
  CHECK(cudnn.max_bytes == mib(2));
  CHECK(cudnn.max_time_us == at(5));
  CHECK(d.exit_time_us == at(50));
  CHECK_FALSE(d.exit_from_sample);
  CHECK(d.outside_at_peak == mib(16));
  // The device peak: 20 MiB reserved and NCCL's 16 MiB, from +21 to +39.
  REQUIRE(d.device_peak_known);
  CHECK(d.device_peak.bytes == mib(36));
  CHECK(d.device_peak.time_us == at(20));
}

TEST_CASE("outside the allocator: async pools, an address given out again, an unknown caller, a PyTorch row that disagrees",
          "[analysis]") {
  Builder b;
  using K = DriverMemoryKind;
  b.ev(EventKind::SegmentAlloc, kSeg, 20 * MiB, 100);
  b.ev(EventKind::Alloc, kSeg, 20 * MiB, 110);
  // The driver saw 30 MiB from PyTorch where the snapshot reserved 20.
  b.drv(K::Alloc, 99, MemoryCaller::PyTorch, "libc10_cuda.so", kSeg, 30 * MiB);
  b.drv(K::AllocAsync, 101, MemoryCaller::Other, "libmylib.so", kFoo, 6 * MiB);
  b.drv(K::FreeAsync, 105, MemoryCaller::Other, "libmylib.so", kFoo, 0);
  b.drv(K::AllocAsync, 106, MemoryCaller::Other, "libmylib.so", kFoo, 2 * MiB);
  // The address again without its free: the 2 MiB are no longer held.
  b.drv(K::AllocAsync, 107, MemoryCaller::Other, "libmylib.so", kFoo, 3 * MiB);
  b.drv(K::Alloc, 108, MemoryCaller::Unknown, "", kCublas, 1 * MiB);
  b.sample(104, (500 + 30 + 6) * MiB);
  b.sample(109, (500 + 30 + 3 + 1) * MiB);
  Analysis a = analyze(b.t, {});
  REQUIRE(a.outside.size() == 1);
  const OutsideDevice& d = a.outside[0];
  const OutsideRow& lib = row(d, MemoryCaller::Other, 41, "libmylib.so");
  CHECK(lib.max_bytes == mib(6));
  CHECK(lib.at_peak == mib(3));
  CHECK(lib.at_exit == mib(3));
  const OutsideRow& unk = row(d, MemoryCaller::Unknown);
  CHECK(outside_row_name(unk) == "unknown caller");
  CHECK(unk.at_peak == mib(1));
  // The context counts PyTorch's recorded 30 MiB.
  CHECK(context_row(d).at_peak == mib(500));
  CHECK(context_row(d).at_exit == mib(500));
  // Both samples within the history (+100 to +110) differ by 10 MiB.
  CHECK(d.checked_samples == 2);
  CHECK(d.mismatched_samples == 2);
  CHECK(d.largest_mismatch == mib(10));
  CHECK(d.first_mismatch_time_us == at(104));
  // The device peak while libmylib.so held 6 MiB (the context before the
  // first sample is that sample's); its 3 MiB at the peak are under 5% of
  // it: no warning.
  CHECK(d.device_peak.bytes == mib(20 + 6 + 500));
  CHECK(d.device_peak.time_us == at(101));
  for (const Warning& w : a.warnings) CHECK(w.code != Code::OutsideAllocator);
  const std::string text = flat(render_text(report_view(a), kMaxTextWidth));
  CHECK(text.find("PyTorch's driver calls differ from the allocator's reserved bytes at 2 of the 2 samples taken during "
                  "the replayed history (by up to +10.0 MiB, first at +0.004 s): the figures above use the driver calls.") !=
        std::string::npos);
}

TEST_CASE("outside the allocator: two processes on one device, the snapshot's allocator told by its reserved bytes",
          "[analysis]") {
  Builder b;
  using K = DriverMemoryKind;
  b.ev(EventKind::SegmentAlloc, kSeg, 20 * MiB, 100);
  b.ev(EventKind::Alloc, kSeg, 20 * MiB, 110);
  b.drv(K::Alloc, 90, MemoryCaller::PyTorch, "libc10_cuda.so", kSeg, 20 * MiB, 0, 41);
  // Another process's allocator at the same virtual address (its own address space).
  b.drv(K::Alloc, 91, MemoryCaller::PyTorch, "libc10_cuda.so", kSeg, 100 * MiB, 0, 42);
  b.drv(K::Alloc, 92, MemoryCaller::Nccl, "libnccl.so.2", kNccl, 10 * MiB, 0, 42);
  b.drv(K::Free, 95, MemoryCaller::PyTorch, "libc10_cuda.so", kSeg, 0, 0, 42);  // frees process 42's, not 41's
  b.drv(K::Alloc, 96, MemoryCaller::PyTorch, "libc10_cuda.so", kSeg + 200 * MiB, 100 * MiB, 0, 42);
  b.sample(105, (400 + 20 + 100 + 10) * MiB);
  Analysis a = analyze(b.t, {});
  REQUIRE(a.outside.size() == 1);
  const OutsideDevice& d = a.outside[0];
  CHECK(d.pids == std::vector<uint32_t>{41, 42});
  CHECK(d.snapshot_pid == 41);
  CHECK(row(d, MemoryCaller::PyTorch, 41).at_peak == mib(20));
  CHECK(row(d, MemoryCaller::PyTorch, 42).at_peak == mib(100));
  CHECK(row(d, MemoryCaller::PyTorch, 42).max_bytes == mib(100));
  CHECK(row(d, MemoryCaller::Nccl, 42).at_peak == mib(10));
  CHECK(context_row(d).at_peak == mib(400));
  // Outside the snapshot's allocator: the other process's memory too.
  CHECK(d.outside_at_peak == mib(100 + 10 + 400));
  CHECK(d.device_peak.bytes == mib(530));
  CHECK(d.device_peak.reserved == mib(20));
  CHECK(d.checked_samples == 1);
  CHECK(d.mismatched_samples == 0);
  const std::string text = render_text(report_view(a), kMaxTextWidth);
  CHECK(text.find("  process 41: PyTorch (the allocator's segments)") != std::string::npos);
  CHECK(text.find("  process 42: PyTorch (its segments)") != std::string::npos);
  CHECK(text.find("The snapshot's allocator is that of process 41") != std::string::npos);
  CHECK(text.find("[outside_allocator] device 0: the PyTorch allocator of process 42 holds 100.0 MiB outside the allocator "
                  "at the peak: 19% of the device peak (530.0 MiB)") != std::string::npos);
}

TEST_CASE("outside the allocator: no sample before the peak leaves the context there unknown; no driver calls, no section",
          "[analysis]") {
  Builder b;
  b.ev(EventKind::SegmentAlloc, kSeg, 20 * MiB, 100);
  b.ev(EventKind::Alloc, kSeg, 20 * MiB, 110);
  b.sample(300, 600 * MiB);
  {
    Analysis a = analyze(b.t, {});
    CHECK(a.outside.empty());
    CHECK(a.device_memory.size() == 1);  // the samples' section stays
    const std::string text = render_text(report_view(a), kMaxTextWidth);
    CHECK(text.find("BY CALLER") == std::string::npos);
    CHECK_FALSE(nlohmann::json::parse(render_json(report_view(a))).contains("outside_allocator"));
  }
  b.drv(DriverMemoryKind::Alloc, 90, MemoryCaller::PyTorch, "libc10_cuda.so", kSeg, 20 * MiB);
  b.drv(DriverMemoryKind::Alloc, 95, MemoryCaller::Nccl, "libnccl.so.2", kNccl, 50 * MiB);
  Analysis a = analyze(b.t, {});
  REQUIRE(a.outside.size() == 1);
  const OutsideDevice& d = a.outside[0];
  CHECK_FALSE(context_row(d).at_peak_known);
  CHECK(context_row(d).at_exit == mib(530));
  CHECK_FALSE(d.outside_at_peak_known);
  CHECK(row(d, MemoryCaller::Nccl).at_peak == mib(50));
  // Before the first sample the device peak takes that sample's context.
  CHECK(d.device_peak.bytes == mib(20 + 50 + 530));
  const std::string text = flat(render_text(report_view(a), kMaxTextWidth));
  CHECK(text.find("(no sample was taken at or before it, so context and unrecorded there is not known)") !=
        std::string::npos);
}

TEST_CASE("outside the allocator: the text and JSON sections, and the JSON read back", "[report]") {
  Builder b = alloc_free_run();
  ReportOptions o;
  o.input_name = "run.pickle";
  const Report r = analyze_report(b.t, o);
  const std::string text = render_text(r, kMaxTextWidth);
  INFO(text);
  CHECK(text.find("\nDEVICE MEMORY OUTSIDE THE ALLOCATOR BY CALLER  cuda:0  (from 7 driver calls of 1 process and 3 "
                  "cudaMemGetInfo samples)\n") != std::string::npos);
  // The table: the widest holder's name sets the first column.
  CHECK(text.find("\n  HELD BY" + std::string(34 - 7, ' ') + "  AT THE PEAK      AT EXIT    MOST HELD  WHEN\n") !=
        std::string::npos);
  CHECK(text.find("\n  PyTorch (the allocator's segments)     20.0 MiB     20.0 MiB     20.0 MiB  -0.010 s\n") !=
        std::string::npos);
  const std::string f = flat(text);
  CHECK(f.find(" NCCL 64.0 MiB 0 B 64.0 MiB -0.050 s ") != std::string::npos);
  CHECK(f.find(" cuBLAS 32.0 MiB 32.0 MiB 32.0 MiB +0.005 s ") != std::string::npos);
  CHECK(f.find(" libfoo.so 0 B 0 B 4.0 MiB +0.020 s ") != std::string::npos);
  CHECK(f.find(" context and unrecorded 510.0 MiB 500.0 MiB 510.0 MiB +0.008 s ") != std::string::npos);
  CHECK(f.find(" outside the allocator 606.0 MiB 532.0 MiB ") != std::string::npos);
  CHECK(f.find("AT THE PEAK: the allocator's peak, at +0.010 s (context and unrecorded: the last sample at or before it, "
               "at +0.008 s). AT EXIT: the last sample, at +0.300 s.") != std::string::npos);
  CHECK(f.find("The device peak is 630.0 MiB of its 80.0 GiB, at +0.020 s: 20.0 MiB reserved by the allocator and 610.0 "
               "MiB outside it; PyTorch's own peaks are 16.0 MiB allocated and 20.0 MiB reserved.") != std::string::npos);
  CHECK(f.find("PyTorch's driver calls hold exactly the allocator's reserved bytes at the one sample taken during the "
               "replayed history.") != std::string::npos);
  CHECK(f.find("1 free, release or unmap of memory no recorded call made was left out") != std::string::npos);
  CHECK(text.find("\n  Over time, at each sample (the holders with bytes then):\n"
                  "      -0.090 s  500.0 MiB used (start): context and unrecorded 500.0 MiB\n"
                  "      +0.008 s  626.0 MiB used (interval): PyTorch 20.0 MiB, NCCL 64.0 MiB, cuBLAS 32.0 MiB, context "
                  "and unrecorded 510.0 MiB\n") != std::string::npos);
  // NCCL's 64 MiB at the peak are 10% of the device peak: a warning.
  CHECK(text.find("  [outside_allocator] device 0: NCCL holds 64.0 MiB outside the allocator at the peak: 10% of the device "
                  "peak (630.0 MiB)\n") != std::string::npos);

  const std::string json = render_json(r);
  const auto j = nlohmann::json::parse(json);
  REQUIRE(j.contains("outside_allocator"));
  const auto& d = j["outside_allocator"][0];
  CHECK(d["device"] == 0);
  CHECK(d["snapshot_pid"] == 41);
  CHECK(d["peak_time_us"] == at(110));
  CHECK(d["peak_sample_time_us"] == at(108));
  CHECK(d["outside_at_peak_bytes"] == mib(606));
  CHECK(d["device_peak"]["bytes"] == mib(630));
  CHECK(d["device_peak"]["time_us"] == at(120));
  CHECK(d["rows"][0]["caller"] == "pytorch");
  CHECK(d["rows"][0]["allocator"] == true);
  CHECK(d["rows"][1]["name"] == "NCCL");
  CHECK(d["rows"][1]["at_peak_bytes"] == mib(64));
  CHECK(d["rows"][3]["library"] == "libfoo.so");
  CHECK(d["rows"][4]["caller"] == "context");
  CHECK(d["rows"][4]["pid"].is_null());
  CHECK(d["reserved_check"]["samples"] == 1);
  // A sample lists the rows that changed since the one before (the context row: 500 MiB, then 510).
  CHECK(d["over_time"][1]["changes"] == nlohmann::json::parse("[{\"row\":0,\"bytes\":" + std::to_string(mib(20)) +
                                                              "},{\"row\":1,\"bytes\":" + std::to_string(mib(64)) +
                                                              "},{\"row\":2,\"bytes\":" + std::to_string(mib(32)) +
                                                              "},{\"row\":4,\"bytes\":" + std::to_string(mib(510)) + "}]"));
  // The view read back from its JSON writes the same JSON and text.
  const Report back = read_report_json(json, "report.json");
  CHECK(render_json(back) == json);
  CHECK(render_text(back, kMaxTextWidth) == text);
}

TEST_CASE("outside the allocator: the HTML section, a library's name escaped in HTML and text", "[report]") {
  Builder b = alloc_free_run();
  b.drv(DriverMemoryKind::Alloc, 109, MemoryCaller::Other, "lib<b>\x1b[31m.so", kFoo + 64 * MiB, 1 * MiB);
  const Analysis a = analyze(b.t, {});
  const Report r = report_view(a);
  const std::string html = render_html(r, [&](const ChartOptions& o) { return chart_series(a, b.t, o); });
  CHECK(html.find("<section id=\"outside-0\"><h2>Device memory outside the allocator by caller, cuda:0</h2>") !=
        std::string::npos);
  CHECK(html.find("<tr><td>NCCL</td><td class=\"n\" data-v=\"67108864\">64.0 MiB</td>") != std::string::npos);
  CHECK(html.find("<tr><td>outside the allocator</td><td class=\"n\" data-v=\"" + std::to_string(mib(64 + 32 + 1 + 510)) +
                  "\">607.0 MiB</td>") != std::string::npos);
  CHECK(html.find("lib&lt;b&gt;\\x1b[31m.so") != std::string::npos);
  CHECK(html.find("lib<b>") == std::string::npos);
  const std::string text = render_text(r, kMaxTextWidth);
  CHECK(text.find("  lib<b>\\x1b[31m.so ") != std::string::npos);
  CHECK(text.find('\x1b') == std::string::npos);
}
