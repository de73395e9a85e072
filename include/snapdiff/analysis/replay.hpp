// snapdiff/analysis/replay.hpp — exact replay of PyTorch's CUDA caching allocator.
//
// From a device's events the replay derives, after every event, the three
// counters PyTorch keeps in memory_stats():
//   requested — sum of live allocations' requested sizes (requested_bytes),
//   allocated — sum of their block sizes after rounding and splitting
//               (allocated_bytes), which needs the allocator's block layout,
//   reserved  — sum of segment sizes (reserved_bytes).
// See docs/architecture.md for the rules and invariants.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "snapdiff/model/model.hpp"

namespace snapdiff {

struct Counters {
  int64_t requested = 0;
  int64_t allocated = 0;
  int64_t reserved = 0;
};

struct PeakPoint {
  int64_t bytes = 0;
  int64_t event_index = -1;  // -1: before the first event (pre-trace state)
  int64_t time_us = kNoTime;
};

// Comparison of the replayed end state with the segments PyTorch dumped.
struct EndStateCheck {
  bool have_dump = false;
  Counters dump;    // reserved = sum total_size; allocated/requested of active_allocated blocks
  Counters replay;  // replayed state after the last event
  uint64_t dump_segments = 0;
  uint64_t replay_segments = 0;
  bool matches() const {
    return dump.requested == replay.requested && dump.allocated == replay.allocated &&
           dump.reserved == replay.reserved;
  }
};

struct DeviceReplay {
  int device = 0;
  bool has_trace = false;
  bool truncated = false;      // history did not start with an empty allocator
  Counters baseline;           // reconstructed state before the first event
  uint64_t pre_trace_allocations = 0;
  bool allocated_estimated = false;  // truncated: block sizes of some pre-trace blocks guessed
  // Counters after each event (index i = after events[i]).
  std::vector<int64_t> requested, allocated, reserved;
  PeakPoint peak_requested, peak_allocated, peak_reserved;
  Counters end;
  EndStateCheck end_check;
  uint64_t inconsistencies = 0;       // events that did not fit the replayed layout
  std::vector<std::string> notes;     // the first few inconsistencies, explained
  uint64_t oom_events = 0;
  uint64_t streams = 0;
  // A profiler trace: allocated and reserved are the totals the trace
  // reported after each event (exact); requested is the running sum of the
  // events' sizes, which are block sizes (so requested = allocated: PyTorch's
  // requested bytes are not in a trace); no block layout, so no
  // fragmentation figures.
  bool reported_totals = false;
};

DeviceReplay replay_device(const Trace& trace, const Device& dev);

struct LiveAllocation {
  uint64_t addr = 0;
  uint64_t requested = 0;
  uint64_t block_size = 0;
  uint64_t stream = 0;
  StackId stack = 0;
  int64_t alloc_event = -1;  // -1: allocated before the recorded history
};

struct FreeBlockInfo {
  uint64_t addr = 0;
  uint64_t size = 0;
  bool expandable = false;
};

// Allocator state right after events[event_index] (-1: before the first).
struct AllocatorState {
  Counters counters;
  std::vector<LiveAllocation> live;       // allocated blocks
  std::vector<FreeBlockInfo> free_blocks; // cached, reusable
  uint64_t pending_free_bytes = 0;        // freed, waiting on other streams
};
AllocatorState allocator_state_at(const Trace& trace, const Device& dev, int64_t event_index);

// PyTorch's round_size() for a request (512-byte granularity, optional
// power-of-two divisions).
uint64_t allocator_round_size(uint64_t size, const AllocatorSettings& s);

}  // namespace snapdiff
