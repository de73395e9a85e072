// Internal to the report layer: the JSON of a finding's and a warning's facts
// (the numbers their words are said from), and of the small records several
// sections share. Written by json_report.cpp, read back by report_read.cpp.
#pragma once

#include <nlohmann/json.hpp>

#include "snapdiff/view/report.hpp"

namespace snapdiff::detail {

nlohmann::ordered_json counters_json(const Counters& c);
nlohmann::ordered_json truncation_evidence_json(const TruncationEvidence& e);
// A frame; `label` adds how the text report writes it (user frames, call sites).
nlohmann::ordered_json frame_json(const FrameRef& f, bool label);
// {"path": [labels], "callee": label or null}: how a site row is written.
void site_path_json(nlohmann::ordered_json& j, const SiteFrames& s);
nlohmann::ordered_json finding_facts_json(const Finding& f);
nlohmann::ordered_json warning_facts_json(const Warning& w);  // null for a code without facts

}  // namespace snapdiff::detail
