// snapdiff/report/explorer.hpp — the HTML explorer's data, written into a
// page (report layer): the container docs/explorer.md describes (a header
// JSON and typed arrays, gzip'd, base64), built from the analysis layer's
// ExplorerRun. render_html() and render_diff_html() place it in the page
// with the explorer's script and styles.
#pragma once

#include <string>
#include <vector>

#include "snapdiff/analysis/explorer_data.hpp"

namespace snapdiff {

struct ExplorerPageRun {
  std::string label;  // "" (a report), "A" or "B" (a diff)
  std::string input;  // the input's name as given
  const ExplorerRun* run = nullptr;
};

// The page's data element's content: base64 of the gzip'd container.
// kind: "report" or "diff".
std::string explorer_data(const std::string& kind, const std::string& title, const std::vector<ExplorerPageRun>& runs);

// A page with the explorer alone (a rank's, beside a ranks page): `title`
// and `input` shown in its header, `back` a relative link to the page that
// lists it ("" = none), `data` explorer_data()'s output.
std::string render_explorer_html(const std::string& title, const std::string& input, const std::string& back,
                                 const std::string& data);

// A report's data: explorer_run() of every device of `a` with events
// (`t` the trace it was made of), under one input name and title.
std::string explorer_report_data(const Analysis& a, const Trace& t, const std::string& input, const std::string& title,
                                 const ExplorerOptions& o);

// The explorer's script and styles (src/report/explorer/, built in).
const char* explorer_script();
const char* explorer_style();

}  // namespace snapdiff
