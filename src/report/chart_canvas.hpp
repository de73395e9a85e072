// Internal: a drawing surface that writes DOT with every element pinned, and
// the pieces the charts share (text metrics, axes, legends, phase bands).
// Coordinates are points (1/72 inch), origin top left, y downwards; the DOT
// writer flips them into Graphviz's y-up space.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "snapdiff/chart.hpp"
#include "snapdiff/frame_names.hpp"  // with_commas()

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

// Scope labels (snapcapture's frames, file "snapcapture") carry iteration,
// layer and parameter numbers, generalized with numbers_as_stars()
// (analysis/frame_names.hpp).
bool is_scope_frame(const Trace& t, FrameId f);
// A site: `title` names the innermost user frame ("run (train.py:194)") or
// the innermost scope label, generalized ("transpose_weight_fp8");
// `context` the library function it called ("in _init_group (adam.py:178)")
// or the enclosing scopes ("in fc1 <- layer *"). `key` groups stacks into
// sites: the title and context, or for scopes the title alone (every call
// path of "transpose_weight_fp8" is one site).
struct SiteName {
  std::string key, title, context;
};
SiteName site_name(const Trace& t, StackId stack);
// "title context" in one line (tooltips).
std::string site_label(const Trace& t, StackId stack);
// A native frame's function without namespaces beyond the last two
// components, template arguments or parameters ("Class::method<…>").
std::string short_native(const Trace& t, FrameId f);
// "function (file.py:88)": the file without its directories.
std::string short_frame(const Trace& t, FrameId f);

// Axis labels.
std::string axis_bytes(int64_t bytes);  // "0", "512 MiB", "1.5 GiB"
std::string axis_seconds(double s, double step);  // "0 s", "1.5 s", "250 ms"
std::string percent(double share);  // "12.5%"

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

// The axis value of an event: seconds from the first timed event, or the
// event index. Events before the history are at v0, "never freed" at v1.
struct EventAxis {
  bool time = true;
  const Device* dev = nullptr;
  int64_t t0 = 0;  // first event's time_us
  double lo = 0, hi = 0;
  double at(int64_t event) const;
};
// Picks time when every event of the device carries one (and they span > 0).
EventAxis event_axis(const Device& dev, ChartAxis want);

// Phase spans as bands on the axis.
std::vector<PhaseBand> phase_bands(const Attribution& a, const EventAxis& ax);

// The device a chart shows: o.device, or the report's peak device. nullptr
// when the report has no device.
const DeviceAnalysis* chart_device(const Analysis& r, const ChartOptions& o);
const Device* trace_device(const Trace& t, int index);

// The input's file name without directories (titles never show paths).
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
// Vertical peak marker with its label above the plot.
void draw_peak_marker(Canvas& c, double x, double top, double bottom, const std::string& label, double min_x,
                      double max_x);

// The charts (chart_timeline.cpp, chart_lifetime.cpp, chart_flame.cpp): one
// run, or two (A above B on the same scales; flame: the differential chart).
struct ChartRun {
  const Analysis* report = nullptr;
  const Trace* trace = nullptr;
  std::string label;  // "" for one run, "A" / "B" for two
};
std::string timeline_dot(const std::vector<ChartRun>& runs, const ChartOptions& o);
std::string lifetime_dot(const std::vector<ChartRun>& runs, const ChartOptions& o);
std::string flame_dot(const ChartRun& run, const ChartOptions& o);
std::string flame_diff_dot(const ChartRun& a, const ChartRun& b, const ChartOptions& o);

// Layout shared by the time charts.
constexpr double kMarginX = 24;      // canvas edge to the title, legend
constexpr double kPlotLeft = 72;     // canvas edge to the plot (room for y labels)
constexpr double kPlotRight = 24;    // plot to the canvas edge

}  // namespace snapdiff::detail
