// The one palette of every chart and of the HTML report
// (include/snapdiff/report/chart.hpp).
#include <cmath>
#include <cstdio>
#include <string>

#include "snapdiff/report/chart.hpp"

namespace snapdiff {

namespace {

struct Rgb {
  double r, g, b;
};

Rgb parse_hex(std::string_view s) {
  auto nib = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return 0;
  };
  if (s.size() != 7 || s[0] != '#') return {0.5, 0.5, 0.5};
  auto byte = [&](size_t i) { return double(nib(s[i]) * 16 + nib(s[i + 1])) / 255.0; };
  return {byte(1), byte(3), byte(5)};
}

std::string to_hex(Rgb c) {
  auto clamp = [](double v) { return int(std::lround(std::fmin(1.0, std::fmax(0.0, v)) * 255.0)); };
  char b[8];
  std::snprintf(b, sizeof b, "#%02x%02x%02x", clamp(c.r), clamp(c.g), clamp(c.b));
  return b;
}

Rgb mix(Rgb a, Rgb b, double t) { return {a.r + (b.r - a.r) * t, a.g + (b.g - a.g) * t, a.b + (b.b - a.b) * t}; }

}  // namespace

std::string category_color(std::string_view c) {
  // Built-in categories (attribution.hpp's order). Long-lived state in cool
  // colors, the transient kinds in warm ones; optimizer temporaries red so
  // that a foreach step's spike stands out.
  struct Entry {
    const char* name;
    const char* color;
  };
  static const Entry fixed[] = {
      {"parameter", "#4e79a7"},  {"parameter_copy", "#a0cbe8"}, {"gradient", "#f28e2b"},
      {"optimizer_state", "#59a14f"}, {"optimizer_temporary", "#e15759"}, {"activation", "#76b7b2"},
      {"kv_cache", "#499894"},   {"input", "#8cd17d"},      {"temporary", "#edc948"},   {"workspace", "#b07aa1"},
      {"communication", "#d37295"}, {"graph_pool", "#86bcb6"}, {"leaked", "#ff4f9a"},
      {"unknown", "#9c755f"},
  };
  for (const Entry& e : fixed)
    if (c == e.name) return e.color;
  // Categories a rules file adds: a stable choice by name.
  static const char* extra[] = {"#ff9da7", "#499894", "#d4a6c8", "#ffbe7d", "#bab0ac", "#f1ce63", "#79706e", "#b6992d"};
  uint32_t h = 2166136261u;
  for (char ch : c) h = (h ^ uint8_t(ch)) * 16777619u;
  return extra[h % (sizeof extra / sizeof extra[0])];
}

std::string phase_color(Phase p) {
  switch (p) {
    case Phase::Init: return "#ebebeb";
    case Phase::Forward: return "#edf3fa";
    case Phase::Backward: return "#fbf1e4";
    case Phase::Optimizer: return "#f1ebf5";
    case Phase::Other: return "#f6f6f6";
    case Phase::PreTrace: return "#e2e2e2";
  }
  return "#f6f6f6";
}

std::string change_color(double change) {
  const Rgb neutral = parse_hex("#e4e4e4");
  if (!(std::fabs(change) >= 0.01)) return to_hex(neutral);
  const double t = std::fmin(1.0, std::fabs(change));
  // Two stops per side so that small changes are already visibly tinted.
  const Rgb mid = parse_hex(change > 0 ? "#f4a582" : "#92c5de");
  const Rgb end = parse_hex(change > 0 ? "#b2182b" : "#2166ac");
  return to_hex(t < 0.5 ? mix(neutral, mid, 0.35 + 0.65 * t / 0.5) : mix(mid, end, (t - 0.5) / 0.5));
}

namespace detail {
std::string tint(std::string_view color, double amount) {
  return to_hex(mix(parse_hex(color), Rgb{1, 1, 1}, amount));
}
}  // namespace detail

std::string text_color_on(std::string_view background) {
  Rgb c = parse_hex(background);
  auto lin = [](double v) { return v <= 0.04045 ? v / 12.92 : std::pow((v + 0.055) / 1.055, 2.4); };
  const double l = 0.2126 * lin(c.r) + 0.7152 * lin(c.g) + 0.0722 * lin(c.b);
  return l > 0.3 ? "#1a1a1a" : "#ffffff";
}

}  // namespace snapdiff
