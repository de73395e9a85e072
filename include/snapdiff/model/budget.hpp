// snapdiff/model/budget.hpp — the figures a peak-memory gate is about: metrics,
// sizes and tolerances as written on a command line or in a budget file,
// one run's peak figures, category limits, and a budget (model layer: the
// budget file's reader in the input layer and `snapdiff check` in the
// analysis layer share them).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

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

// A largest value over a run and the first moment it is reached.
struct ExtentPoint {
  int64_t bytes = 0;
  std::string phase = "pre_trace";  // of that moment: "optimizer"; "pre_trace": before the first event
  int iteration = 0;
  int64_t event_index = -1;  // -1: before the first event, or not known (a budget's)
  int device = 0;
};

// One of the largest sites live at a run's peak: a stack (its innermost
// user frame, and the frame inside the user's call) and a category.
struct PeakSite {
  std::string category;
  int64_t bytes = 0;  // requested bytes live at the peak
  uint64_t allocations = 0;
  std::string site;  // the innermost user frame: "forward (model.py:88)"; "" without a stack
  std::string in;    // the frame inside the user's call: "scaled_dot_product_attention (functional.py:5601)"; "" when none
};

// A phase kind's figures over all of its spans (every forward, every
// optimizer step, ...).
struct PhasePeak {
  std::string phase;  // "init", "forward", "backward", "optimizer", "other"
  uint32_t spans = 0;
  ExtentPoint requested, allocated, reserved;  // the counters' peaks within them
  // Per category, its largest requested bytes within them.
  std::vector<std::pair<std::string, ExtentPoint>> categories;
  const ExtentPoint& peak(Metric m) const;
  // nullptr when the category is absent.
  const ExtentPoint* category(const std::string& name) const;
};

// The figures a check needs from one run: the device with the highest
// allocated peak (Analysis::peak_device); the extents (category_max,
// phases) are the largest over every device.
struct PeakFigures {
  std::string name;  // the file as given
  int device = 0;
  int64_t requested = 0, allocated = 0, reserved = 0;
  std::vector<std::pair<std::string, int64_t>> categories;  // requested bytes at the peak
  std::string history = "complete";  // "complete", "truncated", "none"
  std::string truncation = "none";   // truncated: "late_start", "wrapped" or "unknown"
  std::string phase;                 // phase of the (requested) peak
  int iteration = 0;
  uint64_t events = 0;
  std::string format;  // container format ("torch-pickle", "snap")
  // Each category's largest requested bytes over the whole run, and the
  // phase kinds the run has, in phase order (empty in budgets written
  // before they were kept).
  std::vector<std::pair<std::string, ExtentPoint>> category_max;
  std::vector<PhasePeak> phases;
  // Growth of allocated bytes per iteration (analysis/growth.hpp); none with
  // fewer than 3 iterations. Not kept in budget files.
  std::optional<int64_t> growth_per_iteration;
  int iterations = 0;
  // The largest sites live at the peak, by bytes (at most 16; not kept in
  // budget files).
  std::vector<PeakSite> sites;
  int64_t peak(Metric m) const;
  // -1 when the category is absent.
  int64_t category(const std::string& name) const;
  // nullptr when absent.
  const ExtentPoint* max_of(const std::string& category) const;
  const PhasePeak* phase_peak(const std::string& phase) const;
};

// The phase kinds a limit may name (PHASE:CATEGORY=SIZE), in phase order:
// init, forward, backward, optimizer, other.
const std::vector<std::string>& limit_phase_names();

// A ceiling on a category's requested bytes: at their largest over the run,
// or (phase given) within the spans of one phase kind.
struct CategoryLimit {
  CategoryLimit() = default;
  CategoryLimit(std::string category_, int64_t bytes_, std::string text_, std::string phase_ = {})
      : category(std::move(category_)), bytes(bytes_), text(std::move(text_)), phase(std::move(phase_)) {}
  std::string category;
  int64_t bytes = 0;
  std::string text;   // as written
  std::string phase;  // "" the whole run, else one of limit_phase_names()
  // "optimizer_temporary", "optimizer:optimizer_temporary"
  std::string key() const { return phase.empty() ? category : phase + ":" + category; }
};

// A committed budget file (schemas/budget.schema.json; read and written by
// snapdiff/input/budget_io.hpp).
struct Budget {
  Metric metric = Metric::Allocated;
  PeakFigures peak;  // peaks, categories and source facts of the run it was written from
  std::optional<Amount> max_increase, warn_increase;
  std::optional<int64_t> max_peak;
  std::string max_peak_text;
  std::vector<CategoryLimit> limits;
  std::string snapdiff_version;  // of the writer
};

}  // namespace snapdiff
