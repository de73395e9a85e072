// snapdiff/view/joins.hpp — what joining a profiler trace or a kernel recording into a snapshot did
// (snapdiff/analysis/trace_join.hpp, snapdiff/analysis/kernel_join.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "snapdiff/model/model.hpp"

namespace snapdiff {

// How a snapshot's allocations were matched to a trace's (per device).
struct TraceJoinDevice {
  int device = 0;
  uint64_t trace_allocs = 0;        // allocations in the trace
  uint64_t snapshot_allocs = 0;     // allocations in the snapshot
  uint64_t in_window = 0;           // snapshot allocations inside the trace's time window (0 when unknown)
  uint64_t matched = 0;             // snapshot allocations tied to a trace allocation
  uint64_t with_op = 0;             // of them, made inside an op (they gained its frames)
  std::string method;               // "time" or "address-order" (no usable time offset)
  double offset_us = 0;             // snapshot time_us - trace time (median over address matches)
  double offset_spread_us = 0;      // half the interquartile range of those differences
};
struct TraceJoin {
  std::string trace_name;
  std::vector<TraceJoinDevice> devices;
  uint64_t ops = 0, kernels = 0;
};

// What join_kernel_recording() did. Empty (recording_name "") when nothing
// was joined.
struct KernelJoin {
  std::string recording_name;
  uint32_t pid = 0;                 // the process of the recording joined
  uint64_t processes = 0;           // processes the recording holds
  uint64_t segment_events = 0;      // the snapshot's segment_alloc / segment_map events
  uint64_t matched_segments = 0;    // of them, tied to the process's driver allocations (or mappings)
  uint64_t dump_segments = 0;       // segments at dump time
  uint64_t dump_segments_found = 0; // of them, at an address the process allocated and had not freed
  bool offset_measured = false;     // false: no matched pair, the times are taken as they are
  double offset_us = 0;             // snapshot time_us - recording time (median over matched pairs)
  double offset_spread_us = 0;      // half the interquartile range of those differences
  uint64_t kernels = 0, driver_memory_events = 0, samples = 0;  // copied into the snapshot
  uint64_t allocations = 0;                // the snapshot's allocations (alloc events)
  int64_t recording_first_us = kNoTime;   // the process's first recorded moment, on the snapshot's clock
  uint64_t allocations_before_kernels = 0; // made before it: what launched after them was not all recorded, they get no kernel
  uint64_t allocations_with_kernel = 0;    // followed by a launch on their device and stream
  bool joined() const { return !recording_name.empty(); }
};

}  // namespace snapdiff
