// snapdiff/analysis/replay.hpp — exact replay of PyTorch's CUDA caching allocator.
//
// From a device's events the replay derives, after every event, the four
// byte counters PyTorch keeps in memory_stats(), with PyTorch's own timing:
//   requested — requested sizes of the blocks handed out and not yet
//               completed-free (requested_bytes): it drops at free_completed,
//   allocated — block sizes (after rounding and splitting) of the blocks
//               handed out and not yet freed by the user (allocated_bytes):
//               it drops at free_requested,
//   active    — block sizes of the blocks handed out and not yet
//               completed-free (active_bytes): allocated plus the blocks
//               waiting on other streams,
//   reserved  — mapped segment bytes (reserved_bytes): segment_alloc/free,
//               segment_map/unmap.
// See docs/architecture.md for the rules and invariants.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "snapdiff/model/model.hpp"
#include "snapdiff/view/basics.hpp"

namespace snapdiff {

struct DeviceReplay {
  int device = 0;
  bool has_trace = false;
  bool truncated = false;      // history did not start with an empty allocator
  Truncation truncation = Truncation::None;
  TruncationEvidence truncation_evidence;
  Counters baseline;           // reconstructed state before the first event
  uint64_t pre_trace_allocations = 0;
  bool allocated_estimated = false;  // truncated: block sizes of some pre-trace blocks guessed
  // Counters after each event (index i = after events[i]).
  std::vector<int64_t> requested, allocated, reserved, active;
  PeakPoint peak_requested, peak_allocated, peak_reserved, peak_active;
  Counters end;
  EndStateCheck end_check;
  uint64_t inconsistencies = 0;       // events that did not fit the replayed layout
  std::vector<std::string> notes;     // the first few inconsistencies, explained
  uint64_t oom_events = 0;
  uint64_t streams = 0;
  // Memory pools seen (index 0 is the default pool, (0, 0)); pools other than
  // the default are private: CUDA graphs' and torch.cuda.MemPool's.
  std::vector<PoolUsage> pools;
  // The pool (index into pools) of the block each alloc event took; empty
  // when every segment is the default pool's.
  std::vector<uint32_t> alloc_pool;
  // A profiler trace: allocated and reserved are the totals the trace
  // reported after each event (exact); requested is the running sum of the
  // events' sizes, which are block sizes (so requested = allocated: PyTorch's
  // requested bytes are not in a trace); no block layout, so no
  // fragmentation figures.
  bool reported_totals = false;
};

DeviceReplay replay_device(const Trace& trace, const Device& dev);

// A block handed out and not yet completed-free: allocated, or freed by the
// user and waiting on other streams (pending_free). Both count in requested
// and active; only the first in allocated.
struct LiveAllocation {
  uint64_t addr = 0;
  uint64_t requested = 0;
  uint64_t block_size = 0;
  uint64_t stream = 0;
  StackId stack = 0;
  int64_t alloc_event = -1;  // -1: allocated before the recorded history
  uint32_t pool = 0;         // index into DeviceReplay::pools (0: the default pool)
  bool pending_free = false;
  int32_t segment = -1;      // index into AllocatorState::segments (-1: outside every known one)
};

struct FreeBlockInfo {
  uint64_t addr = 0;
  uint64_t size = 0;
  bool expandable = false;
  uint32_t pool = 0;  // index into DeviceReplay::pools
  uint64_t stream = 0;  // its segment's: only requests on that stream can use it
  bool small = false;   // in a 2 MiB segment of the small pool (serves requests of 1 MiB or less)
  int32_t segment = -1;  // index into AllocatorState::segments
};

// A segment mapped at that moment (expandable: the range mapped so far).
struct SegmentInfo {
  uint64_t addr = 0, size = 0, stream = 0;
  uint32_t pool = 0;  // index into DeviceReplay::pools
  bool expandable = false;
};

// Allocator state right after events[event_index] (-1: before the first).
struct AllocatorState {
  Counters counters;
  std::vector<LiveAllocation> live;       // active blocks: allocated, and pending free
  std::vector<FreeBlockInfo> free_blocks; // cached, reusable
  std::vector<SegmentInfo> segments;      // by address; the blocks above name theirs
  uint64_t pending_free_bytes = 0;        // block bytes freed, waiting on other streams
  uint64_t pending_free_requested = 0;    // their requested bytes (part of counters.requested)
  std::vector<PoolUsage> pools;           // per pool, at this moment (same indices as DeviceReplay::pools)
};
AllocatorState allocator_state_at(const Trace& trace, const Device& dev, int64_t event_index);
// The states after each of `event_indices` (ascending), in one replay.
std::vector<AllocatorState> allocator_states_at(const Trace& trace, const Device& dev,
                                                const std::vector<int64_t>& event_indices);

// PyTorch's round_size() for a request (512-byte granularity, optional
// power-of-two divisions).
uint64_t allocator_round_size(uint64_t size, const AllocatorSettings& s);

}  // namespace snapdiff
