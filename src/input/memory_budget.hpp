// Internal: the memory bound (--max-memory) as the readers hold it while
// they read.
//
// predicted_memory_bytes() refuses, before reading, an input whose size
// predicts more memory than the bound; that prediction holds for files as
// PyTorch and Kineto write them, not for crafted ones (a memo that shares one
// object many times, a gzip of a million empty lists). So every reader also
// counts what it builds (containers, memo slots, stack slots, events,
// blocks, frames, records) as it goes, in resident bytes, and refuses the
// moment the count passes the room the bound leaves: the fixed cost of the
// program (kFixedMemoryBytes) and what is held already (a decoded buffer)
// come first. The counts are upper estimates of what is resident (element
// sizes times counts, plus hash-node overheads); docs/reliability.md,
// "Bounds", lists them.
#pragma once

#include <cstdint>
#include <string>

#include "snapdiff/input/input.hpp"

namespace snapdiff::detail {

// The program itself, its libraries and the readers' fixed buffers: about
// 8 MiB measured (`snapdiff report` of a tiny snapshot), with headroom for
// read buffers and the Chrome trace reader's batches in flight (up to six
// of 4 MiB, and the stream's own buffers). The prediction
// (predicted_memory_bytes) and the Chrome trace reader's count start from it.
constexpr uint64_t kFixedMemoryBytes = uint64_t(64) << 20;
// The program alone, with headroom for what a count leaves out (allocator
// slack, huge pages rounding arrays up, hash buckets): where the buffers
// are small, the unpickler (a 256 KiB read chunk, a 64 KiB stack) and the
// analysis. Lower than the prediction's fixed share, so that neither count
// refuses a recording the prediction lets through (small ones count up to
// twice their size: kilobytes).
constexpr uint64_t kProgramMemoryBytes = uint64_t(32) << 20;

// "1.0 GiB", "100 MiB".
std::string memory_text(uint64_t bytes);

// What analysing a model takes besides the model (Trace::memory_bytes), per
// event, dumped block and segment: the replay's counters and layout (and
// its copy at the peak), the live set, attribution. Measured on 1,000,000
// events (53 to 81 bytes each: PyTorch's xxl_fp8, a synthetic snapshot, a
// profiler trace) and on 1,000,000 dumped blocks (306 bytes each), with
// headroom.
constexpr uint64_t kAnalysisBytesPerEvent = 96;
constexpr uint64_t kAnalysisBytesPerBlock = 352;
constexpr uint64_t kAnalysisBytesPerSegment = 128;
// The model and its analysis: refused beyond --max-memory once an input is
// read (the reader's own structures are gone by then).
uint64_t analysis_memory_bytes(const Trace& t);

class MemoryBudget {
 public:
  // Unbounded.
  MemoryBudget() = default;
  // The room --max-memory (opts.max_memory_bytes; 0: unbounded) leaves after
  // the fixed cost and `held` bytes held already.
  explicit MemoryBudget(const LoadOptions& opts, uint64_t held = 0, uint64_t fixed = kFixedMemoryBytes);

  bool bounded() const { return limit_ != 0; }
  uint64_t limit() const { return limit_; }
  // Bytes a reader may build (UINT64_MAX when unbounded).
  uint64_t room() const { return room_; }
  bool over(uint64_t bytes) const { return bytes > room_; }
  // Refuses when `bytes` (what the reader holds now, or will hold) pass the
  // room: an InputError at `offset`, "reading this input needs more than the
  // limit of 1.0 GiB of memory (raise it with --max-memory)".
  void check(uint64_t bytes, uint64_t offset) const {
    if (bytes > room_) refuse(offset);
  }
  [[noreturn]] void refuse(uint64_t offset) const;
  // The same message, located by a JSON path.
  [[noreturn]] void refuse_at(const std::string& json_path) const;
  std::string message() const;

 private:
  uint64_t limit_ = 0;
  uint64_t room_ = UINT64_MAX;
};

}  // namespace snapdiff::detail
