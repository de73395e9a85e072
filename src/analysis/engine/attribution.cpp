// attribute(): pairs allocations with their frees, then runs the three jobs
// of attribution_parts.hpp: phases (attribution_phases.cpp), categories from
// the rules (attribution_rules.cpp) and inferences about them
// (attribution_infer.cpp). See include/snapdiff/analysis/attribution.hpp and
// docs/attribution.md.
#include "snapdiff/analysis/attribution.hpp"

#include <algorithm>

#include "analysis/engine/addr_map.hpp"
#include "analysis/engine/attribution_parts.hpp"
#include "util/hugepages.hpp"

namespace snapdiff {

namespace {

class Attributor {
 public:
  Attributor(const Trace& t, const FrameTable& ft, const Device& d, const std::function<const DeviceReplay&()>& rp,
             const RuleSet& rs, detail::RuleMatcher& m)
      : t_(t), ft_(ft), d_(d), replay_(rp), rs_(rs), m_(m) {}

  // The order of the steps: what needs the replay comes last where it can,
  // so that the rest runs while the replay finishes on another thread.
  Attribution run() {
    a_.categories = rs_.categories;
    // Pools are the dump's (the history does not name them): with none but
    // the default one, every allocation is in pool 0 without asking the replay.
    for (const Segment& sg : d_.segments) private_pools_ |= sg.pool_id[0] != 0 || sg.pool_id[1] != 0;
    build_allocations();
    detail::find_phases(t_, d_, m_, replay_, alloc_of_event_, a_);
    a_.event_alloc = std::move(alloc_of_event_);
    categorize();
    return std::move(a_);
  }

 private:
  // ---- allocations -------------------------------------------------------
  void build_allocations() {
    const auto& ev = d_.events;
    detail::assign_huge(alloc_of_event_, ev.size(), UINT32_MAX);
    size_t allocs = 0;
    for (const Event& e : ev) allocs += e.kind == EventKind::Alloc || e.kind == EventKind::FreeRequested;
    for (const Segment& sg : d_.segments) allocs += sg.block_count;
    a_.allocations.reserve(allocs);
    detail::advise_hugepages(a_.allocations.data(), allocs * sizeof(Allocation));
    detail::AddrMap live;
    bool completions = false;
    for (const Event& e : ev)
      if (e.kind == EventKind::FreeCompleted) {
        completions = true;
        break;
      }
    // An allocation made before the history, known from its free event i
    // (user's free at free_requested: i, or -1 when that too came before).
    auto before_history = [&](const Event& e, size_t i, int64_t free_requested) {
      Allocation al;
      al.addr = e.addr;
      al.requested = e.size;
      al.stack = e.stack;
      al.alloc_event = -1;
      al.free_requested_event = free_requested;
      const uint32_t id = uint32_t(a_.allocations.size());
      alloc_of_event_[i] = id;
      a_.allocations.push_back(al);
      return id;
    };
    auto close = [&](uint32_t id, size_t i) {
      a_.allocations[id].free_event = int64_t(i);
      alloc_of_event_[i] = id;
      live.erase(a_.allocations[id].addr);
    };
    for (size_t i = 0; i < ev.size(); ++i) {
      const Event& e = ev[i];
      if (e.kind == EventKind::Alloc) {
        uint32_t old = live.find(e.addr);
        if (old != detail::AddrMap::kNone) a_.allocations[old].free_event = int64_t(i);
        Allocation al;
        al.addr = e.addr;
        al.requested = e.size;
        al.stack = e.stack;
        al.alloc_event = int64_t(i);
        uint32_t id = uint32_t(a_.allocations.size());
        a_.allocations.push_back(al);
        live.put(e.addr, id);
        alloc_of_event_[i] = id;
        if (e.stack == 0) ++a_.allocs_without_frames;
      } else if (e.kind == EventKind::FreeRequested) {
        // The user's free. The allocation stays live until its free
        // completes (PyTorch's requested bytes drop then), except in inputs
        // that record no completions (profiler traces).
        uint32_t id = live.find(e.addr);
        if (id != detail::AddrMap::kNone) {
          if (a_.allocations[id].free_requested_event == INT64_MAX) a_.allocations[id].free_requested_event = int64_t(i);
          if (!completions) close(id, i);
        } else if (freed_once_.find(e.addr) == detail::AddrMap::kNone) {
          // Freed without a recorded alloc: allocated before the history began.
          id = before_history(e, i, int64_t(i));
          if (completions) live.put(e.addr, id);
          else a_.allocations[id].free_event = int64_t(i);
        }
        freed_once_.put(e.addr, 1);
      } else if (e.kind == EventKind::FreeCompleted) {
        uint32_t id = live.find(e.addr);
        if (id != detail::AddrMap::kNone) {
          Allocation& al = a_.allocations[id];
          if (al.free_requested_event == INT64_MAX) al.free_requested_event = int64_t(i);
          close(id, i);
        } else if (freed_once_.find(e.addr) == detail::AddrMap::kNone) {
          // Freed before the history began, its free completing in it (it
          // waited on another stream): live until here.
          a_.allocations[before_history(e, i, -1)].free_event = int64_t(i);
          freed_once_.put(e.addr, 1);
        }
      }
    }
    // Profiler traces: what was allocated before the first event and is not
    // freed in the trace, as one allocation (its sites are unknown).
    if (d_.from_profiler()) {
      int64_t pre = 0;
      for (const Allocation& al : a_.allocations)
        if (al.alloc_event < 0) pre += int64_t(al.requested);
      if (d_.allocated_before > pre) {
        Allocation al;
        al.addr = 0;
        al.requested = uint64_t(d_.allocated_before - pre);
        al.stack = d_.before_stack;
        al.alloc_event = -1;
        a_.allocations.push_back(al);
      }
    }
    // Blocks alive at the dump that the history never allocated (their
    // pool is their segment's: assign_pools()).
    for (uint32_t si = 0; si < d_.segments.size(); ++si) {
      const Segment& sg = d_.segments[si];
      for (uint32_t k = 0; k < sg.block_count; ++k) {
        const Block& b = d_.blocks[sg.first_block + k];
        // Active blocks: allocated, and freed but waiting on other streams
        // (both count in requested bytes).
        if (b.state == BlockState::Inactive || live.find(b.addr) != detail::AddrMap::kNone) continue;
        Allocation al;
        al.addr = b.addr;
        al.requested = b.requested_size;
        al.stack = b.stack;
        al.alloc_event = -1;
        if (private_pools_) dump_blocks_.push_back({uint32_t(a_.allocations.size()), si});
        a_.allocations.push_back(al);
      }
    }
  }

  void categorize() {
    // In order of allocation (pre-trace first), so a replacement sees the
    // category of what it replaced. Allocations are created in event order,
    // pre-trace ones interleaved: two linear passes.
    std::vector<uint32_t> order;
    order.reserve(a_.allocations.size());
    for (uint32_t i = 0; i < a_.allocations.size(); ++i)
      if (a_.allocations[i].alloc_event < 0) order.push_back(i);
    for (uint32_t i = 0; i < a_.allocations.size(); ++i)
      if (a_.allocations[i].alloc_event >= 0) order.push_back(i);
    detail::SpanQueries spans(a_);
    detail::Categorizer rules(rs_, m_, spans, a_);
    detail::Inferrer infer(t_, ft_, d_, rs_, m_, replay_, spans, a_);
    infer.infer_pools(private_pools_, dump_blocks_);
    infer.infer_zero_grad();
    infer.infer_noted();
    for (uint32_t id : order) rules.categorize_one(id);
    // What the first pass's parameters, gradients and optimizer state say
    // about the rest: memory from before the recording, then copies of
    // parameters. Only allocations an inference marks can change category.
    // (Only facts some rule tests can change a category.)
    uint32_t tested = 0;
    for (const Rule& r : rs_.rules) tested = tested | r.facts_any;
    auto again = [&](uint32_t mask) {
      mask = mask & tested;
      if (mask == 0) return;
      for (uint32_t id : order)
        if (a_.allocations[id].facts & mask) rules.categorize_one(id);
    };
    if (infer.infer_kept_buffers()) again(kFactKeptBuffer);
    if (infer.infer_pre_trace()) again(kFactPreParameter | kFactPreGradient | kFactPreOptimizerState);
    if (infer.infer_frozen()) again(kFactFrozenParameter | kFactTrainedTensor);
    if (infer.infer_copies()) again(kFactParamSized | kFactParamCopySite);
    if (infer.infer_input_sites()) again(kFactInputSite);
    if (infer.infer_graph_gradients()) again(kFactGraphGradient);
    if (infer.infer_inference()) again(kFactKvCacheHeld | kFactKvCacheGrowth | kFactInferenceInput);
    // Category breakdown at each span's peak.
    detail::measure_spans(replay_(), a_);
    infer.describe_kv_cache(replay_().peak_requested.event_index);
    std::vector<int64_t> idx;
    idx.reserve(a_.spans.size());
    for (const PhaseSpan& s : a_.spans) idx.push_back(s.peak_event);
    auto cats = a_.categories_at(idx);
    for (size_t k = 0; k < a_.spans.size(); ++k) a_.spans[k].categories = std::move(cats[k]);
  }

  const Trace& t_;
  const FrameTable& ft_;
  const Device& d_;
  detail::LazyReplay replay_;  // possibly still running: waited for on first use
  const RuleSet& rs_;
  detail::RuleMatcher& m_;
  bool private_pools_ = false;                               // a dumped segment is in a private pool
  std::vector<std::pair<uint32_t, uint32_t>> dump_blocks_;  // (allocation, segment) of the dump's blocks
  Attribution a_;
  std::vector<uint32_t> alloc_of_event_;
  detail::AddrMap freed_once_;  // addresses freed at least once
};

}  // namespace

const Attribution::Named* Attribution::named_of(uint32_t allocation) const {
  auto it = std::lower_bound(named.begin(), named.end(), allocation,
                             [](const Named& n, uint32_t id) { return n.allocation < id; });
  return it != named.end() && it->allocation == allocation ? &*it : nullptr;
}

const std::vector<uint32_t>* Attribution::copied_parameters(const Allocation& al) const {
  if (copy_ratio == 0 || parameters_of_bytes.empty()) return nullptr;
  auto it = parameters_of_bytes.find(al.requested * copy_ratio);
  return it == parameters_of_bytes.end() ? nullptr : &it->second;
}

int Attribution::unknown_index() const {
  for (size_t i = 0; i < categories.size(); ++i)
    if (categories[i] == "unknown") return int(i);
  return int(categories.size()) - 1;
}

std::vector<std::vector<int64_t>> Attribution::categories_at(const std::vector<int64_t>& events) const {
  const size_t nc = categories.size();
  std::vector<std::vector<int64_t>> out(events.size(), std::vector<int64_t>(nc, 0));
  if (events.empty()) return out;
  std::vector<int64_t> sums(nc, 0);
  for (const Allocation& a : allocations)
    if (a.alloc_event < 0) sums[a.category] += int64_t(a.requested);
  std::vector<size_t> order(events.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return events[x] < events[y]; });
  // One sweep over the events: +requested where an allocation starts,
  // -requested where it is freed.
  int64_t e = 0;
  const int64_t n = int64_t(event_alloc.size());
  for (size_t oi : order) {
    for (; e <= events[oi] && e < n; ++e) {
      uint32_t id = event_alloc[size_t(e)];
      if (id == UINT32_MAX) continue;
      const Allocation& a = allocations[id];
      if (a.alloc_event == e) sums[a.category] += int64_t(a.requested);
      if (a.free_event == e) sums[a.category] -= int64_t(a.requested);
    }
    out[oi] = sums;
  }
  return out;
}

std::vector<uint32_t> Attribution::live_at(int64_t e) const {
  std::vector<uint32_t> out;
  for (uint32_t id = 0; id < allocations.size(); ++id) {
    const Allocation& a = allocations[id];
    if (a.alloc_event <= e && (a.free_event == INT64_MAX || a.free_event > e)) out.push_back(id);
  }
  return out;
}

Attribution detail::attribute(const Trace& trace, const FrameTable& frames, const Device& dev,
                              const std::function<const DeviceReplay&()>& replay, const RuleSet& rules,
                              RuleMatcher& matcher) {
  return Attributor(trace, frames, dev, replay, rules, matcher).run();
}

Attribution detail::attribute(const Trace& trace, const FrameTable& frames, const Device& dev, const DeviceReplay& replay,
                              const RuleSet& rules, RuleMatcher& matcher) {
  return detail::attribute(trace, frames, dev, std::function<const DeviceReplay&()>([&]() -> const DeviceReplay& { return replay; }), rules, matcher);
}

Attribution attribute(const Trace& trace, const FrameTable& frames, const Device& dev, const DeviceReplay& replay,
                      const RuleSet& rules) {
  detail::RuleMatcher m(trace, frames, rules);
  return detail::attribute(trace, frames, dev, replay, rules, m);
}

}  // namespace snapdiff
