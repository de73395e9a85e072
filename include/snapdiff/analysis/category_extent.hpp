// snapdiff/analysis/category_extent.hpp — how far each category and each
// phase kind reaches over a whole run, not only at the run's peak.
//
// One sweep over a device's events (the attribution's allocations, each with
// its category, added where they are allocated and taken off where their free
// completes, as the requested counter does): per category its largest
// requested bytes over the run, per (phase kind, category) the largest within
// the spans of that kind, and per phase kind the peaks of the requested,
// allocated and reserved counters over its spans; each with where it happens
// (the first event that reaches it). O(events + allocations + spans).
//
// `snapdiff check --limit CATEGORY=SIZE` gates on the run-wide figure,
// `--limit PHASE:CATEGORY=SIZE` on a phase kind's (docs/cli.md).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "snapdiff/analysis/attribution.hpp"
#include "snapdiff/analysis/replay.hpp"

namespace snapdiff {

// A maximum and the first moment it is reached: right after event
// `event_index` (-1: the state before the first event, what the allocator
// held when the recording started).
struct ExtentAt {
  int64_t bytes = 0;
  int64_t event_index = -1;
  Phase phase = Phase::PreTrace;
  int iteration = 0;
};

struct PhaseExtent {
  uint32_t spans = 0;  // spans of this kind (0: the run has none; the figures below are zero)
  ExtentAt requested, allocated, reserved;  // the counters' peaks within them
  std::vector<ExtentAt> categories;         // per category (Attribution::categories), the largest within them
};

struct CategoryExtents {
  std::vector<ExtentAt> categories;  // per category, the largest over the whole run (the start state included)
  std::array<PhaseExtent, kPhaseCount> phases;  // by Phase; PreTrace has no spans
};

// The extents of one device, from its replay (the counters after every
// event) and its attribution (categories, phase spans).
CategoryExtents category_extents(const DeviceReplay& replay, const Attribution& attr);

}  // namespace snapdiff
