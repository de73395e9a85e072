// Internal: resolving the analysis's rows for the report view.
#pragma once

#include "snapdiff/analysis/analysis.hpp"

namespace snapdiff::detail {

FrameRef frame_ref(const FrameTable& ft, FrameId f);
SiteFrames site_frames(const FrameTable& ft, StackId stack, size_t depth = 4);
// Fills the resolved fields of every row (sites, ops, explain items,
// kernels, the peak's user frame) from the analysis's ids.
void resolve_rows(Analysis& a);

}  // namespace snapdiff::detail
