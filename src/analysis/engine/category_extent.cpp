// Each category's and each phase kind's largest bytes over a run, in one
// sweep over the events (snapdiff/analysis/category_extent.hpp).
//
// The sweep keeps the requested bytes live per category, as
// Attribution::categories_at() does: allocations from before the history
// are live at the start, an allocation counts from its alloc event until its
// free completes (the requested counter's timing). An event allocates or
// frees one allocation, so after it only that allocation's category can
// have grown: the run-wide maxima and the maxima of the event's phase kind
// are updated for that one category. A category a span never touches keeps
// the value it entered with, so at each span's first event every category is
// taken for its phase kind. A step that allocated nothing (an empty span)
// ran in the state after the event before it.
#include "snapdiff/analysis/category_extent.hpp"

#include <algorithm>

namespace snapdiff {

namespace {

// The first state a phase kind sees: every category, and the counters.
void enter(PhaseExtent& p, const std::vector<int64_t>& sums, const Counters& c, int64_t event, const PhaseSpan& s,
           bool first_of_kind) {
  for (size_t k = 0; k < sums.size(); ++k) {
    ExtentAt& x = p.categories[k];
    if (first_of_kind || sums[k] > x.bytes) x = {sums[k], event, s.phase, s.iteration};
  }
  if (first_of_kind || c.requested > p.requested.bytes) p.requested = {c.requested, event, s.phase, s.iteration};
  if (first_of_kind || c.allocated > p.allocated.bytes) p.allocated = {c.allocated, event, s.phase, s.iteration};
  if (first_of_kind || c.reserved > p.reserved.bytes) p.reserved = {c.reserved, event, s.phase, s.iteration};
}

}  // namespace

CategoryExtents category_extents(const DeviceReplay& rp, const Attribution& at) {
  const size_t nc = at.categories.size();
  CategoryExtents x;
  x.categories.assign(nc, ExtentAt{});
  for (PhaseExtent& p : x.phases) p.categories.assign(nc, ExtentAt{});
  std::vector<int64_t> sums(nc, 0);
  for (const Allocation& a : at.allocations)
    if (a.alloc_event < 0 && a.category < nc) sums[a.category] += int64_t(a.requested);
  for (size_t k = 0; k < nc; ++k) x.categories[k].bytes = sums[k];  // the start state, event -1

  const int64_t n = int64_t(at.event_alloc.size());
  const bool spans_ok = at.event_span.size() == size_t(n) && !at.spans.empty();
  const bool counters_ok = rp.requested.size() == size_t(n) && rp.allocated.size() == size_t(n) &&
                           rp.reserved.size() == size_t(n);
  auto counters_at = [&](int64_t e) {
    if (e < 0 || !counters_ok) return rp.baseline;
    Counters c;
    c.requested = rp.requested[size_t(e)];
    c.allocated = rp.allocated[size_t(e)];
    c.reserved = rp.reserved[size_t(e)];
    return c;
  };
  // Steps without events, by the event whose state they ran in.
  std::vector<std::pair<int64_t, uint32_t>> empty;
  for (uint32_t s = 0; s < at.spans.size(); ++s) {
    ++x.phases[size_t(at.spans[s].phase)].spans;
    if (at.spans[s].empty()) empty.push_back({at.spans[s].peak_event, s});
  }
  std::sort(empty.begin(), empty.end());
  std::array<bool, kPhaseCount> seen{};
  size_t next_empty = 0;
  auto empties_after = [&](int64_t e) {
    for (; next_empty < empty.size() && empty[next_empty].first <= e; ++next_empty) {
      const PhaseSpan& s = at.spans[empty[next_empty].second];
      enter(x.phases[size_t(s.phase)], sums, counters_at(e), e, s, !seen[size_t(s.phase)]);
      seen[size_t(s.phase)] = true;
    }
  };
  empties_after(-1);
  uint32_t prev_span = UINT32_MAX;
  for (int64_t e = 0; e < n; ++e) {
    int changed = -1;
    const uint32_t id = at.event_alloc[size_t(e)];
    if (id != UINT32_MAX) {
      const Allocation& a = at.allocations[id];
      if (a.alloc_event == e) sums[a.category] += int64_t(a.requested);
      if (a.free_event == e) sums[a.category] -= int64_t(a.requested);
      changed = a.category;
    }
    const PhaseSpan* s = spans_ok ? &at.spans[at.event_span[size_t(e)]] : nullptr;
    if (changed >= 0 && sums[size_t(changed)] > x.categories[size_t(changed)].bytes)
      x.categories[size_t(changed)] = {sums[size_t(changed)], e, s ? s->phase : Phase::Other, s ? s->iteration : 0};
    if (s) {
      PhaseExtent& p = x.phases[size_t(s->phase)];
      if (at.event_span[size_t(e)] != prev_span) {
        prev_span = at.event_span[size_t(e)];
        enter(p, sums, counters_at(e), e, *s, !seen[size_t(s->phase)]);
        seen[size_t(s->phase)] = true;
      } else {
        if (changed >= 0 && sums[size_t(changed)] > p.categories[size_t(changed)].bytes)
          p.categories[size_t(changed)] = {sums[size_t(changed)], e, s->phase, s->iteration};
        if (counters_ok) {
          if (rp.requested[size_t(e)] > p.requested.bytes) p.requested = {rp.requested[size_t(e)], e, s->phase, s->iteration};
          if (rp.allocated[size_t(e)] > p.allocated.bytes) p.allocated = {rp.allocated[size_t(e)], e, s->phase, s->iteration};
          if (rp.reserved[size_t(e)] > p.reserved.bytes) p.reserved = {rp.reserved[size_t(e)], e, s->phase, s->iteration};
        }
      }
    }
    empties_after(e);
  }
  return x;
}

}  // namespace snapdiff
