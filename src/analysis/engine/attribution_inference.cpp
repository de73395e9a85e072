// Inference runs (see src/analysis/attribution_parts.hpp and
// docs/attribution.md "Inferences", "Inference and the KV cache"): a run
// with forwards and no backward and no optimizer step. Its decoding
// forwards, the KV cache they keep from one forward to the next (held
// blocks, and chains of blocks a constant step larger, each replacing the
// last) and the input the code around them passes in.
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <unordered_map>

#include "analysis/engine/attribution_parts.hpp"

namespace snapdiff::detail {

namespace {

std::string mib(int64_t b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", double(b) / double(1 << 20));
  return buf;
}

std::string kib(int64_t b) {
  if (b < (1 << 20)) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f KiB", double(b) / 1024.0);
    return buf;
  }
  return mib(b);
}

}  // namespace

// Marks kv_cache_held, kv_cache_growth and inference_input; returns whether
// any was marked. Linear in the events and the stack nodes.
bool Inferrer::infer_inference() {
  bool forward = false;
  for (const PhaseSpan& s : a_.spans) {
    if (s.phase == Phase::Backward || s.phase == Phase::Optimizer) return false;
    forward = forward || s.phase == Phase::Forward;
  }
  if (!forward) return false;
  const auto& ev = d_.events;
  // The decoding forwards: runs of allocations made inside module calls
  // (stack hint forward), each ended by an allocation of the code around
  // them (the decoding loop's own: no hint, or another phase's).
  run_starts_.clear();
  last_forward_ = -1;
  bool in_run = false;
  for (size_t i = 0; i < ev.size(); ++i) {
    if (ev[i].kind != EventKind::Alloc) continue;
    const int8_t h = m_.stack_hint(ev[i].stack);
    if (h == kHintEmpty) continue;
    const bool f = h == int8_t(Phase::Forward);
    if (f && !in_run) run_starts_.push_back(int64_t(i));
    if (f) last_forward_ = int64_t(i);
    in_run = f;
  }
  if (run_starts_.empty()) return false;
  inference_ = true;
  // The run after an event: the first run starting after it.
  auto next_run = [&](int64_t e) {
    auto it = std::upper_bound(run_starts_.begin(), run_starts_.end(), e);
    return it == run_starts_.end() ? INT64_MAX : *it;
  };
  auto run_of = [&](int64_t e) { return std::upper_bound(run_starts_.begin(), run_starts_.end(), e) - run_starts_.begin(); };
  // Held: made inside a module call, or before the first forward (a cache
  // set up ahead: StaticCache.__init__, setup_caches), and alive when a
  // later forward starts. What the decoding loop's own code makes between
  // forwards (the generated ids) is not a cache, whatever its callers' names.
  uint64_t held = 0;
  for (Allocation& al : a_.allocations) {
    if (al.alloc_event < 0 || al.stack == 0) continue;
    if (al.alloc_event > run_starts_.front() && m_.stack_hint(al.stack) == kHintNone) continue;
    if (next_run(al.alloc_event) < al.user_free()) al.facts |= kFactKvCacheHeld, ++held;
  }
  // Chains: at one site inside a module call, a block freed right after a
  // larger one was made there (the last allocation at that site, still
  // alive): the new one replaces it (torch.cat of the old cache and the new
  // token's keys). A site is a growing cache when at least three such links,
  // each from a block made in an earlier forward, mostly share one step.
  struct Link {
    uint32_t from, to;
    uint64_t step;
  };
  std::unordered_map<StackId, uint32_t> last;  // the last allocation at each site inside a module call
  std::unordered_map<StackId, std::vector<Link>> links;
  for (size_t i = 0; i < ev.size(); ++i) {
    const uint32_t id = a_.event_alloc[i];
    if (id == UINT32_MAX) continue;
    const Allocation& al = a_.allocations[id];
    if (ev[i].kind == EventKind::Alloc) {
      if (al.alloc_event == int64_t(i) && al.stack != 0 && m_.stack_hint(al.stack) == int8_t(Phase::Forward))
        last[al.stack] = id;
      continue;
    }
    // (Events name an allocation at its alloc and where it is closed: the
    // free's completion, or the user's free without completions.)
    const int64_t uf = al.user_free();
    if (al.free_event != int64_t(i) || al.alloc_event < 0 || uf < 0) continue;
    auto l = last.find(al.stack);
    if (l == last.end() || l->second == id) continue;
    const Allocation& nb = a_.allocations[l->second];
    if (nb.alloc_event <= al.alloc_event || nb.alloc_event >= uf || nb.requested <= al.requested || nb.user_free() <= uf)
      continue;
    if (run_of(al.alloc_event) >= run_of(nb.alloc_event)) continue;  // within one forward: not a cache
    links[al.stack].push_back({id, l->second, nb.requested - al.requested});
  }
  uint64_t grown = 0;
  growth_sites_ = 0;
  growth_chains_ = 0;
  for (auto& [stack, ls] : links) {
    if (ls.size() < 3) continue;
    std::map<uint64_t, size_t> by_step;
    for (const Link& k : ls) ++by_step[k.step];
    auto best = std::max_element(by_step.begin(), by_step.end(),
                                 [](const auto& x, const auto& y) { return x.second < y.second; });
    if (best->second < 3 || best->second * 5 < ls.size() * 4) continue;  // one step for 80% of the links
    ++growth_sites_;
    std::unordered_map<uint32_t, uint8_t> has_pred;
    for (const Link& k : ls) {
      if (k.step != best->first) continue;
      for (uint32_t id : {k.from, k.to}) {
        Allocation& al = a_.allocations[id];
        if (!(al.facts & kFactKvCacheGrowth)) al.facts |= kFactKvCacheGrowth, ++grown;
      }
      has_pred[k.to] = 1;
      has_pred.try_emplace(k.from, 0);
    }
    for (const auto& [id, p] : has_pred) growth_chains_ += p == 0;  // a chain's first block
  }
  // The input: made by the user's code that calls the forwards, before the
  // first one and outside that call, and alive when the first forward
  // starts: its innermost frame of the user's own code is no frame of the
  // forwards' common callers and branches off them above their innermost
  // common frame (a library between, BatchEncoding.to(), or C++ frames
  // inside say nothing; what generate() makes before its loop branches off
  // inside its caller's call). The common callers: the lowest common
  // ancestor of the forwards' stacks, each stack node visited once.
  const size_t nodes = t_.stacks.size();
  std::vector<uint32_t> depth(nodes, 0);
  std::vector<StackId> user(nodes, 0);  // per node: the innermost node of the user's code or a scope (0: none)
  for (size_t s = 1; s < nodes; ++s) {
    const StackId p = t_.stacks.node(StackId(s)).parent;
    const FrameId f = t_.stacks.node(StackId(s)).frame;
    depth[s] = p < s ? depth[p] + 1 : uint32_t(t_.stacks.depth(StackId(s)));
    const bool own = f < ft_.size() && (ft_.kind(f) == FrameKind::UserPython || ft_.scope(f));
    user[s] = own ? StackId(s) : p < s ? user[p] : 0;
  }
  std::vector<uint8_t> seen(nodes, 0);
  StackId lca = 0;
  bool any = false;
  for (size_t i = 0; i < ev.size(); ++i) {
    if (ev[i].kind != EventKind::Alloc || m_.stack_hint(ev[i].stack) != int8_t(Phase::Forward)) continue;
    StackId v = ev[i].stack;
    if (seen[v]) {
      if (any && depth[v] <= depth[lca]) lca = v;
      continue;
    }
    for (; v != 0 && !seen[v]; v = t_.stacks.node(v).parent) seen[v] = 1;
    if (!any) lca = ev[i].stack, any = true;
    else if (v == 0 || depth[v] <= depth[lca]) lca = v;
  }
  uint64_t inputs = 0;
  if (lca != 0) {
    std::vector<uint8_t> path(nodes, 0);  // the common callers: 1 for their innermost node, 2 above it
    path[lca] = 1;
    for (StackId v = t_.stacks.node(lca).parent; v != 0; v = t_.stacks.node(v).parent) path[v] = 2;
    const int64_t first = run_starts_.front();
    for (Allocation& al : a_.allocations) {
      if (al.alloc_event < 0 || al.alloc_event >= first || al.user_free() <= first || al.stack == 0) continue;
      if (m_.stack_hint(al.stack) != kHintNone) continue;
      const StackId u = user[al.stack];
      const StackId p = u == 0 ? 0 : t_.stacks.node(u).parent;
      if (u == 0 || path[u] || p == 0 || path[p] != 2) continue;
      al.facts |= kFactInferenceInput, ++inputs;
    }
  }
  if (inputs)
    a_.fact_evidence[14] = std::to_string(inputs) +
                           " allocations made by the code that calls the forwards, before the first one and outside "
                           "that call, alive when it starts, in a run without a backward or an optimizer step";
  return held + grown + inputs > 0;
}

// The KV cache's figures once the categories are final: its bytes before
// each decoding forward and after the last, the growth per forward (one
// token for every sequence of the batch), its bytes at the peak.
void Inferrer::describe_kv_cache(int64_t peak_event) {
  const int kv = cat("kv_cache");
  if (!inference_ || kv < 0) return;
  uint64_t blocks = 0;
  for (const Allocation& al : a_.allocations) blocks += al.category == uint16_t(kv);
  if (blocks == 0) return;
  std::vector<int64_t> at;  // before each forward after the first, after the last
  for (size_t k = 1; k < run_starts_.size(); ++k) at.push_back(run_starts_[k] - 1);
  at.push_back(last_forward_);
  at.push_back(peak_event);
  const auto cats = a_.categories_at(at);
  const int64_t at_peak = cats.back()[size_t(kv)];
  std::vector<int64_t> steps;
  for (size_t k = 1; k + 1 < cats.size(); ++k) steps.push_back(cats[k][size_t(kv)] - cats[k - 1][size_t(kv)]);
  int64_t per_token = 0;
  if (!steps.empty()) {
    std::vector<int64_t> s = steps;
    std::nth_element(s.begin(), s.begin() + long(s.size() / 2), s.end());
    per_token = s[s.size() / 2];
  }
  const int64_t first = cats.size() > 1 ? cats[0][size_t(kv)] : 0, last = cats[cats.size() - 2][size_t(kv)];
  std::string w = "an inference run (forwards, no backward, no optimizer step) of " + std::to_string(run_starts_.size()) +
                  " forwards; the KV cache (" + std::to_string(blocks) + " blocks) is " + mib(at_peak) +
                  " at the peak";
  if (per_token > 0)
    w += "; it grows by " + kib(per_token) + " per generated token (each decoding forward, for the whole batch), from " +
         mib(first) + " after the first forward (the prompt) to " + mib(last) + " after the last";
  else
    w += "; allocated once at its full length and written in place: " + mib(last) +
         " after the last forward, no growth per generated token to measure";
  a_.fact_evidence[12] = w;
  a_.kv_cache_forwards = int(run_starts_.size());
  a_.kv_cache_per_token = per_token;
  if (growth_chains_ > 0)
    a_.fact_evidence[13] = std::to_string(growth_chains_) + " tensors at " + std::to_string(growth_sites_) +
                           " sites grow by a constant step each decoding forward, each new block replacing the last "
                           "(freed right after it): " +
                           (per_token > 0 ? kib(per_token) + " per generated token for the whole batch; " : std::string()) +
                           "the KV cache is " + mib(at_peak) + " at the peak";
}

}  // namespace snapdiff::detail
