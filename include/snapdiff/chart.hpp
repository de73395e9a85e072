// snapdiff/chart.hpp — pictures of a Analysis: flame, lifetime and timeline
// charts drawn with Graphviz, and the self-contained HTML report.
//
// Every chart is first a plain data model (built from a Analysis and its
// Trace; the tests check its totals against the report), then a DOT graph in
// which every element sits at a pinned position (`layout=nop2`, i.e.
// `neato -n2`: nothing is laid out, Graphviz only draws), then SVG, PNG or
// PDF rendered in-process by Graphviz's libraries (libgvc/libcgraph).
// Layering: report layer; nothing here prints.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "snapdiff/attribution.hpp"
#include "snapdiff/diff.hpp"
#include "snapdiff/report.hpp"

namespace snapdiff {

// ---------------------------------------------------------------------------
// The palette: one color per category, used by every chart and the HTML
// report. Built-in categories have fixed colors; a category a rules file adds
// gets one from a second set, chosen by its name (so it is the same in every
// picture of every run).
std::string category_color(std::string_view category);
// Background shade of a phase in the time charts.
std::string phase_color(Phase p);
// The diverging scale of the differential flame chart: `change` in [-1, 1]
// is (B - A) / max(A, B); -1 gone (blue) ... 0 unchanged (gray) ... +1 new (red).
std::string change_color(double change);
// Black or white, whichever reads better on `background` ("#rrggbb").
std::string text_color_on(std::string_view background);

// ---------------------------------------------------------------------------
enum class ChartKind : uint8_t { Flame, Lifetime, Timeline };
const char* chart_kind_name(ChartKind k);
bool parse_chart_kind(std::string_view s, ChartKind* out);

enum class ChartFormat : uint8_t { Svg, Png, Pdf, Dot };
// From the file name's extension (case-insensitive): .svg .png .pdf .dot/.gv.
bool chart_format_from_path(std::string_view path, ChartFormat* out);

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
  std::string title;      // "" = from the input's name and the chart kind
  std::string graph_id;   // SVG element ids are prefixed with it ("" = the kind's name)
};

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
struct TimelineData {
  bool time_axis = true;  // false: event index
  double x_min = 0, x_max = 0;
  std::vector<std::string> categories;
  std::vector<TimelineColumn> columns;
  std::vector<PhaseBand> phases;
  int64_t peak_requested = 0, peak_allocated = 0, peak_reserved = 0;
  double peak_x = 0;                 // where the requested peak is
  int64_t peak_event = -1;
  Phase peak_phase = Phase::Other;
  int peak_iteration = 0;
  std::vector<int64_t> peak_by_category;
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
};
struct LifetimeBand {
  std::string name;         // category, or site ("run (train.py:194)")
  std::string context;      // site: "in _init_group (adam.py:178)", "in fc1 <- layer *", "3 call paths"
  int category = 0;         // its color: the category holding the most bytes x time; -1: several sites
  std::vector<LifetimeBar> bars;
  std::vector<int64_t> rest;       // per bucket: the others' highest live bytes
  std::vector<int64_t> skyline;    // per bucket: top of the bars alive in it
  int64_t height = 0;              // bytes: max over buckets of skyline + rest (and of every bar's top)
  int64_t max_live = 0;            // bytes: the most live in the band at any moment
  uint64_t allocations = 0, rest_allocations = 0;
  int64_t peak_bytes = 0;          // live in this band at the requested peak
};
struct LifetimeData {
  bool time_axis = true;
  double x_min = 0, x_max = 0;
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
// The DOT text of a chart: every element pinned (`layout=nop2`), so it renders
// as is with `neato -n2 -Tsvg` (or `dot -Tsvg`, which honours `layout`).
std::string chart_dot(const Analysis& r, const Trace& t, const ChartOptions& o);
// Two runs: flame -> the differential flame chart; lifetime and timeline ->
// A above B on the same scales.
std::string chart_dot_diff(const Analysis& a, const Trace& ta, const Analysis& b, const Trace& tb, const ChartOptions& o);

// Renders DOT with Graphviz (SVG, PNG at 96 dpi, PDF); ChartFormat::Dot
// returns the text unchanged. Throws std::runtime_error with Graphviz's
// message when it cannot.
std::string render_chart(const std::string& dot, ChartFormat f);

// ---------------------------------------------------------------------------
// One self-contained HTML page (no network: CSS, SVG and a few lines of
// JavaScript inline): the text report's content as tables, the explanation,
// and the timeline, flame and lifetime charts of each device.
// The pictures come from `charts`: the DOT of one chart of the run, for
// the kind, device and options asked.
using ChartSource = std::function<std::string(const ChartOptions&)>;
std::string render_html(const Report& r, const ChartSource& charts);
// The diff as HTML: peaks, findings, categories, phases, sites, the
// differential flame chart and both timelines on one scale.
// `charts` draws the two runs' charts (flame: the differential chart).
std::string render_diff_html(const Diff& d, const ChartSource& charts);

}  // namespace snapdiff
