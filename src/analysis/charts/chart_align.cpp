// Two runs' x axes aligned by iteration (chart_series_diff()): the knots of
// each run's piecewise-linear map from its events to one shared x in 0..1.
//
// The shared axis is cut into segments: the part before the first common
// iteration, each common iteration but the last, and the tail (the last
// common iteration and everything after it; or, when both runs go on past
// its end, that iteration and then the rest). A segment is as wide as the
// larger of the two runs' shares of their own axis in it, so neither run is
// squeezed, and iteration k's first event is at the same x in both runs.
#include <algorithm>
#include <map>

#include "analysis/charts/chart_series.hpp"

namespace snapdiff::detail {

namespace {

struct Iter {
  int64_t first = INT64_MAX, last = -1;
};

std::map<int, Iter> iterations(const Attribution& a) {
  std::map<int, Iter> out;
  for (const PhaseSpan& s : a.spans) {
    if (s.iteration <= 0) continue;
    Iter& it = out[s.iteration];
    it.first = std::min(it.first, s.start_event);
    it.last = std::max(it.last, s.end_event);
  }
  return out;
}

}  // namespace

void shared_axes(const Device& da, const Attribution& aa, const Device& db, const Attribution& ab, ChartAxis want,
                 EventAxis* out_a, EventAxis* out_b) {
  // Within a segment: event index, or time when asked for and both have it.
  EventAxis ax[2] = {event_axis(da, want == ChartAxis::Time ? ChartAxis::Time : ChartAxis::Events),
                     event_axis(db, want == ChartAxis::Time ? ChartAxis::Time : ChartAxis::Events)};
  if (ax[0].time != ax[1].time) {
    ax[0] = event_axis(da, ChartAxis::Events);
    ax[1] = event_axis(db, ChartAxis::Events);
  }
  const int64_t n[2] = {int64_t(da.events.size()), int64_t(db.events.size())};
  const std::map<int, Iter> its[2] = {iterations(aa), iterations(ab)};
  // The common iterations, in order, each starting after the one before in both runs.
  std::vector<int> common;
  int64_t prev[2] = {-1, -1};
  for (const auto& [k, ia] : its[0]) {
    auto jb = its[1].find(k);
    if (jb == its[1].end()) continue;
    const Iter* it[2] = {&ia, &jb->second};
    bool ok = true;
    for (int r = 0; r < 2; ++r) ok = ok && it[r]->first > prev[r] && it[r]->first < n[r];
    if (!ok) continue;
    for (int r = 0; r < 2; ++r) prev[r] = it[r]->first;
    common.push_back(k);
  }
  // Each run's boundary events: its first, the common iterations' starts,
  // the last one's end when both runs go on after it, its last event.
  std::vector<int64_t> cuts[2];
  bool tail_end = !common.empty();
  for (int r = 0; r < 2 && tail_end; ++r) tail_end = its[r].at(common.back()).last + 1 < n[r] - 1;
  for (int r = 0; r < 2; ++r) {
    cuts[r].push_back(0);
    for (int k : common) cuts[r].push_back(its[r].at(k).first);
    if (tail_end) cuts[r].push_back(its[r].at(common.back()).last + 1);
    cuts[r].push_back(std::max<int64_t>(n[r] - 1, 0));
  }
  // Segment widths: the larger share of the two runs.
  const size_t segs = cuts[0].size() - 1;
  std::vector<double> xs(segs + 1, 0);
  for (size_t j = 0; j < segs; ++j) {
    double w = 0;
    for (int r = 0; r < 2; ++r) {
      const double span = std::max(ax[r].raw_hi - ax[r].raw_lo, 1e-12);
      w = std::max(w, (ax[r].raw_at(cuts[r][j + 1]) - ax[r].raw_at(cuts[r][j])) / span);
    }
    xs[j + 1] = xs[j] + std::max(w, 0.0);
  }
  const double total = xs.back() > 0 ? xs.back() : 1;
  for (double& x : xs) x /= total;
  xs.back() = 1;
  for (int r = 0; r < 2; ++r) {
    EventAxis& e = ax[r];
    e.lo = 0;
    e.hi = 1;
    e.shared = common.empty() ? SharedAxis::Position : SharedAxis::Iterations;
    e.knot_event = cuts[r];
    e.knot_x = xs;
    for (size_t i = 0; i < common.size(); ++i) e.marks.push_back({xs[i + 1], common[i]});
  }
  *out_a = std::move(ax[0]);
  *out_b = std::move(ax[1]);
}

}  // namespace snapdiff::detail
