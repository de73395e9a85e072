// snapdiff/analysis/chart_data.hpp — what the charts show, as plain data (analysis
// layer): the flame tree of the bytes live at the peak, the timeline's
// columns, the lifetime bands, and ChartSeries, which carries one of them
// with every name and number its drawing needs.
//
// The series are built from an Analysis and its Trace (frames are asked of
// Analysis::frames); the drawing (snapdiff/report/chart.hpp, report layer) reads only
// these structs. The tests check the series' totals against the report.
// Nothing here prints.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "snapdiff/analysis/attribution.hpp"

namespace snapdiff {

struct Analysis;

enum class ChartKind : uint8_t { Flame, Lifetime, Timeline };
const char* chart_kind_name(ChartKind k);
bool parse_chart_kind(std::string_view s, ChartKind* out);

enum class LifetimeGroup : uint8_t { Category, Site };
enum class ChartAxis : uint8_t { Auto, Time, Events };  // Auto: time when every event has one

// Caps that keep every picture a browser opens quickly, whatever the input.
constexpr size_t kMaxLifetimeBars = 5000;  // allocations drawn one by one
constexpr size_t kMaxFlameBoxes = 1500;    // frames drawn (narrower ones merge into "other")
constexpr size_t kLifetimeSiteBands = 12;  // --group site: sites drawn, the rest is one band

struct ChartOptions {
  ChartKind kind = ChartKind::Timeline;
  int device = -1;        // CUDA device index; -1: the report's peak device
  size_t top = 600;       // lifetime: allocations drawn one by one (at most kMaxLifetimeBars)
  LifetimeGroup group = LifetimeGroup::Category;
  ChartAxis axis = ChartAxis::Auto;
  double width = 1200;    // points (1/72 inch); PNG pixels are width * 96 / 72
  std::string title;      // drawing: "" = from the input's name and the chart kind
  std::string graph_id;   // drawing: SVG element ids are prefixed with it ("" = the kind's name)
};

// ---------------------------------------------------------------------------
// The layout the series are built for, in points. The data depends on it (a
// time chart has one column per 2 pt of its plot; a flame box narrower than
// 3 pt merges into "other"), so the drawing places its plots with the same
// numbers.
namespace chart_layout {
constexpr double kMarginX = 24;               // canvas edge to the title, legend and flame chart
constexpr double kPlotLeft = 72;              // canvas edge to a timeline's plot (room for y labels)
constexpr double kPlotRight = 24;             // plot to the canvas edge
constexpr double kLifetimeGutter = 150;       // lifetime: band names left of the plot
constexpr double kLifetimeSiteGutter = 250;   // ... with --group site
}  // namespace chart_layout

struct ChartGeometry {
  double width = 0;        // the canvas
  double plot_x0 = 0;      // the plot's left edge
  double plot_width = 0;   // flame: the root's width; time charts: columns * 2
  size_t columns = 0;      // time charts: x buckets of the full axis
  double plot_height = 0;  // lifetime: the bands' height in all
};
// For `runs` runs drawn in one chart (1, or 2: A above B).
ChartGeometry chart_geometry(const ChartOptions& o, size_t runs = 1);

// ---------------------------------------------------------------------------
// Flame chart of the bytes live at the peak: root = all of them, children =
// callers -> callees (frames outermost first).
struct FlameBox {
  std::string label;       // function or scope label ("layer 0-31" for grouped scopes)
  std::string location;    // "file.py:88" ("" for scope labels and unknown files)
  std::string full;        // the frame as the text report writes it (tooltips)
  int depth = 0;           // 0 = root
  int parent = -1;         // index into FlameGraph::boxes
  int64_t bytes = 0;       // requested bytes (diff: a + b)
  int64_t a = 0, b = 0;    // diff: bytes in A and in B
  uint64_t allocations = 0;
  std::vector<int64_t> by_category;  // requested bytes per category (single run)
  int category = -1;       // the category holding >= 90% of the bytes; -1: mixed
  uint32_t members = 1;    // frames merged into this box ("layer 0-31": 32)
  bool other = false;      // narrower siblings merged into one box
  uint32_t other_count = 0;
  double x = 0, w = 0;     // position and width as fractions of the root's width
};

struct FlameGraph {
  bool diff = false;
  std::vector<std::string> categories;  // names, indexable by FlameBox::category
  std::vector<int64_t> category_bytes;  // at the peak (single run)
  std::vector<FlameBox> boxes;          // depth-first, boxes[0] is the root
  int64_t total = 0;                    // the root: the peak's requested bytes (diff: a + b)
  int64_t total_a = 0, total_b = 0;
  int max_depth = 0;
};
FlameGraph flame_graph(const Analysis& r, const Trace& t, const ChartOptions& o);
FlameGraph flame_graph_diff(const Analysis& a, const Trace& ta, const Analysis& b, const Trace& tb, const ChartOptions& o);

// ---------------------------------------------------------------------------
// Timeline: requested bytes per category over time (stacked columns, one per
// x bucket, taken at the bucket's highest requested moment so no peak is
// lost), the allocated and reserved bytes as lines (each bucket's maximum).
struct TimelineColumn {
  double x0 = 0, x1 = 0;          // axis units (seconds from the first event, or event index)
  int64_t event = -1;             // the event whose state the column shows
  std::vector<int64_t> by_category;
  int64_t requested = 0, allocated = 0, reserved = 0;
};
struct PhaseBand {
  double x0 = 0, x1 = 0;
  Phase phase = Phase::Other;
  int iteration = 0;
};
// Two-run charts (chart_series_diff()): the x axis both runs share.
//   None: one run's own axis (time or event index);
//   Iterations: iteration k starts at the same x in both runs (x in 0..1);
//   Position: a run without iterations: each run's position from its first
//             event (0) to its last (1), both spanning the full width.
enum class SharedAxis : uint8_t { None, Iterations, Position };
struct IterationMark {
  double x = 0;       // where iteration `iteration` starts, on the shared axis
  int iteration = 0;
};
struct TimelineData {
  bool time_axis = true;  // false: event index (or a shared axis)
  double x_min = 0, x_max = 0;
  SharedAxis shared = SharedAxis::None;
  std::vector<IterationMark> iteration_marks;  // shared == Iterations
  std::vector<std::string> categories;
  std::vector<TimelineColumn> columns;
  std::vector<PhaseBand> phases;
  int64_t peak_requested = 0, peak_allocated = 0, peak_reserved = 0;
  double peak_x = 0;                 // where the requested peak is
  int64_t peak_event = -1;
  Phase peak_phase = Phase::Other;
  int peak_iteration = 0;
  std::vector<int64_t> peak_by_category;
  // --at: the moment marked (at_event -2: none; -1: before the first event).
  int64_t at_event = -2;
  double at_x = 0;
  int64_t at_requested = 0;
};
TimelineData timeline_data(const Analysis& r, const Trace& t, const ChartOptions& o, size_t buckets);

// ---------------------------------------------------------------------------
// Lifetime: allocations as bars from allocation to free, in bands (one per
// category or site), each band with its own byte scale. In each band the
// allocations covering the most bytes x time (among those tall enough to
// see) are drawn one by one (packed first-fit, bar height = bytes), the rest
// is summed per x bucket and drawn on top of them.
struct LifetimeBar {
  uint32_t allocation = 0;  // index into the device's Attribution::allocations
  double x0 = 0, x1 = 0;    // axis units
  int64_t offset = 0;       // bytes below it in its band (first-fit packing)
  int64_t bytes = 0;
  int category = 0;
  // When it was allocated and freed (tooltips): the event (-1: before the
  // recorded history; INT64_MAX: never freed), and its iteration and phase.
  int64_t alloc_event = -1, free_event = INT64_MAX;
  int alloc_iteration = 0, free_iteration = 0;
  Phase alloc_phase = Phase::Other, free_phase = Phase::Other;
  std::string site;         // "run (train.py:194) in _init_group (adam.py:178)"
};
struct LifetimeBand {
  std::string name;         // category, or site ("run (train.py:194)"); empty for the other sites' band
  uint64_t other_sites = 0;  // the band summing the sites not shown: how many (the report names it)
  std::string context;      // site: "in _init_group (adam.py:178)", "in fc1 <- layer *", "3 call paths"
  int category = 0;         // its color: the category holding the most bytes x time; -1: several sites
  std::vector<LifetimeBar> bars;
  std::vector<int64_t> rest;       // per bucket: the others' highest live bytes
  std::vector<int64_t> skyline;    // per bucket: top of the bars alive in it
  int64_t height = 0;              // bytes: max over buckets of skyline + rest (and of every bar's top)
  int64_t max_live = 0;            // bytes: the most live in the band at any moment
  uint64_t allocations = 0, rest_allocations = 0;
  int64_t peak_bytes = 0;          // live in this band at the requested peak
  // Its scale in a chart (chart_series*(); the same for A and B): points
  // tall, and the bytes at its top.
  double scale_points = 0;
  int64_t scale_bytes = 0;
};
struct LifetimeData {
  bool time_axis = true;
  double x_min = 0, x_max = 0;
  SharedAxis shared = SharedAxis::None;        // as TimelineData's
  std::vector<IterationMark> iteration_marks;
  size_t buckets = 0;
  std::vector<std::string> categories;
  std::vector<LifetimeBand> bands;
  std::vector<PhaseBand> phases;
  double peak_x = 0;
  int64_t peak_requested = 0;
  Phase peak_phase = Phase::Other;
  int peak_iteration = 0;
  size_t drawn = 0, aggregated = 0;  // allocations drawn one by one / summed
};
// `plot_height`: points the bands share; an allocation is drawn by itself
// only when its bar would be at least 1.5 pt tall in its band.
LifetimeData lifetime_data(const Analysis& r, const Trace& t, const ChartOptions& o, size_t buckets,
                           double plot_height = 440);
// The bands' heights in points: kept in proportion to the square root of
// their bytes, at least 30 pt each, `plot_height` in all (about).
std::vector<double> band_heights(const std::vector<int64_t>& max_bytes, double plot_height);

// ---------------------------------------------------------------------------
// One chart's data for the drawing: the kind's series (the other two stay
// empty) and the names and numbers of its titles.
struct ChartSeries {
  ChartKind kind = ChartKind::Timeline;
  std::string input;         // the input's file name, without directories
  std::string label;         // "" for one run, "A" / "B" for two
  int device = -1;           // the CUDA device shown; -1: none (the input has none, or not o.device)
  int64_t peak_event = -1;   // the device's requested peak (-1: no allocation history)
  int peak_iteration = 0;
  Phase peak_phase = Phase::Other;
  ChartGeometry geometry;    // the layout the series was built for
  FlameGraph flame;          // two runs: the differential graph, in A's series
  TimelineData timeline;
  LifetimeData lifetime;
};
ChartSeries chart_series(const Analysis& r, const Trace& t, const ChartOptions& o);

// Two runs drawn in one chart, built together: one shared x axis on which
// iteration k starts at the same x in both runs (SharedAxis::Iterations; a
// run without iterations: SharedAxis::Position, each run from 0 to 1), both
// runs spanning the full width, lifetime bands on the same scales, and for
// the flame chart the differential graph (in a.flame). docs/charts.md
// "Two runs" says how events are placed.
struct ChartSeriesPair {
  ChartSeries a, b;
};
ChartSeriesPair chart_series_diff(const Analysis& a, const Trace& ta, const Analysis& b, const Trace& tb,
                                  const ChartOptions& o);

}  // namespace snapdiff
