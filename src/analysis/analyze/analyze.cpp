// The analysis behind `snapdiff report`: replay each device, find the peaks,
// the allocation that set the allocated peak, the sites live at that moment,
// fragmentation at the peak, and the cross-check with the dump.
#include <algorithm>
#include <functional>
#include <future>
#include <system_error>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <unordered_map>
#include <utility>

#include "snapdiff/model/frame_names.hpp"
#include "analysis/joins/profiler_views.hpp"
#include "analysis/joins/kernel_views.hpp"
#include "analysis/analyze/analyze_parts.hpp"
#include "analysis/analyze/report_view_build.hpp"
#include "analysis/engine/rule_matcher.hpp"
#include "snapdiff/analysis/analysis.hpp"
#include "snapdiff/analysis/outside.hpp"
#include "snapdiff/error.hpp"
#include "util/quote_value.hpp"

namespace snapdiff {

namespace detail {
// replay.cpp: replay_device() that also returns, in *at_peak, the allocator
// state after the allocated peak, replaying from a copy of the reconstructed
// initial state instead of reconstructing it again.
DeviceReplay replay_with_peak_state(const Trace& trace, const Device& dev, AllocatorState* at_peak);
}  // namespace detail

namespace {

// The kernel launches around each device's peak, and the device memory the
// samples show outside the allocator.
void kernels_and_device_memory(const Trace& t, Analysis& r) {
  r.kernel_launches = t.kernels.size();
  std::unordered_map<int, size_t> by_index;  // device index -> r.devices
  for (size_t i = 0; i < r.devices.size(); ++i) by_index.emplace(r.devices[i].device, i);
  // One linear pass: no reliance on the launches being sorted, and ties go
  // to the launch recorded last (before) or first (after).
  std::vector<int64_t> before_t(r.devices.size(), 0), after_t(r.devices.size(), 0);
  for (size_t i = 0; i < t.kernels.size(); ++i) {
    const KernelLaunch& k = t.kernels[i];
    if (k.time_us == kNoTime) continue;
    auto it = by_index.find(k.device);
    if (it == by_index.end()) continue;
    DeviceAnalysis& d = r.devices[it->second];
    if (d.peak_index < 0 || d.peak_event.time_us == kNoTime) continue;
    const int64_t tp = d.peak_event.time_us;
    int64_t& bt = before_t[it->second];
    int64_t& at = after_t[it->second];
    if (k.time_us <= tp) {
      if (d.kernel_before_index < 0 || k.time_us >= bt) d.kernel_before_index = int64_t(i), bt = k.time_us;
    } else if (d.kernel_after_index < 0 || k.time_us < at) {
      d.kernel_after_index = int64_t(i), at = k.time_us;
    }
  }
  if (t.device_memory.empty()) return;
  int64_t first_any = kNoTime;
  for (const DeviceAnalysis& d : r.devices)
    if (d.first_time_us != kNoTime && (first_any == kNoTime || d.first_time_us < first_any)) first_any = d.first_time_us;
  for (const DeviceMemorySample& m : t.device_memory) {
    DeviceMemoryRow row;
    row.device = m.device;
    row.label = std::string(t.strings.get(m.label));
    row.time_us = m.time_us;
    int64_t first = first_any;
    if (auto it = by_index.find(m.device); it != by_index.end() && r.devices[it->second].first_time_us != kNoTime)
      first = r.devices[it->second].first_time_us;
    if (m.time_us != kNoTime && first != kNoTime) {
      // Saturated at the int64 range (times at its extremes are crafted, not measured).
      int64_t d = 0;
      if (__builtin_sub_overflow(m.time_us, first, &d)) d = m.time_us > first ? INT64_MAX : INT64_MIN + 1;
      row.since_first_event_us = d == INT64_MIN ? INT64_MIN + 1 : d;
    }
    row.free_bytes = m.free_bytes;
    row.total_bytes = m.total_bytes;
    row.used_bytes = int64_t(m.total_bytes) - int64_t(m.free_bytes);
    row.reserved_bytes = int64_t(m.reserved_bytes);
    row.outside_bytes = row.used_bytes - row.reserved_bytes;
    if (r.device_memory.empty() || row.outside_bytes < r.outside_min_bytes) r.outside_min_bytes = row.outside_bytes;
    if (r.device_memory.empty() || row.outside_bytes > r.outside_max_bytes) r.outside_max_bytes = row.outside_bytes;
    r.device_memory.push_back(std::move(row));
  }
}

// Device memory outside the allocator from the driver calls: each device's
// allocator side is its replay's reserved bytes over time and its peaks.
void outside_the_allocator(const Trace& t, Analysis& r) {
  if (t.driver_memory.empty()) return;
  std::vector<AllocatorSide> sides;
  for (const DeviceAnalysis& d : r.devices) {
    const Device* dev = t.find_device(d.device);
    if (!dev) continue;
    AllocatorSide s;
    s.device = d.device;
    s.baseline_reserved = d.replay.baseline.reserved;
    s.first_time_us = d.first_time_us;
    s.peak_time_us = d.peak_index >= 0 ? d.peak_event.time_us : kNoTime;
    s.peak_allocated = d.replay.peak_allocated.bytes;
    s.peak_reserved = d.replay.peak_reserved.bytes;
    std::vector<std::pair<int64_t, int64_t>> pts;
    for (size_t i = 0; i < dev->events.size() && i < d.replay.reserved.size(); ++i)
      if (dev->events[i].time_us != kNoTime) pts.push_back({dev->events[i].time_us, d.replay.reserved[i]});
    std::stable_sort(pts.begin(), pts.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    s.times.reserve(pts.size());
    s.reserved.reserve(pts.size());
    for (const auto& [tm, res] : pts) s.times.push_back(tm), s.reserved.push_back(res);
    sides.push_back(std::move(s));
  }
  r.outside = outside_allocator(t, sides);
}

// outside_allocator: per device, the largest holder outside the allocator at
// the peak (a library or another process; the context is left out: it is
// always there) when it holds 5% of the total device peak or more.
void outside_warnings(Analysis& r) {
  for (const OutsideDevice& d : r.outside) {
    if (!d.device_peak_known || d.device_peak.bytes <= 0) continue;
    const OutsideRow* top = nullptr;
    for (const OutsideRow& row : d.rows) {
      const bool allocator = row.caller == MemoryCaller::PyTorch && row.pid == d.snapshot_pid && d.snapshot_pid != 0;
      if (row.context || allocator || !row.at_peak_known || row.at_peak <= 0) continue;
      if (!top || row.at_peak > top->at_peak) top = &row;
    }
    if (!top || top->at_peak < d.device_peak.bytes / 20) continue;
    r.warnings.push_back({Code::OutsideAllocator, d.device,
                          OutsideFacts{outside_row_name(*top), d.pids.size() > 1 ? top->pid : 0, top->at_peak,
                                       d.device_peak.bytes}});
  }
}

// Fragmentation at the peak: the allocator state there, its free blocks by
// size, and those too small for the request that set the peak.
Fragmentation fragmentation_at_peak(const AllocatorState& st, const DeviceAnalysis& dr, const AllocatorSettings& settings) {
  const PeakPoint& pk = dr.replay.peak_requested;
  Fragmentation fg;
  fg.reserved = st.counters.reserved;
  fg.allocated = st.counters.allocated;
  fg.requested = st.counters.requested;
  fg.pending_free = int64_t(st.pending_free_bytes);
  fg.pending_free_requested = int64_t(st.pending_free_requested);
  // Requested bytes count a block until its free completes, allocated bytes
  // until the user frees it: the rounding and unsplit remainders are the
  // allocated blocks' part.
  fg.internal = fg.allocated - (fg.requested - fg.pending_free_requested);
  fg.too_small_threshold =
      pk.event_index >= 0 ? allocator_round_size(dr.peak_event.size, settings) : 0;
  fg.classes = {{"< 1 MiB", uint64_t(1) << 20},
                {"1-20 MiB", uint64_t(20) << 20},
                {"20-200 MiB", uint64_t(200) << 20},
                {">= 200 MiB", UINT64_MAX}};
  for (const FreeBlockInfo& fb : st.free_blocks) {
    fg.free_cached = int64_t(uint64_t(fg.free_cached) + fb.size);
    ++fg.free_blocks;
    fg.largest_free_block = std::max(fg.largest_free_block, fb.size);
    if (fb.size < fg.too_small_threshold) fg.too_small_bytes = int64_t(uint64_t(fg.too_small_bytes) + fb.size);
    for (FreeSizeClass& c : fg.classes)
      if (fb.size < c.max_bytes) {
        ++c.blocks;
        c.bytes = int64_t(uint64_t(c.bytes) + fb.size);
        break;
      }
  }
  return fg;
}

// One device: the replay, the attribution, the peak and what is live there,
// fragmentation, the findings and, for inputs with ops, the bytes by op.
// The counters right after event i (-1: before the first event).
// The gradients of `live`, by tensor size: largest size first.
std::vector<GradientSize> gradient_sizes(const Attribution& at, const std::vector<uint32_t>& live) {
  const auto g = std::find(at.categories.begin(), at.categories.end(), "gradient");
  if (g == at.categories.end()) return {};
  const int gradient = int(g - at.categories.begin());
  std::map<uint64_t, GradientSize, std::greater<>> by_size;
  for (uint32_t id : live) {
    const Allocation& al = at.allocations[id];
    if (al.category != gradient) continue;
    GradientSize& s = by_size[al.requested];
    s.tensor_bytes = al.requested;
    ++s.count;
    s.requested_bytes += int64_t(al.requested);
  }
  std::vector<GradientSize> out;
  out.reserve(by_size.size());
  for (auto& kv : by_size) out.push_back(kv.second);
  return out;
}

Counters counters_at(const DeviceReplay& rp, int64_t i) {
  if (i < 0 || size_t(i) >= rp.requested.size()) return rp.baseline;
  return {rp.requested[size_t(i)], rp.allocated[size_t(i)], rp.reserved[size_t(i)], rp.active[size_t(i)]};
}

// --window: the states it covers, and the replay's four peaks within them.
void apply_window(const Device& dev, const WindowSpec& w, DeviceAnalysis& dr) {
  DeviceReplay& rp = dr.replay;
  const int64_t n = int64_t(dev.events.size());
  int64_t lo = -1, hi = n - 1;
  if (!w.from.empty()) lo = resolve_moment(w.from, dev, rp, dr.attr, MomentSpec::Edge::Start, -1, INT64_MAX, "--window").event;
  if (!w.to.empty()) hi = resolve_moment(w.to, dev, rp, dr.attr, MomentSpec::Edge::End, -1, INT64_MAX, "--window").event;
  if (hi < lo)
    throw UsageError("--window " + quote_value(w.text) + ": its end (" + (hi < 0 ? std::string("before the first event") : "event " + std::to_string(hi)) +
                     ") comes before its start (event " + std::to_string(lo) + ") on cuda:" + std::to_string(dev.index));
  rp.peak_requested = peak_between(dev, rp.requested, rp.baseline.requested, lo, hi);
  rp.peak_allocated = peak_between(dev, rp.allocated, rp.baseline.allocated, lo, hi);
  rp.peak_reserved = peak_between(dev, rp.reserved, rp.baseline.reserved, lo, hi);
  rp.peak_active = peak_between(dev, rp.active, rp.baseline.active, lo, hi);
  WindowView v;
  v.spec = w.text;
  v.first_event = lo;
  v.last_event = hi;
  if (lo >= 0) v.first_time_us = dev.events[size_t(lo)].time_us;
  if (hi >= 0) v.last_time_us = dev.events[size_t(hi)].time_us;
  dr.window = v;
}

DeviceAnalysis analyze_device(const Trace& trace, const Device& dev, const Analysis& r, const ReportOptions& opts,
                              detail::RuleMatcher& matcher, const detail::OpTree& ops, const StreamLaunches& launches,
                              const MemoryTimeline* timeline, int timeline_rules) {
  const size_t top_sites = opts.top_sites;
  const RuleSet* rules = r.rules.get();
  DeviceAnalysis dr;
  dr.device = dev.index;
  dr.events = dev.events.size();
  AllocatorState st;
  // The replay on a thread of its own; the attribution waits for it only
  // where it needs its counters. An error is the replay's first, as when
  // both run on one thread. (No thread to be had: both on this one.)
  std::future<DeviceReplay> replay;
  if (opts.threads > 1 && !dev.from_profiler()) {
    try {
      replay = std::async(std::launch::async, [&] { return detail::replay_with_peak_state(trace, dev, &st); });
    } catch (const std::system_error&) {
    }
  }
  if (replay.valid()) {
    bool asked = false;  // replay.get() called (it may be called once)
    const std::function<const DeviceReplay&()> wait = [&]() -> const DeviceReplay& {
      if (!asked) asked = true, dr.replay = replay.get();
      return dr.replay;
    };
    try {
      dr.attr = detail::attribute(trace, *r.frames, dev, wait, *rules, matcher);
      wait();
    } catch (...) {
      if (!asked) replay.get();  // rethrows the replay's own error, if any
      throw;
    }
  } else {
    dr.replay = detail::replay_with_peak_state(trace, dev, &st);
    dr.attr = detail::attribute(trace, *r.frames, dev, dr.replay, *rules, matcher);
  }
  for (const Event& e : dev.events)
    if (e.time_us != kNoTime) {
      if (dr.first_time_us == kNoTime) dr.first_time_us = e.time_us;
      dr.last_time_us = e.time_us;
    }
  // --memory-timeline: PyTorch's categories of the tensors from before profiling.
  if (timeline && &dev == detail::timeline_device(trace))
    dr.timeline_pre_trace = detail::timeline_pre_trace(trace, *r.frames, dev, dr.attr, *timeline, *rules, timeline_rules);
  // Memory at each phase's boundaries.
  for (PhaseSpan& s : dr.attr.spans) {
    const Counters a = counters_at(dr.replay, s.start_event - 1), b = counters_at(dr.replay, s.empty() ? s.start_event - 1 : s.end_event);
    s.end_requested = b.requested;
    s.start_allocated = a.allocated, s.end_allocated = b.allocated;
    s.start_reserved = a.reserved, s.end_reserved = b.reserved;
  }
  const int64_t global_peak = dr.replay.peak_requested.event_index;
  if (!opts.window.empty()) apply_window(dev, opts.window, dr);
  const PeakPoint& pk = dr.replay.peak_requested;
  // Growth across iterations; what leaking sites keep becomes `leaked`.
  dr.growth = detail::find_growth(*r.frames, dev, dr.replay, dr.attr, pk.event_index);
  const Attribution& at = dr.attr;
  dr.peak_index = pk.event_index;
  dr.peak_phase = at.phase_at(pk.event_index);
  dr.peak_iteration = at.iteration_at(pk.event_index);
  // The moment the categories, sites and live set are taken at: the peak,
  // or --at's.
  int64_t moment = pk.event_index;
  if (!opts.at.empty()) {
    const int64_t lo = dr.window ? dr.window->first_event : -1, hi = dr.window ? dr.window->last_event : INT64_MAX;
    moment = resolve_moment(opts.at, dev, dr.replay, at, MomentSpec::Edge::Peak, lo, hi).event;
    MomentView mv;
    mv.spec = opts.at.text;
    mv.event_index = moment;
    if (moment >= 0) mv.time_us = dev.events[size_t(moment)].time_us;
    mv.phase = at.phase_at(moment);
    mv.iteration = at.iteration_at(moment);
    mv.counters = counters_at(dr.replay, moment);
    dr.at = mv;
  }
  if (moment != global_peak) st = allocator_state_at(trace, dev, moment);
  // The peak is the first maximum of the requested counter, so it is the
  // peak of the span it falls in: reuse that span's breakdown.
  if (moment >= 0 && at.spans[at.event_span[size_t(moment)]].peak_event == moment)
    dr.categories = at.spans[at.event_span[size_t(moment)]].categories;
  else
    dr.categories = at.categories_at({moment})[0];
  if (pk.event_index >= 0) {
    dr.peak_event = dev.events[size_t(pk.event_index)];
    dr.peak_stack = dr.peak_event.stack;
    dr.reached_by = {dr.peak_event.kind, dr.peak_event.size, dr.peak_event.addr, dr.peak_event.stream};
  }
  // Sites live at the peak, with their categories.
  std::unordered_map<uint64_t, uint64_t> block_of;
  for (const LiveAllocation& la : st.live) block_of[la.addr] = la.block_size;
  detail::SiteRows by_stack(at.categories.size()), unknown_by_stack(at.categories.size());
  const int unknown = at.unknown_index();
  const std::vector<uint32_t> live = at.live_at(moment);
  for (uint32_t id : live) {
    const Allocation& al = at.allocations[id];
    // (A profiler trace's sizes are block sizes; what it allocated before
    // its first event may be several allocations at no address.)
    auto b = dev.from_profiler() ? block_of.end() : block_of.find(al.addr);
    const int64_t block = int64_t(b != block_of.end() ? b->second : al.requested);
    by_stack.add(at, al, block);
    if (al.category == unknown) unknown_by_stack.add(at, al, block);
    if (al.category == unknown && al.alloc_event < 0 && al.free_event == INT64_MAX)
      dr.unknown_held_from_before += int64_t(al.requested);
    dr.peak_live_requested += int64_t(al.requested);
  }
  dr.peak_live_allocations = live.size();
  // Allocations and distinct sites per category at the peak.
  dr.category_allocations.assign(at.categories.size(), 0);
  dr.category_sites = by_stack.sites_per_category();
  for (uint32_t id : live) ++dr.category_allocations[at.allocations[id].category];
  dr.gradient_sizes = gradient_sizes(at, live);
  detail::keep_top(*r.frames, at, *rules, by_stack.rows(), top_sites, opts.site_depth, dr.sites, dr.other_sites);
  SiteRow unknown_rest;  // (not shown)
  detail::keep_top(*r.frames, at, *rules, unknown_by_stack.rows(), top_sites, opts.site_depth, dr.unknown_sites,
                   unknown_rest);
  dr.frag = fragmentation_at_peak(st, dr, trace.settings);
  // The findings explain the peak: not stated for another moment.
  if (!dr.at) detail::state_findings(*r.frames, dr);
  // The rows by op stay at the peak (they are titled so).
  detail::ops_at_peak(trace, *r.frames, ops, dev, dr, top_sites);
  detail::kernels_at_peak(trace, *r.frames, launches, dev, dr, top_sites);
  return dr;
}

}  // namespace

namespace {
Analysis analyze_trace(const Trace& trace, const ReportOptions& opts, Joins&& joins);
}  // namespace

Analysis analyze(const Trace& trace, const ReportOptions& opts, Joins joins) {
  // An input error the analysis finds (a running total beyond what a device
  // holds) names the input, as a reader's does.
  try {
    return analyze_trace(trace, opts, std::move(joins));
  } catch (InputError& e) {
    if (e.file().empty()) e.set_file(opts.input_name);
    throw;
  }
}

namespace {
Analysis analyze_trace(const Trace& trace, const ReportOptions& opts, Joins&& joins) {
  {
    size_t used = 0;
    for (const Device& dev : trace.devices) used += !(dev.events.empty() && dev.segments.empty());
    if (used > kMaxDevices) {
      InputError e(std::to_string(used) + " devices hold memory: snapdiff analyses at most " +
                   std::to_string(kMaxDevices) + " (PyTorch's device indices are 8-bit)");
      e.set_file(opts.input_name);
      throw e;
    }
  }
  Analysis r;
  r.input_name = opts.input_name;
  r.site_depth = opts.site_depth;
  r.source = trace.source;
  r.events = trace.event_count();
  r.join = std::move(joins.trace);
  r.kernel_join = std::move(joins.kernels);
  r.rules = std::make_shared<RuleSet>(opts.rules ? *opts.rules : RuleSet::builtin());
  const MemoryTimeline* timeline = opts.timeline && opts.timeline->raw && is_profiler_trace(trace) ? opts.timeline : nullptr;
  const int timeline_rules = timeline ? detail::add_timeline_rules(*r.rules) : -1;
  r.frames = std::make_shared<const FrameTable>(trace);
  // The rules' verdicts on frames and stacks are the trace's, not a device's.
  detail::RuleMatcher matcher(trace, *r.frames, *r.rules);
  const detail::OpTree ops(trace);
  const StreamLaunches launches(trace, r.kernel_join.recording_first_us);
  for (const Device& dev : trace.devices) {
    if (dev.events.empty() && dev.segments.empty()) continue;
    r.devices.push_back(analyze_device(trace, dev, r, opts, matcher, ops, launches, timeline, timeline_rules));
  }
  if (!opts.explain.empty()) detail::explain_query(trace, r, opts.explain);
  kernels_and_device_memory(trace, r);
  outside_the_allocator(trace, r);
  // Top-level peak: the device with the highest allocated peak.
  for (size_t i = 0; i < r.devices.size(); ++i)
    if (r.devices[i].replay.peak_allocated.bytes > r.devices[r.peak_device].replay.peak_allocated.bytes)
      r.peak_device = i;
  // Profiler inputs: ops, the CPU allocator, PyTorch's timeline.
  r.profiler_trace = is_profiler_trace(trace);
  r.ops = trace.ops.size();
  r.host_memory_events = trace.host_memory.size();
  for (const HostMemoryEvent& h : trace.host_memory) r.host_peak_bytes = std::max(r.host_peak_bytes, h.total_allocated);
  if (opts.timeline) detail::compare_timeline(trace, r, *opts.timeline, opts.top_sites);
  if (r.profiler_trace && r.devices.empty()) detail::trace_activity(trace, r, opts.top_sites);

  detail::explain_ooms(trace, r, opts.top_sites);
  detail::add_warnings(trace, r);
  outside_warnings(r);
  detail::finish_views(trace, r);
  return r;
}
}  // namespace

}  // namespace snapdiff
