// Internal: how the report layer writes numbers, times and markup — once,
// for every renderer (human_bytes and human_delta are public, in
// snapdiff/report/report.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace snapdiff::detail {

// "1,234,567", "-12,000".
std::string with_commas_signed(int64_t v);
// A share as a report column: " 12.5%" (%5.1f; 0.0% when whole is 0).
std::string share_percent(int64_t part, int64_t whole);
// A change as a share of its base: "+6.3%" (`decimals` digits). A zero base
// gives `unchanged` when delta is 0, else `fresh`.
std::string change_percent(int64_t delta, int64_t base, int decimals, std::string_view unchanged,
                           std::string_view fresh);
// A share for tables and tooltips: "12%", "8.5%" (one decimal below 10%).
std::string compact_percent(double share);
// "2026-11-30 11:03:54.542 UTC" (with milliseconds) or without; "?" for kNoTime.
std::string utc_time(int64_t us, bool milliseconds);
// "1.234 s".
std::string seconds(int64_t us);

// Text for markup: HTML (& < > " ' as entities), XML (the same with &apos;,
// and the control characters XML 1.0 forbids as '?'), or a Graphviz
// HTML-like label (no apostrophe entity, newlines as spaces).
enum class Markup : uint8_t { Html, Xml, DotLabel };
std::string escape(std::string_view s, Markup m);

}  // namespace snapdiff::detail
