// The flame (icicle) chart of the bytes live at the peak, by call stack, and
// its differential form for two runs.
#include <algorithm>
#include <cmath>

#include "report/chart_canvas.hpp"

namespace snapdiff::detail {

namespace {

constexpr double kRow = 17;

double change_of(const FlameBox& b) {
  const int64_t m = std::max(b.a, b.b);
  return m > 0 ? double(b.b - b.a) / double(m) : 0.0;
}

std::string breakdown(const FlameGraph& g, const FlameBox& b) {
  std::vector<std::pair<int64_t, size_t>> parts;
  for (size_t k = 0; k < b.by_category.size(); ++k)
    if (b.by_category[k] > 0) parts.push_back({b.by_category[k], k});
  std::sort(parts.rbegin(), parts.rend());
  std::string s;
  for (const auto& p : parts) s += "\n  " + g.categories[p.second] + " " + human_bytes(p.first);
  return s;
}

// Draws the boxes of a laid-out flame graph; returns the y below them.
double draw_boxes(Canvas& c, const FlameGraph& g, double x0, double pw, double y) {
  const double total = double(std::max<int64_t>(g.total, 1));
  for (const FlameBox& b : g.boxes) {
    const double bx0 = std::round(x0 + b.x * pw), bx1 = std::round(x0 + (b.x + b.w) * pw);
    if (bx1 - bx0 < 1) continue;
    const double by = y + b.depth * kRow;
    BoxStyle s;
    std::string bytes_text;
    if (g.diff) {
      s.fill = b.depth == 0 ? kMixedColor : change_color(change_of(b));
      const int64_t delta = b.b - b.a;
      bytes_text = b.a == 0 ? "new " + human_bytes(b.b) : b.b == 0 ? "gone " + human_bytes(b.a) : human_delta(delta);
      s.tooltip = (b.full.empty() ? b.label : b.full) + "\nA " + human_bytes(b.a) + " -> B " + human_bytes(b.b) + " (" +
                  human_delta(delta) + ")";
      if (b.depth > 0) s.cls = b.a == 0 ? "new" : b.b == 0 ? "gone" : delta > 0 ? "grew" : delta < 0 ? "shrank" : "same";
    } else {
      s.fill = b.category >= 0 ? category_color(g.categories[size_t(b.category)]) : kMixedColor;
      if (b.other && b.category < 0) s.fill = "#e6e6e6";
      if (b.category >= 0) s.cls = "cat-" + g.categories[size_t(b.category)];
      bytes_text = human_bytes(b.bytes);
      s.tooltip = (b.full.empty() ? b.label : b.full) + "\n" + human_bytes(b.bytes) + " (" +
                  compact_percent(double(b.bytes) / total) + " of the peak), " + with_commas(b.allocations) +
                  (b.allocations == 1 ? " allocation" : " allocations") + breakdown(g, b);
    }
    s.stroke = "#ffffff";
    s.stroke_width = 0.8;
    s.font_color = text_color_on(s.fill);
    const double avail = bx1 - bx0 - 6;
    std::string label;
    if (b.depth == 0) {
      label = g.diff ? "A " + human_bytes(g.total_a) + " \xe2\x86\x92 B " + human_bytes(g.total_b) + "  (" +
                           human_delta(g.total_b - g.total_a) + ")"
                     : "all memory live at the peak: " + human_bytes(g.total) + " requested (" +
                           with_commas(uint64_t(g.total)) + " B)";
      if (g.diff) s.tooltip = "all memory live at each run's peak\n" + label;
    } else {
      // Fitted as it will be drawn: a control byte in a name is drawn as its escape.
      const std::string name = display_name(b.label);
      const std::string loc = b.location.empty() ? "" : " (" + display_name(b.location) + ")";
      for (const std::string& cand : {name + loc + "  " + bytes_text, name + "  " + bytes_text, name}) {
        if (text_width(cand, 9) <= avail) {
          label = cand;
          break;
        }
      }
      if (label.empty()) label = fit_text(name, avail, 9);
    }
    s.label = label;
    c.box(bx0, by, bx1 - bx0, kRow - 1, s);
    // A box of several categories: their shares as a strip along its bottom.
    if (!g.diff && b.category < 0 && b.depth > 0 && bx1 - bx0 >= 12 && b.bytes > 0) {
      double cx = bx0;
      int64_t cum = 0;
      for (size_t k = 0; k < b.by_category.size(); ++k) {
        if (b.by_category[k] <= 0) continue;
        cum += b.by_category[k];
        const double nx = std::round(bx0 + double(cum) / double(b.bytes) * (bx1 - bx0));
        if (nx - cx >= 1) {
          BoxStyle st;
          st.fill = category_color(g.categories[k]);
          st.cls = "cat-" + g.categories[k];
          c.box(cx, by + kRow - 4, nx - cx, 3, st);
        }
        cx = nx;
      }
    }
  }
  return y + (g.max_depth + 1) * kRow;
}

double draw_byte_axis(Canvas& c, int64_t total, double x0, double pw, double y, const std::string& what) {
  BoxStyle axis;
  axis.fill = "#999999";
  c.box(x0, y, pw, 1, axis);
  TextStyle ts;
  ts.size = 8.5;
  ts.color = kMutedInk;
  ts.align = Align::Center;
  const std::vector<int64_t> ticks = byte_ticks(total, std::max(2, int(pw / 110)));
  for (int64_t v : ticks) {
    if (v > total) break;
    const double x = std::round(x0 + double(v) / double(std::max<int64_t>(total, 1)) * pw);
    c.box(std::min(x, x0 + pw - 1), y + 1, 1, 4, axis);
    c.text(x, y + 12, axis_bytes(v), ts);
  }
  ts.align = Align::Right;
  c.text(x0 + pw, y + 25, what, ts);
  return y + 32;
}

}  // namespace

std::string flame_dot(const ChartSeries& run, const ChartOptions& o) {
  Canvas c(run.geometry.width);
  const FlameGraph& g = run.flame;
  std::string title = o.title.empty() ? base_name(run.input) + " \xe2\x80\x94 bytes live at the peak, by call stack (" +
                                            device_name(run) + ")"
                                      : o.title;
  std::string sub;
  if (run.device >= 0 && run.peak_event >= 0)
    sub = human_bytes(g.total) + " requested at event " + with_commas(uint64_t(run.peak_event)) +
          (run.peak_iteration > 0 ? ", iteration " + std::to_string(run.peak_iteration) : "") + ", " +
          phase_name(run.peak_phase) +
          ". Width = bytes; callers above callees; color = category (gray: several, their shares along the bottom).";
  else
    sub = "No peak: the snapshot has no allocation history.";
  double y = draw_title(c, kMarginX, 14, title, sub);
  std::vector<LegendItem> legend;
  bool mixed = false;
  for (const FlameBox& b : g.boxes)
    if (b.depth > 0 && b.category < 0) mixed = true;
  for (size_t k = 0; k < g.categories.size(); ++k)
    if (k < g.category_bytes.size() && g.category_bytes[k] != 0)
      legend.push_back({category_color(g.categories[k]), g.categories[k] + " " + human_bytes(g.category_bytes[k]),
                        "legend cat-" + g.categories[k], "", false});
  if (mixed) legend.push_back({kMixedColor, "several categories", "legend", "", false});
  y = draw_legend(c, kMarginX, y, c.width - kMarginX, legend) + 8;
  const double pw = run.geometry.plot_width;
  if (g.total <= 0) {
    TextStyle ns;
    ns.color = kMutedInk;
    c.text(kMarginX, y + 10, "nothing is live at the peak", ns);
    y += 30;
  } else {
    y = draw_boxes(c, g, kMarginX, pw, y) + 4;
    y = draw_byte_axis(c, g.total, kMarginX, pw, y, "bytes live at the peak (requested)");
  }
  c.height = std::ceil(y + 6);
  return c.to_dot(o.graph_id.empty() ? "flame" : o.graph_id, "snapdiff flame chart\n" + base_name(run.input));
}

std::string flame_diff_dot(const ChartSeries& a, const ChartSeries& b, const ChartOptions& o) {
  Canvas c(a.geometry.width);
  const FlameGraph& g = a.flame;
  std::string title =
      o.title.empty() ? "What changed at the peak: A " + base_name(a.input) + " vs B " + base_name(b.input) : o.title;
  const std::string sub =
      "Bytes live at each run's peak by call stack (frames matched by function and file). Width = A + B bytes, so what "
      "exists in one run only still shows; color = change from A to B.";
  double y = draw_title(c, kMarginX, 14, title, sub);
  std::vector<LegendItem> legend{{change_color(-1), "gone (only in A)", "legend", "", false},
                                 {change_color(-0.5), "shrank 50%", "legend", "", false},
                                 {change_color(0), "unchanged", "legend", "", false},
                                 {change_color(0.5), "grew 2x", "legend", "", false},
                                 {change_color(1), "new (only in B)", "legend", "", false}};
  y = draw_legend(c, kMarginX, y, c.width - kMarginX, legend) + 8;
  const double pw = a.geometry.plot_width;
  if (g.total <= 0) {
    TextStyle ns;
    ns.color = kMutedInk;
    c.text(kMarginX, y + 10, "nothing is live at either peak", ns);
    y += 30;
  } else {
    y = draw_boxes(c, g, kMarginX, pw, y) + 4;
    y = draw_byte_axis(c, g.total, kMarginX, pw, y, "bytes live at the peaks, A + B (requested)");
  }
  c.height = std::ceil(y + 6);
  return c.to_dot(o.graph_id.empty() ? "flame" : o.graph_id,
                  "snapdiff differential flame chart\nA: " + base_name(a.input) + "\nB: " + base_name(b.input));
}

}  // namespace snapdiff::detail
