// The timeline's series: requested bytes by category per x bucket (each at
// the bucket's highest requested moment), the allocated and reserved bytes,
// the peak and the phases.
#include <algorithm>

#include "analysis/charts/chart_series.hpp"

namespace snapdiff {

using namespace detail;

TimelineData timeline_data(const Analysis& r, const Trace& t, const ChartOptions& o, size_t buckets) {
  return timeline_data_on(r, t, o, buckets, nullptr);
}

namespace detail {

TimelineData timeline_data_on(const Analysis& r, const Trace& t, const ChartOptions& o, size_t buckets,
                              const EventAxis* axis) {
  TimelineData td;
  const DeviceAnalysis* d = chart_device(r, o);
  if (!d) return td;
  const Device* dev = t.find_device(d->device);
  td.categories = d->attr.categories;
  td.peak_requested = d->replay.peak_requested.bytes;
  td.peak_allocated = d->replay.peak_allocated.bytes;
  td.peak_reserved = d->replay.peak_reserved.bytes;
  td.peak_event = d->peak_index;
  td.peak_phase = d->peak_phase;
  td.peak_iteration = d->peak_iteration;
  td.peak_by_category = d->categories;
  if (!dev || dev->events.empty() || buckets == 0) return td;
  EventAxis ax = axis ? *axis : event_axis(*dev, o.axis);
  td.time_axis = ax.time && ax.shared == SharedAxis::None;
  td.shared = ax.shared;
  td.iteration_marks = ax.marks;
  td.x_min = ax.lo;
  td.x_max = ax.hi;
  // --window: the x range is the window's; events outside it are not drawn.
  size_t e_first = 0, e_last = dev->events.size() - 1;
  if (d->window) {
    e_first = size_t(std::max<int64_t>(d->window->first_event, 0));
    e_last = size_t(std::max<int64_t>(d->window->last_event, 0));
    ax.lo = ax.at(int64_t(e_first));
    ax.hi = std::max(ax.at(int64_t(e_last)), ax.lo + (ax.time ? 1e-6 : 1.0));
    td.x_min = ax.lo;
    td.x_max = ax.hi;
  }
  td.peak_x = ax.at(d->peak_index);
  td.phases = phase_bands(d->attr, ax);
  if (d->window) {
    std::vector<PhaseBand> kept;
    for (PhaseBand b : td.phases) {
      if (b.x1 < ax.lo || b.x0 > ax.hi) continue;
      b.x0 = std::max(b.x0, ax.lo);
      b.x1 = std::min(b.x1, ax.hi);
      kept.push_back(b);
    }
    td.phases = std::move(kept);
  }
  if (d->at) {
    td.at_event = d->at->event_index;
    td.at_x = std::clamp(ax.at(d->at->event_index), ax.lo, ax.hi);
    td.at_requested = d->at->counters.requested;
  }

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
  for (size_t e = e_first; e < n && e <= e_last; ++e) {
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

}  // namespace detail

}  // namespace snapdiff
