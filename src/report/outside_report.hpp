// Internal: the DEVICE MEMORY OUTSIDE THE ALLOCATOR BY CALLER section (from
// the driver calls the injection library recorded; src/analysis/outside.cpp
// makes the figures) for text, JSON and HTML.
#pragma once

#include <string>

#include "snapdiff/report/report.hpp"

namespace snapdiff::detail {

// One block per device ("" when the input has no driver calls).
std::string outside_text(const Report& r);
// The HTML section ("" when none).
std::string outside_html(const Report& r);
// The sentences under the table of one device: the moments the columns are
// read at, the total device peak, the cross-check, unmatched frees.
std::vector<std::string> outside_sentences(const OutsideDevice& d);
// The caller name of a row with its process when the device has several
// ("process 41: NCCL").
std::string outside_row_label(const OutsideDevice& d, const OutsideRow& row);

}  // namespace snapdiff::detail
