// Real runs recorded on an H200 under libsnapcapture_inject.so, each with
// PyTorch's snapshot and truth from the same process
// (tests/data/real/capture/README.md, scripts/record/record_capture.py):
// the join, the kernel of each allocation live at the peak, the kernel names
// against torch.profiler's, and the memory outside the allocator against
// torch.cuda.mem_get_info() and memory_reserved().
#include <catch2/catch.hpp>

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "snapdiff/analysis/analysis.hpp"
#include "snapdiff/analysis/kernel_join.hpp"
#include "snapdiff/error.hpp"
#include "snapdiff/input/input.hpp"
#include "test_util.hpp"

using namespace snapdiff;

namespace {

struct Recorded {
  std::string stem;      // path without the suffixes
  std::string snapshot;  // STEM.pickle.gz
  std::string kernels;   // STEM.kernels.snap
  nlohmann::json truth;
};

// Every STEM.kernels.snap with STEM.pickle.gz and STEM.truth.json beside it,
// in tests/data/real/capture/ and sample_snapshots/: a recording added there
// is checked with no change here.
std::vector<Recorded> recordings() {
  std::vector<Recorded> out;
  const std::string suffix = ".kernels.snap";
  for (const char* sub : {"tests/data/real/capture", "sample_snapshots"}) {
    const std::filesystem::path dir = std::filesystem::path(SNAPDIFF_SOURCE_DIR) / sub;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      const std::string name = e.path().string();
      if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
      const std::string stem = name.substr(0, name.size() - suffix.size());
      if (!std::filesystem::exists(stem + ".pickle.gz") || !std::filesystem::exists(stem + ".truth.json")) continue;
      out.push_back({stem, stem + ".pickle.gz", name, nlohmann::json::parse(test::read_file(stem + ".truth.json"))});
    }
  }
  std::sort(out.begin(), out.end(), [](const Recorded& a, const Recorded& b) { return a.stem < b.stem; });
  return out;
}

struct JoinedRun {
  Trace trace;
  KernelJoin join;
  Report report;
};

JoinedRun joined(const Recorded& r) {
  const Trace rec = load_trace(r.kernels);
  Joined<KernelJoin> k = join_kernel_recording(load_trace(r.snapshot), rec, r.kernels, r.snapshot);
  JoinedRun j;
  j.trace = std::move(k.trace);
  j.join = k.join;  // the checks read it here; the analysis gets it moved
  j.report = report_view(analyze(j.trace, ReportOptions{}, {{}, std::move(k.join)}));
  return j;
}

}  // namespace

TEST_CASE("real kernel recordings: every segment the snapshot saw made tied to a cudaMalloc, 99% of the live bytes at the peak get a kernel",
          "[analysis]") {
  const std::vector<Recorded> all = recordings();
  REQUIRE(all.size() >= 4);
  for (const Recorded& r : all) {
    INFO(r.stem);
    const JoinedRun j = joined(r);
    REQUIRE(j.join.joined());
    CHECK(j.join.pid == r.truth["pid"].get<uint32_t>());  // the process that wrote the truth
    CHECK(j.join.segment_events > 0);
    CHECK(j.join.matched_segments == j.join.segment_events);
    CHECK(j.join.offset_measured);
    CHECK(std::abs(j.join.offset_us) < 5000);  // PyTorch's TSC-converted clock against CLOCK_REALTIME
    REQUIRE(j.report.devices.size() == 1);
    const DeviceView& v = j.report.devices[0];
    REQUIRE(v.kernel_coverage.present);
    CHECK(v.kernel_coverage.allocations == v.peak_live_allocations);
    CHECK(v.kernel_coverage.with_kernel * 100 >= v.kernel_coverage.allocations * 99);
    CHECK(v.kernel_coverage.bytes_with_kernel * 100 >= v.kernel_coverage.bytes * 99);
    CHECK_FALSE(v.by_kernel.empty());
  }
}

TEST_CASE("real kernel recordings: outside the allocator at exit is mem_get_info's used bytes minus memory_reserved",
          "[analysis]") {
  for (const Recorded& r : recordings()) {
    INFO(r.stem);
    const JoinedRun j = joined(r);
    REQUIRE(j.report.outside.size() == 1);
    const OutsideDevice& o = j.report.outside[0];
    const nlohmann::json& ex = r.truth["at_exit"];
    const int64_t truth_outside = ex["outside_allocator"].get<int64_t>();
    CHECK(o.exit_from_sample);
    CHECK(std::abs(o.outside_at_exit - truth_outside) * 100 <= truth_outside);  // within 1%
    CHECK(o.total_bytes == ex["total"].get<uint64_t>());
    // PyTorch's own driver calls hold memory_reserved() at exit, to the byte,
    // and the replay's reserved bytes at every sample inside the history.
    int64_t pytorch_at_exit = -1;
    for (const OutsideRow& row : o.rows)
      if (!row.context && row.caller == MemoryCaller::PyTorch && row.pid == o.snapshot_pid) pytorch_at_exit = row.at_exit;
    CHECK(pytorch_at_exit == ex["reserved"].get<int64_t>());
    CHECK(o.checked_samples > 0);
    CHECK(o.mismatched_samples == 0);
    // The device's peak is at least PyTorch's reserved peak plus the context.
    REQUIRE(o.device_peak_known);
    CHECK(o.device_peak.bytes >= r.truth["memory_stats"]["reserved_bytes.all.peak"].get<int64_t>());
  }
}

TEST_CASE("real kernel recordings: the kernel names are the ones torch.profiler reports for the same workload",
          "[input]") {
  size_t seen = 0;
  for (const Recorded& r : recordings()) {
    const std::string prof = r.stem + ".profiler_kernels.json";
    if (!std::filesystem::exists(prof)) continue;
    INFO(r.stem);
    ++seen;
    std::set<std::string> ours, theirs;
    const Trace rec = load_trace(r.kernels);
    for (const KernelLaunch& k : rec.kernels)
      if (!k.graph) ours.insert(std::string(rec.strings.get(k.name)));
    const nlohmann::json pj = nlohmann::json::parse(test::read_file(prof));
    for (const auto& kv : pj["kernels"].items()) theirs.insert(kv.key());
    std::vector<std::string> only_ours, only_theirs;
    std::set_difference(ours.begin(), ours.end(), theirs.begin(), theirs.end(), std::back_inserter(only_ours));
    std::set_difference(theirs.begin(), theirs.end(), ours.begin(), ours.end(), std::back_inserter(only_theirs));
    CAPTURE(only_ours, only_theirs);
    CHECK(only_ours.empty());
    CHECK(only_theirs.empty());
    CHECK(ours.size() > 20);
  }
  CHECK(seen >= 3);
}

TEST_CASE("real kernel recordings: a recording of another run is refused, naming both files", "[analysis]") {
  const std::vector<Recorded> all = recordings();
  REQUIRE(all.size() >= 2);
  for (size_t i = 0; i < all.size(); ++i) {
    const Recorded& snap = all[i];
    const Recorded& other = all[(i + 1) % all.size()];
    INFO(snap.stem << " with " << other.kernels);
    const Trace rec = load_trace(other.kernels);
    try {
      join_kernel_recording(load_trace(snap.snapshot), rec, other.kernels, snap.snapshot);
      FAIL("joined a recording of another run");
    } catch (const InputError& e) {
      const std::string msg = e.what();
      CAPTURE(msg);
      CHECK(e.file() == other.kernels);  // the CLI prints "FILE: message"
      CHECK(msg.find("not recorded at the same time") != std::string::npos);
      CHECK(msg.find(snap.snapshot) != std::string::npos);
    }
  }
}

TEST_CASE("the injection library's checks on the H200: os._exit, threads, fork and a profiler", "[input]") {
  const std::string dir = std::string(SNAPDIFF_SOURCE_DIR) + "/tests/data/real/capture/checks/";
  auto meta = [](const Trace& t, const std::string& suffix) {
    for (const auto& kv : t.metadata)
      if (kv.first.size() >= suffix.size() && kv.first.compare(kv.first.size() - suffix.size(), suffix.size(), suffix) == 0)
        return kv.second;
    return std::string();
  };
  {
    // os._exit(3) right after a matrix product: no exit handler ran, and the
    // log still holds the launches (the shared mapping).
    const Trace t = load_trace(dir + "os_exit.kernels.snap");
    CHECK(t.kernels.size() >= 3);
    CHECK(meta(t, ".command").find("os_exit") != std::string::npos);
  }
  {
    // Four Python threads, each on a stream of its own, 200 steps of two
    // kernels each, and its random start: every launch kept.
    const Trace t = load_trace(dir + "threads.kernels.snap");
    std::map<uint64_t, size_t> by_stream;
    std::set<uint32_t> threads;
    for (const KernelLaunch& k : t.kernels) {
      ++by_stream[k.stream];
      threads.insert(k.thread);
    }
    size_t streams_of_801 = 0;
    for (const auto& kv : by_stream) streams_of_801 += kv.first != 0 && kv.second == 801;
    CHECK(streams_of_801 == 4);
    CHECK(threads.size() >= 4);
  }
  {
    // fork(): the children (a plain one and two DataLoader workers) never
    // touched CUDA, and wrote no log; the parent's log is whole.
    const Trace t = load_trace(dir + "fork.kernels.snap");
    CHECK(meta(t, "processes").find(',') == std::string::npos);
    CHECK_FALSE(t.kernels.empty());
  }
  {
    // torch.profiler inside a recorded run: the library stepped aside (and
    // the profiler saw its 30 kernels: checks.summary.json).
    const Trace t = load_trace(dir + "profiler.kernels.snap");
    CHECK(meta(t, ".notes").find("a profiler subscribed to CUPTI") != std::string::npos);
  }
}
