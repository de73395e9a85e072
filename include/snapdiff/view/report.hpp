// snapdiff/view/report.hpp — what the renderers read: the analysis's
// results resolved into plain rows (names, frames and sites written out, no
// ids into the Trace), built by the analysis layer (report_view()).
//
// Renderers (snapdiff/report/report.hpp, snapdiff/analysis/diff.hpp, snapdiff/report/chart.hpp)
// take these and nothing else: no Trace, no replay or attribution state.
// Every struct's JSON keys are declared once, in snapdiff/view/fields.hpp.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "snapdiff/model/model.hpp"
#include "snapdiff/view/basics.hpp"   // Phase, Code, Counters, PeakPoint, EndStateCheck, PhaseSpan
#include "snapdiff/view/growth.hpp"   // Growth
#include "snapdiff/view/joins.hpp"    // TraceJoin, KernelJoin
#include "snapdiff/view/outside.hpp"  // OutsideDevice

namespace snapdiff {

// PyTorch's categories of export_memory_timeline (MemoryTimeline::kCategories,
// snapdiff/input/profiler.hpp, in its column order).
constexpr int kPytorchCategories = 8;

// A frame written out: as recorded, and as the reports show it. Or, where
// elided > 0, the frames a deep stack leaves out (FrameTable::shown()): their
// count, with no name, file, line or label (the report layer writes
// "<1234 frames elided>").
struct FrameRef {
  std::string name, file;
  int64_t line = kNoLine;   // kNoLine when unknown
  std::string label;        // "name (dir/file.py:88)" (FrameTable::label)
  uint64_t elided = 0;      // > 0: this many frames left out here
};

// A stack written out for a site row.
struct SiteFrames {
  std::vector<std::string> path;   // the user frame, then its callers (at most four labels, or
                                   // --depth's; the whole path up to 1,000 with --depth 0)
  std::string callee;              // the Python frame inside the user's call ("" = none)
  std::optional<FrameRef> user;    // the user frame (none for an empty stack)
  std::vector<FrameRef> stack;     // every frame, innermost first (FrameTable::shown(): a stack deeper
                                   // than 1,000 frames as its ends and one FrameRef::elided frame)
};

// A kernel launch written out.
struct KernelRef {
  std::string name;      // as recorded
  std::string display;   // shortened for the text report
  int64_t time_us = kNoTime;
  uint64_t stream = 0;
  std::vector<FrameRef> stack;  // innermost first, cut as SiteFrames::stack (its scope stack: the
                                // report layer writes it outermost first, "iter 2 / backward / attn")
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
  std::string caller;           // without python_frame: the op's outermost enclosing op (e.g. the autograd node)
  int64_t bytes = 0;            // requested bytes live at the peak
  uint64_t count = 0;
  int category = -1;            // snapdiff's category holding most of the bytes (index into category_names)
  std::string category_name;                // "" when category < 0
  std::optional<FrameRef> python_frame;     // the innermost Python frame around the op (the call site), if any
  std::vector<FrameRef> stack_frames;       // the stack of the row's largest allocation, innermost first
                                            // (cut as SiteFrames::stack)
};

// Inputs with kernel launches and no ops (a snapshot joined with a kernel
// recording, snapcapture's .snap): of the allocations live at the peak, those
// followed by a launch on their device and stream (they have a kernel).
struct KernelCoverage {
  bool present = false;
  uint64_t allocations = 0, with_kernel = 0;
  int64_t bytes = 0, bytes_with_kernel = 0;
};

// --memory-timeline: PyTorch's own categories (export_memory_timeline) at a
// moment, and where snapdiff places the bytes PyTorch calls unknown then.
struct TimelineMoment {
  std::string label;             // "snapdiff's peak", "PyTorch's largest unknown"
  int64_t time_us = kNoTime;
  int64_t event_index = -1;      // the device's last event at or before that time
  Phase phase = Phase::PreTrace;
  int iteration = 0;
  std::array<int64_t, kPytorchCategories> pytorch{};  // PyTorch's bytes by its category
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
  std::array<int64_t, kPytorchCategories> pre_trace_tensors{};
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

// A profiler trace without memory events (recorded without
// torch.profiler.profile(profile_memory=True)): what it holds instead.
struct TraceActivity {
  bool present = false;
  uint64_t ops = 0, kernel_launches = 0, threads = 0;
  uint64_t op_names = 0, kernel_names = 0;  // distinct names
  struct Op {
    std::string op;
    uint64_t calls = 0;         // outermost calls of that name (a call inside one of the same name is not counted)
    int64_t total_ns = 0;       // their durations, summed (each call with everything it calls)
    uint64_t kernel_launches = 0;  // launched by those calls and the ops inside them
  };
  std::vector<Op> top_ops;      // by total_ns
  struct Kernel {
    std::string kernel;         // as kernel_display_name() shortens it
    uint64_t launches = 0;
    std::string op;             // the op that launched most of them ("" outside every op)
  };
  std::vector<Kernel> top_kernels;  // by launches
};

// An inference a rule relied on, with this run's evidence for it.
struct InferredEvidence {
  std::string fact;        // its name (kFactNames): "pre_trace_parameter"
  std::string words;       // the analysis's words for it, unless
  int pre_trace = -1;      // 0, 1, 2: the pre-trace inference of parameters, gradients, states,
  PreTraceEvidence facts;  // with these facts (the report layer words them)
};

struct ExplainItem {
  int device = 0;
  uint64_t addr = 0;
  uint64_t requested = 0;
  SiteFrames site;   // its stack written out
  int64_t alloc_event = -1, free_event = INT64_MAX;
  Phase alloc_phase = Phase::PreTrace, free_phase = Phase::Other;
  int alloc_iteration = 0, free_iteration = 0;
  std::string category, rule;
  std::string evidence;  // the rule's evidence ("" for rule "(none)": the report layer says why from the
                         // phases; read back from JSON: all the words)
  std::vector<InferredEvidence> inferred;  // the inferences it relied on, worded after `evidence` ("; inferred
                                           // (fact): ..."; none in a view read back)
  uint64_t count = 1;  // for a SITE query: allocations of this stack and category
  int64_t bytes = 0;   // for a SITE query: their requested bytes in total
  // An ADDRESS query on an input with launches and no ops: the kernel it was
  // made for ("" = none), the launches on its stream while it lived and the
  // last of them (AllocationKernels).
  bool has_kernels = false;
  std::string kernel, last_kernel;
  uint64_t kernels_while_live = 0;
};



// Live allocations of one stack and category (the stack and the rule are
// written out: the view holds no ids into the Trace or the rules).
struct SiteRow {
  int64_t requested_bytes = 0;
  int64_t block_bytes = 0;
  uint64_t count = 0;
  int category = -1;  // the row's category (index into category_names): rows are per stack and category
  Phase alloc_phase = Phase::Other;
  int alloc_iteration = 0;
  bool freed = false;               // of the largest allocation: freed later, or alive at the end
  Phase free_phase = Phase::Other;
  int free_iteration = 0;
  std::string category_name;  // "" when category < 0
  bool has_rule = false;      // a rule decided it (for the largest allocation)
  std::string rule_name;      // that rule's name ("" when no rule)
  SiteFrames site;
  // Tensors the run's tensor list names in the row's allocations
  // (docs/tensors.md): how many, and their names as one pattern
  // ("model.layers.*.mlp.fc1.weight"; the name itself when there is one).
  uint64_t named_tensors = 0;
  std::string tensors;
  // The row holds copies of those tensors (parameter_copy, named by size
  // from the tensor list): named_tensors counts the copies.
  bool copies = false;
};

// Gradients live at the peak (or --at's moment) of one tensor size: the key
// a diff matches gradients by (the autograd engine's thread records no
// Python stack, or a backward one, so a gradient's own stack says little;
// a parameter's gradient has its size).
struct GradientSize {
  uint64_t tensor_bytes = 0;    // each tensor's requested bytes
  uint64_t count = 0;           // tensors of that size
  int64_t requested_bytes = 0;  // tensor_bytes x count
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
  int64_t pending_free = 0;         // block bytes freed by the user, waiting for other streams
  int64_t pending_free_requested = 0;  // their requested bytes: part of `requested` (PyTorch
                                       // lowers requested_bytes when the free completes)
  int64_t internal = 0;             // allocated - (requested - pending_free_requested): rounding, unsplit remainders
  uint64_t free_blocks = 0;
  uint64_t largest_free_block = 0;
  uint64_t too_small_threshold = 0; // rounded size of the request that set the peak
  int64_t too_small_bytes = 0;      // free bytes in blocks smaller than that
  std::vector<FreeSizeClass> classes;
};

// ---- Findings and warnings: a code and its numbers ------------------------
// The analysis fills the facts; the report layer writes the words
// (finding_text(), warning_text() in snapdiff/report/report.hpp). Codes, severities
// and descriptions: snapdiff/analysis/catalogue.hpp.

// Code::Peak: where the peak is and what it is made of.
struct PeakFacts {
  int64_t peak = 0;
  Phase phase = Phase::PreTrace;
  int iteration = 0;
  bool truncated = false;  // the history starts mid-run: "of the recorded window"
  struct Part {
    std::string category;
    int64_t bytes = 0;
    int kept_from_iteration = 0;  // gradients: most of them kept from this earlier iteration (0 = not)
    // temporary and unknown, on inputs with launches and no ops: the kernel
    // most of the bytes were made for ("" = none), and its bytes of them.
    std::string kernel = {};
    int64_t kernel_bytes = 0;
    // kv_cache in an inference run: its decoding forwards and its growth per
    // generated token (0: allocated once at full length).
    int forwards = 0;
    int64_t per_token = 0;
  };
  std::vector<Part> parts;  // largest first
};
// Code::OptimizerTransient: the step that rises most above its start.
struct OptimizerStepFacts {
  int iteration = 0;
  int64_t rise = 0;
  int64_t new_state = 0;     // optimizer state created in the step (its first)
  size_t similar = 0;        // other steps that rise as much (>= 90%)
  size_t steps = 0;
  int64_t temporaries = 0;   // optimizer temporaries live at the step's peak
  int64_t gradients = 0;     // gradients live then
  std::string site;          // the temporaries' largest site ("" = none), and the
  std::string site_callee;   // Python function inside it the user's line called ("" = none)
};
// Code::Unknown: bytes no rule placed.
struct UnknownFacts {
  int64_t unknown = 0;
  int64_t before_profiler = 0;  // of it, allocated before a profiler started
  int64_t timeline_placed = 0;  // bytes from before the profiler that --memory-timeline placed (live at the peak)
  // Inputs with kernel launches and no ops: the kernel most of it was made
  // for ("" = none), and its bytes of it.
  std::string kernel;
  int64_t kernel_bytes = 0;
};
// Code::Growth: memory that grows every iteration, and what is retained.
struct GrowthFacts {
  bool measured = false;       // growth measured (3 iterations or more)
  int64_t per_iteration = 0;   // median change of allocated bytes between iteration starts
  int first_iteration = 0, last_iteration = 0;  // the starts measured (2..N)
  int judged_first = 0, judged_last = 0;        // iterations whose allocations were judged
  int unjudged = 0;                             // the last iterations that cannot be judged yet
  struct Site {
    std::string site, model_frame;  // user frame; the model's line inside its call ("" = none)
    Phase phase = Phase::Other;     // made in
    int64_t bytes_per_iteration = 0;
    uint64_t count_per_iteration = 0;
    int iterations = 0;             // judged iterations it retains in
  };
  std::vector<Site> sites;          // the largest first (at most 3)
  size_t more_sites = 0;            // leaking sites beyond those
  int64_t retained_per_iteration = 0;
  int64_t leaked_at_peak = 0;
};
// Code::DiffPeak.
struct DiffPeakFacts {
  int64_t a = 0, b = 0;  // requested peaks
  int a_iteration = 0, b_iteration = 0;
  Phase a_phase = Phase::Other, b_phase = Phase::Other;
};
// Code::DiffCategory.
struct DiffCategoryFacts {
  std::string category;
  int64_t a = 0, b = 0;
  // parameter: the bytes and tensors of parameters at each peak.
  bool parameters = false;
  double parameter_ratio = 0;  // B's bytes / A's
  uint64_t a_tensors = 0, b_tensors = 0;
  // The largest groups of sites with the change, and those against it.
  struct Group {
    std::string name;
    int64_t delta = 0;
    size_t sites = 0;
    bool all_new = false, all_gone = false;
  };
  std::vector<Group> mostly, offset;
  // Without groups: the site with the largest change in its direction.
  bool has_top_site = false;
  int64_t top_delta = 0;
  std::string top_site;
  bool top_new = false, top_gone = false;
  bool gradients_kept = false;  // both peaks after the first iteration
  // parameter_copy where the parameters change and the copies do not
  // (within 1%): the copies are made in both runs (the FP8 transposes kept
  // for the backward, whatever the primary weights' dtype).
  bool copies_unchanged = false;
};
// Code::DiffOptimizerTransient.
struct DiffStepFacts {
  int64_t a_temporaries = 0, b_temporaries = 0;
  int64_t a_gradients = 0, b_gradients = 0;
};
// Code::DiffReserved: the reserved peak (>= 1% of the larger one and 1 MiB),
// whatever the requested bytes do; free cached bytes and the largest free
// block at each run's requested peak (Fragmentation).
struct DiffReservedFacts {
  int64_t a_reserved = 0, b_reserved = 0;    // peaks
  int64_t a_allocated = 0, b_allocated = 0;  // peaks
  int64_t a_free_cached = 0, b_free_cached = 0;
  uint64_t a_largest_free = 0, b_largest_free = 0;
};

// Code::DiffPhase: a kind of phase (forward, backward, optimizer, ...) whose
// peak moves materially at one aligned (iteration, phase) pair: the largest
// move of that kind, and the categories that change most at its peak.
struct DiffPhaseFacts {
  Phase phase = Phase::Other;
  int iteration = 0;
  int64_t a = 0, b = 0;  // requested bytes at the phase's peak in each run
  struct Category {
    std::string name;
    int64_t a = 0, b = 0;
  };
  std::vector<Category> categories;  // the largest changes first (at most 3)
};

struct Finding {
  Code code = Code::Peak;
  int64_t bytes = 0;  // its size, for the order (signed in diffs)
  std::variant<PeakFacts, OptimizerStepFacts, UnknownFacts, GrowthFacts, DiffPeakFacts, DiffCategoryFacts, DiffStepFacts,
               DiffReservedFacts, DiffPhaseFacts>
      facts;
};

// Code::ProfilerWindow.
struct ProfilerWindowFacts {
  int64_t allocated_before = 0;
};
// Code::HistoryTruncated.
struct HistoryTruncatedFacts {
  int64_t requested = 0, reserved = 0;  // live before the first event
  uint64_t allocations = 0;
  bool allocated_estimated = false;
  Truncation kind = Truncation::Unknown;  // late_start, wrapped or unknown
  TruncationEvidence evidence;
};
// Code::EndStateMismatch.
struct EndStateFacts {
  bool truncated = false;
  Counters replay, dump;
};
// Code::ReplayInconsistent.
struct InconsistentFacts {
  uint64_t events = 0;
  bool reported_totals = false;
  std::string first;  // the first one, explained ("" = none recorded)
};
// Code::Oom.
struct OomFacts {
  uint64_t errors = 0;
  bool has_first = false;
  uint64_t first_size = 0, first_free = 0;  // what the first asked for, and CUDA's free bytes then
};

// Code::OutsideAllocator: the largest holder outside the allocator at the
// peak (a library, or another process's allocator; never the context).
struct OutsideFacts {
  std::string holder;       // outside_row_name(): "NCCL", "libfoo.so", "PyTorch"
  uint32_t pid = 0;         // its process, when the device has several (0: one)
  int64_t bytes = 0;        // held at the allocator's peak
  int64_t device_peak = 0;  // the total device peak
};

struct Warning {
  Code code = Code::NoHistory;
  int device = 0;
  std::variant<std::monostate, ProfilerWindowFacts, HistoryTruncatedFacts, EndStateFacts, InconsistentFacts, OomFacts,
               OutsideFacts>
      facts;
};

// ---- An out-of-memory error, explained (src/analysis/oom.cpp) ------------
// Why the allocator could not serve the request, decided from its state at
// the oom entry (docs/cli.md, "OUT OF MEMORY"):
enum class OomCause : uint8_t {
  Fragmentation,   // free cached blocks on the stream add up to the request, none is large enough
  ProcessCap,      // CUDA had room for a new segment: a per-process cap (set_per_process_memory_fraction)
  OtherProcesses,  // CUDA had no room, and the allocator held well under half of the device
  DeviceFull,      // CUDA had no room, and the allocator held most of it (or the device's total is unknown)
};
const char* oom_cause_name(OomCause c);  // "fragmentation", "process_cap", "other_processes", "device_full"
// The inverse of oom_cause_name(); false for a name it does not write.
bool oom_cause_from_name(std::string_view name, OomCause* out);

// The first OOM of a device: what was asked, what the allocator held, what
// CUDA said was free, the cause, and what was live.
struct OomView {
  int device = 0;
  uint64_t errors = 0;           // oom entries of this device
  int64_t event_index = -1;      // the first one's index in the device's events
  int64_t time_us = kNoTime;
  int64_t since_first_event_us = kNoTime;  // from the device's first timed event (kNoTime: unknown)
  Phase phase = Phase::PreTrace;
  int iteration = 0;
  uint64_t stream = 0;
  std::optional<FrameRef> user_frame;  // where the request came from (none: no stack recorded)
  SiteFrames site;                     // its stack written out
  // The request: the oom entry's size (PyTorch's rounded request), and the
  // segment a new allocation of it needs (PyTorch's "Tried to allocate").
  uint64_t request = 0;
  uint64_t segment_size = 0;
  bool expandable = false;       // the allocator ran with expandable_segments:True
  // CUDA's word at the error (cudaMemGetInfo): free, and the device's total
  // when a device-memory sample of that device records it (0: unknown).
  uint64_t device_free = 0, device_total = 0;
  // The entry records 0 (snapcapture's shim does not ask CUDA): then the free
  // bytes of the device-memory sample nearest in time, named here ("": the entry's).
  std::string free_sample;
  // The allocator at the oom entry (after it returned what it could of its
  // cache to CUDA): PyTorch's counters and the free cached blocks.
  Counters held;
  int64_t free_cached = 0;           // bytes in free blocks, every stream and pool
  uint64_t free_blocks = 0;
  uint64_t largest_free_block = 0;
  int64_t stream_free = 0;           // of them, in the default pool on the request's stream (those it could use)
  uint64_t stream_free_blocks = 0;
  uint64_t stream_largest_free = 0;
  int64_t pending_free = 0;          // blocks freed by the user, waiting on other streams
  int64_t max_reserved = 0;          // the most reserved up to the oom entry
  OomCause cause = OomCause::DeviceFull;
  // A cap: it lies in [cap_at_least, cap_below): the allocator held cap_at_least
  // once (max_reserved), and could not add the segment to what it held.
  bool capped = false;               // the device had room for the segment (device_free >= segment_size)
  int64_t cap_at_least = 0, cap_below = 0;
  int64_t others = -1;               // device_total - device_free - reserved (-1: total unknown)
  // Fragmentation: allocated + the request, what expandable segments would
  // have needed mapped; shown to fit when it is at most max_reserved (the
  // cap, if any, is at least that).
  int64_t expandable_need = 0;
  int64_t expandable_room = 0;       // what it is known it could hold: max_reserved under a cap, else reserved + device_free
  bool expandable_fits = false;      // need <= room
  // The allocator model (whatif.hpp) at this error: run only where the
  // limit is known (CUDA's free bytes, or a cap's range), and trusted only
  // where the model under the recorded settings runs out of memory at this
  // very request (whatif_reproduced). Then the settings tried, and those
  // under which this request would have fit (for a cap: under the smallest
  // cap the range allows).
  bool whatif_run = false, whatif_reproduced = false;
  std::vector<std::string> whatif_tried, whatif_fit;
  // Live at the oom entry, like live at the peak.
  std::vector<std::string> category_names;
  std::vector<int64_t> categories;           // requested bytes per category
  std::vector<uint64_t> category_allocations;
  uint64_t live_allocations = 0;
  int64_t live_requested = 0;
  std::vector<SiteRow> sites;                // by stack and category, largest first (-n rows)
  SiteRow other_sites;
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


// --at: the moment the categories, sites and live set are taken at instead
// of the peak; --window: the range of moments the peaks and phases cover.
struct MomentView {
  std::string spec;          // as given
  int64_t event_index = -1;  // the state right after this event (-1: before the first)
  int64_t time_us = kNoTime; // that event's time
  Phase phase = Phase::PreTrace;
  int iteration = 0;
  Counters counters;         // the replay's counters then
};
struct WindowView {
  std::string spec;
  int64_t first_event = -1, last_event = -1;  // states from right after first_event to right after last_event
  int64_t first_time_us = kNoTime, last_time_us = kNoTime;
};

// The event that set the requested peak, written out (the analysis keeps the
// model's Event in DeviceAnalysis::peak_event).
struct PeakEventView {
  EventKind kind = EventKind::Other;
  uint64_t size = 0;    // requested bytes
  uint64_t addr = 0;
  uint64_t stream = 0;
};

// One device of the report view.
struct DeviceView {
  int device = 0;
  uint64_t events = 0;
  uint64_t streams = 0;
  bool has_trace = false;        // the input had an allocator history for it
  bool truncated = false;        // that history starts mid-run
  Truncation truncation = Truncation::None;  // and why (none when complete)
  TruncationEvidence truncation_evidence;
  bool reported_totals = false;  // profiler traces: the counters are the trace's own totals
  PeakPoint peak_requested, peak_allocated, peak_reserved, peak_active;
  int64_t allocated_at_peak = 0;  // allocated bytes at the requested peak
  int64_t active_at_peak = 0;     // active bytes at the requested peak
  std::vector<PoolUsage> pools;   // at the end; [0] is the default pool
  Counters baseline;              // before the first event
  uint64_t pre_trace_allocations = 0;
  bool allocated_estimated = false;
  EndStateCheck end_check;
  uint64_t inconsistencies = 0;
  uint64_t oom_events = 0;
  // The requested peak and what is live there.
  int64_t peak_index = -1;
  Phase peak_phase = Phase::PreTrace;
  int peak_iteration = 0;
  bool has_peak_event = false;
  PeakEventView reached_by;              // the event that set the peak (valid when has_peak_event)
  std::optional<FrameRef> peak_user_frame;
  std::vector<std::string> category_names;
  std::vector<int64_t> categories;       // requested bytes per category at the peak
  std::vector<uint64_t> category_allocations, category_sites;
  // Of categories' `unknown`: bytes held since before the recording began
  // and never freed in it, that no evidence names (model weights, buffers
  // or caches allocated before recording started).
  int64_t unknown_held_from_before = 0;
  std::vector<Finding> findings;
  uint64_t peak_live_allocations = 0;
  int64_t peak_live_requested = 0;
  std::vector<SiteRow> sites;
  SiteRow other_sites;
  std::vector<GradientSize> gradient_sizes;  // gradients live then, by tensor size (largest first)
  std::vector<SiteRow> unknown_sites;
  Fragmentation frag;
  int64_t first_time_us = kNoTime, last_time_us = kNoTime;
  std::optional<KernelRef> kernel_before, kernel_after;
  std::optional<MomentView> at;      // --at (categories, sites, live set and fragmentation are then)
  std::optional<WindowView> window;  // --window (peaks and phases within it)
  // Phases.
  std::vector<PhaseSpan> phases;
  std::string phase_evidence;
  int iterations = 0;
  Growth growth;  // memory at each iteration's start, growth per iteration, leaking sites
  // Inputs with ops.
  bool has_ops = false;
  std::vector<OpRow> by_op, by_kernel;
  OpRow other_ops, other_kernels;
  uint64_t ops_rows = 0, kernel_rows = 0;
  // Inputs with kernel launches and no ops: by_kernel without by_op, keyed
  // by the kernel each live allocation was made for (OpRow::other: the site
  // holding most of the row's bytes).
  bool kernels_only = false;
  KernelCoverage kernel_coverage;
};

// The report view: everything `snapdiff report` shows. ReportHead is all of
// it but the devices: the analysis (snapdiff/analysis/analysis.hpp) fills a
// ReportHead and one DeviceView per device, each in place, and
// report_view() gathers them into a Report.
struct ReportHead {
  std::string input_name;
  size_t site_depth = 3;  // frames a site row shows (--depth; 0: the whole stack, SiteFrames::path)
  AllocatorSettings allocator_settings;  // as the file recorded them (Trace::settings)
  SourceInfo source;
  uint64_t events = 0;
  bool history_truncated = false;
  // What the history covers, over all devices: none when complete; the one
  // kind when every truncated device agrees, else unknown.
  Truncation truncation = Truncation::None;
  bool has_history = false;
  size_t peak_device = 0;  // index into devices: highest allocated peak
  std::vector<Warning> warnings;
  std::string explain_query;
  std::vector<ExplainItem> explain;
  uint64_t explain_total = 0;    // matches before truncation to the first 50
  uint64_t kernel_launches = 0;  // Trace::kernels, all devices
  std::vector<DeviceMemoryRow> device_memory;  // in input order; empty when none were recorded
  int64_t outside_min_bytes = 0, outside_max_bytes = 0;  // over device_memory
  std::vector<OutsideDevice> outside;  // device memory outside the allocator from driver calls (outside.hpp)
  // Profiler inputs.
  bool profiler_trace = false;  // the input is a torch.profiler Chrome trace
  uint64_t ops = 0;             // Trace::ops
  uint64_t host_memory_events = 0;
  int64_t host_peak_bytes = 0;  // the CPU allocator's largest Total Allocated
  TraceJoin join;               // --trace (devices empty when not joined)
  KernelJoin kernel_join;  // --kernels (recording_name "" when not joined)
  TimelineComparison timeline;  // --memory-timeline
  TraceActivity activity;       // a profiler trace with no memory events: its ops and kernels
  // The first OOM of each device that had one, in device order (empty: none).
  std::vector<OomView> ooms;
};
struct Report : ReportHead {
  std::vector<DeviceView> devices;
};

}  // namespace snapdiff
