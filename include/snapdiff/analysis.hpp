// snapdiff/analysis.hpp — the analysis behind `snapdiff report`: every
// device replayed and attributed, the peak and what is live there, findings
// and warnings. This is the analysis layer's working state; renderers read
// the resolved view built from it (snapdiff/report.hpp).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "snapdiff/attribution.hpp"
#include "snapdiff/frames.hpp"
#include "snapdiff/model.hpp"
#include "snapdiff/profiler.hpp"
#include "snapdiff/replay.hpp"

namespace snapdiff {

struct ReportOptions {
  size_t top_sites = 10;
  std::string input_name;  // shown in the report (the path as given)
  const RuleSet* rules = nullptr;  // nullptr: the built-in rules
  std::string explain;             // --explain ADDRESS|SITE ("" = none)
  const MemoryTimeline* timeline = nullptr;  // --memory-timeline: PyTorch's categories to compare with
  const TraceJoin* join = nullptr;           // --trace: how the snapshot was joined with a trace
};

// Bytes live at the peak by the op that allocated them, or by the kernel
// that op launched (inputs with ops: profiler traces, joined snapshots).
// An allocation's op is the innermost op whose calls launched a kernel
// (aten::addmm rather than the aten::empty inside it); its kernel is the
// first that op launched at or after the allocation (else the last before).
struct OpRow {
  std::string op;       // "" = allocations outside every op
  std::string kernel;   // by op: the kernel holding most of the row's bytes; by kernel: the kernel ("" = none)
  std::string other;    // by kernel: the op holding most of the row's bytes
  FrameId python = UINT32_MAX;  // the innermost Python frame around the op (the call site), if any
  std::string caller;           // without one: the op's outermost enclosing op (e.g. the autograd node)
  StackId stack = 0;            // stack of the row's largest allocation
  int64_t bytes = 0;            // requested bytes live at the peak
  uint64_t count = 0;
  int category = -1;            // snapdiff's category holding most of the bytes
};

// --memory-timeline: PyTorch's own categories (export_memory_timeline) at a
// moment, and where snapdiff places the bytes PyTorch calls unknown then.
struct TimelineMoment {
  std::string label;             // "snapdiff's peak", "PyTorch's largest unknown"
  int64_t time_us = kNoTime;
  int64_t event_index = -1;      // the device's last event at or before that time
  Phase phase = Phase::PreTrace;
  int iteration = 0;
  std::array<int64_t, MemoryTimeline::kCategories> pytorch{};  // PyTorch's bytes by its category
  int64_t pytorch_total = 0;
  std::vector<int64_t> snapdiff;  // snapdiff's requested bytes by category then
  int64_t snapdiff_total = 0;
  int64_t unknown = 0;           // = pytorch[kUnknown]
  int64_t placed = 0;            // of it, tied to allocations snapdiff knows
  int64_t before_profiler = 0;   // of it, tensors that existed before profiling (raw export; no address)
  // Raw export: the bytes allocated before the trace's first event and alive
  // then, as snapdiff sees them, and the tensors among them by PyTorch's
  // category (the rest are not tensors: library workspaces and the like).
  int64_t pre_trace_live = 0;
  std::array<int64_t, MemoryTimeline::kCategories> pre_trace_tensors{};
  std::vector<int64_t> unknown_by_category;  // snapdiff category -> placed unknown bytes
  std::vector<OpRow> placements;             // by snapdiff category, op and kernel
  uint64_t allocations_matched = 0, allocations = 0;  // the trace's allocations up to then tied to a row
};
struct TimelineComparison {
  bool present = false;
  std::string name;
  bool raw = false;
  int device = 0;
  int64_t pytorch_peak = 0, pytorch_peak_time_us = kNoTime;  // the timeline's own maximum
  std::string method;
  // snapdiff's peak; then, when PyTorch's unknown is larger at another
  // moment, that moment.
  std::vector<TimelineMoment> moments;
};

struct ExplainItem {
  int device = 0;
  uint64_t addr = 0;
  uint64_t requested = 0;
  StackId stack = 0;
  int64_t alloc_event = -1, free_event = INT64_MAX;
  Phase alloc_phase = Phase::PreTrace, free_phase = Phase::Other;
  int alloc_iteration = 0, free_iteration = 0;
  std::string category, rule, evidence;
  uint64_t count = 1;  // for a SITE query: allocations of this stack and category
  int64_t bytes = 0;   // for a SITE query: their requested bytes in total
};

struct Warning {
  std::string code;
  std::string message;
};

struct SiteRow {
  StackId stack = 0;
  int64_t requested_bytes = 0;
  int64_t block_bytes = 0;
  uint64_t count = 0;
  int category = -1;  // the category holding most of the row's bytes
  int rule = -1;      // the rule that decided it (for the largest allocation)
  Phase alloc_phase = Phase::Other;
  int alloc_iteration = 0;
  bool freed = false;               // of the largest allocation: freed later, or alive at the end
  Phase free_phase = Phase::Other;
  int free_iteration = 0;
};

// Free cached memory at the peak by block size.
struct FreeSizeClass {
  const char* label;
  uint64_t max_bytes;  // exclusive upper bound
  uint64_t blocks = 0;
  int64_t bytes = 0;
};

struct Fragmentation {
  int64_t reserved = 0;
  int64_t allocated = 0;
  int64_t requested = 0;
  int64_t free_cached = 0;          // in free blocks (reserved - allocated - pending)
  int64_t pending_free = 0;         // freed, waiting for other streams
  int64_t internal = 0;             // allocated - requested (rounding, unsplit remainders)
  uint64_t free_blocks = 0;
  uint64_t largest_free_block = 0;
  uint64_t too_small_threshold = 0; // rounded size of the request that set the peak
  int64_t too_small_bytes = 0;      // free bytes in blocks smaller than that
  std::vector<FreeSizeClass> classes;
};

// One statement of the plain-language explanation, with its bytes.
struct Finding {
  std::string kind;
  std::string message;
  int64_t bytes = 0;
};

// One device-memory sample (cudaMemGetInfo) against the allocator.
struct DeviceMemoryRow {
  int device = 0;
  std::string label;
  int64_t time_us = kNoTime;
  // From the first event of the sample's device (of the whole trace when that
  // device has no timed events); kNoTime when either time is unknown.
  int64_t since_first_event_us = kNoTime;
  uint64_t free_bytes = 0, total_bytes = 0;
  int64_t used_bytes = 0;      // total - free: everything on the device
  int64_t reserved_bytes = 0;  // the caching allocator's segments at that moment
  int64_t outside_bytes = 0;   // used - reserved: CUDA context, library handles, modules
};

struct DeviceAnalysis {
  int device = 0;
  uint64_t events = 0;
  DeviceReplay replay;  // timelines included
  Attribution attr;     // phases and categories
  // "The peak" is the requested peak: the moment the live tensors' bytes are
  // highest; categories and sites there sum exactly to peak requested bytes.
  int64_t peak_index = -1;
  Phase peak_phase = Phase::PreTrace;
  int peak_iteration = 0;
  std::vector<int64_t> categories;  // requested bytes per category at the peak
  std::vector<uint64_t> category_allocations, category_sites;  // allocations and distinct stacks per category
  std::vector<SiteRow> unknown_sites;  // allocations no rule placed, live at the peak
  std::vector<Finding> findings;       // the plain-language explanation
  Event peak_event;     // the event that set the peak (valid if peak_index >= 0)
  StackId peak_stack = 0;
  uint64_t peak_live_allocations = 0;
  int64_t peak_live_requested = 0;  // requested bytes live at the peak
  std::vector<SiteRow> sites;       // top sites live at the peak, by bytes
  SiteRow other_sites;              // the rest, summed
  Fragmentation frag;
  int64_t first_time_us = kNoTime, last_time_us = kNoTime;
  // Kernel launches of this device around the peak (indices into
  // Trace::kernels; -1 when none): the last one launched at or before the
  // peak event's time, and the first one after it.
  int64_t kernel_before = -1, kernel_after = -1;
  // Inputs with ops (profiler traces, joined snapshots): the live bytes at
  // the peak by op and by kernel; the rest of the rows summed in other_*.
  bool has_ops = false;
  std::vector<OpRow> by_op, by_kernel;
  OpRow other_ops, other_kernels;
  uint64_t ops_rows = 0, kernel_rows = 0;  // rows before truncation
};

struct Analysis {
  std::string input_name;
  SourceInfo source;
  uint64_t events = 0;
  bool history_truncated = false;
  bool has_history = false;
  std::vector<DeviceAnalysis> devices;
  size_t peak_device = 0;  // index into devices: highest allocated peak
  std::shared_ptr<RuleSet> rules;  // the rules used (names for sites and --explain)
  std::shared_ptr<const FrameTable> frames;  // the trace's frames, classified once
  std::vector<Warning> warnings;
  std::string explain_query;
  std::vector<ExplainItem> explain;
  uint64_t explain_total = 0;  // matches before truncation to the first 50
  uint64_t kernel_launches = 0;  // Trace::kernels, all devices
  std::vector<DeviceMemoryRow> device_memory;  // in input order; empty when none were recorded
  int64_t outside_min_bytes = 0, outside_max_bytes = 0;  // over device_memory
  // Profiler inputs.
  bool profiler_trace = false;     // the input is a torch.profiler Chrome trace
  uint64_t ops = 0;                // Trace::ops
  uint64_t host_memory_events = 0;
  int64_t host_peak_bytes = 0;     // the CPU allocator's largest Total Allocated
  TraceJoin join;                  // --trace (devices empty when not joined)
  TimelineComparison timeline;     // --memory-timeline
};

Analysis analyze(const Trace& trace, const ReportOptions& opts);

// Innermost frame that belongs to user code rather than PyTorch, Python's
// standard library or native internals (falls back to the innermost Python
// frame, then the innermost frame). Returns UINT32_MAX for an empty stack.
FrameId user_frame(const Trace& trace, StackId stack);
// Unwinder, interpreter, dispatcher and allocator frames: noise in a site.
bool is_internal_frame(const Trace& trace, FrameId f);
bool is_python_frame(const Trace& trace, FrameId f);
std::string format_frame(const Trace& trace, FrameId f);

}  // namespace snapdiff
