// Internal: BY KERNEL for inputs with kernel launches and no ops (a snapshot
// joined with a kernel recording, snapcapture's own .snap).
#pragma once

#include "snapdiff/analysis/analysis.hpp"
#include "snapdiff/analysis/kernel_join.hpp"

namespace snapdiff::detail {

// Fills d.by_kernel (kernels_only), d.kernel_coverage and the Unknown
// finding's kernel from the allocations live at d's peak: each under the
// first kernel launched on its device and stream at or after it.
void kernels_at_peak(const Trace& t, const FrameTable& ft, const StreamLaunches& launches, const Device& dev,
                     DeviceAnalysis& d, size_t top);

}  // namespace snapdiff::detail
