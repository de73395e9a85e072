// Internal: the report sections profiler inputs add (text and JSON).
#pragma once

#include <string>

#include "snapdiff/report/report.hpp"

namespace snapdiff::detail {

// INPUT lines: ops, the CPU allocator, the join with a trace.
std::string profiler_input_text(const Report& r);
// The PEAK lines of a device whose counters a profiler trace reported.
std::string reported_peak_text(const DeviceView& d);
// BY OP / BY KERNEL AT THE PEAK.
std::string ops_text(const DeviceView& d);
// One BY OP / BY KERNEL row as the text report words it: by op, "op ->
// kernel" and where it was called from; by kernel, the kernel and the op
// that launched it; and the category's name.
struct OpRowWords {
  std::string what, where, category;
};
OpRowWords op_row_words(const DeviceView& d, const OpRow& r, bool by_kernel);
// What a BY KERNEL row says when no launch followed the allocation.
constexpr const char* kNoKernel = "(no kernel: nothing launched on its stream after it)";
// "1,230 of the 1,234 allocations live at the peak (99.7%) have a kernel,
// holding 99.9% of their bytes".
std::string kernel_coverage_words(const KernelCoverage& c);
// FRAGMENTATION for a device without a block layout.
std::string no_fragmentation_text(const DeviceView& d);
// PYTORCH'S MEMORY TIMELINE.
std::string timeline_text(const Report& r);
// A profiler trace without memory events: NO MEMORY EVENTS, TOP OPS BY
// TIME, TOP KERNELS BY LAUNCHES (empty when the trace has memory events).
std::string activity_text(const Report& r);
std::string no_memory_message(const TraceActivity& a);

}  // namespace snapdiff::detail
