// snapdiff/analysis/analysis.hpp — the analysis behind `snapdiff report`: every
// device replayed and attributed, the peak and what is live there, findings
// and warnings. This is the analysis layer's working state; renderers read
// the resolved view built from it (snapdiff/report/report.hpp).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "snapdiff/analysis/attribution.hpp"
#include "snapdiff/analysis/growth.hpp"
#include "snapdiff/analysis/moment.hpp"
#include "snapdiff/model/frames.hpp"
#include "snapdiff/model/model.hpp"
#include "snapdiff/input/profiler.hpp"
#include "snapdiff/analysis/replay.hpp"
#include "snapdiff/view/report.hpp"

namespace snapdiff {

struct ReportOptions {
  size_t top_sites = 10;
  size_t site_depth = 3;   // --depth: frames per site row in reports (0: the whole stack)
  std::string input_name;  // shown in the report (the path as given)
  const RuleSet* rules = nullptr;  // nullptr: the built-in rules
  std::string explain;             // --explain ADDRESS|SITE ("" = none)
  const MemoryTimeline* timeline = nullptr;  // --memory-timeline: PyTorch's categories to compare with
  const TraceJoin* join = nullptr;           // --trace: how the snapshot was joined with a trace
  const KernelJoin* kernel_join = nullptr;   // --kernels: how the snapshot was joined with a kernel recording
  MomentSpec at;      // --at: categories, sites and the live set at this moment instead of the peak
  WindowSpec window;  // --window: the peaks and phases within this range (the replay still starts at the start)
  // Threads per device: 2 replays while the attribution runs beside it; 1
  // does all on the calling thread (callers that already run one analysis
  // per core, as the reading of many ranks does). The result is the same.
  int threads = 2;
};

struct DeviceAnalysis {
  int device = 0;
  uint64_t events = 0;
  DeviceReplay replay;  // timelines included
  Attribution attr;     // phases and categories
  int64_t timeline_pre_trace = 0;  // --memory-timeline: bytes from before the profiler it gave a category
  Growth growth;        // memory at each iteration's start, growth, leaking sites (growth.hpp)
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
  // Resolved for the view: the peak's user frame and the two launches.
  std::optional<FrameRef> peak_user_frame;
  std::optional<KernelRef> kernel_before_ref, kernel_after_ref;
  // Inputs with ops (profiler traces, joined snapshots): the live bytes at
  // the peak by op and by kernel; the rest of the rows summed in other_*.
  bool has_ops = false;
  std::vector<OpRow> by_op, by_kernel;
  OpRow other_ops, other_kernels;
  uint64_t ops_rows = 0, kernel_rows = 0;  // rows before truncation
  // Inputs with kernel launches and no ops (kernel_views.cpp): by_kernel
  // alone, by the kernel each live allocation was made for.
  bool kernels_only = false;
  KernelCoverage kernel_coverage;
  // --at: categories, sites, the live set, fragmentation and the rows by op
  // are at this moment, and the findings (which explain the peak) are not
  // stated. --window: the replay's peaks above are the window's.
  std::optional<MomentView> at;
  std::optional<WindowView> window;
};

struct Analysis {
  std::string input_name;
  size_t site_depth = 3;  // ReportOptions::site_depth
  SourceInfo source;
  uint64_t events = 0;
  bool history_truncated = false;
  // What the history covers, over all devices: none when complete; the one
  // kind when every truncated device agrees, else unknown.
  Truncation truncation = Truncation::None;
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
  std::vector<OutsideDevice> outside;  // from the driver calls (outside.hpp); empty without any
  // Profiler inputs.
  bool profiler_trace = false;     // the input is a torch.profiler Chrome trace
  uint64_t ops = 0;                // Trace::ops
  uint64_t host_memory_events = 0;
  int64_t host_peak_bytes = 0;     // the CPU allocator's largest Total Allocated
  TraceJoin join;                  // --trace (devices empty when not joined)
  KernelJoin kernel_join;          // --kernels
  TimelineComparison timeline;     // --memory-timeline
  TraceActivity activity;          // a profiler trace with no memory events: its ops and kernels
  std::vector<OomView> ooms;       // the first OOM of each device that had one (oom.cpp)
};

// Devices with events or segments that analyze() takes; beyond, the input is
// refused (InputError): PyTorch numbers a process's CUDA devices with an
// 8-bit index, and each device costs a replay, an attribution and a section
// of every report (docs/reliability.md, "Time").
constexpr size_t kMaxDevices = 1024;

Analysis analyze(const Trace& trace, const ReportOptions& opts);
// The view the renderers read, resolved from the analysis.
Report report_view(const Analysis& a);
// analyze() then report_view().
Report analyze_report(const Trace& trace, const ReportOptions& opts);


}  // namespace snapdiff
