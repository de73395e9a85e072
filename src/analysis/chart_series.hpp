// Internal: what the chart series builders (chart_series*.cpp) share: the x
// axis of a device's events, its phase bands, the device a chart shows and
// how a site is named.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "snapdiff/analysis/analysis.hpp"
#include "snapdiff/analysis/chart_data.hpp"

namespace snapdiff::detail {

// The axis value of an event: seconds from the first timed event, or the
// event index. Events before the history are at lo, "never freed" at hi.
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
// when the report has no such device.
const DeviceAnalysis* chart_device(const Analysis& r, const ChartOptions& o);

// The flame chart's root width in points (chart_geometry()'s plot_width).
double flame_plot_width(const ChartOptions& o);

// The analysis's FrameTable, which must be the table of `t` (analyze() makes
// it); throws std::logic_error when it is not.
const FrameTable& chart_frames(const Analysis& r, const Trace& t);

// A site: `title` names the user frame ("run (train.py:194)") or the
// innermost scope label, generalized ("transpose_weight_fp8"); `context` the
// Python function it called ("in _init_group (adam.py:178)") or the enclosing
// scopes ("in fc1 <- layer *"). `key` groups stacks into sites: the title and
// context, or for scopes the title alone (every call path of
// "transpose_weight_fp8" is one site).
struct SiteName {
  std::string key, title, context;
};
SiteName site_name(const FrameTable& frames, StackId stack);
// "title context" in one line (tooltips).
std::string site_label(const FrameTable& frames, StackId stack);

}  // namespace snapdiff::detail
