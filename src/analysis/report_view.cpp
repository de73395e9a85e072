// The report view: the analysis's rows resolved (frames, sites, kernels and
// names written out) so that renderers never see the Trace or the analysis's
// working state.
#include <optional>

#include "analysis/profiler_views.hpp"
#include "snapdiff/model/frame_names.hpp"
#include "analysis/report_view_build.hpp"
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
// "<N frames elided>" (no file, no line) for the rest.
// "<1,234 frames elided>" (appended piece by piece: `"<" + std::string`
// draws a GCC 12 -Wrestrict false positive).
static std::string elided(const std::string& count, const char* what) {
  std::string s(1, '<');
  s += count;
  s += ' ';
  s += what;
  s += " elided>";
  return s;
}

static std::vector<FrameRef> shown_frames(const FrameTable& ft, StackId stack) {
  const FrameTable::Shown sh = ft.shown(stack);
  std::vector<FrameRef> out;
  out.reserve(sh.inner.size() + sh.outer.size() + 1);
  for (FrameId f : sh.inner) out.push_back(frame_ref(ft, f));
  if (sh.elided > 0) {
    FrameRef m;
    m.name = elided(std::to_string(sh.elided), "frames");
    m.label = elided(with_commas(sh.elided), "frames");
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

std::string category_name(const Attribution& a, int c) {
  return c >= 0 && size_t(c) < a.categories.size() ? a.categories[size_t(c)] : std::string();
}

// A kernel's scope stack, outermost to innermost: "iter 2 / backward / attn".
std::string scope_text(const FrameTable& ft, StackId stack) {
  const Trace& t = ft.trace();
  const FrameTable::Shown sh = ft.shown(stack);
  if (sh.inner.empty()) return "(outside every scope)";
  std::string out;
  auto add = [&](std::string_view part) {
    if (!out.empty()) out += " / ";
    out += part;
  };
  for (size_t i = sh.outer.size(); i-- > 0;) add(t.strings.get(t.frames[sh.outer[i]].name));
  if (sh.elided > 0) add(elided(with_commas(sh.elided), "scopes"));
  for (size_t i = sh.inner.size(); i-- > 0;) add(t.strings.get(t.frames[sh.inner[i]].name));
  return out;
}

std::optional<KernelRef> kernel_ref(const FrameTable& ft, int64_t idx) {
  if (idx < 0) return std::nullopt;
  const Trace& t = ft.trace();
  const KernelLaunch& k = t.kernels[size_t(idx)];
  KernelRef r;
  r.name = std::string(t.strings.get(k.name));
  r.display = kernel_display_name(r.name);
  r.time_us = k.time_us;
  r.stream = k.stream;
  r.scope = scope_text(ft, k.stack);
  r.stack = shown_frames(ft, k.stack);
  return r;
}

void resolve(const FrameTable& ft, const Attribution& a, const RuleSet& rules, SiteRow& row, size_t depth) {
  row.category_name = category_name(a, row.category);
  row.rule_name = row.rule >= 0 ? rules.rules[size_t(row.rule)].name : std::string();
  row.site = site_frames(ft, row.stack, depth);
}

void resolve(const FrameTable& ft, const Attribution& a, OpRow& row) {
  row.category_name = category_name(a, row.category);
  if (row.python != kNoFrame) row.python_frame = frame_ref(ft, row.python);
  row.stack_frames = shown_frames(ft, row.stack);
}

}  // namespace

void resolve_rows(Analysis& r) {
  const FrameTable& ft = *r.frames;
  for (DeviceAnalysis& d : r.devices) {
    for (SiteRow& s : d.sites) resolve(ft, d.attr, *r.rules, s, r.site_depth);
    for (SiteRow& s : d.unknown_sites) resolve(ft, d.attr, *r.rules, s, r.site_depth);
    for (std::vector<OpRow>* rows : {&d.by_op, &d.by_kernel})
      for (OpRow& o : *rows) resolve(ft, d.attr, o);
    resolve(ft, d.attr, d.other_ops);
    resolve(ft, d.attr, d.other_kernels);
    if (d.peak_index >= 0) {
      const FrameId uf = ft.user_frame(d.peak_stack);
      if (uf != kNoFrame) d.peak_user_frame = frame_ref(ft, uf);
    }
    d.kernel_before_ref = kernel_ref(ft, d.kernel_before);
    d.kernel_after_ref = kernel_ref(ft, d.kernel_after);
  }
  for (ExplainItem& it : r.explain) it.site = site_frames(ft, it.stack);
  if (r.timeline.present)
    for (TimelineMoment& m : r.timeline.moments) {
      const DeviceAnalysis* d = nullptr;
      for (const DeviceAnalysis& x : r.devices)
        if (x.device == r.timeline.device) d = &x;
      for (OpRow& o : m.placements)
        if (d) resolve(ft, d->attr, o);
    }
}

}  // namespace detail

Report report_view(const Analysis& a) {
  Report r;
  r.input_name = a.input_name;
  r.site_depth = a.site_depth;
  if (a.frames) r.allocator_settings = a.frames->trace().settings;
  r.source = a.source;
  r.events = a.events;
  r.history_truncated = a.history_truncated;
  r.truncation = a.truncation;
  r.has_history = a.has_history;
  r.peak_device = a.peak_device;
  r.warnings = a.warnings;
  r.explain_query = a.explain_query;
  r.explain = a.explain;
  r.explain_total = a.explain_total;
  r.kernel_launches = a.kernel_launches;
  r.device_memory = a.device_memory;
  r.outside_min_bytes = a.outside_min_bytes;
  r.outside_max_bytes = a.outside_max_bytes;
  r.outside = a.outside;
  r.profiler_trace = a.profiler_trace;
  r.ops = a.ops;
  r.host_memory_events = a.host_memory_events;
  r.host_peak_bytes = a.host_peak_bytes;
  r.join = a.join;
  r.kernel_join = a.kernel_join;
  r.timeline = a.timeline;
  r.activity = a.activity;
  r.ooms = a.ooms;
  for (const DeviceAnalysis& d : a.devices) {
    const DeviceReplay& rp = d.replay;
    DeviceView v;
    v.device = d.device;
    v.events = d.events;
    v.streams = rp.streams;
    v.has_trace = rp.has_trace;
    v.truncated = rp.truncated;
    v.truncation = rp.truncation;
    v.truncation_evidence = rp.truncation_evidence;
    v.pools = rp.pools;
    v.reported_totals = rp.reported_totals;
    v.peak_requested = rp.peak_requested;
    v.peak_allocated = rp.peak_allocated;
    v.peak_reserved = rp.peak_reserved;
    v.peak_active = rp.peak_active;
    v.allocated_at_peak = rp.peak_requested.event_index >= 0 ? rp.allocated[size_t(rp.peak_requested.event_index)]
                                                             : rp.baseline.allocated;
    v.active_at_peak = rp.peak_requested.event_index >= 0 ? rp.active[size_t(rp.peak_requested.event_index)]
                                                          : rp.baseline.active;
    v.baseline = rp.baseline;
    v.pre_trace_allocations = rp.pre_trace_allocations;
    v.allocated_estimated = rp.allocated_estimated;
    v.end_check = rp.end_check;
    v.inconsistencies = rp.inconsistencies;
    v.oom_events = rp.oom_events;
    v.peak_index = d.peak_index;
    v.peak_phase = d.peak_phase;
    v.peak_iteration = d.peak_iteration;
    v.has_peak_event = d.peak_index >= 0;
    v.peak_event = d.peak_event;
    v.peak_user_frame = d.peak_user_frame;
    v.category_names = d.attr.categories;
    v.categories = d.categories;
    v.category_allocations = d.category_allocations;
    v.category_sites = d.category_sites;
    v.findings = d.findings;
    v.growth = d.growth;
    v.peak_live_allocations = d.peak_live_allocations;
    v.peak_live_requested = d.peak_live_requested;
    v.sites = d.sites;
    v.other_sites = d.other_sites;
    v.unknown_sites = d.unknown_sites;
    v.frag = d.frag;
    v.first_time_us = d.first_time_us;
    v.last_time_us = d.last_time_us;
    v.kernel_before = d.kernel_before_ref;
    v.kernel_after = d.kernel_after_ref;
    v.at = d.at;
    v.window = d.window;
    if (d.window) {
      // The phases with an event in the window (an empty one: its moment in it).
      for (const PhaseSpan& ps : d.attr.spans) {
        const bool in = ps.empty() ? ps.start_event - 1 >= d.window->first_event && ps.start_event - 1 <= d.window->last_event
                                   : ps.end_event > d.window->first_event && ps.start_event <= d.window->last_event;
        if (in) v.phases.push_back(ps);
      }
    } else {
      v.phases = d.attr.spans;
    }
    v.phase_evidence = d.attr.phase_evidence;
    v.iterations = d.attr.iterations;
    v.has_ops = d.has_ops;
    v.by_op = d.by_op;
    v.by_kernel = d.by_kernel;
    v.other_ops = d.other_ops;
    v.other_kernels = d.other_kernels;
    v.ops_rows = d.ops_rows;
    v.kernel_rows = d.kernel_rows;
    v.kernels_only = d.kernels_only;
    v.kernel_coverage = d.kernel_coverage;
    r.devices.push_back(std::move(v));
  }
  return r;
}

Report analyze_report(const Trace& trace, const ReportOptions& opts) { return report_view(analyze(trace, opts)); }

}  // namespace snapdiff
