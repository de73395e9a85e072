// The timeline chart: requested bytes by category over time (stacked), the
// allocated and reserved bytes as lines, the peak and the phases.
#include <algorithm>
#include <cmath>

#include "report/chart_canvas.hpp"

namespace snapdiff {

using namespace detail;

TimelineData timeline_data(const Analysis& r, const Trace& t, const ChartOptions& o, size_t buckets) {
  TimelineData td;
  const DeviceAnalysis* d = chart_device(r, o);
  if (!d) return td;
  const Device* dev = trace_device(t, d->device);
  td.categories = d->attr.categories;
  td.peak_requested = d->replay.peak_requested.bytes;
  td.peak_allocated = d->replay.peak_allocated.bytes;
  td.peak_reserved = d->replay.peak_reserved.bytes;
  td.peak_event = d->peak_index;
  td.peak_phase = d->peak_phase;
  td.peak_iteration = d->peak_iteration;
  td.peak_by_category = d->categories;
  if (!dev || dev->events.empty() || buckets == 0) return td;
  const EventAxis ax = event_axis(*dev, o.axis);
  td.time_axis = ax.time;
  td.x_min = ax.lo;
  td.x_max = ax.hi;
  td.peak_x = ax.at(d->peak_index);
  td.phases = phase_bands(d->attr, ax);

  const DeviceReplay& rp = d->replay;
  const size_t n = dev->events.size();
  const double span = ax.hi > ax.lo ? ax.hi - ax.lo : 1;
  auto bucket_of = [&](size_t e) {
    const double f = (ax.at(int64_t(e)) - ax.lo) / span;
    return std::min(buckets - 1, size_t(std::max(0.0, f * double(buckets))));
  };
  struct Acc {
    int64_t rep = -2, last = -2;  // -2: no event in the bucket
    int64_t alloc = 0, reserved = 0;
  };
  std::vector<Acc> acc(buckets);
  for (size_t e = 0; e < n; ++e) {
    Acc& a = acc[bucket_of(e)];
    if (a.rep == -2 || rp.requested[e] > rp.requested[size_t(a.rep)]) a.rep = int64_t(e);
    if (a.last == -2) {
      a.alloc = rp.allocated[e];
      a.reserved = rp.reserved[e];
    }
    a.alloc = std::max(a.alloc, rp.allocated[e]);
    a.reserved = std::max(a.reserved, rp.reserved[e]);
    a.last = int64_t(e);
  }
  // The peak's column shows the peak itself (time stamps can go backwards a
  // little across streams, so it is set explicitly).
  if (d->peak_index >= 0) {
    Acc& a = acc[bucket_of(size_t(d->peak_index))];
    a.rep = d->peak_index;
  }
  // Empty buckets carry the state after the last event before them.
  std::vector<int64_t> reps(buckets);
  int64_t carry = -1;
  for (size_t b = 0; b < buckets; ++b) {
    if (acc[b].rep == -2) {
      reps[b] = carry;
      acc[b].alloc = carry >= 0 ? rp.allocated[size_t(carry)] : rp.baseline.allocated;
      acc[b].reserved = carry >= 0 ? rp.reserved[size_t(carry)] : rp.baseline.reserved;
    } else {
      reps[b] = acc[b].rep;
      carry = acc[b].last;
    }
  }
  std::vector<std::vector<int64_t>> cats = d->attr.categories_at(reps);
  td.columns.resize(buckets);
  for (size_t b = 0; b < buckets; ++b) {
    TimelineColumn& c = td.columns[b];
    c.x0 = ax.lo + span * double(b) / double(buckets);
    c.x1 = ax.lo + span * double(b + 1) / double(buckets);
    c.event = reps[b];
    c.by_category = std::move(cats[b]);
    c.requested = reps[b] >= 0 ? rp.requested[size_t(reps[b])] : rp.baseline.requested;
    c.allocated = acc[b].alloc;
    c.reserved = acc[b].reserved;
  }
  return td;
}

namespace detail {

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
  if (nb == 0) {
    TextStyle ns;
    ns.align = Align::Center;
    ns.color = kMutedInk;
    c.text((px0 + px1) / 2, (top + bottom) / 2, "no allocation history recorded: nothing to draw over time", ns);
  }
  return draw_x_axis(c, xs, bottom, td.time_axis);
}

}  // namespace

std::string timeline_dot(const std::vector<ChartRun>& runs, const ChartOptions& o) {
  Canvas c(std::max(o.width, 400.0));
  const size_t buckets = size_t((c.width - kPlotLeft - kPlotRight) / 2);
  std::vector<TimelineData> data;
  ChartOptions oo = o;
  bool events_axis = o.axis == ChartAxis::Events;
  for (const ChartRun& run : runs) {
    data.push_back(timeline_data(*run.report, *run.trace, oo, buckets));
    if (!data.back().time_axis) events_axis = true;
  }
  if (events_axis && o.axis != ChartAxis::Events && runs.size() > 1) {  // one axis for both
    oo.axis = ChartAxis::Events;
    data.clear();
    for (const ChartRun& run : runs) data.push_back(timeline_data(*run.report, *run.trace, oo, buckets));
  }
  // Two runs share the x axis: the shorter one gets proportionally fewer
  // columns, so that it ends where its events end.
  if (data.size() > 1) {
    double hi = 0;
    for (const TimelineData& td : data) hi = std::max(hi, td.x_max - td.x_min);
    for (size_t i = 0; i < data.size(); ++i) {
      const size_t nb = size_t(std::max(1.0, std::round(double(buckets) * (data[i].x_max - data[i].x_min) / std::max(hi, 1e-12))));
      if (nb < buckets) data[i] = timeline_data(*runs[i].report, *runs[i].trace, oo, nb);
    }
  }
  int64_t ymax = 0;
  double v1 = 0;
  std::vector<bool> used;
  std::vector<std::string> cats;
  for (const TimelineData& td : data) {
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
  const ChartRun& first = runs.front();
  std::string title = o.title;
  const DeviceAnalysis* d0 = chart_device(*first.report, o);
  const std::string devname = d0 ? "cuda:" + std::to_string(d0->device) : "no device";
  if (title.empty()) {
    title = runs.size() == 1 ? base_name(first.report->input_name) + " \xe2\x80\x94 memory over time (" + devname + ")"
                             : "Memory over time: A " + base_name(runs[0].report->input_name) + " vs B " +
                                   base_name(runs[1].report->input_name);
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
  const double plot_h = runs.size() == 1 ? 330 : 250;
  for (size_t i = 0; i < data.size(); ++i) {
    std::string label = runs.size() == 1 ? "" : runs[i].label + ": " + base_name(runs[i].report->input_name);
    y = draw_timeline_panel(c, data[i], label, y, plot_h, ymax, v1, buckets) + 8;
  }
  c.height = std::ceil(y + 6);
  std::string comment = "snapdiff timeline chart";
  for (const ChartRun& run : runs) comment += "\n" + (run.label.empty() ? "" : run.label + ": ") + base_name(run.report->input_name);
  return c.to_dot(o.graph_id.empty() ? "timeline" : o.graph_id, comment);
}

}  // namespace detail

}  // namespace snapdiff
