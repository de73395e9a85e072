// The chart series (include/snapdiff/analysis/chart_data.hpp): one entry for every
// kind, one run or two, and what the kinds' builders share.
#include "analysis/charts/chart_series.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

#include "snapdiff/model/frame_names.hpp"

namespace snapdiff {

namespace detail {

double EventAxis::at(int64_t e) const {
  if (knot_event.empty()) return raw_at(e);
  if (e < 0) return lo;
  if (e >= (dev ? int64_t(dev->events.size()) : 0)) return hi;
  // The segment holding e: the last knot at or before it.
  auto it = std::upper_bound(knot_event.begin(), knot_event.end(), e);
  if (it == knot_event.begin()) return knot_x.front();
  const size_t i = size_t(it - knot_event.begin()) - 1;
  if (i + 1 >= knot_event.size()) return knot_x.back();
  const double x0 = knot_x[i], x1 = knot_x[i + 1];
  const double r0 = raw_at(knot_event[i]), r1 = raw_at(knot_event[i + 1]), r = raw_at(e);
  double f = r1 > r0 ? (r - r0) / (r1 - r0)
                     : double(e - knot_event[i]) / double(std::max<int64_t>(knot_event[i + 1] - knot_event[i], 1));
  f = std::clamp(f, 0.0, 1.0);
  return x0 + f * (x1 - x0);
}

double EventAxis::raw_at(int64_t e) const {
  if (e < 0) return raw_lo;
  const int64_t n = dev ? int64_t(dev->events.size()) : 0;
  if (e >= n) return raw_hi;
  if (!time) return double(e);
  const int64_t t = dev->events[size_t(e)].time_us;
  if (t == kNoTime) return raw_lo;
  return std::clamp((double(t) - double(t0)) / 1e6, raw_lo, raw_hi);  // no int64 overflow at the extremes
}

EventAxis event_axis(const Device& dev, ChartAxis want) {
  EventAxis ax;
  ax.dev = &dev;
  const int64_t n = int64_t(dev.events.size());
  bool timed = want != ChartAxis::Events && n > 0;
  int64_t tmin = 0, tmax = 0;
  if (timed) {
    tmin = INT64_MAX;
    tmax = INT64_MIN;
    for (const Event& e : dev.events) {
      if (e.time_us == kNoTime) {
        timed = false;
        break;
      }
      tmin = std::min(tmin, e.time_us);
      tmax = std::max(tmax, e.time_us);
    }
    if (timed && tmax <= tmin) timed = false;
    // Auto: a time axis squeezes the run into a corner when one pause (CUDA
    // initialization, a compile, a checkpoint) takes a large part of it; the
    // event index spreads the allocations evenly instead.
    if (timed && want == ChartAxis::Auto) {
      // Distances as unsigned: exact, and no overflow between INT64_MIN and INT64_MAX.
      int64_t prev = dev.events.front().time_us;
      uint64_t gap = 0;
      for (const Event& e : dev.events) {
        if (e.time_us > prev) gap = std::max(gap, uint64_t(e.time_us) - uint64_t(prev));
        prev = std::max(prev, e.time_us);
      }
      if (double(gap) > 0.2 * double(uint64_t(tmax) - uint64_t(tmin))) timed = false;
    }
  }
  ax.time = timed;
  if (timed) {
    ax.t0 = tmin;
    ax.lo = 0;
    ax.hi = double(uint64_t(tmax) - uint64_t(tmin)) / 1e6;
  } else {
    ax.lo = 0;
    ax.hi = double(std::max<int64_t>(n - 1, 1));
  }
  ax.raw_lo = ax.lo;
  ax.raw_hi = ax.hi;
  return ax;
}

std::vector<PhaseBand> phase_bands(const Attribution& a, const EventAxis& ax) {
  std::vector<PhaseBand> out;
  for (size_t i = 0; i < a.spans.size(); ++i) {
    const PhaseSpan& s = a.spans[i];
    PhaseBand b;
    b.phase = s.phase;
    b.iteration = s.iteration;
    b.x0 = i == 0 ? ax.lo : ax.at(s.start_event);
    b.x1 = i + 1 < a.spans.size() ? ax.at(a.spans[i + 1].start_event) : ax.hi;
    if (b.x1 < b.x0) b.x1 = b.x0;
    out.push_back(b);
  }
  return out;
}

const DeviceAnalysis* chart_device(const Analysis& r, const ChartOptions& o) {
  if (r.devices.empty()) return nullptr;
  if (o.device < 0) return &r.devices[r.peak_device];
  for (const DeviceAnalysis& d : r.devices)
    if (d.device == o.device) return &d;
  return nullptr;
}

double flame_plot_width(const ChartOptions& o) {
  return std::max(o.width, 400.0) - 2 * chart_layout::kMarginX;
}

const FrameTable& chart_frames(const Analysis& r, const Trace& t) {
  if (!r.frames || &r.frames->trace() != &t)
    throw std::logic_error("chart: the analysis's frame table is not the trace's (use analyze() on that trace)");
  return *r.frames;
}

SiteName site_name(const FrameTable& frames, StackId stack) {
  SiteName s;
  if (stack == 0) {
    s.key = s.title = "<no stack recorded>";
    return s;
  }
  const Trace& t = frames.trace();
  auto name = [&](StackId x) { return t.strings.get(t.frames[t.stacks.node(x).frame].name); };
  if (frames.scope(t.stacks.node(stack).frame)) {
    s.title = numbers_as_stars(name(stack));
    int n = 0;
    for (StackId x = t.stacks.node(stack).parent; x != 0 && n < 2; x = t.stacks.node(x).parent, ++n)
      s.context += (n ? " \xe2\x86\x90 " : "in ") + numbers_as_stars(name(x));
    s.key = "S\x1f" + s.title;
    return s;
  }
  s.title = frames.short_label(frames.user_frame(stack));
  const FrameId callee = frames.python_callee(stack);
  if (callee != kNoFrame) s.context = "in " + frames.short_label(callee);
  s.key = "F\x1f" + s.title + "\x1f" + s.context;
  return s;
}

std::string site_label(const FrameTable& frames, StackId stack) {
  const SiteName s = site_name(frames, stack);
  return s.context.empty() ? s.title : s.title + " " + s.context;
}

}  // namespace detail

using namespace detail;
using namespace chart_layout;

const char* chart_kind_name(ChartKind k) {
  switch (k) {
    case ChartKind::Flame: return "flame";
    case ChartKind::Lifetime: return "lifetime";
    case ChartKind::Timeline: return "timeline";
  }
  return "?";
}

bool parse_chart_kind(std::string_view s, ChartKind* out) {
  for (ChartKind k : {ChartKind::Flame, ChartKind::Lifetime, ChartKind::Timeline})
    if (s == chart_kind_name(k)) {
      *out = k;
      return true;
    }
  return false;
}

ChartGeometry chart_geometry(const ChartOptions& o, size_t runs) {
  ChartGeometry g;
  switch (o.kind) {
    case ChartKind::Flame:
      g.width = std::max(o.width, 400.0);
      g.plot_x0 = kMarginX;
      g.plot_width = flame_plot_width(o);
      break;
    case ChartKind::Timeline:
      g.width = std::max(o.width, 400.0);
      g.plot_x0 = kPlotLeft;
      g.columns = size_t((g.width - kPlotLeft - kPlotRight) / 2);
      g.plot_width = double(g.columns) * 2;
      g.plot_height = runs == 1 ? 330 : 250;
      break;
    case ChartKind::Lifetime: {
      g.width = std::max(o.width, 500.0);
      const double gutter = o.group == LifetimeGroup::Site ? kLifetimeSiteGutter : kLifetimeGutter;
      g.plot_x0 = kMarginX + gutter;
      g.columns = size_t((g.width - kMarginX - gutter - kPlotRight) / 2);
      g.plot_width = double(g.columns) * 2;
      g.plot_height = runs == 1 ? 440 : 300;
      break;
    }
  }
  return g;
}

namespace {

ChartSeries series_of(const Analysis& r, const ChartOptions& o, std::string label, size_t runs) {
  ChartSeries s;
  s.kind = o.kind;
  s.input = r.input_name;
  s.label = std::move(label);
  s.geometry = chart_geometry(o, runs);
  if (const DeviceAnalysis* d = chart_device(r, o)) {
    s.device = d->device;
    s.peak_event = d->peak_index;
    s.peak_iteration = d->peak_iteration;
    s.peak_phase = d->peak_phase;
  }
  return s;
}

// A band's identity across runs: its name; the other sites' band, by how
// many sites it sums (as the report names it).
std::string band_key(const LifetimeBand& b) {
  return b.other_sites > 0 ? "\x1fother sites\x1f" + std::to_string(b.other_sites) : b.name;
}

// One scale per band name, shared by every run of the chart: the bytes at its
// top (the most any run holds there) and its height (band_heights()).
void share_band_scales(const std::vector<LifetimeData*>& runs, double plot_height) {
  std::vector<std::string> names;  // in order of appearance
  std::map<std::string, int64_t> top;
  for (const LifetimeData* ld : runs)
    for (const LifetimeBand& b : ld->bands) {
      auto [it, added] = top.emplace(band_key(b), std::max(b.height, b.max_live));
      if (added) names.push_back(band_key(b));
      else it->second = std::max({it->second, b.height, b.max_live});
    }
  std::vector<int64_t> maxes;
  for (const std::string& n : names) maxes.push_back(top[n]);
  const std::vector<double> h = band_heights(maxes, plot_height);
  std::map<std::string, double> points;
  for (size_t i = 0; i < names.size(); ++i) points[names[i]] = h[i];
  for (LifetimeData* ld : runs)
    for (LifetimeBand& b : ld->bands) {
      b.scale_points = points[band_key(b)];
      b.scale_bytes = top[band_key(b)];
    }
}

// Two runs on one shared x axis (shared_axes(): iterations aligned, or each
// run's position 0..1 when either has none), both spanning the full width.
// Without an allocation history in either run each keeps its own axis.
// `build(run, options, axis)` makes the data of run 0 (A) or 1 (B).
template <class Data, class Build>
void on_shared_axis(Data& a, Data& b, const Analysis& ra, const Trace& ta, const Analysis& rb, const Trace& tb,
                    const ChartOptions& o, const Build& build) {
  const DeviceAnalysis* d[2] = {chart_device(ra, o), chart_device(rb, o)};
  const Device* dev[2] = {d[0] ? ta.find_device(d[0]->device) : nullptr, d[1] ? tb.find_device(d[1]->device) : nullptr};
  if (!dev[0] || !dev[1] || dev[0]->events.empty() || dev[1]->events.empty()) {
    a = build(0, nullptr);
    b = build(1, nullptr);
    return;
  }
  EventAxis ax[2];
  shared_axes(*dev[0], d[0]->attr, *dev[1], d[1]->attr, o.axis, &ax[0], &ax[1]);
  a = build(0, &ax[0]);
  b = build(1, &ax[1]);
}

}  // namespace

ChartSeries chart_series(const Analysis& r, const Trace& t, const ChartOptions& o) {
  ChartSeries s = series_of(r, o, "", 1);
  switch (o.kind) {
    case ChartKind::Flame: s.flame = flame_graph(r, t, o); break;
    case ChartKind::Timeline: s.timeline = timeline_data(r, t, o, s.geometry.columns); break;
    case ChartKind::Lifetime:
      s.lifetime = lifetime_data(r, t, o, s.geometry.columns, s.geometry.plot_height);
      share_band_scales({&s.lifetime}, s.geometry.plot_height);
      break;
  }
  return s;
}

ChartSeriesPair chart_series_diff(const Analysis& ra, const Trace& ta, const Analysis& rb, const Trace& tb,
                                  const ChartOptions& o) {
  ChartSeriesPair p{series_of(ra, o, "A", 2), series_of(rb, o, "B", 2)};
  const size_t columns = p.a.geometry.columns;
  const double plot_h = p.a.geometry.plot_height;
  switch (o.kind) {
    case ChartKind::Flame: p.a.flame = flame_graph_diff(ra, ta, rb, tb, o); break;
    case ChartKind::Timeline:
      on_shared_axis(p.a.timeline, p.b.timeline, ra, ta, rb, tb, o, [&](int run, const EventAxis* ax) {
        return run == 0 ? timeline_data_on(ra, ta, o, columns, ax) : timeline_data_on(rb, tb, o, columns, ax);
      });
      break;
    case ChartKind::Lifetime:
      on_shared_axis(p.a.lifetime, p.b.lifetime, ra, ta, rb, tb, o, [&](int run, const EventAxis* ax) {
        return run == 0 ? lifetime_data_on(ra, ta, o, columns, plot_h, ax)
                        : lifetime_data_on(rb, tb, o, columns, plot_h, ax);
      });
      share_band_scales({&p.a.lifetime, &p.b.lifetime}, plot_h);
      break;
  }
  return p;
}

}  // namespace snapdiff
