// The timeline chart: requested bytes by category over time (stacked), the
// allocated and reserved bytes as lines, the peak and the phases.
#include <algorithm>
#include <cmath>

#include "report/chart_canvas.hpp"

namespace snapdiff::detail {

namespace {

std::string peak_words(Phase p, int iteration) {
  std::string s = iteration > 0 ? "iteration " + std::to_string(iteration) + ", " : "";
  return s + phase_name(p);
}

// One run's panel: phase strip, plot, x axis. Returns the y below it.
double draw_timeline_panel(Canvas& c, const TimelineData& td, const std::string& label, double y, double plot_h,
                           int64_t ymax, double v1, size_t buckets) {
  const double px0 = kPlotLeft, px1 = kPlotLeft + double(buckets) * 2;
  XScale xs{td.x_min, v1, px0, px1};
  if (!label.empty()) {
    TextStyle ls;
    ls.size = 10.5;
    ls.bold = true;
    c.text(kMarginX, y + 7, label, ls);
    y += 18;
  }
  y = draw_phase_strip(c, td.phases, xs, y) + 14;  // room for the peak label
  const double top = y, bottom = y + plot_h;
  draw_phase_bands(c, td.phases, xs, top, bottom);
  const std::vector<int64_t> ticks = byte_ticks(ymax, 5);
  const double scale = plot_h / double(std::max<int64_t>(ticks.back(), 1));
  TextStyle yl;
  yl.size = 8.5;
  yl.color = kMutedInk;
  yl.align = Align::Right;
  for (int64_t v : ticks) {
    const double yy = std::round(bottom - double(v) * scale);
    BoxStyle g;
    g.fill = v == 0 ? "#999999" : "#e2e2e2";
    g.cls = "grid";
    if (v > 0) c.box(px0, yy, px1 - px0, 1, g);
    c.text(px0 - 6, yy, axis_bytes(v), yl);
  }
  // Stacked columns, runs of equal geometry merged.
  const size_t nc = td.categories.size();
  const size_t nb = td.columns.size();
  std::vector<double> base(nb, 0);
  std::vector<int64_t> cum(nb, 0);
  for (size_t k = 0; k < nc; ++k) {
    size_t b = 0;
    const std::string color = category_color(td.categories[k]);
    while (b < nb) {
      const int64_t v = k < td.columns[b].by_category.size() ? td.columns[b].by_category[k] : 0;
      const double y0 = std::round(bottom - double(cum[b]) * scale);
      const double y1 = std::round(bottom - double(cum[b] + v) * scale);
      size_t e = b + 1;
      while (e < nb) {
        const int64_t ve = k < td.columns[e].by_category.size() ? td.columns[e].by_category[k] : 0;
        if (std::round(bottom - double(cum[e]) * scale) != y0 || std::round(bottom - double(cum[e] + ve) * scale) != y1)
          break;
        ++e;
      }
      if (y0 - y1 >= 1) {
        BoxStyle s;
        s.fill = color;
        s.stroke = color;  // covers the anti-aliasing seams between neighbouring columns
        s.stroke_width = 0.5;
        s.cls = "cat-" + td.categories[k];
        s.tooltip = td.categories[k] + ": " + human_bytes(v);
        c.box(px0 + double(b) * 2, y1, double(e - b) * 2, y0 - y1, s);
      }
      for (size_t i = b; i < e; ++i)
        cum[i] += k < td.columns[i].by_category.size() ? td.columns[i].by_category[k] : 0;
      b = e;
    }
  }
  // Allocated and reserved as step lines.
  auto series = [&](auto get) {
    std::vector<Pt> pts;
    for (size_t b = 0; b < nb; ++b) {
      const double yy = std::round(bottom - double(get(td.columns[b])) * scale) + 0.5;
      const double xa = px0 + double(b) * 2, xb = xa + 2;
      if (pts.empty()) {
        pts.push_back({xa, yy});
      } else if (pts.back().y == yy) {
        pts.back().x = xb;
        continue;
      } else {
        pts.push_back({xa, yy});  // the vertical step from the previous level
      }
      pts.push_back({xb, yy});
    }
    return pts;
  };
  if (nb > 0) {
    c.line(series([](const TimelineColumn& col) { return col.reserved; }), "#555555", 1.3, true);
    c.line(series([](const TimelineColumn& col) { return col.allocated; }), "#111111", 1.0);
  }
  if (td.peak_event >= 0) {
    const double x = std::round(xs(td.peak_x)) + 0.5;
    draw_peak_marker(c, x, top, bottom,
                     "peak " + human_bytes(td.peak_requested) + " requested, " +
                         peak_words(td.peak_phase, td.peak_iteration),
                     px0, px1);
  }
  if (td.at_event >= -1) {
    // --at: the moment shown, a dotted line of its own with its label below the peak's.
    const double x = std::round(xs(td.at_x)) + 0.5;
    c.line({{x, top + 8}, {x, bottom}}, "#1f5fbf", 1.2, true);
    TextStyle ts;
    ts.size = 8.5;
    ts.color = "#1f5fbf";
    ts.bold = true;
    const std::string at_label = "the moment asked for (--at): " + human_bytes(td.at_requested) + " requested";
    const double w = detail::text_width(at_label, ts.size, true);
    ts.align = x + 4 + w <= px1 ? Align::Left : Align::Right;
    c.text(ts.align == Align::Left ? x + 4 : std::max(x - 4, px0 + w), top + 8, at_label, ts);
  }
  if (nb == 0) {
    TextStyle ns;
    ns.align = Align::Center;
    ns.color = kMutedInk;
    c.text((px0 + px1) / 2, (top + bottom) / 2, "no allocation history recorded: nothing to draw over time", ns);
  }
  return draw_x_axis(c, xs, bottom, td.time_axis, td.shared, td.iteration_marks);
}

}  // namespace

std::string timeline_dot(const std::vector<const ChartSeries*>& runs, const ChartOptions& o) {
  const ChartGeometry& geo = runs.front()->geometry;
  Canvas c(geo.width);
  const size_t buckets = geo.columns;
  int64_t ymax = 0;
  double v1 = 0;
  std::vector<std::string> cats;
  for (const ChartSeries* run : runs) {
    const TimelineData& td = run->timeline;
    ymax = std::max({ymax, td.peak_reserved, td.peak_allocated, td.peak_requested});
    for (const TimelineColumn& col : td.columns) ymax = std::max({ymax, col.reserved, col.allocated, col.requested});
    v1 = std::max(v1, td.x_max);
    for (size_t k = 0; k < td.categories.size(); ++k) {
      bool any = false;
      for (const TimelineColumn& col : td.columns)
        if (k < col.by_category.size() && col.by_category[k] != 0) any = true;
      if (any && std::find(cats.begin(), cats.end(), td.categories[k]) == cats.end()) cats.push_back(td.categories[k]);
    }
  }
  const ChartSeries& first = *runs.front();
  std::string title = o.title;
  const std::string devname = device_name(first);
  if (title.empty()) {
    title = runs.size() == 1 ? base_name(first.input) + " \xe2\x80\x94 memory over time (" + devname + ")"
                             : "Memory over time: A " + base_name(runs[0]->input) + " vs B " + base_name(runs[1]->input);
  }
  std::string sub = "Requested bytes by category, stacked (each column shows its highest moment); allocated and "
                    "reserved bytes as lines; phases shaded.";
  double y = draw_title(c, kMarginX, 14, title, sub);
  std::vector<LegendItem> legend;
  for (const std::string& k : cats) legend.push_back({category_color(k), k, "legend cat-" + k, "", false});
  legend.push_back({"", "allocated", "", "#111111", false});
  legend.push_back({"", "reserved", "", "#555555", true});
  legend.push_back({"", "the peak (requested)", "", kPeakColor, true});
  y = draw_legend(c, kMarginX, y, c.width - kMarginX, legend) + 6;
  const double plot_h = geo.plot_height;
  for (const ChartSeries* run : runs) {
    std::string label = runs.size() == 1 ? "" : run->label + ": " + base_name(run->input);
    y = draw_timeline_panel(c, run->timeline, label, y, plot_h, ymax, v1, buckets) + 8;
  }
  c.height = std::ceil(y + 6);
  std::string comment = "snapdiff timeline chart";
  for (const ChartSeries* run : runs) comment += "\n" + (run->label.empty() ? "" : run->label + ": ") + base_name(run->input);
  return c.to_dot(o.graph_id.empty() ? "timeline" : o.graph_id, comment);
}

}  // namespace snapdiff::detail
