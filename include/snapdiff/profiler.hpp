// snapdiff/profiler.hpp — what torch.profiler's outputs add to snapshots.
//
// A Chrome trace (prof.export_chrome_trace) is read by load_trace() like any
// other input (format detection from the first bytes); it becomes a Trace
// whose devices replay the trace's [memory] events and whose ops, kernel
// launches and stacks come from the trace's cpu_op, python_function,
// cuda_runtime and kernel events (docs/formats.md).
//
// This header adds the two things that are not a Trace of their own:
// PyTorch's memory timeline (export_memory_timeline: PyTorch's categories
// over time, to compare with snapdiff's), and the join of a snapshot with a
// trace of the same run (`snapdiff report SNAPSHOT --trace TRACE`).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "snapdiff/input.hpp"
#include "snapdiff/model.hpp"

namespace snapdiff {

// prof.export_memory_timeline(): `.json`/`.json.gz` (bytes per category at
// each timestamp) or `…raw.json.gz` (one row per allocator event).
struct MemoryTimeline {
  static constexpr int kCategories = 8;
  // PyTorch's categories in the files' column order (_CATEGORY_TO_INDEX).
  static const char* const kCategoryNames[kCategories];  // parameter, optimizer_state, input, temporary,
                                                         // activation, gradient, autograd_detail, unknown
  static constexpr int kUnknown = 7;
  std::string name;  // the path as given
  bool raw = false;
  // .json: one row per distinct timestamp (Unix-epoch µs): bytes live per
  // category after all events at that time.
  std::vector<int64_t> times_us;
  std::vector<std::array<int64_t, kCategories>> sizes;
  // raw: [time_ns (-1: existed before profiling), action, bytes (+/-), category].
  enum Action : uint8_t { Preexisting = 1, Create = 2, IncrementVersion = 3, Destroy = 4 };
  struct Row {
    int64_t time_ns = -1;
    int64_t bytes = 0;
    uint8_t action = 0;
    uint8_t category = kUnknown;
  };
  std::vector<Row> rows;
};

// Reads either export; gzip is recognised from the bytes. Throws InputError
// (JSON path, e.g. "$[1][17]: expected 9 columns") on anything else.
// opts as for load_trace(): the bound on gzip output, and under a memory bound
// the prediction of .snap JSON (a DOM parse).
MemoryTimeline load_memory_timeline(const std::string& path, const LoadOptions& opts = {});
MemoryTimeline read_memory_timeline(std::string_view bytes, const std::string& name, const LoadOptions& opts = {});

// True for a Trace read from a profiler trace (its devices replay [memory]
// events, not a snapshot's allocator history).
bool is_profiler_trace(const Trace& t);

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
TraceJoin join_profiler_trace(Trace& snapshot, const Trace& trace, const std::string& trace_name);

}  // namespace snapdiff
