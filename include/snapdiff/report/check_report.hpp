// snapdiff/report/check_report.hpp — the renderers of `snapdiff check`'s verdict
// (report layer; the verdict itself: snapdiff/analysis/check.hpp).
#pragma once

#include <string>

#include "snapdiff/report/report.hpp"  // kDefaultTextWidth
#include "snapdiff/analysis/check.hpp"
#include "snapdiff/analysis/ranks_check.hpp"

namespace snapdiff {

constexpr const char* kCheckSchema = "snapdiff/check/1";
std::string render_check_text(const CheckResult& r, size_t width = kDefaultTextWidth);
std::string render_check_json(const CheckResult& r);
std::string render_check_junit(const CheckResult& r);
// GitHub Actions workflow commands: one ::error:: / ::warning:: line per
// failed / warned threshold.
std::string render_check_github(const CheckResult& r);
std::string xml_escape(const std::string& s);
// One line: the thresholds that failed (else warned) in a few words, then
// the first finding ("allocated peak 411.3 MiB > 100.0 MiB: activation
// 157.1 MiB at the peak; its largest site holds 64.0 MiB: train
// (model.py:88) [in forward (activations.py:66)]"); the JSON verdict's
// "headline".
std::string render_check_headline(const CheckResult& r);
// github-action-benchmark's customSmallerIsBetter input: a JSON array of
// {name, unit, value, range, extra}, one entry per figure the check
// measured (the metric's peak, the reserved peak, each limited category's
// largest bytes, the growth per iteration), each name starting with `name`.
// `range` holds the threshold the figure was checked against, when any.
std::string render_check_github_benchmark(const CheckResult& r, const std::string& name);

// Many ranks: the verdict naming the ranks that fail, then each failing
// rank's verdict; JSON ("snapdiff/check_ranks/1", each rank's snapdiff/check/1
// object inside); JUnit with a testsuite per rank and a testcase per rank and
// threshold (an unreadable rank is one failing testcase); GitHub annotations.
constexpr const char* kRanksCheckSchema = "snapdiff/check_ranks/1";
std::string render_ranks_check_text(const RanksCheck& c, size_t width = kDefaultTextWidth);
std::string render_ranks_check_json(const RanksCheck& c);
std::string render_ranks_check_junit(const RanksCheck& c);
std::string render_ranks_check_github(const RanksCheck& c);
// The same per checked rank, each name "NAME rank R: ...".
std::string render_ranks_check_github_benchmark(const RanksCheck& c, const std::string& name);

}  // namespace snapdiff
