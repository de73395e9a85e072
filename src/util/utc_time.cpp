// A Unix-epoch microsecond as a UTC date (src/util/utc_time.hpp).
#include "util/utc_time.hpp"

#include <cstdio>
#include <ctime>
#include <limits>

namespace snapdiff {

namespace {

// Floor division and remainder (the remainder in [0, d)): times before 1970
// are negative, and truncation would put their milliseconds before the second.
int64_t floor_div(int64_t a, int64_t d) { return a / d - (a % d < 0 ? 1 : 0); }
int64_t floor_mod(int64_t a, int64_t d) { return a % d < 0 ? a % d + d : a % d; }

// The first and the last microsecond that print as a date (years 1 to 9999:
// four digits, and within what gmtime_r converts everywhere).
constexpr int64_t kFirstDateUs = -62135596800LL * 1000000;       // 0001-01-01 00:00:00 UTC
constexpr int64_t kLastDateUs = 253402300800LL * 1000000 - 1;    // 9999-12-31 23:59:59.999999 UTC

}  // namespace

std::string utc_time(int64_t us, bool milliseconds) {
  if (us == std::numeric_limits<int64_t>::min()) return "?";  // kNoTime
  if (us < kFirstDateUs || us > kLastDateUs) return "time_us " + std::to_string(us);
  const time_t secs = time_t(floor_div(us, 1000000));
  struct tm tmv {};
  if (!gmtime_r(&secs, &tmv)) return "time_us " + std::to_string(us);
  char b[64];
  if (milliseconds)
    std::snprintf(b, sizeof b, "%04d-%02d-%02d %02d:%02d:%02d.%03d UTC", tmv.tm_year + 1900, tmv.tm_mon + 1,
                  tmv.tm_mday, tmv.tm_hour, tmv.tm_min, tmv.tm_sec, int(floor_mod(us, 1000000) / 1000));
  else
    std::snprintf(b, sizeof b, "%04d-%02d-%02d %02d:%02d:%02d UTC", tmv.tm_year + 1900, tmv.tm_mon + 1, tmv.tm_mday,
                  tmv.tm_hour, tmv.tm_min, tmv.tm_sec);
  return b;
}

}  // namespace snapdiff
