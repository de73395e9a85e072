// snapdiff/input/profiler.hpp — what torch.profiler's outputs add to snapshots.
//
// A Chrome trace (prof.export_chrome_trace) is read by load_trace() like any
// other input (format detection from the first bytes); it becomes a Trace
// whose devices replay the trace's [memory] events and whose ops, kernel
// launches and stacks come from the trace's cpu_op, python_function,
// cuda_runtime and kernel events (docs/formats.md).
//
// This header adds what is not a Trace of its own: PyTorch's memory
// timeline (export_memory_timeline: PyTorch's categories over time, to
// compare with snapdiff's). The join of a snapshot with a trace of the same
// run (`snapdiff report SNAPSHOT --trace TRACE`) is the analysis layer's
// (snapdiff/analysis/trace_join.hpp).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "snapdiff/input/input.hpp"
#include "snapdiff/model/model.hpp"

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

}  // namespace snapdiff
