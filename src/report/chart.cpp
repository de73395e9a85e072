// chart_dot(): one entry point for every chart kind, drawn from its series
// (include/snapdiff/report/chart.hpp).
#include <stdexcept>

#include "report/chart_canvas.hpp"

namespace snapdiff {

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

std::string chart_dot(const ChartSeries& s, const ChartOptions& o) {
  switch (s.kind) {
    case ChartKind::Flame: return detail::flame_dot(s, o);
    case ChartKind::Lifetime: return detail::lifetime_dot({&s}, o);
    case ChartKind::Timeline: return detail::timeline_dot({&s}, o);
  }
  throw std::logic_error("unknown chart kind");
}

std::string chart_dot_diff(const ChartSeriesPair& runs, const ChartOptions& o) {
  switch (runs.a.kind) {
    case ChartKind::Flame: return detail::flame_diff_dot(runs.a, runs.b, o);
    case ChartKind::Lifetime: return detail::lifetime_dot({&runs.a, &runs.b}, o);
    case ChartKind::Timeline: return detail::timeline_dot({&runs.a, &runs.b}, o);
  }
  throw std::logic_error("unknown chart kind");
}

}  // namespace snapdiff
