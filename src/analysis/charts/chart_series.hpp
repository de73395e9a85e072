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
  double raw_lo = 0, raw_hi = 0;  // the device's own axis (lo, hi unless shared)
  // A shared axis (two-run charts): knot_event[i] sits at knot_x[i] (both
  // ascending); an event between two knots is placed linearly between them by
  // its own axis value (raw_at()). Empty: at() is raw_at().
  std::vector<int64_t> knot_event;
  std::vector<double> knot_x;
  SharedAxis shared = SharedAxis::None;
  std::vector<IterationMark> marks;
  double raw_at(int64_t event) const;
  double at(int64_t event) const;
};
// Picks time when every event of the device carries one (and they span > 0).
EventAxis event_axis(const Device& dev, ChartAxis want);

// Two runs' axes on one shared x (chart_align.cpp): iteration k's first
// event at the same x in both, 0..1. Events within a segment are placed by
// event index, or by time when `want` is Time and both runs have times.
void shared_axes(const Device& da, const Attribution& aa, const Device& db, const Attribution& ab, ChartAxis want,
                 EventAxis* out_a, EventAxis* out_b);

// The series on a given axis (nullptr: the device's own, event_axis()).
TimelineData timeline_data_on(const Analysis& r, const Trace& t, const ChartOptions& o, size_t buckets,
                              const EventAxis* axis);
LifetimeData lifetime_data_on(const Analysis& r, const Trace& t, const ChartOptions& o, size_t buckets,
                              double plot_height, const EventAxis* axis);

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
