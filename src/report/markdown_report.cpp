// `snapdiff report FILE --format markdown`: the one-run report for a
// pull-request comment or a notebook: the peak, what is live there by
// category and by site, the phases, the findings and the warnings. Names go
// through the same escaping as the diff's Markdown (markdown_text for plain
// cells, markdown_code for code spans).
#include <algorithm>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "report/format.hpp"
#include "report/text_util.hpp"
#include "snapdiff/report/report.hpp"

namespace snapdiff {

namespace {

using detail::markdown_code;
using detail::markdown_text;
using detail::with_commas;

std::string pct(int64_t part, int64_t whole) {
  std::string s = detail::share_percent(part, whole);  // padded for the text report's columns
  s.erase(0, s.find_first_not_of(' '));
  return s;
}

// The innermost user frame and its callers, as one code span.
std::string site_cell(const SiteRow& s, size_t depth) {
  const std::string line = detail::site_line(s.site, depth, " <- ");
  return line.empty() ? std::string("<no stack recorded>") : markdown_code(line);
}

void device_section(std::ostringstream& o, const DeviceView& d, size_t depth, bool many) {
  o << "\n#### " << (many ? "cuda:" + std::to_string(d.device) + ": " : std::string()) << "Peak\n\n";
  o << "| peak | bytes | at event |\n|---|---:|---:|\n";
  auto row = [&](const char* name, const PeakPoint& p) {
    o << "| " << name << " | " << human_bytes(p.bytes) << " | "
      << (p.event_index >= 0 ? with_commas(uint64_t(p.event_index)) : std::string("before the first")) << " |\n";
  };
  row("requested", d.peak_requested);
  row("allocated", d.peak_allocated);
  row("reserved", d.peak_reserved);
  if (d.peak_requested.event_index >= 0) {
    o << "\nThe requested peak is in " << (d.peak_iteration > 0 ? "iteration " + std::to_string(d.peak_iteration) + ", " : "")
      << phase_name(d.peak_phase) << ", reached by " << event_kind_name(d.reached_by.kind) << " of "
      << human_bytes(int64_t(d.reached_by.size)) << " at "
      << (d.peak_user_frame ? markdown_code(d.peak_user_frame->label) : std::string("&lt;no stack recorded&gt;")) << ".\n";
  }
  if (!d.findings.empty()) {
    o << "\n#### Findings\n\n";
    for (const Finding& f : d.findings) o << "- " << markdown_text(finding_text(f)) << "\n";
  }

  // Categories at the peak, largest first.
  int64_t total = 0;
  const std::vector<std::pair<int64_t, size_t>> rows = detail::categories_by_size(d.categories, total);
  o << "\n#### " << (d.at ? "Categories at the moment asked" : "Categories at the peak") << "\n\n";
  o << "| category | bytes | % | allocations |\n|---|---:|---:|---:|\n";
  for (const auto& [bytes, i] : rows)
    o << "| " << markdown_text(i < d.category_names.size() ? d.category_names[i] : "?") << " | " << human_bytes(bytes)
      << " | " << pct(bytes, total) << " | "
      << (i < d.category_allocations.size() ? with_commas(d.category_allocations[i]) : std::string()) << " |\n";
  o << "| **total** | **" << human_bytes(total) << "** | 100% | " << with_commas(d.peak_live_allocations) << " |\n";

  if (!d.sites.empty()) {
    o << "\n#### Top sites\n\n| bytes | % | count | category | site |\n|---:|---:|---:|---|---|\n";
    for (const SiteRow& s : d.sites)
      o << "| " << human_bytes(s.requested_bytes) << " | " << pct(s.requested_bytes, d.peak_live_requested) << " | "
        << with_commas(s.count) << " | " << markdown_text(s.category >= 0 ? s.category_name : "?") << " | "
        << site_cell(s, depth) << " |\n";
    if (d.other_sites.count > 0)
      o << "| " << human_bytes(d.other_sites.requested_bytes) << " | "
        << pct(d.other_sites.requested_bytes, d.peak_live_requested) << " | " << with_commas(d.other_sites.count)
        << " |  | other sites |\n";
  }

  if (!d.phases.empty()) {
    // As the text report: the first two iterations, the peak's and the last.
    const std::set<int> shown = {0, 1, 2, d.peak_iteration, d.iterations};
    size_t omitted = 0;
    o << "\n<details><summary>Phases (found from " << markdown_text(d.phase_evidence)
      << ")</summary>\n\n| iteration | phase | start | peak | end | largest at the phase peak |\n|---:|---|---:|---:|---:|---|\n";
    for (const PhaseSpan& ps : d.phases) {
      if (!shown.count(ps.iteration)) {
        ++omitted;
        continue;
      }
      size_t big = 0;
      for (size_t i = 0; i < ps.categories.size(); ++i)
        if (ps.categories[i] > ps.categories[big]) big = i;
      std::string largest;
      if (!ps.categories.empty() && big < d.category_names.size())
        largest = markdown_text(d.category_names[big]) + " " + human_bytes(ps.categories[big]);
      const bool peak = ps.peak_event == d.peak_requested.event_index && !ps.empty();
      o << "| " << ps.iteration << " | " << phase_name(ps.phase) << (peak ? " **(the peak)**" : "") << " | "
        << human_bytes(ps.start_requested) << " | " << human_bytes(ps.peak_requested) << " | "
        << human_bytes(ps.end_requested) << " | " << largest << " |\n";
    }
    if (omitted > 0) o << "\n" << omitted << " phases of other iterations omitted; `--format json` lists every phase.\n";
    o << "\n</details>\n";
  }
}

}  // namespace

std::string render_markdown(const Report& r) {
  const size_t depth = r.site_depth == 0 ? SIZE_MAX : r.site_depth;
  std::ostringstream o;
  o << "### snapdiff report: " << markdown_code(r.input_name) << "\n\n";
  o << "- format: " << markdown_text(r.source.format) << (r.source.gzip ? ", gzip" : "") << ", "
    << human_bytes(int64_t(r.source.file_bytes)) << "\n";
  o << "- events: " << with_commas(r.events) << "\n";
  o << "- history: " << markdown_text(detail::history_words(r)) << "\n";
  if (r.devices.empty()) o << "\nThe input has no device data.\n";
  for (const DeviceView& d : r.devices) device_section(o, d, depth, r.devices.size() > 1);
  if (!r.warnings.empty()) {
    o << "\n#### Warnings\n\n";
    for (const Warning& w : r.warnings) o << "- " << markdown_code(code_name(w.code)) << " " << markdown_text(warning_text(w)) << "\n";
  }
  return detail::terminal_safe(o.str());
}

}  // namespace snapdiff
