// Memory that grows across iterations, and the allocations that make it
// (include/snapdiff/analysis/growth.hpp; docs/attribution.md "Growth and
// leaks"): the memory at each iteration's start, the growth per iteration,
// the sites that retain an allocation in every iteration, and the category
// `leaked` for what they keep.
#include "snapdiff/analysis/growth.hpp"

#include <algorithm>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace snapdiff::detail {

namespace {

template <class T>
T median(std::vector<T> v) {
  if (v.empty()) return T(0);
  std::sort(v.begin(), v.end());
  return v[(v.size() - 1) / 2];  // the lower middle: a value that occurred
}

// The model's line that made the tensor ("forward (gpt2/modeling_gpt2.py:697)"
// under nn.Linear's forward); kNoFrame when the user frame is the first such frame.
FrameId model_frame(const FrameTable& ft, StackId stack) { return ft.library_model_frame(stack); }

struct SiteAcc {
  std::vector<int64_t> bytes;     // per judged iteration (index i - judged_first)
  std::vector<uint64_t> count;
  int64_t retained_bytes = 0;     // over the judged iterations
  int64_t alive_at_last = 0;      // of those, alive at the start of the last iteration
  uint64_t largest = 0;
  Phase phase = Phase::Other;
};

}  // namespace

Growth find_growth(const FrameTable& ft, const Device& dev, const DeviceReplay& rp, Attribution& at,
                   int64_t peak_event) {
  Growth g;
  const int n = at.iterations;
  if (n < 1 || at.spans.empty()) return g;
  // The first event of each iteration 1..n.
  std::vector<int64_t> first(size_t(n) + 2, INT64_MAX);
  for (const PhaseSpan& s : at.spans)
    if (s.iteration >= 1 && s.iteration <= n && !s.empty())
      first[size_t(s.iteration)] = std::min(first[size_t(s.iteration)], s.start_event);
  for (int k = 1; k <= n; ++k) {
    if (first[size_t(k)] == INT64_MAX) continue;
    IterationStart st;
    st.iteration = k;
    st.event_index = first[size_t(k)] - 1;
    if (st.event_index >= 0) {
      const size_t e = size_t(st.event_index);
      st.time_us = dev.events[e].time_us;
      st.allocated = rp.allocated[e];
      st.requested = rp.requested[e];
    } else {
      st.allocated = rp.baseline.allocated;
      st.requested = rp.baseline.requested;
    }
    g.starts.push_back(st);
  }
  // Growth: changes between the starts of iterations 2..n.
  std::vector<int64_t> deltas;
  for (size_t i = 1; i < g.starts.size(); ++i)
    if (g.starts[i - 1].iteration >= 2 && g.starts[i].iteration == g.starts[i - 1].iteration + 1)
      deltas.push_back(g.starts[i].allocated - g.starts[i - 1].allocated);
  g.deltas = int(deltas.size());
  g.measured = !deltas.empty();
  g.per_iteration = median(deltas);
  g.unjudged = std::min(n, 2);
  if (n < 3) return g;
  g.judged_first = 1;
  g.judged_last = n - 2;
  // Iterations missing a start (no events) cannot be judged across.
  for (int k = 1; k <= n; ++k)
    if (first[size_t(k)] == INT64_MAX) return g;

  int excluded[4];
  {
    const char* names[4] = {"parameter", "parameter_copy", "gradient", "optimizer_state"};
    for (int i = 0; i < 4; ++i) {
      excluded[i] = -1;
      for (size_t c = 0; c < at.categories.size(); ++c)
        if (at.categories[c] == names[i]) excluded[i] = int(c);
    }
  }
  auto is_excluded = [&](uint16_t c) {
    for (int x : excluded)
      if (x == int(c)) return true;
    return false;
  };
  const int judged = g.judged_last - g.judged_first + 1;
  const int64_t last_start = first[size_t(n)];
  std::unordered_map<StackId, SiteAcc> sites;
  for (const Allocation& al : at.allocations) {
    if (al.alloc_event < 0 || is_excluded(al.category)) continue;
    const int i = at.iteration_at(al.alloc_event);
    if (i < g.judged_first || i > g.judged_last) continue;
    const int64_t freed = al.user_free();
    if (freed < first[size_t(i) + 2]) continue;  // not alive two iterations later
    SiteAcc& s = sites[al.stack];
    if (s.bytes.empty()) s.bytes.assign(size_t(judged), 0), s.count.assign(size_t(judged), 0);
    s.bytes[size_t(i - g.judged_first)] += int64_t(al.requested);
    ++s.count[size_t(i - g.judged_first)];
    s.retained_bytes += int64_t(al.requested);
    if (freed >= last_start) s.alive_at_last += int64_t(al.requested);
    if (al.requested >= s.largest) s.largest = al.requested, s.phase = at.phase_at(al.alloc_event);
  }
  // The leaking sites with their stacks (the view's rows carry no ids).
  std::vector<std::pair<StackId, RetainedSite>> found;
  for (auto& [stack, s] : sites) {
    int retaining = 0;
    bool every = true;
    for (int k = 0; k < judged; ++k) {
      if (s.count[size_t(k)] > 0) ++retaining;
      else if (k > 0) every = false;  // the first judged iteration may make state once
    }
    if (!every || retaining < 2 || s.alive_at_last * 2 < s.retained_bytes) continue;
    RetainedSite r;
    std::vector<int64_t> b;
    std::vector<uint64_t> c;
    for (int k = 0; k < judged; ++k)
      if (s.count[size_t(k)] > 0) b.push_back(s.bytes[size_t(k)]), c.push_back(s.count[size_t(k)]);
    r.bytes_per_iteration = median(b);
    r.count_per_iteration = median(c);
    r.iterations = retaining;
    r.phase = s.phase;
    found.emplace_back(stack, std::move(r));
  }
  if (found.empty()) return g;
  std::sort(found.begin(), found.end(), [](const auto& x, const auto& y) {
    if (x.second.bytes_per_iteration != y.second.bytes_per_iteration)
      return x.second.bytes_per_iteration > y.second.bytes_per_iteration;
    return x.first < y.first;
  });
  std::vector<StackId> stacks;  // of g.sites
  std::unordered_map<StackId, size_t> leaking;  // stack -> index into g.sites
  stacks.reserve(found.size());
  g.sites.reserve(found.size());
  for (auto& [stack, r] : found) {
    leaking.emplace(stack, g.sites.size());
    stacks.push_back(stack);
    g.sites.push_back(std::move(r));
  }
  // What the leaking sites keep: judged allocations alive two iterations
  // later, and those of the last iterations never freed.
  int leaked_cat = -1;
  for (size_t c = 0; c < at.categories.size(); ++c)
    if (at.categories[c] == "leaked") leaked_cat = int(c);
  bool changed = false;
  for (Allocation& al : at.allocations) {
    if (al.alloc_event < 0 || is_excluded(al.category)) continue;
    auto it = leaking.find(al.stack);
    if (it == leaking.end()) continue;
    const int i = at.iteration_at(al.alloc_event);
    if (i < 1) continue;
    const int64_t freed = al.user_free();
    const bool kept = i <= g.judged_last ? freed >= first[size_t(i) + 2] : freed == INT64_MAX;
    if (!kept) continue;
    RetainedSite& r = g.sites[it->second];
    ++r.leaked_allocations;
    if (al.alloc_event <= peak_event && (al.free_event == INT64_MAX || al.free_event > peak_event))
      r.leaked_at_peak += int64_t(al.requested);
    if (leaked_cat >= 0 && al.category != uint16_t(leaked_cat)) {
      al.category = uint16_t(leaked_cat);
      changed = true;
    }
  }
  for (size_t k = 0; k < g.sites.size(); ++k) {
    RetainedSite& r = g.sites[k];
    g.retained_per_iteration += r.bytes_per_iteration;
    g.retained_count += r.count_per_iteration;
    g.leaked_at_peak += r.leaked_at_peak;
    r.site = ft.label(ft.site_frame(stacks[k]));
    // A model frame named before the notebook cell it called: the cell too.
    if (const FrameId cell = ft.cell_context(stacks[k]); cell != kNoFrame) r.site += "  [in " + ft.cell_text(cell) + "]";
    const FrameId m = model_frame(ft, stacks[k]);
    if (m != kNoFrame) r.model_frame = ft.label(m);
  }
  if (changed) {
    std::vector<int64_t> idx;
    idx.reserve(at.spans.size());
    for (const PhaseSpan& s : at.spans) idx.push_back(s.peak_event);
    auto cats = at.categories_at(idx);
    for (size_t k = 0; k < at.spans.size(); ++k) at.spans[k].categories = std::move(cats[k]);
  }
  return g;
}

}  // namespace snapdiff::detail
