// The native .snap format: lossless round trip, identical reports, version
// and corruption handling.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "snapdiff/error.hpp"
#include "snapdiff/input.hpp"
#include "snapdiff/report.hpp"
#include "test_util.hpp"

using namespace snapdiff;

namespace {
std::string report_json_without_input(const Trace& t) {
  Report r = analyze_report(t, {});
  auto j = nlohmann::json::parse(render_json(r, t));
  j.erase("input");
  return j.dump(1);
}
std::string report_text_without_input(const Trace& t) {
  Report r = analyze_report(t, {});
  std::string s = render_text(r, t);
  // Drop the INPUT section (it names the container format and file size).
  size_t a = s.find("INPUT\n");
  size_t b = s.find("\nPEAK");
  return s.substr(0, a) + s.substr(b);
}
}  // namespace

TEST_CASE("pickle -> .snap -> report is identical", "[snap]") {
  for (const char* stem : {"small_bf16", "small_fp8", "small_bf16_expandable", "small_oom", "small_bf16_cpp"}) {
    INFO(stem);
    Trace a = load_trace(test::shared_data(std::string(stem) + ".pickle"));
    std::string snap = write_snap_json(a);
    Trace b = load_trace_from_memory(snap, "x.snap");
    CHECK(b.source.format == "snap");
    CHECK(report_json_without_input(a) == report_json_without_input(b));
    CHECK(report_text_without_input(a) == report_text_without_input(b));
    // Lossless for the model: same events, frames, stacks.
    REQUIRE(a.devices.size() == b.devices.size());
    for (size_t d = 0; d < a.devices.size(); ++d) {
      const auto& ea = a.devices[d].events;
      const auto& eb = b.devices[d].events;
      REQUIRE(ea.size() == eb.size());
      for (size_t i = 0; i < ea.size(); ++i) {
        CHECK(ea[i].kind == eb[i].kind);
        CHECK(ea[i].addr == eb[i].addr);
        CHECK(ea[i].time_us == eb[i].time_us);
        CHECK(a.stacks.frames(ea[i].stack).size() == b.stacks.frames(eb[i].stack).size());
      }
    }
    // A second generation holds the same document (apart from where it came from).
    auto j1 = nlohmann::json::parse(snap), j2 = nlohmann::json::parse(write_snap_json(b));
    j1.erase("source");
    j2.erase("source");
    CHECK(j1 == j2);
  }
}

TEST_CASE("gzip'd .snap files written to disk read back", "[snap]") {
  Trace a = load_trace(test::shared_data("small_bf16.pickle"));
  std::string path = "snap_format_test.snap";
  write_snap_file(a, path, true);
  Trace b = load_trace(path);
  CHECK(b.source.gzip);
  CHECK(report_json_without_input(a) == report_json_without_input(b));
  std::remove(path.c_str());
}

TEST_CASE(".snap from a newer version, or corrupt, is refused with a JSON path", "[snap]") {
  Trace a = load_trace(test::fixture("tiny_p4.pickle"));
  auto j = nlohmann::json::parse(write_snap_json(a));
  auto newer = j;
  newer["version"] = kSnapVersion + 1;
  try {
    load_trace_from_memory(newer.dump(), "new.snap");
    FAIL("accepted");
  } catch (const InputError& e) {
    CHECK(e.describe().find("$.version") != std::string::npos);
    CHECK(e.describe().find("newer snapdiff") != std::string::npos);
  }
  auto bad = j;
  bad["devices"][0]["events"]["addr"][2] = "x";
  try {
    load_trace_from_memory(bad.dump(), "bad.snap");
    FAIL("accepted");
  } catch (const InputError& e) {
    CHECK(e.describe().find("$.devices[0].events.addr[2]") != std::string::npos);
  }
  auto cyc = j;
  cyc["stacks"][0][0] = 5;  // parent after the node: would allow cycles
  CHECK_THROWS_AS(load_trace_from_memory(cyc.dump(), "c.snap"), InputError);
  std::string text = j.dump();
  for (size_t len = 0; len < text.size(); len += 7)
    CHECK_THROWS_AS(load_trace_from_memory(std::string_view(text.data(), len), "t.snap"), InputError);
  CHECK_THROWS_AS(load_trace_from_memory("{\"format\": \"something-else\"}", "o.json"), InputError);
}
