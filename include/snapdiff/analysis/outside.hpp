// snapdiff/analysis/outside.hpp — device memory held outside the caching
// allocator, from the driver calls the injection library recorded
// (Trace::driver_memory) and the cudaMemGetInfo samples (Trace::device_memory).
//
// Per device, the bytes each caller (PyTorch's allocator, NCCL, cuBLAS,
// cuDNN, any other library by name) holds from the driver over time are a
// step function of its driver calls; "context and unrecorded" is what a
// sample saw in use beyond everything recorded (the CUDA context, module
// images, memory of other processes). The figures are read at the
// allocator's peak, at exit and at their largest, and added to the
// allocator's reserved bytes for the total device peak (docs/capture.md,
// "Device memory outside the allocator").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "snapdiff/model/model.hpp"
#include "snapdiff/view/outside.hpp"

namespace snapdiff {


// The allocator's side of one device, from the replay: its reserved bytes
// after each timed event, the peak moment and PyTorch's peaks.
struct AllocatorSide {
  int device = 0;
  std::vector<int64_t> times;     // event times, ascending (untimed events left out)
  std::vector<int64_t> reserved;  // reserved bytes after the event of the same index
  int64_t baseline_reserved = 0;  // before the first event
  int64_t first_time_us = kNoTime;
  int64_t peak_time_us = kNoTime;
  int64_t peak_allocated = 0, peak_reserved = 0;
};

// One OutsideDevice per device with driver calls, in device order; empty when
// the trace has none.
std::vector<OutsideDevice> outside_allocator(const Trace& t, const std::vector<AllocatorSide>& sides);

// The row's name as reports show it: "PyTorch", "NCCL", "cuBLAS", "cuDNN",
// the library's name, "unknown caller", "context and unrecorded".
std::string outside_row_name(const OutsideRow& r);

}  // namespace snapdiff
