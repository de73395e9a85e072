// Files of a folder that are not ranks of one job (analysis/ranks.hpp,
// judge_one_job): one line saying why, then a table of runs, each with its
// peaks, history and top categories: text, JSON (schemas/runs.schema.json),
// Markdown and HTML.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "report/format.hpp"
#include "report/html_page.hpp"
#include "report/ranks_parts.hpp"
#include "report/text_util.hpp"
#include "snapdiff/report/ranks_report.hpp"
#include "snapdiff/report/report.hpp"

namespace snapdiff {

namespace {

using J = nlohmann::ordered_json;
using detail::pad_left;
using detail::pad_right;
std::string dn(std::string_view s) { return detail::display_name(s); }

std::string ratio(int64_t big, int64_t small) {
  if (small <= 0) return "";
  char b[32];
  const double r = double(big) / double(small);
  std::snprintf(b, sizeof b, r >= 100 ? "%.0fx" : "%.1fx", r);
  return b;
}

std::string duration(int64_t us) {
  const double s = double(us) / 1e6;
  char b[48];
  if (s < 3600) std::snprintf(b, sizeof b, "%.0f minutes", s / 60);
  else if (s < 2 * 86400) std::snprintf(b, sizeof b, "%.1f hours", s / 3600);
  else std::snprintf(b, sizeof b, "%.0f days", s / 86400);
  return b;
}

}  // namespace

std::string not_one_job_words(const NotOneJob& j) {
  std::vector<std::string> w;
  if (!j.device_totals.empty()) {
    std::string s = "devices of different sizes (";
    for (size_t i = 0; i < j.device_totals.size(); ++i) s += (i ? ", " : "") + human_bytes(int64_t(j.device_totals[i]));
    w.push_back(s + ")");
  }
  if (j.parameters_differ)
    w.push_back("parameters at the peak from " + human_bytes(j.parameters_min) + " to " + human_bytes(j.parameters_max));
  if (j.far_apart) w.push_back("recorded " + duration(j.gap_us) + " apart");
  if (j.peaks_differ)
    w.push_back("peaks from " + human_bytes(j.peak_min) + " to " + human_bytes(j.peak_max) +
                (j.peak_min > 0 ? " (" + ratio(j.peak_max, j.peak_min) + ")" : ""));
  std::string s;
  for (size_t i = 0; i < w.size(); ++i) s += (i ? "; " : "") + w[i];
  return s;
}

std::string separate_runs_line(const std::vector<RankEntry>& runs, const NotOneJob& j) {
  return "these " + std::to_string(runs.size()) + " files do not look like ranks of one job (" + not_one_job_words(j) +
         "): reporting them as separate runs";
}

std::string render_runs_text(const std::vector<RankEntry>& runs, const NotOneJob& j, size_t width) {
  std::ostringstream o;
  o << detail::prose("snapdiff report: ", dn(separate_runs_line(runs, j))) << "\n\n";
  o << "RUNS  (each file's peaks, on its top device)\n";
  // A paragraph per run: it fits any width, and the file's name is never cut.
  for (const RankEntry& e : runs) {
    const DeviceView* d = e.report ? detail::rank_device(*e.report) : nullptr;
    std::string text = dn(e.name) + ": ";
    if (!e.error.empty() || !d) {
      text += e.error.empty() ? "no device data" : "error: " + dn(e.error);
    } else {
      text += "requested " + human_bytes(d->peak_requested.bytes) + ", allocated " +
              human_bytes(d->peak_allocated.bytes) + ", reserved " + human_bytes(d->peak_reserved.bytes) +
              " at the peak; history " + detail::history_cell(*e.report) + "; largest " +
              dn(detail::top_categories_text(*d, 2));
    }
    o << detail::prose("  * ", text) << "\n";
  }
  o << "\n" << detail::prose("", "Each run's full report: snapdiff report FILE. To compare two of them: snapdiff diff A B.")
    << "\n";
  return detail::finish_text(o.str(), width);
}

std::string render_runs_json(const std::vector<RankEntry>& runs, const NotOneJob& j) {
  J out;
  out["schema"] = "snapdiff/runs/1";
  out["kind"] = "separate_runs";
  out["message"] = separate_runs_line(runs, j);
  J why;
  why["device_total_bytes"] = j.device_totals;
  why["parameters_differ"] = j.parameters_differ;
  why["parameters_min_bytes"] = j.parameters_min;
  why["parameters_max_bytes"] = j.parameters_max;
  why["far_apart"] = j.far_apart;
  why["gap_us"] = j.gap_us;
  why["peaks_differ"] = j.peaks_differ;
  why["peak_min_bytes"] = j.peak_min;
  why["peak_max_bytes"] = j.peak_max;
  out["why"] = why;
  out["runs"] = J::array();
  for (const RankEntry& e : runs) {
    J r;
    r["file"] = e.name;
    const DeviceView* d = e.report ? detail::rank_device(*e.report) : nullptr;
    r["error"] = e.error.empty() ? J(nullptr) : J(e.error);
    if (d) {
      r["device"] = d->device;
      r["peak_requested_bytes"] = d->peak_requested.bytes;
      r["peak_allocated_bytes"] = d->peak_allocated.bytes;
      r["peak_reserved_bytes"] = d->peak_reserved.bytes;
      r["history"] = detail::history_cell(*e.report);
      r["top_categories"] = J::array();
      for (const auto& [name, bytes] : detail::top_categories(*d, 3))
        r["top_categories"].push_back({{"category", name}, {"bytes", bytes}});
    }
    out["runs"].push_back(std::move(r));
  }
  return detail::json_safe(out.dump(2, ' ', false, J::error_handler_t::replace)) + "\n";
}

std::string render_runs_markdown(const std::vector<RankEntry>& runs, const NotOneJob& j) {
  std::ostringstream o;
  o << "### snapdiff: separate runs\n\n" << detail::markdown_text(separate_runs_line(runs, j)) << ".\n\n";
  o << "| file | requested | allocated | reserved | history | top categories |\n|---|---:|---:|---:|---|---|\n";
  for (const RankEntry& e : runs) {
    const DeviceView* d = e.report ? detail::rank_device(*e.report) : nullptr;
    o << "| " << detail::markdown_code(e.name) << " | ";
    if (!e.error.empty() || !d) {
      o << detail::markdown_text(e.error.empty() ? "no device data" : "error: " + e.error) << " | | | | |\n";
      continue;
    }
    o << human_bytes(d->peak_requested.bytes) << " | " << human_bytes(d->peak_allocated.bytes) << " | "
      << human_bytes(d->peak_reserved.bytes) << " | " << detail::markdown_text(detail::history_cell(*e.report)) << " | "
      << detail::markdown_text(detail::top_categories_text(*d, 3)) << " |\n";
  }
  return detail::terminal_safe(o.str());
}

std::string render_runs_html(const std::vector<RankEntry>& runs, const NotOneJob& j) {
  auto esc = [](std::string_view s) { return detail::escape(s, detail::Markup::Html); };
  std::ostringstream o;
  o << detail::html_page_start("snapdiff report: " + std::to_string(runs.size()) + " separate runs");
  o << "<header><h1>snapdiff report: separate runs</h1><p class=\"meta\">" << esc(separate_runs_line(runs, j))
    << "</p></header>\n<main>\n<section id=\"runs\"><h2>Runs</h2>\n<table>\n<thead><tr><th>file</th><th>requested</th>"
       "<th>allocated</th><th>reserved</th><th>history</th><th>top categories</th></tr></thead>\n<tbody>\n";
  for (const RankEntry& e : runs) {
    const DeviceView* d = e.report ? detail::rank_device(*e.report) : nullptr;
    o << "<tr><td>" << esc(e.name) << "</td>";
    if (!e.error.empty() || !d) {
      o << "<td colspan=\"5\">" << esc(e.error.empty() ? "no device data" : "error: " + e.error) << "</td></tr>\n";
      continue;
    }
    o << "<td class=\"n\">" << esc(human_bytes(d->peak_requested.bytes)) << "</td><td class=\"n\">"
      << esc(human_bytes(d->peak_allocated.bytes)) << "</td><td class=\"n\">" << esc(human_bytes(d->peak_reserved.bytes))
      << "</td><td>" << esc(detail::history_cell(*e.report)) << "</td><td>" << esc(detail::top_categories_text(*d, 3))
      << "</td></tr>\n";
  }
  o << "</tbody>\n</table>\n</section>\n</main>\n" << detail::html_page_end();
  return o.str();
}

}  // namespace snapdiff
