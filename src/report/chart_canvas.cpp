// The pinned-position DOT canvas and the pieces every chart shares.
#include "report/chart_canvas.hpp"

#include "report/format.hpp"

#include "snapdiff/model/frame_names.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace snapdiff::detail {

namespace {

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f", v);
  // Trim "12.50" -> "12.5", "12.00" -> "12".
  std::string s = b;
  if (s.find('.') != std::string::npos) {
    while (!s.empty() && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
  }
  if (s == "-0") s = "0";
  return s;
}

std::string inches(double pt) {
  char b[32];
  std::snprintf(b, sizeof b, "%.6f", std::max(pt, 0.0) / 72.0);
  return b;
}

// A tooltip of at most a few KB: the names in it come from the input.
std::string tooltip_text(std::string_view s) { return capped_for_display(std::string(s), 4000); }

// Text for a label, a tooltip or a comment: as display_name writes it, but
// for its line breaks.
std::string display_text(std::string_view s) { return terminal_safe(s); }

// A DOT double-quoted string: quotes and backslashes escaped; newlines as
// Graphviz's "\n" escape; the other control characters and bytes outside
// UTF-8 as display_name shows them ("\x00": Graphviz reads a NUL as the end
// of its input, and a label or tooltip of the SVG must be well-formed XML);
// '&' as "&amp;": Graphviz decodes entities in labels and tooltips, so a
// name holding "&#27;" would put a raw ESC into the SVG.
std::string quoted(std::string_view raw) {
  const std::string s = display_text(raw);
  std::string o = "\"";
  for (char ch : s) {
    if (ch == '&') {
      o += "&amp;";
      continue;
    }
    if (ch == '"' || ch == '\\') o += '\\';
    if (ch == '\n') {
      o += "\\n";
      continue;
    }
    if (ch == '\r') continue;
    o += ch;
  }
  return o + "\"";
}


// Advance widths of Arial/Helvetica, 1/1000 em, for ASCII 32..126.
const uint16_t kWidths[95] = {
    278, 278, 355, 556, 556, 889, 667, 191, 333, 333, 389, 584, 278, 333, 278, 278,  // ' ' .. '/'
    556, 556, 556, 556, 556, 556, 556, 556, 556, 556,                                // '0' .. '9'
    278, 278, 584, 584, 584, 556, 1015,                                              // ':' .. '@'
    667, 667, 722, 722, 667, 611, 778, 722, 278, 500, 667, 556, 833,                 // 'A' .. 'M'
    722, 778, 667, 778, 722, 667, 611, 722, 667, 944, 667, 667, 611,                 // 'N' .. 'Z'
    278, 278, 278, 469, 556, 333,                                                    // '[' .. '`'
    556, 556, 500, 556, 556, 278, 556, 556, 222, 222, 500, 222, 833,                 // 'a' .. 'm'
    556, 556, 556, 556, 333, 500, 278, 556, 500, 722, 500, 500, 500,                 // 'n' .. 'z'
    334, 260, 334, 584,                                                              // '{' .. '~'
};

}  // namespace

void Canvas::box(double x, double y, double w, double h, const BoxStyle& s) {
  Item it{Item::Box, x, y, w, h, s, {}, {}, {}, {}};
  items_.push_back(std::move(it));
}

void Canvas::text(double x, double y, std::string_view s, const TextStyle& st, std::string_view tooltip) {
  if (s.empty()) return;
  Item it{Item::Text, x, y, 0, 0, {}, st, std::string(s), std::string(tooltip), {}};
  items_.push_back(std::move(it));
}

void Canvas::line(const std::vector<Pt>& pts, std::string_view color, double pen, bool dashed) {
  if (pts.size() < 2) return;
  Item it{Item::Line, 0, 0, pen, 0, {}, {}, std::string(color), {}, pts};
  it.box.dashed = dashed;
  items_.push_back(std::move(it));
}

std::string Canvas::to_dot(std::string_view graph_id, std::string_view comment) const {
  std::ostringstream o;
  std::istringstream cm{std::string(comment)};
  for (std::string l; std::getline(cm, l);) o << "// " << display_name(l) << "\n";
  o << "// Every element is pinned: render with `neato -n2 -Tsvg` (or any Graphviz tool: layout=nop2).\n";
  o << "digraph snapdiff {\n";
  o << "  graph [layout=nop2, id=" << quoted(graph_id) << ", bgcolor=\"#ffffff\", pad=0, outputorder=nodesfirst, "
    << "fontname=" << quoted(kChartFont) << "];\n";
  o << "  node [shape=box, style=filled, fixedsize=true, label=\"\", penwidth=0, margin=0, color=\"#ffffff\", "
    << "fontname=" << quoted(kChartFont) << ", fontsize=9];\n";
  o << "  edge [dir=none, headclip=false, tailclip=false, arrowhead=none];\n";
  const double H = height;
  o << "  bg [pos=\"" << num(width / 2) << "," << num(H / 2) << "\", width=" << inches(width) << ", height=" << inches(H)
    << ", fillcolor=\"#ffffff\"];\n";
  size_t id = 0, lines = 0;
  std::vector<const Item*> edges;
  for (const Item& it : items_) {
    if (it.kind == Item::Line) {
      edges.push_back(&it);
      continue;
    }
    if (it.kind == Item::Box) {
      const BoxStyle& s = it.box;
      const double w = std::max(it.w, 1.0), h = std::max(it.h, 1.0);
      if (it.y >= H || it.x >= width) continue;
      o << "  n" << id++ << " [pos=\"" << num(it.x + w / 2) << "," << num(H - (it.y + h / 2)) << "\", width=" << inches(w)
        << ", height=" << inches(h) << ", fillcolor=" << quoted(s.fill);
      if (!s.stroke.empty() && s.stroke_width > 0)
        o << ", color=" << quoted(s.stroke) << ", penwidth=" << num(s.stroke_width);
      if (s.dashed) o << ", style=\"filled,dashed\"";
      if (!s.label.empty()) {
        o << ", label=" << quoted(s.label);
        if (s.font_size != 9) o << ", fontsize=" << num(s.font_size);
        if (s.font_color != kInk) o << ", fontcolor=" << quoted(s.font_color);
        else o << ", fontcolor=\"" << kInk << "\"";
      }
      if (!s.tooltip.empty()) o << ", tooltip=" << quoted(tooltip_text(s.tooltip));
      if (!s.cls.empty()) o << ", class=" << quoted(s.cls);
      o << "];\n";
      continue;
    }
    // Text: a borderless HTML table of a fixed width, so the text's left or
    // right edge lands where asked whatever the font measures.
    const TextStyle& st = it.text;
    const double tw = std::ceil(text_width(it.str, st.size, st.bold) * 1.15 + 6);
    const double th = std::ceil(st.size * 1.3 + 2);
    double cx = it.x;
    const char* al = "CENTER";
    if (st.align == Align::Left) cx = it.x + tw / 2, al = "LEFT";
    if (st.align == Align::Right) cx = it.x - tw / 2, al = "RIGHT";
    std::string body = escape(it.str, Markup::DotLabel);
    if (st.bold) body = "<B>" + body + "</B>";
    o << "  n" << id++ << " [shape=plain, style=\"\", fixedsize=false, pos=\"" << num(cx) << "," << num(H - it.y)
      << "\", label=<<TABLE BORDER=\"0\" CELLBORDER=\"0\" CELLPADDING=\"0\" CELLSPACING=\"0\" FIXEDSIZE=\"TRUE\" WIDTH=\""
      << int(tw) << "\" HEIGHT=\"" << int(th) << "\"><TR><TD ALIGN=\"" << al << "\" FIXEDSIZE=\"TRUE\" WIDTH=\"" << int(tw)
      << "\" HEIGHT=\"" << int(th) << "\"><FONT POINT-SIZE=\"" << num(st.size) << "\" COLOR=\"" << st.color << "\">"
      << body << "</FONT></TD></TR></TABLE>>";
    if (!it.tooltip.empty()) o << ", tooltip=" << quoted(tooltip_text(it.tooltip));
    o << "];\n";
  }
  // Polylines: an edge between two invisible points, its spline given as
  // cubic segments whose control points sit on the line (straight pieces).
  for (const Item* it : edges) {
    const auto& p = it->pts;
    auto pt = [&](const Pt& q) { return num(q.x) + "," + num(H - q.y); };
    std::string a = "l", b = "l";
    a += std::to_string(lines);
    b += std::to_string(lines);
    a += 'a';
    b += 'b';
    ++lines;
    o << "  " << a << " [shape=point, style=invis, width=0, height=0, pos=\"" << pt(p.front()) << "\"];\n";
    o << "  " << b << " [shape=point, style=invis, width=0, height=0, pos=\"" << pt(p.back()) << "\"];\n";
    std::string spline = pt(p[0]);
    for (size_t i = 1; i < p.size(); ++i) {
      const std::string end = pt(p[i]);
      spline += ' ';
      spline += pt(p[i - 1]);
      spline += ' ';
      spline += end;
      spline += ' ';
      spline += end;
    }
    o << "  " << a << " -> " << b << " [pos=\"" << spline << "\", color=" << quoted(it->str) << ", penwidth=" << num(it->w);
    if (it->box.dashed) o << ", style=dashed";
    o << "];\n";
  }
  o << "}\n";
  return o.str();
}

namespace {
// Width units of one byte (a multi-byte character counts at its first byte).
double byte_units(unsigned char ch) {
  if (ch >= 32 && ch < 127) return kWidths[ch - 32];
  if (ch >= 0xc0) return 800;
  if (ch < 0x80) return 500;
  return 0;
}
}  // namespace

double text_width(std::string_view s, double size, bool bold) {
  double units = 0;
  for (unsigned char ch : s) units += byte_units(ch);
  return units / 1000.0 * size * (bold ? 1.08 : 1.0);
}

// The longest prefix (at a character boundary) that fits with an ellipsis,
// found in one pass: widths add up character by character.
std::string fit_text(std::string_view s, double max_width, double size, bool bold) {
  if (text_width(s, size, bold) <= max_width) return std::string(s);
  const std::string_view ell = "\xe2\x80\xa6";  // …
  double ell_units = 0;
  for (unsigned char ch : ell) ell_units += byte_units(ch);
  size_t cut = 0;
  bool found = false;
  double units = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xc0) != 0x80) {  // a character starts here
      if ((units + ell_units) / 1000.0 * size * (bold ? 1.08 : 1.0) > max_width) break;
      cut = i;
      found = true;
    }
    units += byte_units(static_cast<unsigned char>(s[i]));
  }
  if (!found || cut < 3) return {};
  return std::string(s.substr(0, cut)) + std::string(ell);
}


std::string axis_bytes(int64_t bytes) {
  if (bytes == 0) return "0";
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  const bool neg = bytes < 0;
  double v = std::fabs(double(bytes));
  int u = 0;
  while (v >= 1024.0 && u < 5) v /= 1024.0, ++u;
  char b[48];
  std::snprintf(b, sizeof b, "%.2f", v);
  std::string s = b;
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return (neg ? "-" : "") + s + " " + units[u];
}

std::string axis_seconds(double s, double step) {
  const char* unit = "s";
  double scale = 1;
  if (step < 0.001 && step > 0) unit = "us", scale = 1e6;
  else if (step < 1) unit = "ms", scale = 1e3;
  const double v = s * scale, st = step * scale;
  int decimals = 0;
  if (st > 0 && st < 1) decimals = int(std::ceil(-std::log10(st) - 1e-9));
  if (std::fabs(st * std::pow(10, decimals) - std::round(st * std::pow(10, decimals))) > 1e-6) ++decimals;  // 2.5
  char b[48];
  std::snprintf(b, sizeof b, "%.*f %s", std::min(decimals, 6), std::fabs(v) < st * 1e-6 ? 0.0 : v, unit);
  return b;
}

namespace {
double nice_step(double raw) {
  if (!(raw > 0)) return 1;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * p >= raw * (1 - 1e-9)) return m * p;
  return 10 * p;
}
}  // namespace

std::vector<int64_t> byte_ticks(int64_t max, int target) {
  std::vector<int64_t> out{0};
  if (max <= 0) return out;
  double unit = 1;
  while (unit * 1024 <= double(max)) unit *= 1024;
  double step = nice_step(double(max) / unit / std::max(1, target)) * unit;
  if (step < 1) step = 1;
  const int64_t st = int64_t(std::llround(step));
  for (int64_t v = st; ; v += st) {
    out.push_back(v);
    if (v >= max) break;
  }
  return out;
}

std::vector<double> value_ticks(double lo, double hi, int target) {
  std::vector<double> out;
  if (!(hi > lo)) return {lo};
  const double step = nice_step((hi - lo) / std::max(1, target));
  for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step) out.push_back(v);
  return out;
}

std::string device_name(const ChartSeries& s) { return s.device >= 0 ? "cuda:" + std::to_string(s.device) : "no device"; }

std::string base_name(std::string_view path) {
  size_t cut = path.find_last_of('/');
  return display_name(cut == std::string_view::npos ? path : path.substr(cut + 1));
}

double draw_title(Canvas& c, double x, double y, const std::string& title, const std::string& subtitle) {
  TextStyle t;
  t.size = 14;
  t.bold = true;
  c.text(x, y + 10, fit_text(title, c.width - 2 * x, 14, true), t);
  if (subtitle.empty()) return y + 26;
  TextStyle s;
  s.size = 10;
  s.color = kMutedInk;
  c.text(x, y + 29, fit_text(subtitle, c.width - 2 * x, 10), s);
  return y + 42;
}

double draw_legend(Canvas& c, double x, double y, double max_x, const std::vector<LegendItem>& items) {
  double cx = x;
  const double row = 16, size = 9.5;
  TextStyle ts;
  ts.size = size;
  for (const LegendItem& it : items) {
    const double w = 10 + 4 + text_width(it.label, size) + 16;
    if (cx > x && cx + w > max_x) {
      cx = x;
      y += row;
    }
    if (!it.color.empty()) {
      BoxStyle b;
      b.fill = it.color;
      b.cls = it.cls;
      b.stroke = "#ffffff";
      c.box(cx, y + 3, 10, 10, b);
    } else {
      c.line({{cx - 2, y + 8}, {cx + 12, y + 8}}, it.line_color, 2, it.dashed);
    }
    c.text(cx + 14, y + 8, it.label, ts);
    cx += w;
  }
  return y + row + 4;
}

void draw_phase_bands(Canvas& c, const std::vector<PhaseBand>& bands, const XScale& xs, double top, double bottom) {
  for (const PhaseBand& b : bands) {
    const double x0 = std::round(xs(b.x0)), x1 = std::round(xs(b.x1));
    if (x1 - x0 < 1) continue;
    BoxStyle s;
    s.fill = phase_color(b.phase);
    s.cls = "phase";
    c.box(x0, top, x1 - x0, bottom - top, s);
  }
  // Iteration boundaries (at most one every 4 pt: runs of thousands of
  // iterations stay a few hundred elements).
  double last = -1e9;
  for (size_t i = 1; i < bands.size(); ++i) {
    if (bands[i].iteration == bands[i - 1].iteration) continue;
    const double x = std::round(xs(bands[i].x0));
    if (x - last < 4) continue;
    last = x;
    BoxStyle s;
    s.fill = "#c9c9c9";
    s.cls = "iteration";
    c.box(x, top, 1, bottom - top, s);
  }
}

double draw_phase_strip(Canvas& c, const std::vector<PhaseBand>& bands, const XScale& xs, double y) {
  if (bands.empty()) return y;
  // Row 1: iterations.
  TextStyle it;
  it.size = 8.5;
  it.color = kMutedInk;
  it.align = Align::Center;
  size_t i = 0;
  double last_label_end = -1e9;
  while (i < bands.size()) {
    size_t j = i;
    while (j + 1 < bands.size() && bands[j + 1].iteration == bands[i].iteration) ++j;
    const double x0 = xs(bands[i].x0), x1 = xs(bands[j].x1);
    const int iter = bands[i].iteration;
    std::string label = iter == 0 ? "init" : "iteration " + std::to_string(iter);
    if (text_width(label, it.size) + 4 > x1 - x0) label = iter == 0 ? "init" : "iter " + std::to_string(iter);
    if (text_width(label, it.size) + 4 > x1 - x0) label = iter == 0 ? "" : std::to_string(iter);
    const double w = text_width(label, it.size);
    const double mid = (x0 + x1) / 2;
    if (!label.empty() && mid - w / 2 > last_label_end + 3) {
      c.text(mid, y + 6, label, it);
      last_label_end = mid + w / 2;
    }
    i = j + 1;
  }
  y += 13;
  // Row 2: phases.
  TextStyle ps;
  ps.size = 7.5;
  ps.color = "#444444";
  ps.align = Align::Center;
  for (const PhaseBand& b : bands) {
    const double x0 = std::round(xs(b.x0)), x1 = std::round(xs(b.x1));
    if (x1 - x0 < 1) continue;
    BoxStyle s;
    s.fill = phase_color(b.phase);
    s.stroke = "#ffffff";
    s.stroke_width = 0.5;
    s.cls = "phase";
    s.tooltip = std::string(phase_name(b.phase)) + (b.iteration > 0 ? ", iteration " + std::to_string(b.iteration) : "");
    c.box(x0, y, x1 - x0, 11, s);
    std::string name = phase_name(b.phase);
    if (text_width(name, ps.size) + 4 > x1 - x0) name = std::string(1, char(name[0] - 'a' + 'A'));
    if (text_width(name, ps.size) + 2 <= x1 - x0) c.text((x0 + x1) / 2, y + 5.5, name, ps);
  }
  return y + 13;
}

double draw_x_axis(Canvas& c, const XScale& xs, double y, bool time_axis) {
  BoxStyle axis;
  axis.fill = "#999999";
  c.box(std::round(xs.px0), y, std::round(xs.px1) - std::round(xs.px0), 1, axis);
  const int target = std::max(2, int((xs.px1 - xs.px0) / 90));
  std::vector<double> ticks = value_ticks(xs.v0, xs.v1, target);
  const double step = ticks.size() > 1 ? ticks[1] - ticks[0] : 1;
  TextStyle ts;
  ts.size = 8.5;
  ts.color = kMutedInk;
  ts.align = Align::Center;
  for (double v : ticks) {
    const double x = std::round(xs(v));
    c.box(x, y + 1, 1, 4, axis);
    std::string label = time_axis ? axis_seconds(v, step) : with_commas(uint64_t(std::llround(v)));
    c.text(x, y + 12, label, ts);
  }
  TextStyle tt = ts;
  tt.align = Align::Right;
  c.text(xs.px1, y + 25, time_axis ? "time since the first event" : "event index", tt);
  return y + 32;
}

double draw_x_axis(Canvas& c, const XScale& xs, double y, bool time_axis, SharedAxis shared,
                   const std::vector<IterationMark>& marks) {
  if (shared == SharedAxis::None) return draw_x_axis(c, xs, y, time_axis);
  BoxStyle axis;
  axis.fill = "#999999";
  c.box(std::round(xs.px0), y, std::round(xs.px1) - std::round(xs.px0), 1, axis);
  TextStyle ts;
  ts.size = 8.5;
  ts.color = kMutedInk;
  ts.align = Align::Center;
  std::string title;
  if (shared == SharedAxis::Iterations) {
    // "iteration 1" at the first, numbers after it; a label that would
    // touch the one before it is left out (its tick stays).
    double last_end = -1e9;
    bool named = false;
    for (const IterationMark& m : marks) {
      const double x = std::round(xs(m.x));
      c.box(x, y + 1, 1, 4, axis);
      const std::string label = named ? std::to_string(m.iteration) : "iteration " + std::to_string(m.iteration);
      const double w = text_width(label, ts.size);
      double cx = std::max(x, xs.px0 + w / 2);
      cx = std::min(cx, xs.px1 - w / 2);
      if (cx - w / 2 < last_end + 4) continue;
      c.text(cx, y + 12, label, ts);
      last_end = cx + w / 2;
      named = true;
    }
    title = "iterations aligned: each starts at the same x in both runs";
  } else {
    for (int i = 0; i <= 4; ++i) {
      const double x = std::round(xs(xs.v0 + (xs.v1 - xs.v0) * i / 4));
      c.box(x, y + 1, 1, 4, axis);
      c.text(x, y + 12, std::to_string(i * 25) + "%", ts);
    }
    title = "position in each run, first event to last (a run has no iterations to align)";
  }
  TextStyle tt = ts;
  tt.align = Align::Right;
  c.text(xs.px1, y + 25, title, tt);
  return y + 32;
}

void draw_peak_marker(Canvas& c, double x, double top, double bottom, const std::string& label, double min_x,
                      double max_x) {
  c.line({{x, top - 4}, {x, bottom}}, kPeakColor, 1.2, true);
  TextStyle ts;
  ts.size = 8.5;
  ts.color = kPeakColor;
  ts.bold = true;
  const double w = text_width(label, ts.size, true);
  if (x + 4 + w <= max_x) {
    ts.align = Align::Left;
    c.text(x + 4, top - 4, label, ts);
  } else {
    ts.align = Align::Right;
    c.text(std::max(x - 4, min_x + w), top - 4, label, ts);
  }
}

}  // namespace snapdiff::detail
