// snapdiff/check.hpp — `snapdiff check`, the CI gate on GPU peak memory.
//
// Thresholds on a candidate run's peak (docs/cli.md, docs/ci.md):
//   * increase over a baseline (a snapshot or a budget file), as a share
//     ("2%") or bytes ("512MiB"), with an optional warning level below it;
//   * an absolute peak ("60GiB"), no baseline needed;
//   * a limit per category at the peak ("optimizer_temporary=1GiB");
//   * a complete history: a wrapped history cannot establish the peak.
// evaluate_check() is pure data in, data out; the renderers (text, JSON,
// JUnit XML, GitHub annotations) live in src/report/check_report.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "snapdiff/report.hpp"

namespace snapdiff {

enum class Metric : uint8_t { Requested, Allocated, Reserved };
const char* metric_name(Metric m);  // "requested", "allocated", "reserved"
// Throws UsageError on anything else.
Metric parse_metric(const std::string& text);

// A size: "512MiB", "60GiB", "1.5GB" (decimal units: kB/KB, MB, GB, TB),
// "4096" or "4096B"; an optional space before the unit; units are
// case-insensitive. Returns nullopt when the text is not a size.
std::optional<int64_t> parse_size(const std::string& text);

// A tolerance: a share of the baseline ("2%", "0.5%") or a size.
struct Amount {
  bool percent = false;
  double pct = 0;     // when percent
  int64_t bytes = 0;  // otherwise
  std::string text;   // as written (normalized: "2%", "512MiB")
  // The allowed bytes on top of `base` (percent: floor(base * pct / 100)).
  int64_t bytes_of(int64_t base) const;
};
std::optional<Amount> parse_amount(const std::string& text);

// The figures a check needs from one run: the device with the highest
// allocated peak (Analysis::peak_device).
struct PeakFigures {
  std::string name;  // the file as given
  int device = 0;
  int64_t requested = 0, allocated = 0, reserved = 0;
  std::vector<std::pair<std::string, int64_t>> categories;  // requested bytes at the peak
  std::string history = "complete";  // "complete", "truncated", "none"
  std::string phase;                 // phase of the (requested) peak
  int iteration = 0;
  uint64_t events = 0;
  std::string format;  // container format ("torch-pickle", "snap")
  int64_t peak(Metric m) const;
  // -1 when the category is absent.
  int64_t category(const std::string& name) const;
};
PeakFigures peak_figures(const Analysis& r);

struct CategoryLimit {
  std::string category;
  int64_t bytes = 0;
  std::string text;  // as written
};

// Adds `l` to `limits`, replacing a limit on the same category in place.
void add_limit(std::vector<CategoryLimit>& limits, const CategoryLimit& l);
// Throws UsageError ("--limit: unknown category 'X' (a, b, ...)") when a
// limit names a category not among `categories` (a RuleSet's).
void check_limit_categories(const std::vector<CategoryLimit>& limits, const std::vector<std::string>& categories);

// A committed budget file (schemas/budget.schema.json; read and written by
// snapdiff/budget_io.hpp).
struct Budget {
  Metric metric = Metric::Allocated;
  PeakFigures peak;  // peaks, categories and source facts of the run it was written from
  std::optional<Amount> max_increase, warn_increase;
  std::optional<int64_t> max_peak;
  std::string max_peak_text;
  std::vector<CategoryLimit> limits;
  std::string snapdiff_version;  // of the writer
};

// What a check is asked for (the command line): each threshold optional.
struct CheckRequest {
  std::optional<Metric> metric;
  std::optional<Amount> max_increase, warn_increase;
  std::optional<int64_t> max_peak;
  std::string max_peak_text;
  std::vector<CategoryLimit> limits;  // one per category (add_limit)
  bool allow_truncated = false;
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
  std::string name;  // "increase.allocated", "max_peak.allocated", "limit.optimizer_temporary", "history"
  std::string kind;  // "increase", "max_peak", "category_limit", "history"
  std::string limit_text;      // as written: "2%", "60GiB"
  int64_t limit_bytes = 0;     // increase: allowed increase; others: the ceiling
  int64_t measured_bytes = 0;  // increase: candidate - baseline; others: the candidate's bytes
  int64_t margin_bytes = 0;    // limit - measured (negative: over)
  int64_t baseline_bytes = 0;  // increase: the baseline's peak
  int64_t warn_bytes = -1;     // increase with --warn-increase: the warning level; -1 none
  std::string warn_text;
  CheckStatus status = CheckStatus::Pass;
  std::string message;  // history items: why
};

struct CheckResult {
  CheckStatus status = CheckStatus::Pass;
  Metric metric = Metric::Allocated;
  PeakFigures candidate;
  std::string baseline_kind;  // "snapshot", "budget", "" (none)
  std::optional<PeakFigures> baseline;
  std::vector<CheckItem> items;
  size_t count(CheckStatus s) const;
};

// Evaluates every threshold of `opts` against the candidate (and the
// baseline, for increases). Throws UsageError for thresholds that cannot be
// evaluated (an increase without a baseline, a category the run does not
// have, a warning level above the failure level).
CheckResult evaluate_check(const PeakFigures& candidate, const std::optional<PeakFigures>& baseline,
                           const std::string& baseline_kind, const CheckOptions& opts);

// Renderers (src/report/check_report.cpp).
constexpr const char* kCheckSchema = "snapdiff/check/1";
std::string render_check_text(const CheckResult& r);
std::string render_check_json(const CheckResult& r);
std::string render_check_junit(const CheckResult& r);
// GitHub Actions workflow commands: one ::error:: / ::warning:: line per
// failed / warned threshold.
std::string render_check_github(const CheckResult& r);
std::string xml_escape(const std::string& s);

}  // namespace snapdiff
