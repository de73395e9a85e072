// The lifetime chart's series: allocations as bars from allocation to free
// in bands (categories or sites), the largest one by one, the rest summed per
// x bucket.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <unordered_map>

#include "analysis/charts/chart_series.hpp"

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

namespace {

// The steps of lifetime_data_on(), over one device's attribution.
class LifetimeBuilder {
 public:
  LifetimeBuilder(LifetimeData& ld, const DeviceAnalysis& d, const FrameTable& frames, const ChartOptions& o,
                  const EventAxis& ax, size_t buckets)
      : ld_(ld), d_(d), frames_(frames), at_(d.attr), o_(o), ax_(ax), buckets_(buckets),
        span_(ax.hi > ax.lo ? ax.hi - ax.lo : 1), na_(at_.allocations.size()), band_of_(na_, UINT32_MAX) {}

  void run(double plot_height) {
    // Bands: categories, or the sites holding the most bytes at any moment.
    if (o_.group == LifetimeGroup::Category) category_bands();
    else site_bands();
    nb_ = ld_.bands.size();
    if (nb_ == 0) return;
    band_max_live();
    choose_members(plot_height);
    draw_bars();
    rest_per_bucket();
    skylines();
  }

 private:
  size_t bucket_x(double x) const {
    return std::min(buckets_ - 1, size_t(std::max(0.0, (x - ax_.lo) / span_ * double(buckets_))));
  }
  double x0_of(const Allocation& a) const { return ax_.at(a.alloc_event); }
  double x1_of(const Allocation& a) const { return a.free_event == INT64_MAX ? ax_.hi : ax_.at(a.free_event); }
  void category_bands();
  void site_bands();
  std::vector<uint32_t> site_of_allocations();
  void band_max_live();
  void choose_members(double plot_height);
  void draw_bars();
  void rest_per_bucket();
  void skylines();

  LifetimeData& ld_;
  const DeviceAnalysis& d_;
  const FrameTable& frames_;
  const Attribution& at_;
  const ChartOptions& o_;
  const EventAxis& ax_;
  const size_t buckets_;
  const double span_;
  const size_t na_;                 // allocations
  std::vector<uint32_t> band_of_;   // per allocation: its band (UINT32_MAX: none)
  size_t nb_ = 0;                   // bands
  // Site bands: each site's name and the call paths it is reached by.
  std::vector<SiteName> site_names_;
  std::vector<std::set<std::string>> contexts_;
  // Per band, the allocations tall enough to be drawn by themselves, and
  // how many of them are; per allocation, its bytes x time and whether it is drawn.
  std::vector<std::vector<uint32_t>> members_;
  std::vector<size_t> quota_;
  std::vector<double> area_of_;
  std::vector<uint8_t> drawn_;
};

void LifetimeBuilder::category_bands() {
  std::vector<int> band_of_cat(at_.categories.size(), -1);
  for (size_t k = 0; k < at_.categories.size(); ++k) {
    bool any = false;
    for (const Allocation& a : at_.allocations)
      if (a.category == k && a.requested > 0) {
        any = true;
        break;
      }
    if (!any) continue;
    band_of_cat[k] = int(ld_.bands.size());
    LifetimeBand b;
    b.name = at_.categories[k];
    b.category = int(k);
    ld_.bands.push_back(std::move(b));
  }
  for (size_t i = 0; i < na_; ++i)
    if (at_.allocations[i].requested > 0) band_of_[i] = uint32_t(band_of_cat[at_.allocations[i].category]);
}

// Per allocation, the index of its site in site_names_.
std::vector<uint32_t> LifetimeBuilder::site_of_allocations() {
  std::unordered_map<StackId, uint32_t> site_of_stack;
  std::unordered_map<std::string, uint32_t> site_index;
  std::vector<uint32_t> site(na_);
  for (size_t i = 0; i < na_; ++i) {
    const StackId s = at_.allocations[i].stack;
    auto f = site_of_stack.find(s);
    if (f == site_of_stack.end()) {
      SiteName name = site_name(frames_, s);
      auto g = site_index.emplace(name.key, uint32_t(site_names_.size()));
      if (g.second) {
        site_names_.push_back(name);
        contexts_.emplace_back();
      }
      if (contexts_[g.first->second].size() < 8) contexts_[g.first->second].insert(name.context);
      f = site_of_stack.emplace(s, g.first->second).first;
    }
    site[i] = f->second;
  }
  return site;
}

void LifetimeBuilder::site_bands() {
  const std::vector<uint32_t> site = site_of_allocations();
  // Highest live bytes per site over the run, and bytes x time by category.
  const size_t ns = site_names_.size();
  const double dx = (ax_.hi - ax_.lo) / double(buckets_);
  std::vector<int64_t> live(ns, 0), high(ns, 0);
  std::vector<std::vector<double>> cat_area(ns, std::vector<double>(at_.categories.size(), 0));
  for (size_t i = 0; i < na_; ++i) {
    const Allocation& a = at_.allocations[i];
    const double x0 = ax_.at(a.alloc_event), x1 = a.free_event == INT64_MAX ? ax_.hi : ax_.at(a.free_event);
    cat_area[site[i]][a.category] += double(a.requested) * std::max(x1 - x0, dx);
    if (a.alloc_event < 0) live[site[i]] += int64_t(a.requested);
  }
  for (size_t s = 0; s < ns; ++s) high[s] = live[s];
  for (size_t e = 0; e < at_.event_alloc.size(); ++e) {
    const uint32_t id = at_.event_alloc[e];
    if (id == UINT32_MAX) continue;
    const Allocation& a = at_.allocations[id];
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
    return high[x] != high[y] ? high[x] > high[y] : site_names_[x].key < site_names_[y].key;
  });
  std::vector<uint32_t> band_of_site(ns, UINT32_MAX);
  size_t shown = 0;
  for (; shown < std::min(ns, kLifetimeSiteBands); ++shown) {
    const uint32_t s = order[shown];
    if (high[s] <= 0) break;
    band_of_site[s] = uint32_t(ld_.bands.size());
    LifetimeBand b;
    b.name = site_names_[s].title;
    b.context = contexts_[s].size() == 1 ? *contexts_[s].begin() : std::to_string(contexts_[s].size()) + " call paths";
    const auto& ca = cat_area[s];
    b.category = int(std::max_element(ca.begin(), ca.end()) - ca.begin());
    ld_.bands.push_back(std::move(b));
  }
  uint32_t other = UINT32_MAX;
  for (size_t i = 0; i < na_; ++i) {
    if (at_.allocations[i].requested == 0) continue;
    uint32_t bi = band_of_site[site[i]];
    if (bi == UINT32_MAX) {
      if (other == UINT32_MAX) {
        other = uint32_t(ld_.bands.size());
        LifetimeBand b;
        b.other_sites = ns - shown;
        b.category = -1;
        ld_.bands.push_back(std::move(b));
      }
      bi = other;
    }
    band_of_[i] = bi;
  }
}

// Each band's highest live bytes.
void LifetimeBuilder::band_max_live() {
  std::vector<int64_t> live(nb_, 0);
  for (size_t i = 0; i < na_; ++i)
    if (band_of_[i] != UINT32_MAX && at_.allocations[i].alloc_event < 0) live[band_of_[i]] += int64_t(at_.allocations[i].requested);
  for (size_t k = 0; k < nb_; ++k) ld_.bands[k].max_live = live[k];
  for (size_t e = 0; e < at_.event_alloc.size(); ++e) {
    const uint32_t id = at_.event_alloc[e];
    if (id == UINT32_MAX || band_of_[id] == UINT32_MAX) continue;
    const Allocation& a = at_.allocations[id];
    const uint32_t bi = band_of_[id];
    if (a.alloc_event == int64_t(e)) {
      live[bi] += int64_t(a.requested);
      ld_.bands[bi].max_live = std::max(ld_.bands[bi].max_live, live[bi]);
    }
    if (a.free_event == int64_t(e)) live[bi] -= int64_t(a.requested);
  }
}

// Which allocations may be drawn: the height each band gets
// (band_heights()) lets an allocation be drawn by itself only when its bar
// would be at least 1.5 pt tall; thinner ones are summed. Of those tall
// enough, each band draws the ones covering the most bytes x time; the
// bands share the budget (a band that needs fewer leaves the rest to the others).
void LifetimeBuilder::choose_members(double plot_height) {
  std::vector<int64_t> maxes;
  for (const LifetimeBand& b : ld_.bands) maxes.push_back(b.max_live);
  const std::vector<double> heights = band_heights(maxes, plot_height);
  std::vector<int64_t> min_bytes(nb_);
  for (size_t k = 0; k < nb_; ++k)
    min_bytes[k] = int64_t(std::ceil(1.5 * double(ld_.bands[k].max_live) / std::max(heights[k], 1.0)));
  members_.assign(nb_, {});
  for (size_t i = 0; i < na_; ++i)
    if (band_of_[i] != UINT32_MAX) {
      ++ld_.bands[band_of_[i]].allocations;
      if (int64_t(at_.allocations[i].requested) >= min_bytes[band_of_[i]]) members_[band_of_[i]].push_back(uint32_t(i));
    }
  const double min_dx = span_ / double(buckets_);
  // Bytes x time of each candidate, computed once (the selection compares them often).
  area_of_.assign(na_, 0);
  for (const auto& m : members_)
    for (uint32_t i : m) {
      const Allocation& a = at_.allocations[i];
      area_of_[i] = double(a.requested) * std::max(x1_of(a) - x0_of(a), min_dx);
    }
  quota_.assign(nb_, 0);
  size_t budget = std::min(o_.top, kMaxLifetimeBars);
  std::vector<size_t> by_size(nb_);
  std::iota(by_size.begin(), by_size.end(), 0);
  std::sort(by_size.begin(), by_size.end(), [&](size_t x, size_t y) { return members_[x].size() < members_[y].size(); });
  for (size_t k = 0; k < nb_; ++k) {
    const size_t left = nb_ - k;
    quota_[by_size[k]] = std::min(members_[by_size[k]].size(), budget / left);
    budget -= quota_[by_size[k]];
  }
}

void LifetimeBuilder::draw_bars() {
  drawn_.assign(na_, 0);
  for (size_t bi = 0; bi < nb_; ++bi) {
    LifetimeBand& band = ld_.bands[bi];
    std::vector<uint32_t>& m = members_[bi];
    const size_t q = quota_[bi];
    auto better = [&](uint32_t x, uint32_t y) {
      if (area_of_[x] != area_of_[y]) return area_of_[x] > area_of_[y];
      return x < y;
    };
    if (q < m.size()) std::nth_element(m.begin(), m.begin() + long(q), m.end(), better);
    for (size_t k = 0; k < q; ++k) {
      const Allocation& a = at_.allocations[m[k]];
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
        bar.alloc_iteration = at_.iteration_at(a.alloc_event);
        bar.alloc_phase = at_.phase_at(a.alloc_event);
      }
      if (bar.free_event >= 0 && bar.free_event != INT64_MAX) {
        bar.free_iteration = at_.iteration_at(bar.free_event);
        bar.free_phase = at_.phase_at(bar.free_event);
      }
      bar.site = site_label(frames_, a.stack);
      band.bars.push_back(std::move(bar));
      drawn_[m[k]] = 1;
    }
    band.rest_allocations = band.allocations - q;
    pack(band.bars);
    ld_.drawn += q;
    ld_.aggregated += band.allocations - q;
  }
}

// The rest, per bucket: the highest live bytes of the undrawn allocations.
void LifetimeBuilder::rest_per_bucket() {
  std::vector<int64_t> live(nb_, 0);
  for (size_t i = 0; i < na_; ++i)
    if (band_of_[i] != UINT32_MAX && !drawn_[i] && at_.allocations[i].alloc_event < 0)
      live[band_of_[i]] += int64_t(at_.allocations[i].requested);
  for (LifetimeBand& b : ld_.bands) {
    b.rest.assign(buckets_, 0);
    b.skyline.assign(buckets_, 0);
  }
  size_t cur = 0;
  for (size_t k = 0; k < nb_; ++k) ld_.bands[k].rest[0] = live[k];
  for (size_t e = 0; e < at_.event_alloc.size(); ++e) {
    const size_t bk = std::max(cur, bucket_x(ax_.at(int64_t(e))));
    for (; cur < bk; ) {  // carry the live bytes into buckets without events
      ++cur;
      for (size_t k = 0; k < nb_; ++k) ld_.bands[k].rest[cur] = live[k];
    }
    const uint32_t id = at_.event_alloc[e];
    if (id == UINT32_MAX || band_of_[id] == UINT32_MAX || drawn_[id]) continue;
    const Allocation& a = at_.allocations[id];
    const uint32_t bi = band_of_[id];
    if (a.alloc_event == int64_t(e)) live[bi] += int64_t(a.requested);
    if (a.free_event == int64_t(e)) live[bi] -= int64_t(a.requested);
    ld_.bands[bi].rest[cur] = std::max(ld_.bands[bi].rest[cur], live[bi]);
  }
  for (++cur; cur < buckets_; ++cur)
    for (size_t k = 0; k < nb_; ++k) ld_.bands[k].rest[cur] = live[k];
}

// Skylines and heights, and each band's bytes at the peak.
void LifetimeBuilder::skylines() {
  for (LifetimeBand& b : ld_.bands) {
    int64_t top = 0;
    for (const LifetimeBar& bar : b.bars) {
      const size_t s = bucket_x(bar.x0), e = bucket_x(bar.x1);
      for (size_t k = s; k <= e; ++k) b.skyline[k] = std::max(b.skyline[k], bar.offset + bar.bytes);
      top = std::max(top, bar.offset + bar.bytes);
    }
    for (size_t k = 0; k < buckets_; ++k) top = std::max(top, b.skyline[k] + b.rest[k]);
    b.height = top;
  }
  for (uint32_t id : at_.live_at(d_.peak_index)) {
    const uint32_t bi = band_of_[id];
    if (bi != UINT32_MAX) ld_.bands[bi].peak_bytes += int64_t(at_.allocations[id].requested);
  }
}

}  // namespace

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
  LifetimeBuilder(ld, *d, frames, o, ax, buckets).run(plot_height);
  return ld;
}

}  // namespace snapdiff
