// snapdiff/report/whatif_report.hpp — the renderers of `snapdiff whatif`
// (report layer; the prediction itself: snapdiff/analysis/whatif.hpp).
#pragma once

#include <string>

#include "snapdiff/report/report.hpp"  // kDefaultTextWidth
#include "snapdiff/analysis/whatif.hpp"

namespace snapdiff {

constexpr const char* kWhatIfSchema = "snapdiff/whatif/1";
// `input`: the file as given. `ranked`: list the scenarios by predicted
// reserved peak (those that run out of memory last), as --sweep does; the
// JSON keeps the order asked and gives that ranking in "ranking".
std::string render_whatif_text(const WhatIfResult& r, const std::string& input, bool ranked,
                               size_t width = kDefaultTextWidth);
std::string render_whatif_json(const WhatIfResult& r, const std::string& input);
std::string render_whatif_markdown(const WhatIfResult& r, const std::string& input, bool ranked);

}  // namespace snapdiff
