// snapdiff/report/diff_report.hpp — the renderers of `snapdiff diff` as text,
// JSON and Markdown (src/report/diff_report.cpp). They read the Diff
// (snapdiff/analysis/diff.hpp) and nothing else; the HTML page of a diff is
// render_diff_html() in snapdiff/report/chart.hpp.
#pragma once

#include <string>

#include "snapdiff/report/report.hpp"  // kDefaultTextWidth
#include "snapdiff/analysis/diff.hpp"

namespace snapdiff {

std::string render_diff_text(const Diff& d, size_t width = kDefaultTextWidth);
std::string render_diff_json(const Diff& d);      // schemas/diff.schema.json
std::string render_diff_markdown(const Diff& d);  // for a pull-request comment

}  // namespace snapdiff
