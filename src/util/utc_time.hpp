// Internal: a Unix-epoch microsecond as a UTC date, for reports and for
// error messages of every layer (src/util/utc_time.cpp).
#pragma once

#include <cstdint>
#include <string>

namespace snapdiff {

// "2026-11-30 11:03:54.542 UTC" (with milliseconds) or without; "?" for
// kNoTime (INT64_MIN); a time outside the years 1-9999 as its number:
// "time_us 9223372036854775807".
std::string utc_time(int64_t us, bool milliseconds);

}  // namespace snapdiff
