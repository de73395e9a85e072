// Internal: the sections of `snapdiff report`, listed once in the order the
// text and the HTML report print them (sections.cpp). Each section is
// rendered by its own function in each format: `as_text::` in
// text_report.cpp, `as_html::` in html_report.cpp (the OOM, outside-the-
// allocator and profiler sections in their own files). render_text() and
// render_html() walk the same list; a format without a function for a
// section leaves it out. Each renderer keeps only its frame: the text's
// title line and terminal guard, the HTML page with its header (the input)
// and navigation (made from this list).
//
// The JSON is the view serialized (json_report.cpp) and does not walk this
// list; its top level follows a similar order (input, oom, devices, device
// memory, outside, ...) but not the same one.
//
// A new section: a function per format (or nullptr) and a row here.
#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

#include "snapdiff/report/chart.hpp"
#include "snapdiff/report/report.hpp"

namespace snapdiff::detail {

// A device as the text sections see it.
struct TextDevice {
  const Report& r;
  const DeviceView& d;
  size_t depth;              // site frames shown (SIZE_MAX: all of them)
  std::string moment_title;  // "AT THE PEAK", "AT EVENT 1,234" (--at), "BEFORE THE FIRST EVENT"
  size_t width = 80;         // the columns of the output (a table drops columns to fit it)
};

// A device as the HTML sections see it.
struct HtmlDevice {
  const Report& r;
  const ChartSeriesSource& charts;
  const DeviceView& d;
  std::string id;            // the prefix of its anchors: "d0"
  std::string dev;           // the device after each title: <span class="dev">cuda:0</span>
  std::string moment_title;  // "At the peak", "At event 1,234"
  std::string live_title;    // "at the peak", "at event 1,234"
};

using TextSectionFn = void (*)(std::ostream&, const Report&);
using HtmlSectionFn = void (*)(std::ostream&, const Report&);
using TextDeviceFn = void (*)(std::ostream&, const TextDevice&);
using HtmlDeviceFn = void (*)(std::ostream&, const HtmlDevice&);

// A section of each device, in the order printed.
struct DeviceSection {
  const char* id;                    // the HTML anchor after the device's prefix: "peak" is "#d0-peak"
  const char* nav;                   // its link in the HTML navigation, nullptr: none
  bool (*has_content)(const DeviceView&);  // whether the navigation links it (nullptr: always)
  TextDeviceFn text;                 // nullptr: not in the text report
  HtmlDeviceFn html;                 // nullptr: not in the HTML
};

// A section of the report. The row marked `per_device` stands for every
// device's sections (device_sections()), device after device.
struct ReportSection {
  const char* id;                    // the HTML anchor: "warnings" is "#warnings"
  const char* nav;                   // its link in the HTML navigation, nullptr: none
  bool (*has_content)(const Report&);  // whether the navigation links it (nullptr: always)
  TextSectionFn text;
  HtmlSectionFn html;
  bool per_device = false;
};

const std::vector<ReportSection>& report_sections();
const std::vector<DeviceSection>& device_sections();

namespace as_text {
void input(std::ostream& o, const Report& r);
void peak(std::ostream& o, const TextDevice& t);
void at(std::ostream& o, const TextDevice& t);
void explanation(std::ostream& o, const TextDevice& t);
void categories(std::ostream& o, const TextDevice& t);
void sites(std::ostream& o, const TextDevice& t);
void phases(std::ostream& o, const TextDevice& t);
void unknown(std::ostream& o, const TextDevice& t);
void fragmentation(std::ostream& o, const TextDevice& t);
void end_state(std::ostream& o, const TextDevice& t);
void device_memory(std::ostream& o, const Report& r);
void explain(std::ostream& o, const Report& r);
void warnings(std::ostream& o, const Report& r);
}  // namespace as_text

namespace as_html {
void peak(std::ostream& o, const HtmlDevice& h);
void explanation(std::ostream& o, const HtmlDevice& h);
void timeline(std::ostream& o, const HtmlDevice& h);
void categories(std::ostream& o, const HtmlDevice& h);
void flame(std::ostream& o, const HtmlDevice& h);
void sites(std::ostream& o, const HtmlDevice& h);
void lifetime(std::ostream& o, const HtmlDevice& h);
void phases(std::ostream& o, const HtmlDevice& h);
void unknown(std::ostream& o, const HtmlDevice& h);
void ops(std::ostream& o, const HtmlDevice& h);
void fragmentation(std::ostream& o, const HtmlDevice& h);
void end_state(std::ostream& o, const HtmlDevice& h);
void device_memory(std::ostream& o, const Report& r);
void explain(std::ostream& o, const Report& r);
void warnings(std::ostream& o, const Report& r);
}  // namespace as_html

}  // namespace snapdiff::detail
