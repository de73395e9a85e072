// The sections of `snapdiff report`, in the order the text and the HTML
// report print them (sections.hpp).
#include "report/sections.hpp"

#include "report/oom_report.hpp"
#include "report/outside_report.hpp"
#include "report/profiler_report.hpp"

namespace snapdiff::detail {

namespace {

// The sections written in other files, which return their text.
void oom_as_text(std::ostream& o, const Report& r) { o << oom_text(r); }
void oom_as_html(std::ostream& o, const Report& r) { o << oom_html(r); }
void activity_as_text(std::ostream& o, const Report& r) { o << activity_text(r); }
void memory_timeline_as_text(std::ostream& o, const Report& r) { o << timeline_text(r); }
void outside_as_text(std::ostream& o, const Report& r) { o << outside_text(r); }
void outside_as_html(std::ostream& o, const Report& r) { o << outside_html(r); }
void ops_as_text(std::ostream& o, const TextDevice& t) { o << ops_text(t.d); }

}  // namespace

const std::vector<ReportSection>& report_sections() {
  static const std::vector<ReportSection> list = {
      // A run that died of OOM: why, before anything else.
      {"oom", "Out of memory", [](const Report& r) { return !r.ooms.empty(); }, oom_as_text, oom_as_html},
      // The HTML states the input in its page's header.
      {"input", nullptr, nullptr, as_text::input, nullptr},
      // A profiler trace without memory events: what it holds instead.
      {"activity", nullptr, nullptr, activity_as_text, nullptr},
      {"devices", nullptr, nullptr, nullptr, nullptr, /*per_device=*/true},
      {"memory-timeline", nullptr, nullptr, memory_timeline_as_text, nullptr},
      {"device-memory", nullptr, nullptr, as_text::device_memory, as_html::device_memory},
      {"outside", nullptr, nullptr, outside_as_text, outside_as_html},
      {"explain", nullptr, nullptr, as_text::explain, as_html::explain},
      {"warnings", "Warnings", [](const Report& r) { return !r.warnings.empty(); }, as_text::warnings,
       as_html::warnings},
  };
  return list;
}

const std::vector<DeviceSection>& device_sections() {
  static const std::vector<DeviceSection> list = {
      // The HTML's peak table also says the moment of --at.
      {"peak", "Peak", nullptr, as_text::peak, as_html::peak},
      {"at", nullptr, nullptr, as_text::at, nullptr},
      {"explanation", "Explanation", [](const DeviceView& d) { return !d.findings.empty(); }, as_text::explanation,
       as_html::explanation},
      {"timeline", "Timeline", nullptr, nullptr, as_html::timeline},
      {"categories", "Categories", nullptr, as_text::categories, as_html::categories},
      {"flame", "Flame chart", nullptr, nullptr, as_html::flame},
      {"sites", "Sites", nullptr, as_text::sites, as_html::sites},
      // By op and by kernel: the text prints them after the sites, the HTML
      // after the unknown sites (two rows, one per format).
      {"ops", nullptr, nullptr, ops_as_text, nullptr},
      {"lifetime", "Lifetimes", nullptr, nullptr, as_html::lifetime},
      {"phases", "Phases", [](const DeviceView& d) { return !d.phases.empty(); }, as_text::phases, as_html::phases},
      {"unknown", nullptr, nullptr, as_text::unknown, as_html::unknown},
      {"ops", nullptr, nullptr, nullptr, as_html::ops},
      {"fragmentation", "Fragmentation", nullptr, as_text::fragmentation, as_html::fragmentation},
      {"endstate", nullptr, nullptr, as_text::end_state, as_html::end_state},
  };
  return list;
}

}  // namespace snapdiff::detail
