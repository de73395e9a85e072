// Names are bytes: every renderer escapes them for its format (issue 14,
// "One line, exit 3, and no injection"; docs/reliability.md, "Names,
// messages and terminals"). The escapers one by one, then every renderer on
// a snapshot whose every name holds every payload.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "report/format.hpp"
#include "snapdiff/analysis/check.hpp"
#include "snapdiff/analysis/diff.hpp"
#include "snapdiff/input/input.hpp"
#include "snapdiff/report/chart.hpp"
#include "snapdiff/report/check_report.hpp"
#include "snapdiff/report/diff_report.hpp"
#include "snapdiff/report/report.hpp"
#include "test_util.hpp"

using namespace snapdiff;
using detail::display_name;

namespace {

// Everything a name can do to a terminal, a CI log or a format, at once.
// "\xc3\xbf" (U+00FF) marks where a 0xFF byte goes (see hostile_trace()).
const std::string kPayload =
    "\x1b[2J\x1b[H"
    "\x1b]0;pwned title\x07"
    "\nFAKE LINE: peak 0 B"
    "\n::error::pwned"
    "\r\t" + std::string(1, '\0') + "\x7f\xc2\x9b" "31m\xe2\x80\xae"
    "<!--|`x` & <b> \\ %0A &#27;&#0;"
    "\xc3\xbf";

// Whether s is well-formed UTF-8 with no control character but '\n' (and,
// when allowed, '\t' and '\r'): what a terminal can be shown safely.
bool terminal_clean(const std::string& s, bool xml_whitespace = false) {
  std::string t = s;
  if (xml_whitespace) std::replace_if(t.begin(), t.end(), [](char c) { return c == '\t' || c == '\r'; }, ' ');
  return detail::terminal_safe(t) == t;
}

// No line a name could have forged.
bool no_forged_line(const std::string& s) {
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find('\n', start);
    if (end == std::string::npos) end = s.size();
    const std::string line = s.substr(start, end - start);
    if (line.rfind("FAKE LINE", 0) == 0 || line.rfind("::", 0) == 0) return false;
    start = end + 1;
  }
  return true;
}

// Markdown without its code spans (a run of N backticks to the next run of
// exactly N): what is left is what GitHub parses as Markdown and HTML.
std::string outside_code_spans(const std::string& md) {
  std::string out;
  size_t i = 0;
  while (i < md.size()) {
    if (md[i] == '\\' && i + 1 < md.size()) {  // an escaped character is text
      out.append(md, i, 2);
      i += 2;
      continue;
    }
    if (md[i] != '`') {
      out += md[i++];
      continue;
    }
    size_t n = 0;
    while (i + n < md.size() && md[i + n] == '`') ++n;
    size_t j = i + n, close = std::string::npos;
    while (j < md.size()) {
      size_t k = md.find('`', j);
      if (k == std::string::npos) break;
      size_t m = 0;
      while (k + m < md.size() && md[k + m] == '`') ++m;
      if (m == n) {
        close = k;
        break;
      }
      j = k + m;
    }
    if (close == std::string::npos) {  // no closing run: the backticks are text
      out.append(md, i, n);
      i += n;
      continue;
    }
    out += "CODE";
    i = close + n;
  }
  return out;
}

// A real snapshot whose every string (frame names, file names, the phase
// annotation) ends in kPayload, with a raw 0xFF byte where the marker is:
// .snap (JSON) cannot hold one, the pickle can.
Trace hostile_trace() {
  Trace t = load_trace_from_memory(test::read_file(test::fixture("tiny_p4.pickle")), "tiny_p4.pickle");
  nlohmann::json snap = nlohmann::json::parse(write_snap_json(t));
  for (auto& s : snap["strings"])
    if (!s.get<std::string>().empty()) s = s.get<std::string>() + kPayload;
  Trace with_payload = load_trace_from_memory(snap.dump(), "hostile.snap");
  std::string pickle = write_torch_pickle(with_payload);
  for (size_t p = 0; (p = pickle.find("\xc3\xbf", p)) != std::string::npos;) pickle.replace(p, 2, "\xff" "A");
  REQUIRE(pickle.find('\xff') != std::string::npos);
  return load_trace_from_memory(pickle, "hostile.pickle");
}

// The input's own file name, as hostile.
const std::string kEvilFile = "run\n::error::pwned\x1b[2J\xff.pickle";

}  // namespace

TEST_CASE("display_name: control bytes, line breaks and bytes outside UTF-8 as visible escapes", "[report]") {
  CHECK(display_name("forward (model.py:42)") == "forward (model.py:42)");
  CHECK(display_name("caf\xc3\xa9 \xe2\x86\x92 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x94\xa5") ==
        "caf\xc3\xa9 \xe2\x86\x92 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x94\xa5");  // valid UTF-8 unchanged
  CHECK(display_name("a\\x1b") == "a\\x1b");                                    // a backslash stays
  CHECK(display_name("\x1b[2J") == "\\x1b[2J");
  CHECK(display_name("\x1b]0;title\x07") == "\\x1b]0;title\\x07");
  CHECK(display_name("a\nb\rc\td") == "a\\nb\\rc\\td");
  CHECK(display_name(std::string("a\0b", 3)) == "a\\x00b");
  CHECK(display_name("\x7f") == "\\x7f");
  CHECK(display_name("\xc2\x9b" "31m") == "\\u009b31m");      // C1 CSI as UTF-8
  CHECK(display_name("\x9b" "31m") == "\\x9b31m");             // a lone continuation byte
  CHECK(display_name("\xe2\x80\xae" "txt") == "\\u202etxt");  // right-to-left override
  CHECK(display_name("\xe2\x80\xa8") == "\\u2028");            // line separator
  CHECK(display_name("\xff" "A") == "\\xffA");
  CHECK(display_name("\xc0\xaf") == "\\xc0\\xaf");             // overlong '/'
  CHECK(display_name("\xed\xa0\x80") == "\\xed\\xa0\\x80");    // a surrogate
  CHECK(display_name("\xf4\x90\x80\x80") == "\\xf4\\x90\\x80\\x80");  // above U+10FFFF
  CHECK(display_name("\xe2\x82") == "\\xe2\\x82");             // cut short
  CHECK(display_name("\xe2\x82" "A") == "\\xe2\\x82" "A");     // resynchronised at the next byte
  // Everything at once: printable, one line, valid UTF-8.
  const std::string all = display_name(kPayload);
  CHECK(all.find('\n') == std::string::npos);
  CHECK(terminal_clean(all));
  // terminal_safe keeps line breaks only.
  CHECK(detail::terminal_safe("a\nb\x1b\r") == "a\nb\\x1b\\r");
}

TEST_CASE("JSON: invalid UTF-8 as U+FFFD, C1 and bidi controls as \\u escapes, the rest exact", "[report]") {
  nlohmann::ordered_json j;
  j["name"] = "f\xff\x1b\xc2\x85\xe2\x80\xae\xe2\x86\x92";
  j["f\xfe"] = 1;  // keys too
  const std::string text = detail::json_safe(j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
  CHECK(terminal_clean(text));
  const auto back = nlohmann::json::parse(text);
  CHECK(back["name"] == "f\xef\xbf\xbd\x1b\xc2\x85\xe2\x80\xae\xe2\x86\x92");  // U+FFFD, then the same characters
  CHECK(back.contains("f\xef\xbf\xbd"));
  CHECK(text.find("\\u0085") != std::string::npos);
  CHECK(text.find("\\u202e") != std::string::npos);
  CHECK(text.find("\xe2\x86\x92") != std::string::npos);  // ordinary non-ASCII stays UTF-8
}

TEST_CASE("Markdown, GitHub annotations and markup: each format's own escapes", "[report]") {
  using detail::markdown_code;
  using detail::markdown_text;
  CHECK(markdown_code("fc1.weight <- layer *") == "`fc1.weight <- layer *`");  // as before
  CHECK(markdown_code("a|b") == "`a\\|b`");
  CHECK(markdown_code("a`b") == "``a`b``");
  CHECK(markdown_code("`x``") == "``` `x`` ```");
  CHECK(markdown_code("a\nb<!--") == "`a\\nb<!--`");  // inside a code span `<!--` is text
  CHECK(markdown_text("optimizer_state") == "optimizer_state");
  CHECK(markdown_text("<!-- a|b `c` & \\ \n") == "&lt;!-- a\\|b \\`c\\` &amp; \\\\ \\\\n");
  CHECK(detail::github_message("50% a\nb\rc") == "50%25 a\\nb\\rc");
  CHECK(detail::github_property("snapdiff check limit:a,b") == "snapdiff check limit%3Aa%2Cb");
  // Markup: entities, and what XML forbids written as text.
  using detail::Markup;
  CHECK(detail::escape("a<b>&\"'", Markup::Html) == "a&lt;b&gt;&amp;&quot;&#39;");
  CHECK(detail::escape(std::string("x\0\x1b\xff\n\t", 6), Markup::Xml) == "x\\x00\\x1b\\xff\n\t");
  CHECK(detail::escape("\xef\xbf\xbe", Markup::Xml) == "\\ufffe");
  CHECK(detail::escape("\xef\xbf\xbe", Markup::Html) == "\xef\xbf\xbe");
  CHECK(detail::escape(std::string("a\0b\nc", 5), Markup::DotLabel) == "a\\x00b c");
  for (Markup m : {Markup::Html, Markup::Xml, Markup::DotLabel}) CHECK(terminal_clean(detail::escape(kPayload, m), true));
}

TEST_CASE("times at the int64 extremes: no overflow, no five-digit years", "[report]") {
  CHECK(utc_time(0, true) == "1970-01-01 00:00:00.000 UTC");
  CHECK(utc_time(1764500634542000, true) == "2025-11-30 11:03:54.542 UTC");
  CHECK(utc_time(-1, true) == "1969-12-31 23:59:59.999 UTC");  // before 1970: floor, not truncation
  CHECK(utc_time(253402300799999999, true) == "9999-12-31 23:59:59.999 UTC");
  CHECK(utc_time(253402300800000000, true) == "time_us 253402300800000000");
  CHECK(utc_time(INT64_MAX, true) == "time_us 9223372036854775807");
  CHECK(utc_time(INT64_MIN + 1, false) == "time_us -9223372036854775807");
  CHECK(utc_time(kNoTime, true) == "?");
  CHECK(detail::seconds_between(1000000, 3500000) == "2.500 s");
  CHECK(detail::seconds_between(3500000, 1000000) == "-2.500 s");
  CHECK(detail::seconds_between(INT64_MIN + 1, INT64_MAX).rfind("18446744073709.5", 0) == 0);
  CHECK(detail::seconds_between(INT64_MAX, 0).rfind("-9223372036854.77", 0) == 0);
  CHECK(detail::clamped_difference(INT64_MIN + 1, INT64_MAX) == INT64_MAX);
  CHECK(detail::clamped_difference(INT64_MAX, INT64_MIN + 1) == INT64_MIN);
  CHECK(detail::clamped_difference(5, 3) == -2);
}

TEST_CASE("every renderer on names that hold every payload: nothing reaches a terminal, every format parses",
          "[report]") {
  const Trace t = hostile_trace();
  const Analysis a = analyze(t, {});
  Report r = report_view(a);
  r.input_name = kEvilFile;

  SECTION("text report") {
    const std::string text = render_text(r);
    CHECK(terminal_clean(text));
    CHECK(no_forged_line(text));
    CHECK(text.find("\\x1b[2J") != std::string::npos);  // the names are there, escaped
    CHECK(text.find("\\xffA") != std::string::npos);
    CHECK(text.find("snapdiff report: run\\n::error::pwned\\x1b[2J\\xff.pickle\n") == 0);
  }
  SECTION("JSON report") {
    const std::string json = render_json(r);
    CHECK(terminal_clean(json));
    const auto j = nlohmann::json::parse(json);
    CHECK(j.dump().find("\\ufffd") == std::string::npos);  // (dump() writes U+FFFD as UTF-8)
    CHECK(json.find("\xef\xbf\xbd") != std::string::npos);
    CHECK(json.find("\\u001b[2J") != std::string::npos);
  }
  SECTION("Markdown report") {
    const std::string md = render_markdown(r);
    CHECK(terminal_clean(md));
    CHECK(no_forged_line(md));
    // The file name in one code span on the title line: its line break shown, its pipe escaped.
    const std::string title = md.substr(0, md.find('\n'));
    CHECK(title.find("run\\n::error::pwned") != std::string::npos);
    // Every table row keeps its cells: no name adds an unescaped pipe.
    for (size_t at = 0, end; at < md.size(); at = end + 1) {
      end = md.find('\n', at);
      if (end == std::string::npos) end = md.size();
      const std::string line = md.substr(at, end - at);
      if (line.rfind("| ", 0) != 0 || line.find("Top sites") != std::string::npos) continue;
      size_t pipes = 0;
      for (size_t i = 0; i < line.size(); ++i) pipes += line[i] == '|' && (i == 0 || line[i - 1] != '\\');
      INFO(line);
      CHECK((pipes == 4 || pipes == 5 || pipes == 6 || pipes == 7));
    }
  }
  SECTION("HTML report and its charts") {
    const std::string html = render_html(r, [&](const ChartOptions& o) { return chart_series(a, t, o); });
    CHECK(terminal_clean(html, true));
    CHECK(html.find("<!--|") == std::string::npos);
    CHECK(html.find("\\x1b[2J") != std::string::npos);
    CHECK(html.find("\\x00") != std::string::npos);
  }
  SECTION("charts: DOT holds no NUL, Graphviz draws it, the SVG is clean") {
    for (ChartKind k : {ChartKind::Flame, ChartKind::Lifetime, ChartKind::Timeline}) {
      INFO(chart_kind_name(k));
      ChartOptions o;
      o.kind = k;
      const std::string dot = chart_dot(chart_series(a, t, o), o);
      CHECK(dot.find('\0') == std::string::npos);
      CHECK(terminal_clean(dot));
      std::string svg;
      REQUIRE_NOTHROW(svg = render_chart(dot, ChartFormat::Svg));
      CHECK(terminal_clean(svg, true));
      if (k == ChartKind::Flame) CHECK(svg.find("\\x1b[2J") != std::string::npos);
    }
  }
  SECTION("diff: text, JSON, Markdown") {
    const Trace plain = load_trace_from_memory(test::read_file(test::fixture("tiny_p4.pickle")), "tiny_p4.pickle");
    const Analysis pa = analyze(plain, {});
    Diff d = diff_reports(pa, a, DiffOptions{});
    REQUIRE(!d.sites.empty());
    d.a_name = kEvilFile;
    d.b_name = "b|`" + kPayload;
    const std::string text = render_diff_text(d);
    CHECK(terminal_clean(text));
    CHECK(no_forged_line(text));
    const std::string json = render_diff_json(d);
    CHECK(terminal_clean(json));
    CHECK_NOTHROW(nlohmann::json::parse(json));
    const std::string md = render_diff_markdown(d);
    CHECK(terminal_clean(md));
    CHECK(no_forged_line(md));
    const std::string parsed = outside_code_spans(md);
    CHECK(parsed.find("<!--") == std::string::npos);
    CHECK(parsed.find("<b>") == std::string::npos);
    CHECK(parsed.find("CODE") != std::string::npos);
    CHECK(md.rfind("### snapdiff: `run\\n::error::pwned\\x1b[2J\\xff.pickle` \xe2\x86\x92 ", 0) == 0);
  }
}

TEST_CASE("profiler traces: op and kernel names escaped in the by-op, by-kernel and kernel lines", "[report]") {
  // JSON carries the controls as \u escapes; "\u00ff" stands for the payload's marker.
  nlohmann::json payload = kPayload;
  std::string p = payload.dump();  // a quoted JSON string
  p = p.substr(1, p.size() - 2);
  const std::string text =
      R"({"schemaVersion": 1, "baseTimeNanoseconds": 1700000000000000000, "traceEvents": [)"
      R"({"ph": "X", "cat": "cpu_op", "name": "aten::mm)" + p + R"(", "pid": 1, "tid": 1, "ts": 11.0, "dur": 5.0},)"
      R"({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 13.0, "dur": 1.0, "args": {"correlation": 7}},)"
      R"({"ph": "X", "cat": "kernel", "name": "gemm)" + p + R"(", "pid": 0, "tid": 7, "ts": 14.0, "dur": 1.0, "args": {"correlation": 7, "stream": 7, "device": 0}},)"
      R"({"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 12.0, "s": "t",)"
      R"( "args": {"Device Type": 1, "Device Id": 0, "Addr": 1024, "Bytes": 512, "Total Allocated": 512, "Total Reserved": 2097152}}]})";
  const Trace t = load_trace_from_memory(text, "hostile.json");
  const Analysis a = analyze(t, {});
  const Report r = report_view(a);
  REQUIRE(!r.devices.empty());
  REQUIRE(r.devices[0].has_ops);
  const std::string out = render_text(r);
  CHECK(terminal_clean(out));
  CHECK(no_forged_line(out));
  CHECK(out.find("aten::mm\\x1b[2J") != std::string::npos);
  // (A kernel is shown by its short name: "(...)", "<...>" and what precedes "::" dropped.)
  CHECK(out.find("  next kernel B\\n::error::pwned\\r\\t\\x00") != std::string::npos);
  CHECK(terminal_clean(render_json(r)));
  CHECK_NOTHROW(nlohmann::json::parse(render_json(r)));
  const std::string html = render_html(r, [&](const ChartOptions& o) { return chart_series(a, t, o); });
  CHECK(terminal_clean(html));
  CHECK(html.find("<!--|") == std::string::npos);
}

TEST_CASE("check: verdict, JSON, JUnit and GitHub annotations with hostile file, threshold and category names",
          "[report]") {
  CheckResult r;
  r.metric = Metric::Allocated;
  r.status = CheckStatus::Fail;
  r.candidate.name = kEvilFile;
  r.candidate.allocated = 2000;
  r.candidate.phase = "forward" + kPayload;
  r.candidate.history = "complete";
  r.candidate.categories = {{"cat" + kPayload, 2000}};
  PeakFigures base;
  base.name = "base" + kPayload;
  base.allocated = 1000;
  base.history = "complete";
  base.categories = {{"cat" + kPayload, 1000}};
  r.baseline = base;
  r.baseline_kind = "budget";
  CheckItem it;
  it.name = "limit.cat" + kPayload;
  it.kind = "category_limit";
  it.status = CheckStatus::Fail;
  it.limit_text = "1KiB";
  it.limit_bytes = 1024;
  it.measured_bytes = 2000;
  it.margin_bytes = -976;
  r.items.push_back(it);

  const std::string text = render_check_text(r);
  CHECK(terminal_clean(text));
  CHECK(no_forged_line(text));
  CHECK(text.find("\\x1b[2J") != std::string::npos);

  const std::string json = render_check_json(r);
  CHECK(terminal_clean(json));
  CHECK_NOTHROW(nlohmann::json::parse(json));

  // JUnit: well-formed XML needs valid UTF-8 and no C0 character but tab,
  // newline and carriage return; markup in names as entities.
  const std::string xml = render_check_junit(r);
  CHECK(terminal_clean(xml, true));
  CHECK(xml.find("<!--") == std::string::npos);
  CHECK(xml.find("<b>") == std::string::npos);
  CHECK(xml.find("name=\"snapdiff check: run\\n::error::pwned\\x1b[2J\\xff.pickle\"") != std::string::npos);

  // GitHub: exactly one workflow command, on one line.
  const std::string gh = render_check_github(r);
  CHECK(terminal_clean(gh));
  REQUIRE(!gh.empty());
  CHECK(std::count(gh.begin(), gh.end(), '\n') == 1);
  CHECK(gh.back() == '\n');
  CHECK(gh.rfind("::error title=snapdiff check limit.cat\\x1b[2J", 0) == 0);
  // The properties end at the first "::": no colon of a name in them.
  CHECK(gh.substr(2, gh.find("::", 2) - 2).find(':') == std::string::npos);
  CHECK(gh.find("%25") != std::string::npos);                       // "%0A" in the name: its % escaped
}
