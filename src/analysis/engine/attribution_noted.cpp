// The run's own tensor list (Trace::tensors, docs/tensors.md) tied to the
// allocations: a note says that at time t the storage of a named parameter,
// buffer, gradient or optimizer state began at address A, so the allocation
// at A live at t is that tensor. The first evidence of all: the run's own
// word, not an inference (rules noted-parameter, noted-gradient,
// noted-optimizer-state come first in rules/builtin.json).
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "analysis/engine/attribution_parts.hpp"

namespace snapdiff::detail {

void Inferrer::infer_noted() {
  const TensorList& tl = t_.tensors;
  if (tl.empty()) return;
  // Allocations at each noted address, in order of allocation (those from
  // before the recording first): one pass over the allocations.
  std::unordered_map<uint64_t, std::vector<uint32_t>> at_addr;
  for (const TensorNote& n : tl.notes)
    if (tl.tensors[n.tensor].device == d_.index) at_addr.emplace(n.addr, std::vector<uint32_t>{});
  if (at_addr.empty()) return;
  for (uint32_t id = 0; id < a_.allocations.size(); ++id) {
    auto it = at_addr.find(a_.allocations[id].addr);
    if (it != at_addr.end()) it->second.push_back(id);
  }
  // An event's time; before the history: earlier than any note; never: later.
  constexpr int64_t kBefore = INT64_MIN + 1;
  auto time_of = [&](int64_t ev) -> int64_t {
    if (ev < 0) return kBefore;
    if (ev == INT64_MAX || size_t(ev) >= d_.events.size()) return INT64_MAX;
    return d_.events[size_t(ev)].time_us;
  };
  for (auto& [addr, ids] : at_addr)
    std::stable_sort(ids.begin(), ids.end(), [&](uint32_t x, uint32_t y) {
      return a_.allocations[x].alloc_event < a_.allocations[y].alloc_event;
    });
  std::unordered_map<uint32_t, size_t> named_at;  // allocation -> index into a_.named
  std::unordered_set<uint64_t> shared;         // (tensor, allocation) sharing a storage with another name
  uint64_t counts[3] = {0, 0, 0};
  for (const TensorNote& n : tl.notes) {
    const NamedTensor& nt = tl.tensors[n.tensor];
    if (nt.device != d_.index || n.time_us == kNoTime) continue;
    const std::vector<uint32_t>& ids = at_addr[n.addr];
    // The last allocation made at or before the note, if it still lived then.
    uint32_t hit = UINT32_MAX;
    for (auto it = ids.rbegin(); it != ids.rend(); ++it) {
      const Allocation& al = a_.allocations[*it];
      const int64_t made = time_of(al.alloc_event);
      if (made == kNoTime) break;  // a history without times: no tie is safe
      if (made > n.time_us) continue;
      const int64_t freed = time_of(al.user_free());
      if (freed != kNoTime && freed >= n.time_us && al.requested >= n.bytes) hit = *it;
      break;
    }
    if (hit == UINT32_MAX) continue;
    Allocation& al = a_.allocations[hit];
    const int k = nt.kind == TensorKind::Gradient ? 1 : nt.kind == TensorKind::OptimizerState ? 2 : 0;
    static constexpr uint32_t kBits[3] = {kFactNotedParameter, kFactNotedGradient, kFactNotedOptimizerState};
    auto [pos, fresh] = named_at.emplace(hit, a_.named.size());
    if (fresh) {
      // The first kind noted in an allocation decides it.
      al.facts = al.facts | kBits[k];
      a_.named.push_back({hit, n.tensor, 1});
      ++counts[k];
    } else {
      Attribution::Named& nm = a_.named[pos->second];
      // Another tensor sharing the storage (tied weights, a flat parameter).
      if (nm.tensor != n.tensor && nm.tensors < UINT32_MAX && tl.tensors[nm.tensor].name != nt.name) {
        // Counted once per distinct tensor: notes repeat at each moment.
        if (shared.insert(uint64_t(n.tensor) << 32 | hit).second) ++nm.tensors;
      }
    }
  }
  std::sort(a_.named.begin(), a_.named.end(),
            [](const Attribution::Named& x, const Attribution::Named& y) { return x.allocation < y.allocation; });
  // Named parameters by their storage's bytes (each tensor once), for
  // naming the copies of them (Attribution::copied_parameters).
  {
    std::unordered_set<uint32_t> seen;
    for (const TensorNote& n : tl.notes) {
      const NamedTensor& nt = tl.tensors[n.tensor];
      if (nt.device == d_.index && nt.kind == TensorKind::Parameter && seen.insert(n.tensor).second)
        a_.parameters_of_bytes[n.bytes].push_back(n.tensor);
    }
  }
  a_.tensor_names.reserve(tl.tensors.size());
  for (const NamedTensor& nt : tl.tensors) a_.tensor_names.push_back(nt.name);
  static const char* const kWhat[3] = {"parameters and buffers", "gradients", "optimizer state tensors"};
  for (int k = 0; k < 3; ++k)
    if (counts[k])
      a_.fact_evidence[12 + k] = "named by the run's tensor list " + tl.source + ": " + std::to_string(counts[k]) +
                                 " allocations of " + kWhat[k] + " tied to its notes (address and time, " +
                                 std::to_string(tl.moments) + " noted moments)";
}

}  // namespace snapdiff::detail
