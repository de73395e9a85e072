// Phases and categories (see include/snapdiff/analysis/attribution.hpp and
// docs/attribution.md).
#include "snapdiff/analysis/attribution.hpp"

#include <algorithm>
#include <map>
#include <iterator>
#include <unordered_map>
#include <unordered_set>

#include "analysis/addr_map.hpp"
#include "analysis/rule_matcher.hpp"
#include "snapdiff/model/frame_names.hpp"
#include "util/hugepages.hpp"

namespace snapdiff {

namespace detail {

namespace {
constexpr int8_t kUnset = -2;
constexpr uint32_t kUnsetSet = UINT32_MAX;

uint64_t hash_ids(const std::vector<uint32_t>& v) {
  uint64_t h = 0xcbf29ce484222325ull ^ v.size();
  for (uint32_t x : v) h = (h ^ x) * 0x100000001b3ull, h ^= h >> 29;
  return h;
}
}  // namespace

RuleMatcher::RuleMatcher(const Trace& t, const FrameTable& ft, const RuleSet& rs) : t_(t), ft_(ft), rs_(rs) {
  // The distinct patterns of names and of files, each once.
  std::vector<Pattern> names, files;
  std::unordered_map<std::string, uint32_t> name_ix, file_ix;
  auto add = [](const Pattern& p, std::vector<Pattern>& all, std::unordered_map<std::string, uint32_t>& ix,
                std::vector<std::vector<uint32_t>>& users, uint32_t user) {
    auto it = ix.emplace(p.source(), uint32_t(all.size())).first;
    if (it->second == all.size()) all.push_back(p);
    if (users.size() <= it->second) users.resize(size_t(it->second) + 1);
    users[it->second].push_back(user);
  };
  for (uint32_t h = 0; h < rs.hints.size(); ++h) {
    const PhaseHint& ph = rs.hints[h];
    if (ph.has_name) add(ph.name, names, name_ix, name_hints_, h);
    if (ph.has_file) add(ph.file, files, file_ix, file_hints_, h);
    hint_conds_.push_back(uint8_t(ph.has_name + ph.has_file));
  }
  for (uint32_t r = 0; r < rs.rules.size(); ++r) {
    const Rule& ru = rs.rules[r];
    if (ru.has_frame_name) add(ru.frame_name, names, name_ix, name_rules_, r);
    if (ru.has_frame_file) add(ru.frame_file, files, file_ix, file_rules_, r);
    rule_conds_.push_back(uint8_t(ru.has_frame_name + ru.has_frame_file));
    if (!ru.has_frame_name && !ru.has_frame_file) frameless_.push_back(r);
  }
  name_hints_.resize(names.size());
  name_rules_.resize(names.size());
  file_hints_.resize(files.size());
  file_rules_.resize(files.size());
  names_ = PatternSet(std::move(names));
  files_ = PatternSet(std::move(files));
  sets_.emplace_back();  // 0: the empty set
}

void RuleMatcher::match_frame(FrameId f) {
  if (frame_hint_.size() <= f) {
    frame_hint_.resize(t_.frames.size(), kUnset);
    frame_set_.resize(t_.frames.size(), kUnsetSet);
  }
  // The name patterns see: native names without template arguments and
  // parameter lists (they can run to kilobytes and only slow the matcher).
  const std::string raw(t_.strings.get(t_.frames[f].name));
  std::string name = ft_.python(f) || ft_.scope(f) ? raw : short_native_name(raw);
  if (name.empty()) name = raw;
  if (name.empty()) name.push_back(' ');  // not name = " ": GCC 12 warns there (-Wrestrict, a false positive)
  names_.match(name, &scratch_names_);
  files_.match(t_.strings.get(t_.frames[f].file), &scratch_files_);
  // Those (hints or rules) whose every pattern matched: counted over the
  // patterns that matched, so the work is what matched, not what exists.
  auto satisfied = [&](const std::vector<std::vector<uint32_t>>& by_name,
                       const std::vector<std::vector<uint32_t>>& by_file, const std::vector<uint8_t>& conds) {
    scratch_.clear();
    for (int k : scratch_names_) scratch_.insert(scratch_.end(), by_name[size_t(k)].begin(), by_name[size_t(k)].end());
    for (int k : scratch_files_) scratch_.insert(scratch_.end(), by_file[size_t(k)].begin(), by_file[size_t(k)].end());
    std::sort(scratch_.begin(), scratch_.end());
    std::vector<uint32_t> out;
    for (size_t i = 0; i < scratch_.size();) {
      size_t j = i;
      while (j < scratch_.size() && scratch_[j] == scratch_[i]) ++j;
      if (j - i == conds[scratch_[i]]) out.push_back(scratch_[i]);
      i = j;
    }
    return out;
  };
  const std::vector<uint32_t> hints = satisfied(name_hints_, file_hints_, hint_conds_);
  frame_hint_[f] = hints.empty() ? kHintNone : int8_t(rs_.hints[hints.front()].phase);
  frame_set_[f] = intern(satisfied(name_rules_, file_rules_, rule_conds_));
}

uint32_t RuleMatcher::intern(std::vector<uint32_t>&& v) {
  if (v.empty()) return 0;
  const uint64_t h = hash_ids(v);
  auto it = set_by_hash_.find(h);
  if (it != set_by_hash_.end() && sets_[it->second] == v) return it->second;
  const uint32_t id = uint32_t(sets_.size());
  sets_.push_back(std::move(v));
  if (it == set_by_hash_.end()) set_by_hash_.emplace(h, id);  // a collision: kept apart, only less shared
  return id;
}

uint32_t RuleMatcher::unite(uint32_t a, uint32_t b) {
  if (b == 0 || a == b) return a;
  if (a == 0) return b;
  const uint64_t key = (uint64_t(a) << 32) | b;
  auto it = unions_.find(key);
  if (it != unions_.end()) return it->second;
  const std::vector<uint32_t>& x = sets_[a];
  const std::vector<uint32_t>& y = sets_[b];
  uint32_t r;
  if (std::all_of(y.begin(), y.end(), [&](uint32_t v) { return std::binary_search(x.begin(), x.end(), v); })) {
    r = a;
  } else {
    std::vector<uint32_t> u;
    u.reserve(x.size() + y.size());
    std::set_union(x.begin(), x.end(), y.begin(), y.end(), std::back_inserter(u));
    r = intern(std::move(u));
  }
  unions_.emplace(key, r);
  return r;
}

void RuleMatcher::grow_nodes() {
  node_hint_.resize(t_.stacks.size(), kUnset);
  node_set_.resize(t_.stacks.size(), kUnsetSet);
}

int8_t RuleMatcher::stack_hint(StackId s) {
  if (s == 0) return kHintEmpty;
  if (node_hint_.size() <= s) grow_nodes();
  if (node_hint_[s] != kUnset) return node_hint_[s];
  // Up to the first node already known, then back down: a node's hint is its
  // frame's, else its parent's.
  std::vector<StackId> chain;
  StackId x = s;
  for (; x != 0 && node_hint_[x] == kUnset; x = t_.stacks.node(x).parent) chain.push_back(x);
  int8_t h = x == 0 ? kHintNone : node_hint_[x];
  for (size_t i = chain.size(); i-- > 0;) {
    const FrameId f = t_.stacks.node(chain[i]).frame;
    if (f >= frame_hint_.size() || frame_hint_[f] == kUnset) match_frame(f);
    if (frame_hint_[f] >= 0) h = frame_hint_[f];
    node_hint_[chain[i]] = h;
  }
  return h;
}

const std::vector<uint32_t>& RuleMatcher::stack_rules(StackId s) {
  if (s == 0) return sets_[0];
  if (node_set_.size() <= s) grow_nodes();
  if (node_set_[s] == kUnsetSet) {
    std::vector<StackId> chain;
    StackId x = s;
    for (; x != 0 && node_set_[x] == kUnsetSet; x = t_.stacks.node(x).parent) chain.push_back(x);
    uint32_t cur = x == 0 ? 0 : node_set_[x];
    for (size_t i = chain.size(); i-- > 0;) {
      const FrameId f = t_.stacks.node(chain[i]).frame;
      if (f >= frame_set_.size() || frame_set_[f] == kUnsetSet) match_frame(f);
      cur = unite(cur, frame_set_[f]);
      node_set_[chain[i]] = cur;
    }
  }
  return sets_[node_set_[s]];
}

}  // namespace detail

namespace {

using detail::kHintEmpty;
using detail::kHintNone;

class Attributor {
 public:
  Attributor(const Trace& t, const FrameTable& ft, const Device& d, const DeviceReplay& rp, const RuleSet& rs,
             detail::RuleMatcher& m)
      : t_(t), ft_(ft), d_(d), rp_(rp), rs_(rs), m_(m) {}

  Attribution run() {
    a_.categories = rs_.categories;
    build_allocations();
    assign_phases();
    measure_spans();
    a_.event_alloc = std::move(alloc_of_event_);
    categorize();
    return std::move(a_);
  }

 private:
  int8_t stack_hint(StackId s) { return m_.stack_hint(s); }

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
        if (!rp_.alloc_pool.empty()) al.pool = rp_.alloc_pool[i];
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
        } else if (!freed_once_.count(e.addr)) {
          // Freed without a recorded alloc: allocated before the history began.
          id = before_history(e, i, int64_t(i));
          if (completions) live.put(e.addr, id);
          else a_.allocations[id].free_event = int64_t(i);
        }
        freed_once_.insert(e.addr);
      } else if (e.kind == EventKind::FreeCompleted) {
        uint32_t id = live.find(e.addr);
        if (id != detail::AddrMap::kNone) {
          Allocation& al = a_.allocations[id];
          if (al.free_requested_event == INT64_MAX) al.free_requested_event = int64_t(i);
          close(id, i);
        } else if (!freed_once_.count(e.addr)) {
          // Freed before the history began, its free completing in it (it
          // waited on another stream): live until here.
          a_.allocations[before_history(e, i, -1)].free_event = int64_t(i);
          freed_once_.insert(e.addr);
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
    // Blocks alive at the dump that the history never allocated, in the
    // pool of their segment.
    std::map<std::pair<int64_t, int64_t>, uint32_t> pool_of;
    for (uint32_t p = 0; p < rp_.pools.size(); ++p) pool_of.emplace(std::make_pair(rp_.pools[p].id[0], rp_.pools[p].id[1]), p);
    for (const Segment& sg : d_.segments) {
      auto pi = pool_of.find({sg.pool_id[0], sg.pool_id[1]});
      const uint32_t pool = pi == pool_of.end() ? 0 : pi->second;
      for (uint32_t k = 0; k < sg.block_count; ++k) {
        const Block& b = d_.blocks[sg.first_block + k];
        // Active blocks: allocated, and freed but waiting on other streams
        // (both count in requested bytes).
        if (b.state == BlockState::Inactive || live.find(b.addr) != detail::AddrMap::kNone) continue;
        Allocation al;
        al.addr = b.addr;
        al.requested = b.requested_size;
        al.stack = b.stack;
        al.pool = pool;
        al.alloc_event = -1;
        a_.allocations.push_back(al);
      }
    }
  }

  // ---- phases ------------------------------------------------------------
  void assign_phases() {
    const auto& ev = d_.events;
    const size_t n = ev.size();
    // Optimizer annotations (record_function "Optimizer.step#...") as time spans.
    std::vector<std::pair<int64_t, int64_t>> opt_spans;
    {
      std::vector<int64_t> starts;
      for (const Annotation& an : t_.annotations) {
        if (an.device != d_.index && an.device != -1) continue;
        std::string_view name = t_.strings.get(an.name);
        if (name.rfind("Optimizer.step", 0) != 0) continue;
        if (an.start) starts.push_back(an.time_us);
        else if (!starts.empty()) {
          opt_spans.push_back({starts.back(), an.time_us});
          starts.pop_back();
        }
      }
      std::sort(opt_spans.begin(), opt_spans.end());
    }
    size_t osp = 0;
    bool any_frames = false, any_fb = false;
    std::vector<int8_t> hint;
    detail::assign_huge(hint, n, kHintEmpty);
    for (size_t i = 0; i < n; ++i) {
      const Event& e = ev[i];
      if (e.kind != EventKind::Alloc) continue;
      int8_t h = stack_hint(e.stack);
      if (h != kHintEmpty) any_frames = true;
      if (!opt_spans.empty() && e.time_us != kNoTime) {
        while (osp < opt_spans.size() && opt_spans[osp].second < e.time_us) ++osp;
        if (osp < opt_spans.size() && opt_spans[osp].first <= e.time_us) h = int8_t(Phase::Optimizer);
      }
      if (h == int8_t(Phase::Forward) || h == int8_t(Phase::Backward)) any_fb = true;
      hint[i] = h;
    }
    a_.phase_evidence = any_frames ? "stack frames" : "no stacks";
    if (!opt_spans.empty()) a_.phase_evidence += " + optimizer annotations";

    std::vector<Phase> phase;
    detail::assign_huge(phase, n, Phase::Init);
    std::vector<int32_t> iter;
    detail::assign_huge(iter, n, 0);
    if (!any_fb && !opt_spans.empty()) {
      // No frames tell forward from backward: between optimizer steps the
      // forward builds memory up and the backward releases it, so split each
      // stretch at its requested-bytes maximum.
      split_by_shape(hint, phase, iter);
      a_.phase_evidence += " + lifetimes (the backward starts with the first buffer kept for the optimizer step)";
    } else {
      Phase cur = Phase::Init;
      int it = 0;
      bool after_bwd_or_opt = false;
      for (size_t i = 0; i < n; ++i) {
        int8_t h = hint[i];
        if (h == kHintEmpty) {
          // keep the current phase (autograd engine threads record no frames)
        } else if (h == kHintNone) {
          // user code outside any hint: the loss belongs to the forward; after
          // an optimizer step it is the next iteration's data loading.
          if (cur == Phase::Init || cur == Phase::Optimizer) {
            ++it;
            cur = Phase::Other;
            after_bwd_or_opt = false;
          } else if (cur == Phase::Backward) {
            cur = Phase::Other;
          }
        } else {
          Phase p = Phase(h);
          if (p == Phase::Init) {
            if (cur != Phase::Init) cur = Phase::Other;
          } else {
            if (cur == Phase::Init) {
              it = 1;
              after_bwd_or_opt = false;
            } else if (p == Phase::Forward && after_bwd_or_opt) {
              ++it;
              after_bwd_or_opt = false;
            }
            if (p == Phase::Backward || p == Phase::Optimizer) after_bwd_or_opt = true;
            cur = p;
          }
        }
        phase[i] = cur;
        iter[i] = it;
      }
    }
    // Spans of equal (iteration, phase).
    detail::assign_huge(a_.event_span, n, 0u);
    for (size_t i = 0; i < n; ++i) {
      if (a_.spans.empty() || a_.spans.back().phase != phase[i] || a_.spans.back().iteration != iter[i]) {
        PhaseSpan s;
        s.iteration = iter[i];
        s.phase = phase[i];
        s.start_event = int64_t(i);
        a_.spans.push_back(s);
        a_.iterations = std::max(a_.iterations, iter[i]);
      }
      a_.spans.back().end_event = int64_t(i);
      a_.event_span[i] = uint32_t(a_.spans.size() - 1);
    }
  }

  void split_by_shape(const std::vector<int8_t>& hint, std::vector<Phase>& phase, std::vector<int32_t>& iter) {
    const size_t n = hint.size();
    // Mark optimizer events, then walk stretches between them.
    int it = 0;
    size_t i = 0;
    bool first = true;
    while (i < n) {
      if (hint[i] == int8_t(Phase::Optimizer)) {
        size_t j = i;
        while (j < n && (hint[j] == int8_t(Phase::Optimizer) || d_.events[j].kind != EventKind::Alloc)) ++j;
        for (size_t k = i; k < j; ++k) phase[k] = Phase::Optimizer, iter[k] = std::max(it, 1);
        i = j;
        continue;
      }
      size_t j = i;
      while (j < n && hint[j] != int8_t(Phase::Optimizer)) ++j;
      // [i, j): a forward+backward stretch. The first one starts with the
      // model build: the allocations made before the first one that is
      // freed again within the stretch (parameters are kept).
      if (first) {
        size_t k = i;
        for (; k < j; ++k) {
          uint32_t id = alloc_of_event_[k];
          if (id == UINT32_MAX || d_.events[k].kind != EventKind::Alloc) continue;
          if (a_.allocations[id].free_event < int64_t(j)) break;
        }
        // Back up to the last allocation that outlives the stretch.
        size_t init_end = i;
        for (size_t q = i; q < k; ++q)
          if (d_.events[q].kind == EventKind::Alloc) init_end = q + 1;
        for (size_t q = i; q < init_end; ++q) phase[q] = Phase::Init, iter[q] = 0;
        i = init_end;
        first = false;
        if (i >= j) continue;
      }
      ++it;
      // The backward starts with the first allocation that survives into
      // the optimizer step (the first gradient); without one, at the
      // stretch's memory maximum.
      size_t split = j;
      bool freed_yet = false;  // the input batch comes before any free
      for (size_t k = i; k < j; ++k) {
        if (d_.events[k].kind == EventKind::FreeRequested) freed_yet = true;
        if (!freed_yet) continue;
        uint32_t id = alloc_of_event_[k];
        if (id == UINT32_MAX || d_.events[k].kind != EventKind::Alloc) continue;
        if (a_.allocations[id].free_event > int64_t(j) && j < n) {
          split = k;
          break;
        }
      }
      if (split == j) {
        split = i;
        for (size_t k = i; k < j; ++k)
          if (rp_.requested[k] > rp_.requested[split]) split = k;
        ++split;
      }
      for (size_t k = i; k < j; ++k) {
        phase[k] = k < split ? Phase::Forward : Phase::Backward;
        iter[k] = it;
      }
      i = j;
    }
  }

  void measure_spans() {
    for (PhaseSpan& s : a_.spans) {
      s.start_requested = s.start_event > 0 ? rp_.requested[size_t(s.start_event - 1)] : rp_.baseline.requested;
      s.peak_event = s.start_event;
      s.peak_requested = rp_.requested[size_t(s.start_event)];
      for (int64_t i = s.start_event; i <= s.end_event; ++i)
        if (rp_.requested[size_t(i)] > s.peak_requested) {
          s.peak_requested = rp_.requested[size_t(i)];
          s.peak_event = i;
        }
    }
  }

  // ---- categories --------------------------------------------------------
  Phase alloc_phase(const Allocation& al) const {
    return al.alloc_event < 0 ? Phase::PreTrace : a_.spans[a_.event_span[size_t(al.alloc_event)]].phase;
  }
  int64_t next_span_start_cached(int64_t after_event, Phase p) {
    size_t s = after_event < 0 ? a_.spans.size() : a_.event_span[size_t(after_event)];
    auto& cache = next_start_[int(p)];
    if (cache.empty()) {
      cache.assign(a_.spans.size() + 1, INT64_MAX);
      int64_t nxt = INT64_MAX;
      for (size_t k = a_.spans.size(); k-- > 0;) {
        cache[k] = nxt;  // next strictly after span k
        if (a_.spans[k].phase == p) nxt = a_.spans[k].start_event;
      }
      cache[a_.spans.size()] = nxt;  // from before the first span
    }
    return cache[s];
  }

  int grad_ratio(int cat) {
    auto it = ratio_.find(cat);
    if (it != ratio_.end()) return it->second;
    std::unordered_map<uint64_t, int64_t> kept;  // never-freed backward buffers by size
    for (const Allocation& al : a_.allocations)
      if (al.alloc_event >= 0 && al.free_event == INT64_MAX && alloc_phase(al) == Phase::Backward) ++kept[al.requested];
    std::vector<uint64_t> sizes;
    for (const Allocation& al : a_.allocations)
      if (al.category == cat && al.rule >= 0) sizes.push_back(al.requested);
    int best = 0;  // 0: no pairing (e.g. zero_grad(set_to_none=True) frees every gradient)
    uint64_t best_bytes = 0, total = 0;
    for (uint64_t p : sizes) total += p;
    for (int r : {1, 2}) {
      auto left = kept;
      uint64_t bytes = 0;
      for (uint64_t p : sizes) {
        auto k = left.find(p * uint64_t(r));
        if (k != left.end() && k->second > 0) {
          --k->second;
          bytes += p;
        }
      }
      if (bytes > best_bytes) best = r, best_bytes = bytes;
    }
    // A ratio counts only when it pairs at least half of those tensors' bytes.
    if (best_bytes * 2 < total) best = 0;
    ratio_[cat] = best;
    return best;
  }

  // Allocations freed in a span, by size (built on first use).
  const std::unordered_map<uint64_t, std::vector<uint32_t>>& frees_in_span(uint32_t span) {
    auto it = freed_in_span_.find(span);
    if (it != freed_in_span_.end()) return it->second;
    auto& m = freed_in_span_[span];
    const PhaseSpan& sp = a_.spans[span];
    for (int64_t e = sp.start_event; e <= sp.end_event; ++e) {
      uint32_t id = a_.event_alloc[size_t(e)];
      if (id != UINT32_MAX && a_.allocations[id].free_event == e) m[a_.allocations[id].requested].push_back(id);
    }
    return m;
  }

  bool holds(size_t ri, uint32_t id) {
    const Rule& r = rs_.rules[ri];
    const Allocation& al = a_.allocations[id];
    Phase ap = alloc_phase(al);
    if (!(r.alloc_phases & (1u << int(ap)))) return false;
    const int64_t uf = al.user_free();
    bool freed = uf != INT64_MAX;
    Phase fp = freed ? a_.spans[a_.event_span[size_t(uf)]].phase : Phase::Other;
    if (r.free_phases != 0xffff) {
      uint16_t bit = freed ? uint16_t(1u << int(fp)) : uint16_t(0x80);
      if (!(r.free_phases & bit)) return false;
    }
    if (al.requested < r.min_bytes || al.requested > r.max_bytes) return false;
    if (!r.sizes.empty() && std::find(r.sizes.begin(), r.sizes.end(), al.requested) == r.sizes.end()) return false;
    if (r.stack_hints != 0xff) {
      int8_t h = stack_hint(al.stack);
      uint8_t bit = h >= 0 ? uint8_t(1u << h) : uint8_t(0x80);
      if (!(r.stack_hints & bit)) return false;
    }
    const bool pre = al.alloc_event < 0;
    const uint32_t as = pre ? UINT32_MAX : a_.event_span[size_t(al.alloc_event)];
    const uint32_t fs = freed ? a_.event_span[size_t(uf)] : UINT32_MAX;
    switch (r.lifetime) {
      case Lifetime::Any: break;
      case Lifetime::WithinPhase:
        if (pre || !freed || fs != as) return false;
        break;
      case Lifetime::OutlivesPhase:
        if (!pre && freed && fs == as) return false;
        break;
      case Lifetime::CrossesIteration:
        if (!pre && freed && a_.spans[fs].iteration == a_.spans[as].iteration) return false;
        break;
      case Lifetime::WithinIteration:
        if (pre || !freed || a_.spans[fs].iteration != a_.spans[as].iteration) return false;
        break;
      case Lifetime::NeverFreed:
        if (freed) return false;
        break;
      case Lifetime::AliveAtNextOptimizer: {
        int64_t s = next_span_start_cached(al.alloc_event, Phase::Optimizer);
        if (s == INT64_MAX || uf <= s) return false;
        break;
      }
      case Lifetime::SpansBackward: {
        int64_t s = next_span_start_cached(al.alloc_event, Phase::Backward);
        if (s == INT64_MAX || uf <= s) return false;
        break;
      }
    }
    if (r.no_later_optimizer && next_span_start_cached(al.alloc_event, Phase::Optimizer) != INT64_MAX) return false;
    // (Frame conditions: categorize() asks only the rules whose frame
    // conditions hold on the allocation's stack.)
    if (r.unlike_sizes_of >= 0) {
      // "Could this be the gradient of one of those tensors?" A gradient has
      // its tensor's element count; its dtype may be wider (bf16 gradients
      // of FP8 weights), so the size ratio is learned from the run: the ratio
      // in {1, 2} that pairs the most bytes of those tensors with buffers the
      // backward keeps.
      auto& set = sizes_of_[r.unlike_sizes_of];
      int ratio = grad_ratio(r.unlike_sizes_of);
      uint64_t x = al.requested;
      if (ratio > 0 && x % uint64_t(ratio) == 0 && set.count(x / uint64_t(ratio))) return false;
    }
    if (r.replaces_category >= 0) {
      if (pre) return false;
      const auto& frees = frees_in_span(as);
      auto it = frees.find(al.requested);
      if (it == frees.end()) return false;
      // Prefer a tensor freed before this one was made; else one freed after
      // it in the same step (`p.data = quantize(...)` makes the new tensor
      // before the old one goes).
      uint32_t later = UINT32_MAX;
      for (uint32_t other : it->second) {
        const Allocation& o = a_.allocations[other];
        if (o.category != r.replaces_category || replaced_.count(other)) continue;
        if (o.alloc_event >= al.alloc_event) continue;
        if (o.free_event < al.alloc_event) {
          replaced_.insert(other);
          return true;
        }
        if (later == UINT32_MAX) later = other;
      }
      if (later == UINT32_MAX) return false;
      replaced_.insert(later);
      return true;
    }
    return true;
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
    const uint16_t unknown = uint16_t(a_.unknown_index());
    for (const Rule& r : rs_.rules)
      if (r.unlike_sizes_of >= 0) tracked_.push_back(r.unlike_sizes_of);
    const std::vector<uint32_t>& frameless = m_.frameless_rules();
    for (uint32_t id : order) {
      Allocation& al = a_.allocations[id];
      al.category = unknown;
      al.rule = -1;
      // The rules in order, of those with frame conditions only the ones
      // that hold on this stack (the two lists are disjoint and ascending).
      const std::vector<uint32_t>& framed = m_.stack_rules(al.stack);
      size_t i = 0, j = 0;
      while (i < frameless.size() || j < framed.size()) {
        const uint32_t ri = j >= framed.size() || (i < frameless.size() && frameless[i] < framed[j]) ? frameless[i++]
                                                                                                    : framed[j++];
        if (holds(ri, id)) {
          al.category = uint16_t(rs_.rules[ri].category_index);
          al.rule = int16_t(ri);
          break;
        }
      }
      for (int c : tracked_)
        if (c == al.category) sizes_of_[c].insert(al.requested);
    }
    // Category breakdown at each span's peak.
    std::vector<int64_t> idx;
    idx.reserve(a_.spans.size());
    for (const PhaseSpan& s : a_.spans) idx.push_back(s.peak_event);
    auto cats = a_.categories_at(idx);
    for (size_t k = 0; k < a_.spans.size(); ++k) a_.spans[k].categories = std::move(cats[k]);
  }

  const Trace& t_;
  const FrameTable& ft_;
  const Device& d_;
  const DeviceReplay& rp_;
  const RuleSet& rs_;
  detail::RuleMatcher& m_;
  Attribution a_;
  std::vector<uint32_t> alloc_of_event_;
  std::unordered_map<uint32_t, std::unordered_map<uint64_t, std::vector<uint32_t>>> freed_in_span_;
  std::unordered_set<uint32_t> replaced_;
  std::unordered_set<uint64_t> freed_once_;
  std::unordered_map<int, std::unordered_set<uint64_t>> sizes_of_;
  std::vector<int> tracked_;
  std::unordered_map<int, int> ratio_;
  std::vector<int64_t> next_start_[kPhaseCount];
};

}  // namespace

Phase Attribution::phase_at(int64_t e) const {
  if (e < 0 || size_t(e) >= event_span.size()) return Phase::PreTrace;
  return spans[event_span[size_t(e)]].phase;
}

int Attribution::iteration_at(int64_t e) const {
  if (e < 0 || size_t(e) >= event_span.size()) return 0;
  return spans[event_span[size_t(e)]].iteration;
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

Attribution detail::attribute(const Trace& trace, const FrameTable& frames, const Device& dev, const DeviceReplay& replay,
                              const RuleSet& rules, RuleMatcher& matcher) {
  return Attributor(trace, frames, dev, replay, rules, matcher).run();
}

Attribution attribute(const Trace& trace, const FrameTable& frames, const Device& dev, const DeviceReplay& replay,
                      const RuleSet& rules) {
  detail::RuleMatcher m(trace, frames, rules);
  return detail::attribute(trace, frames, dev, replay, rules, m);
}

}  // namespace snapdiff
