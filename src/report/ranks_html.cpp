// The HTML page of many ranks: the table, the imbalance, a small-multiples
// timeline (one SVG per rank, one shared x axis and one y scale), the worst
// rank against the median one. Self-contained: nothing from the network.
#include <algorithm>
#include <climits>
#include <cstdio>
#include <map>
#include <sstream>
#include <tuple>

#include "report/format.hpp"
#include "report/html_page.hpp"
#include "report/ranks_parts.hpp"
#include "snapdiff/report/ranks_report.hpp"
#include "snapdiff/report/report.hpp"

namespace snapdiff {

namespace {

using detail::rank_label;

std::string esc(std::string_view s) { return detail::escape(s, detail::Markup::Html); }

std::string num_td(int64_t v, const std::string& text) {
  return "<td class=\"n\" data-v=\"" + std::to_string(v) + "\">" + esc(text) + "</td>";
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

const char* kRanksStyle = R"CSS(<style>
.multiples { display: grid; grid-template-columns: 8em 1fr; gap: 2px 10px; align-items: center; max-width: 1300px; }
.multiples .who { font-size: 12px; text-align: right; word-break: break-all; }
.multiples .who.worst { color: var(--peak); font-weight: 600; }
.multiples svg { width: 100%; height: auto; display: block; }
.multiples svg polyline { fill: none; stroke: #0b5cad; stroke-width: 1.2; }
.multiples svg.worst polyline { stroke: var(--peak); stroke-width: 1.8; }
.multiples svg .axis { stroke: var(--line); stroke-width: 1; }
.multiples svg text { font-size: 9px; fill: var(--muted); font-family: system-ui, sans-serif; }
.multiples svg circle { fill: var(--peak); }
tr.worstrow td { background: #fdf0ee; }
</style>
)CSS";

// A timeline slot: the n-th span of (iteration, phase) in a rank.
struct Slot {
  int iteration = 0;
  int phase = 0;
  int occurrence = 0;
  bool operator<(const Slot& o) const {
    return std::tie(iteration, phase, occurrence) < std::tie(o.iteration, o.phase, o.occurrence);
  }
};

std::vector<Slot> rank_slots(const DeviceView& d) {
  std::vector<Slot> out;
  std::map<std::pair<int, int>, int> seen;
  for (const PhaseSpan& s : d.phases) out.push_back({s.iteration, int(s.phase), seen[{s.iteration, int(s.phase)}]++});
  return out;
}

// The shared x axis: every rank's slots, iteration by iteration; within an
// iteration, the ranks' orders merged (a slot one rank lacks goes right
// after the slot it follows in the ranks that have it), so iteration k's
// backward sits at one x in every rank.
std::map<Slot, size_t> shared_axis(const RanksView& v, std::vector<Slot>& order) {
  std::map<int, std::vector<Slot>> by_iteration;
  for (const RankEntry& e : v.ranks) {
    const DeviceView* d = e.report && e.error.empty() ? detail::rank_device(*e.report) : nullptr;
    if (!d) continue;
    int iteration = INT32_MIN;
    size_t insert_at = 0;
    for (const Slot& s : rank_slots(*d)) {
      std::vector<Slot>& merged = by_iteration[s.iteration];
      if (s.iteration != iteration) insert_at = 0;
      iteration = s.iteration;
      auto same = [&](const Slot& x) { return !(x < s) && !(s < x); };
      const auto it = std::find_if(merged.begin(), merged.end(), same);
      if (it != merged.end()) {
        insert_at = size_t(it - merged.begin()) + 1;
      } else {
        merged.insert(merged.begin() + std::ptrdiff_t(std::min(insert_at, merged.size())), s);
        ++insert_at;
      }
    }
  }
  order.clear();
  for (const auto& kv : by_iteration) order.insert(order.end(), kv.second.begin(), kv.second.end());
  std::map<Slot, size_t> index;
  for (size_t i = 0; i < order.size(); ++i) index[order[i]] = i;
  return index;
}

constexpr double kW = 900, kH = 80, kLeft = 52, kRight = 8, kTop = 6, kBottom = 62;

std::string small_multiples(const RanksView& v) {
  std::vector<Slot> order;
  const std::map<Slot, size_t> index = shared_axis(v, order);
  int64_t ymax = 0;
  for (const RankEntry& e : v.ranks) {
    const DeviceView* d = e.report && e.error.empty() ? detail::rank_device(*e.report) : nullptr;
    if (!d) continue;
    ymax = std::max(ymax, d->peak_requested.bytes);
    for (const PhaseSpan& s : d->phases) ymax = std::max({ymax, s.peak_requested, s.start_requested, s.end_requested});
  }
  const double slot_w = order.empty() ? 0 : (kW - kLeft - kRight) / double(order.size());
  auto x_at = [&](size_t slot, double frac) { return kLeft + (double(slot) + frac) * slot_w; };
  auto y_at = [&](int64_t bytes) {
    return ymax > 0 ? kBottom - (kBottom - kTop) * double(std::max<int64_t>(bytes, 0)) / double(ymax) : kBottom;
  };
  const std::string view_box = "0 0 " + num(kW) + " " + num(kH);
  // The axis every rank shares: iteration ticks with their numbers.
  std::string axis = "<line class=\"axis\" x1=\"" + num(kLeft) + "\" y1=\"" + num(kBottom) + "\" x2=\"" + num(kW - kRight) +
                     "\" y2=\"" + num(kBottom) + "\"/>";
  axis += "<text x=\"2\" y=\"" + num(kTop + 8) + "\">" + esc(human_bytes(ymax)) + "</text><text x=\"2\" y=\"" +
          num(kBottom) + "\">0 B</text>";
  double last_label = -1e9;
  for (size_t i = 0; i < order.size(); ++i) {
    if (i > 0 && order[i - 1].iteration == order[i].iteration) continue;
    const double x = x_at(i, 0);
    axis += "<line class=\"axis\" x1=\"" + num(x) + "\" y1=\"" + num(kTop) + "\" x2=\"" + num(x) + "\" y2=\"" + num(kBottom + 3) + "\"/>";
    if (x - last_label >= 60) {
      axis += "<text x=\"" + num(x + 2) + "\" y=\"" + num(kH - 6) + "\">" +
              esc(order[i].iteration > 0 ? "iteration " + std::to_string(order[i].iteration) : "before") + "</text>";
      last_label = x;
    }
  }

  std::ostringstream o;
  o << "<div class=\"multiples\">\n";
  for (size_t i = 0; i < v.ranks.size(); ++i) {
    const RankEntry& e = v.ranks[i];
    const bool worst = i == v.worst;
    const std::string who = "rank " + rank_label(e.rank);
    o << "<div class=\"who" << (worst ? " worst" : "") << "\" title=\"" << esc(e.name) << "\">" << esc(who)
      << (worst ? " (worst)" : "") << "</div>";
    const DeviceView* d = e.report && e.error.empty() ? detail::rank_device(*e.report) : nullptr;
    if (!d) {
      o << "<div class=\"muted\">" << esc(e.error.empty() ? "no device data" : "not read: " + e.error) << "</div>\n";
      continue;
    }
    o << "<svg class=\"rank" << (worst ? " worst" : "") << "\" viewBox=\"" << view_box
      << "\" preserveAspectRatio=\"xMinYMin meet\" role=\"img\" aria-label=\"" << esc(who) << "\"><title>"
      << esc(who + " (" + e.name + "): requested bytes at each phase's start, peak and end") << "</title>" << axis;
    const std::vector<Slot> slots = rank_slots(*d);
    std::string points;
    size_t prev = SIZE_MAX;
    auto flush = [&] {
      if (!points.empty()) o << "<polyline points=\"" << points << "\"/>";
      points.clear();
    };
    for (size_t k = 0; k < d->phases.size(); ++k) {
      const PhaseSpan& s = d->phases[k];
      const size_t at = index.at(slots[k]);
      if (prev != SIZE_MAX && at != prev + 1) flush();
      prev = at;
      points += num(x_at(at, 0.02)) + "," + num(y_at(s.start_requested)) + " " + num(x_at(at, 0.5)) + "," +
                num(y_at(s.peak_requested)) + " " + num(x_at(at, 0.98)) + "," + num(y_at(s.end_requested)) + " ";
      if (d->peak_index >= s.start_event && d->peak_index <= s.end_event && !s.empty())
        o << "<circle cx=\"" << num(x_at(at, 0.5)) << "\" cy=\"" << num(y_at(d->peak_requested.bytes)) << "\" r=\"2.5\"/>";
    }
    flush();
    if (d->phases.empty())
      o << "<text x=\"" << num(kLeft + 4) << "\" y=\"" << num(kTop + 20) << "\">no phases recorded (peak "
        << esc(human_bytes(d->peak_requested.bytes)) << ")</text>";
    o << "</svg>\n";
  }
  o << "</div>\n";
  return o.str();
}

void rank_table(std::ostringstream& o, const RanksView& v) {
  o << "<table class=\"sortable\"><thead><tr><th class=\"n\">rank</th><th>file</th><th class=\"n\">requested</th>"
       "<th class=\"n\">allocated</th><th class=\"n\">reserved</th><th>peak at</th><th>top categories</th>"
       "<th class=\"n\">free cached</th><th class=\"n\">OOMs</th><th>history</th></tr></thead>\n<tbody>\n";
  for (size_t i = 0; i < v.ranks.size(); ++i) {
    const RankEntry& e = v.ranks[i];
    o << "<tr" << (i == v.worst ? " class=\"worstrow\"" : "") << ">" << num_td(e.rank, rank_label(e.rank))
      << "<td class=\"site\" title=\"" << esc(e.name) << "\">" << esc(detail::short_name(e.name)) << "</td>";
    const DeviceView* d = e.report ? detail::rank_device(*e.report) : nullptr;
    if (!e.error.empty() || !d) {
      o << "<td colspan=\"8\">" << esc(e.error.empty() ? "no device data" : "error: " + e.error) << "</td></tr>\n";
      continue;
    }
    o << num_td(d->peak_requested.bytes, human_bytes(d->peak_requested.bytes))
      << num_td(d->peak_allocated.bytes, human_bytes(d->peak_allocated.bytes))
      << num_td(d->peak_reserved.bytes, human_bytes(d->peak_reserved.bytes)) << "<td>" << esc(detail::peak_when(*d))
      << "</td><td>" << esc(detail::top_categories_text(*d, 2)) << "</td>"
      << num_td(d->frag.free_cached, human_bytes(d->frag.free_cached))
      << num_td(int64_t(detail::rank_ooms(*e.report)), std::to_string(detail::rank_ooms(*e.report))) << "<td>"
      << esc(detail::history_cell(*e.report)) << "</td></tr>\n";
  }
  o << "</tbody></table>\n";
}

// Each rank's explorer is a page of its own beside this one (a page holding
// every rank's allocations would outgrow what a browser opens quickly).
void explorer_picker(std::ostream& o, const RanksView& v) {
  o << "<section id=\"rank-explorer\"><h2>Explorer <span class=\"dev\">one page per rank</span></h2>\n";
  bool any = false;
  for (const RankEntry& e : v.ranks) any = any || !e.explorer_page.empty();
  if (!any) {
    o << "<p class=\"muted\">Each rank's explorer is written beside this page when it goes to a file: "
         "<code>-o ranks.html</code> (or <code>snapdiff view DIR</code>).</p></section>\n";
    return;
  }
  o << "<p><label for=\"sd-rank-pick\">Open the explorer of </label><select id=\"sd-rank-pick\">"
       "<option value=\"\">a rank\xe2\x80\xa6</option>";
  for (size_t i = 0; i < v.ranks.size(); ++i) {
    const RankEntry& e = v.ranks[i];
    if (e.explorer_page.empty()) continue;
    o << "<option value=\"" << esc(e.explorer_page) << "\">" << (e.rank >= 0 ? "rank " : "") << esc(rank_label(e.rank))
      << (e.report ? " \xc2\xb7 peak " + human_bytes(e.report->devices.empty() ? 0 : e.report->devices[e.report->peak_device].peak_requested.bytes) : "")
      << (i == v.worst ? " (worst)" : "") << "</option>";
  }
  o << "</select></p>\n<ul class=\"rank-pages\">";
  for (const RankEntry& e : v.ranks)
    if (!e.explorer_page.empty())
      o << "<li><a href=\"" << esc(e.explorer_page) << "\">" << (e.rank >= 0 ? "rank " : "") << esc(rank_label(e.rank)) << "</a> <span class=\"muted\">"
        << esc(e.name) << "</span></li>";
  o << "</ul>\n<script>document.getElementById(\"sd-rank-pick\").addEventListener(\"change\", function (e) {"
       " if (e.target.value) location.href = e.target.value; });</script></section>\n";
}

}  // namespace

std::string render_ranks_html(const RanksView& v) {
  std::ostringstream o;
  o << detail::html_page_start("snapdiff report: " + std::to_string(v.ranks.size()) + (v.ranks.size() == 1 ? " rank" : " ranks"))
    << kRanksStyle;
  o << "<header><h1>snapdiff report of many ranks</h1><p class=\"meta\">" << esc(detail::ranks_counts(v)) << "</p></header>\n";
  o << "<nav><a href=\"#ranks\">Ranks</a><a href=\"#rank-explorer\">Explorer</a><a href=\"#imbalance\">Imbalance</a><a href=\"#timeline\">Timeline</a>"
       "<a href=\"#worst\">Worst against median</a></nav>\n<main>\n";
  o << "<section id=\"ranks\"><h2>Ranks <span class=\"dev\">each rank's requested peak</span></h2>\n";
  rank_table(o, v);
  if (v.worst < v.ranks.size()) o << "<p class=\"muted\">The worst rank (the highest requested peak) is highlighted.</p>\n";
  o << "</section>\n";
  explorer_picker(o, v);

  o << "<section id=\"imbalance\"><h2>Imbalance</h2>\n<ul class=\"findings\">\n";
  bool any = false;
  for (const RankMetric& m : v.metrics)
    if (detail::metric_varies(m)) {
      any = true;
      o << "<li>" << esc(detail::metric_sentence(v, m)) << "</li>\n";
    }
  if (!any) o << "<li>Every metric is the same on every rank read.</li>\n";
  o << "</ul></section>\n";

  o << "<section id=\"timeline\"><h2>Timeline <span class=\"dev\">requested bytes at each phase's start, peak and end; "
       "one x axis for every rank (iterations aligned), one y scale</span></h2>\n"
    << small_multiples(v) << "</section>\n";

  o << "<section id=\"worst\"><h2>Worst rank against the median rank</h2>\n";
  if (v.worst_vs_median && v.worst < v.ranks.size() && v.median < v.ranks.size()) {
    const Diff& d = *v.worst_vs_median;
    o << "<p>Rank " << esc(rank_label(v.ranks[v.worst].rank)) << " against rank " << esc(rank_label(v.ranks[v.median].rank))
      << ": " << esc(human_delta(d.peak_delta[0])) << " requested at the peak.</p>\n<ul class=\"findings\">\n";
    if (d.findings.empty()) o << "<li>No difference reaches 1% of the peak.</li>\n";
    for (const Finding& f : d.findings) o << "<li>" << esc(finding_text(f)) << "</li>\n";
    o << "</ul>\n<table><thead><tr><th>category</th><th class=\"n\">median rank</th><th class=\"n\">worst rank</th>"
         "<th class=\"n\">change</th></tr></thead><tbody>\n";
    for (const CategoryDelta& c : d.categories)
      if (c.a || c.b)
        o << "<tr><td>" << esc(c.name) << "</td>" << num_td(c.a, human_bytes(c.a)) << num_td(c.b, human_bytes(c.b))
          << num_td(c.delta(), human_delta(c.delta())) << "</tr>\n";
    o << "</tbody></table>\n";
  } else {
    o << "<p>The worst rank is the median rank: nothing to compare.</p>\n";
  }
  o << "</section>\n</main>\n" << detail::html_page_end();
  return o.str();
}

}  // namespace snapdiff
