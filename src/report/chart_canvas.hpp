// Internal: a drawing surface that writes DOT with every element pinned, and
// the pieces the charts share (text metrics, axes, legends, phase bands).
// Coordinates are points (1/72 inch), origin top left, y downwards; the DOT
// writer flips them into Graphviz's y-up space.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "snapdiff/report/chart.hpp"
#include "report/format.hpp"
#include "snapdiff/model/frame_names.hpp"  // capped_for_display()

namespace snapdiff::detail {

constexpr const char* kChartFont = "Arial,Helvetica,sans-serif";
constexpr const char* kMixedColor = "#d0d0d0";  // flame boxes of several categories
constexpr const char* kInk = "#222222";         // text
constexpr const char* kMutedInk = "#666666";    // secondary text, axes
constexpr const char* kGridColor = "#dddddd";
constexpr const char* kPeakColor = "#c0392b";

enum class Align : uint8_t { Left, Center, Right };

struct BoxStyle {
  std::string fill = "#cccccc";
  std::string stroke;        // "" = none
  double stroke_width = 0;
  std::string label;         // drawn centered inside ("" = none)
  double font_size = 9;
  std::string font_color = kInk;
  std::string tooltip;
  std::string cls;           // SVG class
  bool dashed = false;
};

struct TextStyle {
  double size = 9;
  std::string color = kInk;
  Align align = Align::Left;
  bool bold = false;
};

struct Pt {
  double x = 0, y = 0;
};

class Canvas {
 public:
  explicit Canvas(double w) : width(w) {}
  double width;
  double height = 0;  // set before to_dot(); elements below it are cut off

  // Rectangle by its top-left corner and size. Graphviz draws node sizes in
  // whole points, so callers align edges to whole points for exact tiling.
  void box(double x, double y, double w, double h, const BoxStyle& s);
  // One line of text; y is its vertical center, x its left edge, center or
  // right edge by `align`.
  void text(double x, double y, std::string_view s, const TextStyle& st, std::string_view tooltip = {});
  // A polyline (straight segments).
  void line(const std::vector<Pt>& pts, std::string_view color, double pen, bool dashed = false);
  size_t elements() const { return items_.size(); }

  // The DOT graph: `layout=nop2`, a white background node spanning the canvas
  // (so the drawing is exactly width x height points), nodes then edges in
  // the order drawn.
  std::string to_dot(std::string_view graph_id, std::string_view comment) const;

 private:
  struct Item {
    enum Kind : uint8_t { Box, Text, Line } kind;
    double x, y, w, h;
    BoxStyle box;
    TextStyle text;
    std::string str, tooltip;
    std::vector<Pt> pts;
  };
  std::vector<Item> items_;
};

// Width of a line of text in Arial/Helvetica at `size` points (an estimate
// from the font's metrics: what Graphviz measures to a point or so).
double text_width(std::string_view s, double size, bool bold = false);
// `s` cut to `max_width` with an ellipsis; "" when not even three characters fit.
std::string fit_text(std::string_view s, double max_width, double size, bool bold = false);

// `color` mixed with white: 0 unchanged, 1 white.
std::string tint(std::string_view color, double amount);

// Axis labels.
std::string axis_bytes(int64_t bytes);  // "0", "512 MiB", "1.5 GiB"
std::string axis_seconds(double s, double step);  // "0 s", "1.5 s", "250 ms"

// Evenly spaced "nice" tick values from 0 to at least `max` (about `target`
// of them): 1, 2, 2.5 or 5 x a power of ten of the largest binary unit below max.
std::vector<int64_t> byte_ticks(int64_t max, int target);
std::vector<double> value_ticks(double lo, double hi, int target);

// x position of an axis value.
struct XScale {
  double v0 = 0, v1 = 1;   // axis units
  double px0 = 0, px1 = 1;  // points
  double operator()(double v) const {
    return v1 > v0 ? px0 + (v - v0) / (v1 - v0) * (px1 - px0) : px0;
  }
};

// "cuda:0", or "no device" when the series has none.
std::string device_name(const ChartSeries& s);

// The input's file name without directories (titles never show paths), as
// display_name shows it: it goes into titles, labels and the DOT's comment
// lines, where a line break must not start a line of its own.
std::string base_name(std::string_view path);

// Shared drawing: a title line and a subtitle; returns the y below them.
double draw_title(Canvas& c, double x, double y, const std::string& title, const std::string& subtitle);
// A legend row of swatches; wraps at the canvas width. Returns the y below it.
struct LegendItem {
  std::string color;  // "" = a line sample in `line_color`
  std::string label;
  std::string cls;
  std::string line_color;
  bool dashed = false;
};
double draw_legend(Canvas& c, double x, double y, double max_x, const std::vector<LegendItem>& items);
// Phase shading behind a plot, and the strip above it with iteration numbers
// and phase initials (F, B, O, ...) where there is room.
void draw_phase_bands(Canvas& c, const std::vector<PhaseBand>& bands, const XScale& xs, double top, double bottom);
double draw_phase_strip(Canvas& c, const std::vector<PhaseBand>& bands, const XScale& xs, double y);
// The x axis under a plot; returns the y below its labels.
double draw_x_axis(Canvas& c, const XScale& xs, double y, bool time_axis);
// Two runs' shared axis (SharedAxis::None: the above): "iteration 1, 2, ..."
// at the iterations' starts, or the position 0%..100% in each run.
double draw_x_axis(Canvas& c, const XScale& xs, double y, bool time_axis, SharedAxis shared,
                   const std::vector<IterationMark>& marks);
// Vertical peak marker with its label above the plot.
void draw_peak_marker(Canvas& c, double x, double top, double bottom, const std::string& label, double min_x,
                      double max_x);

// The charts (chart_timeline.cpp, chart_lifetime.cpp, chart_flame.cpp): one
// run, or two (A above B on the same scales; flame: the differential chart,
// whose graph is a.flame).
std::string timeline_dot(const std::vector<const ChartSeries*>& runs, const ChartOptions& o);
std::string lifetime_dot(const std::vector<const ChartSeries*>& runs, const ChartOptions& o);
std::string flame_dot(const ChartSeries& run, const ChartOptions& o);
std::string flame_diff_dot(const ChartSeries& a, const ChartSeries& b, const ChartOptions& o);

// Layout shared by the charts (the series are built for it).
using chart_layout::kMarginX;
using chart_layout::kPlotLeft;
using chart_layout::kPlotRight;

}  // namespace snapdiff::detail
