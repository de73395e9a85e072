// snapdiff/analysis/trace_join.hpp — the join of a snapshot with a
// torch.profiler trace of the same run (`snapdiff report SNAPSHOT --trace
// TRACE`; src/analysis/trace_join.cpp).
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

// Gives the snapshot's allocations the ops (and through them the kernels) of
// the trace's allocations they match: same device and address, a block size
// that fits the request, at the same time once the clocks are lined up (the
// offset is measured on the data: snapshot time_us against
// baseTimeNanoseconds/1000 + ts). Without a consistent offset it falls back
// to the order of the allocations at each address. Matched events' stacks
// gain the op frames (innermost op first) inside their own frames, so the
// phase hints see backward ops where a Python-only stack had no frames. The
// trace's ops and kernel launches are copied into the snapshot.
//
// The join writes into the snapshot, and must: the op frames inside its
// events' stacks are what the attribution's rules and phase hints read, and
// the ops and launches are what the rows by op and by kernel read, so the
// analysis of the joined snapshot is the analysis of one Trace. Its returned
// value is what the report says about the join: the caller passes it on to
// analyze() (ReportOptions::join), which keeps it in the report once.
//
// A trace of another run is an InputError naming the trace (and
// snapshot_name in its message): fewer than kJoinMinTiedPercent of the
// trace's allocations tied, and no overlap between the two inputs' event
// times (the snapshot's first to last event, the trace's).
constexpr int kJoinMinTiedPercent = 3;
TraceJoin join_profiler_trace(Trace& snapshot, const Trace& trace, const std::string& trace_name,
                              const std::string& snapshot_name = "");

}  // namespace snapdiff
