// Internal: the OUT OF MEMORY section (the first OOM of each device,
// explained; src/analysis/oom.cpp decides the facts) for text, JSON and HTML.
#pragma once

#include <string>
#include <vector>

#include "snapdiff/report/report.hpp"

namespace snapdiff::detail {

// The explanation of one OOM in sentences: what the allocator could not do
// and why, what the cause implies, what would have fit.
std::vector<std::string> oom_sentences(const OomView& v);
// A size precise enough to tell it from `other`: human_bytes' one decimal,
// more decimals where both would read the same, the exact bytes at last.
std::string bytes_apart(int64_t bytes, int64_t other);
// The text section, one block per OOM ("" when the run had none).
std::string oom_text(const Report& r);
// The HTML section ("" when none).
std::string oom_html(const Report& r);

}  // namespace snapdiff::detail
