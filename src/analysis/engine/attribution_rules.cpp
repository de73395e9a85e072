// Rule matching (see src/analysis/attribution_parts.hpp and
// docs/attribution.md): the RuleMatcher matches a trace's frames and stacks
// against the rules' patterns once; the Categorizer gives each allocation the
// category of the first rule whose conditions hold.
#include <algorithm>
#include <iterator>

#include "analysis/engine/attribution_parts.hpp"
#include "snapdiff/model/frame_names.hpp"

namespace snapdiff::detail {

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

Categorizer::Categorizer(const RuleSet& rs, RuleMatcher& m, SpanQueries& spans, Attribution& a)
    : rs_(rs), m_(m), spans_(spans), a_(a), unknown_(uint16_t(a.unknown_index())) {
  for (const Rule& r : rs_.rules)
    if (r.unlike_sizes_of >= 0) tracked_.push_back(r.unlike_sizes_of);
}

// The rules without frame conditions that can hold on an allocation made
// in phase `p` (holds() tests the phase first; this spares the calls).
const std::vector<uint32_t>& Categorizer::frameless_for(Phase p) {
  std::vector<uint32_t>& out = frameless_by_phase_[size_t(p)];
  if (!frameless_known_[size_t(p)]) {
    for (uint32_t ri : m_.frameless_rules())
      if (rs_.rules[ri].alloc_phases & (1u << int(p))) out.push_back(ri);
    frameless_known_[size_t(p)] = true;
  }
  return out;
}

int Categorizer::grad_ratio(int cat) {
  auto it = ratio_.find(cat);
  if (it != ratio_.end()) return it->second;
  std::unordered_map<uint64_t, int64_t> kept;  // never-freed backward buffers by size
  for (const Allocation& al : a_.allocations)
    if (al.alloc_event >= 0 && al.free_event == INT64_MAX && spans_.alloc_phase(al) == Phase::Backward) ++kept[al.requested];
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
const std::unordered_map<uint64_t, std::vector<uint32_t>>& Categorizer::frees_in_span(uint32_t span) {
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

bool Categorizer::holds(size_t ri, uint32_t id) {
  const Rule& r = rs_.rules[ri];
  const Allocation& al = a_.allocations[id];
  if (r.facts_any && !(al.facts & r.facts_any)) return false;
  Phase ap = spans_.alloc_phase(al);
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
    int8_t h = m_.stack_hint(al.stack);
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
    case Lifetime::HeldToEnd:
      // Freed by the run's end (a trainer's teardown clears the cuBLAS
      // workspaces) counts as never freed: after the last forward, backward
      // and step, in a later iteration than its allocation.
      if (freed && (pre || fp == Phase::Forward || fp == Phase::Backward || fp == Phase::Optimizer ||
                    a_.spans[fs].iteration <= a_.spans[as].iteration ||
                    spans_.next_span_start(uf, Phase::Forward) != INT64_MAX ||
                    spans_.next_span_start(uf, Phase::Backward) != INT64_MAX ||
                    spans_.next_span_start(uf, Phase::Optimizer) != INT64_MAX))
        return false;
      break;
    case Lifetime::AliveAtNextOptimizer: {
      int64_t s = spans_.next_span_start(al.alloc_event, Phase::Optimizer);
      if (s == INT64_MAX || uf <= s) return false;
      break;
    }
    case Lifetime::SpansBackward: {
      int64_t s = spans_.next_span_start(al.alloc_event, Phase::Backward);
      if (s == INT64_MAX || uf <= s) return false;
      break;
    }
  }
  if (r.no_later_optimizer && spans_.next_span_start(al.alloc_event, Phase::Optimizer) != INT64_MAX) return false;
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

void Categorizer::categorize_one(uint32_t id) {
  Allocation& al = a_.allocations[id];
  al.category = unknown_;
  al.rule = -1;
  // The rules in order, of those with frame conditions only the ones
  // that hold on this stack, of the others only those for the phase it
  // was allocated in (the two lists are disjoint and ascending).
  const std::vector<uint32_t>& frameless = frameless_for(spans_.alloc_phase(al));
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

}  // namespace snapdiff::detail
