// snapdiff/analysis/kernel_join.hpp — the join of a snapshot with a kernel
// recording of the same run (`snapdiff report SNAPSHOT --kernels
// RUN.kernels.snap`; src/analysis/joins/kernel_join.cpp), and the kernel each
// allocation was made for in inputs with kernel launches but no ops.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "snapdiff/analysis/attribution.hpp"
#include "snapdiff/analysis/trace_join.hpp"  // Joined
#include "snapdiff/model/model.hpp"
#include "snapdiff/view/joins.hpp"

namespace snapdiff {


// A matched pair's difference beyond this is not the same call: PyTorch's
// time_us and the recording's CLOCK_REALTIME differ by microseconds to a few
// milliseconds (PyTorch converts TSC ticks to Unix time).
constexpr int64_t kKernelJoinMaxOffsetUs = 1'000'000;

// Joins a kernel recording (a Trace with kernels, driver memory events and
// device-memory samples, possibly of several processes) into the snapshot:
// picks the process whose PyTorch driver allocations (cuMemAlloc of exactly
// a segment's size, or cuMemMap for expandable segments) match the
// snapshot's segment events (same device, address and size, within
// kKernelJoinMaxOffsetUs) and its dump-time segments, measures the clock
// offset on the matched pairs, and copies that process's kernels, driver
// memory events and samples into the snapshot, times shifted by the offset
// (each list kept chronological), and hands the joined snapshot back
// (Joined::trace; the caller moves the snapshot in): the replay, the device
// memory outside the allocator and the kernel of each allocation read those
// lists from the one Trace they analyse. The returned join is what the
// report says about it: the caller moves it into analyze()
// (Joins::kernels), which keeps it in the report and reads its
// recording_first_us. A recording of another run is an InputError naming
// both files: their time windows do not overlap, or the snapshot has segment
// events inside the recording's window and no process matched one (nor
// holds a dump-time segment's address).
Joined<KernelJoin> join_kernel_recording(Trace snapshot, const Trace& recording, const std::string& recording_name,
                                         const std::string& snapshot_name);

// The launches of a Trace by device and stream, for the kernel of each
// allocation. Launches at the allocation's microsecond count as after it
// (made for it); a life runs from the allocation's time to its free's,
// both included.
class StreamLaunches {
 public:
  // not_before: a joined recording's first moment (KernelJoin::
  // recording_first_us); an allocation before it gets no kernel.
  explicit StreamLaunches(const Trace& t, int64_t not_before = kNoTime);
  bool empty() const { return lists_.empty(); }
  // The first launch on (device, stream) at or after `t` (index into
  // Trace::kernels; -1: none). Of launches at one microsecond, the first
  // recorded.
  int64_t first_at_or_after(int device, uint64_t stream, int64_t t) const;
  // Launches on (device, stream) with from <= time <= to, and the last of
  // them (-1: none; of one microsecond, the last recorded).
  uint64_t count_between(int device, uint64_t stream, int64_t from, int64_t to, int64_t* last) const;
  // The first launch on the device at any stream (kNoTime: none).
  int64_t first_time(int device) const;

 private:
  struct List {
    std::vector<int64_t> times;   // sorted
    std::vector<uint32_t> kernels;
  };
  const List* find(int device, uint64_t stream) const;
  std::vector<std::pair<std::pair<int, uint64_t>, List>> lists_;  // sorted by (device, stream)
  std::vector<std::pair<int, int64_t>> first_;                    // device -> first launch time
  int64_t not_before_ = kNoTime;
};

// One allocation's kernels: the one it was made for, and those that ran on
// its stream while it lived.
struct AllocationKernels {
  int64_t kernel = -1;        // the first launch at or after it (-1: none)
  uint64_t while_live = 0;    // launches on its stream from its allocation to its free (or the moment)
  int64_t last = -1;          // the last of them (-1: none)
};
// For the allocations `ids` of dev's attribution: an allocation's stream is
// its alloc event's; its life ends at its free (the user's, where recorded),
// or at event `moment` for one still alive then (moment < 0: at its free or
// the end). Allocations from before the history get none.
// O(ids * log(launches)).
std::vector<AllocationKernels> allocation_kernels(const StreamLaunches& launches, const Device& dev,
                                                  const Attribution& at, const std::vector<uint32_t>& ids,
                                                  int64_t moment = -1);

}  // namespace snapdiff
