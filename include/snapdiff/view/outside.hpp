// snapdiff/view/outside.hpp — device memory outside the allocator, per device (from driver calls;
// measured by snapdiff/analysis/outside.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "snapdiff/model/model.hpp"

namespace snapdiff {

// One holder of device memory on a device.
struct OutsideRow {
  uint32_t pid = 0;                          // the process (0 for context and unrecorded)
  MemoryCaller caller = MemoryCaller::Unknown;
  std::string library;                       // the caller's shared object (Other: the row's name)
  bool context = false;                      // the "context and unrecorded" row
  // Bytes at the allocator's peak (known only when the peak has a time, and
  // for the context row a sample at or before it), at exit (the device's
  // last sample; without samples, after its last driver call), and the most
  // held at any moment (for the context row: at any sample), and when.
  bool at_peak_known = false;
  int64_t at_peak = 0, at_exit = 0, max_bytes = 0;
  int64_t max_time_us = kNoTime;
};

// The total device peak: the largest of (allocator reserved + everything
// outside) over every moment the inputs saw (replayed events, driver calls,
// samples).
struct DevicePeakOutside {
  int64_t bytes = 0, time_us = kNoTime;
  int64_t reserved = 0;  // the allocator's reserved bytes then
  int64_t outside = 0;   // everything else then (driver callers other than the snapshot's allocator, and the context)
};

// A row's bytes from one sample on.
struct OutsideChange {
  uint32_t row = 0;   // index into OutsideDevice::rows (the context row too)
  int64_t bytes = 0;  // held from this sample on
};

// Every holder at one sample: the step functions read at its time, kept as
// what changed since the sample before (the first: the rows not at 0), so
// that the table costs the recording's changes, not samples x holders (15k
// processes by 15k samples once took 3.5 GB). outside_sample_bytes() gives
// every row's bytes at a sample.
struct OutsideSample {
  int64_t time_us = kNoTime;
  std::string label;  // the sample's ("interval", "exit", ...)
  int64_t used = 0;   // total - free
  std::vector<OutsideChange> changes;  // by row, ascending
};

struct OutsideDevice {
  int device = 0;
  std::vector<uint32_t> pids;     // processes with driver calls on this device, ascending
  uint32_t snapshot_pid = 0;      // the process whose PyTorch segments are the snapshot's allocator (0: none recorded)
  uint64_t driver_events = 0;     // driver calls on this device
  uint64_t unmatched_frees = 0;   // frees, releases and unmaps of memory no recorded call made
  uint64_t samples = 0;           // cudaMemGetInfo samples of this device with a time
  uint64_t total_bytes = 0;       // the device's memory (last sample; 0 without samples)
  int64_t first_time_us = kNoTime;  // times are shown from it: the device's first allocator event, else its first driver call or sample
  int64_t peak_time_us = kNoTime;   // the allocator's peak (the requested peak); kNoTime: unknown
  int64_t peak_sample_time_us = kNoTime;  // the last sample at or before it
  int64_t exit_time_us = kNoTime;   // the moment "at exit" is read
  bool exit_from_sample = false;    // exit is the last sample (else the last driver call)
  std::vector<OutsideRow> rows;     // by pid, then caller (PyTorch first); context and unrecorded last
  std::vector<OutsideSample> over_time;  // at each sample, in time order
  // Everything outside the snapshot's allocator (rows other than its PyTorch
  // row), summed.
  int64_t outside_at_peak = 0, outside_at_exit = 0;
  bool outside_at_peak_known = false;
  DevicePeakOutside device_peak;
  bool device_peak_known = false;
  int64_t peak_allocated = 0, peak_reserved = 0;  // PyTorch's own peaks (the replay's)
  // Cross-check at each sample: the snapshot process's PyTorch driver bytes
  // against the replay's reserved bytes at that time.
  uint64_t checked_samples = 0, mismatched_samples = 0;
  int64_t largest_mismatch = 0;        // PyTorch driver bytes minus reserved, the largest in magnitude
  int64_t first_mismatch_time_us = kNoTime;
};

// Every row's bytes at sample k of d.over_time (one per row of d.rows): the
// changes of samples 0..k applied in turn.
inline std::vector<int64_t> outside_sample_bytes(const OutsideDevice& d, size_t k) {
  std::vector<int64_t> v(d.rows.size(), 0);
  for (size_t s = 0; s <= k && s < d.over_time.size(); ++s)
    for (const OutsideChange& c : d.over_time[s].changes)
      if (c.row < v.size()) v[c.row] = c.bytes;
  return v;
}

}  // namespace snapdiff
