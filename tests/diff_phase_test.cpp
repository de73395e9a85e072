// The diff's phase findings (Code::DiffPhase) on two constructed report
// views: a kind of phase whose peak moves beyond the threshold is named
// with the categories that move at its peak; a smaller move is not; the
// kind of the overall peak is left to the peak finding.
#include <catch2/catch.hpp>

#include "snapdiff/analysis/diff.hpp"

using namespace snapdiff;

namespace {

constexpr int64_t kGiB = int64_t(1) << 30;
constexpr int64_t kMiB = int64_t(1) << 20;

// One span: its peak and the bytes of (activation, parameter, optimizer_temporary) at it.
PhaseSpan span(int iteration, Phase phase, int64_t activation, int64_t parameter, int64_t opt_temp) {
  PhaseSpan s;
  s.iteration = iteration;
  s.phase = phase;
  s.peak_requested = activation + parameter + opt_temp;
  s.categories = {activation, parameter, opt_temp};
  return s;
}

// A run of one device whose peak is the largest span's.
Report run(std::vector<PhaseSpan> spans) {
  Report r;
  DeviceView v;
  v.category_names = {"activation", "parameter", "optimizer_temporary"};
  const PhaseSpan* peak = &spans.front();
  for (const PhaseSpan& s : spans)
    if (s.peak_requested > peak->peak_requested) peak = &s;
  v.peak_requested.bytes = peak->peak_requested;
  v.peak_iteration = peak->iteration;
  v.peak_phase = peak->phase;
  v.categories = peak->categories;
  v.phases = std::move(spans);
  r.devices.push_back(std::move(v));
  r.peak_device = 0;
  return r;
}

std::vector<const DiffPhaseFacts*> phase_findings(const Diff& d) {
  std::vector<const DiffPhaseFacts*> out;
  for (const Finding& f : d.findings)
    if (f.code == Code::DiffPhase) out.push_back(&std::get<DiffPhaseFacts>(f.facts));
  return out;
}

}  // namespace

TEST_CASE("diff: a phase whose peak moves beyond the threshold is a finding", "[analysis]") {
  // The peak stays in the backward and grows 2 GiB; the optimizer step's
  // peak falls 6 GiB (temporaries -5 GiB, parameters -1 GiB).
  const Report a = run({span(1, Phase::Forward, 10 * kGiB, 4 * kGiB, 0), span(1, Phase::Backward, 20 * kGiB, 4 * kGiB, 0),
                        span(1, Phase::Optimizer, 2 * kGiB, 4 * kGiB, 8 * kGiB)});
  const Report b = run({span(1, Phase::Forward, 10 * kGiB, 3 * kGiB, 0), span(1, Phase::Backward, 23 * kGiB, 3 * kGiB, 0),
                        span(1, Phase::Optimizer, 2 * kGiB, 3 * kGiB, 3 * kGiB)});
  const Diff d = diff_views(a, b, DiffOptions{});
  REQUIRE(!d.findings.empty());
  CHECK(d.findings.front().code == Code::DiffPeak);
  const auto moved = phase_findings(d);
  // Optimizer -6 GiB and forward -1 GiB (over 5% of 14 GiB); the backward
  // is the peak's phase: the peak finding says it.
  REQUIRE(moved.size() == 2);
  CHECK(moved[0]->phase == Phase::Optimizer);
  CHECK(moved[0]->iteration == 1);
  CHECK(moved[0]->a == 14 * kGiB);
  CHECK(moved[0]->b == 8 * kGiB);
  REQUIRE(moved[0]->categories.size() == 2);
  CHECK(moved[0]->categories[0].name == "optimizer_temporary");
  CHECK(moved[0]->categories[0].b - moved[0]->categories[0].a == -5 * kGiB);
  CHECK(moved[0]->categories[1].name == "parameter");
  CHECK(moved[1]->phase == Phase::Forward);
  for (const DiffPhaseFacts* f : moved) CHECK(f->phase != Phase::Backward);
}

TEST_CASE("diff: a phase that moves less than the threshold is no finding", "[analysis]") {
  // The optimizer's peak moves 60 MiB: under 64 MiB. The forward's 400 MiB
  // of 10 GiB: under 5%.
  const Report a = run({span(1, Phase::Forward, 10 * kGiB, 0, 0), span(1, Phase::Backward, 20 * kGiB, 0, 0),
                        span(1, Phase::Optimizer, 0, kGiB, kGiB)});
  const Report b = run({span(1, Phase::Forward, 10 * kGiB - 400 * kMiB, 0, 0), span(1, Phase::Backward, 21 * kGiB, 0, 0),
                        span(1, Phase::Optimizer, 0, kGiB, kGiB - 60 * kMiB)});
  const Diff d = diff_views(a, b, DiffOptions{});
  CHECK(phase_findings(d).empty());
  // The same run against itself: nothing moves.
  CHECK(diff_views(a, a, DiffOptions{}).findings.empty());
}

TEST_CASE("diff: each kind of phase is named once, by its largest move, at most three", "[analysis]") {
  std::vector<PhaseSpan> sa, sb;
  for (int it = 1; it <= 2; ++it) {
    sa.push_back(span(it, Phase::Other, kGiB, 0, 0));
    sb.push_back(span(it, Phase::Other, 2 * kGiB, 0, 0));
    sa.push_back(span(it, Phase::Forward, 10 * kGiB, 0, 0));
    sb.push_back(span(it, Phase::Forward, (it == 2 ? 14 : 12) * kGiB, 0, 0));
    sa.push_back(span(it, Phase::Backward, 30 * kGiB, 0, 0));
    sb.push_back(span(it, Phase::Backward, 30 * kGiB, 0, 0));
    sa.push_back(span(it, Phase::Optimizer, 0, 0, 5 * kGiB));
    sb.push_back(span(it, Phase::Optimizer, 0, 0, 8 * kGiB));
  }
  sa.insert(sa.begin(), span(0, Phase::Init, kGiB, 0, 0));
  sb.insert(sb.begin(), span(0, Phase::Init, 3 * kGiB, 0, 0));
  const Diff d = diff_views(run(sa), run(sb), DiffOptions{});
  const auto moved = phase_findings(d);
  REQUIRE(moved.size() == kPhaseFindings);
  CHECK(moved[0]->phase == Phase::Forward);
  CHECK(moved[0]->iteration == 2);
  CHECK(moved[0]->b - moved[0]->a == 4 * kGiB);
  CHECK(moved[1]->phase == Phase::Optimizer);
  CHECK(moved[2]->phase == Phase::Init);  // +2 GiB against other's +1 GiB
}
