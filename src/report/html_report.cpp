// The HTML report and the HTML diff: one self-contained page each (no
// network: CSS, the charts' SVG and a few lines of JavaScript are inline).
// The report's sections are listed in sections.cpp, each a function here.
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <set>
#include <sstream>

#include "report/chart_canvas.hpp"
#include "report/format.hpp"
#include "report/html_page.hpp"
#include "report/profiler_report.hpp"
#include "report/sections.hpp"
#include "report/text_util.hpp"
#include "snapdiff/report/chart.hpp"
#include "snapdiff/report/explorer.hpp"

namespace snapdiff {

namespace {

using detail::with_commas;




std::string esc(std::string_view s) { return detail::escape(s, detail::Markup::Html); }
using detail::seconds;
std::string pct_of(int64_t part, int64_t whole) { return whole > 0 ? detail::compact_percent(double(part) / double(whole)) : "–"; }
std::string signed_pct(int64_t delta, int64_t base) { return detail::change_percent(delta, base, 1, "", "new"); }


// A category name with its color swatch.
std::string cat_cell(const std::string& name) {
  if (name.empty()) return "";
  return "<span class=\"sw\" style=\"background:" + category_color(name) + "\"></span>" + esc(name);
}

// A number cell that sorts by its value.
std::string num_td(int64_t v, const std::string& text) {
  return "<td class=\"n\" data-v=\"" + std::to_string(v) + "\">" + esc(text) + "</td>";
}

// The text report's site column: the innermost user frame and its callers
// (at most three), and the library function it called.
std::string site_text(const SiteFrames& s) { return detail::site_line(s, 3, " \xe2\x86\x90 "); }  // ←

// The chart's SVG without the XML prolog, doctype and comments, ready to sit
// inside the page.
std::string inline_svg(const std::string& dot) {
  std::string svg = render_chart(dot, ChartFormat::Svg);
  const size_t start = svg.find("<svg");
  if (start != std::string::npos) svg.erase(0, start);
  for (size_t p; (p = svg.find("<!--")) != std::string::npos;) {
    const size_t e = svg.find("-->", p);
    if (e == std::string::npos) break;
    svg.erase(p, e + 3 - p);
  }
  // Scale with the page: the drawing keeps its viewBox.
  const size_t w = svg.find(" width=\"");
  const size_t h = svg.find(" height=\"");
  if (w != std::string::npos && h != std::string::npos && w < svg.find('>') && h < svg.find('>')) {
    const size_t we = svg.find('"', w + 8);
    svg.replace(w, we + 1 - w, "");
    const size_t h2 = svg.find(" height=\"");
    const size_t he = svg.find('"', h2 + 9);
    svg.replace(h2, he + 1 - h2, " preserveAspectRatio=\"xMinYMin meet\" role=\"img\"");
  }
  return svg;
}

const char* kStyle = R"CSS(
:root { --ink:#1f2328; --muted:#59636e; --line:#d8dee4; --bg:#ffffff; --soft:#f6f8fa; --peak:#c0392b; }
* { box-sizing: border-box; }
body { margin:0; font: 14px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif; color:var(--ink); background:var(--bg); }
header { padding: 20px 32px 12px; border-bottom: 1px solid var(--line); background: var(--soft); }
header h1 { margin: 0 0 4px; font-size: 22px; }
header .input { margin: 0; font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 13px; word-break: break-all; }
header .meta { margin: 4px 0 0; color: var(--muted); font-size: 13px; }
nav { padding: 8px 32px; border-bottom: 1px solid var(--line); font-size: 13px; position: sticky; top: 0; background: #fff; z-index: 1; }
nav a { color: #0b5cad; text-decoration: none; margin-right: 14px; white-space: nowrap; }
nav a:hover { text-decoration: underline; }
main { padding: 8px 32px 40px; max-width: 1500px; }
section { margin-top: 26px; }
h2 { font-size: 17px; margin: 0 0 10px; padding-bottom: 4px; border-bottom: 1px solid var(--line); }
h2 .dev { color: var(--muted); font-weight: normal; font-size: 14px; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; margin-bottom: 12px; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: 10px 14px; min-width: 210px; }
.card .k { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
.card .v { font-size: 24px; font-weight: 600; }
.card .s { color: var(--muted); font-size: 12px; font-variant-numeric: tabular-nums; }
.card.peak { border-color: var(--peak); }
ul.findings { padding-left: 20px; margin: 0; }
ul.findings li { margin: 6px 0; max-width: 110ch; }
table { border-collapse: collapse; font-size: 13px; margin: 4px 0; }
th, td { padding: 4px 10px; border-bottom: 1px solid var(--line); text-align: left; vertical-align: top; }
th { background: var(--soft); font-weight: 600; white-space: nowrap; }
table.sortable th { cursor: pointer; user-select: none; }
table.sortable th.sorted-asc::after { content: " \25B2"; font-size: 10px; }
table.sortable th.sorted-desc::after { content: " \25BC"; font-size: 10px; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.site { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12px; word-break: break-word; }
tr.total td { font-weight: 600; border-top: 2px solid var(--line); }
tr.peakrow td { background: #fdf0ee; }
table.kv th { background: none; font-weight: normal; color: var(--muted); border: none; padding: 2px 14px 2px 0; }
table.kv td { border: none; padding: 2px 0; }
.sw { display: inline-block; width: 11px; height: 11px; border-radius: 2px; margin-right: 6px; vertical-align: -1px; }
.bar { display: flex; height: 22px; border-radius: 4px; overflow: hidden; margin: 8px 0 4px; max-width: 1100px; }
.bar span { display: block; height: 100%; }
figure { margin: 8px 0; }
figure svg { width: 100%; max-width: 1200pt; height: auto; display: block; }
figcaption { color: var(--muted); font-size: 12px; margin-top: 4px; max-width: 110ch; }
details { margin: 6px 0; }
summary { cursor: pointer; color: #0b5cad; }
.badge { display: inline-block; font-size: 11px; padding: 0 5px; border-radius: 3px; margin-right: 4px; color: #fff; }
.badge.new { background: #b2182b; } .badge.gone { background: #2166ac; }
.up { color: #b2182b; } .down { color: #2166ac; }
.warn { border-left: 4px solid #d4a017; background: #fffbea; padding: 6px 10px; margin: 6px 0; }
.muted { color: var(--muted); }
footer { padding: 16px 32px; color: var(--muted); font-size: 12px; border-top: 1px solid var(--line); }
)CSS";

// Click a header to sort a table by that column (numbers by data-v).
const char* kScript = R"JS(
(function () {
  function key(td) {
    if (!td) return "";
    var v = td.getAttribute("data-v");
    return v === null ? td.textContent.trim().toLowerCase() : parseFloat(v);
  }
  var tables = document.querySelectorAll("table.sortable");
  Array.prototype.forEach.call(tables, function (table) {
    var heads = table.querySelectorAll("thead th");
    Array.prototype.forEach.call(heads, function (th, col) {
      th.addEventListener("click", function () {
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows).filter(function (r) { return !r.classList.contains("total"); });
        var totals = Array.prototype.slice.call(body.rows).filter(function (r) { return r.classList.contains("total"); });
        var desc = !th.classList.contains("sorted-desc");
        Array.prototype.forEach.call(heads, function (h) { h.classList.remove("sorted-asc", "sorted-desc"); });
        th.classList.add(desc ? "sorted-desc" : "sorted-asc");
        rows.sort(function (a, b) {
          var x = key(a.cells[col]), y = key(b.cells[col]);
          if (x === y) return 0;
          return (x < y ? -1 : 1) * (desc ? -1 : 1);
        });
        rows.concat(totals).forEach(function (r) { body.appendChild(r); });
      });
    });
  });
})();
)JS";

std::string page_start(const std::string& title, bool explorer) {
  return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>" +
         esc(title) + "</title>\n<style>" + kStyle + (explorer ? explorer_style() : "") + "</style>\n</head>\n<body>\n";
}

// The explorer's place in the page (its script fills it).
const char* kExplorerDiv = "<div id=\"sd-explorer\"></div>\n";

// `explorer`: the data (base64, nothing to escape) for the explorer's script.
std::string page_end(const std::string& explorer) {
  std::string s = "<footer>Written by snapdiff " SNAPDIFF_VERSION
                  ", offline: this page loads nothing from the network. Charts drawn with Graphviz.</footer>\n<script>" +
                  std::string(kScript) + "</script>\n";
  if (!explorer.empty())
    s += "<script type=\"application/octet-stream\" id=\"sd-explorer-data\">" + explorer + "</script>\n<script>" +
         explorer_script() + "</script>\n";
  return s + "</body>\n</html>\n";
}

std::string figure(const std::string& svg, const std::string& caption) {
  return "<figure>" + svg + "<figcaption>" + esc(caption) + "</figcaption></figure>\n";
}

std::string phase_words(Phase p, int iteration) {
  return (iteration > 0 ? "iteration " + std::to_string(iteration) + ", " : std::string()) + phase_name(p);
}

// A section of one chart of the device: its title, the drawing (the series
// asked for through `charts`) and its caption.
void chart_section(std::ostream& o, const detail::HtmlDevice& h, ChartKind kind, const char* name, const char* title,
                   const char* caption) {
  ChartOptions co;
  co.device = h.d.device;
  co.kind = kind;
  co.graph_id = h.id + "-" + name + "-svg";
  o << "<section id=\"" << h.id << "-" << name << "\"><h2>" << title << " " << h.dev << "</h2>\n"
    << figure(inline_svg(chart_dot(h.charts(co), co)), caption) << "</section>\n";
}

// The navigation: a link to each section of the list (sections.cpp) that
// has one and something to show.
void nav_links(std::ostringstream& o, const Report& r) {
  for (const detail::ReportSection& s : detail::report_sections()) {
    if (!s.per_device) {
      if (s.nav && (!s.has_content || s.has_content(r))) o << "<a href=\"#" << s.id << "\">" << s.nav << "</a>";
      continue;
    }
    for (size_t i = 0; i < r.devices.size(); ++i) {
      const std::string id = std::string(1, 'd') + std::to_string(i);
      const std::string suffix = r.devices.size() > 1 ? " (cuda:" + std::to_string(r.devices[i].device) + ")" : "";
      for (const detail::DeviceSection& ds : detail::device_sections())
        if (ds.nav && (!ds.has_content || ds.has_content(r.devices[i])))
          o << "<a href=\"#" << id << "-" << ds.id << "\">" << ds.nav << esc(suffix) << "</a>";
    }
  }
}

}  // namespace

namespace detail::as_html {

void peak(std::ostream& o, const HtmlDevice& h) {
  const Report& r = h.r;
  const DeviceView& d = h.d;
  const PeakPoint& pk = d.peak_requested;
  o << "<section id=\"" << h.id << "-peak\"><h2>Peak " << h.dev << "</h2>\n<div class=\"cards\">\n";
  auto card = [&](const char* name, const PeakPoint& p, bool main_peak) {
    o << "<div class=\"card" << (main_peak ? " peak" : "") << "\"><div class=\"k\">" << name << "</div><div class=\"v\">"
      << esc(human_bytes(p.bytes)) << "</div><div class=\"s\">" << with_commas(uint64_t(p.bytes)) << " B, "
      << (p.event_index >= 0 ? "at event " + with_commas(uint64_t(p.event_index)) : std::string("before the first event"))
      << "</div></div>\n";
  };
  card("requested", d.peak_requested, true);
  card("allocated", d.peak_allocated, false);
  if (!d.reported_totals) card("active", d.peak_active, false);  // a trace does not say when frees complete
  card("reserved", d.peak_reserved, false);
  o << "</div>\n<table class=\"kv\">\n";
  o << "<tr><th>events</th><td>" << with_commas(d.events) << ", " << d.streams << (d.streams == 1 ? " stream" : " streams");
  if (d.first_time_us != kNoTime)
    o << ", " << esc(detail::time_span(d.first_time_us, d.last_time_us, false));
  o << "</td></tr>\n";
  if (pk.event_index >= 0) {
    o << "<tr><th>when</th><td>event " << with_commas(uint64_t(pk.event_index)) << " of " << with_commas(d.events);
    if (pk.time_us != kNoTime && d.first_time_us != kNoTime)
      o << ", t = " << esc(detail::signed_seconds_between(d.first_time_us, pk.time_us));
    o << ", " << esc(phase_words(d.peak_phase, d.peak_iteration))
      << " <span class=\"muted\">(the requested peak: the moment the live tensors are largest)</span></td></tr>\n";
    o << "<tr><th>reached by</th><td>" << event_kind_name(d.reached_by.kind) << " of "
      << esc(human_bytes(int64_t(d.reached_by.size))) << " at <code>" << esc(d.peak_user_frame ? d.peak_user_frame->label : std::string("<no stack recorded>"))
      << "</code></td></tr>\n";
    auto kernel = [&](const char* label, const std::optional<KernelRef>& k) {
      if (!k || r.kernel_launches == 0) return;
      o << "<tr><th>" << label << "</th><td><code>" << esc(k->name) << "</code> ("
        << esc(detail::seconds_between(pk.time_us, k->time_us)) << " from the peak)</td></tr>\n";
    };
    kernel("last kernel", d.kernel_before);
    kernel("next kernel", d.kernel_after);
  }
  if (d.window)
    o << "<tr><th>window</th><td>from "
      << esc(detail::moment_words(d.window->first_event, d.window->first_time_us, d.first_time_us, "", 0)) << " to "
      << esc(detail::moment_words(d.window->last_event, d.window->last_time_us, d.first_time_us, "", 0))
      << " <span class=\"muted\">(--window " << esc(d.window->spec) << ": the peaks and phases are within it)</span></td></tr>\n";
  if (d.at)
    o << "<tr><th>at</th><td>"
      << esc(detail::moment_words(d.at->event_index, d.at->time_us, d.first_time_us, phase_name(d.at->phase), d.at->iteration))
      << ": requested " << esc(human_bytes(d.at->counters.requested)) << ", allocated "
      << esc(human_bytes(d.at->counters.allocated)) << ", reserved " << esc(human_bytes(d.at->counters.reserved))
      << " <span class=\"muted\">(--at " << esc(d.at->spec)
      << ": the categories, sites, unknown sites and fragmentation are at this moment; the explanation, the rows by "
         "op and the flame and lifetime charts are of the peak)</span></td></tr>\n";
  o << "</table></section>\n";
}

void explanation(std::ostream& o, const HtmlDevice& h) {
  if (h.d.findings.empty()) return;
  o << "<section id=\"" << h.id << "-explanation\"><h2>Explanation " << h.dev << "</h2><ul class=\"findings\">\n";
  for (const Finding& f : h.d.findings) o << "<li>" << esc(finding_text(f)) << "</li>\n";
  o << "</ul></section>\n";
}

void timeline(std::ostream& o, const HtmlDevice& h) {
  chart_section(o, h, ChartKind::Timeline, "timeline", "Memory over time",
                "Requested bytes by category, stacked; allocated (solid) and reserved (dashed) bytes as lines; the "
                "phases shaded; the red line marks the peak. Hover for values.");
}

void categories(std::ostream& o, const HtmlDevice& h) {
  const DeviceView& d = h.d;
  int64_t total = 0;
  for (int64_t v : d.categories) total += v;
  o << "<section id=\"" << h.id << "-categories\"><h2>" << h.moment_title << " by category " << h.dev << "</h2>\n<div class=\"bar\">";
  for (size_t k = 0; k < d.categories.size(); ++k)
    if (d.categories[k] > 0 && total > 0)
      o << "<span style=\"width:" << 100.0 * double(d.categories[k]) / double(total)
        << "%;background:" << category_color(d.category_names[k]) << "\" title=\"" << esc(d.category_names[k]) << " "
        << esc(human_bytes(d.categories[k])) << "\"></span>";
  o << "</div>\n<table class=\"sortable\"><thead><tr><th>category</th><th class=\"n\">bytes</th><th class=\"n\">%</th>"
       "<th class=\"n\">allocations</th><th class=\"n\">sites</th></tr></thead><tbody>\n";
  std::vector<size_t> order;
  for (size_t k = 0; k < d.categories.size(); ++k)
    if (d.categories[k] != 0) order.push_back(k);
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return d.categories[x] > d.categories[y]; });
  for (size_t k : order)
    o << "<tr><td>" << cat_cell(d.category_names[k]) << "</td>" << num_td(d.categories[k], human_bytes(d.categories[k]))
      << num_td(d.categories[k], pct_of(d.categories[k], total))
      << num_td(int64_t(d.category_allocations[k]), with_commas(d.category_allocations[k]))
      << num_td(int64_t(d.category_sites[k]), with_commas(d.category_sites[k])) << "</tr>\n";
  o << "<tr class=\"total\"><td>TOTAL (= requested peak)</td>" << num_td(total, human_bytes(total))
    << num_td(total, "100%") << num_td(int64_t(d.peak_live_allocations), with_commas(d.peak_live_allocations))
    << "<td></td></tr>\n";
  o << "</tbody></table></section>\n";
}

void flame(std::ostream& o, const HtmlDevice& h) {
  chart_section(o, h, ChartKind::Flame, "flame", "What is live at the peak, by call stack",
                "Callers above callees; width = bytes; color = category (gray: several, their shares along the "
                "bottom). Hover a box for its frame, bytes and categories.");
}

void sites(std::ostream& o, const HtmlDevice& h) {
  const DeviceView& d = h.d;
  o << "<section id=\"" << h.id << "-sites\"><h2>Live " << h.live_title << ", by site " << h.dev << "</h2>\n"
    << "<table class=\"sortable\"><thead><tr><th class=\"n\">bytes</th><th class=\"n\">%</th><th class=\"n\">count</th>"
       "<th>category</th><th>site (innermost user frame \xe2\x86\x90 callers)</th></tr></thead><tbody>\n";
  for (const SiteRow& s : d.sites)
    o << "<tr data-site=\"" << esc(site_text(s.site)) << "\">" << num_td(s.requested_bytes, human_bytes(s.requested_bytes))
      << num_td(s.requested_bytes, pct_of(s.requested_bytes, d.peak_live_requested))
      << num_td(int64_t(s.count), with_commas(s.count)) << "<td>"
      << cat_cell(s.category >= 0 ? d.category_names[size_t(s.category)] : "") << "</td><td class=\"site\">"
      << esc(site_text(s.site) + detail::tensors_words(s)) << "</td></tr>\n";
  if (d.other_sites.count > 0)
    o << "<tr>" << num_td(d.other_sites.requested_bytes, human_bytes(d.other_sites.requested_bytes))
      << num_td(d.other_sites.requested_bytes, pct_of(d.other_sites.requested_bytes, d.peak_live_requested))
      << num_td(int64_t(d.other_sites.count), with_commas(d.other_sites.count))
      << "<td></td><td class=\"site\">[other sites] <span class=\"muted\">(-n N lists more)</span></td></tr>\n";
  o << "<tr class=\"total\">" << num_td(d.peak_live_requested, human_bytes(d.peak_live_requested))
    << num_td(d.peak_live_requested, "100%") << num_td(int64_t(d.peak_live_allocations), with_commas(d.peak_live_allocations))
    << "<td></td><td>TOTAL</td></tr>\n</tbody></table></section>\n";
}

void lifetime(std::ostream& o, const HtmlDevice& h) {
  chart_section(o, h, ChartKind::Lifetime, "lifetime", "Allocation lifetimes",
                "Each bar is one allocation from its allocation to its free, as tall as its size; each band has its "
                "own scale; thin ones are summed, lighter, on top. Hover a bar for its site and when it was allocated "
                "and freed.");
}

}  // namespace detail::as_html

namespace {

// The phases of the first iterations, the peak's and the last (all of them
// with `all`), one row each.
void phase_table(std::ostream& o, const DeviceView& d, bool all) {
  o << "<table class=\"sortable\"><thead><tr><th class=\"n\">iteration</th><th>phase</th><th class=\"n\">events</th>"
       "<th class=\"n\">start</th><th class=\"n\">peak</th><th class=\"n\">end</th><th class=\"n\">rise</th>"
       "<th class=\"n\">reserved at start</th><th class=\"n\">reserved at end</th><th>largest at the phase "
       "peak</th></tr></thead><tbody>\n";
  const std::set<int> shown = {0, 1, 2, d.peak_iteration, d.iterations};
  for (const PhaseSpan& ps : d.phases) {
    if (!all && !shown.count(ps.iteration)) continue;
    size_t big = 0;
    for (size_t k = 0; k < ps.categories.size(); ++k)
      if (ps.categories[k] > ps.categories[big]) big = k;
    const bool is_peak = ps.peak_event == d.peak_requested.event_index && !ps.empty();
    o << "<tr" << (is_peak ? " class=\"peakrow\"" : "") << ">" << num_td(ps.iteration, std::to_string(ps.iteration))
      << "<td>" << phase_name(ps.phase) << (is_peak ? " <b>\xe2\x86\x90 the peak</b>" : "") << "</td>"
      << num_td(ps.start_event, ps.empty() ? std::string("none")
                                           : std::to_string(ps.start_event) + "\xe2\x80\x93" + std::to_string(ps.end_event))
      << num_td(ps.start_requested, human_bytes(ps.start_requested))
      << num_td(ps.peak_requested, human_bytes(ps.peak_requested))
      << num_td(ps.end_requested, human_bytes(ps.end_requested))
      << num_td(ps.peak_requested - ps.start_requested, human_delta(ps.peak_requested - ps.start_requested))
      << num_td(ps.start_reserved, human_bytes(ps.start_reserved)) << num_td(ps.end_reserved, human_bytes(ps.end_reserved))
      << "<td>"
      << (ps.categories.empty() ? "" : cat_cell(d.category_names[big]) + " " + esc(human_bytes(ps.categories[big])))
      << "</td></tr>\n";
  }
  o << "</tbody></table>\n";
}

// One table of rows by op or by kernel, with the rows left out summed.
struct OpTable {
  bool by_kernel;
  const char* anchor;
  const char* title;
  std::string note;
  const char* what;
  const char* where;
  const std::vector<OpRow>& rows;
  const OpRow& other;
  uint64_t all_rows;
  const char* others;
};

void op_table(std::ostream& o, const detail::HtmlDevice& h, const OpTable& t) {
  const DeviceView& d = h.d;
  const int64_t live = d.peak_live_requested;
  o << "<section id=\"" << h.id << "-" << t.anchor << "\"><h2>" << t.title << " " << h.dev << "</h2><p class=\"muted\">"
    << t.note << "</p>\n<table class=\"sortable\"><thead><tr><th class=\"n\">bytes</th><th class=\"n\">%</th>"
    << "<th class=\"n\">count</th><th>category</th><th>" << t.what << "</th><th>" << t.where
    << "</th></tr></thead><tbody>\n";
  for (const OpRow& row : t.rows) {
    const detail::OpRowWords w = detail::op_row_words(d, row, t.by_kernel);
    o << "<tr>" << num_td(row.bytes, human_bytes(row.bytes)) << num_td(row.bytes, pct_of(row.bytes, live))
      << num_td(int64_t(row.count), with_commas(row.count)) << "<td>" << cat_cell(w.category)
      << "</td><td class=\"site\">" << esc(w.what) << "</td><td class=\"site\">" << esc(w.where) << "</td></tr>\n";
  }
  if (t.other.count > 0)
    o << "<tr>" << num_td(t.other.bytes, human_bytes(t.other.bytes)) << num_td(t.other.bytes, pct_of(t.other.bytes, live))
      << num_td(int64_t(t.other.count), with_commas(t.other.count)) << "<td></td><td class=\"muted\">"
      << with_commas(t.all_rows - t.rows.size()) << " " << t.others << "</td><td></td></tr>\n";
  o << "</tbody></table></section>\n";
}

}  // namespace

namespace detail::as_html {

void phases(std::ostream& o, const HtmlDevice& h) {
  const DeviceView& d = h.d;
  if (d.phases.empty()) return;
  o << "<section id=\"" << h.id << "-phases\"><h2>Phases " << h.dev << "</h2><p class=\"muted\">Found from "
    << esc(d.phase_evidence) << ".</p>\n";
  size_t selected = 0;
  const std::set<int> shown = {0, 1, 2, d.peak_iteration, d.iterations};
  for (const PhaseSpan& ps : d.phases) selected += shown.count(ps.iteration);
  phase_table(o, d, selected == d.phases.size());
  if (selected < d.phases.size()) {
    o << "<details><summary>All " << d.phases.size() << " phases (" << d.iterations << " iterations)</summary>\n";
    phase_table(o, d, true);
    o << "</details>\n";
  }
  o << "</section>\n";
}

void unknown(std::ostream& o, const HtmlDevice& h) {
  const DeviceView& d = h.d;
  if (d.unknown_sites.empty()) return;
  o << "<section id=\"" << h.id << "-unknown\"><h2>Unknown " << h.live_title << " " << h.dev
    << "</h2><p class=\"muted\">No rule placed these; add one with <code>--rules</code>.</p>\n"
    << "<table class=\"sortable\"><thead><tr><th class=\"n\">bytes</th><th class=\"n\">count</th><th>allocated in</th>"
       "<th>freed in</th><th>site</th></tr></thead><tbody>\n";
  for (const SiteRow& s : d.unknown_sites)
    o << "<tr data-site=\"" << esc(site_text(s.site)) << "\">" << num_td(s.requested_bytes, human_bytes(s.requested_bytes)) << num_td(int64_t(s.count), with_commas(s.count))
      << "<td>" << esc(phase_words(s.alloc_phase, s.alloc_iteration)) << "</td><td>"
      << esc(s.freed ? phase_words(s.free_phase, s.free_iteration) : "never") << "</td><td class=\"site\">"
      << esc(site_text(s.site)) << "</td></tr>\n";
  o << "</tbody></table></section>\n";
}

// By op and by kernel (inputs with ops: profiler traces, joined snapshots).
void ops(std::ostream& o, const HtmlDevice& h) {
  const DeviceView& d = h.d;
  if (d.kernels_only) {
    op_table(o, h, {true, "kernels", "By kernel at the peak",
                    "Each live byte under the first kernel launched on its stream at or after its allocation: " +
                        esc(detail::kernel_coverage_words(d.kernel_coverage)) + ".",
                    "kernel", "made at", d.by_kernel, d.other_kernels, d.kernel_rows, "other kernels"});
  } else if (d.has_ops) {
    op_table(o, h, {false, "ops", "By op at the peak",
                    "The op that made each live byte: the innermost op around the allocation that launched a kernel.",
                    "op \xe2\x86\x92 kernel", "called from", d.by_op, d.other_ops, d.ops_rows, "other ops"});
    op_table(o, h, {true, "kernels", "By kernel at the peak",
                    "Each live byte under the first kernel its op launched after allocating it.", "kernel",
                    "launched by", d.by_kernel, d.other_kernels, d.kernel_rows, "other kernels"});
  }
}

void fragmentation(std::ostream& o, const HtmlDevice& h) {
  const Fragmentation& f = h.d.frag;
  o << "<section id=\"" << h.id << "-fragmentation\"><h2>Fragmentation " << h.live_title << " " << h.dev << "</h2>\n<table>\n";
  auto row = [&](const std::string& name, int64_t bytes, const std::string& note) {
    o << "<tr><td>" << esc(name) << "</td>" << num_td(bytes, human_bytes(bytes)) << "<td class=\"muted\">" << esc(note)
      << "</td></tr>\n";
  };
  row("reserved \xe2\x88\x92 allocated", f.reserved - f.allocated, pct_of(f.reserved - f.allocated, f.reserved) + " of reserved");
  row("in free blocks", f.free_cached,
      with_commas(f.free_blocks) + " blocks, largest " + human_bytes(int64_t(f.largest_free_block)));
  if (f.pending_free > 0)
    row("pending free", f.pending_free,
        "freed, waiting on other streams; their requested " + human_bytes(f.pending_free_requested) +
            " is part of the requested peak: PyTorch counts a block until its free completes");
  if (f.too_small_threshold > 0)
    row("too small to reuse", f.too_small_bytes,
        "free blocks smaller than the " + human_bytes(int64_t(f.too_small_threshold)) + " block that set the peak");
  for (const FreeSizeClass& c : f.classes)
    if (c.blocks > 0) row(std::string("free ") + c.label, c.bytes, with_commas(c.blocks) + (c.blocks == 1 ? " block" : " blocks"));
  row("allocated \xe2\x88\x92 requested", f.internal,
      std::string("rounding and unsplit block remainders") +
          (f.pending_free_requested > 0 ? "; requested here without the pending frees" : ""));
  o << "</table></section>\n";
}

void end_state(std::ostream& o, const HtmlDevice& h) {
  const EndStateCheck& ck = h.d.end_check;
  if (!ck.have_dump) return;
  o << "<section id=\"" << h.id << "-endstate\"><h2>End state vs dumped segments " << h.dev << "</h2>\n<table><thead><tr>"
       "<th></th><th class=\"n\">replayed</th><th class=\"n\">dumped</th><th></th></tr></thead><tbody>\n";
  auto cmp = [&](const char* name, int64_t a, int64_t b) {
    o << "<tr><td>" << name << "</td>" << num_td(a, human_bytes(a)) << num_td(b, human_bytes(b)) << "<td>"
      << (a == b ? "match" : "<b>differ by " + esc(human_delta(a - b)) + "</b>") << "</td></tr>\n";
  };
  cmp("requested", ck.replay.requested, ck.dump.requested);
  cmp("allocated", ck.replay.allocated, ck.dump.allocated);
  cmp("active", ck.replay.active, ck.dump.active);
  cmp("reserved", ck.replay.reserved, ck.dump.reserved);
  o << "<tr><td>segments</td>" << num_td(int64_t(ck.replay_segments), with_commas(ck.replay_segments))
    << num_td(int64_t(ck.dump_segments), with_commas(ck.dump_segments)) << "<td></td></tr>\n</tbody></table></section>\n";
}

void device_memory(std::ostream& o, const Report& r) {
  if (r.device_memory.empty()) return;
  o << "<section id=\"device-memory\"><h2>Device memory outside the allocator</h2>\n<table><thead><tr><th>device</th>"
       "<th class=\"n\">t</th><th class=\"n\">used</th><th class=\"n\">reserved</th><th class=\"n\">outside</th>"
       "<th>label</th></tr></thead><tbody>\n";
  for (const DeviceMemoryRow& m : r.device_memory)
    o << "<tr><td>cuda:" << m.device << "</td><td class=\"n\">"
      << (m.since_first_event_us != kNoTime ? esc(seconds(m.since_first_event_us)) : std::string("?")) << "</td>"
      << num_td(m.used_bytes, human_bytes(m.used_bytes)) << num_td(m.reserved_bytes, human_bytes(m.reserved_bytes))
      << num_td(m.outside_bytes, human_bytes(m.outside_bytes)) << "<td>" << esc(m.label.empty() ? "-" : m.label)
      << "</td></tr>\n";
  o << "</tbody></table><p class=\"muted\">Outside the allocator: min " << esc(human_bytes(r.outside_min_bytes))
    << ", max " << esc(human_bytes(r.outside_max_bytes)) << " (CUDA context, library handles and modules).</p></section>\n";
}

void explain(std::ostream& o, const Report& r) {
  if (r.explain_query.empty()) return;
  o << "<section id=\"explain\"><h2>Explain <code>" << esc(r.explain_query) << "</code></h2>\n";
  if (r.explain.empty()) o << "<p>Nothing matches.</p>\n";
  else
    o << "<table><thead><tr><th>category</th><th>rule</th><th>why</th><th>allocated</th><th>freed</th><th>site</th>"
         "</tr></thead><tbody>\n";
  for (const ExplainItem& it : r.explain)
    o << "<tr><td>" << cat_cell(it.category) << "</td><td>" << esc(it.rule) << "</td><td>" << esc(detail::explain_evidence(it)) << "</td><td>"
      << (it.alloc_event < 0 ? "before the history" : "event " + std::to_string(it.alloc_event) + ", " +
                                                          esc(phase_words(it.alloc_phase, it.alloc_iteration)))
      << "</td><td>"
      << (it.free_event == INT64_MAX ? "never" : "event " + std::to_string(it.free_event) + ", " +
                                                     esc(phase_words(it.free_phase, it.free_iteration)))
      << "</td><td class=\"site\">" << esc(site_text(it.site)) << "</td></tr>\n";
  if (!r.explain.empty()) o << "</tbody></table>\n";
  o << "</section>\n";
}

void warnings(std::ostream& o, const Report& r) {
  if (r.warnings.empty()) return;
  o << "<section id=\"warnings\"><h2>Warnings</h2>\n";
  for (const Warning& w : r.warnings) o << "<div class=\"warn\"><b>" << esc(code_name(w.code)) << "</b>: " << esc(warning_text(w)) << "</div>\n";
  o << "</section>\n";
}

}  // namespace detail::as_html

std::string detail::html_page_start(const std::string& title) { return page_start(title, false); }
std::string detail::html_page_end() { return page_end(""); }

std::string render_explorer_html(const std::string& title, const std::string& input, const std::string& back,
                                 const std::string& data) {
  std::ostringstream o;
  o << page_start(title, true) << "<header><h1>" << esc(title) << "</h1><p class=\"input\">" << esc(input) << "</p>";
  if (!back.empty()) o << "<p class=\"meta\"><a href=\"" << esc(back) << "\">\xe2\x86\x90 all ranks</a></p>";
  o << "</header>\n" << kExplorerDiv << "<main><p class=\"muted\">The full report of this rank: <code>snapdiff report "
    << esc(input) << " --format html</code>.</p></main>\n" << page_end(data);
  return o.str();
}

// The frame: the page with its header (the input) and navigation, then the
// sections (sections.cpp) in order.
std::string render_html(const Report& r, const ChartSeriesSource& charts, const std::string& explorer) {
  std::ostringstream o;
  o << page_start("snapdiff report: " + detail::base_name(r.input_name), !explorer.empty());
  o << "<header><h1>snapdiff report</h1><p class=\"input\">" << esc(r.input_name) << "</p><p class=\"meta\">"
    << esc(r.source.format) << (r.source.format_detail.empty() ? "" : " (" + esc(r.source.format_detail) + ")")
    << (r.source.gzip ? ", gzip" : "") << ", " << esc(human_bytes(int64_t(r.source.file_bytes))) << " \xc2\xb7 "
    << with_commas(r.events) << " events \xc2\xb7 devices ";
  for (size_t i = 0; i < r.devices.size(); ++i) o << (i ? ", " : "") << "cuda:" << r.devices[i].device;
  if (r.devices.empty()) o << "none";
  if (r.kernel_launches > 0) o << " \xc2\xb7 " << with_commas(r.kernel_launches) << " kernel launches";
  o << " \xc2\xb7 history " << esc(detail::history_words(r)) << "</p></header>\n<nav>";
  nav_links(o, r);
  o << "</nav>\n" << (explorer.empty() ? "" : kExplorerDiv) << "<main>\n";
  for (const detail::ReportSection& s : detail::report_sections()) {
    if (!s.per_device) {
      if (s.html) s.html(o, r);
      continue;
    }
    if (r.devices.empty()) o << "<section><p>No device data in this input.</p></section>\n";
    for (size_t i = 0; i < r.devices.size(); ++i) {
      const DeviceView& d = r.devices[i];
      const std::string moment_title =
          d.at ? (d.at->event_index >= 0 ? "At event " + with_commas(uint64_t(d.at->event_index)) : std::string("Before the first event"))
               : "At the peak";
      const std::string live_title =
          d.at ? (d.at->event_index >= 0 ? "at event " + with_commas(uint64_t(d.at->event_index)) : std::string("before the first event"))
               : "at the peak";
      const detail::HtmlDevice h{r, charts, d, "d" + std::to_string(i),
                                 "<span class=\"dev\">cuda:" + std::to_string(d.device) + "</span>", moment_title, live_title};
      for (const detail::DeviceSection& ds : detail::device_sections())
        if (ds.html) ds.html(o, h);
    }
  }
  o << "</main>\n" << page_end(explorer);
  return o.str();
}

std::string render_diff_html(const Diff& d, const ChartSeriesPairSource& charts, const std::string& explorer) {
  std::ostringstream o;
  o << page_start("snapdiff diff: " + detail::base_name(d.a_name) + " vs " + detail::base_name(d.b_name), !explorer.empty());
  o << "<header><h1>snapdiff diff</h1><p class=\"input\">A: " << esc(d.a_name) << "</p><p class=\"input\">B: "
    << esc(d.b_name) << "</p></header>\n";
  const DeviceView* da = !d.a.devices.empty() ? &d.a.devices[d.a.peak_device] : nullptr;
  const DeviceView* db = !d.b.devices.empty() ? &d.b.devices[d.b.peak_device] : nullptr;
  if (!da || !db) {
    o << "<main><p>One of the inputs has no device data.</p></main>\n" << page_end("");
    return o.str();
  }
  o << "<nav><a href=\"#peak\">Peak</a><a href=\"#findings\">Findings</a><a href=\"#flame\">Flame chart</a>"
       "<a href=\"#timeline\">Timelines</a><a href=\"#categories\">Categories</a><a href=\"#phases\">Phases</a>"
       "<a href=\"#sites\">Sites</a><a href=\"#lifetime\">Lifetimes</a></nav>\n"
    << (explorer.empty() ? "" : kExplorerDiv) << "<main>\n";
  auto delta_td = [](int64_t delta, const std::string& text) {
    return "<td class=\"n " + std::string(delta > 0 ? "up" : delta < 0 ? "down" : "") + "\" data-v=\"" +
           std::to_string(delta) + "\">" + esc(text) + "</td>";
  };
  // Peak.
  o << "<section id=\"peak\"><h2>Peak</h2>\n<table><thead><tr><th></th><th class=\"n\">A</th><th class=\"n\">B</th>"
       "<th class=\"n\">delta</th><th class=\"n\">%</th></tr></thead><tbody>\n";
  for (const detail::DiffPeakRow& p : detail::diff_peak_rows(d))
    o << "<tr><td>" << p.name << "</td>" << num_td(p.a, human_bytes(p.a)) << num_td(p.b, human_bytes(p.b))
      << delta_td(p.delta, human_delta(p.delta)) << delta_td(p.delta, signed_pct(p.delta, p.a)) << "</tr>\n";
  o << "<tr><td>the peak</td><td class=\"n\">" << esc(phase_words(da->peak_phase, da->peak_iteration))
    << "</td><td class=\"n\">" << esc(phase_words(db->peak_phase, db->peak_iteration)) << "</td><td></td><td></td></tr>\n";
  o << "</tbody></table></section>\n";
  // Findings.
  o << "<section id=\"findings\"><h2>Findings</h2><ul class=\"findings\">\n";
  if (d.findings.empty()) o << "<li>None: no difference reaches 1% of the peak.</li>\n";
  for (const Finding& f : d.findings) o << "<li>" << esc(finding_text(f)) << "</li>\n";
  o << "</ul></section>\n";
  // Charts.
  ChartOptions co;
  co.device = da->device;
  const bool same_device = da->device == db->device;
  if (!same_device) co.device = -1;
  co.kind = ChartKind::Flame;
  co.graph_id = "diff-flame-svg";
  o << "<section id=\"flame\"><h2>What changed at the peak, by call stack</h2>\n"
    << figure(inline_svg(chart_dot_diff(charts(co), co)),
              "Bytes live at each run's peak, callers above callees, frames matched by function and file. Width = A + B "
              "bytes; red grew, blue shrank, gray unchanged. Hover a box for A and B.")
    << "</section>\n";
  co.kind = ChartKind::Timeline;
  co.graph_id = "diff-timeline-svg";
  o << "<section id=\"timeline\"><h2>Memory over time, A above B</h2>\n"
    << figure(inline_svg(chart_dot_diff(charts(co), co)),
              "Both runs on the same byte scale and the same x axis.")
    << "</section>\n";
  // Categories.
  o << "<section id=\"categories\"><h2>Categories at each peak</h2>\n<table class=\"sortable\"><thead><tr><th>category"
       "</th><th class=\"n\">A</th><th class=\"n\">B</th><th class=\"n\">delta</th></tr></thead><tbody>\n";
  int64_t ta = 0, tb = 0;
  for (const CategoryDelta& c : d.categories) {
    ta += c.a;
    tb += c.b;
    if (c.a == 0 && c.b == 0) continue;
    o << "<tr><td>" << cat_cell(c.name) << "</td>" << num_td(c.a, human_bytes(c.a)) << num_td(c.b, human_bytes(c.b))
      << delta_td(c.delta(), human_delta(c.delta())) << "</tr>\n";
  }
  o << "<tr class=\"total\"><td>TOTAL</td>" << num_td(ta, human_bytes(ta)) << num_td(tb, human_bytes(tb))
    << delta_td(tb - ta, human_delta(tb - ta)) << "</tr>\n</tbody></table></section>\n";
  // Phases.
  o << "<section id=\"phases\"><h2>Phases</h2><p class=\"muted\">Requested bytes at each phase's peak, aligned by "
       "iteration and phase.</p>\n<table class=\"sortable\"><thead><tr><th class=\"n\">iteration</th><th>phase</th>"
       "<th class=\"n\">A</th><th class=\"n\">B</th><th class=\"n\">delta</th><th class=\"n\">optimizer temporaries A"
       "</th><th class=\"n\">B</th></tr></thead><tbody>\n";
  for (const PhaseDelta& p : d.phases) {
    o << "<tr>" << num_td(p.iteration, std::to_string(p.iteration)) << "<td>" << phase_name(p.phase) << "</td>"
      << (p.in_a ? num_td(p.a_peak, human_bytes(p.a_peak)) : "<td class=\"n\">\xe2\x80\x93</td>")
      << (p.in_b ? num_td(p.b_peak, human_bytes(p.b_peak)) : "<td class=\"n\">\xe2\x80\x93</td>")
      << (p.in_a && p.in_b ? delta_td(p.b_peak - p.a_peak, human_delta(p.b_peak - p.a_peak)) : "<td></td>");
    if (p.phase == Phase::Optimizer)
      o << num_td(p.a_opt_temp, human_bytes(p.a_opt_temp)) << num_td(p.b_opt_temp, human_bytes(p.b_opt_temp));
    else
      o << "<td></td><td></td>";
    o << "</tr>\n";
  }
  o << "</tbody></table></section>\n";
  // Sites.
  o << "<section id=\"sites\"><h2>Sites at each peak</h2><p class=\"muted\">Matched by the function and file of every "
       "frame (never addresses or line numbers).</p>\n<table class=\"sortable\"><thead><tr><th class=\"n\">delta</th>"
       "<th class=\"n\">A</th><th class=\"n\">B</th><th>category</th><th>site</th></tr></thead><tbody>\n";
  for (const SiteDelta& s : d.sites) {
    const std::string badge = s.a_count == 0 ? "<span class=\"badge new\">NEW</span>"
                              : s.b_count == 0 ? "<span class=\"badge gone\">GONE</span>"
                                               : "";
    // data-site: the explorer's form of the site (" ← " between frames), so
    // that a click on the row finds its allocations in both runs.
    std::string key = s.display;
    for (size_t p; (p = key.find(" <- ")) != std::string::npos;) key.replace(p, 4, " \xe2\x86\x90 ");
    o << "<tr data-site=\"" << esc(key) << "\">" << delta_td(s.delta(), human_delta(s.delta())) << num_td(s.a, human_bytes(s.a))
      << num_td(s.b, human_bytes(s.b)) << "<td>" << cat_cell(s.category) << "</td><td class=\"site\">" << badge
      << esc(s.display) << "</td></tr>\n";
  }
  if (d.other_sites.a || d.other_sites.b)
    o << "<tr>" << delta_td(d.other_sites.delta(), human_delta(d.other_sites.delta()))
      << num_td(d.other_sites.a, human_bytes(d.other_sites.a)) << num_td(d.other_sites.b, human_bytes(d.other_sites.b))
      << "<td></td><td class=\"site\">[other sites]</td></tr>\n";
  o << "</tbody></table></section>\n";
  co.kind = ChartKind::Lifetime;
  co.graph_id = "diff-lifetime-svg";
  o << "<section id=\"lifetime\"><h2>Allocation lifetimes, A above B</h2>\n"
    << figure(inline_svg(chart_dot_diff(charts(co), co)),
              "Each band has one scale for both runs; thin allocations are summed, lighter, on top.")
    << "</section>\n";
  o << "</main>\n" << page_end(explorer);
  return o.str();
}

}  // namespace snapdiff
