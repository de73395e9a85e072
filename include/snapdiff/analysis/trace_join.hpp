// snapdiff/analysis/trace_join.hpp — the join of a snapshot with a
// torch.profiler trace of the same run (`snapdiff report SNAPSHOT --trace
// TRACE`; src/analysis/joins/trace_join.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "snapdiff/model/model.hpp"
#include "snapdiff/view/joins.hpp"

namespace snapdiff {


// A snapshot with another input joined into it, and what the join found
// (the report's facts about it, Facts: TraceJoin or KernelJoin). A join
// takes the snapshot by value, so the caller moves it in (its events are not
// copied) and gets the joined Trace back here, beside the facts; the caller's
// Trace is never written behind its back.
template <class Facts>
struct Joined {
  Trace trace;  // the snapshot, joined
  Facts join;   // what the report says about the join: analyze() takes it (Joins)
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
// The joined snapshot is one Trace: the op frames inside its events' stacks
// are what the attribution's rules and phase hints read, and the ops and
// launches are what the rows by op and by kernel read, so the analysis of
// the joined snapshot is the analysis of one Trace. The returned join is
// what the report says about it: the caller moves it into analyze()
// (Joins::trace), which keeps it in the report.
//
// A trace of another run is an InputError naming the trace (and
// snapshot_name in its message): fewer than kJoinMinTiedPercent of the
// trace's allocations tied, and no overlap between the two inputs' event
// times (the snapshot's first to last event, the trace's).
constexpr int kJoinMinTiedPercent = 3;
Joined<TraceJoin> join_profiler_trace(Trace snapshot, const Trace& trace, const std::string& trace_name,
                                      const std::string& snapshot_name = "");

}  // namespace snapdiff
