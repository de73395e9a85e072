// The analysis behind `snapdiff report`: replay each device, find the peaks,
// the allocation that set the allocated peak, the sites live at that moment,
// fragmentation at the peak, and the cross-check with the dump.
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <unordered_map>

#include "snapdiff/frame_names.hpp"
#include "analysis/profiler_views.hpp"
#include "analysis/report_view_build.hpp"
#include "snapdiff/analysis.hpp"

namespace snapdiff {

namespace detail {
// replay.cpp: replay_device() that also returns, in *at_peak, the allocator
// state after the allocated peak, replaying from a copy of the reconstructed
// initial state instead of reconstructing it again.
DeviceReplay replay_with_peak_state(const Trace& trace, const Device& dev, AllocatorState* at_peak);
}  // namespace detail

namespace {

}  // namespace

namespace {

// The plain-language explanation: statements computed from the data, largest
// first. Nothing here is keyed on file names; each statement appears only
// when its measured effect is material.
void explain(const FrameTable* frames, DeviceAnalysis& d) {
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
        const FrameTable& ft = *frames;
        f.site = ft.label(ft.user_frame(top));
        const FrameId callee = ft.python_callee(top);
        if (callee != kNoFrame) f.site_callee = ft.label(callee);
      }
      d.findings.push_back({Code::OptimizerTransient, rise, std::move(f)});
    }
  }
  // 3. What no rule could place.
  int64_t unk = cat("unknown");
  if (unk * 100 >= peak && unk > 0) {
    // Profiler traces: what was allocated before the profiler started and
    // never freed in the trace is one allocation whose sites are unknown.
    int64_t before = 0;
    if (d.replay.reported_totals)
      for (uint32_t id : a.live_at(d.peak_index)) {
        const Allocation& al = a.allocations[id];
        if (al.alloc_event < 0 && al.addr == 0 && a.categories[al.category] == "unknown") before += int64_t(al.requested);
      }
    d.findings.push_back({Code::Unknown, unk, UnknownFacts{unk, before}});
  }
  std::stable_sort(d.findings.begin() + 1, d.findings.end(),
                   [](const Finding& x, const Finding& y) { return x.bytes > y.bytes; });
}

bool parse_address(const std::string& q, uint64_t* out) {
  if (q.empty()) return false;
  char* end = nullptr;
  errno = 0;
  unsigned long long v = (q.size() > 2 && q[0] == '0' && (q[1] == 'x' || q[1] == 'X'))
                             ? std::strtoull(q.c_str() + 2, &end, 16)
                             : std::strtoull(q.c_str(), &end, 10);
  if (errno != 0 || !end || *end != '\0') return false;
  *out = v;
  return true;
}

// --explain ADDRESS|SITE: every allocation at that address, or every
// allocation whose stack has a frame matching SITE ("function", "file:line",
// or a substring of "function (file:line)"), grouped by stack and category.
void explain_query(const Trace& t, Analysis& r, const std::string& q) {
  r.explain_query = q;
  uint64_t addr = 0;
  const bool by_addr = parse_address(q, &addr);
  const RuleSet& rs = *r.rules;
  auto fill = [&](ExplainItem& it, const DeviceAnalysis& d, const Allocation& al) {
    const Attribution& a = d.attr;
    it.device = d.device;
    it.addr = al.addr;
    it.requested = al.requested;
    it.stack = al.stack;
    it.alloc_event = al.alloc_event;
    it.free_event = al.free_event;
    it.alloc_phase = a.phase_at(al.alloc_event);
    it.alloc_iteration = a.iteration_at(al.alloc_event);
    if (al.free_event != INT64_MAX) {
      it.free_phase = a.phase_at(al.free_event);
      it.free_iteration = a.iteration_at(al.free_event);
    }
    it.category = a.categories[al.category];
    if (al.rule >= 0) {
      it.rule = rs.rules[size_t(al.rule)].name;
      it.evidence = rs.rules[size_t(al.rule)].evidence;
    } else {
      it.rule = "(none)";
      it.evidence = "no rule matched: allocated in " + std::string(phase_name(it.alloc_phase)) +
                    (al.free_event == INT64_MAX ? ", never freed" : ", freed in " + std::string(phase_name(it.free_phase)));
    }
    it.bytes = int64_t(al.requested);
  };
  for (const DeviceAnalysis& d : r.devices) {
    const Attribution& a = d.attr;
    if (by_addr) {
      for (const Allocation& al : a.allocations) {
        if (al.addr != addr) continue;
        ++r.explain_total;
        if (r.explain.size() >= 50) continue;
        ExplainItem it;
        fill(it, d, al);
        r.explain.push_back(std::move(it));
      }
      continue;
    }
    // Stacks with a matching frame.
    std::unordered_map<StackId, bool> match;
    auto matches = [&](StackId s) {
      auto f = match.find(s);
      if (f != match.end()) return f->second;
      bool m = false;
      for (StackId x = s; x != 0 && !m; x = t.stacks.node(x).parent) {
        const Frame& fr = t.frames[t.stacks.node(x).frame];
        std::string name(t.strings.get(fr.name)), file(t.strings.get(fr.file));
        std::string base = file.substr(file.rfind('/') == std::string::npos ? 0 : file.rfind('/') + 1);
        std::string line = fr.line >= 0 ? std::to_string(fr.line) : "";
        m = name == q || base + ":" + line == q || file + ":" + line == q ||
            r.frames->label(t.stacks.node(x).frame).find(q) != std::string::npos;
      }
      match[s] = m;
      return m;
    };
    std::map<std::pair<StackId, std::string>, ExplainItem> groups;
    for (const Allocation& al : a.allocations) {
      if (al.stack == 0 || !matches(al.stack)) continue;
      ExplainItem it;
      fill(it, d, al);
      auto key = std::make_pair(al.stack, it.category + "/" + it.rule);
      auto g = groups.find(key);
      if (g == groups.end()) {
        groups.emplace(key, std::move(it));
      } else {
        ++g->second.count;
        g->second.bytes += int64_t(al.requested);
      }
    }
    std::vector<ExplainItem> items;
    for (auto& kv : groups) items.push_back(std::move(kv.second));
    std::sort(items.begin(), items.end(), [](const ExplainItem& x, const ExplainItem& y) { return x.bytes > y.bytes; });
    r.explain_total += items.size();
    for (auto& it : items)
      if (r.explain.size() < 50) r.explain.push_back(std::move(it));
  }
}

// The kernel launches around each device's peak, and the device memory the
// samples show outside the allocator.
void kernels_and_device_memory(const Trace& t, Analysis& r) {
  r.kernel_launches = t.kernels.size();
  for (DeviceAnalysis& d : r.devices) {
    if (t.kernels.empty() || d.peak_index < 0 || d.peak_event.time_us == kNoTime) continue;
    const int64_t tp = d.peak_event.time_us;
    int64_t before_t = 0, after_t = 0;
    // A linear pass: no reliance on the launches being sorted, and ties go to
    // the launch recorded last (before) or first (after).
    for (size_t i = 0; i < t.kernels.size(); ++i) {
      const KernelLaunch& k = t.kernels[i];
      if (k.device != d.device || k.time_us == kNoTime) continue;
      if (k.time_us <= tp) {
        if (d.kernel_before < 0 || k.time_us >= before_t) d.kernel_before = int64_t(i), before_t = k.time_us;
      } else if (d.kernel_after < 0 || k.time_us < after_t) {
        d.kernel_after = int64_t(i), after_t = k.time_us;
      }
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
    for (const DeviceAnalysis& d : r.devices)
      if (d.device == m.device && d.first_time_us != kNoTime) first = d.first_time_us;
    if (m.time_us != kNoTime && first != kNoTime) row.since_first_event_us = m.time_us - first;
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

}  // namespace

Analysis analyze(const Trace& trace, const ReportOptions& opts) {
  Analysis r;
  r.input_name = opts.input_name;
  r.source = trace.source;
  r.events = trace.event_count();
  r.rules = std::make_shared<RuleSet>(opts.rules ? *opts.rules : RuleSet::builtin());
  r.frames = std::make_shared<const FrameTable>(trace);
  const RuleSet* rules = r.rules.get();
  for (const Device& dev : trace.devices) {
    if (dev.events.empty() && dev.segments.empty()) continue;
    DeviceAnalysis dr;
    dr.device = dev.index;
    dr.events = dev.events.size();
    AllocatorState st;
    dr.replay = detail::replay_with_peak_state(trace, dev, &st);
    for (const Event& e : dev.events)
      if (e.time_us != kNoTime) {
        if (dr.first_time_us == kNoTime) dr.first_time_us = e.time_us;
        dr.last_time_us = e.time_us;
      }
    dr.attr = attribute(trace, *r.frames, dev, dr.replay, *rules);
    const Attribution& at = dr.attr;
    const PeakPoint& pk = dr.replay.peak_requested;
    dr.peak_index = pk.event_index;
    dr.peak_phase = at.phase_at(pk.event_index);
    dr.peak_iteration = at.iteration_at(pk.event_index);
    // The peak is the first maximum of the requested counter, so it is the
    // peak of the span it falls in: reuse that span's breakdown.
    if (pk.event_index >= 0 && at.spans[at.event_span[size_t(pk.event_index)]].peak_event == pk.event_index)
      dr.categories = at.spans[at.event_span[size_t(pk.event_index)]].categories;
    else
      dr.categories = at.categories_at({pk.event_index})[0];
    if (pk.event_index >= 0) {
      dr.peak_event = dev.events[size_t(pk.event_index)];
      dr.peak_stack = dr.peak_event.stack;
    }
    // Sites live at the peak, with their categories.
    std::unordered_map<uint64_t, uint64_t> block_of;
    for (const LiveAllocation& la : st.live) block_of[la.addr] = la.block_size;
    struct Acc {
      SiteRow row;
      std::vector<int64_t> by_cat;
      uint64_t largest = 0;
    };
    std::unordered_map<StackId, Acc> by_stack;
    std::unordered_map<StackId, Acc> unknown_by_stack;
    const int unknown = at.unknown_index();
    for (uint32_t id : at.live_at(pk.event_index)) {
      const Allocation& al = at.allocations[id];
      for (auto* m : {&by_stack, &unknown_by_stack}) {
        if (m == &unknown_by_stack && al.category != unknown) continue;
        Acc& acc = (*m)[al.stack];
        acc.row.stack = al.stack;
        acc.row.requested_bytes += int64_t(al.requested);
        auto b = block_of.find(al.addr);
        acc.row.block_bytes += int64_t(b != block_of.end() ? b->second : al.requested);
        ++acc.row.count;
        if (acc.by_cat.empty()) acc.by_cat.assign(at.categories.size(), 0);
        acc.by_cat[al.category] += int64_t(al.requested);
        if (al.requested >= acc.largest) {
          acc.largest = al.requested;
          acc.row.rule = al.rule;
          acc.row.alloc_phase = at.phase_at(al.alloc_event);
          acc.row.alloc_iteration = at.iteration_at(al.alloc_event);
          acc.row.freed = al.free_event != INT64_MAX;
          if (acc.row.freed) {
            acc.row.free_phase = at.phase_at(al.free_event);
            acc.row.free_iteration = at.iteration_at(al.free_event);
          }
        }
      }
      dr.peak_live_requested += int64_t(al.requested);
    }
    dr.peak_live_allocations = 0;
    // Allocations and distinct sites per category at the peak.
    dr.category_allocations.assign(at.categories.size(), 0);
    dr.category_sites.assign(at.categories.size(), 0);
    for (auto& kv : by_stack)
      for (size_t c = 0; c < kv.second.by_cat.size(); ++c)
        if (kv.second.by_cat[c] != 0) ++dr.category_sites[c];
    for (uint32_t id : at.live_at(pk.event_index)) ++dr.category_allocations[at.allocations[id].category];
    auto rows_of = [&](std::unordered_map<StackId, Acc>& m) {
      std::vector<SiteRow> rows;
      rows.reserve(m.size());
      for (auto& kv : m) {
        Acc& acc = kv.second;
        acc.row.category = int(std::max_element(acc.by_cat.begin(), acc.by_cat.end()) - acc.by_cat.begin());
        rows.push_back(acc.row);
      }
      std::sort(rows.begin(), rows.end(), [](const SiteRow& a, const SiteRow& b) {
        if (a.requested_bytes != b.requested_bytes) return a.requested_bytes > b.requested_bytes;
        return a.stack < b.stack;
      });
      return rows;
    };
    std::vector<SiteRow> rows = rows_of(by_stack);
    for (const SiteRow& row : rows) dr.peak_live_allocations += row.count;
    for (size_t i = 0; i < rows.size(); ++i) {
      if (i < opts.top_sites) {
        dr.sites.push_back(rows[i]);
      } else {
        dr.other_sites.requested_bytes += rows[i].requested_bytes;
        dr.other_sites.block_bytes += rows[i].block_bytes;
        dr.other_sites.count += rows[i].count;
      }
    }
    dr.unknown_sites = rows_of(unknown_by_stack);
    if (dr.unknown_sites.size() > opts.top_sites) dr.unknown_sites.resize(opts.top_sites);
    // Fragmentation at the peak.
    Fragmentation& fg = dr.frag;
    fg.reserved = st.counters.reserved;
    fg.allocated = st.counters.allocated;
    fg.requested = st.counters.requested;
    fg.pending_free = int64_t(st.pending_free_bytes);
    fg.internal = fg.allocated - fg.requested;
    fg.too_small_threshold =
        pk.event_index >= 0 ? allocator_round_size(dr.peak_event.size, trace.settings) : 0;
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
    explain(r.frames.get(), dr);
    detail::ops_at_peak(trace, *r.frames, dev, dr, opts.top_sites);
    r.devices.push_back(std::move(dr));
  }
  if (!opts.explain.empty()) explain_query(trace, r, opts.explain);
  kernels_and_device_memory(trace, r);
  // Top-level peak: the device with the highest allocated peak.
  for (size_t i = 0; i < r.devices.size(); ++i)
    if (r.devices[i].replay.peak_allocated.bytes > r.devices[r.peak_device].replay.peak_allocated.bytes)
      r.peak_device = i;
  // Profiler inputs: ops, the CPU allocator, the join, PyTorch's timeline.
  r.profiler_trace = is_profiler_trace(trace);
  r.ops = trace.ops.size();
  r.host_memory_events = trace.host_memory.size();
  for (const HostMemoryEvent& h : trace.host_memory) r.host_peak_bytes = std::max(r.host_peak_bytes, h.total_allocated);
  if (opts.join) r.join = *opts.join;
  if (opts.timeline) detail::compare_timeline(trace, r, *opts.timeline, opts.top_sites);

  // Warnings.
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
                                                         rp.pre_trace_allocations, rp.allocated_estimated});
    }
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
  detail::resolve_rows(r);
  return r;
}

}  // namespace snapdiff
