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
// oom.cpp: the first OOM of each device that had one, explained (Analysis::ooms).
void explain_ooms(const Trace& trace, Analysis& r, size_t top_sites);

}  // namespace snapdiff::detail
