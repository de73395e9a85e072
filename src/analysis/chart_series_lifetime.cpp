// The lifetime chart's series: allocations as bars from allocation to free
// in bands (categories or sites), the largest one by one, the rest summed per
// x bucket.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <unordered_map>

#include "analysis/chart_series.hpp"
#include "snapdiff/model/frame_names.hpp"

namespace snapdiff {

using namespace detail;

namespace {

// First-fit packing of bars in bytes: each bar takes the lowest offset where
// it overlaps no bar alive at the same time (what an allocator with one big
// arena would do), so a band looks like the memory it holds.
void pack(std::vector<LifetimeBar>& bars) {
  std::sort(bars.begin(), bars.end(), [](const LifetimeBar& a, const LifetimeBar& b) {
    if (a.x0 != b.x0) return a.x0 < b.x0;
    if (a.bytes != b.bytes) return a.bytes > b.bytes;
    return a.allocation < b.allocation;
  });
  std::vector<const LifetimeBar*> active;  // sorted by offset
  for (LifetimeBar& bar : bars) {
    active.erase(std::remove_if(active.begin(), active.end(), [&](const LifetimeBar* a) { return a->x1 <= bar.x0; }),
                 active.end());
    int64_t off = 0;
    size_t pos = 0;
    for (; pos < active.size(); ++pos) {
      if (active[pos]->offset - off >= bar.bytes) break;
      off = std::max(off, active[pos]->offset + active[pos]->bytes);
    }
    bar.offset = off;
    active.insert(active.begin() + long(pos), &bar);
  }
}

}  // namespace

std::vector<double> band_heights(const std::vector<int64_t>& max_bytes, double plot_height) {
  // Heights grow with the square root of the bytes: the big bands are
  // taller, the small ones stay readable; none is under 30 pt.
  const double kMin = 30;
  std::vector<double> h(max_bytes.size(), kMin);
  double sum = 0;
  for (int64_t m : max_bytes) sum += std::sqrt(double(std::max<int64_t>(m, 0)));
  if (sum <= 0) return h;
  const double room = std::max(plot_height - kMin * double(max_bytes.size()), 0.0);
  for (size_t i = 0; i < h.size(); ++i)
    h[i] = std::round(kMin + room * std::sqrt(double(std::max<int64_t>(max_bytes[i], 0))) / sum);
  return h;
}

LifetimeData lifetime_data(const Analysis& r, const Trace& t, const ChartOptions& o, size_t buckets, double plot_height) {
  return lifetime_data_on(r, t, o, buckets, plot_height, nullptr);
}

LifetimeData detail::lifetime_data_on(const Analysis& r, const Trace& t, const ChartOptions& o, size_t buckets,
                                      double plot_height, const EventAxis* axis) {
  LifetimeData ld;
  const DeviceAnalysis* d = chart_device(r, o);
  if (!d) return ld;
  const FrameTable& frames = chart_frames(r, t);
  const Device* dev = t.find_device(d->device);
  const Attribution& at = d->attr;
  ld.categories = at.categories;
  ld.peak_requested = d->replay.peak_requested.bytes;
  ld.peak_phase = d->peak_phase;
  ld.peak_iteration = d->peak_iteration;
  if (!dev || dev->events.empty() || buckets == 0) return ld;
  const EventAxis ax = axis ? *axis : event_axis(*dev, o.axis);
  ld.time_axis = ax.time && ax.shared == SharedAxis::None;
  ld.shared = ax.shared;
  ld.iteration_marks = ax.marks;
  ld.x_min = ax.lo;
  ld.x_max = ax.hi;
  ld.buckets = buckets;
  ld.peak_x = ax.at(d->peak_index);
  ld.phases = phase_bands(at, ax);
  const double span = ax.hi > ax.lo ? ax.hi - ax.lo : 1;
  auto bucket_x = [&](double x) {
    return std::min(buckets - 1, size_t(std::max(0.0, (x - ax.lo) / span * double(buckets))));
  };

  // Bands: categories, or the sites holding the most bytes at any moment.
  const size_t na = at.allocations.size();
  std::vector<uint32_t> band_of(na, UINT32_MAX);
  if (o.group == LifetimeGroup::Category) {
    std::vector<int> band_of_cat(at.categories.size(), -1);
    for (size_t k = 0; k < at.categories.size(); ++k) {
      bool any = false;
      for (const Allocation& a : at.allocations)
        if (a.category == k && a.requested > 0) {
          any = true;
          break;
        }
      if (!any) continue;
      band_of_cat[k] = int(ld.bands.size());
      LifetimeBand b;
      b.name = at.categories[k];
      b.category = int(k);
      ld.bands.push_back(std::move(b));
    }
    for (size_t i = 0; i < na; ++i)
      if (at.allocations[i].requested > 0) band_of[i] = uint32_t(band_of_cat[at.allocations[i].category]);
  } else {
    std::unordered_map<StackId, uint32_t> site_of_stack;
    std::unordered_map<std::string, uint32_t> site_index;
    std::vector<SiteName> site_names;
    std::vector<std::set<std::string>> contexts;
    std::vector<uint32_t> site(na);
    for (size_t i = 0; i < na; ++i) {
      const StackId s = at.allocations[i].stack;
      auto f = site_of_stack.find(s);
      if (f == site_of_stack.end()) {
        SiteName name = site_name(frames, s);
        auto g = site_index.emplace(name.key, uint32_t(site_names.size()));
        if (g.second) {
          site_names.push_back(name);
          contexts.emplace_back();
        }
        if (contexts[g.first->second].size() < 8) contexts[g.first->second].insert(name.context);
        f = site_of_stack.emplace(s, g.first->second).first;
      }
      site[i] = f->second;
    }
    // Highest live bytes per site over the run, and bytes x time by category.
    const size_t ns = site_names.size();
    const double dx = (ax.hi - ax.lo) / double(buckets);
    std::vector<int64_t> live(ns, 0), high(ns, 0);
    std::vector<std::vector<double>> cat_area(ns, std::vector<double>(at.categories.size(), 0));
    for (size_t i = 0; i < na; ++i) {
      const Allocation& a = at.allocations[i];
      const double x0 = ax.at(a.alloc_event), x1 = a.free_event == INT64_MAX ? ax.hi : ax.at(a.free_event);
      cat_area[site[i]][a.category] += double(a.requested) * std::max(x1 - x0, dx);
      if (a.alloc_event < 0) live[site[i]] += int64_t(a.requested);
    }
    for (size_t s = 0; s < ns; ++s) high[s] = live[s];
    for (size_t e = 0; e < at.event_alloc.size(); ++e) {
      const uint32_t id = at.event_alloc[e];
      if (id == UINT32_MAX) continue;
      const Allocation& a = at.allocations[id];
      if (a.alloc_event == int64_t(e)) {
        int64_t& l = live[site[id]];
        l += int64_t(a.requested);
        high[site[id]] = std::max(high[site[id]], l);
      }
      if (a.free_event == int64_t(e)) live[site[id]] -= int64_t(a.requested);
    }
    std::vector<uint32_t> order(ns);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](uint32_t x, uint32_t y) {
      return high[x] != high[y] ? high[x] > high[y] : site_names[x].key < site_names[y].key;
    });
    std::vector<uint32_t> band_of_site(ns, UINT32_MAX);
    size_t shown = 0;
    for (; shown < std::min(ns, kLifetimeSiteBands); ++shown) {
      const uint32_t s = order[shown];
      if (high[s] <= 0) break;
      band_of_site[s] = uint32_t(ld.bands.size());
      LifetimeBand b;
      b.name = site_names[s].title;
      b.context = contexts[s].size() == 1 ? *contexts[s].begin() : std::to_string(contexts[s].size()) + " call paths";
      const auto& ca = cat_area[s];
      b.category = int(std::max_element(ca.begin(), ca.end()) - ca.begin());
      ld.bands.push_back(std::move(b));
    }
    uint32_t other = UINT32_MAX;
    for (size_t i = 0; i < na; ++i) {
      if (at.allocations[i].requested == 0) continue;
      uint32_t bi = band_of_site[site[i]];
      if (bi == UINT32_MAX) {
        if (other == UINT32_MAX) {
          other = uint32_t(ld.bands.size());
          LifetimeBand b;
          b.name = "other sites (" + detail::with_commas(ns - shown) + ")";
          b.category = -1;
          ld.bands.push_back(std::move(b));
        }
        bi = other;
      }
      band_of[i] = bi;
    }
  }
  const size_t nb = ld.bands.size();
  if (nb == 0) return ld;

  // Each band's highest live bytes, and the height it gets (band_heights()):
  // an allocation is drawn by itself only when its bar would be at least
  // 1.5 pt tall; thinner ones are summed.
  {
    std::vector<int64_t> live(nb, 0);
    for (size_t i = 0; i < na; ++i)
      if (band_of[i] != UINT32_MAX && at.allocations[i].alloc_event < 0) live[band_of[i]] += int64_t(at.allocations[i].requested);
    for (size_t k = 0; k < nb; ++k) ld.bands[k].max_live = live[k];
    for (size_t e = 0; e < at.event_alloc.size(); ++e) {
      const uint32_t id = at.event_alloc[e];
      if (id == UINT32_MAX || band_of[id] == UINT32_MAX) continue;
      const Allocation& a = at.allocations[id];
      const uint32_t bi = band_of[id];
      if (a.alloc_event == int64_t(e)) {
        live[bi] += int64_t(a.requested);
        ld.bands[bi].max_live = std::max(ld.bands[bi].max_live, live[bi]);
      }
      if (a.free_event == int64_t(e)) live[bi] -= int64_t(a.requested);
    }
  }
  std::vector<int64_t> maxes;
  for (const LifetimeBand& b : ld.bands) maxes.push_back(b.max_live);
  const std::vector<double> heights = band_heights(maxes, plot_height);
  std::vector<int64_t> min_bytes(nb);
  for (size_t k = 0; k < nb; ++k)
    min_bytes[k] = int64_t(std::ceil(1.5 * double(ld.bands[k].max_live) / std::max(heights[k], 1.0)));

  // Which allocations are drawn: in each band, of those tall enough, the
  // ones covering the most bytes x time; the bands share the budget (a band
  // that needs fewer leaves the rest to the others).
  std::vector<std::vector<uint32_t>> members(nb);
  for (size_t i = 0; i < na; ++i)
    if (band_of[i] != UINT32_MAX) {
      ++ld.bands[band_of[i]].allocations;
      if (int64_t(at.allocations[i].requested) >= min_bytes[band_of[i]]) members[band_of[i]].push_back(uint32_t(i));
    }
  const double min_dx = span / double(buckets);
  auto x0_of = [&](const Allocation& a) { return ax.at(a.alloc_event); };
  auto x1_of = [&](const Allocation& a) { return a.free_event == INT64_MAX ? ax.hi : ax.at(a.free_event); };
  // Bytes x time of each candidate, computed once (the selection compares them often).
  std::vector<double> area_of(na, 0);
  for (const auto& m : members)
    for (uint32_t i : m) {
      const Allocation& a = at.allocations[i];
      area_of[i] = double(a.requested) * std::max(x1_of(a) - x0_of(a), min_dx);
    }
  std::vector<size_t> quota(nb, 0);
  {
    size_t budget = std::min(o.top, kMaxLifetimeBars);
    std::vector<size_t> by_size(nb);
    std::iota(by_size.begin(), by_size.end(), 0);
    std::sort(by_size.begin(), by_size.end(), [&](size_t x, size_t y) { return members[x].size() < members[y].size(); });
    for (size_t k = 0; k < nb; ++k) {
      const size_t left = nb - k;
      quota[by_size[k]] = std::min(members[by_size[k]].size(), budget / left);
      budget -= quota[by_size[k]];
    }
  }
  std::vector<uint8_t> drawn(na, 0);
  for (size_t bi = 0; bi < nb; ++bi) {
    LifetimeBand& band = ld.bands[bi];
    std::vector<uint32_t>& m = members[bi];
    const size_t q = quota[bi];
    auto better = [&](uint32_t x, uint32_t y) {
      if (area_of[x] != area_of[y]) return area_of[x] > area_of[y];
      return x < y;
    };
    if (q < m.size()) std::nth_element(m.begin(), m.begin() + long(q), m.end(), better);
    for (size_t k = 0; k < q; ++k) {
      const Allocation& a = at.allocations[m[k]];
      LifetimeBar bar;
      bar.allocation = m[k];
      bar.x0 = x0_of(a);
      bar.x1 = std::max(x1_of(a), bar.x0);
      bar.bytes = int64_t(a.requested);
      bar.category = a.category;
      bar.alloc_event = a.alloc_event;
      // The bar lasts until the free completes (the bytes are held until
      // then); its label names the user's free.
      bar.free_event = a.user_free();
      if (a.alloc_event >= 0 && a.alloc_event != INT64_MAX) {
        bar.alloc_iteration = at.iteration_at(a.alloc_event);
        bar.alloc_phase = at.phase_at(a.alloc_event);
      }
      if (bar.free_event >= 0 && bar.free_event != INT64_MAX) {
        bar.free_iteration = at.iteration_at(bar.free_event);
        bar.free_phase = at.phase_at(bar.free_event);
      }
      bar.site = site_label(frames, a.stack);
      band.bars.push_back(std::move(bar));
      drawn[m[k]] = 1;
    }
    band.rest_allocations = band.allocations - q;
    pack(band.bars);
    ld.drawn += q;
    ld.aggregated += band.allocations - q;
  }

  // The rest, per bucket: the highest live bytes of the undrawn allocations.
  std::vector<int64_t> live(nb, 0);
  for (size_t i = 0; i < na; ++i)
    if (band_of[i] != UINT32_MAX && !drawn[i] && at.allocations[i].alloc_event < 0)
      live[band_of[i]] += int64_t(at.allocations[i].requested);
  for (LifetimeBand& b : ld.bands) {
    b.rest.assign(buckets, 0);
    b.skyline.assign(buckets, 0);
  }
  size_t cur = 0;
  for (size_t k = 0; k < nb; ++k) ld.bands[k].rest[0] = live[k];
  for (size_t e = 0; e < at.event_alloc.size(); ++e) {
    const size_t bk = std::max(cur, bucket_x(ax.at(int64_t(e))));
    for (; cur < bk; ) {  // carry the live bytes into buckets without events
      ++cur;
      for (size_t k = 0; k < nb; ++k) ld.bands[k].rest[cur] = live[k];
    }
    const uint32_t id = at.event_alloc[e];
    if (id == UINT32_MAX || band_of[id] == UINT32_MAX || drawn[id]) continue;
    const Allocation& a = at.allocations[id];
    const uint32_t bi = band_of[id];
    if (a.alloc_event == int64_t(e)) live[bi] += int64_t(a.requested);
    if (a.free_event == int64_t(e)) live[bi] -= int64_t(a.requested);
    ld.bands[bi].rest[cur] = std::max(ld.bands[bi].rest[cur], live[bi]);
  }
  for (++cur; cur < buckets; ++cur)
    for (size_t k = 0; k < nb; ++k) ld.bands[k].rest[cur] = live[k];
  // Skylines and heights.
  for (LifetimeBand& b : ld.bands) {
    int64_t top = 0;
    for (const LifetimeBar& bar : b.bars) {
      const size_t s = bucket_x(bar.x0), e = bucket_x(bar.x1);
      for (size_t k = s; k <= e; ++k) b.skyline[k] = std::max(b.skyline[k], bar.offset + bar.bytes);
      top = std::max(top, bar.offset + bar.bytes);
    }
    for (size_t k = 0; k < buckets; ++k) top = std::max(top, b.skyline[k] + b.rest[k]);
    b.height = top;
  }
  for (uint32_t id : at.live_at(d->peak_index)) {
    const uint32_t bi = band_of[id];
    if (bi != UINT32_MAX) ld.bands[bi].peak_bytes += int64_t(at.allocations[id].requested);
  }
  return ld;
}

}  // namespace snapdiff
