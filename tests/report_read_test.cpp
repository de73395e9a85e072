// The report JSON read back into the report view (snapdiff/report/report_read.hpp):
// the reduce step of `snapdiff ranks` reads the summaries the map step wrote,
// and must render what the direct read renders, byte for byte.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "snapdiff/analysis/analysis.hpp"
#include "snapdiff/analysis/moment.hpp"
#include "snapdiff/analysis/trace_join.hpp"
#include "snapdiff/error.hpp"
#include "snapdiff/input/input.hpp"
#include "snapdiff/input/profiler.hpp"
#include "snapdiff/report/report.hpp"
#include "snapdiff/report/report_read.hpp"
#include "input/file_source.hpp"
#include "test_util.hpp"

using namespace snapdiff;

namespace {

// "" when equal, else the first line that differs in each.
std::string first_difference(const std::string& a, const std::string& b) {
  if (a == b) return "";
  size_t line = 1, start = 0;
  for (size_t i = 0; i < a.size() && i < b.size() && a[i] == b[i]; ++i)
    if (a[i] == '\n') ++line, start = i + 1;
  auto line_of = [&](const std::string& s) {
    const size_t end = s.find('\n', start);
    return s.substr(start, end == std::string::npos ? std::string::npos : end - start);
  };
  return "line " + std::to_string(line) + ":\n  direct:    " + line_of(a) + "\n  read back: " + line_of(b);
}

// The acceptance: the JSON read back renders the same JSON and the same text.
void check_round_trip(const Report& r, const std::string& what) {
  INFO(what);
  const std::string json = render_json(r);
  const Report back = read_report_json(json, what + ".json");
  CHECK(first_difference(json, render_json(back)) == "");
  CHECK(first_difference(render_text(r), render_text(back)) == "");
}

// Every file under `dir` that `snapdiff report` reads: snapshots, .snap files
// and profiler traces (not the truth and summary files beside them, nor
// PyTorch's memory-timeline exports, which are --memory-timeline's input).
std::vector<std::string> report_inputs(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(std::string(SNAPDIFF_SOURCE_DIR) + "/" + dir)) {
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file() || name.find(".memtl.") != std::string::npos) continue;
    const bool input = name.ends_with(".pickle") || name.ends_with(".pickle.gz") || name.ends_with(".snap") ||
                       name.ends_with(".trace.json.gz");
    if (input) out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

ReportOptions named(const std::string& path) {
  ReportOptions o;
  o.input_name = std::filesystem::path(path).filename().string();
  return o;
}

}  // namespace

TEST_CASE("report JSON read back: every input of the repository renders the same JSON and text", "[report]") {
  size_t inputs = 0;
  for (const char* dir : {"tests/data/real", "tests/data/variants", "tests/data/profile", "tests/data/capture",
                          "tests/data/derived", "sample_snapshots"})
    for (const std::string& path : report_inputs(dir)) {
      const Trace t = load_trace(path);
      check_round_trip(analyze_report(t, named(path)), path);
      ++inputs;
    }
  // The small fixtures beside them (tests/data/make_fixtures.py): every pickle
  // protocol, the legacy layouts; not the ones made to be refused.
  for (const char* name : {"legacy_history.pickle", "legacy_segment_list.pickle", "tiny_p0.pickle", "tiny_p1.pickle",
                           "tiny_p2.pickle", "tiny_p3.pickle", "tiny_p4.pickle", "tiny_p4.pickle.gz", "tiny_p5.pickle",
                           "tiny_trailing.pickle"}) {
    const std::string path = test::required(test::fixture(name));
    check_round_trip(analyze_report(load_trace(path), named(path)), path);
    ++inputs;
  }
  CHECK(inputs >= 70);  // the recordings listed in tests/data/*/README.md, sample_snapshots/ and the fixtures
}

TEST_CASE("report JSON read back: no site rows, every site row, whole stacks", "[report]") {
  for (const char* name : {"small_bf16.pickle", "cat_late_llama.pickle.gz", "ans_oom_frag.pickle.gz",
                           "small_profile.trace.json.gz", "ans_leak_resnet.pickle.gz"}) {
    const std::string path = test::real_data(name);
    const Trace t = load_trace(path);
    ReportOptions o = named(path);
    o.top_sites = 0;
    check_round_trip(analyze_report(t, o), std::string(name) + " -n 0");
    o.top_sites = 100000;
    o.site_depth = 0;
    check_round_trip(analyze_report(t, o), std::string(name) + " -n 100000 --depth 0");
    o.site_depth = 7;
    check_round_trip(analyze_report(t, o), std::string(name) + " --depth 7");
  }
}

TEST_CASE("report JSON read back: --at, --window and --explain", "[report]") {
  const std::string path = test::real_data("small_bf16.pickle");
  const Trace t = load_trace(path);
  for (const char* at : {"iteration 2 optimizer", "iteration 1 end", "0", "peak", "+350ms"}) {
    ReportOptions o = named(path);
    o.at = parse_moment(at);
    check_round_trip(analyze_report(t, o), std::string("--at ") + at);
  }
  for (const char* window : {"iteration 2..iteration 2", "..iteration 1"}) {
    ReportOptions o = named(path);
    o.window = parse_window(window);
    check_round_trip(analyze_report(t, o), std::string("--window ") + window);
  }
  {
    ReportOptions o = named(path);
    o.explain = "_multi_tensor_adam";  // a site: several rows
    const Report r = analyze_report(t, o);
    REQUIRE(!r.explain.empty());
    check_round_trip(r, "--explain _multi_tensor_adam");
    o.explain = "no_such_function_anywhere";
    check_round_trip(analyze_report(t, o), "--explain (no match)");
  }
  {
    // An address: one allocation, its evidence inferred from the sizes.
    const std::string late = test::real_data("cat_late_llama.pickle.gz");
    const Trace lt = load_trace(late);
    const Report plain = analyze_report(lt, named(late));
    REQUIRE(!plain.devices.empty());
    REQUIRE(!plain.devices[0].sites.empty());
    ReportOptions o = named(late);
    o.explain = plain.devices[0].sites[0].site.user ? plain.devices[0].sites[0].site.user->name : "forward";
    check_round_trip(analyze_report(lt, o), "cat_late_llama --explain " + o.explain);
  }
}

TEST_CASE("report JSON read back: --trace joins and --memory-timeline", "[report]") {
  {
    const Trace prof = load_trace(test::fixture("profile/joint.trace.json.gz"));
    Joined<TraceJoin> j = join_profiler_trace(load_trace(test::fixture("profile/joint.snapshot.pickle")), prof, "joint.trace.json.gz");
    Joins joins;
    joins.trace = std::move(j.join);
    const Report r = report_view(analyze(j.trace, named("joint.snapshot.pickle"), std::move(joins)));
    REQUIRE(r.devices.size() == 1);
    REQUIRE(r.devices[0].has_ops);
    check_round_trip(r, "joint --trace");
  }
  const Trace t = load_trace(test::real_data("small_profile.trace.json.gz"));
  for (const char* name : {"small_profile.memtl.raw.json.gz", "small_profile.memtl.json"}) {
    const MemoryTimeline tl = load_memory_timeline(test::real_data(name));
    ReportOptions o = named("small_profile.trace.json.gz");
    o.timeline = &tl;
    const Report r = analyze_report(t, o);
    REQUIRE(r.timeline.present);
    check_round_trip(r, std::string("--memory-timeline ") + name);
  }
}

TEST_CASE("report JSON read back: the OOM of every device that had one", "[report]") {
  const std::string path = test::real_data("ans_oom_frag.pickle.gz");
  Report r = analyze_report(load_trace(path), named(path));
  REQUIRE(r.ooms.size() == 1);
  check_round_trip(r, "ans_oom_frag");
  // A second device's OOM (no recording here has two): the same view on
  // another device, with a cap, so both sections and their cause words show.
  DeviceView d = r.devices[0];
  d.device = 1;
  r.devices.push_back(d);
  OomView v = r.ooms[0];
  v.device = 1;
  v.errors = 3;
  v.cause = OomCause::ProcessCap;
  v.capped = true;
  v.cap_at_least = v.max_reserved;
  v.cap_below = v.max_reserved + int64_t(v.segment_size);
  r.ooms.push_back(v);
  check_round_trip(r, "ans_oom_frag with a second device's OOM");
  CHECK(render_text(read_report_json(render_json(r), "x.json")).find("OUT OF MEMORY  cuda:1") != std::string::npos);
}

namespace {

std::string small_report_json() {
  const std::string path = test::real_data("small_oom.pickle");
  return render_json(analyze_report(load_trace(path), named(path)));
}

// The InputError read_report_json throws for `text` (fails the test when none).
InputError refusal(const std::string& text) {
  try {
    read_report_json(text, "rank3.json");
  } catch (const InputError& e) {
    return e;
  }
  FAIL("no InputError for: " << text.substr(0, 200));
  return InputError("unreachable");
}

}  // namespace

TEST_CASE("report JSON read back: malformed JSON, other documents and wrong types are refused by place", "[report]") {
  SECTION("malformed JSON: a byte offset") {
    const std::string text = "{\"schema\": \"snapdiff/report/1\", \"input\": [1, 2,, 3]}";
    const InputError e = refusal(text);
    CHECK(e.file() == "rank3.json");
    CHECK(e.has_offset());
    CHECK(e.offset() == text.find(",,") + 1);  // the second comma
  }
  SECTION("nested too deep: a byte offset") {
    const InputError e = refusal(std::string(300, '[') + std::string(300, ']'));
    CHECK(e.has_offset());
    CHECK(e.offset() == 256);  // the bracket that opens level 257
  }
  SECTION("a number no double holds") {
    const InputError e = refusal("{\"schema\": \"snapdiff/report/1\", \"site_depth\": 1e999}");
    CHECK(e.file() == "rank3.json");
    CHECK(std::string(e.what()).find("unreadable JSON") != std::string::npos);
  }
  SECTION("valid JSON that is not a report") {
    for (const char* text : {"[1, 2, 3]", "{\"traceEvents\": []}", "\"snapdiff\"", "{\"schema\": \"snapdiff/diff/1\"}",
                             "{\"schema\": 7}"}) {
      INFO(text);
      const InputError e = refusal(text);
      CHECK(e.file() == "rank3.json");
      CHECK(std::string(e.what()).find("not a snapdiff report") != std::string::npos);
    }
    // A future version of the report: named as a report this build does not read.
    const InputError e = refusal("{\"schema\": \"snapdiff/report/2\"}");
    CHECK(e.json_path() == "$.schema");
    CHECK(std::string(e.what()).find("snapdiff/report/2") != std::string::npos);
  }
  const std::string good = small_report_json();
  REQUIRE_NOTHROW(read_report_json(good, "rank3.json"));
  SECTION("a wrong type: the JSON path") {
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(good);
    j["devices"][0]["peak"]["requested"]["bytes"] = "many";
    const InputError e = refusal(j.dump());
    CHECK(e.file() == "rank3.json");
    CHECK(e.json_path() == "$.devices[0].peak.requested.bytes");
    CHECK(std::string(e.what()) == "expected an integer");
    CHECK(e.describe() == "rank3.json: $.devices[0].peak.requested.bytes: expected an integer");
  }
  SECTION("a missing key: the JSON path") {
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(good);
    j["devices"][0]["fragmentation_at_peak"].erase("free_blocks");
    const InputError e = refusal(j.dump());
    CHECK(e.json_path() == "$.devices[0].fragmentation_at_peak.free_blocks");
    CHECK(std::string(e.what()) == "missing");
  }
  SECTION("a name the view does not know: the JSON path") {
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(good);
    j["devices"][0]["peak"]["phase"] = "warmup";
    const InputError e = refusal(j.dump());
    CHECK(e.json_path() == "$.devices[0].peak.phase");
    CHECK(std::string(e.what()).find("warmup") != std::string::npos);
  }
}

TEST_CASE("report JSON read back: truncated and mutated reports are refused, never a crash", "[report]") {
  const std::string good = small_report_json();
  // Cut at many offsets: every prefix is malformed JSON (the document is one object).
  size_t cuts = 0;
  for (size_t n = 0; n < good.size() - 2; n += 1 + n / 64) {
    CHECK_THROWS_AS(read_report_json(good.substr(0, n), "cut.json"), InputError);
    ++cuts;
  }
  CHECK(cuts > 100);
  // Every scalar swapped for a value of another type, one at a time.
  const nlohmann::ordered_json doc = nlohmann::ordered_json::parse(good);
  std::vector<nlohmann::ordered_json::json_pointer> scalars;
  std::function<void(const nlohmann::ordered_json&, const std::string&)> walk = [&](const nlohmann::ordered_json& v,
                                                                                     const std::string& at) {
    if (v.is_object())
      for (auto it = v.begin(); it != v.end(); ++it) walk(it.value(), at + "/" + it.key());
    else if (v.is_array())
      for (size_t i = 0; i < v.size(); ++i) walk(v[i], at + "/" + std::to_string(i));
    else
      scalars.emplace_back(at);
  };
  walk(doc, "");
  REQUIRE(scalars.size() > 200);
  size_t refused = 0, mutated = 0;
  for (size_t k = 0; k < scalars.size(); ++k) {
    const auto& at = scalars[k];
    // Not read, so not checked: the messages and explanations (said again
    // from the facts), and the copies of the top device's figures at the top
    // level and other constants the writer derives (the tool, the growth
    // method, a pool's "private", a trace without memory's 0 memory events).
    const std::string where = at.to_string();
    auto starts = [&](const char* p) { return where.rfind(p, 0) == 0; };
    if (where.ends_with("/message") || where.find("/explanation/") != std::string::npos || starts("/tool/") ||
        (starts("/peak/") && where != "/peak/device") || starts("/categories/") || starts("/phases/") ||
        starts("/at/") || starts("/window/") || where.ends_with("/growth/method") || where.ends_with("/private") ||
        where == "/profiler_activity/memory_events")
      continue;
    nlohmann::ordered_json bad = doc;
    nlohmann::ordered_json& v = bad[at];
    if (v.is_string()) v = 42;
    else if (v.is_boolean()) v = "yes";
    else if (v.is_number()) v = v.is_number_float() ? nlohmann::ordered_json("1.5") : nlohmann::ordered_json(true);
    else v = nlohmann::ordered_json::array();  // null
    ++mutated;
    INFO(where);
    try {
      read_report_json(bad.dump(), "mutated.json");
      FAIL_CHECK("accepted with " << where << " = " << v.dump());
    } catch (const InputError& e) {
      ++refused;
      CHECK(e.file() == "mutated.json");
      CHECK(!e.json_path().empty());
    }
  }
  // Every member is read with its type: each swap is refused (names in
  // "recorded" settings are free text, and a string there stays a string).
  CHECK(refused == mutated);
}

TEST_CASE("read_summary: gzip unwrapped within its bounds, names bounded, quoted values cut", "[report]") {
  const std::string good = small_report_json();
  SECTION("plain and gzip'd read the same") {
    const std::vector<uint8_t> gz = snapdiff::detail::gzip_compress(good);
    const std::string gzs(gz.begin(), gz.end());
    CHECK(render_json(read_summary(gzs, "r.json.gz")) == render_json(read_summary(good, "r.json")));
  }
  SECTION("a text over the bound: --max-input-bytes or --max-memory named") {
    try {
      read_summary(good, "r.json", good.size() - 1);
      FAIL("not refused");
    } catch (const InputError& e) {
      CHECK(e.file() == "r.json");
      CHECK(std::string(e.what()).find("--max-input-bytes") != std::string::npos);
    }
    const std::vector<uint8_t> gz = snapdiff::detail::gzip_compress(good);
    try {
      read_summary(std::string(gz.begin(), gz.end()), "r.json.gz", snapdiff::kMaxSummaryBytes,
                   good.size() * snapdiff::kSummaryMemoryPerByte / 2);
      FAIL("not refused");
    } catch (const InputError& e) {
      CHECK(std::string(e.what()).find("--max-memory") != std::string::npos);
    }
  }
  SECTION("the snapshot's name at most a path's length") {
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(good);
    j["input"]["name"] = std::string(snapdiff::kMaxSummaryNameBytes, 'n');
    CHECK_NOTHROW(read_summary(j.dump(), "r.json"));
    j["input"]["name"] = "oom_rank-1_" + std::string(30000, 'a') + "/x.pickle";
    try {
      read_summary(j.dump(), "r.json");
      FAIL("not refused");
    } catch (const InputError& e) {
      CHECK(e.json_path() == "$.input.name");
      CHECK(e.describe().size() < 300);
    }
  }
  SECTION("a schema of megabytes is quoted cut, with its length") {
    for (const std::string& schema : {"snapdiff/report/9" + std::string(8 << 20, 'x'), std::string(8 << 20, 'y')}) {
      nlohmann::ordered_json j = nlohmann::ordered_json::parse(good);
      j["schema"] = schema;
      const InputError e = refusal(j.dump());
      CHECK(e.describe().size() < 600);
      CHECK(e.describe().find("more bytes") != std::string::npos);
    }
  }
  SECTION("a key of megabytes in a JSON path is cut") {
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(good);
    j["devices"][0]["peak"]["phase"] = std::string(1 << 20, 'p');
    const InputError e = refusal(j.dump());
    CHECK(e.describe().size() < 700);
  }
}
