// `snapdiff check`: thresholds evaluated against the peaks of an Analysis, size
// and tolerance parsing, and how a budget and the command line's thresholds
// combine. Data only: nothing here reads or writes files (budget files:
// src/input/budget_io.cpp) or formats for people (src/report/check_report.cpp).
#include "snapdiff/analysis/check.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "snapdiff/analysis/category_extent.hpp"
#include "snapdiff/error.hpp"
#include "util/quote_value.hpp"

namespace snapdiff {

const char* status_name(CheckStatus s) {
  switch (s) {
    case CheckStatus::Pass: return "pass";
    case CheckStatus::Warn: return "warn";
    case CheckStatus::Fail: return "fail";
  }
  return "fail";
}

namespace {

ExtentPoint point(const ExtentAt& x, int device) {
  return {x.bytes, phase_name(x.phase), x.iteration, x.event_index, device};
}

// `into` becomes `x` when x is larger (the devices in order: ties keep the first).
void take_larger(ExtentPoint& into, const ExtentAt& x, int device, bool first) {
  if (first || x.bytes > into.bytes) into = point(x, device);
}

// The extents of every device, each figure the largest over the devices.
void extent_figures(const Analysis& r, PeakFigures& f) {
  std::array<bool, kPhaseCount> phase_first;
  phase_first.fill(true);
  std::array<PhasePeak, kPhaseCount> phases;
  for (const DeviceAnalysis& d : r.devices) {
    const CategoryExtents x = category_extents(d.replay, d.attr);
    for (size_t c = 0; c < x.categories.size() && c < d.attr.categories.size(); ++c) {
      const std::string& name = d.attr.categories[c];
      auto it = std::find_if(f.category_max.begin(), f.category_max.end(), [&](const auto& kv) { return kv.first == name; });
      if (it == f.category_max.end()) f.category_max.emplace_back(name, point(x.categories[c], d.device));
      else take_larger(it->second, x.categories[c], d.device, false);
    }
    for (int p = 0; p < kPhaseCount; ++p) {
      const PhaseExtent& px = x.phases[size_t(p)];
      if (px.spans == 0) continue;
      PhasePeak& pp = phases[size_t(p)];
      const bool pf = phase_first[size_t(p)];
      pp.phase = phase_name(Phase(p));
      pp.spans += px.spans;
      take_larger(pp.requested, px.requested, d.device, pf);
      take_larger(pp.allocated, px.allocated, d.device, pf);
      take_larger(pp.reserved, px.reserved, d.device, pf);
      for (size_t c = 0; c < px.categories.size() && c < d.attr.categories.size(); ++c) {
        const std::string& name = d.attr.categories[c];
        auto it = std::find_if(pp.categories.begin(), pp.categories.end(), [&](const auto& kv) { return kv.first == name; });
        if (it == pp.categories.end()) pp.categories.emplace_back(name, point(px.categories[c], d.device));
        else take_larger(it->second, px.categories[c], d.device, false);
      }
      phase_first[size_t(p)] = false;
    }
  }
  for (int p = 0; p < kPhaseCount; ++p)
    if (!phase_first[size_t(p)]) f.phases.push_back(std::move(phases[size_t(p)]));
}

}  // namespace

PeakFigures peak_figures(const Analysis& r) {
  PeakFigures f;
  f.name = r.input_name;
  f.events = r.events;
  f.format = r.source.format;
  if (r.devices.empty()) {
    f.history = "none";
    return f;
  }
  const DeviceAnalysis& d = r.devices[r.peak_device];
  f.device = d.device;
  f.requested = d.replay.peak_requested.bytes;
  f.allocated = d.replay.peak_allocated.bytes;
  f.reserved = d.replay.peak_reserved.bytes;
  for (size_t i = 0; i < d.attr.categories.size(); ++i)
    f.categories.emplace_back(d.attr.categories[i], i < d.categories.size() ? d.categories[i] : 0);
  if (!d.replay.has_trace || d.events == 0) f.history = "none";
  else if (d.replay.truncated || r.history_truncated) f.history = "truncated";
  if (f.history == "truncated")
    f.truncation = truncation_name(d.replay.truncated ? d.replay.truncation : r.truncation);
  f.phase = phase_name(d.peak_phase);
  f.iteration = d.peak_iteration;
  extent_figures(r, f);
  f.iterations = d.attr.iterations;
  if (d.growth.measured) f.growth_per_iteration = d.growth.per_iteration;
  for (const SiteRow& s : d.sites) {
    if (f.sites.size() == 16) break;
    PeakSite p;
    p.category = s.category_name.empty() ? "unknown" : s.category_name;
    p.bytes = s.requested_bytes;
    p.allocations = s.count;
    if (s.site.user) p.site = s.site.user->label;
    else if (!s.site.stack.empty() && !s.site.path.empty()) p.site = s.site.path.front();  // none: no stack recorded
    p.in = s.site.callee;
    f.sites.push_back(std::move(p));
  }
  return f;
}

size_t CheckResult::count(CheckStatus s) const {
  size_t n = 0;
  for (const CheckItem& i : items) n += i.status == s;
  return n;
}

void add_limit(std::vector<CategoryLimit>& limits, const CategoryLimit& l) {
  for (CategoryLimit& o : limits)
    if (o.category == l.category && o.phase == l.phase) {
      o = l;
      return;
    }
  limits.push_back(l);
}

std::string phase_names_list() {
  std::string names;
  for (const std::string& p : limit_phase_names()) names += (names.empty() ? "" : ", ") + p;
  return names;
}

bool is_limit_phase(const std::string& phase) {
  const auto& names = limit_phase_names();
  return std::find(names.begin(), names.end(), phase) != names.end();
}

void check_limit_categories(const std::vector<CategoryLimit>& limits, const std::vector<std::string>& categories) {
  for (const CategoryLimit& l : limits) {
    if (!l.phase.empty() && !is_limit_phase(l.phase))
      throw UsageError("--limit: unknown phase " + quote_value(l.phase) + " (" + phase_names_list() + ")");
    if (std::find(categories.begin(), categories.end(), l.category) == categories.end()) {
      std::string names;
      for (const std::string& c : categories) names += (names.empty() ? "" : ", ") + c;
      throw UsageError("--limit: unknown category " + quote_value(l.category) + " (" + names + ")");
    }
  }
}

namespace {

// Whether the warning level is above the failure level at `base`.
bool warn_above_max(const Amount& warn, const Amount& max, int64_t base) {
  return warn.bytes_of(base) > max.bytes_of(base);
}

}  // namespace

Budget budget_from_run(const PeakFigures& run, const CheckRequest& req) {
  Budget b;
  b.metric = req.metric.value_or(Metric::Allocated);
  b.peak = run;
  b.max_increase = req.max_increase ? req.max_increase : parse_amount("2%");
  b.warn_increase = req.warn_increase;
  if (b.warn_increase && warn_above_max(*b.warn_increase, *b.max_increase, run.peak(b.metric)))
    throw UsageError("--warn-increase " + b.warn_increase->text + " is above --max-increase " + b.max_increase->text);
  b.max_peak = req.max_peak;
  b.max_peak_text = req.max_peak_text;
  b.limits = req.limits;
  return b;
}

CheckOptions check_options(const CheckRequest& req) {
  CheckOptions o;
  o.metric = req.metric.value_or(Metric::Allocated);
  o.max_increase = req.max_increase;
  o.warn_increase = req.warn_increase;
  o.max_peak = req.max_peak;
  o.max_peak_text = req.max_peak_text;
  o.limits = req.limits;
  o.allow_truncated = req.allow_truncated;
  o.allow_late_start = req.allow_late_start;
  o.max_growth = req.max_growth;
  o.max_growth_text = req.max_growth_text;
  return o;
}

CheckOptions check_options(const CheckRequest& req, const Budget& budget, const std::string& budget_file,
                           const std::vector<std::string>& categories) {
  for (const CategoryLimit& l : budget.limits) {
    const std::string path = l.phase.empty() ? "$.limits.categories" : "$.limits.phases." + l.phase;
    if (!l.phase.empty() && !is_limit_phase(l.phase)) {
      InputError e("$.limits.phases", "unknown phase " + quote_value(l.phase) + " (" + phase_names_list() + ")");
      e.set_file(budget_file);
      throw e;
    }
    if (std::find(categories.begin(), categories.end(), l.category) == categories.end()) {
      InputError e(path, "unknown category " + quote_value(l.category));
      e.set_file(budget_file);
      throw e;
    }
  }
  CheckOptions o;
  o.metric = req.metric.value_or(budget.metric);
  o.max_increase = req.max_increase ? req.max_increase : budget.max_increase;
  o.warn_increase = req.warn_increase ? req.warn_increase : budget.warn_increase;
  // A warning level given alone is checked against the budget's failure level
  // here, where the message can say whose it is.
  if (req.warn_increase && !req.max_increase && o.max_increase &&
      warn_above_max(*req.warn_increase, *o.max_increase, budget.peak.peak(o.metric)))
    throw UsageError("--warn-increase " + req.warn_increase->text + " is above the budget's max_increase " +
                     o.max_increase->text);
  o.max_peak = budget.max_peak;
  o.max_peak_text = budget.max_peak_text;
  if (req.max_peak) {
    o.max_peak = req.max_peak;
    o.max_peak_text = req.max_peak_text;
  }
  o.limits = budget.limits;
  for (const CategoryLimit& l : req.limits) add_limit(o.limits, l);
  o.allow_truncated = req.allow_truncated;
  o.allow_late_start = req.allow_late_start;
  o.max_growth = req.max_growth;
  o.max_growth_text = req.max_growth_text;
  return o;
}

namespace {

CheckItem history_item(const std::string& name, const std::string& who, const PeakFigures& f, bool allow,
                       bool allow_late_start) {
  CheckItem it;
  it.name = name;
  it.kind = "history";
  it.limit_text = "complete";
  if (f.history == "complete") {
    it.message = who + " history is complete: the peak is established";
    return it;
  }
  if (allow_late_start && f.history == "truncated" && f.truncation == "late_start" && f.format != "chrome-trace") {
    it.message = who + " history starts after memory was already in use (a late start, accepted): the peak is the "
                 "recorded window's, counting the memory held at the window's start";
    return it;
  }
  it.status = allow ? CheckStatus::Warn : CheckStatus::Fail;
  if (f.history == "truncated" && f.format == "chrome-trace")
    it.message = who + " " + f.name +
                 ": the profiler started with memory already allocated, so the trace's peak is exact for the profiled "
                 "window only: a higher peak before it cannot be seen. Profile from the start of the run";
  else if (f.history == "truncated" && f.truncation == "late_start")
    it.message = who + " " + f.name +
                 ": the history is truncated (the recording started after memory was already in use), so the peak "
                 "cannot be established: a higher peak before the first recorded event cannot be seen. Call "
                 "torch.cuda.memory._record_memory_history() before the model is built";
  else if (f.history == "truncated" && f.truncation == "wrapped")
    it.message = who + " " + f.name +
                 ": the history is truncated (the ring buffer wrapped, max_entries was reached), so the peak "
                 "cannot be established: a higher peak before the first recorded event cannot be seen. Record with a "
                 "larger torch.cuda.memory._record_memory_history(max_entries=...)";
  else if (f.history == "truncated")
    it.message = who + " " + f.name +
                 ": the history is truncated (the recording started late or the ring buffer wrapped; the file cannot "
                 "tell which), so the peak cannot be established: a higher peak before the first recorded event cannot "
                 "be seen. Record from before the model is built, with a max_entries above the run's events";
  else
    it.message = who + " " + f.name +
                 ": the snapshot has no allocation history (recorded without _record_memory_history, or a bare "
                 "segment list), so the peak cannot be established";
  it.message += allow ? " (allowed by --allow-truncated: the figures are for the recorded window only)"
                      : ", or pass --allow-truncated to check the recorded window anyway";
  return it;
}

// --max-growth: allocated bytes per iteration (the median change between
// the starts of iterations 2..N). Fewer than 3 iterations cannot show growth
// apart from the first iteration's state: a warning, not a pass.
CheckItem growth_item(const PeakFigures& f, int64_t limit, const std::string& text) {
  CheckItem it;
  it.name = "max_growth";
  it.kind = "max_growth";
  it.limit_text = text;
  it.limit_bytes = limit;
  if (!f.growth_per_iteration) {
    it.status = CheckStatus::Warn;
    it.margin_bytes = limit;
    it.message = "growth per iteration cannot be measured: " +
                 (f.iterations == 1 ? std::string("1 iteration was") : std::to_string(f.iterations) + " iterations were") +
                 " found and 3 are needed (the first creates gradients and optimizer state); record more iterations";
    return it;
  }
  it.measured_bytes = *f.growth_per_iteration;
  it.margin_bytes = limit - it.measured_bytes;
  if (it.measured_bytes > limit) it.status = CheckStatus::Fail;
  // The words (report layer: check_report.cpp) say the bytes; the count here.
  it.message = std::to_string(f.iterations);
  return it;
}

// CheckResult::findings: failed limits' categories, then the categories that
// rose most against the baseline's peak (without a baseline with
// categories: the largest at the peak); none of zero bytes or no change.
std::vector<CheckFinding> check_findings(const CheckResult& r) {
  const PeakFigures& c = r.candidate;
  const bool base = r.baseline && !r.baseline->categories.empty();
  std::vector<std::pair<std::string, int64_t>> order;  // category, sort key
  for (const auto& [name, v] : c.categories) {
    const int64_t key = base ? v - std::max<int64_t>(r.baseline->category(name), 0) : v;
    if (key > 0) order.emplace_back(name, key);
  }
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::vector<std::string> chosen;
  for (const CheckItem& it : r.items)
    if (it.kind == "category_limit" && it.status == CheckStatus::Fail &&
        std::find(chosen.begin(), chosen.end(), it.category) == chosen.end())
      chosen.push_back(it.category);
  for (const auto& [name, key] : order)
    if (std::find(chosen.begin(), chosen.end(), name) == chosen.end()) chosen.push_back(name);
  std::vector<CheckFinding> out;
  for (const std::string& name : chosen) {
    if (out.size() == 3) break;
    CheckFinding f;
    f.category = name;
    f.bytes = std::max<int64_t>(c.category(name), 0);
    if (base) f.change = f.bytes - std::max<int64_t>(r.baseline->category(name), 0);
    for (const PeakSite& s : c.sites)
      if (s.category == name) {
        f.site = s;
        break;
      }
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace

CheckResult evaluate_check(const PeakFigures& candidate, const std::optional<PeakFigures>& baseline,
                           const std::string& baseline_kind, const CheckOptions& opts) {
  CheckResult r;
  r.metric = opts.metric;
  r.candidate = candidate;
  r.baseline = baseline;
  r.baseline_kind = baseline ? baseline_kind : std::string();
  const std::string m = metric_name(opts.metric);
  bool increase = opts.max_increase || opts.warn_increase;
  if (!increase && !opts.max_peak && opts.limits.empty() && !opts.max_growth)
    throw UsageError(
        "no thresholds to check: give --max-increase, --warn-increase, --max-peak, --limit, --max-growth or --budget");

  r.items.push_back(history_item("history", "candidate", candidate, opts.allow_truncated, opts.allow_late_start));
  if (baseline && baseline_kind == "snapshot" && increase)
    r.items.push_back(history_item("baseline_history", "baseline", *baseline, opts.allow_truncated,
                                 opts.allow_late_start));

  if (increase) {
    if (!baseline) throw UsageError("--max-increase and --warn-increase need a BASELINE snapshot or a --budget");
    CheckItem it;
    it.name = "increase." + m;
    it.kind = "increase";
    it.baseline_bytes = baseline->peak(opts.metric);
    it.measured_bytes = candidate.peak(opts.metric) - it.baseline_bytes;
    if (opts.warn_increase) {
      it.warn_bytes = opts.warn_increase->bytes_of(it.baseline_bytes);
      it.warn_text = opts.warn_increase->text;
    }
    if (opts.max_increase) {
      it.limit_text = opts.max_increase->text;
      it.limit_bytes = opts.max_increase->bytes_of(it.baseline_bytes);
      if (it.warn_bytes > it.limit_bytes)
        throw UsageError("--warn-increase " + it.warn_text + " is above --max-increase " + it.limit_text +
                         " (the warning level must be below the failure level)");
      if (it.measured_bytes > it.limit_bytes) it.status = CheckStatus::Fail;
      else if (it.warn_bytes >= 0 && it.measured_bytes > it.warn_bytes) it.status = CheckStatus::Warn;
    } else {
      // A warning level alone never fails.
      it.limit_text = it.warn_text;
      it.limit_bytes = it.warn_bytes;
      if (it.measured_bytes > it.warn_bytes) it.status = CheckStatus::Warn;
    }
    it.margin_bytes = it.limit_bytes - it.measured_bytes;
    r.items.push_back(it);
  }
  if (opts.max_peak) {
    CheckItem it;
    it.name = "max_peak." + m;
    it.kind = "max_peak";
    it.limit_text = opts.max_peak_text;
    it.limit_bytes = *opts.max_peak;
    it.measured_bytes = candidate.peak(opts.metric);
    it.margin_bytes = it.limit_bytes - it.measured_bytes;
    if (it.measured_bytes > it.limit_bytes) it.status = CheckStatus::Fail;
    r.items.push_back(it);
  }
  for (const CategoryLimit& l : opts.limits) {
    if (candidate.category(l.category) < 0 && !candidate.max_of(l.category)) {
      std::string names;
      for (const auto& c : candidate.categories) names += (names.empty() ? "" : ", ") + c.first;
      throw UsageError("--limit: unknown category " + quote_value(l.category) + " (" + names + ")");
    }
    if (!l.phase.empty() && !is_limit_phase(l.phase))
      throw UsageError("--limit: unknown phase " + quote_value(l.phase) + " (" + phase_names_list() + ")");
    CheckItem it;
    it.name = "limit." + l.key();
    it.kind = "category_limit";
    it.category = l.category;
    it.phase = l.phase;
    it.limit_text = l.text;
    it.limit_bytes = l.bytes;
    // The category's largest over the run, or within the phase kind's spans.
    const ExtentPoint* at = nullptr;
    if (l.phase.empty()) {
      at = candidate.max_of(l.category);
    } else if (const PhasePeak* p = candidate.phase_peak(l.phase)) {
      at = p->category(l.category);
    } else {
      // Nothing to measure: the run has no such phase.
      it.status = CheckStatus::Warn;
      it.message = "the run has no " + l.phase + " phase, so the limit on " + l.category + " in it was not checked";
    }
    if (at) {
      it.has_at = true;
      it.at = *at;
      it.measured_bytes = at->bytes;
    } else if (l.phase.empty()) {
      it.measured_bytes = candidate.category(l.category);  // figures without extents: at the peak
    }
    it.margin_bytes = l.bytes - it.measured_bytes;
    if (it.measured_bytes > l.bytes) it.status = CheckStatus::Fail;
    r.items.push_back(it);
  }
  if (opts.max_growth) r.items.push_back(growth_item(candidate, *opts.max_growth, opts.max_growth_text));
  r.findings = check_findings(r);
  r.status = r.count(CheckStatus::Fail) ? CheckStatus::Fail
             : r.count(CheckStatus::Warn) ? CheckStatus::Warn
                                          : CheckStatus::Pass;
  return r;
}

}  // namespace snapdiff
