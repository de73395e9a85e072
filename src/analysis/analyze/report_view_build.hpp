// Internal: resolving the analysis's rows for the report view.
#pragma once

#include "snapdiff/analysis/analysis.hpp"

namespace snapdiff::detail {

// The ids of the analysis written out for the view, as each row is made.
FrameRef frame_ref(const FrameTable& ft, FrameId f);
SiteFrames site_frames(const FrameTable& ft, StackId stack, size_t depth = 4);
// A stack's frames as the reports list them, innermost first (cut as
// SiteFrames::stack).
std::vector<FrameRef> shown_frames(const FrameTable& ft, StackId stack);
// The name of category c ("" when c < 0).
std::string category_name(const Attribution& a, int c);
// An op row's category name, its Python frame (kNoFrame: none) and the
// stack of its largest allocation.
void resolve_op_row(const FrameTable& ft, const Attribution& a, FrameId python, StackId stack, OpRow& row);
// The rest of each device's view, from its replay and attribution (peaks,
// pools, phases, the end check...), and the view's copy of the settings.
void finish_views(const Trace& t, Analysis& a);

}  // namespace snapdiff::detail
