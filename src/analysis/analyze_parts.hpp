// Internal: the parts of analyze() (src/analysis/analyze.cpp) that live in
// their own files.
#pragma once

#include <string>

#include "snapdiff/analysis/analysis.hpp"

namespace snapdiff::detail {

// findings.cpp: the explanation of one device's peak, largest first.
void state_findings(const FrameTable& ft, DeviceAnalysis& d);
// findings.cpp: the warnings of every device (and the history flags).
void add_warnings(const Trace& trace, Analysis& r);
// explain_query.cpp: --explain ADDRESS|SITE.
void explain_query(const Trace& t, Analysis& r, const std::string& q);

}  // namespace snapdiff::detail
