// Phases and categories (see include/snapdiff/analysis/attribution.hpp and
// docs/attribution.md).
#include "snapdiff/analysis/attribution.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <functional>
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
  frame_hint_[f] = hints.empty() || rs_.hints[hints.front()].ignore
                       ? kHintNone
                       : int8_t(int(rs_.hints[hints.front()].phase) | (rs_.hints[hints.front()].outer ? kHintOuter : 0));
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
  if (node_hint_[s] != kUnset) return node_hint_[s] >= 0 ? int8_t(node_hint_[s] & ~kHintOuter) : node_hint_[s];
  // Up to the first node already known, then back down: a node's hint is its
  // frame's, else its parent's.
  std::vector<StackId> chain;
  StackId x = s;
  for (; x != 0 && node_hint_[x] == kUnset; x = t_.stacks.node(x).parent) chain.push_back(x);
  // (An "outer" hint holds against the frames inside it: node values keep
  // its bit until returned.)
  int8_t h = x == 0 ? kHintNone : node_hint_[x];
  for (size_t i = chain.size(); i-- > 0;) {
    const FrameId f = t_.stacks.node(chain[i]).frame;
    if (f >= frame_hint_.size() || frame_hint_[f] == kUnset) match_frame(f);
    if (frame_hint_[f] >= 0 && !(h >= 0 && (h & kHintOuter))) h = frame_hint_[f];
    node_hint_[chain[i]] = h;
  }
  return h >= 0 ? int8_t(h & ~kHintOuter) : h;
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
constexpr int8_t kHintOptFrame = -4;  // an optimizer frame outside every timed step annotation

class Attributor {
 public:
  Attributor(const Trace& t, const FrameTable& ft, const Device& d, const std::function<const DeviceReplay&()>& rp,
             const RuleSet& rs, detail::RuleMatcher& m)
      : t_(t), ft_(ft), d_(d), replay_(rp), rs_(rs), m_(m) {}

  // The order of the steps: what needs the replay comes last where it can,
  // so that the rest runs while the replay finishes on another thread.
  Attribution run() {
    a_.categories = rs_.categories;
    unknown_ = uint16_t(a_.unknown_index());
    // Pools are the dump's (the history does not name them): with none but
    // the default one, every allocation is in pool 0 without asking the replay.
    for (const Segment& sg : d_.segments) private_pools_ |= sg.pool_id[0] != 0 || sg.pool_id[1] != 0;
    build_allocations();
    assign_phases();
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

  // Each allocation's pool: the replay's for those the history made, the
  // segment's for the dump's blocks. Only a dump with private pools asks.
  void assign_pools() {
    if (!private_pools_) return;
    const DeviceReplay& rp = replay();
    for (Allocation& al : a_.allocations)
      if (al.alloc_event >= 0 && !rp.alloc_pool.empty()) al.pool = rp.alloc_pool[size_t(al.alloc_event)];
    std::map<std::pair<int64_t, int64_t>, uint32_t> pool_of;
    for (uint32_t p = 0; p < rp.pools.size(); ++p) pool_of.emplace(std::make_pair(rp.pools[p].id[0], rp.pools[p].id[1]), p);
    for (const auto& [id, si] : dump_blocks_) {
      const Segment& sg = d_.segments[si];
      auto pi = pool_of.find({sg.pool_id[0], sg.pool_id[1]});
      a_.allocations[id].pool = pi == pool_of.end() ? 0 : pi->second;
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
    bool any_frames = false, any_fb = false;
    std::vector<int8_t> hint;
    detail::assign_huge(hint, n, kHintEmpty);
    // Per event, the optimizer annotation its time lies in (-1: none); an
    // annotation no event lies in is a step that allocated and freed
    // nothing: an optimizer phase without events, placed before the first
    // event after it.
    std::vector<int32_t> ann;
    std::vector<uint8_t> ann_hit(opt_spans.size(), 0);
    if (!opt_spans.empty()) detail::assign_huge(ann, n, -1);
    // The last annotation starting at or before a time: the previous
    // event's answer or the next one's when it still holds (times mostly
    // ascend), else a binary search (times of events on several streams
    // need not be in order).
    size_t last_ann = 0;  // opt_spans[last_ann - 1] is the previous answer; 0: none starts before
    auto annotation_before = [&](int64_t t) {
      const size_t m = opt_spans.size();
      auto fits = [&](size_t k) {  // k annotations start at or before t
        return (k == 0 || opt_spans[k - 1].first <= t) && (k == m || opt_spans[k].first > t);
      };
      if (fits(last_ann)) return last_ann;
      if (last_ann < m && fits(last_ann + 1)) return ++last_ann;
      last_ann = size_t(std::upper_bound(opt_spans.begin(), opt_spans.end(), std::make_pair(t, INT64_MAX)) -
                        opt_spans.begin());
      return last_ann;
    };
    for (size_t i = 0; i < n; ++i) {
      const Event& e = ev[i];
      int8_t h = e.kind == EventKind::Alloc ? stack_hint(e.stack) : kHintEmpty;
      if (h != kHintEmpty) any_frames = true;
      if (!opt_spans.empty() && e.time_us != kNoTime) {
        const size_t k = annotation_before(e.time_us);
        if (k > 0 && opt_spans[k - 1].second >= e.time_us) {
          const size_t osp = k - 1;
          h = int8_t(Phase::Optimizer);
          ann[i] = int32_t(osp);
          ann_hit[osp] = 1;
        }
      }
      // With timed step annotations the step is where they say: a frame
      // named like an optimizer outside them counts only after a backward
      // (a user's own update loop); before the forward it is a user's
      // step() around forward and backward, and says nothing.
      if (h == int8_t(Phase::Optimizer) && !opt_spans.empty() && e.time_us != kNoTime && ann[i] < 0) h = kHintOptFrame;
      if (h == int8_t(Phase::Forward) || h == int8_t(Phase::Backward)) any_fb = true;
      hint[i] = h;
    }
    // Empty steps: (first event after, annotation), in order.
    std::vector<std::pair<size_t, size_t>> empty_steps;
    {
      // Only steps inside the recorded window: annotations are kept apart
      // from the ring of events and outlive its oldest entries.
      int64_t first_t = kNoTime;
      for (size_t i = 0; i < n && first_t == kNoTime; ++i) first_t = ev[i].time_us;
      size_t k = 0;
      for (size_t j = 0; j < opt_spans.size(); ++j) {
        if (ann_hit[j] || first_t == kNoTime || opt_spans[j].second < first_t) continue;
        while (k < n && (ev[k].time_us == kNoTime || ev[k].time_us <= opt_spans[j].second)) ++k;
        empty_steps.push_back({k, j});
      }
    }
    a_.phase_evidence = any_frames ? "stack frames" : "no stacks";
    if (!opt_spans.empty()) a_.phase_evidence += " + optimizer annotations";

    std::vector<Phase> phase;
    detail::assign_huge(phase, n, Phase::Init);
    std::vector<int32_t> iter;
    detail::assign_huge(iter, n, 0);
    if (!any_fb && !opt_spans.empty()) {
      for (int8_t& h : hint)
        if (h == kHintOptFrame) h = int8_t(Phase::Optimizer);
      // No frames tell forward from backward: between optimizer steps the
      // forward builds memory up and the backward releases it, so split each
      // stretch at its requested-bytes maximum.
      split_by_shape(hint, phase, iter);
      a_.phase_evidence += " + lifetimes (the backward starts with the first buffer kept for the optimizer step)";
    } else {
      Phase cur = Phase::Init;
      int it = 0;
      bool after_bwd_or_opt = false;
      size_t next_empty = 0;
      // Per event, the next allocation's hint that is not such a frame: a
      // user's step() is followed by its forward, an update loop is not.
      bool steps_timed = false;   // timed step annotations bound the iterations
      steps_timed = !empty_steps.empty();
      for (size_t j = 0; j < opt_spans.size() && !steps_timed; ++j) steps_timed = ann_hit[j];
      bool opt_from_ann = false;  // the current optimizer phase is an annotated step's
      bool post_step = false;     // in "other" right after an annotated step, its iteration
      std::vector<int8_t> next_hint;
      if (!opt_spans.empty()) {
        detail::assign_huge(next_hint, n, kHintEmpty);
        int8_t nh = kHintEmpty;
        for (size_t i = n; i-- > 0;) {
          next_hint[i] = nh;
          if (hint[i] != kHintOptFrame && hint[i] != kHintEmpty) nh = hint[i];
        }
      }
      for (size_t i = 0; i < n; ++i) {
        for (; next_empty < empty_steps.size() && empty_steps[next_empty].first <= i; ++next_empty) {
          // A step that allocated nothing: it ends the iteration like any other.
          if (cur == Phase::Init) it = std::max(it, 1);
          empty_iter_.push_back(it);
          cur = Phase::Optimizer;
          after_bwd_or_opt = true;
          opt_from_ann = true;
        }
        int8_t h = hint[i];
        const bool timed_outside = !ann.empty() && ann[i] < 0 && ev[i].time_us != kNoTime;
        if (h == kHintEmpty && cur == Phase::Optimizer && opt_from_ann && timed_outside) {
          // After an annotated step ended: frees completing late and
          // frameless work are not the step. They stay in its iteration
          // (the run may end here); what the user's code allocates next
          // starts the next one.
          cur = Phase::Other;
          opt_from_ann = false;
          post_step = true;
        }
        if (h == kHintOptFrame)
          h = (cur == Phase::Backward || cur == Phase::Optimizer || post_step) && next_hint[i] != int8_t(Phase::Forward)
                  ? int8_t(Phase::Optimizer)
                  : kHintNone;
        if (h == int8_t(Phase::Optimizer)) opt_from_ann = !ann.empty() && ann[i] >= 0;
        if (h == kHintEmpty) {
          // keep the current phase (autograd engine threads record no frames)
        } else if (h == kHintNone) {
          // user code outside any hint: the loss belongs to the forward; after
          // an optimizer step it is the next iteration's data loading.
          if (cur == Phase::Init || cur == Phase::Optimizer || (cur == Phase::Other && post_step)) {
            ++it;
            cur = Phase::Other;
            after_bwd_or_opt = false;
            post_step = false;
          } else if (cur == Phase::Backward) {
            cur = Phase::Other;
          }
        } else {
          Phase p = Phase(h);
          post_step = post_step && p == Phase::Init;
          if (p == Phase::Init) {
            if (cur != Phase::Init) cur = Phase::Other;
          } else {
            if (cur == Phase::Init) {
              it = std::max(it, 1);
              after_bwd_or_opt = false;
            } else if (p == Phase::Forward && after_bwd_or_opt) {
              ++it;
              after_bwd_or_opt = false;
            }
            // With step annotations an iteration is one optimizer step, all
            // its micro-batches (gradient accumulation) included; without
            // them a forward after a backward starts the next one.
            if ((p == Phase::Backward && !steps_timed) || p == Phase::Optimizer) after_bwd_or_opt = true;
            cur = p;
          }
        }
        phase[i] = cur;
        iter[i] = it;
      }
      for (; next_empty < empty_steps.size(); ++next_empty) empty_iter_.push_back(std::max(it, 1));
    }
    // Spans of equal (iteration, phase); each optimizer annotation is a span
    // of its own (two optimizers step one after the other), an empty step
    // one without events.
    detail::assign_huge(a_.event_span, n, 0u);
    size_t next_empty = 0;
    auto add_empty = [&](size_t at) {
      PhaseSpan s;
      s.iteration = next_empty < empty_iter_.size() ? empty_iter_[next_empty] : 1;
      s.phase = Phase::Optimizer;
      s.start_event = int64_t(at);
      s.end_event = int64_t(at) - 1;
      a_.spans.push_back(s);
      a_.iterations = std::max(a_.iterations, s.iteration);
    };
    int32_t span_ann = -1;
    for (size_t i = 0; i < n; ++i) {
      for (; next_empty < empty_steps.size() && empty_steps[next_empty].first <= i && next_empty < empty_iter_.size();
           ++next_empty)
        add_empty(i);
      // (A span's annotation is that of its first annotated event; a user's
      // update loop around the step shares the span.)
      const int32_t an = ann.empty() ? -1 : ann[i];
      const bool new_step = phase[i] == Phase::Optimizer && an >= 0 && span_ann >= 0 && an != span_ann;
      if (a_.spans.empty() || a_.spans.back().empty() || new_step || a_.spans.back().phase != phase[i] ||
          a_.spans.back().iteration != iter[i]) {
        span_ann = -1;
        PhaseSpan s;
        s.iteration = iter[i];
        s.phase = phase[i];
        s.start_event = int64_t(i);
        a_.spans.push_back(s);
        a_.iterations = std::max(a_.iterations, iter[i]);
      }
      a_.spans.back().end_event = int64_t(i);
      a_.event_span[i] = uint32_t(a_.spans.size() - 1);
      if (phase[i] == Phase::Optimizer && an >= 0 && span_ann < 0) span_ann = an;
    }
    for (; next_empty < empty_steps.size() && next_empty < empty_iter_.size(); ++next_empty) add_empty(n);
  }

  void split_by_shape(const std::vector<int8_t>& hint, std::vector<Phase>& phase, std::vector<int32_t>& iter) {
    const DeviceReplay& rp = replay();
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
          if (rp.requested[k] > rp.requested[split]) split = k;
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
    const DeviceReplay& rp = replay();
    for (PhaseSpan& s : a_.spans) {
      s.start_requested = s.start_event > 0 ? rp.requested[size_t(s.start_event - 1)] : rp.baseline.requested;
      if (s.empty()) {
        s.peak_event = s.start_event - 1;
        s.peak_requested = s.start_requested;
        continue;
      }
      s.peak_event = s.start_event;
      s.peak_requested = rp.requested[size_t(s.start_event)];
      for (int64_t i = s.start_event; i <= s.end_event; ++i)
        if (rp.requested[size_t(i)] > s.peak_requested) {
          s.peak_requested = rp.requested[size_t(i)];
          s.peak_event = i;
        }
    }
  }

  // ---- categories --------------------------------------------------------
  // The rules without frame conditions that can hold on an allocation made
  // in phase `p` (holds() tests the phase first; this spares the calls).
  const std::vector<uint32_t>& frameless_for(Phase p) {
    std::vector<uint32_t>& out = frameless_by_phase_[size_t(p)];
    if (!frameless_known_[size_t(p)]) {
      for (uint32_t ri : m_.frameless_rules())
        if (rs_.rules[ri].alloc_phases & (1u << int(p))) out.push_back(ri);
      frameless_known_[size_t(p)] = true;
    }
    return out;
  }
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
        // An empty step runs between the event before it and its start_event.
        if (a_.spans[k].phase == p) nxt = a_.spans[k].start_event - (a_.spans[k].empty() ? 1 : 0);
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
    if (r.facts_any && !(al.facts & r.facts_any)) return false;
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

  void categorize_one(uint32_t id) {
    Allocation& al = a_.allocations[id];
    al.category = unknown_;
    al.rule = -1;
    // The rules in order, of those with frame conditions only the ones
    // that hold on this stack, of the others only those for the phase it
    // was allocated in (the two lists are disjoint and ascending).
    const std::vector<uint32_t>& frameless = frameless_for(alloc_phase(al));
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

  int cat(const char* name) const {
    for (size_t i = 0; i < a_.categories.size(); ++i)
      if (a_.categories[i] == name) return int(i);
    return -1;
  }

  // Does any frame of the stack have a name containing one of `needles`?
  bool stack_mentions(StackId s, std::initializer_list<std::string_view> needles) const {
    for (; s != 0; s = t_.stacks.node(s).parent) {
      const std::string_view name = t_.strings.get(t_.frames[t_.stacks.node(s).frame].name);
      const std::string_view file = t_.strings.get(t_.frames[t_.stacks.node(s).frame].file);
      for (std::string_view n : needles)
        if (name.find(n) != std::string_view::npos || file.find(n) != std::string_view::npos) return true;
    }
    return false;
  }

  // Private pools: a CUDA graph's unless its allocations' frames say a user
  // MemPool (torch.cuda.use_mem_pool) made them and none says a graph.
  void infer_pools() {
    assign_pools();
    if (!private_pools_) return;
    const DeviceReplay& rp = replay();
    if (rp.pools.size() <= 1) return;
    std::vector<int8_t> user(rp.pools.size(), 0), graph(rp.pools.size(), 0);
    std::vector<uint32_t> seen(rp.pools.size(), 0);
    for (const Allocation& al : a_.allocations) {
      if (al.pool == 0 || al.pool >= rp.pools.size() || al.stack == 0 || seen[al.pool] >= 64) continue;
      ++seen[al.pool];
      if (stack_mentions(al.stack, {"use_mem_pool", "MemPool"})) user[al.pool] = 1;
      if (stack_mentions(al.stack, {"torch/cuda/graphs.py", "make_graphed_callables", "capture_begin", "CUDAGraph"}))
        graph[al.pool] = 1;
    }
    uint64_t n = 0, bytes = 0;
    for (Allocation& al : a_.allocations)
      if (al.pool != 0 && al.pool < rp.pools.size() && (graph[al.pool] || !user[al.pool])) {
        al.facts |= kFactGraphPool;
        ++n, bytes += al.requested;
      }
    if (n)
      a_.fact_evidence[0] = "in a private pool that no torch.cuda.use_mem_pool frame made (" + std::to_string(n) +
                            " allocations): memory of a CUDA graph's capture";
  }

  // Frees inside Optimizer.zero_grad annotations.
  void infer_zero_grad() {
    std::vector<std::pair<int64_t, int64_t>> spans;
    std::vector<int64_t> starts;
    for (const Annotation& an : t_.annotations) {
      if (an.device != d_.index && an.device != -1) continue;
      if (t_.strings.get(an.name).rfind("Optimizer.zero_grad", 0) != 0) continue;
      if (an.start) starts.push_back(an.time_us);
      else if (!starts.empty()) spans.push_back({starts.back(), an.time_us}), starts.pop_back();
    }
    if (spans.empty()) return;
    std::sort(spans.begin(), spans.end());
    uint64_t n = 0;
    for (Allocation& al : a_.allocations) {
      const int64_t uf = al.user_free();
      if (uf == INT64_MAX || uf < 0) continue;
      const int64_t t = d_.events[size_t(uf)].time_us;
      if (t == kNoTime) continue;
      auto it = std::upper_bound(spans.begin(), spans.end(), std::make_pair(t, INT64_MAX));
      if (it == spans.begin()) continue;
      --it;
      if (it->first <= t && t <= it->second) al.facts |= kFactZeroGradFree, ++n;
    }
    if (n) a_.fact_evidence[6] = "freed inside an Optimizer.zero_grad annotation (" + std::to_string(n) + " allocations)";
  }

  // States an optimizer keeps per parameter, from its class in the
  // Optimizer.step#Class.step annotations; -1 when the class does not say.
  int states_per_parameter() const {
    for (const Annotation& an : t_.annotations) {
      std::string name(t_.strings.get(an.name));
      if (name.rfind("Optimizer.step#", 0) != 0) continue;
      for (char& c : name) c = char(std::tolower(static_cast<unsigned char>(c)));
      if (name.find("adafactor") != std::string::npos) return -1;
      if (name.find("adam") != std::string::npos || name.find("lamb") != std::string::npos) return 2;
      if (name.find("adagrad") != std::string::npos || name.find("lion") != std::string::npos) return 1;
      return -1;
    }
    return -1;
  }

  // Memory from before the recording that no frame explains: blocks never
  // freed, matched by size to what the recording shows of the training
  // step. A parameter has one gradient of its own size each iteration (made
  // in the backward, or freed by zero_grad) and as many optimizer states of
  // its size as its optimizer keeps; what a size class holds beyond those
  // are buffers of the model.
  bool infer_pre_trace() {
    const int unknown = a_.unknown_index(), grad = cat("gradient"), state = cat("optimizer_state"),
              workspace = cat("workspace");
    std::map<uint64_t, std::vector<uint32_t>> pre;  // by size, in address order
    for (uint32_t id = 0; id < a_.allocations.size(); ++id) {
      const Allocation& al = a_.allocations[id];
      // Unexplained, or a workspace by its size alone (1 MiB is also a
      // parameter's size): the sizes below decide.
      const bool size_only = al.rule >= 0 && al.category == workspace && !rs_.rules[size_t(al.rule)].sizes.empty() &&
                             !rs_.rules[size_t(al.rule)].has_frame_name;
      if (al.alloc_event < 0 && al.free_event == INT64_MAX && (al.category == unknown || size_only))
        pre[al.requested].push_back(id);
    }
    if (pre.empty()) return false;
    std::map<uint64_t, int64_t> grads;  // per size: the most gradients of that size one iteration makes
    std::map<std::pair<int, uint64_t>, int64_t> per_iter;
    std::map<uint64_t, int64_t> zeroed;
    int64_t state_in_trace = 0, grad_total = 0;
    for (const Allocation& al : a_.allocations) {
      if (al.category == grad && al.alloc_event >= 0) ++per_iter[{a_.iteration_at(al.alloc_event), al.requested}];
      if (al.alloc_event < 0 && (al.facts & kFactZeroGradFree)) ++zeroed[al.requested];
      if (al.category == state && al.alloc_event >= 0 && al.requested > 64) ++state_in_trace;
    }
    for (const auto& [k, v] : per_iter) grads[k.second] = std::max(grads[k.second], v);
    for (const auto& [k, v] : zeroed) grads[k] = std::max(grads[k], v);
    for (const auto& [k, v] : grads) grad_total += v;
    bool steps = false;
    for (const PhaseSpan& sp : a_.spans) steps |= sp.phase == Phase::Optimizer;
    // States per parameter among the blocks from before: none when the
    // recording creates the state (its first step is recorded), else the
    // optimizer class's, else what the size classes say.
    int k = state_in_trace > 0 || !steps ? 0 : states_per_parameter();
    std::string k_from = state_in_trace > 0 ? "the recording creates the optimizer state"
                                             : k >= 0 ? "the optimizer class (Optimizer.step annotation)" : "";
    if (k < 0 && grad_total > 0) {
      std::map<int, uint64_t> votes;
      for (const auto& [size, ids] : pre) {
        auto g = grads.find(size);
        if (g == grads.end() || g->second == 0) continue;
        const int64_t ratio = int64_t(ids.size()) / g->second - 1;
        if (ratio >= 0 && ratio <= 3) votes[int(ratio)] += size * uint64_t(ids.size());
      }
      k = 0;
      uint64_t best = 0;
      for (const auto& [r, b] : votes)
        if (b > best) best = b, k = r;
      k_from = "the blocks of each gradient's size";
    }
    const uint16_t fp = kFactPreParameter, fg = kFactPreGradient, fs = kFactPreOptimizerState;
    uint64_t n[3] = {0, 0, 0};
    int64_t bytes[3] = {0, 0, 0};
    auto mark = [&](uint32_t id, int which) {
      static const uint16_t bit[3] = {fp, fg, fs};
      a_.allocations[id].facts |= bit[which];
      ++n[which];
      bytes[which] += int64_t(a_.allocations[id].requested);
    };
    std::vector<uint32_t> left;
    if (grad_total > 0) {
      // Gradients are made by the recording: one parameter per gradient.
      for (const auto& [size, ids] : pre) {
        auto g = grads.find(size);
        size_t p = g == grads.end() ? 0 : size_t(g->second), i = 0;
        for (; i < ids.size() && i < p; ++i) mark(ids[i], 0);
        for (size_t s = 0; i < ids.size() && s < size_t(k) * p; ++i, ++s) mark(ids[i], 2);
        // Beyond those, blocks of a parameter's size are the model's buffers.
        for (; i < ids.size(); ++i)
          if (p > 0) mark(ids[i], 0);
          else if (a_.allocations[ids[i]].category == unknown) left.push_back(ids[i]);
      }
    } else if (steps) {
      // No gradient is made in the recording: they were kept from before
      // (zero_grad(set_to_none=False), accumulation). Each parameter brings
      // its gradient and its states: m = 2 + k blocks of one size.
      int m = k >= 0 ? 2 + k : 0;
      if (m == 0) {
        uint64_t best = 0;
        for (int c : {4, 3, 2}) {
          uint64_t b = 0;
          for (const auto& [size, ids] : pre)
            if (ids.size() % size_t(c) == 0) b += size * ids.size();
          if (b > best) best = b, m = c;
        }
        k_from = "the blocks of each size";
      }
      for (auto [size, ids] : pre) {
        // A class one or two blocks over a multiple of m: those are real
        // workspaces of that size (1 MiB is cuBLASLt's and a 512x512 fp32
        // weight's), if the sizes alone made them workspaces.
        if (m > 0 && ids.size() % size_t(m) != 0) {
          size_t extra = ids.size() % size_t(m);
          std::vector<uint32_t> kept;
          for (size_t i = ids.size(); i-- > 0;)
            if (extra > 0 && a_.allocations[ids[i]].category != unknown) --extra;
            else kept.push_back(ids[i]);
          if (extra == 0) ids.assign(kept.rbegin(), kept.rend());
        }
        if (m == 0 || ids.size() % size_t(m) != 0) {
          for (uint32_t id : ids)
            if (a_.allocations[id].category == unknown) left.push_back(id);
          continue;
        }
        const size_t p = ids.size() / size_t(m);
        for (size_t i = 0; i < ids.size(); ++i) mark(ids[i], i < p ? 0 : i < 2 * p ? 1 : 2);
      }
      k = std::max(m - 2, 0);
    } else {
      // No training step in the recording: what was there is the model.
      for (const auto& [size, ids] : pre)
        for (uint32_t id : ids)
          if (a_.allocations[id].category == unknown) mark(id, 0);
    }
    // Gradients not of a parameter's size (FSDP2 reduce-scatters each
    // layer's gradients into one buffer): the blocks left are parameters and
    // their k states, 1 + k blocks of each size, if the parameters among
    // them add up to an iteration's gradients.
    if (grad_total > 0 && k >= 0 && !left.empty()) {
      std::map<int, int64_t> grad_bytes_per_iter;
      for (const Allocation& al : a_.allocations)
        if (al.category == grad && al.alloc_event >= 0)
          grad_bytes_per_iter[a_.iteration_at(al.alloc_event)] += int64_t(al.requested);
      int64_t g = 0;
      for (const auto& [it, b] : grad_bytes_per_iter) g = std::max(g, b);
      std::map<uint64_t, std::vector<uint32_t>> by_size;
      for (uint32_t id : left) by_size[a_.allocations[id].requested].push_back(id);
      int64_t params = 0;
      for (const auto& [size, ids] : by_size)
        if (ids.size() % size_t(k + 1) == 0) params += int64_t(size * (ids.size() / size_t(k + 1)));
      const int64_t want = g - bytes[0];
      if (want > 0 && params >= want - want / 20 && params <= want + want / 20) {
        std::vector<uint32_t> rest;
        for (const auto& [size, ids] : by_size) {
          if (ids.size() % size_t(k + 1) != 0) {
            rest.insert(rest.end(), ids.begin(), ids.end());
            continue;
          }
          const size_t p = ids.size() / size_t(k + 1);
          for (size_t i = 0; i < ids.size(); ++i) mark(ids[i], i < p ? 0 : 2);
        }
        left = std::move(rest);
        k_from += k_from.empty() ? "" : "; ";
        k_from += "parameters and states in groups of " + std::to_string(k + 1) +
                  " blocks of one size, the parameters adding up to an iteration's gradients";
      }
    }
    // Optimizer state not of a parameter's size (FSDP1's flat parameters
    // carry per-parameter states): the rest counts as state when its total
    // is the state the parameters still lack.
    if (!left.empty() && k > 0 && bytes[0] > 0) {
      int64_t rest = 0;
      for (uint32_t id : left) rest += int64_t(a_.allocations[id].requested);
      const int64_t lack = int64_t(k) * bytes[0] - bytes[2];
      // Blocks of a workspace's size may be states too: smallest first, as
      // far as the lacking bytes reach.
      std::vector<uint32_t> extra;
      for (const auto& [size, ids] : pre)
        for (uint32_t id : ids)
          if (!a_.allocations[id].facts && a_.allocations[id].category != unknown) extra.push_back(id);
      for (uint32_t id : extra) {
        if (rest + int64_t(a_.allocations[id].requested) > lack + lack / 200) break;
        rest += int64_t(a_.allocations[id].requested);
        left.push_back(id);
      }
      if (lack > 0 && rest <= lack + lack / 20 && rest >= lack - lack / 20) {
        for (uint32_t id : left) mark(id, 2);
        left.clear();
      }
    }
    auto mib = [](int64_t b) { return std::to_string((b + (1 << 19)) >> 20) + " MiB"; };
    if (n[0])
      a_.fact_evidence[1] = std::to_string(n[0]) + " blocks (" + mib(bytes[0]) + ") " +
                            (grad_total > 0 ? "size-matched to the " + std::to_string(grad_total) +
                                                  " gradients one iteration makes (and the model's buffers of those sizes)"
                             : steps ? "the first of each parameter-sized group of " + std::to_string(k + 2) +
                                           " blocks (parameter, gradient, states; " + k_from + ")"
                                     : "never freed, with no training step recorded to match");
    if (n[1])
      a_.fact_evidence[2] = std::to_string(n[1]) + " blocks (" + mib(bytes[1]) +
                            ") kept as gradients: none is made in the recording, one per parameter";
    if (n[2])
      a_.fact_evidence[3] = std::to_string(n[2]) + " blocks (" + mib(bytes[2]) + "): " + std::to_string(k) +
                            " optimizer states per parameter (" + k_from + "), size-matched to the parameters" +
                            (bytes[2] > 0 && left.empty() ? "" : "");
    return n[0] + n[1] + n[2] > 0;
  }

  // Copies of parameters that no frame names (plain FP8 casts, autocast's
  // cached casts with Python stacks): made in a forward and alive into the
  // backward, with a parameter's element count in a narrower dtype (a
  // parameter's bytes / 2 or / 4, whichever pairs more bytes in this run),
  // each parameter copied at most once per iteration, at sites whose such
  // allocations are at least half parameter-sized ones.
  // The batch of one iteration allocated where phases run together (the
  // first iteration after make_graphed_callables' warm-up, a recording that
  // starts mid-forward): the site that makes the input in other iterations.
  bool infer_input_sites() {
    const int input = cat("input");
    std::unordered_set<StackId> sites;
    for (const Allocation& al : a_.allocations)
      if (al.category == input && al.stack != 0) sites.insert(al.stack);
    if (sites.empty()) return false;
    uint64_t n = 0;
    for (Allocation& al : a_.allocations)
      if (al.category != input && al.alloc_event >= 0 && sites.count(al.stack)) al.facts |= kFactInputSite, ++n;
    if (n) a_.fact_evidence[7] = std::to_string(n) + " allocations at sites that make the input batch in other iterations";
    return n > 0;
  }

  // Gradients a captured backward writes (make_graphed_callables' static
  // grad outputs become .grad): graph-pool memory alive into the optimizer
  // step with a parameter's size, one per parameter.
  bool infer_graph_gradients() {
    const int param = cat("parameter"), graph = cat("graph_pool");
    std::unordered_map<uint64_t, int64_t> psize;
    for (const Allocation& al : a_.allocations)
      if (al.category == param) ++psize[al.requested];
    uint64_t n = 0;
    for (Allocation& al : a_.allocations) {
      if (al.category != graph) continue;
      const int64_t s = next_span_start_cached(al.alloc_event, Phase::Optimizer);
      if (s == INT64_MAX || al.user_free() <= s) continue;
      auto p = psize.find(al.requested);
      if (p == psize.end() || p->second == 0) continue;
      --p->second;
      al.facts |= kFactGraphGradient, ++n;
    }
    if (n)
      a_.fact_evidence[8] = std::to_string(n) +
                            " graph-pool allocations alive into the optimizer step, each of a parameter's size";
    return n > 0;
  }

  // A backward buffer alive into the next step that is never freed, in a
  // run whose gradients are freed (zero_grad(set_to_none=True)) and made
  // anew by later backwards: not a .grad, but a buffer the backward's code
  // keeps (a compiled backward's first run).
  bool infer_kept_buffers() {
    const int grad = cat("gradient");
    int last_backward_iter = -1;
    for (const PhaseSpan& sp : a_.spans)
      if (sp.phase == Phase::Backward) last_backward_iter = std::max(last_backward_iter, sp.iteration);
    std::unordered_map<uint64_t, int> freed_grad_iter;  // size -> latest iteration a gradient of that size was made and freed
    bool zeroed = false;
    for (const Allocation& al : a_.allocations)
      if (al.category == grad && al.alloc_event >= 0 && (al.facts & kFactZeroGradFree)) {
        zeroed = true;
        int& it = freed_grad_iter[al.requested];
        it = std::max(it, a_.iteration_at(al.alloc_event));
      }
    if (!zeroed) return false;
    uint64_t n = 0;
    for (Allocation& al : a_.allocations) {
      if (al.category != grad || al.alloc_event < 0 || al.free_event != INT64_MAX) continue;
      const int it = a_.iteration_at(al.alloc_event);
      auto f = freed_grad_iter.find(al.requested);
      if (it < last_backward_iter && f != freed_grad_iter.end() && f->second > it) al.facts |= kFactKeptBuffer, ++n;
    }
    if (n)
      a_.fact_evidence[9] = std::to_string(n) +
                            " backward allocations never freed, though later backwards make gradients of their size anew "
                            "and zero_grad frees them";
    return n > 0;
  }

  bool narrow_compute(uint64_t ratio) {
    const int grad = cat("gradient");
    uint64_t grads = 0, cast_up = 0;
    for (const Allocation& al : a_.allocations) {
      if (al.category != grad || al.alloc_event < 0 || al.requested < kMinCopyBytes * ratio) continue;
      ++grads;
      // The narrower gradient is freed right after the cast made this one.
      const uint64_t want = al.requested / ratio;
      const int64_t n = int64_t(d_.events.size());
      for (int64_t e = al.alloc_event + 1; e < n && e <= al.alloc_event + 8; ++e) {
        const Event& ev = d_.events[size_t(e)];
        // (the completion names the allocation; a free request does not)
        if ((ev.kind != EventKind::FreeRequested && ev.kind != EventKind::FreeCompleted) || ev.size != want) continue;
        const uint32_t id = a_.event_alloc[size_t(e)];
        if (id != UINT32_MAX && a_.allocations[id].alloc_event >= 0 && a_.allocations[id].alloc_event < al.alloc_event) {
          ++cast_up;
          break;
        }
      }
    }
    return grads > 0 && cast_up * 2 >= grads;
  }

  static constexpr uint64_t kMinCopyBytes = 64 << 10;
  bool infer_copies() {
    const int param = cat("parameter");
    std::unordered_map<uint64_t, int64_t> psize;
    for (const Allocation& al : a_.allocations)
      if (al.category == param) ++psize[al.requested];
    if (psize.empty()) return false;
    std::unordered_set<int> skip;
    for (const char* c : {"parameter", "gradient", "optimizer_state", "optimizer_temporary", "workspace",
                          "communication", "graph_pool", "parameter_copy"})
      if (cat(c) >= 0) skip.insert(cat(c));
    std::vector<uint32_t> cand;
    for (uint32_t id = 0; id < a_.allocations.size(); ++id) {
      const Allocation& al = a_.allocations[id];
      // Copies worth the name: a bias's cast or BatchNorm's saved statistics
      // (C floats, like the weight of a layer with 2C channels) are not.
      if (al.alloc_event < 0 || alloc_phase(al) != Phase::Forward || skip.count(al.category) ||
          al.requested < kMinCopyBytes)
        continue;
      // Kept for the backward and released by it (a KV cache or the model's
      // output, held until the step, is not a weight's copy).
      const int64_t b = next_span_start_cached(al.alloc_event, Phase::Backward);
      if (b == INT64_MAX || al.user_free() <= b || al.user_free() == INT64_MAX ||
          a_.phase_at(al.user_free()) != Phase::Backward)
        continue;
      cand.push_back(id);
    }
    if (cand.empty()) return false;
    std::sort(cand.begin(), cand.end(),
              [&](uint32_t x, uint32_t y) { return a_.allocations[x].alloc_event < a_.allocations[y].alloc_event; });
    uint64_t ratio = 0, best = 0;
    for (uint64_t r : {2u, 4u}) {
      uint64_t b = 0;
      for (uint32_t id : cand)
        if (psize.count(a_.allocations[id].requested * r)) b += a_.allocations[id].requested;
      if (b > best) best = b, ratio = r;
    }
    if (ratio == 0) return false;
    auto site = [&](const Allocation& al) -> uint64_t {
      if (al.stack == 0) return UINT64_MAX;
      const FrameId f = ft_.innermost_python(al.stack);
      return f != kNoFrame ? f : t_.stacks.node(al.stack).frame;
    };
    // Pass 1: which sites make parameter-sized allocations, slots shared.
    struct SiteCount {
      uint64_t matched = 0, all = 0, iterations = 0;
      int last_iteration = -1;
      bool copies() const { return matched * 4 >= all * 3 && matched >= 2 * iterations && matched > 0; }
    };
    std::unordered_map<uint64_t, SiteCount> sites;
    // Slots per iteration, one per parameter. A site that makes more
    // allocations of one size in an iteration than there are parameters of
    // the matching size makes activations of that size (a layer's outputs,
    // once per layer): its allocations take the slots others leave.
    std::unordered_map<uint64_t, uint32_t> per_site_size;  // (site, size, iteration) -> count
    auto key = [&](const Allocation& al) {
      uint64_t h = site(al) * 0x9e3779b97f4a7c15ull ^ al.requested;
      return h * 0x100000001b3ull ^ uint64_t(a_.iteration_at(al.alloc_event));
    };
    for (uint32_t id : cand) ++per_site_size[key(a_.allocations[id])];
    // Copies that frames already name (FSDP's unsharded parameters,
    // Transformer Engine's workspaces) hold their parameters' slots.
    const int copy = cat("parameter_copy");
    std::unordered_map<int, std::unordered_map<uint64_t, int64_t>> taken;
    for (const Allocation& al : a_.allocations)
      if (al.category == copy && al.alloc_event >= 0) ++taken[a_.iteration_at(al.alloc_event)][al.requested * ratio];
    auto match = [&](auto&& accept, auto&& on_match) {
      size_t i = 0;
      while (i < cand.size()) {
        const int iter = a_.iteration_at(a_.allocations[cand[i]].alloc_event);
        size_t j = i;
        while (j < cand.size() && a_.iteration_at(a_.allocations[cand[j]].alloc_event) == iter) ++j;
        std::unordered_map<uint64_t, int64_t> avail = psize;
        for (const auto& [size, count] : taken[iter]) {
          auto p = avail.find(size);
          if (p != avail.end()) p->second = std::max<int64_t>(0, p->second - count);
        }
        for (int round = 0; round < 2; ++round)
          for (size_t k = i; k < j; ++k) {
            const Allocation& al = a_.allocations[cand[k]];
            if (!accept(al)) continue;
            auto p = avail.find(al.requested * ratio);
            const bool clean = p != avail.end() && int64_t(per_site_size[key(al)]) <= psize[al.requested * ratio];
            if (clean != (round == 0)) continue;
            const bool hit = p != avail.end() && p->second > 0;
            if (hit) --p->second;
            on_match(cand[k], hit, clean);
          }
        i = j;
      }
    };
    match([](const Allocation&) { return true; },
          [&](uint32_t id, bool hit, bool clean) {
            // A site counts its matches of sizes it makes no more often than
            // there are parameters of that size.
            auto& s = sites[site(a_.allocations[id])];
            hit = hit && clean;
            s.matched += hit, ++s.all;
            const int iter = a_.iteration_at(a_.allocations[id].alloc_event);
            if (hit && iter != s.last_iteration) ++s.iterations, s.last_iteration = iter;
            if (psize.count(a_.allocations[id].requested * ratio)) a_.allocations[id].facts |= kFactParamSized;
          });
    // A run that copies its parameters fills nearly every parameter's slot
    // in some iteration; coincidences of activation sizes fill few.
    uint64_t big = 0;
    for (const auto& [size, count] : psize)
      if (size >= kMinCopyBytes * ratio) big += size * uint64_t(count);
    // (Parameters of three sizes at least: a small MLP's activations can
    // have the sizes of its one or two kinds of weights.)
    std::unordered_map<int, uint64_t> filled;  // per iteration, parameter bytes whose slot a candidate took
    std::unordered_map<int, std::unordered_set<uint64_t>> kinds;
    match([](const Allocation&) { return true; },
          [&](uint32_t id, bool hit, bool) {
            if (!hit) return;
            const int it = a_.iteration_at(a_.allocations[id].alloc_event);
            const uint64_t b = a_.allocations[id].requested * ratio;
            filled[it] += b;
            if (b >= kMinCopyBytes * ratio) kinds[it].insert(b);
          });
    uint64_t best_fill = 0;
    for (const auto& [it, b] : filled)
      if (kinds[it].size() >= 3) best_fill = std::max(best_fill, b);
    // And the run computes in the narrower dtype: most gradients are cast
    // up from a gradient of that dtype made just before them (autocast's
    // ToCopyBackward0), which a run in the parameters' own dtype never does.
    const bool whole_model = big > 0 && best_fill * 10 >= big * 9 && narrow_compute(ratio);
    uint64_t n = 0, nsites = 0;
    for (const auto& [k, v] : sites) nsites += v.copies();
    match([&](const Allocation& al) { return whole_model || sites[site(al)].copies(); },
          [&](uint32_t id, bool hit, bool) {
            if (hit) a_.allocations[id].facts |= kFactParamCopySite, ++n;
          });
    const char* dtype = ratio == 2 ? "half the bytes" : "a quarter of the bytes";
    a_.fact_evidence[4] = "made in a forward and alive into the backward, with " + std::string(dtype) +
                          " of a parameter (its element count in a narrower dtype)";
    if (n && whole_model)
      a_.fact_evidence[5] = std::to_string(n) + " allocations made in forwards and kept for the backward, one per parameter "
                            "and iteration, with " + dtype + " of one: one iteration copies " +
                            std::to_string(best_fill * 100 / big) + "% of the parameters' bytes this way";
    else if (n)
      a_.fact_evidence[5] = std::to_string(n) + " allocations at " + std::to_string(nsites) +
                            " sites whose forward allocations kept for the backward are mostly one per parameter, with " +
                            dtype + " of one (its element count in a narrower dtype)";
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
    for (const Rule& r : rs_.rules)
      if (r.unlike_sizes_of >= 0) tracked_.push_back(r.unlike_sizes_of);
    infer_pools();
    infer_zero_grad();
    for (uint32_t id : order) categorize_one(id);
    // What the first pass's parameters, gradients and optimizer state say
    // about the rest: memory from before the recording, then copies of
    // parameters. Only allocations an inference marks can change category.
    // (Only facts some rule tests can change a category.)
    uint16_t tested = 0;
    for (const Rule& r : rs_.rules) tested = uint16_t(tested | r.facts_any);
    auto again = [&](uint16_t mask) {
      mask = uint16_t(mask & tested);
      if (mask == 0) return;
      for (uint32_t id : order)
        if (a_.allocations[id].facts & mask) categorize_one(id);
    };
    if (infer_kept_buffers()) again(kFactKeptBuffer);
    if (infer_pre_trace()) again(kFactPreParameter | kFactPreGradient | kFactPreOptimizerState);
    if (infer_copies()) again(kFactParamSized | kFactParamCopySite);
    if (infer_input_sites()) again(kFactInputSite);
    if (infer_graph_gradients()) again(kFactGraphGradient);
    // Category breakdown at each span's peak.
    measure_spans();
    std::vector<int64_t> idx;
    idx.reserve(a_.spans.size());
    for (const PhaseSpan& s : a_.spans) idx.push_back(s.peak_event);
    auto cats = a_.categories_at(idx);
    for (size_t k = 0; k < a_.spans.size(); ++k) a_.spans[k].categories = std::move(cats[k]);
  }

  const Trace& t_;
  const FrameTable& ft_;
  const Device& d_;
  // The replay, possibly still running: waits for it on first use.
  const DeviceReplay& replay() {
    if (!rp_) rp_ = &replay_();
    return *rp_;
  }
  const std::function<const DeviceReplay&()>& replay_;
  const DeviceReplay* rp_ = nullptr;
  bool private_pools_ = false;                                 // a dumped segment is in a private pool
  std::vector<std::pair<uint32_t, uint32_t>> dump_blocks_;    // (allocation, segment) of the dump's blocks
  const RuleSet& rs_;
  detail::RuleMatcher& m_;
  Attribution a_;
  std::vector<uint32_t> alloc_of_event_;
  std::unordered_map<uint32_t, std::unordered_map<uint64_t, std::vector<uint32_t>>> freed_in_span_;
  std::unordered_set<uint32_t> replaced_;
  detail::AddrMap freed_once_;  // addresses freed at least once
  uint16_t unknown_ = 0;         // the index of `unknown` among the categories
  static_assert(int(Phase::PreTrace) == 5, "one list per Phase");
  std::array<std::vector<uint32_t>, 6> frameless_by_phase_;  // frameless_for(), by Phase
  std::array<bool, 6> frameless_known_{};
  std::unordered_map<int, std::unordered_set<uint64_t>> sizes_of_;
  std::vector<int> tracked_;
  std::unordered_map<int, int> ratio_;
  std::vector<int64_t> next_start_[kPhaseCount];
  std::vector<int> empty_iter_;  // iteration of each step without events
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
