// chart_dot(): one entry point for every chart kind (include/snapdiff/chart.hpp).
#include <stdexcept>

#include "report/chart_canvas.hpp"

namespace snapdiff {

const char* chart_kind_name(ChartKind k) {
  switch (k) {
    case ChartKind::Flame: return "flame";
    case ChartKind::Lifetime: return "lifetime";
    case ChartKind::Timeline: return "timeline";
  }
  return "?";
}

bool parse_chart_kind(std::string_view s, ChartKind* out) {
  for (ChartKind k : {ChartKind::Flame, ChartKind::Lifetime, ChartKind::Timeline})
    if (s == chart_kind_name(k)) {
      *out = k;
      return true;
    }
  return false;
}

bool chart_format_from_path(std::string_view path, ChartFormat* out) {
  std::string lower(path);
  for (char& c : lower)
    if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
  auto ends = [&](std::string_view suf) {
    return lower.size() > suf.size() && lower.compare(lower.size() - suf.size(), suf.size(), suf) == 0;
  };
  if (ends(".svg")) *out = ChartFormat::Svg;
  else if (ends(".png")) *out = ChartFormat::Png;
  else if (ends(".pdf")) *out = ChartFormat::Pdf;
  else if (ends(".dot") || ends(".gv")) *out = ChartFormat::Dot;
  else return false;
  return true;
}

std::string chart_dot(const Analysis& r, const Trace& t, const ChartOptions& o) {
  detail::ChartRun run{&r, &t, ""};
  switch (o.kind) {
    case ChartKind::Flame: return detail::flame_dot(run, o);
    case ChartKind::Lifetime: return detail::lifetime_dot({run}, o);
    case ChartKind::Timeline: return detail::timeline_dot({run}, o);
  }
  throw std::logic_error("unknown chart kind");
}

std::string chart_dot_diff(const Analysis& a, const Trace& ta, const Analysis& b, const Trace& tb, const ChartOptions& o) {
  detail::ChartRun ra{&a, &ta, "A"}, rb{&b, &tb, "B"};
  switch (o.kind) {
    case ChartKind::Flame: return detail::flame_diff_dot(ra, rb, o);
    case ChartKind::Lifetime: return detail::lifetime_dot({ra, rb}, o);
    case ChartKind::Timeline: return detail::timeline_dot({ra, rb}, o);
  }
  throw std::logic_error("unknown chart kind");
}

}  // namespace snapdiff
