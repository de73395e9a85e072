#include <cstdio>
#include <string>

#include "snapdiff/report.hpp"

namespace snapdiff {

std::string human_bytes(int64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  bool neg = bytes < 0;
  double v = neg ? -double(bytes) : double(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 6) {
    v /= 1024.0;
    ++u;
  }
  char buf[48];
  if (u == 0) std::snprintf(buf, sizeof buf, "%s%lld B", neg ? "-" : "", (long long)(neg ? -bytes : bytes));
  else std::snprintf(buf, sizeof buf, "%s%.1f %s", neg ? "-" : "", v, units[u]);
  return buf;
}

std::string human_delta(int64_t bytes) {
  // Appended rather than `"+" + human_bytes(...)`: GCC 12 warns (-Wrestrict,
  // a false positive) on operator+(const char*, std::string&&).
  std::string s(bytes >= 0 ? "+" : "");
  s += human_bytes(bytes);
  return s;
}

}  // namespace snapdiff
