// The HTML explorer's data for one device (snapdiff/analysis/explorer_data.hpp).
#include "snapdiff/analysis/explorer_data.hpp"

#include <algorithm>
#include <climits>
#include <numeric>
#include <unordered_map>

#include "analysis/analyze/report_view_build.hpp"
#include "analysis/joins/profiler_views.hpp"
#include "snapdiff/analysis/analysis.hpp"
#include "snapdiff/analysis/kernel_join.hpp"

namespace snapdiff {

namespace {

int32_t clamp_event(int64_t e) {
  if (e < 0) return -1;
  if (e >= INT32_MAX) return INT32_MAX;
  return int32_t(e);
}

// Level-of-detail columns: bucket b of B covers events [b*N/B, (b+1)*N/B)
// and shows the event with the highest requested bytes in it.
void build_levels(const DeviceAnalysis& d, ExplorerRun& r) {
  const DeviceReplay& rp = d.replay;
  const int64_t n = r.events;
  if (n <= 0 || rp.requested.size() != size_t(n)) return;
  // 1024, 4096, 16384, 65536 columns (those fewer than the events), then
  // one column per event when there are at most 65536 of them.
  std::vector<uint32_t> sizes;
  for (uint64_t b = 1024; b <= 65536 && b < uint64_t(n); b *= 4) sizes.push_back(uint32_t(b));
  if (n <= 65536) sizes.push_back(uint32_t(n));
  std::vector<int64_t> reps;  // every level's shown events, for one sweep of categories_at()
  for (uint32_t B : sizes) {
    ExplorerLevel lv;
    lv.buckets = B;
    lv.event.assign(B, -1);
    lv.requested.assign(B, 0);
    lv.allocated.assign(B, 0);
    lv.reserved.assign(B, 0);
    for (uint32_t b = 0; b < B; ++b) {
      const int64_t lo = int64_t(uint64_t(b) * uint64_t(n) / B), hi = int64_t(uint64_t(b + 1) * uint64_t(n) / B);
      if (lo >= hi) continue;
      int64_t best = lo;
      int64_t amax = rp.allocated[size_t(lo)], rmax = rp.reserved[size_t(lo)];
      for (int64_t e = lo + 1; e < hi; ++e) {
        if (rp.requested[size_t(e)] > rp.requested[size_t(best)]) best = e;
        amax = std::max(amax, rp.allocated[size_t(e)]);
        rmax = std::max(rmax, rp.reserved[size_t(e)]);
      }
      lv.event[b] = int32_t(best);
      lv.requested[b] = rp.requested[size_t(best)];
      lv.allocated[b] = amax;
      lv.reserved[b] = rmax;
      reps.push_back(best);
    }
    r.levels.push_back(std::move(lv));
  }
  const size_t nc = r.categories.size();
  const std::vector<std::vector<int64_t>> cats = d.attr.categories_at(reps);
  size_t k = 0;
  for (ExplorerLevel& lv : r.levels) {
    lv.by_category.assign(size_t(lv.buckets) * nc, 0);
    for (uint32_t b = 0; b < lv.buckets; ++b) {
      if (lv.event[b] < 0) continue;
      std::copy(cats[k].begin(), cats[k].end(), lv.by_category.begin() + ptrdiff_t(size_t(b) * nc));
      ++k;
    }
  }
}

// Which allocations go into the page: all of them when they fit, else the
// ones live at the peak, then those of the peak's iteration, then the
// largest.
std::vector<uint32_t> chosen_allocations(const DeviceAnalysis& d, int64_t peak, const ExplorerOptions& o,
                                         std::string* note, int64_t* complete_from, int64_t* complete_to) {
  const std::vector<Allocation>& all = d.attr.allocations;
  std::vector<uint32_t> ids;
  if (all.size() <= o.max_allocations) {
    ids.resize(all.size());
    std::iota(ids.begin(), ids.end(), 0u);
    *complete_from = 0;
    *complete_to = INT64_MAX;
  } else {
    std::vector<uint8_t> keep(all.size(), 0);
    size_t kept = 0;
    auto take = [&](uint32_t i) {
      if (!keep[i] && kept < o.max_allocations) keep[i] = 1, ++kept;
    };
    for (uint32_t i = 0; i < all.size(); ++i)
      if (all[i].alloc_event <= peak && all[i].free_event > peak) take(i);
    int64_t lo = peak, hi = peak;
    const int it = d.attr.iteration_at(peak);
    for (const PhaseSpan& s : d.attr.spans)
      if (s.iteration == it && !s.empty()) lo = std::min(lo, s.start_event), hi = std::max(hi, s.end_event);
    for (uint32_t i = 0; i < all.size(); ++i)
      if ((all[i].alloc_event >= lo && all[i].alloc_event <= hi) || (all[i].free_event >= lo && all[i].free_event <= hi))
        take(i);
    // Every allocation live at an event of [lo, hi] is in: it is live at the
    // peak (which it spans), or allocated or freed within it — when the
    // budget held them all.
    if (kept < o.max_allocations) *complete_from = lo, *complete_to = hi;
    std::vector<uint32_t> rest;
    for (uint32_t i = 0; i < all.size(); ++i)
      if (!keep[i]) rest.push_back(i);
    const size_t room = o.max_allocations - kept;
    uint64_t smallest = UINT64_MAX;
    if (room > 0 && !rest.empty()) {
      const size_t m = std::min(room, rest.size());
      std::nth_element(rest.begin(), rest.begin() + ptrdiff_t(m - 1), rest.end(),
                       [&](uint32_t x, uint32_t y) { return all[x].requested > all[y].requested; });
      for (size_t j = 0; j < m; ++j) keep[rest[j]] = 1, smallest = std::min(smallest, all[rest[j]].requested);
    }
    for (uint32_t i = 0; i < all.size(); ++i)
      if (keep[i]) ids.push_back(i);
    *note = std::to_string(ids.size()) + " of " + std::to_string(all.size()) +
            " allocations are in this page: every one live at the peak, every one of the peak's iteration" +
            (smallest != UINT64_MAX ? ", and the largest of the rest (" + std::to_string(smallest) + " bytes and more)"
                                    : std::string()) +
            ". Elsewhere the timeline shows its summary, and a moment's figures come from the nearest summary column.";
  }
  std::stable_sort(ids.begin(), ids.end(),
                   [&](uint32_t x, uint32_t y) { return all[x].alloc_event < all[y].alloc_event; });
  return ids;
}

std::string evidence_text(const Analysis& a, const Attribution& at, const Allocation& al) {
  if (al.rule < 0) return "No rule matched its frames, phase or lifetime: its category is unknown.";
  const Rule& rule = a.rules->rules[size_t(al.rule)];
  std::string s = rule.evidence;
  const uint32_t used = rule.facts_any & al.facts;
  for (int f = 0; f < kFactCount; ++f)
    if ((used >> f & 1) && !at.fact_evidence[f].empty()) {
      if (!s.empty()) s.push_back(' ');
      s.append("Inferred ").append(kFactNames[f]).append(": ").append(at.fact_evidence[f]).push_back('.');
    }
  return s;
}

ExplorerState state_of(const AllocatorState& st, int64_t event, const std::string& label,
                       const std::unordered_map<int64_t, int32_t>& page_of_alloc_event,
                       const std::unordered_map<uint64_t, int32_t>& page_of_pre_addr) {
  ExplorerState s;
  s.label = label;
  s.event = event;
  for (const SegmentInfo& g : st.segments) {
    s.seg_addr.push_back(g.addr);
    s.seg_size.push_back(g.size);
    s.seg_stream.push_back(g.stream);
    s.seg_pool.push_back(int32_t(g.pool));
  }
  struct B {
    uint64_t addr, size;
    int32_t seg, alloc;
  };
  std::vector<B> blocks;
  for (const LiveAllocation& l : st.live) {
    int32_t page = -2;
    if (l.alloc_event >= 0) {
      auto it = page_of_alloc_event.find(l.alloc_event);
      if (it != page_of_alloc_event.end()) page = it->second;
    } else {
      auto it = page_of_pre_addr.find(l.addr);
      if (it != page_of_pre_addr.end()) page = it->second;
    }
    blocks.push_back({l.addr, l.block_size, l.segment, page});
  }
  for (const FreeBlockInfo& f : st.free_blocks) blocks.push_back({f.addr, f.size, f.segment, -1});
  std::sort(blocks.begin(), blocks.end(), [](const B& x, const B& y) { return x.addr < y.addr; });
  for (const B& b : blocks) {
    s.block_segment.push_back(b.seg);
    s.block_addr.push_back(b.addr);
    s.block_size.push_back(b.size);
    s.block_alloc.push_back(b.alloc);
  }
  return s;
}

}  // namespace

ExplorerRun explorer_run(const Analysis& a, const Trace& t, size_t device, const ExplorerOptions& o) {
  const DeviceAnalysis& d = a.devices.at(device);
  const Device* dev = t.find_device(d.device);
  ExplorerRun r;
  r.device = d.device;
  r.site_shown = o.site_shown;
  r.events = dev ? int64_t(dev->events.size()) : 0;
  const Attribution& at = d.attr;
  r.categories = at.categories;
  const DeviceReplay& rp = d.replay;

  // Phases and iterations.
  for (const PhaseSpan& s : at.spans) {
    if (s.empty()) continue;
    r.phases.push_back({s.start_event, s.end_event + 1, s.phase, s.iteration});
    if (r.iterations.empty() || r.iterations.back().iteration != s.iteration)
      r.iterations.push_back({s.start_event, s.end_event + 1, Phase::Other, s.iteration});
    else
      r.iterations.back().end = s.end_event + 1;
  }
  // The requested peak, exact.
  const int64_t pe = rp.peak_requested.event_index;
  r.peak_event = pe;
  if (pe >= 0 && size_t(pe) < rp.requested.size()) {
    r.peak_requested = rp.requested[size_t(pe)];
    r.peak_allocated = rp.allocated[size_t(pe)];
    r.peak_reserved = rp.reserved[size_t(pe)];
  }
  r.peak_by_category = at.categories_at({pe})[0];
  if (dev)
    for (size_t i = 0; i < dev->events.size(); ++i)
      if (dev->events[i].kind == EventKind::Oom) r.ooms.push_back({int64_t(i), dev->events[i].size});

  build_levels(d, r);
  if (dev && !r.levels.empty()) {
    bool times = !dev->events.empty();
    for (const Event& e : dev->events)
      if (e.time_us == kNoTime) {
        times = false;
        break;
      }
    r.has_times = times;
    if (times) {
      const int64_t t0 = dev->events.front().time_us;
      for (int32_t e : r.levels.back().event)
        r.column_time_us.push_back(e >= 0 ? double(dev->events[size_t(e)].time_us) - double(t0) : -1.0);  // no int64 overflow: times may span the whole range
    }
  }

  // The allocations.
  r.total_allocations = at.allocations.size();
  const std::vector<uint32_t> ids = chosen_allocations(d, pe, o, &r.allocations_note, &r.complete_from, &r.complete_to);
  r.complete_to = std::min(r.complete_to, r.events - 1);
  const FrameTable& ft = *a.frames;
  std::vector<int32_t> node_of(t.stacks.size(), -1);  // trace stack -> page node
  node_of[0] = 0;
  r.stack_parent.push_back(-1);
  r.stack_frame.push_back(-1);
  r.stack_site.push_back(-1);
  std::unordered_map<FrameId, int32_t> frame_of;
  std::vector<StackId> chain;
  auto node = [&](StackId s) {
    chain.clear();
    for (StackId x = s; node_of[x] < 0; x = t.stacks.node(x).parent) chain.push_back(x);
    for (size_t i = chain.size(); i-- > 0;) {
      const StackTable::Node& nd = t.stacks.node(chain[i]);
      auto f = frame_of.find(nd.frame);
      if (f == frame_of.end()) {
        f = frame_of.emplace(nd.frame, int32_t(r.frame_labels.size())).first;
        r.frame_labels.push_back(ft.label(nd.frame));
        r.frame_kinds.push_back(ft.internal(nd.frame) ? FrameKind::Internal : ft.kind(nd.frame));
      }
      node_of[chain[i]] = int32_t(r.stack_parent.size());
      r.stack_parent.push_back(node_of[nd.parent]);
      r.stack_frame.push_back(f->second);
      r.stack_site.push_back(-1);
    }
    return node_of[s];
  };
  std::unordered_map<uint64_t, uint16_t> evidence_of;  // (rule, used facts, category)
  std::unordered_map<int64_t, int32_t> page_of_alloc_event;
  std::unordered_map<uint64_t, int32_t> page_of_pre_addr;
  const size_t n = ids.size();
  r.alloc_event.reserve(n);
  r.free_event.reserve(n);
  r.size.reserve(n);
  r.addr.reserve(n);
  r.category.reserve(n);
  r.stack.reserve(n);
  r.evidence.reserve(n);
  for (uint32_t id : ids) {
    const Allocation& al = at.allocations[id];
    const int32_t page = int32_t(r.alloc_event.size());
    if (al.alloc_event >= 0)
      page_of_alloc_event[al.alloc_event] = page;
    else
      page_of_pre_addr[al.addr] = page;
    r.alloc_event.push_back(clamp_event(al.alloc_event));
    r.free_event.push_back(al.free_event == INT64_MAX ? INT32_MAX : clamp_event(al.free_event));
    r.size.push_back(al.requested);
    r.addr.push_back(al.addr);
    r.category.push_back(al.category);
    const int32_t nd = al.stack < node_of.size() ? node(al.stack) : 0;
    r.stack.push_back(nd);
    if (r.stack_site[size_t(nd)] < 0) {
      r.stack_site[size_t(nd)] = int32_t(r.sites.size());
      r.sites.push_back(detail::site_frames(ft, al.stack, o.site_depth));
    }
    const uint32_t used = al.rule >= 0 ? a.rules->rules[size_t(al.rule)].facts_any & al.facts : 0;
    const uint64_t key = (uint64_t(uint16_t(al.rule)) << 48) | (uint64_t(used) << 16) | al.category;
    auto ev = evidence_of.find(key);
    if (ev == evidence_of.end()) {
      ExplorerEvidence e;
      e.category = al.category;
      e.rule = al.rule >= 0 ? a.rules->rules[size_t(al.rule)].name : "";
      e.text = evidence_text(a, at, al);
      const uint16_t idx = uint16_t(std::min<size_t>(r.evidences.size(), UINT16_MAX));
      if (r.evidences.size() < UINT16_MAX) r.evidences.push_back(std::move(e));
      ev = evidence_of.emplace(key, idx).first;
    }
    r.evidence.push_back(ev->second);
  }
  // Kernels: an input with launches and no ops (a joined kernel recording).
  if (dev && t.ops.empty() && !t.kernels.empty()) {
    const StreamLaunches launches(t, a.kernel_join.recording_first_us);
    const std::vector<AllocationKernels> ks = allocation_kernels(launches, *dev, at, ids);
    std::unordered_map<int64_t, int32_t> name_of;
    r.kernel.reserve(n);
    for (const AllocationKernels& k : ks) {
      if (k.kernel < 0) {
        r.kernel.push_back(-1);
        continue;
      }
      auto it = name_of.find(k.kernel);
      if (it == name_of.end()) {
        it = name_of.emplace(k.kernel, int32_t(r.kernels.size())).first;
        r.kernels.push_back(detail::kernel_display_name(t.strings.get(t.kernels[size_t(k.kernel)].name)));
      }
      r.kernel.push_back(it->second);
    }
  }
  // The allocator's state at the peak, the OOMs and each iteration's peak
  // (replays have a block layout; profiler traces do not), in one replay.
  if (dev && !dev->from_profiler() && o.max_states > 0) {
    std::vector<std::pair<int64_t, std::string>> moments;
    if (pe >= 0) moments.push_back({pe, "the peak"});
    for (size_t i = 0; i < r.ooms.size(); ++i) moments.push_back({r.ooms[i].event, "OOM " + std::to_string(i + 1)});
    for (const ExplorerPhase& it : r.iterations) {
      if (it.iteration <= 0 || it.end <= it.start) continue;
      int64_t best = it.start;
      for (int64_t e = it.start; e < it.end && size_t(e) < rp.requested.size(); ++e)
        if (rp.requested[size_t(e)] > rp.requested[size_t(best)]) best = e;
      moments.push_back({best, "iteration " + std::to_string(it.iteration) + "'s peak"});
    }
    if (moments.size() > o.max_states) moments.resize(o.max_states);
    std::sort(moments.begin(), moments.end());
    moments.erase(std::unique(moments.begin(), moments.end(),
                              [](const auto& x, const auto& y) { return x.first == y.first; }),
                  moments.end());
    std::vector<int64_t> at;
    for (const auto& m : moments) at.push_back(m.first);
    const std::vector<AllocatorState> sts = allocator_states_at(t, *dev, at);
    for (size_t i = 0; i < moments.size(); ++i)
      r.states.push_back(state_of(sts[i], moments[i].first, moments[i].second, page_of_alloc_event, page_of_pre_addr));
  }
  return r;
}

}  // namespace snapdiff
