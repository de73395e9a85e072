// Metrics, sizes and tolerances as people write them, and a run's peak
// figures (snapdiff/model/budget.hpp).
#include "snapdiff/model/budget.hpp"

#include <cctype>
#include <cmath>
#include <cstdlib>

#include "snapdiff/error.hpp"
#include "util/quote_value.hpp"

namespace snapdiff {

namespace {

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A non-negative decimal number ("512", "1.5", ".5"), all of `s`.
std::optional<long double> parse_number(const std::string& s) {
  if (s.empty()) return std::nullopt;
  long double v = 0, scale = 1;
  bool dot = false, digits = false;
  for (char c : s) {
    if (c == '.') {
      if (dot) return std::nullopt;
      dot = true;
    } else if (c >= '0' && c <= '9') {
      digits = true;
      if (dot) {
        scale /= 10;
        v += (c - '0') * scale;
      } else {
        v = v * 10 + (c - '0');
      }
      if (v > 1e30L) return std::nullopt;
    } else {
      return std::nullopt;
    }
  }
  if (!digits) return std::nullopt;
  return v;
}

}  // namespace

const char* metric_name(Metric m) {
  switch (m) {
    case Metric::Requested: return "requested";
    case Metric::Allocated: return "allocated";
    case Metric::Reserved: return "reserved";
  }
  return "allocated";
}

Metric parse_metric(const std::string& text) {
  if (text == "requested") return Metric::Requested;
  if (text == "allocated") return Metric::Allocated;
  if (text == "reserved") return Metric::Reserved;
  throw UsageError("unknown metric " + quote_value(text) + " (requested, allocated, reserved)");
}

std::optional<int64_t> parse_size(const std::string& text) {
  std::string s = trim(text);
  size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  auto num = parse_number(s.substr(0, i));
  if (!num) return std::nullopt;
  std::string unit = lower(trim(s.substr(i)));
  long double mult;
  if (unit.empty() || unit == "b") mult = 1;
  else if (unit == "kib") mult = 1024.0L;
  else if (unit == "mib") mult = 1024.0L * 1024;
  else if (unit == "gib") mult = 1024.0L * 1024 * 1024;
  else if (unit == "tib") mult = 1024.0L * 1024 * 1024 * 1024;
  else if (unit == "kb") mult = 1e3L;
  else if (unit == "mb") mult = 1e6L;
  else if (unit == "gb") mult = 1e9L;
  else if (unit == "tb") mult = 1e12L;
  else return std::nullopt;
  long double v = std::round(*num * mult);
  if (v > static_cast<long double>(std::numeric_limits<int64_t>::max() / 2)) return std::nullopt;
  return static_cast<int64_t>(v);
}

std::optional<Amount> parse_amount(const std::string& text) {
  std::string s = trim(text);
  Amount a;
  a.text = s;
  if (!s.empty() && s.back() == '%') {
    auto num = parse_number(trim(s.substr(0, s.size() - 1)));
    if (!num || *num > 1e9L) return std::nullopt;
    a.percent = true;
    a.pct = static_cast<double>(*num);
    return a;
  }
  auto b = parse_size(s);
  if (!b) return std::nullopt;
  a.bytes = *b;
  return a;
}

int64_t Amount::bytes_of(int64_t base) const {
  if (!percent) return bytes;
  if (base <= 0) return 0;
  return static_cast<int64_t>(std::floor(static_cast<long double>(base) * pct / 100.0L));
}

int64_t PeakFigures::peak(Metric m) const {
  switch (m) {
    case Metric::Requested: return requested;
    case Metric::Allocated: return allocated;
    case Metric::Reserved: return reserved;
  }
  return allocated;
}

const ExtentPoint& PhasePeak::peak(Metric m) const {
  switch (m) {
    case Metric::Requested: return requested;
    case Metric::Allocated: return allocated;
    case Metric::Reserved: return reserved;
  }
  return allocated;
}

const ExtentPoint* PhasePeak::category(const std::string& n) const {
  for (const auto& [k, v] : categories)
    if (k == n) return &v;
  return nullptr;
}

const ExtentPoint* PeakFigures::max_of(const std::string& n) const {
  for (const auto& [k, v] : category_max)
    if (k == n) return &v;
  return nullptr;
}

const PhasePeak* PeakFigures::phase_peak(const std::string& n) const {
  for (const PhasePeak& p : phases)
    if (p.phase == n) return &p;
  return nullptr;
}

const std::vector<std::string>& limit_phase_names() {
  static const std::vector<std::string> names = {"init", "forward", "backward", "optimizer", "other"};
  return names;
}

int64_t PeakFigures::category(const std::string& n) const {
  for (const auto& [k, v] : categories)
    if (k == n) return v;
  return -1;
}

}  // namespace snapdiff
