// snapcapture's recordings from the H200 (sample_snapshots/*.snap and
// tests/data/capture/): snapdiff's replay against the allocator's own
// counters, which snapcapture wrote beside each file (*.summary.json: the
// peaks and the byte totals of parameters, gradients and optimizer state
// that the workload held), and the pickle against the .snap.
#include <catch2/catch.hpp>

#include "snapdiff/analysis/diff.hpp"
#include "snapdiff/input/input.hpp"
#include "snapdiff/analysis/analysis.hpp"
#include "snapdiff/report/report.hpp"
#include "test_util.hpp"

using namespace snapdiff;

namespace {

std::string src(const std::string& rel) { return std::string(SNAPDIFF_SOURCE_DIR) + "/" + rel; }

int64_t category(const DeviceAnalysis& d, const std::string& name) {
  for (size_t i = 0; i < d.attr.categories.size(); ++i)
    if (d.attr.categories[i] == name) return d.categories[i];
  return 0;
}

int64_t span_category(const DeviceAnalysis& d, const PhaseSpan& s, const std::string& name) {
  for (size_t i = 0; i < d.attr.categories.size(); ++i)
    if (d.attr.categories[i] == name) return s.categories[i];
  return 0;
}

const char* kRuns[] = {"sample_snapshots/bf16",           "sample_snapshots/fp8_no_pw",
                       "sample_snapshots/fp8_pw",         "tests/data/capture/small_bf16",
                       "tests/data/capture/small_fp8",    "tests/data/capture/small_fp8_pw",
                       "tests/data/capture/bf16_loop",    "tests/data/capture/small_oom_fp8"};

}  // namespace

TEST_CASE("snapcapture recordings replay exactly to the allocator's own peaks", "[capture]") {
  for (const char* run : kRuns) {
    INFO(run);
    auto sum = nlohmann::json::parse(test::read_file(src(std::string(run) + ".summary.json")));
    Trace t = load_trace(src(std::string(run) + ".snap"));
    Analysis r = analyze(t, {});
    REQUIRE(r.devices.size() == 1);
    const DeviceAnalysis& d = r.devices[0];
    CHECK(d.replay.peak_requested.bytes == sum["peak_requested"].get<int64_t>());
    CHECK(d.replay.peak_allocated.bytes == sum["peak_allocated"].get<int64_t>());
    CHECK(d.replay.peak_reserved.bytes == sum["peak_reserved"].get<int64_t>());
    CHECK(t.kernels.size() == sum["kernel_launches"].get<uint64_t>());
    CHECK(!r.device_memory.empty());
    // The CUDA context and cuBLASLt handle live outside the allocator.
    CHECK(r.outside_min_bytes > 0);
    bool oom_event = false;
    for (const Event& e : t.devices[0].events) oom_event |= e.kind == EventKind::Oom;
    CHECK(oom_event == sum["oom"].get<bool>());
  }
}

TEST_CASE("snapcapture runs: parameters, gradients and optimizer state at the peak are the workload's exact bytes",
          "[capture][attribution]") {
  for (const char* run : kRuns) {
    auto sum = nlohmann::json::parse(test::read_file(src(std::string(run) + ".summary.json")));
    if (sum["oom"].get<bool>()) continue;  // the run died before a full iteration
    INFO(run);
    Trace t = load_trace(src(std::string(run) + ".snap"));
    Analysis r = analyze(t, {});
    const DeviceAnalysis& d = r.devices[0];
    // Every peak here is in iteration 2 or later, so .grad exists (never zeroed).
    CHECK(d.peak_iteration >= 2);
    CHECK(category(d, "parameter") == sum["classes"]["param_bytes"].get<int64_t>());
    CHECK(category(d, "gradient") == sum["classes"]["grad_bytes"].get<int64_t>());
    CHECK(category(d, "optimizer_state") == sum["classes"]["optimizer_state_bytes"].get<int64_t>());
    CHECK(category(d, "unknown") == 0);
  }
}

TEST_CASE("snapcapture: the foreach step holds one bf16 copy of the gradients, the loop does not",
          "[capture][attribution]") {
  struct Case {
    const char* run;
    bool foreach_step;
  };
  for (Case c : {Case{"sample_snapshots/bf16", true}, Case{"sample_snapshots/fp8_no_pw", true},
                 Case{"sample_snapshots/fp8_pw", false}, Case{"tests/data/capture/bf16_loop", false}}) {
    INFO(c.run);
    auto sum = nlohmann::json::parse(test::read_file(src(std::string(c.run) + ".summary.json")));
    const double grads = double(sum["classes"]["grad_bytes"].get<int64_t>());
    Trace t = load_trace(src(std::string(c.run) + ".snap"));
    Analysis r = analyze(t, {});
    const DeviceAnalysis& d = r.devices[0];
    int steps = 0;
    for (const PhaseSpan& s : d.attr.spans) {
      if (s.phase != Phase::Optimizer) continue;
      ++steps;
      double temp = double(span_category(d, s, "optimizer_temporary"));
      INFO("iteration " << s.iteration << ": optimizer_temporary " << temp << " of " << grads);
      if (c.foreach_step) CHECK(temp >= 0.99 * grads);
      else CHECK(temp <= 0.05 * grads);
    }
    CHECK(steps == 3);
  }
}

TEST_CASE("snapcapture's PyTorch-compatible pickle reads like its .snap", "[capture]") {
  Trace a = load_trace(src("tests/data/capture/small_fp8.snap"));
  Trace b = load_trace(src("tests/data/capture/small_fp8.pickle"));
  REQUIRE(b.source.format == "torch-pickle");
  REQUIRE(a.devices.size() == 1);
  REQUIRE(b.devices.size() == 1);
  CHECK(a.devices[0].events.size() == b.devices[0].events.size());
  Analysis ra = analyze(a, {}), rb = analyze(b, {});
  const DeviceAnalysis &da = ra.devices[0], &db = rb.devices[0];
  CHECK(da.replay.peak_requested.bytes == db.replay.peak_requested.bytes);
  CHECK(da.replay.peak_allocated.bytes == db.replay.peak_allocated.bytes);
  CHECK(da.replay.peak_reserved.bytes == db.replay.peak_reserved.bytes);
  CHECK(da.peak_index == db.peak_index);
  REQUIRE(da.attr.categories == db.attr.categories);
  CHECK(da.categories == db.categories);
}

TEST_CASE("diff of the full-size runs names the FP8 transposes, the dropped bf16 activations and the foreach step",
          "[capture][diff]") {
  auto load = [](const char* run) { return load_trace(src(std::string("sample_snapshots/") + run + ".snap")); };
  Trace bf16 = load("bf16"), fp8 = load("fp8_no_pw"), pw = load("fp8_pw");
  Analysis rb = analyze(bf16, {}), rf = analyze(fp8, {}), rp = analyze(pw, {});
  auto text = [](const Diff& d) {
    std::string all;
    for (const Finding& f : d.findings) all += std::string(code_name(f.code)) + ": " + finding_text(f) + "\n";
    return all;
  };
  // bf16 -> fp8: the FP8 weight transposes kept for the backward are
  // parameter copies (one group per operation, summed over all 32 layers and
  // four linears); activations change by the FP8 inputs kept, offset by the
  // bf16 activations no longer saved.
  std::string a = text(diff_reports(rb, rf, {}));
  INFO(a);
  CHECK(a.find("category: parameter_copy +4.9 GiB at the peak (0 B in A, 4.9 GiB in B); mostly +4.9 GiB at "
               "transpose_weight_fp8 (4 call paths) [NEW]") != std::string::npos);
  CHECK(a.find("-2.9 GiB at gelu [GONE]") != std::string::npos);
  CHECK(a.find("offset by +2.9 GiB at cast_input_fp8 (4 call paths) [NEW]") != std::string::npos);
  // fp8 -> fp8_pw: half the parameter bytes, and no foreach transient.
  Diff d = diff_reports(rf, rp, {});
  std::string b = text(d);
  INFO(b);
  CHECK(b.find("half the bytes per element") != std::string::npos);
  bool transient = false;
  for (const Finding& f : d.findings)
    if (f.code == Code::DiffOptimizerTransient) transient = f.bytes < -int64_t(9) * (int64_t(1) << 30);
  CHECK(transient);
}
