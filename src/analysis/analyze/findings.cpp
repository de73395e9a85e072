// What the analysis states about a run: the findings of the explanation
// (where the peak is and what makes it, the optimizer step's rise, what no
// rule placed) and the warnings — each a code and its numbers; the words are
// the report layer's (src/report/words.cpp).
#include <algorithm>
#include <unordered_map>

// GCC 12 warns -Wmaybe-uninitialized inside std::variant's move constructor
// when the sort below moves findings whose facts are fully initialized (every
// member has a default): a false positive of its inliner, silenced here only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "analysis/analyze/analyze_parts.hpp"
#include "snapdiff/analysis/analysis.hpp"

namespace snapdiff::detail {

// The plain-language explanation: statements computed from the data, largest
// first. Nothing here is keyed on file names; each statement appears only
// when its measured effect is material.
void state_findings(const FrameTable& ft, DeviceAnalysis& d) {
  const Attribution& a = d.attr;
  const int64_t peak = d.replay.peak_requested.bytes;
  if (peak <= 0 || a.categories.empty()) return;
  auto cat = [&](const char* name) -> int64_t {
    for (size_t i = 0; i < a.categories.size(); ++i)
      if (a.categories[i] == name) return d.categories[i];
    return 0;
  };
  // 1. Where the peak is and what it is made of.
  {
    PeakFacts f;
    f.peak = peak;
    f.phase = d.peak_phase;
    f.iteration = d.peak_iteration;
    f.truncated = d.replay.truncated;
    std::vector<std::pair<int64_t, size_t>> parts;
    for (size_t i = 0; i < a.categories.size(); ++i)
      if (d.categories[i] > 0) parts.push_back({d.categories[i], i});
    std::sort(parts.begin(), parts.end(), [](auto& x, auto& y) { return x.first > y.first; });
    for (const auto& [bytes, c] : parts) {
      PeakFacts::Part part{a.categories[c], bytes, 0};
      if (a.categories[c] == "kv_cache") part.forwards = a.kv_cache_forwards, part.per_token = a.kv_cache_per_token;
      if (a.categories[c] == "gradient" && d.peak_iteration > 1) {
        // Gradients allocated in an earlier iteration and still alive.
        int64_t old = 0;
        int first_it = d.peak_iteration;
        for (uint32_t id : a.live_at(d.peak_index)) {
          const Allocation& al = a.allocations[id];
          if (a.categories[al.category] != "gradient") continue;
          int it = a.iteration_at(al.alloc_event);
          if (it < d.peak_iteration) {
            old += int64_t(al.requested);
            first_it = std::min(first_it, it);
          }
        }
        if (old * 2 > bytes) part.kept_from_iteration = first_it;
      }
      f.parts.push_back(std::move(part));
    }
    d.findings.push_back({Code::Peak, peak, std::move(f)});
  }
  // 2. Optimizer steps that rise well above their start: the largest one,
  // and how many others are like it.
  const PhaseSpan* worst = nullptr;
  size_t steps = 0, similar = 0;
  for (const PhaseSpan& s : a.spans) {
    if (s.phase != Phase::Optimizer) continue;
    ++steps;
    if (!worst || s.peak_requested - s.start_requested > worst->peak_requested - worst->start_requested) worst = &s;
  }
  std::vector<int64_t> at_start;
  if (worst) at_start = a.categories_at({worst->start_event - 1})[0];
  if (worst) {
    const PhaseSpan& s = *worst;
    int64_t rise = s.peak_requested - s.start_requested;
    for (const PhaseSpan& o : a.spans)
      if (o.phase == Phase::Optimizer && &o != worst && (o.peak_requested - o.start_requested) * 10 >= rise * 9) ++similar;
    if (rise * 20 >= peak) {  // 5% of the peak or more: material
      int64_t temp = 0, grads = 0;
      for (size_t i = 0; i < a.categories.size(); ++i) {
        if (a.categories[i] == "optimizer_temporary") temp = s.categories[i];
        if (a.categories[i] == "gradient") grads = s.categories[i];
      }
      std::unordered_map<StackId, int64_t> by_site;
      for (uint32_t id : a.live_at(s.peak_event)) {
        const Allocation& al = a.allocations[id];
        if (a.categories[al.category] == "optimizer_temporary") by_site[al.stack] += int64_t(al.requested);
      }
      StackId top = 0;
      int64_t top_b = -1;
      for (auto& kv : by_site)
        if (kv.second > top_b || (kv.second == top_b && kv.first < top)) top = kv.first, top_b = kv.second;
      OptimizerStepFacts f;
      f.iteration = s.iteration;
      f.rise = rise;
      for (size_t i = 0; i < a.categories.size(); ++i)
        if (a.categories[i] == "optimizer_state" && s.categories[i] - at_start[i] > 0) f.new_state = s.categories[i] - at_start[i];
      if (similar > 0) f.similar = similar, f.steps = steps;
      f.temporaries = temp;
      f.gradients = grads;
      if (temp > 0 && top != 0) {
        f.site = ft.label(ft.site_frame(top));
        const FrameId callee = ft.python_callee(top);
        f.site_callee = ft.cell_callee(top);  // a model frame named before its notebook cell: the cell
        if (f.site_callee.empty() && callee != kNoFrame) f.site_callee = ft.label(callee);
      }
      d.findings.push_back({Code::OptimizerTransient, rise, std::move(f)});
    }
  }
  // 3. What no rule could place.
  int64_t unk = cat("unknown");
  if (unk * 100 >= peak && unk > 0) {
    // Profiler traces: what was allocated before the profiler started and
    // never freed in the trace is one allocation whose sites are unknown.
    // --memory-timeline gives some of it PyTorch's categories.
    int64_t before = 0, placed = 0;
    if (d.replay.reported_totals)
      for (uint32_t id : a.live_at(d.peak_index)) {
        const Allocation& al = a.allocations[id];
        if (al.alloc_event >= 0 || al.addr != 0) continue;
        if (a.categories[al.category] == "unknown") before += int64_t(al.requested);
        else if (d.timeline_pre_trace > 0) placed += int64_t(al.requested);
      }
    d.findings.push_back({Code::Unknown, unk, UnknownFacts{unk, before, placed, {}, 0}});
  }
  // 4. Memory that grows every iteration: what leaking sites keep.
  if (d.growth.leaks()) {
    const Growth& g = d.growth;
    GrowthFacts f;
    f.measured = g.measured;
    f.per_iteration = g.per_iteration;
    if (g.measured) f.first_iteration = 2, f.last_iteration = 2 + g.deltas;
    f.judged_first = g.judged_first;
    f.judged_last = g.judged_last;
    f.unjudged = g.unjudged;
    for (const RetainedSite& s : g.sites) {
      if (f.sites.size() == 3) {
        ++f.more_sites;
        continue;
      }
      f.sites.push_back({s.site, s.model_frame, s.phase, s.bytes_per_iteration, s.count_per_iteration, s.iterations});
    }
    f.retained_per_iteration = g.retained_per_iteration;
    f.leaked_at_peak = g.leaked_at_peak;
    d.findings.push_back({Code::Growth, std::max(g.leaked_at_peak, g.retained_per_iteration), std::move(f)});
  }
  std::stable_sort(d.findings.begin() + 1, d.findings.end(),
                   [](const Finding& x, const Finding& y) { return x.bytes > y.bytes; });
}


void add_warnings(const Trace& trace, Analysis& r) {
  for (const DeviceAnalysis& d : r.devices) {
    const DeviceReplay& rp = d.replay;
    auto warn = [&](Code code, auto facts) { r.warnings.push_back({code, d.device, std::move(facts)}); };
    if (rp.has_trace && d.events > 0) r.has_history = true;
    if (rp.truncated && rp.reported_totals) {
      r.history_truncated = true;
      warn(Code::ProfilerWindow, ProfilerWindowFacts{rp.baseline.allocated});
    } else if (rp.truncated) {
      r.history_truncated = true;
      warn(Code::HistoryTruncated, HistoryTruncatedFacts{rp.baseline.requested, rp.baseline.reserved,
                                                         rp.pre_trace_allocations, rp.allocated_estimated,
                                                         rp.truncation, rp.truncation_evidence});
    }
    // Over all devices: the one kind they agree on, else unknown.
    if (rp.truncated)
      r.truncation = r.truncation == Truncation::None || r.truncation == rp.truncation ? rp.truncation
                                                                                        : Truncation::Unknown;
    if (!rp.has_trace || d.events == 0) warn(Code::NoHistory, std::monostate{});
    if (rp.end_check.have_dump && !rp.end_check.matches())
      warn(Code::EndStateMismatch, EndStateFacts{rp.truncated, rp.end_check.replay, rp.end_check.dump});
    if (rp.inconsistencies > 0)
      warn(Code::ReplayInconsistent,
           InconsistentFacts{rp.inconsistencies, rp.reported_totals, rp.notes.empty() ? std::string() : rp.notes.front()});
    if (rp.oom_events > 0) {
      OomFacts f;
      f.errors = rp.oom_events;
      if (const Device* dev = trace.find_device(d.device))
        for (const Event& e : dev->events)
          if (e.kind == EventKind::Oom) {
            f.has_first = true;
            f.first_size = e.size;
            f.first_free = e.addr;  // an oom entry's addr is CUDA's free bytes
            break;
          }
      warn(Code::Oom, f);
    }
    if (d.events > 0 && d.first_time_us == kNoTime) warn(Code::NoTimestamps, std::monostate{});
  }
}

}  // namespace snapdiff::detail
