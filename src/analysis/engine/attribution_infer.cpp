// Category inference (see src/analysis/attribution_parts.hpp and
// docs/attribution.md "Inferences"): what the first round of categories says
// about the rest, as Fact bits on the allocations and the evidence of each.
#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <string>

#include "analysis/engine/attribution_parts.hpp"

namespace snapdiff::detail {

namespace {

// Each allocation's pool: the replay's for those the history made, the
// segment's for the dump's blocks.
void assign_pools(const Device& d, const DeviceReplay& rp,
                  const std::vector<std::pair<uint32_t, uint32_t>>& dump_blocks, Attribution& a) {
  for (Allocation& al : a.allocations)
    if (al.alloc_event >= 0 && !rp.alloc_pool.empty()) al.pool = rp.alloc_pool[size_t(al.alloc_event)];
  std::map<std::pair<int64_t, int64_t>, uint32_t> pool_of;
  for (uint32_t p = 0; p < rp.pools.size(); ++p) pool_of.emplace(std::make_pair(rp.pools[p].id[0], rp.pools[p].id[1]), p);
  for (const auto& [id, si] : dump_blocks) {
    const Segment& sg = d.segments[si];
    auto pi = pool_of.find({sg.pool_id[0], sg.pool_id[1]});
    a.allocations[id].pool = pi == pool_of.end() ? 0 : pi->second;
  }
}

// Bytes as MiB for the --explain sentences written here (the pre-trace
// groups' own are facts the report layer words: PreTraceEvidence).
std::string mib(uint64_t b) { return std::to_string((b + (1 << 19)) >> 20) + " MiB"; }

}  // namespace

// Does any frame of the stack have a name containing one of `needles`?
bool Inferrer::stack_mentions(StackId s, std::initializer_list<std::string_view> needles) const {
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
void Inferrer::infer_pools(bool private_pools, const std::vector<std::pair<uint32_t, uint32_t>>& dump_blocks) {
  if (!private_pools) return;
  const DeviceReplay& rp = replay_();
  assign_pools(d_, rp, dump_blocks, a_);
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
void Inferrer::infer_zero_grad() {
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
int Inferrer::states_per_parameter() const {
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

// Optimizer state from before the recording that the optimizer replaces:
// a hand-written step (state["m"] = b1 * state["m"] + ...) frees each old
// state and keeps a new tensor of its size in its place. A block from
// before the recording that no rule placed, freed in an optimizer phase
// that keeps at least as many new blocks of its size past its end (the
// first round's optimizer_state), is that state, whatever the optimizer's
// class or file. When every optimizer phase of the recording keeps a
// different count of that size, the match is no per-step replacement and is
// left alone. Marks pre_trace_optimizer_state; returns how many it marked.
uint64_t Inferrer::infer_replaced_state() {
  const int unknown = a_.unknown_index(), state = cat("optimizer_state");
  if (state < 0) return 0;
  // (optimizer span, size) -> pre-recording blocks it frees / kept blocks it makes.
  std::map<std::pair<uint32_t, uint64_t>, std::vector<uint32_t>> freed;
  std::map<std::pair<uint32_t, uint64_t>, int64_t> kept;
  for (uint32_t id = 0; id < a_.allocations.size(); ++id) {
    const Allocation& al = a_.allocations[id];
    if (al.alloc_event < 0) {
      const int64_t uf = al.user_free();
      if (al.category != unknown || uf < 0 || uf == INT64_MAX) continue;
      const uint32_t sp = a_.event_span[size_t(uf)];
      if (a_.spans[sp].phase == Phase::Optimizer) freed[{sp, al.requested}].push_back(id);
    } else if (al.category == state) {
      const uint32_t sp = a_.event_span[size_t(al.alloc_event)];
      if (a_.spans[sp].phase == Phase::Optimizer) ++kept[{sp, al.requested}];
    }
  }
  if (freed.empty()) return 0;
  // The count of kept blocks of each size per step: the same in every step
  // that keeps any (a per-step replacement), else -1.
  std::map<uint64_t, int64_t> per_step;
  for (const auto& [k, n] : kept) {
    auto [it, fresh] = per_step.emplace(k.second, n);
    if (!fresh && it->second != n) it->second = -1;
  }
  uint64_t n = 0, bytes = 0, steps = 0;
  std::unordered_set<uint32_t> spans;
  for (const auto& [k, ids] : freed) {
    auto ks = kept.find(k);
    auto ps = per_step.find(k.second);
    if (ks == kept.end() || ps == per_step.end() || ps->second < 0 || ks->second < int64_t(ids.size())) continue;
    for (uint32_t id : ids) a_.allocations[id].facts |= kFactPreOptimizerState, ++n, bytes += a_.allocations[id].requested;
    spans.insert(k.first);
  }
  steps = spans.size();
  if (n)
    replaced_evidence_ = std::to_string(n) + " blocks (" + std::to_string((bytes + (1 << 19)) >> 20) +
                         " MiB) from before the recording freed by " + std::to_string(steps) +
                         " optimizer step(s) that keep as many new blocks of their sizes past the step, the same count "
                         "every step: state the optimizer replaces (not updated in place)";
  return n;
}

// Memory from before the recording that no frame explains: blocks never
// freed, matched by size to what the recording shows of the training
// step. A parameter has one gradient of its own size each iteration (made
// in the backward, or freed by zero_grad) and as many optimizer states of
// its size as its optimizer keeps; what a size class holds beyond those
// are buffers of the model.
bool Inferrer::infer_pre_trace() {
  const uint64_t replaced = infer_replaced_state();
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
  if (pre.empty()) {
    a_.fact_evidence[3] = replaced_evidence_;
    return replaced > 0;
  }
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
  // What decided, for --explain (the report layer words it).
  PreTraceEvidence& ev = a_.pre_trace;
  ev = PreTraceEvidence{};
  using From = PreTraceEvidence::StatesFrom;
  ev.states_from = state_in_trace > 0 ? From::RecordingCreates : k >= 0 ? From::OptimizerClass : From::Unknown;
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
    ev.states_from = From::GradientSizes;
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
      ev.states_from = From::SizeClasses;
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
    // Size classes, largest first. A class that is no multiple of k + 1
    // takes in the next smaller one within 1% of its size: an unevenly
    // sharded parameter (FSDP2 pads its shard; the optimizer's state has
    // the unpadded size) is one block a little larger than its states.
    std::vector<std::vector<uint32_t>> classes;
    uint64_t smallest = 0;
    for (auto it = by_size.rbegin(); it != by_size.rend(); ++it) {
      const uint64_t size = it->first;
      if (!classes.empty() && classes.back().size() % size_t(k + 1) != 0 && (smallest - size) * 100 <= smallest)
        classes.back().insert(classes.back().end(), it->second.begin(), it->second.end());
      else
        classes.push_back(it->second);
      smallest = size;
    }
    int64_t params = 0;
    for (const auto& ids : classes)
      if (ids.size() % size_t(k + 1) == 0)
        for (size_t i = 0; i < ids.size() / size_t(k + 1); ++i) params += int64_t(a_.allocations[ids[i]].requested);
    const int64_t want = g - bytes[0];
    if (want > 0 && params >= want - want / 20 && params <= want + want / 20) {
      std::vector<uint32_t> rest;
      for (const auto& ids : classes) {
        if (ids.size() % size_t(k + 1) != 0) {
          rest.insert(rest.end(), ids.begin(), ids.end());
          continue;
        }
        // The parameters are the largest blocks of a class (padded shards).
        const size_t p = ids.size() / size_t(k + 1);
        for (size_t i = 0; i < ids.size(); ++i) mark(ids[i], i < p ? 0 : 2);
      }
      left = std::move(rest);
      ev.grouped = true;
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
  for (int i = 0; i < 3; ++i) ev.blocks[i] = n[i], ev.bytes[i] = bytes[i];
  ev.gradients = grad_total;
  ev.steps = steps;
  ev.states = k;
  if (replaced)
    a_.fact_evidence[3] = a_.fact_evidence[3].empty() ? replaced_evidence_ : a_.fact_evidence[3] + "; " + replaced_evidence_;
  return n[0] + n[1] + n[2] + replaced > 0;
}

// Frozen and pre-existing weights (docs/attribution.md "Inferences"):
//  - a tensor made in the recording by the user's code (outside forward,
//    backward and step) and kept to the end through two steps at least,
//    that no rule placed, of a size whose gradients one iteration makes more of than
//    there are parameters, with optimizer state of its size: a trained
//    tensor that is not a module parameter (an input being optimised);
//  - blocks from before the recording, never freed, that no rule placed:
//    the model's frozen weights and buffers when the recording shows the
//    model was there before it began: its first step is recorded (it makes
//    every gradient and all the optimizer state, so what was held before
//    is neither), or the trained parameters form a low-rank adapter layout
//    (pairs r x in, out x r) whose products out x in, in a base dtype, are
//    among those blocks.
bool Inferrer::infer_frozen() {
  const int unknown = a_.unknown_index(), param = cat("parameter"), grad = cat("gradient"),
            state = cat("optimizer_state"), workspace = cat("workspace");
  if (param < 0 || grad < 0) return false;
  std::map<uint64_t, int64_t> grads, params, states;
  std::map<std::pair<int, uint64_t>, int64_t> per_iter;
  bool pre_grad_or_state = false, state_in_trace = false, steps = false;
  std::vector<int64_t> step_starts;  // in event order
  for (const PhaseSpan& sp : a_.spans)
    if (sp.phase == Phase::Optimizer) steps = true, step_starts.push_back(sp.start_event);
  std::map<uint64_t, std::vector<uint32_t>> trained;  // candidates, by size
  for (uint32_t id = 0; id < a_.allocations.size(); ++id) {
    const Allocation& al = a_.allocations[id];
    if (al.category == grad && al.alloc_event >= 0) ++per_iter[{a_.iteration_at(al.alloc_event), al.requested}];
    if (int(al.category) == param) ++params[al.requested];
    if (int(al.category) == state) {
      ++states[al.requested];
      if (al.alloc_event >= 0 && al.requested > 64) state_in_trace = true;
    }
    if (al.alloc_event < 0 && al.free_event == INT64_MAX && (int(al.category) == grad || int(al.category) == state))
      pre_grad_or_state = true;
    // Made by the user's code (not a forward, backward or step) and kept
    // to the end through two optimizer steps at least, as a tensor the
    // loop trains is (a batch lives through one step).
    if (al.alloc_event >= 0 && al.category == unknown && al.free_event == INT64_MAX &&
        (spans_.alloc_phase(al) == Phase::Other || spans_.alloc_phase(al) == Phase::Init) &&
        step_starts.end() - std::upper_bound(step_starts.begin(), step_starts.end(), al.alloc_event) >= 2)
      trained[al.requested].push_back(id);
  }
  for (const auto& [k, v] : per_iter) grads[k.second] = std::max(grads[k.second], v);
  uint64_t nt = 0, bt = 0;
  for (const auto& [size, ids] : trained) {
    const int64_t g = grads.count(size) ? grads[size] : 0, p = params.count(size) ? params[size] : 0;
    if (g <= p || !states.count(size)) continue;
    for (size_t i = 0; i < ids.size() && int64_t(i) < g - p; ++i) {
      a_.allocations[ids[i]].facts |= kFactTrainedTensor;
      ++nt, bt += a_.allocations[ids[i]].requested, ++params[size];
    }
  }
  if (nt)
    a_.fact_evidence[11] = std::to_string(nt) + (nt == 1 ? " tensor (" : " tensors (") + mib(bt) +
                           ") made by the recording and kept, with a gradient and optimizer state of its size each "
                           "iteration beyond the module parameters: trained by the optimizer";
  // Blocks from before the recording that nothing placed (and those only
  // their size made workspaces: a 512 x 512 fp32 weight is 1 MiB).
  std::map<uint64_t, std::vector<uint32_t>> pre;
  for (uint32_t id = 0; id < a_.allocations.size(); ++id) {
    const Allocation& al = a_.allocations[id];
    const bool size_only = al.rule >= 0 && int(al.category) == workspace && !rs_.rules[size_t(al.rule)].sizes.empty() &&
                           !rs_.rules[size_t(al.rule)].has_frame_name;
    if (al.alloc_event < 0 && al.free_event == INT64_MAX && (al.category == unknown || size_only))
      pre[al.requested].push_back(id);
  }
  if (pre.empty()) return nt > 0;
  auto mark_frozen = [&](uint32_t id, uint64_t& n, uint64_t& b) {
    a_.allocations[id].facts |= kFactFrozenParameter;
    ++n, b += a_.allocations[id].requested;
  };
  uint64_t nf = 0, bf = 0;
  const bool first_step = steps && !per_iter.empty() && state_in_trace && !pre_grad_or_state;
  if (first_step) {
    // A block of a library workspace's size (the workspace rules' sizes)
    // that those rules left alone — a parameter has that size too — may be
    // either: it stays unknown, counted as held from before.
    std::set<uint64_t> workspace_sizes;
    for (const Rule& ru : rs_.rules)
      if (ru.category_index == workspace && !ru.has_frame_name) workspace_sizes.insert(ru.sizes.begin(), ru.sizes.end());
    for (const auto& [size, ids] : pre)
      for (uint32_t id : ids)
        if (a_.allocations[id].category == unknown && !workspace_sizes.count(size)) mark_frozen(id, nf, bf);
    if (nf)
      a_.fact_evidence[10] = std::to_string(nf) + " blocks (" + mib(bf) +
                             ") held from before the recording and never freed, while the recording makes every "
                             "gradient and all the optimizer state (its first step is recorded): the model's frozen "
                             "parameters and buffers";
    return nt + nf > 0;
  }
  // A low-rank adapter layout: each trained parameter r x in or out x r
  // (elements of `es` bytes); the frozen base weight out x in in `eb`.
  std::vector<std::pair<uint64_t, int64_t>> trainable;  // (bytes, count)
  int64_t trainable_n = 0;
  uint64_t trainable_bytes = 0;
  for (const auto& [size, g] : grads)
    if (params.count(size)) trainable.push_back({size, g}), trainable_n += g, trainable_bytes += size * uint64_t(g);
  if (trainable_n < 4) return nt > 0;
  uint64_t best = 0, best_blocks = 0;
  int best_r = 0, best_es = 0, best_eb = 0;
  std::set<uint64_t> best_dims;
  for (int es : {4, 2})
    for (int eb : {es, es == 4 ? 2 : 4, 1})
      for (int r = 1; r <= 256; r *= 2) {
        const uint64_t unit = uint64_t(r) * uint64_t(es);
        std::set<uint64_t> dims;
        int64_t fit = 0;
        for (const auto& [size, g] : trainable)
          if (size % unit == 0 && size / unit > uint64_t(r)) dims.insert(size / unit), fit += g;
        if (fit * 3 < trainable_n * 2 || dims.size() > 64) continue;
        uint64_t bytes = 0, blocks = 0;
        std::set<uint64_t> products;
        for (uint64_t x : dims)
          for (uint64_t y : dims) products.insert(x * y * uint64_t(eb));
        for (const auto& [size, ids] : pre)
          if (products.count(size)) bytes += size * ids.size(), blocks += ids.size();
        // One base weight per adapter pair: the hypothesis that names the
        // most weights wins (bytes alone favour a few large coincidences,
        // such as 32 MiB cuBLAS workspaces), then the most bytes.
        if (blocks > uint64_t(trainable_n) / 2) continue;
        if (blocks > best_blocks || (blocks == best_blocks && bytes > best))
          best = bytes, best_blocks = blocks, best_r = r, best_es = es, best_eb = eb, best_dims = dims;
      }
  // An adapter layout names a base weight for a good share of the adapter
  // pairs (one per pair in full), and the base outweighs its adapters: a
  // few coincidences of size (two 32 MiB cuBLAS workspaces) are not one.
  if (best_blocks < 2 || best_blocks * 4 < uint64_t(trainable_n) || best < trainable_bytes) return nt > 0;
  std::set<uint64_t> products;
  for (uint64_t x : best_dims)
    for (uint64_t y : best_dims) products.insert(x * y * uint64_t(best_eb));
  // The dimension most of the matched weights share (the hidden size):
  // blocks of whole rows of it are the model's too (embeddings, head, norms).
  uint64_t h = 0, h_bytes = 0;
  for (uint64_t d : best_dims) {
    uint64_t b = 0;
    for (const auto& [size, ids] : pre)
      if (products.count(size) && size % (d * uint64_t(best_eb)) == 0) b += size * ids.size();
    if (b >= h_bytes) h = d, h_bytes = b;
  }
  uint64_t nl = 0, bl = 0, nr = 0, br = 0;
  for (const auto& [size, ids] : pre)
    for (uint32_t id : ids)
      if (products.count(size)) mark_frozen(id, nl, bl);
      else if (a_.allocations[id].category == unknown && h > 0 && size % (h * uint64_t(best_eb)) == 0)
        mark_frozen(id, nr, br);
  if (nl + nr)
    a_.fact_evidence[10] =
        std::to_string(nl) + " blocks (" + mib(bl) + ") held from before the recording, each out x in elements of " +
        std::to_string(best_eb) + " bytes for a pair of trained low-rank adapters (r = " + std::to_string(best_r) +
        ", " + std::to_string(best_es) + "-byte elements: r x in, out x r): the frozen base weights" +
        (nr ? "; " + std::to_string(nr) + " more (" + mib(br) + ") whole rows of the layers' shared size " +
                  std::to_string(h) + ": the model's embeddings, head and norms"
            : std::string());
  return nt + nl + nr > 0;
}

// The batch of one iteration allocated where phases run together (the
// first iteration after make_graphed_callables' warm-up, a recording that
// starts mid-forward): the site that makes the input in other iterations.
bool Inferrer::infer_input_sites() {
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
bool Inferrer::infer_graph_gradients() {
  const int param = cat("parameter"), graph = cat("graph_pool");
  std::unordered_map<uint64_t, int64_t> psize;
  for (const Allocation& al : a_.allocations)
    if (al.category == param) ++psize[al.requested];
  uint64_t n = 0;
  for (Allocation& al : a_.allocations) {
    if (al.category != graph) continue;
    const int64_t s = spans_.next_span_start(al.alloc_event, Phase::Optimizer);
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
bool Inferrer::infer_kept_buffers() {
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

bool Inferrer::narrow_compute(uint64_t ratio, std::unordered_map<uint64_t, int64_t>* cast_sizes) {
  const int grad = cat("gradient");
  uint64_t grads = 0, cast_up = 0;
  std::unordered_map<uint64_t, std::unordered_map<int, int64_t>> per_iteration;  // size -> iteration -> cast up
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
        ++per_iteration[al.requested][a_.iteration_at(al.alloc_event)];
        break;
      }
    }
  }
  if (cast_sizes)
    for (const auto& [size, its] : per_iteration)
      for (const auto& [it, k] : its) (*cast_sizes)[size] = std::max((*cast_sizes)[size], k);
  return grads > 0 && cast_up * 2 >= grads;
}

// What an allocation's own frames say about it being a parameter's copy
// (docs/attribution.md "Parameter copies"): C++ frames inside the innermost
// Python frame first, then that Python frame.
Inferrer::CopyFrames Inferrer::copy_frames(StackId stack) const {
  CopyFrames r = CopyFrames::None;
  bool cast_down = false, first_op = false;
  for (StackId s = stack; s != 0; s = t_.stacks.node(s).parent) {
    const FrameId f = t_.stacks.node(s).frame;
    const std::string_view name = t_.strings.get(t_.frames[f].name);
    const std::string_view file = t_.strings.get(t_.frames[f].file);
    if (ft_.python(f)) {
      // The innermost Python frame: an einops/reshape helper makes
      // activations; a custom autograd Function's forward (called by
      // torch/autograd/function.py's apply) keeps what its backward needs.
      if (r != CopyFrames::None) return r;
      if (file.find("einops/") != std::string_view::npos || name == "rearrange" || name == "reshape" ||
          name == "view" || name == "flatten" || name == "unflatten")
        return CopyFrames::ActivationOp;
      for (StackId c = t_.stacks.node(s).parent; c != 0; c = t_.stacks.node(c).parent) {
        const FrameId g = t_.stacks.node(c).frame;
        if (!ft_.python(g)) continue;
        const std::string_view gf = t_.strings.get(t_.frames[g].file);
        return t_.strings.get(t_.frames[g].name) == "apply" && gf.find("autograd/function.py") != std::string_view::npos
                   ? CopyFrames::FunctionForward
                   : CopyFrames::None;
      }
      return CopyFrames::None;
    }
    if (name.find("autocast::cached_cast") != std::string_view::npos) {
      cast_down = true;
    } else if (cast_down && name.find("autocast::WrapFunction_") != std::string_view::npos) {
      // The autocast wrapper's policy: lower_precision_fp (0) casts down to
      // the autocast dtype, as it does a parameter; the others (fp32,
      // promote) cast activations up.
      const bool down = name.find("CastPolicy)0") != std::string_view::npos ||
                        name.find("lower_precision_fp") != std::string_view::npos;
      if (!down) return CopyFrames::ActivationOp;
      r = CopyFrames::AutocastCast;
    } else if (const size_t o = name.find("_ops::"); o != std::string_view::npos) {
      // An op that makes activations around the copy: a reshape's or a
      // view's copy, attention, normalisation, a concatenation.
      std::string_view op = name.substr(o + 6);
      op = op.substr(0, op.find("::"));
      // The innermost op that is not a factory made the tensor: a copy is
      // made by a cast, clone, contiguous or copy; any other op (an add, a
      // matmul) computes an activation whatever its size.
      if (!op.starts_with("empty") && !op.starts_with("new_empty") && !first_op) {
        first_op = true;
        const bool copies = op == "t" || op.starts_with("to") || op.starts_with("_to") || op.starts_with("_cast") ||
                            op.find("copy") != std::string_view::npos || op.find("clone") != std::string_view::npos ||
                            op.find("contiguous") != std::string_view::npos ||
                            op.find("transpose") != std::string_view::npos || op == "permute" || op == "detach";
        if (!copies) return CopyFrames::ActivationOp;
      }
      static constexpr std::string_view kActivationOps[] = {
          "reshape", "_reshape_alias", "_unsafe_view", "flatten", "unflatten", "view", "bmm", "baddbmm",
          "softmax", "_softmax", "layer_norm", "native_layer_norm", "group_norm", "batch_norm", "rms_norm",
          "cat", "stack", "embedding", "gelu", "silu", "dropout", "convolution", "conv2d", "conv1d", "conv3d"};
      if (op.find("attention") != std::string_view::npos) return CopyFrames::ActivationOp;
      for (std::string_view a : kActivationOps)
        if (op == a) return CopyFrames::ActivationOp;
    }
  }
  if (cast_down && r == CopyFrames::None) r = CopyFrames::AutocastCast;
  return r;
}

// Copies of parameters (docs/attribution.md "Inferences"): made in a forward
// and alive into the backward, with a parameter's element count in a
// narrower dtype (a parameter's bytes / 2 or / 4), or in its own dtype when
// the parameters are narrower than their gradients (FP8 primary weights,
// whose transposes have their bytes), each parameter copied at most once
// per iteration. Evidence in order: C++ frames (autocast's cached cast down
// to its dtype), then the Python frame (a custom autograd Function's
// forward keeping it for its backward; never an einops/reshape helper),
// then lifetime and size (sites whose kept allocations are mostly one per
// parameter, or a whole model copied in one iteration). Frames that name an
// op producing activations (a reshape's or view's copy, attention) exclude
// an allocation whatever its size.
bool Inferrer::infer_copies() {
  const int param = cat("parameter"), grad = cat("gradient");
  // Parameters per size: the most alive at once (an optimizer that
  // re-quantizes FP8 weights replaces each every step).
  std::unordered_map<uint64_t, std::vector<std::pair<int64_t, int>>> pevents;
  for (const Allocation& al : a_.allocations)
    if (al.category == param) {
      pevents[al.requested].emplace_back(al.alloc_event, 1);
      if (al.user_free() != INT64_MAX) pevents[al.requested].emplace_back(al.user_free(), -1);
    }
  std::unordered_map<uint64_t, int64_t> psize;
  for (auto& [size, ev] : pevents) {
    std::sort(ev.begin(), ev.end());  // (a free before an alloc at one event: never both)
    int64_t live = 0, most = 0;
    for (const auto& [e, d] : ev) most = std::max(most, live += d);
    psize[size] = most;
  }
  if (psize.empty()) return false;
  // Parameters narrower than their gradients: a size with gradients of
  // twice or four times its bytes and none of its own.
  std::unordered_set<uint64_t> gsizes;
  for (const Allocation& al : a_.allocations)
    if (grad >= 0 && al.category == grad) gsizes.insert(al.requested);
  std::unordered_map<uint64_t, int64_t> narrow;
  for (const auto& [size, count] : psize)
    if (!gsizes.count(size) && (gsizes.count(size * 2) || gsizes.count(size * 4))) narrow[size] = count;
  std::unordered_set<int> skip;
  for (const char* c : {"parameter", "gradient", "optimizer_state", "optimizer_temporary", "workspace", "kv_cache",
                        "communication", "graph_pool", "parameter_copy"})
    if (cat(c) >= 0) skip.insert(cat(c));
  std::unordered_map<StackId, CopyFrames> frames_of;  // each stack's frames read once
  auto frames = [&](StackId s) {
    auto [it, fresh] = frames_of.try_emplace(s, CopyFrames::None);
    if (fresh && s != 0) it->second = copy_frames(s);
    return it->second;
  };
  std::vector<uint32_t> cand;
  uint64_t excluded = 0;
  for (uint32_t id = 0; id < a_.allocations.size(); ++id) {
    const Allocation& al = a_.allocations[id];
    // Copies worth the name: a bias's cast or BatchNorm's saved statistics
    // (C floats, like the weight of a layer with 2C channels) are not.
    if (al.alloc_event < 0 || spans_.alloc_phase(al) != Phase::Forward || skip.count(al.category) ||
        al.requested < kMinCopyBytes)
      continue;
    // Kept for the backward and released by it (a KV cache or the model's
    // output, held until the step, is not a weight's copy).
    const int64_t b = spans_.next_span_start(al.alloc_event, Phase::Backward);
    if (b == INT64_MAX || al.user_free() <= b || al.user_free() == INT64_MAX ||
        a_.phase_at(al.user_free()) != Phase::Backward)
      continue;
    // Size never overrides frames that name an op making activations.
    if (frames(al.stack) == CopyFrames::ActivationOp) {
      excluded += psize.count(al.requested * 2) || psize.count(al.requested * 4);
      continue;
    }
    cand.push_back(id);
  }
  if (cand.empty()) return false;
  std::sort(cand.begin(), cand.end(),
            [&](uint32_t x, uint32_t y) { return a_.allocations[x].alloc_event < a_.allocations[y].alloc_event; });
  // The ratio of a parameter's bytes to its copy's: 1 (the parameter's own
  // dtype, narrow parameters only), 2 or 4, whichever pairs more bytes; an
  // autocast cast pairs by 2 or 4 only.
  uint64_t ratio = 0, best = 0;
  for (uint64_t r : {1u, 2u, 4u}) {
    const auto& sizes = r == 1 ? narrow : psize;
    uint64_t b = 0;
    for (uint32_t id : cand)
      if (sizes.count(a_.allocations[id].requested * r) &&
          !(r == 1 && frames(a_.allocations[id].stack) == CopyFrames::AutocastCast))
        b += a_.allocations[id].requested;
    if (b > best) best = b, ratio = r;
  }
  if (ratio == 0) return false;
  a_.copy_ratio = ratio;
  if (ratio == 1) psize = narrow;
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
  // Forward passes per iteration: more than one with gradient accumulation
  // (an iteration is one optimizer step), each a forward then its backward.
  std::unordered_map<int, int64_t> passes;
  {
    Phase last = Phase::Other;
    for (const PhaseSpan& sp : a_.spans) {
      if (sp.phase == Phase::Backward && last == Phase::Forward) ++passes[sp.iteration];
      if (sp.phase != Phase::Other && !sp.empty()) last = sp.phase;
    }
  }
  auto passes_in = [&](int iter) {
    auto p = passes.find(iter);
    return p == passes.end() ? int64_t(1) : std::max<int64_t>(1, p->second);
  };
  // Slots per forward pass, one per parameter. A site that makes more
  // allocations of one size in an iteration than there are parameters of
  // the matching size makes activations of that size (a layer's outputs,
  // once per layer): its allocations take the slots others leave.
  std::unordered_map<uint64_t, uint32_t> per_site_size;  // (site, size, iteration) -> count
  auto key = [&](const Allocation& al) {
    uint64_t h = site(al) * 0x9e3779b97f4a7c15ull ^ al.requested;
    return h * 0x100000001b3ull ^ uint64_t(a_.iteration_at(al.alloc_event));
  };
  for (uint32_t id : cand) ++per_site_size[key(a_.allocations[id])];
  // Sites that make copies of three parameter sizes or more (a matmul's
  // weight cast, whatever the layer's shape) before a site whose kept
  // allocations have one or two parameters' sizes by coincidence (an
  // attention output as large as a weight's cast).
  std::unordered_map<uint64_t, std::unordered_set<uint64_t>> site_sizes;
  for (uint32_t id : cand)
    if (psize.count(a_.allocations[id].requested * ratio))
      site_sizes[site(a_.allocations[id])].insert(a_.allocations[id].requested);
  // Copies that frames already name (FSDP's unsharded parameters,
  // Transformer Engine's workspaces) hold their parameters' slots.
  const int copy = cat("parameter_copy");
  std::unordered_map<int, std::unordered_map<uint64_t, int64_t>> taken;
  for (const Allocation& al : a_.allocations)
    if (al.category == copy && al.alloc_event >= 0) ++taken[a_.iteration_at(al.alloc_event)][al.requested * ratio];
  // Within an iteration, copies that frames name take their slots first
  // (autocast's casts, then a custom Function's kept tensors), then
  // allocations at sites that make no more of a size than there are
  // parameters of it, then the rest; at each of these, sites of three
  // parameter sizes or more first.
  auto rank = [&](const Allocation& al) {
    const CopyFrames f = frames(al.stack);
    return f == CopyFrames::AutocastCast ? 0 : f == CopyFrames::FunctionForward ? 1 : 2;
  };
  // Each candidate's round (rank, then clean, then multi-size site), found once.
  std::vector<uint8_t> round_of(cand.size());
  for (size_t k = 0; k < cand.size(); ++k) {
    const Allocation& al = a_.allocations[cand[k]];
    auto p = psize.find(al.requested * ratio);
    const bool clean =
        p != psize.end() && int64_t(per_site_size[key(al)]) <= p->second * passes_in(a_.iteration_at(al.alloc_event));
    const bool multi = site_sizes[site(al)].size() >= 3;
    round_of[k] = uint8_t(rank(al) * 4 + !clean * 2 + !multi);
  }
  auto match = [&](auto&& accept, auto&& on_match) {
    size_t i = 0;
    while (i < cand.size()) {
      const int iter = a_.iteration_at(a_.allocations[cand[i]].alloc_event);
      size_t j = i;
      while (j < cand.size() && a_.iteration_at(a_.allocations[cand[j]].alloc_event) == iter) ++j;
      const int64_t np = passes_in(iter);
      std::unordered_map<uint64_t, int64_t> avail = psize;
      for (auto& [size, count] : avail) count *= np;
      for (const auto& [size, count] : taken[iter]) {
        auto p = avail.find(size);
        if (p != avail.end()) p->second = std::max<int64_t>(0, p->second - count);
      }
      for (int round = 0; round < 12; ++round)
        for (size_t k = i; k < j; ++k) {
          if (round_of[k] != round) continue;
          const Allocation& al = a_.allocations[cand[k]];
          if (!accept(al)) continue;
          auto p = avail.find(al.requested * ratio);
          const bool clean = !(round_of[k] & 2);
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
    if (kinds[it].size() >= 3) best_fill = std::max(best_fill, b / uint64_t(passes_in(it)));
  // And the run computes in the narrower dtype: most gradients are cast
  // up from a gradient of that dtype made just before them (autocast's
  // ToCopyBackward0), which a run in the parameters' own dtype never does.
  // Of the parameters, those computed in the narrower dtype: the most
  // gradients of a size cast up in one iteration (an embedding table is
  // looked up in its own dtype; autocast casts the matmuls' weights only).
  std::unordered_map<uint64_t, int64_t> cast_sizes;
  const bool computes_narrow = ratio > 1 && narrow_compute(ratio, &cast_sizes);
  uint64_t castable = 0;
  for (const auto& [size, count] : psize)
    if (size >= kMinCopyBytes * ratio && cast_sizes.count(size))
      castable += size * uint64_t(std::min(count, cast_sizes[size]));
  const bool whole_model = computes_narrow && castable > 0 && best_fill * 10 >= castable * 9;
  uint64_t nsites = 0;
  for (const auto& [k, v] : sites) nsites += v.copies();
  // An autocast cast down of a parameter's size needs no more: its frames
  // say it is a cast, its size whose.
  uint64_t by[3] = {0, 0, 0};
  match([&](const Allocation& al) {
          return (ratio > 1 && frames(al.stack) == CopyFrames::AutocastCast) || whole_model || sites[site(al)].copies();
        },
        [&](uint32_t id, bool hit, bool) {
          if (!hit) return;
          a_.allocations[id].facts |= kFactParamCopySite;
          ++by[rank(a_.allocations[id])];
        });
  const uint64_t n = by[0] + by[1] + by[2];
  const std::string dtype = ratio == 1 ? "the bytes of one in its own dtype (the parameters are narrower than their "
                                         "gradients: FP8 primary weights)"
                            : ratio == 2 ? "half the bytes of one"
                                         : "a quarter of the bytes of one";
  a_.fact_evidence[4] = "made in a forward and alive into the backward, with " + dtype +
                        (ratio == 1 ? "" : " (its element count in a narrower dtype)");
  if (n) {
    std::string how;
    auto add = [&](uint64_t k, const std::string& what) {
      if (k) how += (how.empty() ? "" : ", ") + std::to_string(k) + " " + what;
    };
    add(by[0], "by C++ frames (autocast's cached cast down to its dtype)");
    add(by[1], "by Python frames (kept by a custom autograd Function's forward for its backward)");
    add(by[2], whole_model ? "by lifetime and size (one iteration copies " + std::to_string(best_fill * 100 / big) +
                                 "% of the parameters' bytes this way)"
                           : "by lifetime and size (at " + std::to_string(nsites) +
                                 " sites whose forward allocations kept for the backward are mostly one per parameter)");
    a_.fact_evidence[5] = std::to_string(n) + " allocations made in forwards and kept for the backward, one per " +
                          "parameter and iteration, with " + dtype + ": " + how;
    if (excluded)
      a_.fact_evidence[5] += "; " + std::to_string(excluded) +
                             " kept allocations whose frames name an op making activations (reshape, view, attention, "
                             "an up-cast) are not copies whatever their size";
  }
  return true;
}

}  // namespace snapdiff::detail
