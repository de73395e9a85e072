// snapdiff/report/chart.hpp — pictures of an analysis: flame, lifetime and timeline
// charts drawn with Graphviz, and the self-contained HTML report.
//
// Every chart is first its series (snapdiff/analysis/chart_data.hpp, built in the
// analysis layer from an Analysis and its Trace), then a DOT graph drawn from
// the series alone, in which every element sits at a pinned position
// (`layout=nop2`, i.e. `neato -n2`: nothing is laid out, Graphviz only
// draws), then SVG, PNG or PDF rendered in-process by Graphviz's libraries
// (libgvc/libcgraph).
// Layering: report layer; nothing here prints.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "snapdiff/analysis/chart_data.hpp"
#include "snapdiff/analysis/diff.hpp"
#include "snapdiff/report/report.hpp"

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
enum class ChartFormat : uint8_t { Svg, Png, Pdf, Dot };
// From the file name's extension (case-insensitive): .svg .png .pdf .dot/.gv.
bool chart_format_from_path(std::string_view path, ChartFormat* out);

// ---------------------------------------------------------------------------
// The DOT text of a chart, drawn from its series (chart_series()) alone:
// every element pinned (`layout=nop2`), so it renders as is with
// `neato -n2 -Tsvg` (or `dot -Tsvg`, which honours `layout`). `o` gives the
// title and the SVG ids.
std::string chart_dot(const ChartSeries& s, const ChartOptions& o);
// Two runs (chart_series_diff()): flame -> the differential flame chart;
// lifetime and timeline -> A above B on the same scales.
std::string chart_dot_diff(const ChartSeriesPair& runs, const ChartOptions& o);

// Renders DOT with Graphviz (SVG, PNG at 96 dpi, PDF); ChartFormat::Dot
// returns the text unchanged. Throws std::runtime_error with Graphviz's
// message when it cannot.
std::string render_chart(const std::string& dot, ChartFormat f);

// ---------------------------------------------------------------------------
// One self-contained HTML page (no network: CSS, SVG and a few lines of
// JavaScript inline): the text report's content as tables, the explanation,
// and the timeline, flame and lifetime charts of each device.
// The pictures are drawn from series the analysis builds on request
// (chart_series(), chart_series_diff() in snapdiff/analysis/chart_data.hpp): `charts`
// gives the series of one chart, for the kind, device and options asked.
using ChartSeriesSource = std::function<ChartSeries(const ChartOptions&)>;
// `explorer`: explorer_data()'s output (snapdiff/report/explorer.hpp) for the
// interactive explorer above the sections; "" for the static page alone.
std::string render_html(const Report& r, const ChartSeriesSource& charts, const std::string& explorer = "");
// The diff as HTML: peaks, findings, categories, phases, sites, the
// differential flame chart and both timelines on one scale; `charts` gives
// the two runs' series (flame: the differential graph).
using ChartSeriesPairSource = std::function<ChartSeriesPair(const ChartOptions&)>;
std::string render_diff_html(const Diff& d, const ChartSeriesPairSource& charts, const std::string& explorer = "");

}  // namespace snapdiff
