// Internal: the pieces of a diff's renderings (diff_report.cpp) that other
// renderers embed: the many-ranks reports show the worst rank against the
// median rank with the same findings, category and site rows as
// `snapdiff A B`.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

#include "snapdiff/analysis/diff.hpp"

namespace snapdiff::detail {

// The JSON object render_diff_json() writes (schemas/diff.schema.json).
nlohmann::ordered_json diff_json(const Diff& d);

// The text sections of render_diff_text(), each with its heading line (not
// terminal_safe yet: the caller's last step): FINDINGS; CATEGORIES AT EACH
// PEAK (`max_rows` categories with a change, 0: all; the TOTAL row always);
// SITES AT EACH PEAK (`max_rows` rows, 0: all, then the other sites).
std::string diff_findings_text(const Diff& d);
std::string diff_categories_text(const Diff& d, size_t max_rows);
std::string diff_sites_text(const Diff& d, size_t max_rows);

}  // namespace snapdiff::detail
