// snapdiff/report/report.hpp — the renderers of `snapdiff report` (text, JSON) and
// the words of findings and warnings. They read the view (report_view.hpp)
// and nothing else.
#pragma once

#include <cstdint>
#include <string>

#include "snapdiff/view/report.hpp"
#include "snapdiff/analysis/catalogue.hpp"    // code_name()
#include "snapdiff/analysis/outside.hpp"      // outside_row_name()
#include "snapdiff/input/profiler.hpp"        // MemoryTimeline::kCategoryNames

namespace snapdiff {

// The width of text output in display columns: every line of a text
// renderer fits it (prose word-wrapped, table rows cut with "…"). The
// caller chooses it (the CLI: the terminal's width, 80 when standard output
// is not a terminal, --width N); widths outside [kMinTextWidth,
// kMaxTextWidth] are clamped.
constexpr size_t kDefaultTextWidth = 80, kMinTextWidth = 40, kMaxTextWidth = 1000;

std::string render_text(const Report& r, size_t width = kDefaultTextWidth);
std::string render_json(const Report& r);  // schemas/report.schema.json
std::string render_markdown(const Report& r);  // for a pull-request comment (GitHub Flavored Markdown)

// The words of a finding or a warning (src/report/words.cpp); warnings start
// with their device ("device 0: ...").
std::string finding_text(const Finding& f);
std::string warning_text(const Warning& w);

// Binary byte units with one decimal: "1.5 GiB", "512 B".
std::string human_bytes(int64_t bytes);
std::string human_delta(int64_t bytes);

}  // namespace snapdiff
