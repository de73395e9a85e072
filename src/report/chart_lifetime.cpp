// The lifetime chart: allocations as bars from allocation to free, in one
// band per category (or site), the largest drawn one by one and the rest
// summed, with the peak and the phases.
#include <algorithm>
#include <cmath>

#include "report/chart_canvas.hpp"

namespace snapdiff::detail {

namespace {

std::string event_words(int64_t e, int iteration, Phase phase) {
  if (e < 0) return "before the recorded history";
  if (e == INT64_MAX) return "never (alive at the end)";
  return "event " + with_commas(uint64_t(e)) + " (" + (iteration > 0 ? "iteration " + std::to_string(iteration) + ", " : "") +
         phase_name(phase) + ")";
}

double draw_lifetime_panel(Canvas& c, const ChartSeries& p, const std::string& label, double y, double gutter,
                           double v1, bool o_group_site) {
  const LifetimeData& ld = p.lifetime;
  if (p.device < 0) return y;
  const double px0 = p.geometry.plot_x0, px1 = px0 + double(p.geometry.columns) * 2;
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
    band_h[i] = ld.bands[i].scale_points;
    band_scale[i] = ld.bands[i].scale_points / double(std::max<int64_t>(ld.bands[i].scale_bytes, 1));
    total += band_h[i] + (i ? 6 : 0);
  }
  const double bottom = top + total;
  draw_phase_bands(c, ld.phases, xs, top, bottom);
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
    const std::string cat = b.category >= 0 ? ld.categories[size_t(b.category)] : "";
    const std::string color = b.category >= 0 ? category_color(cat) : std::string(kMixedColor);
    const std::string name = b.other_sites > 0 ? "other sites (" + with_commas(b.other_sites) + ")" : b.name;
    // Gutter: a color stripe, the name, its context, its size.
    BoxStyle sw;
    sw.fill = color;
    if (!cat.empty()) sw.cls = "cat-" + cat;
    c.box(kMarginX, by + 1, 4, std::max(band_h[i] - 2, 1.0), sw);
    std::string info = "max " + human_bytes(b.max_live) + ", " + with_commas(b.allocations) +
                       (b.allocations == 1 ? " allocation" : " allocations");
    if (o_group_site && !cat.empty()) info = cat + " \xc2\xb7 " + info;
    c.text(kMarginX + 8, by + 7, fit_text(name, gutter - 14, name_st.size, true), name_st, name);
    if (band_h[i] >= 24) c.text(kMarginX + 8, by + 18, fit_text(info, gutter - 14, info_st.size), info_st);
    if (!b.context.empty() && band_h[i] >= 34)
      c.text(kMarginX + 8, by + 28, fit_text(b.context, gutter - 14, info_st.size), info_st, b.context);
    BoxStyle base;
    base.fill = "#b5b5b5";
    c.box(px0, bb, px1 - px0, 1, base);
    // Bars.
    for (const LifetimeBar& bar : b.bars) {
      double x0 = std::round(xs(bar.x0)), x1 = std::round(xs(bar.x1));
      if (x1 - x0 < 1) x1 = x0 + 1;
      double y1 = bb - std::round(double(bar.offset) * scale);
      double y0 = bb - std::round(double(bar.offset + bar.bytes) * scale);
      if (y1 - y0 < 1) y0 = y1 - 1;
      BoxStyle s;
      const std::string& bar_cat = ld.categories[size_t(bar.category)];
      s.fill = category_color(bar_cat);
      s.cls = "cat-" + bar_cat;
      if (y1 - y0 >= 4 && x1 - x0 >= 4) {
        s.stroke = "#ffffff";
        s.stroke_width = 0.5;
      }
      s.tooltip = bar_cat + ", " + human_bytes(bar.bytes) + "\nallocated: " +
                  event_words(bar.alloc_event, bar.alloc_iteration, bar.alloc_phase) +
                  "\nfreed: " + event_words(bar.free_event, bar.free_iteration, bar.free_phase) + "\n" + bar.site;
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
        s.tooltip = name + ": smaller allocations, summed (up to " + human_bytes(most) + " live)";
        c.box(px0 + double(k) * 2, g.second, double(e - k) * 2, g.first - g.second, s);
      }
      k = e;
    }
    by = bb + 6;
  }
  if (p.peak_event >= 0) {
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
  return draw_x_axis(c, xs, bottom, ld.time_axis, ld.shared, ld.iteration_marks);
}

}  // namespace

std::string lifetime_dot(const std::vector<const ChartSeries*>& runs, const ChartOptions& o) {
  const ChartGeometry& geo = runs.front()->geometry;
  Canvas c(geo.width);
  const double gutter = geo.plot_x0 - kMarginX;
  double v1 = 0;
  size_t drawn = 0, aggregated = 0;
  std::vector<std::string> cats;
  for (const ChartSeries* p : runs) {
    const LifetimeData& ld = p->lifetime;
    v1 = std::max(v1, ld.x_max);
    drawn += ld.drawn;
    aggregated += ld.aggregated;
    // Every category drawn (in site bands, bars keep their own category's color).
    if (p->device < 0) continue;
    for (const LifetimeBand& b : ld.bands) {
      if (b.category >= 0 && std::find(cats.begin(), cats.end(), ld.categories[size_t(b.category)]) == cats.end())
        cats.push_back(ld.categories[size_t(b.category)]);
      for (const LifetimeBar& bar : b.bars)
        if (std::find(cats.begin(), cats.end(), ld.categories[size_t(bar.category)]) == cats.end())
          cats.push_back(ld.categories[size_t(bar.category)]);
    }
  }
  // Legend in the categories' own order.
  {
    std::vector<std::string> ordered;
    for (const std::string& k : runs.front()->lifetime.categories)
      if (std::find(cats.begin(), cats.end(), k) != cats.end()) ordered.push_back(k);
    for (const std::string& k : cats)
      if (std::find(ordered.begin(), ordered.end(), k) == ordered.end()) ordered.push_back(k);
    cats = ordered;
  }
  const ChartSeries& first = *runs.front();
  const std::string devname = device_name(first);
  const char* by = o.group == LifetimeGroup::Site ? "site" : "category";
  std::string title = o.title;
  if (title.empty())
    title = runs.size() == 1 ? base_name(first.input) + " \xe2\x80\x94 allocation lifetimes by " + by + " (" + devname + ")"
                             : std::string("Allocation lifetimes by ") + by + ": A " + base_name(runs[0]->input) +
                                   " vs B " + base_name(runs[1]->input);
  const std::string sub = "Each bar is one allocation from its allocation to its free, as tall as its size (each band "
                          "has its own scale): " + with_commas(drawn) + " drawn one by one (those at least 1.5 pt tall, "
                          "up to --top); the other " + with_commas(aggregated) + " summed, lighter, on top.";
  double y = draw_title(c, kMarginX, 14, title, sub);
  std::vector<LegendItem> legend;
  for (const std::string& k : cats) legend.push_back({category_color(k), k, "legend cat-" + k, "", false});
  legend.push_back({tint("#888888", 0.55), "smaller allocations, summed", "legend", "", false});
  legend.push_back({"", "the peak (requested)", "", kPeakColor, true});
  y = draw_legend(c, kMarginX, y, c.width - kMarginX, legend) + 6;
  for (const ChartSeries* p : runs) {
    std::string label = runs.size() == 1 ? "" : p->label + ": " + base_name(p->input);
    y = draw_lifetime_panel(c, *p, label, y, gutter, v1, o.group == LifetimeGroup::Site) + 8;
  }
  c.height = std::ceil(y + 6);
  std::string comment = std::string("snapdiff lifetime chart by ") + by;
  for (const ChartSeries* run : runs) comment += "\n" + (run->label.empty() ? "" : run->label + ": ") + base_name(run->input);
  return c.to_dot(o.graph_id.empty() ? "lifetime" : o.graph_id, comment);
}

}  // namespace snapdiff::detail
