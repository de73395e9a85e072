// Internal: the torch.profiler Chrome trace reader (prof.export_chrome_trace,
// written by Kineto), in two halves that meet at Records.
//
// chrome_trace_parse.cpp reads: json_stream.hpp hands out each element of
// traceEvents; batches of them are parsed with simdjson's On-Demand API (on
// worker threads for large inputs) and each is reduced to a small record (a
// range, a memory event, a launch, a GPU activity, a flow start). Nothing
// else of the text is kept. The threads' records are merged into one set.
//
// chrome_trace_build.cpp builds the Trace from them:
//   1. per thread, ranges (cpu_op, user_annotation, python_function) are
//      sorted and nested by time: each gets its enclosing range;
//   2. each memory event and each launch is placed in the innermost range of
//      its thread that contains its time;
//   3. a range's stack is its own frame, then its enclosing ranges' frames
//      (ops, record_function ranges, Python calls) outward;
//   4. GPU activities (kernels, memcpy, memset) find their launch through the
//      CUPTI correlation id (cuda_runtime/cuda_driver), else the External id
//      of their op, else an ac2g flow start;
//   5. per device, [memory] events sorted by time become alloc / free
//      events with the totals the trace reported after each.
//
// Each half keeps its classes to its own file (anonymous namespaces), so the
// per-event path compiles as one unit.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "input/json_stream.hpp"
#include "input/memory_budget.hpp"
#include "snapdiff/input/input.hpp"
#include "snapdiff/model/model.hpp"
#include "util/huge_alloc.hpp"
#include "util/hugepages.hpp"

namespace snapdiff::detail::chrome_trace {

// ---- records ----------------------------------------------------------------

enum RangeKind : uint8_t { kAnnotation = 0, kPython = 1, kOp = 2 };  // also the nesting order on ties

struct RangeRec {
  int64_t start, end;  // relative ns
  int64_t ext;         // External id (-1: none)
  uint32_t thread;
  uint32_t label;      // StrId of the name (annotation, op) or the Python frame's index
  uint8_t kind;
};

enum MemKind : uint8_t { kMemAlloc, kMemFree, kMemOom };

struct MemRec {
  int64_t ts;
  uint64_t addr;
  int64_t bytes;
  int64_t total_alloc, total_res;
  uint32_t thread;
  int32_t device;  // -1: the CPU allocator
  uint8_t kind;
  uint8_t has_alloc, has_res;
  uint64_t order;  // position in the file, to keep ties stable
};

struct LaunchRec {
  int64_t ts;
  int64_t corr;
  int64_t ext;
  uint32_t thread;
};

struct GpuRec {
  int64_t ts, dur;
  int64_t corr, ext, stream;
  uint64_t order;  // element index
  uint32_t name;
  int32_t device;
};

struct FlowRec {
  int64_t id, ts;
  uint32_t thread;
};

// ---- time and size arithmetic -----------------------------------------------

inline int64_t floor_div_1000(int64_t ns) { return ns / 1000 - (ns % 1000 < 0 ? 1 : 0); }

// Sums of values from the input saturate instead of overflowing, and never
// reach kNoTime (which means "no time").
inline int64_t sat_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) r = a > 0 ? INT64_MAX : INT64_MIN + 1;
  return r == INT64_MIN ? INT64_MIN + 1 : r;
}
inline int64_t wrap_sub(int64_t a, int64_t b) { return int64_t(uint64_t(a) - uint64_t(b)); }
inline int64_t wrap_add(int64_t a, int64_t b) { return int64_t(uint64_t(a) + uint64_t(b)); }

// Unix-epoch microseconds of a trace time.
inline int64_t abs_us(int64_t base_ns, int64_t ts_ns) { return floor_div_1000(sat_add(base_ns, ts_ns)); }

// Room for n elements up front, with huge pages asked for before the memory
// is touched: growing record arrays by doubling costs more in page faults
// and copies than the parsing itself (untouched reserved pages cost nothing).
template <class V>
void reserve_huge(V& v, uint64_t n) {
  using T = typename V::value_type;
  const uint64_t cap = (uint64_t(1) << 30) / sizeof(T);
  if (n > cap) n = cap;
  if (n <= v.capacity()) return;
  v.reserve(size_t(n));
  advise_hugepages(v.data(), size_t(n) * sizeof(T));
}

// ---- the two halves ---------------------------------------------------------

// What reading leaves for building: every thread's records with global name
// ids (StrIds of the Trace's strings) and thread ids, and the document's
// other top-level members.
struct Records {
  int64_t base_ns = 0;
  bool have_base = false;
  HugeVec<RangeRec> ranges;
  HugeVec<MemRec> mem;
  HugeVec<LaunchRec> launches;
  HugeVec<GpuRec> gpu;
  HugeVec<FlowRec> flows;
  size_t threads = 0;
  std::vector<FrameId> py_frames;  // python ranges' labels are indices into this
  uint64_t events = 0;
  std::vector<std::pair<std::string, std::string>> meta;
  std::string schema_version;
};

// chrome_trace_parse.cpp. Names and Python frames are interned into `t`.
// workers: parser threads besides the reading one (-1: chosen from the
// machine and the input's size). The records are counted against `budget`
// as batches are parsed, each record as kRecordCost times its size (the
// records, and the Trace built from them while they are held: measured 2.6
// to 2.8 times the records on a real trace made large and on traces of
// nothing but ops or memory events; docs/reliability.md, "Bounds"); a value
// is held whole only up to a quarter of the room.
constexpr uint64_t kRecordCost = 3;
Records read_events(ByteStream& in, Trace& t, const ProgressFn& progress, int workers, const MemoryBudget& budget);

// chrome_trace_build.cpp.
void build_trace(Records&& records, Trace& t);

}  // namespace snapdiff::detail::chrome_trace
