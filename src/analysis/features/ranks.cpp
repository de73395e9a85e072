// Many ranks side by side (include/snapdiff/analysis/ranks.hpp): built from
// each rank's report view alone, so a view read here and one read back from
// the map step's JSON give the same RanksView.
#include "snapdiff/analysis/ranks.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>

namespace snapdiff {

namespace {

// The device view a rank's figures come from: its report's peak device.
const DeviceView* peak_view(const RankEntry& e) {
  if (!e.report || e.report->devices.empty()) return nullptr;
  const Report& r = *e.report;
  return &r.devices[std::min(r.peak_device, r.devices.size() - 1)];
}

// Ranks the names did not tell, from the one device each snapshot records:
// only when every such entry has exactly one traced device, the devices are
// distinct, and none is a rank a name already told (a launcher that pins
// rank r to cuda:r; several devices in one file say nothing).
void ranks_from_devices(std::vector<RankEntry>& entries) {
  std::set<int> told;
  std::vector<size_t> untold;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].rank >= 0) told.insert(entries[i].rank);
    else untold.push_back(i);
  }
  if (untold.empty()) return;
  std::vector<int> device(untold.size(), -1);
  std::set<int> seen;
  for (size_t k = 0; k < untold.size(); ++k) {
    const RankEntry& e = entries[untold[k]];
    if (!e.report) return;
    int only = -1, traced = 0;
    for (const DeviceView& d : e.report->devices)
      if (d.has_trace) only = d.device, ++traced;
    if (traced != 1 || told.count(only) || !seen.insert(only).second) return;
    device[k] = only;
  }
  for (size_t k = 0; k < untold.size(); ++k) {
    entries[untold[k]].rank = device[k];
    entries[untold[k]].rank_from = "device " + std::to_string(device[k]);
  }
}

bool entry_before(const RankEntry& x, const RankEntry& y) {
  if ((x.rank < 0) != (y.rank < 0)) return x.rank >= 0;
  if (x.rank != y.rank) return x.rank < y.rank;
  return x.name < y.name;
}

// The median of v (lower median; 0 when empty).
int64_t median_of(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[(v.size() - 1) / 2];
}

// Max, min, lower median and where the extremes are, over the entries read.
void summarize(RankMetric& m, const std::vector<RankEntry>& entries) {
  std::vector<int64_t> read;
  bool first = true;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (!peak_view(entries[i])) continue;
    const int64_t v = m.values[i];
    read.push_back(v);
    if (first || v > m.max) m.max = v, m.max_entry = i;
    if (first || v < m.min) m.min = v, m.min_entry = i;
    first = false;
  }
  if (read.empty()) return;
  m.median = median_of(std::move(read));
  m.max_over_median = m.median > 0 ? double(m.max) / double(m.median) : 0;
}

template <class F>
RankMetric metric(std::string name, std::string key, const std::vector<RankEntry>& entries, F value) {
  RankMetric m;
  m.name = std::move(name);
  m.key = std::move(key);
  m.values.assign(entries.size(), 0);
  for (size_t i = 0; i < entries.size(); ++i)
    if (const DeviceView* d = peak_view(entries[i])) m.values[i] = value(*d);
  summarize(m, entries);
  return m;
}

int64_t category_at_peak(const DeviceView& d, const std::string& name) {
  for (size_t i = 0; i < d.category_names.size() && i < d.categories.size(); ++i)
    if (d.category_names[i] == name) return d.categories[i];
  return 0;
}

}  // namespace

NotOneJob judge_one_job(std::vector<RankEntry>& entries) {
  NotOneJob j;
  ranks_from_devices(entries);
  std::vector<const RankEntry*> read;
  for (const RankEntry& e : entries) {
    if (e.rank >= 0) return j;
    if (peak_view(e)) read.push_back(&e);
  }
  if (read.size() < 2) return j;
  // The devices' total memory, where told.
  std::set<uint64_t> totals;
  for (const RankEntry* e : read) {
    uint64_t t = 0;
    for (const DeviceMemoryRow& m : e->report->device_memory) t = std::max(t, m.total_bytes);
    for (const OomView& o : e->report->ooms) t = std::max(t, o.device_total);
    if (t > 0) totals.insert(t);
  }
  if (totals.size() > 1) j.device_totals.assign(totals.begin(), totals.end());
  // Parameters at the peak, where both hold some; peaks; windows.
  std::vector<int64_t> params, peaks;
  std::vector<std::pair<int64_t, int64_t>> windows;
  constexpr int64_t kWallClockUs = 1000000000000000LL;  // 2001-09-09 in microseconds since 1970
  for (const RankEntry* e : read) {
    const DeviceView& d = *peak_view(*e);
    peaks.push_back(d.peak_requested.bytes);
    for (size_t i = 0; i < d.category_names.size() && i < d.categories.size(); ++i)
      if (d.category_names[i] == "parameter" && d.categories[i] > 0) params.push_back(d.categories[i]);
    if (d.first_time_us != kNoTime && d.last_time_us != kNoTime && d.first_time_us >= kWallClockUs)
      windows.push_back({d.first_time_us, d.last_time_us});
  }
  if (params.size() >= 2) {
    j.parameters_min = *std::min_element(params.begin(), params.end());
    j.parameters_max = *std::max_element(params.begin(), params.end());
    j.parameters_differ = double(j.parameters_max) > kRunsParameterRatio * double(j.parameters_min);
  }
  j.peak_min = *std::min_element(peaks.begin(), peaks.end());
  j.peak_max = *std::max_element(peaks.begin(), peaks.end());
  j.peaks_differ = j.peak_max > 0 && double(j.peak_max) > kRunsPeakRatio * double(j.peak_min);
  if (windows.size() >= 2) {
    // The latest start against the earliest end: how far the windows stand apart.
    int64_t latest_start = windows[0].first, earliest_end = windows[0].second;
    for (const auto& [a, b] : windows) {
      latest_start = std::max(latest_start, a);
      earliest_end = std::min(earliest_end, b);
    }
    j.gap_us = latest_start > earliest_end ? latest_start - earliest_end : 0;
    j.far_apart = j.gap_us > kRunsTimeGapUs;
  }
  j.not_one_job = !j.device_totals.empty() || j.parameters_differ || j.far_apart || j.peaks_differ;
  return j;
}

RanksView build_ranks_view(std::vector<RankEntry> entries, std::vector<std::string> superseded,
                           const RanksOptions& opts) {
  RanksView v;
  ranks_from_devices(entries);
  std::stable_sort(entries.begin(), entries.end(), entry_before);
  v.ranks = std::move(entries);
  v.superseded = std::move(superseded);
  for (const RankEntry& e : v.ranks) (peak_view(e) ? v.read : v.failed) += 1;
  if (v.read == 0) return v;

  const auto& rs = v.ranks;
  v.metrics.push_back(metric("peak requested", "peak_requested_bytes", rs,
                             [](const DeviceView& d) { return d.peak_requested.bytes; }));
  v.metrics.push_back(metric("peak allocated", "peak_allocated_bytes", rs,
                             [](const DeviceView& d) { return d.peak_allocated.bytes; }));
  v.metrics.push_back(metric("peak reserved", "peak_reserved_bytes", rs,
                             [](const DeviceView& d) { return d.peak_reserved.bytes; }));
  v.metrics.push_back(metric("free cached at the peak", "free_cached_at_peak_bytes", rs,
                             [](const DeviceView& d) { return d.frag.free_cached; }));
  bool growth = false;
  for (const RankEntry& e : rs)
    if (const DeviceView* d = peak_view(e)) growth = growth || (d->growth.measured && d->growth.per_iteration != 0);
  if (growth)
    v.metrics.push_back(metric("growth per iteration", "growth_per_iteration_bytes", rs, [](const DeviceView& d) {
      return d.growth.measured ? d.growth.per_iteration : int64_t(0);
    }));
  // Categories at the peak: those holding 1% of the largest peak on some
  // rank, the largest first (at most six).
  {
    std::map<std::string, int64_t> largest;
    for (const RankEntry& e : rs)
      if (const DeviceView* d = peak_view(e))
        for (size_t i = 0; i < d->category_names.size() && i < d->categories.size(); ++i)
          largest[d->category_names[i]] = std::max(largest[d->category_names[i]], d->categories[i]);
    const int64_t floor = std::max<int64_t>(v.metrics[0].max / 100, 1);
    std::vector<std::pair<int64_t, std::string>> cats;
    for (auto& [name, most] : largest)
      if (most >= floor) cats.push_back({most, name});
    std::stable_sort(cats.begin(), cats.end(), [](auto& x, auto& y) { return x.first > y.first; });
    if (cats.size() > 6) cats.resize(6);
    for (auto& [most, name] : cats) {
      const std::string n = name;
      v.metrics.push_back(metric(n, "category:" + n, rs, [&n](const DeviceView& d) { return category_at_peak(d, n); }));
    }
  }

  // The worst rank: the highest requested peak; the median rank: the lower
  // median by requested peak (ties by table order).
  const RankMetric& req = v.metrics[0];
  v.worst = req.max_entry;
  std::vector<size_t> order;
  for (size_t i = 0; i < rs.size(); ++i)
    if (peak_view(rs[i])) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return req.values[x] < req.values[y]; });
  v.median = order[(order.size() - 1) / 2];
  if (v.worst != v.median && req.values[v.worst] != req.values[v.median]) {
    DiffOptions d = opts.diff;
    d.a_name = rs[v.median].name;
    d.b_name = rs[v.worst].name;
    v.worst_vs_median = diff_views(*rs[v.median].report, *rs[v.worst].report, d);
  }
  if (opts.shown_rank >= 0) {
    for (size_t i = 0; i < rs.size(); ++i)
      if (rs[i].rank == opts.shown_rank && rs[i].report) {
        v.shown = i;
        break;
      }
  } else {
    v.shown = v.worst;
  }
  return v;
}

RanksDiff build_ranks_diff(std::vector<RankPair> pairs, std::vector<int> only_a, std::vector<int> only_b,
                           const RanksOptions& opts) {
  RanksDiff d;
  std::stable_sort(pairs.begin(), pairs.end(), [](const RankPair& x, const RankPair& y) {
    if ((x.rank < 0) != (y.rank < 0)) return x.rank >= 0;
    return x.rank < y.rank;
  });
  d.pairs = std::move(pairs);
  std::sort(only_a.begin(), only_a.end());
  std::sort(only_b.begin(), only_b.end());
  d.only_a = std::move(only_a);
  d.only_b = std::move(only_b);

  std::vector<size_t> with;
  int64_t scale = 0;
  for (size_t i = 0; i < d.pairs.size(); ++i) {
    const auto& df = d.pairs[i].diff;
    if (!df) continue;
    with.push_back(i);
    for (const Report* r : {&df->a, &df->b})
      if (!r->devices.empty())
        scale = std::max(scale, r->devices[std::min(r->peak_device, r->devices.size() - 1)].peak_requested.bytes);
  }
  // A rank departs from the others when its requested-peak change differs
  // from their median change by what the diff calls material (1% of the
  // largest peak and 1 MiB). Two ranks: each is the other's "others".
  const int64_t material = std::max<int64_t>(scale / 100, int64_t(1) << 20);
  if (with.size() >= 2) {
    for (size_t i : with) {
      std::vector<int64_t> others;
      for (size_t j : with)
        if (j != i) others.push_back(d.pairs[j].diff->peak_delta[0]);
      const int64_t mine = d.pairs[i].diff->peak_delta[0];
      const int64_t om = median_of(others);
      if (std::llabs(mine - om) < material) continue;
      if (with.size() == 2 && std::llabs(mine) <= std::llabs(om)) continue;  // name the one that moved more
      RankOutlier o;
      o.rank = d.pairs[i].rank;
      o.entry = i;
      o.delta = mine;
      o.others_median = om;
      const int64_t dir = mine - om;
      for (const CategoryDelta& c : d.pairs[i].diff->categories)
        if (c.delta() != 0 && (c.delta() > 0) == (dir > 0) && std::llabs(c.delta()) >= material &&
            (o.category.empty() || std::llabs(c.delta()) > std::llabs(o.category_delta)))
          o.category = c.name, o.category_delta = c.delta();
      d.outliers.push_back(std::move(o));
    }
    std::stable_sort(d.outliers.begin(), d.outliers.end(), [](const RankOutlier& x, const RankOutlier& y) {
      return std::llabs(x.delta - x.others_median) > std::llabs(y.delta - y.others_median);
    });
    if (d.outliers.size() > 5) d.outliers.resize(5);
  }
  if (opts.shown_rank >= 0) {
    for (size_t i : with)
      if (d.pairs[i].rank == opts.shown_rank) d.shown = i;
  } else {
    for (size_t i : with)
      if (d.shown == SIZE_MAX ||
          std::llabs(d.pairs[i].diff->peak_delta[0]) > std::llabs(d.pairs[d.shown].diff->peak_delta[0]))
        d.shown = i;
  }
  return d;
}

}  // namespace snapdiff
