// snapdiff/analysis/check.hpp — `snapdiff check`, the CI gate on GPU peak memory.
//
// Thresholds on a candidate run's peak (docs/cli.md, docs/ci.md):
//   * increase over a baseline (a snapshot or a budget file), as a share
//     ("2%") or bytes ("512MiB"), with an optional warning level below it;
//   * an absolute peak ("60GiB"), no baseline needed;
//   * a limit per category on its largest bytes over the run
//     ("optimizer_temporary=1GiB") or within one phase kind's spans
//     ("optimizer:optimizer_temporary=1GiB");
//   * a complete history: a wrapped history cannot establish the peak.
// evaluate_check() is pure data in, data out; the renderers (text, JSON,
// JUnit XML, GitHub annotations) live in src/report/check_report.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "snapdiff/analysis/analysis.hpp"
#include "snapdiff/model/budget.hpp"

namespace snapdiff {

PeakFigures peak_figures(const Analysis& r);

// Adds `l` to `limits`, replacing a limit on the same category and phase in
// place.
void add_limit(std::vector<CategoryLimit>& limits, const CategoryLimit& l);
// Throws UsageError ("--limit: unknown category 'X' (a, b, ...)") when a
// limit names a category not among `categories` (a RuleSet's), or a phase
// not among limit_phase_names() ("--limit: unknown phase 'X' (init, ...)").
void check_limit_categories(const std::vector<CategoryLimit>& limits, const std::vector<std::string>& categories);

// What a check is asked for (the command line): each threshold optional.
struct CheckRequest {
  std::optional<Metric> metric;
  std::optional<Amount> max_increase, warn_increase;
  std::optional<int64_t> max_peak;
  std::string max_peak_text;
  std::vector<CategoryLimit> limits;  // one per category and phase (add_limit)
  // --allow-truncated: any truncated history (a wrapped ring buffer, a cut
  // the file cannot tell) is checked, its peak the recorded window's (a warning).
  bool allow_truncated = false;
  // A history that started after memory was in use (not one whose ring
  // buffer wrapped) passes: its peak is the window's, counting what was held
  // at its start. The default (--allow-late-start is its old spelling).
  bool allow_late_start = true;
  std::optional<int64_t> max_growth;  // --max-growth: allocated bytes per iteration
  std::string max_growth_text;
};

// The budget `--write-budget` writes from `run`: its figures, the metric
// (default allocated), the tolerances (max_increase default 2%), the
// absolute peak and the limits requested. Throws UsageError when the
// warning level is above the failure level at the run's peak.
Budget budget_from_run(const PeakFigures& run, const CheckRequest& req);

struct CheckOptions {
  Metric metric = Metric::Allocated;
  std::optional<Amount> max_increase, warn_increase;
  std::optional<int64_t> max_peak;
  std::string max_peak_text;
  std::vector<CategoryLimit> limits;
  bool allow_truncated = false;
  bool allow_late_start = true;  // as CheckRequest's
  std::optional<int64_t> max_growth;  // --max-growth (not kept in budget files)
  std::string max_growth_text;
};

// The options of a check without a budget: the request's (metric default
// allocated).
CheckOptions check_options(const CheckRequest& req);
// The options of a check against `budget` (read from `budget_file`): the
// budget's thresholds, each overridden by the request's; limits merge by
// category. Throws InputError ($.limits.categories of `budget_file`) when
// a budget limit names a category not among `categories`, UsageError when
// a warning level requested alone is above the budget's max_increase.
CheckOptions check_options(const CheckRequest& req, const Budget& budget, const std::string& budget_file,
                           const std::vector<std::string>& categories);

enum class CheckStatus : uint8_t { Pass, Warn, Fail };
const char* status_name(CheckStatus s);  // "pass", "warn", "fail"

struct CheckItem {
  // "increase.allocated", "max_peak.allocated", "limit.optimizer_temporary",
  // "limit.optimizer:optimizer_temporary", "history"
  std::string name;
  std::string kind;  // "increase", "max_peak", "category_limit", "history"
  std::string limit_text;      // as written: "2%", "60GiB"
  int64_t limit_bytes = 0;     // increase: allowed increase; others: the ceiling
  int64_t measured_bytes = 0;  // increase: candidate - baseline; others: the candidate's bytes
  int64_t margin_bytes = 0;    // limit - measured (negative: over)
  int64_t baseline_bytes = 0;  // increase: the baseline's peak
  int64_t warn_bytes = -1;     // increase with --warn-increase: the warning level; -1 none
  std::string warn_text;
  CheckStatus status = CheckStatus::Pass;
  std::string message;  // history items: why; a phase limit the run cannot measure: why
  // Category limits: the category, the phase kind ("" the whole run) and
  // where the measured bytes are first reached.
  std::string category, phase;
  bool has_at = false;
  ExtentPoint at;
};

// What a verdict points at: a category at the candidate's peak, its change
// against the baseline's peak (when the baseline has categories), and its
// largest site live at the peak (PeakFigures::sites; none when it is not
// among them).
struct CheckFinding {
  std::string category;
  int64_t bytes = 0;              // requested bytes at the candidate's peak
  std::optional<int64_t> change;  // against the baseline's peak
  std::optional<PeakSite> site;
};

struct CheckResult {
  CheckStatus status = CheckStatus::Pass;
  Metric metric = Metric::Allocated;
  PeakFigures candidate;
  std::string baseline_kind;  // "snapshot", "budget", "" (none)
  std::optional<PeakFigures> baseline;
  std::vector<CheckItem> items;
  // At most three: the categories of failed limits first, then those that
  // rose most against the baseline (without one: the largest at the peak).
  std::vector<CheckFinding> findings;
  size_t count(CheckStatus s) const;
};

// Evaluates every threshold of `opts` against the candidate (and the
// baseline, for increases). Throws UsageError for thresholds that cannot be
// evaluated (an increase without a baseline, a category the run does not
// have, a warning level above the failure level).
CheckResult evaluate_check(const PeakFigures& candidate, const std::optional<PeakFigures>& baseline,
                           const std::string& baseline_kind, const CheckOptions& opts);


}  // namespace snapdiff
