// The report's one list of sections (src/report/sections.cpp): every row is
// rendered in some format, no format has a section twice, and the HTML
// navigation made from the list links only sections the page has.
#include <catch2/catch.hpp>
#include <regex>
#include <set>

#include "report/sections.hpp"
#include "snapdiff/report/chart.hpp"
#include "test_util.hpp"

using namespace snapdiff;

TEST_CASE("section list: each row has a renderer, each format a section at most once", "[report]") {
  std::set<std::string> text, html;
  for (const detail::ReportSection& s : detail::report_sections()) {
    INFO(s.id);
    CHECK((s.per_device || s.text || s.html));
    if (s.text || s.per_device) CHECK(text.insert(s.id).second);
    if (s.html || s.per_device) CHECK(html.insert(s.id).second);
  }
  std::set<std::string> dtext, dhtml;
  for (const detail::DeviceSection& s : detail::device_sections()) {
    INFO(s.id);
    CHECK((s.text || s.html));
    if (s.text) CHECK(dtext.insert(s.id).second);
    if (s.html) CHECK(dhtml.insert(s.id).second);
    if (s.nav) CHECK(s.html);  // a link to a section the page has
  }
}

TEST_CASE("HTML navigation from the section list: every link has its section on the page", "[report][html]") {
  for (const char* name : {"small_fp8.pickle", "small_oom.pickle", "small_profile.trace.json.gz"}) {
    INFO(name);
    auto run = test::run_of(test::real_data(name));
    const std::string html =
        render_html(report_view(run->r), [&](const ChartOptions& co) { return chart_series(run->r, run->t, co); });
    const size_t nav = html.find("<nav>"), nav_end = html.find("</nav>");
    REQUIRE(nav != std::string::npos);
    REQUIRE(nav_end != std::string::npos);
    const std::string links = html.substr(nav, nav_end - nav);
    static const std::regex href("href=\"#([^\"]+)\"");
    size_t n = 0;
    for (std::sregex_iterator it(links.begin(), links.end(), href), end; it != end; ++it, ++n) {
      const std::string id = (*it)[1];
      INFO(id);
      CHECK(html.find("<section id=\"" + id + "\"") != std::string::npos);
    }
    CHECK(n >= 6);  // peak, timeline, categories, flame, sites, lifetimes, fragmentation at least
  }
}
