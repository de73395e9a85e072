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
  MomentSpec at;      // --at: categories, sites and the live set at this moment instead of the peak
  WindowSpec window;  // --window: the peaks and phases within this range (the replay still starts at the start)
  // Threads per device: 2 replays while the attribution runs beside it; 1
  // does all on the calling thread (callers that already run one analysis
  // per core, as the reading of many ranks does). The result is the same.
  int threads = 2;
};

// One device's analysis: its view (the DeviceView it derives from, filled in
// place: the fields the renderers read live there once) and the working
// state behind it.
//
// "The peak" is the requested peak: the moment the live tensors' bytes are
// highest; categories and sites there sum exactly to peak requested bytes.
// --at: categories, sites, the live set, fragmentation and the rows by op
// are at that moment, and the findings (which explain the peak) are not
// stated. --window: the replay's peaks are the window's.
struct DeviceAnalysis : DeviceView {
  DeviceReplay replay;  // timelines included
  Attribution attr;     // phases and categories
  int64_t timeline_pre_trace = 0;  // --memory-timeline: bytes from before the profiler it gave a category
  Event peak_event;        // the event that set the requested peak (written out as reached_by)
  StackId peak_stack = 0;  // the stack of peak_event
  // Kernel launches of this device around the peak (indices into
  // Trace::kernels; -1 when none): the last one launched at or before the
  // peak event's time, and the first one after it (written out as
  // DeviceView::kernel_before, kernel_after).
  int64_t kernel_before_index = -1, kernel_after_index = -1;
};

// The analysis of a trace: the report's fields (the ReportHead it derives
// from), each device's analysis with its view, and what resolving ids needs.
struct Analysis : ReportHead {
  std::vector<DeviceAnalysis> devices;
  std::shared_ptr<RuleSet> rules;  // the rules used (names for sites and --explain)
  std::shared_ptr<const FrameTable> frames;  // the trace's frames, classified once
};

// Devices with events or segments that analyze() takes; beyond, the input is
// refused (InputError): PyTorch numbers a process's CUDA devices with an
// 8-bit index, and each device costs a replay, an attribution and a section
// of every report (docs/reliability.md, "Time").
constexpr size_t kMaxDevices = 1024;

// What joining other inputs into the analysed Trace found (Joined::join of
// join_profiler_trace() and join_kernel_recording()). analyze() moves them
// into its report (Analysis::join, ::kernel_join), which the view then moves
// or copies with the rest; the kernel join's recording_first_us is the first
// moment the kernel of an allocation is looked for.
struct Joins {
  TraceJoin trace;     // --trace (trace_name "" when not joined)
  KernelJoin kernels;  // --kernels (recording_name "" when not joined)
};

Analysis analyze(const Trace& trace, const ReportOptions& opts, Joins joins = {});
// The view the renderers read: the analysis's head and its devices' views,
// gathered (copied from an analysis kept for other uses, moved from one
// that is not).
Report report_view(const Analysis& a);
Report report_view(Analysis&& a);
// analyze() then report_view().
Report analyze_report(const Trace& trace, const ReportOptions& opts);


}  // namespace snapdiff
