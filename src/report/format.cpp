#include "report/format.hpp"

#include <cstdio>
#include <ctime>
#include <string>

#include "snapdiff/model/model.hpp"
#include "snapdiff/report/report.hpp"

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

namespace detail {

std::string with_commas_signed(int64_t v) {
  const bool neg = v < 0;
  const uint64_t u = neg ? uint64_t(0) - uint64_t(v) : uint64_t(v);
  const std::string digits = std::to_string(u);
  std::string s;
  if (neg) s.push_back('-');
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) s.push_back(',');
    s.push_back(digits[i]);
  }
  return s;
}

std::string share_percent(int64_t part, int64_t whole) {
  char b[16];
  std::snprintf(b, sizeof b, "%5.1f%%", whole > 0 ? 100.0 * double(part) / double(whole) : 0.0);
  return b;
}

std::string change_percent(int64_t delta, int64_t base, int decimals, std::string_view unchanged,
                           std::string_view fresh) {
  if (base == 0) return std::string(delta == 0 ? unchanged : fresh);
  char b[32];
  std::snprintf(b, sizeof b, "%+.*f%%", decimals, 100.0 * double(delta) / double(base));
  return b;
}

std::string compact_percent(double share) {
  char b[32];
  std::snprintf(b, sizeof b, share >= 0.0995 || share == 0 ? "%.0f%%" : "%.1f%%", share * 100);
  return b;
}

std::string utc_time(int64_t us, bool milliseconds) {
  if (us == kNoTime) return "?";
  const time_t secs = time_t(us / 1000000);
  struct tm tmv {};
  gmtime_r(&secs, &tmv);
  char b[48];
  if (milliseconds)
    std::snprintf(b, sizeof b, "%04d-%02d-%02d %02d:%02d:%02d.%03d UTC", tmv.tm_year + 1900, tmv.tm_mon + 1,
                  tmv.tm_mday, tmv.tm_hour, tmv.tm_min, tmv.tm_sec, int((us % 1000000) / 1000));
  else
    std::snprintf(b, sizeof b, "%04d-%02d-%02d %02d:%02d:%02d UTC", tmv.tm_year + 1900, tmv.tm_mon + 1, tmv.tm_mday,
                  tmv.tm_hour, tmv.tm_min, tmv.tm_sec);
  return b;
}

std::string seconds(int64_t us) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3f s", double(us) / 1e6);
  return b;
}

std::string escape(std::string_view s, Markup m) {
  std::string o;
  o.reserve(s.size());
  for (char ch : s) {
    switch (ch) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'':
        if (m == Markup::Html) o += "&#39;";
        else if (m == Markup::Xml) o += "&apos;";
        else o += ch;
        break;
      case '\n':
        o += m == Markup::DotLabel ? ' ' : ch;
        break;
      default:
        // XML 1.0 forbids most control characters, even escaped.
        if (m == Markup::Xml && static_cast<unsigned char>(ch) < 0x20 && ch != '\t' && ch != '\r') o += '?';
        else o += ch;
    }
  }
  return o;
}

}  // namespace detail

}  // namespace snapdiff
