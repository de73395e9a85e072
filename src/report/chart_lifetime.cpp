// The lifetime chart: allocations as bars from allocation to free, in one
// band per category (or site), the largest drawn one by one and the rest
// summed, with the peak and the phases.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <unordered_map>

#include "report/chart_canvas.hpp"

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
  LifetimeData ld;
  const DeviceAnalysis* d = chart_device(r, o);
  if (!d) return ld;
  const Device* dev = trace_device(t, d->device);
  const Attribution& at = d->attr;
  ld.categories = at.categories;
  ld.peak_requested = d->replay.peak_requested.bytes;
  ld.peak_phase = d->peak_phase;
  ld.peak_iteration = d->peak_iteration;
  if (!dev || dev->events.empty() || buckets == 0) return ld;
  const EventAxis ax = event_axis(*dev, o.axis);
  ld.time_axis = ax.time;
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
        SiteName name = site_name(t, s);
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
          b.name = "other sites (" + with_commas(ns - shown) + ")";
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
      band.bars.push_back(bar);
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

namespace detail {

namespace {

std::string event_words(const Attribution& at, int64_t e) {
  if (e < 0) return "before the recorded history";
  if (e == INT64_MAX) return "never (alive at the end)";
  const int it = at.iteration_at(e);
  return "event " + with_commas(uint64_t(e)) + " (" + (it > 0 ? "iteration " + std::to_string(it) + ", " : "") +
         phase_name(at.phase_at(e)) + ")";
}

struct Panel {
  const ChartRun* run;
  const DeviceAnalysis* dev;
  LifetimeData data;
};

// Band name -> (height in points, bytes at its top): the same for A and B.
using BandScales = std::map<std::string, std::pair<double, int64_t>>;

double draw_lifetime_panel(Canvas& c, const Panel& p, const std::string& label, double y, const BandScales& scales,
                           double gutter, double v1, bool o_group_site, size_t buckets) {
  const LifetimeData& ld = p.data;
  if (!p.dev) return y;
  const double px0 = kMarginX + gutter, px1 = px0 + double(buckets) * 2;
  XScale xs{ld.x_min, v1, px0, px1};
  if (!label.empty()) {
    TextStyle ls;
    ls.size = 10.5;
    ls.bold = true;
    c.text(kMarginX, y + 7, label, ls);
    y += 18;
  }
  y = draw_phase_strip(c, ld.phases, xs, y) + 14;
  const double top = y;
  // Band geometry first (the shading spans all of them).
  std::vector<double> band_h(ld.bands.size()), band_scale(ld.bands.size());
  double total = 0;
  for (size_t i = 0; i < ld.bands.size(); ++i) {
    const auto& sc = scales.at(ld.bands[i].name);
    band_h[i] = sc.first;
    band_scale[i] = sc.first / double(std::max<int64_t>(sc.second, 1));
    total += band_h[i] + (i ? 6 : 0);
  }
  const double bottom = top + total;
  draw_phase_bands(c, ld.phases, xs, top, bottom);
  const Attribution& at = p.dev->attr;
  const Trace& t = *p.run->trace;
  double by = top;
  TextStyle name_st, info_st;
  name_st.size = 9;
  name_st.bold = true;
  info_st.size = 8;
  info_st.color = kMutedInk;
  for (size_t i = 0; i < ld.bands.size(); ++i) {
    const LifetimeBand& b = ld.bands[i];
    const double bb = by + band_h[i];  // band bottom
    const double scale = band_scale[i];
    const std::string cat = b.category >= 0 ? at.categories[size_t(b.category)] : "";
    const std::string color = b.category >= 0 ? category_color(cat) : std::string(kMixedColor);
    // Gutter: a color stripe, the name, its context, its size.
    BoxStyle sw;
    sw.fill = color;
    if (!cat.empty()) sw.cls = "cat-" + cat;
    c.box(kMarginX, by + 1, 4, std::max(band_h[i] - 2, 1.0), sw);
    std::string info = "max " + human_bytes(b.max_live) + ", " + with_commas(b.allocations) +
                       (b.allocations == 1 ? " allocation" : " allocations");
    if (o_group_site && !cat.empty()) info = cat + " \xc2\xb7 " + info;
    c.text(kMarginX + 8, by + 7, fit_text(b.name, gutter - 14, name_st.size, true), name_st, b.name);
    if (band_h[i] >= 24) c.text(kMarginX + 8, by + 18, fit_text(info, gutter - 14, info_st.size), info_st);
    if (!b.context.empty() && band_h[i] >= 34)
      c.text(kMarginX + 8, by + 28, fit_text(b.context, gutter - 14, info_st.size), info_st, b.context);
    BoxStyle base;
    base.fill = "#b5b5b5";
    c.box(px0, bb, px1 - px0, 1, base);
    // Bars.
    for (const LifetimeBar& bar : b.bars) {
      const Allocation& a = at.allocations[bar.allocation];
      double x0 = std::round(xs(bar.x0)), x1 = std::round(xs(bar.x1));
      if (x1 - x0 < 1) x1 = x0 + 1;
      double y1 = bb - std::round(double(bar.offset) * scale);
      double y0 = bb - std::round(double(bar.offset + bar.bytes) * scale);
      if (y1 - y0 < 1) y0 = y1 - 1;
      BoxStyle s;
      s.fill = category_color(at.categories[a.category]);
      s.cls = "cat-" + at.categories[a.category];
      if (y1 - y0 >= 4 && x1 - x0 >= 4) {
        s.stroke = "#ffffff";
        s.stroke_width = 0.5;
      }
      s.tooltip = at.categories[a.category] + ", " + human_bytes(int64_t(a.requested)) + "\nallocated: " +
                  event_words(at, a.alloc_event) + "\nfreed: " + event_words(at, a.free_event) + "\n" +
                  site_label(t, a.stack);
      c.box(x0, y0, x1 - x0, y1 - y0, s);
    }
    // The rest, summed, on top of the bars.
    const std::string light = tint(color, 0.35);
    size_t k = 0;
    const size_t n = b.rest.size();
    while (k < n) {
      auto geom = [&](size_t j) {
        const double lo = bb - std::round(double(b.skyline[j]) * scale);
        const double hi = bb - std::round(double(b.skyline[j] + b.rest[j]) * scale);
        return std::make_pair(lo, hi);
      };
      const auto g = geom(k);
      size_t e = k + 1;
      int64_t most = b.rest[k];
      while (e < n && geom(e) == g) most = std::max(most, b.rest[e]), ++e;
      if (g.first - g.second >= 1) {
        BoxStyle s;
        s.fill = light;
        s.stroke = light;
        s.stroke_width = 0.5;
        s.cls = "rest";
        s.tooltip = b.name + ": smaller allocations, summed (up to " + human_bytes(most) + " live)";
        c.box(px0 + double(k) * 2, g.second, double(e - k) * 2, g.first - g.second, s);
      }
      k = e;
    }
    by = bb + 6;
  }
  if (p.dev->peak_index >= 0) {
    const double x = std::round(xs(ld.peak_x)) + 0.5;
    std::string words = ld.peak_iteration > 0 ? "iteration " + std::to_string(ld.peak_iteration) + ", " : "";
    draw_peak_marker(c, x, top, bottom,
                     "peak " + human_bytes(ld.peak_requested) + " requested, " + words + phase_name(ld.peak_phase),
                     px0, px1);
  }
  if (ld.bands.empty()) {
    TextStyle ns;
    ns.align = Align::Center;
    ns.color = kMutedInk;
    c.text((px0 + px1) / 2, top + 20, "no allocation history recorded: no lifetimes to draw", ns);
    return top + 50;
  }
  return draw_x_axis(c, xs, bottom, ld.time_axis);
}

}  // namespace

std::string lifetime_dot(const std::vector<ChartRun>& runs, const ChartOptions& o) {
  Canvas c(std::max(o.width, 500.0));
  const double gutter = o.group == LifetimeGroup::Site ? 250 : 150;
  const size_t buckets = size_t((c.width - kMarginX - gutter - kPlotRight) / 2);
  ChartOptions oo = o;
  const double plot_h = runs.size() == 1 ? 440 : 300;
  std::vector<Panel> panels;
  bool events_axis = o.axis == ChartAxis::Events;
  for (const ChartRun& run : runs) {
    panels.push_back({&run, chart_device(*run.report, o), lifetime_data(*run.report, *run.trace, oo, buckets, plot_h)});
    if (!panels.back().data.time_axis) events_axis = true;
  }
  if (events_axis && o.axis != ChartAxis::Events && runs.size() > 1) {
    oo.axis = ChartAxis::Events;
    for (size_t i = 0; i < runs.size(); ++i)
      panels[i].data = lifetime_data(*runs[i].report, *runs[i].trace, oo, buckets, plot_h);
  }
  // Two runs share the x axis: the shorter one gets proportionally fewer
  // columns, so that its summed allocations end where its events end.
  if (panels.size() > 1) {
    double hi = 0;
    for (const Panel& p : panels) hi = std::max(hi, p.data.x_max - p.data.x_min);
    for (size_t i = 0; i < panels.size(); ++i) {
      const size_t nb = size_t(
          std::max(1.0, std::round(double(buckets) * (panels[i].data.x_max - panels[i].data.x_min) / std::max(hi, 1e-12))));
      if (nb < buckets) panels[i].data = lifetime_data(*runs[i].report, *runs[i].trace, oo, nb, plot_h);
    }
  }
  // Band heights and scales: one per band name, shared by A and B.
  BandScales scales;
  std::vector<std::string> names;
  double v1 = 0;
  size_t drawn = 0, aggregated = 0;
  std::vector<std::string> cats;
  for (const Panel& p : panels) {
    v1 = std::max(v1, p.data.x_max);
    drawn += p.data.drawn;
    aggregated += p.data.aggregated;
    for (const LifetimeBand& b : p.data.bands) {
      auto f = scales.find(b.name);
      if (f == scales.end()) {
        names.push_back(b.name);
        scales[b.name] = {0, std::max(b.height, b.max_live)};
      } else {
        f->second.second = std::max({f->second.second, b.height, b.max_live});
      }
    }
    // Every category drawn (in site bands, bars keep their own category's color).
    if (!p.dev) continue;
    const Attribution& at = p.dev->attr;
    for (const LifetimeBand& b : p.data.bands) {
      if (b.category >= 0 && std::find(cats.begin(), cats.end(), at.categories[size_t(b.category)]) == cats.end())
        cats.push_back(at.categories[size_t(b.category)]);
      for (const LifetimeBar& bar : b.bars)
        if (std::find(cats.begin(), cats.end(), at.categories[size_t(bar.category)]) == cats.end())
          cats.push_back(at.categories[size_t(bar.category)]);
    }
  }
  {
    std::vector<int64_t> maxes;
    for (const std::string& n : names) maxes.push_back(scales[n].second);
    const std::vector<double> h = band_heights(maxes, plot_h);
    for (size_t i = 0; i < names.size(); ++i) scales[names[i]].first = h[i];
  }
  // Legend in the categories' own order.
  if (!panels.empty()) {
    std::vector<std::string> ordered;
    for (const std::string& k : panels[0].data.categories)
      if (std::find(cats.begin(), cats.end(), k) != cats.end()) ordered.push_back(k);
    for (const std::string& k : cats)
      if (std::find(ordered.begin(), ordered.end(), k) == ordered.end()) ordered.push_back(k);
    cats = ordered;
  }
  const ChartRun& first = runs.front();
  const DeviceAnalysis* d0 = chart_device(*first.report, o);
  const std::string devname = d0 ? "cuda:" + std::to_string(d0->device) : "no device";
  const char* by = o.group == LifetimeGroup::Site ? "site" : "category";
  std::string title = o.title;
  if (title.empty())
    title = runs.size() == 1 ? base_name(first.report->input_name) + " \xe2\x80\x94 allocation lifetimes by " + by + " (" +
                                   devname + ")"
                             : std::string("Allocation lifetimes by ") + by + ": A " +
                                   base_name(runs[0].report->input_name) + " vs B " + base_name(runs[1].report->input_name);
  const std::string sub = "Each bar is one allocation from its allocation to its free, as tall as its size (each band "
                          "has its own scale): " + with_commas(drawn) + " drawn one by one (those at least 1.5 pt tall, "
                          "up to --top); the other " + with_commas(aggregated) + " summed, lighter, on top.";
  double y = draw_title(c, kMarginX, 14, title, sub);
  std::vector<LegendItem> legend;
  for (const std::string& k : cats) legend.push_back({category_color(k), k, "legend cat-" + k, "", false});
  legend.push_back({tint("#888888", 0.55), "smaller allocations, summed", "legend", "", false});
  legend.push_back({"", "the peak (requested)", "", kPeakColor, true});
  y = draw_legend(c, kMarginX, y, c.width - kMarginX, legend) + 6;
  for (const Panel& p : panels) {
    std::string label = runs.size() == 1 ? "" : p.run->label + ": " + base_name(p.run->report->input_name);
    y = draw_lifetime_panel(c, p, label, y, scales, gutter, v1, o.group == LifetimeGroup::Site, buckets) + 8;
  }
  c.height = std::ceil(y + 6);
  std::string comment = std::string("snapdiff lifetime chart by ") + by;
  for (const ChartRun& run : runs) comment += "\n" + (run.label.empty() ? "" : run.label + ": ") + base_name(run.report->input_name);
  return c.to_dot(o.graph_id.empty() ? "lifetime" : o.graph_id, comment);
}

}  // namespace detail

}  // namespace snapdiff
