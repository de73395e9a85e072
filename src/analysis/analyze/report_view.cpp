// The report view: the analysis's ids written out (frames, sites, kernels
// and names), and report_view(), which gathers an analysis's views.
#include <optional>

#include "analysis/joins/profiler_views.hpp"
#include "analysis/analyze/report_view_build.hpp"
#include "snapdiff/analysis/analysis.hpp"

namespace snapdiff {

namespace detail {

FrameRef frame_ref(const FrameTable& ft, FrameId f) {
  const Trace& t = ft.trace();
  const Frame& fr = t.frames[f];
  FrameRef r;
  r.name = std::string(t.strings.get(fr.name));
  r.file = std::string(t.strings.get(fr.file));
  r.line = fr.line;
  r.label = ft.label(f);
  return r;
}

// A stack's frames as the reports list them, innermost first: a stack deeper
// than kShownFrames keeps its innermost and outermost frames, with one frame
// for the rest that holds their count (FrameRef::elided).
std::vector<FrameRef> shown_frames(const FrameTable& ft, StackId stack) {
  const FrameTable::Shown sh = ft.shown(stack);
  std::vector<FrameRef> out;
  out.reserve(sh.inner.size() + sh.outer.size() + 1);
  for (FrameId f : sh.inner) out.push_back(frame_ref(ft, f));
  if (sh.elided > 0) {
    FrameRef m;
    m.elided = sh.elided;
    out.push_back(std::move(m));
  }
  for (FrameId f : sh.outer) out.push_back(frame_ref(ft, f));
  return out;
}

SiteFrames site_frames(const FrameTable& ft, StackId stack, size_t depth) {
  SiteFrames s;
  FrameTable::SitePath p = ft.site_path(stack, depth == 0 ? kShownFrames : std::max<size_t>(depth, 4));
  s.path = std::move(p.frames);
  s.callee = std::move(p.callee);
  const FrameId uf = ft.user_frame(stack);
  if (uf != kNoFrame) s.user = frame_ref(ft, uf);
  s.stack = shown_frames(ft, stack);
  return s;
}

namespace {

std::optional<KernelRef> kernel_ref(const FrameTable& ft, int64_t idx) {
  if (idx < 0) return std::nullopt;
  const Trace& t = ft.trace();
  const KernelLaunch& k = t.kernels[size_t(idx)];
  KernelRef r;
  r.name = std::string(t.strings.get(k.name));
  r.display = kernel_display_name(r.name);
  r.time_us = k.time_us;
  r.stream = k.stream;
  r.stack = shown_frames(ft, k.stack);
  return r;
}

}  // namespace

std::string category_name(const Attribution& a, int c) {
  return c >= 0 && size_t(c) < a.categories.size() ? a.categories[size_t(c)] : std::string();
}

void resolve_op_row(const FrameTable& ft, const Attribution& a, FrameId python, StackId stack, OpRow& row) {
  row.category_name = category_name(a, row.category);
  if (python != kNoFrame) row.python_frame = frame_ref(ft, python);
  row.stack_frames = shown_frames(ft, stack);
}

void finish_views(const Trace& t, Analysis& r) {
  const FrameTable& ft = *r.frames;
  r.allocator_settings = t.settings;
  for (DeviceAnalysis& d : r.devices) {
    const DeviceReplay& rp = d.replay;
    d.streams = rp.streams;
    d.has_trace = rp.has_trace;
    d.truncated = rp.truncated;
    d.truncation = rp.truncation;
    d.truncation_evidence = rp.truncation_evidence;
    d.pools = rp.pools;
    d.reported_totals = rp.reported_totals;
    d.peak_requested = rp.peak_requested;
    d.peak_allocated = rp.peak_allocated;
    d.peak_reserved = rp.peak_reserved;
    d.peak_active = rp.peak_active;
    d.allocated_at_peak = rp.peak_requested.event_index >= 0 ? rp.allocated[size_t(rp.peak_requested.event_index)]
                                                             : rp.baseline.allocated;
    d.active_at_peak = rp.peak_requested.event_index >= 0 ? rp.active[size_t(rp.peak_requested.event_index)]
                                                          : rp.baseline.active;
    d.baseline = rp.baseline;
    d.pre_trace_allocations = rp.pre_trace_allocations;
    d.allocated_estimated = rp.allocated_estimated;
    d.end_check = rp.end_check;
    d.inconsistencies = rp.inconsistencies;
    d.oom_events = rp.oom_events;
    d.has_peak_event = d.peak_index >= 0;
    d.category_names = d.attr.categories;
    if (d.window) {
      // The phases with an event in the window (an empty one: its moment in it).
      for (const PhaseSpan& ps : d.attr.spans) {
        const bool in = ps.empty() ? ps.start_event - 1 >= d.window->first_event && ps.start_event - 1 <= d.window->last_event
                                   : ps.end_event > d.window->first_event && ps.start_event <= d.window->last_event;
        if (in) d.phases.push_back(ps);
      }
    } else {
      d.phases = d.attr.spans;
    }
    d.phase_evidence = d.attr.phase_evidence;
    d.iterations = d.attr.iterations;
    if (d.peak_index >= 0) {
      const FrameId uf = ft.user_frame(d.peak_stack);
      if (uf != kNoFrame) d.peak_user_frame = frame_ref(ft, uf);
    }
    d.kernel_before = kernel_ref(ft, d.kernel_before_index);
    d.kernel_after = kernel_ref(ft, d.kernel_after_index);
  }
}

}  // namespace detail

Report report_view(const Analysis& a) {
  Report r;
  static_cast<ReportHead&>(r) = a;
  r.devices.assign(a.devices.begin(), a.devices.end());
  return r;
}

Report report_view(Analysis&& a) {
  Report r;
  static_cast<ReportHead&>(r) = std::move(a);
  r.devices.reserve(a.devices.size());
  for (DeviceAnalysis& d : a.devices) r.devices.push_back(std::move(static_cast<DeviceView&>(d)));
  return r;
}

Report analyze_report(const Trace& trace, const ReportOptions& opts) { return report_view(analyze(trace, opts)); }

}  // namespace snapdiff
