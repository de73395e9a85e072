// snapdiff/view/basics.hpp — the small records and names every part of the report view shares: phases,
// truncation, the allocator counters and peaks, finding and warning codes.
// Plain data; the names are defined by the analysis library.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "snapdiff/model/model.hpp"

namespace snapdiff {

enum class Phase : uint8_t { Init, Forward, Backward, Optimizer, Other, PreTrace };
const char* phase_name(Phase p);
// The inverse of phase_name(); false for a name it does not write.
bool phase_from_name(std::string_view name, Phase* out);
constexpr int kPhaseCount = 6;

enum class Code : uint8_t {
  // Findings of `snapdiff report` (the EXPLANATION section).
  Peak,
  OptimizerTransient,
  Unknown,
  Growth,
  // Findings of `snapdiff diff`.
  DiffPeak,
  DiffCategory,
  DiffOptimizerTransient,
  DiffReserved,
  DiffPhase,
  // Warnings of `snapdiff report`.
  ProfilerWindow,
  HistoryTruncated,
  NoHistory,
  EndStateMismatch,
  ReplayInconsistent,
  Oom,
  NoTimestamps,
  OutsideAllocator,
};

struct Counters {
  int64_t requested = 0;
  int64_t allocated = 0;
  int64_t reserved = 0;
  int64_t active = 0;
};

// What the recorded history covers, told from the file's own evidence.
enum class Truncation : uint8_t {
  None,       // the history starts with an empty allocator
  LateStart,  // recording started after memory was already in use
  Wrapped,    // the ring buffer of max_entries filled and dropped its oldest entries
  Unknown,    // partial, and the file cannot tell which of the two
};
const char* truncation_name(Truncation t);  // "none", "late_start", "wrapped", "unknown"
// The inverse of truncation_name(); false for a name it does not write.
bool truncation_from_name(std::string_view name, Truncation* out);

// The evidence truncation was decided on.
struct TruncationEvidence {
  uint64_t entries = 0;          // trace entries of the device
  int64_t max_entries = -1;      // as the file records it; -1 when it does not
  bool entries_round = false;    // the count is a round number (a plausible max_entries)
  bool head_orphan_free = false; // the history begins by completing frees it never saw requested
                                 // (pending frees of a late start do that too: not decisive)
  uint64_t framed_early_blocks = 0;  // blocks alive at the dump, allocated before the history, that carry
                                     // a stack: allocated while recording was on, their alloc lost
  uint64_t dropped_mid_history = 0;  // frees of blocks the history had already seen freed
};

// What decided the inferences about blocks from before the recording
// (pre_trace_parameter, pre_trace_gradient, pre_trace_optimizer_state; the
// report layer words them for --explain): how many blocks, and their bytes,
// were taken for parameters, gradients and optimizer states, and why.
struct PreTraceEvidence {
  // Where the count of optimizer states per parameter came from.
  enum class StatesFrom : uint8_t {
    Unknown,
    RecordingCreates,  // the recording creates the optimizer state (none from before)
    OptimizerClass,    // the optimizer class (Optimizer.step annotation)
    GradientSizes,     // the blocks of each gradient's size
    SizeClasses,       // the blocks of each size
  };
  uint64_t blocks[3] = {0, 0, 0};  // parameters, gradients, optimizer states
  int64_t bytes[3] = {0, 0, 0};
  int64_t gradients = 0;           // the gradients one iteration makes (0: the recording makes none)
  bool steps = false;              // the recording has an optimizer step
  int states = 0;                  // optimizer states per parameter
  StatesFrom states_from = StatesFrom::Unknown;
  bool grouped = false;            // parameters and states found in groups of states + 1 blocks of one
                                   // size, the parameters adding up to an iteration's gradients
};

struct PeakPoint {
  int64_t bytes = 0;
  int64_t event_index = -1;  // -1: before the first event (pre-trace state)
  int64_t time_us = kNoTime;
};

// Comparison of the replayed end state with the segments PyTorch dumped.
struct EndStateCheck {
  bool have_dump = false;
  Counters dump;    // reserved = sum total_size; allocated of active_allocated blocks; requested/active of all active blocks
  Counters replay;  // replayed state after the last event
  uint64_t dump_segments = 0;
  uint64_t replay_segments = 0;
  bool matches() const {
    return dump.requested == replay.requested && dump.allocated == replay.allocated &&
           dump.reserved == replay.reserved && dump.active == replay.active;
  }
};

// One memory pool (segment_pool_id): its segments and bytes at the end of
// the replay.
struct PoolUsage {
  int64_t id[2] = {0, 0};
  uint64_t segments = 0;   // live at the end (mapped ranges for expandable segments)
  int64_t reserved = 0;    // at the end
  int64_t allocated = 0;   // at the end
};

struct PhaseSpan {
  int iteration = 0;
  Phase phase = Phase::Other;
  int64_t start_event = 0, end_event = 0;  // inclusive
  int64_t peak_event = 0;                  // event index of the span's requested peak
  int64_t start_requested = 0;             // requested bytes before its first event
  int64_t peak_requested = 0;
  // The counters at its boundaries: before its first event and after its
  // last (filled by analyze(); equal for an empty span).
  int64_t end_requested = 0;
  int64_t start_allocated = 0, end_allocated = 0;
  int64_t start_reserved = 0, end_reserved = 0;
  std::vector<int64_t> categories;  // requested bytes per category at the span's peak
  // An optimizer step that allocated and freed nothing (its annotation has
  // no event): start_event is the first event after it, end_event one less,
  // peak_event the event before it (the state it ran in).
  bool empty() const { return end_event < start_event; }
};

}  // namespace snapdiff
