// Internal: the report's views of inputs that carry ops (profiler traces,
// snapshots joined with one), and the comparison with PyTorch's memory
// timeline.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "snapdiff/analysis/analysis.hpp"

namespace snapdiff::detail {

// "void at::native::foo<float, 4>(int)" -> "at::native::foo<…>"; names
// without templates or parameter lists ("nvjet_sm90_…", "Memset (Device)")
// are kept.
std::string kernel_display_name(std::string_view name);

// What each op's enclosing ops say, from one pass over the ops (pre-order:
// an op comes after the op it is in), so that nothing walks up an op tree
// 100,000 deep once per allocation.
struct OpTree {
  explicit OpTree(const Trace& t);
  // The innermost op at or above it whose calls launched a kernel (itself
  // when none did).
  std::vector<uint32_t> producer;
  // Its outermost enclosing op (itself at the top).
  std::vector<uint32_t> root;
};

// The allocation's op context: the op that made it (the innermost op around
// it whose calls launched a kernel), and that op's kernel.
struct OpContext {
  uint32_t op = kNoOp;
  int64_t kernel = -1;  // index into Trace::kernels
};
OpContext op_context(const Trace& t, const OpTree& ops, const Device& dev, int64_t alloc_event);
// op_context() of many allocations at once (ops with long subtrees cost
// O(log kernels) each, not a scan of the subtree's kernels).
std::vector<OpContext> op_contexts(const Trace& t, const OpTree& ops, const Device& dev,
                                   const std::vector<int64_t>& alloc_events);

// Fills d.by_op / d.by_kernel from the live allocations at d's peak.
void ops_at_peak(const Trace& t, const FrameTable& ft, const OpTree& ops, const Device& dev, DeviceAnalysis& d,
                 size_t top);

// --memory-timeline with the raw export of a profiler trace: the tensors
// from before profiling take the category PyTorch's timeline gives them.
// add_timeline_rules() appends one rule per PyTorch category it maps
// (PARAMETER, OPTIMIZER_STATE, INPUT, TEMPORARY, ACTIVATION, GRADIENT,
// AUTOGRAD_DETAIL; they hold for no allocation by their conditions: only
// timeline_pre_trace() gives them) and returns the first one's index, the
// rule of PyTorch category c being that index + c.
int add_timeline_rules(RuleSet& rs);
// The device the timeline describes: cuda:0, else the trace's only device
// with events (nullptr: none).
const Device* timeline_device(const Trace& t);
// Allocations from before the trace that it frees take the category of
// their Destroy row; the one allocation standing for what it never frees is
// split into the tensors from before profiling still alive at the export's
// end, by PyTorch's category, and the rest (still unknown). Span breakdowns
// are recomputed. Returns the bytes given a category.
int64_t timeline_pre_trace(const Trace& t, const FrameTable& ft, const Device& dev, Attribution& at,
                           const MemoryTimeline& tl, const RuleSet& rs, int rule_base);

// Fills r.activity: a profiler trace without memory events, its ops by
// time and kernels by launches (top rows each).
void trace_activity(const Trace& t, Analysis& r, size_t top);

// Fills r.timeline for the device the timeline describes.
void compare_timeline(const Trace& t, Analysis& r, const MemoryTimeline& tl, size_t top);

}  // namespace snapdiff::detail
