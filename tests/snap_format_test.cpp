// The native .snap format: lossless round trip, identical reports, version
// and corruption handling.
#include <catch2/catch.hpp>
#include <functional>
#include <nlohmann/json.hpp>

#include "snapdiff/error.hpp"
#include "snapdiff/input/input.hpp"
#include "snapdiff/analysis/analysis.hpp"
#include "snapdiff/report/report.hpp"
#include "test_util.hpp"

using namespace snapdiff;

namespace {
std::string report_json_without_input(const Trace& t) {
  Analysis r = analyze(t, {});
  auto j = nlohmann::json::parse(render_json(report_view(r)));
  j.erase("input");
  return j.dump(1);
}
std::string report_text_without_input(const Trace& t) {
  Analysis r = analyze(t, {});
  std::string s = render_text(report_view(r));
  // Drop the INPUT section (it names the container format and file size).
  size_t a = s.find("INPUT\n");
  size_t b = s.find("\nPEAK");
  return s.substr(0, a) + s.substr(b);
}
}  // namespace

TEST_CASE("pickle -> .snap -> report is identical", "[input][snap]") {
  for (const char* stem : {"small_bf16", "small_fp8", "small_bf16_expandable", "small_oom", "small_bf16_cpp"}) {
    INFO(stem);
    Trace a = load_trace(test::real_data(std::string(stem) + ".pickle"));
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

TEST_CASE("gzip'd .snap files written to disk read back", "[input][snap]") {
  Trace a = load_trace(test::real_data("small_bf16.pickle"));
  std::string path = "snap_format_test.snap";
  write_snap_file(a, path, true);
  Trace b = load_trace(path);
  CHECK(b.source.gzip);
  CHECK(report_json_without_input(a) == report_json_without_input(b));
  std::remove(path.c_str());
}

TEST_CASE(".snap from a newer version, or corrupt, is refused with a JSON path", "[input][snap]") {
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

namespace {
// A real run with kernel launches and device-memory samples added: scope
// stacks like the capture shim's, one launch without a time, two streams,
// two devices.
Trace with_kernels_and_samples() {
  Trace t = load_trace(test::real_data("small_fp8.pickle"));
  const Device& d = t.devices[0];
  auto scope = [&](std::initializer_list<const char*> outermost_first) {
    std::vector<FrameId> f;
    for (const char* label : outermost_first) {
      Frame fr;
      fr.name = t.strings.intern(label);
      fr.file = t.strings.intern("snapcapture");
      f.insert(f.begin(), t.intern_frame(fr));  // innermost first
    }
    return t.stacks.intern(f.data(), f.size());
  };
  const StackId fwd = scope({"iter 1", "forward"}), bwd = scope({"iter 1", "backward", "attn"});
  for (size_t i = 0; i < d.events.size(); i += 7) {
    KernelLaunch k;
    k.device = 0;
    k.time_us = d.events[i].time_us;
    k.name = t.strings.intern(i % 2 ? "gemm_bf16_tn" : "softmax_fwd");
    k.stack = i < d.events.size() / 2 ? fwd : bwd;
    k.stream = i % 3 ? 0 : 0x5a5a00;
    t.kernels.push_back(k);
  }
  t.kernels[3].time_us = kNoTime;
  t.kernels[5].stack = 0;  // outside every scope
  KernelLaunch other;
  other.device = 1;
  other.time_us = d.events.back().time_us + 10;
  other.name = t.strings.intern("copy_kernel");
  t.kernels.push_back(other);
  const uint64_t GiB = uint64_t(1) << 30;
  const char* labels[] = {"start (CUDA context)", "after iteration 1", "end"};
  for (int i = 0; i < 3; ++i) {
    DeviceMemorySample m;
    m.device = 0;
    m.time_us = d.events[size_t(i) * (d.events.size() - 1) / 2].time_us + (i == 0 ? -1000 : 0);
    m.total_bytes = 140 * GiB;
    m.reserved_bytes = uint64_t(i) * 300 * (uint64_t(1) << 20);
    m.free_bytes = m.total_bytes - m.reserved_bytes - 520 * (uint64_t(1) << 20) - uint64_t(i) * 4096;
    m.label = t.strings.intern(labels[i]);
    t.device_memory.push_back(m);
  }
  t.device_memory[1].time_us = kNoTime;
  return t;
}

std::vector<std::string> scope_names(const Trace& t, StackId s) {
  std::vector<std::string> out;
  for (FrameId f : t.stacks.frames(s)) {
    out.push_back(std::string(t.strings.get(t.frames[f].name)) + "@" + std::string(t.strings.get(t.frames[f].file)));
  }
  return out;
}
}  // namespace

TEST_CASE(".snap round-trips kernel launches and device-memory samples", "[input][snap]") {
  Trace a = with_kernels_and_samples();
  std::string snap = write_snap_json(a);
  auto j = nlohmann::json::parse(snap);
  REQUIRE(j.contains("kernels"));
  REQUIRE(j.contains("device_memory"));
  CHECK(j["kernels"]["count"] == a.kernels.size());
  CHECK(j["kernels"]["streams"].size() == 2);  // stream table: 0 and 0x5a5a00
  CHECK(j["kernels"]["time_us_delta"][3].is_null());
  Trace b = load_trace_from_memory(snap, "k.snap");
  REQUIRE(b.kernels.size() == a.kernels.size());
  for (size_t i = 0; i < a.kernels.size(); ++i) {
    INFO(i);
    CHECK(b.kernels[i].device == a.kernels[i].device);
    CHECK(b.kernels[i].time_us == a.kernels[i].time_us);
    CHECK(b.kernels[i].stream == a.kernels[i].stream);
    CHECK(b.strings.get(b.kernels[i].name) == a.strings.get(a.kernels[i].name));
    CHECK(scope_names(b, b.kernels[i].stack) == scope_names(a, a.kernels[i].stack));
  }
  CHECK(b.kernels[5].stack == 0);
  REQUIRE(b.device_memory.size() == a.device_memory.size());
  for (size_t i = 0; i < a.device_memory.size(); ++i) {
    INFO(i);
    const DeviceMemorySample &x = a.device_memory[i], &y = b.device_memory[i];
    CHECK(y.device == x.device);
    CHECK(y.time_us == x.time_us);
    CHECK(y.free_bytes == x.free_bytes);
    CHECK(y.total_bytes == x.total_bytes);
    CHECK(y.reserved_bytes == x.reserved_bytes);
    CHECK(b.strings.get(y.label) == a.strings.get(x.label));
  }
  // The same report from either, and a second generation writes the same document.
  CHECK(report_json_without_input(a) == report_json_without_input(b));
  CHECK(report_text_without_input(a) == report_text_without_input(b));
  auto j2 = nlohmann::json::parse(write_snap_json(b));
  j.erase("source");
  j2.erase("source");
  CHECK(j == j2);
}

TEST_CASE(".snap without the optional sections writes none and reads empty lists", "[input][snap]") {
  Trace a = load_trace(test::fixture("tiny_p4.pickle"));
  auto j = nlohmann::json::parse(write_snap_json(a));
  CHECK_FALSE(j.contains("kernels"));
  CHECK_FALSE(j.contains("device_memory"));
  CHECK(j["version"] == 1);
  Trace b = load_trace_from_memory(j.dump(), "plain.snap");
  CHECK(b.kernels.empty());
  CHECK(b.device_memory.empty());
}

TEST_CASE("bad kernel and device-memory sections are refused with a JSON path", "[input][snap]") {
  const auto good = nlohmann::json::parse(write_snap_json(with_kernels_and_samples()));
  auto refused = [&](const std::function<void(nlohmann::json&)>& edit, const std::string& path,
                     const std::string& words) {
    auto j = good;
    edit(j);
    try {
      load_trace_from_memory(j.dump(), "bad.snap");
      FAIL("accepted: " << path);
    } catch (const InputError& e) {
      INFO(e.describe());
      CHECK(e.describe().find("bad.snap: " + path + ": ") != std::string::npos);
      CHECK(e.describe().find(words) != std::string::npos);
    }
  };
  const size_t nstrings = good["strings"].size(), nstacks = good["stacks"].size();
  refused([&](nlohmann::json& j) { j["kernels"]["name"][17] = nstrings; }, "$.kernels.name[17]", "string index out of range");
  refused([&](nlohmann::json& j) { j["kernels"]["name"][2] = "gemm"; }, "$.kernels.name[2]", "non-negative integer");
  refused([&](nlohmann::json& j) { j["kernels"]["stack"][4] = nstacks + 1; }, "$.kernels.stack[4]", "stack index out of range");
  refused([&](nlohmann::json& j) { j["kernels"]["stream"][1] = 2; }, "$.kernels.stream[1]", "stream index out of range");
  refused([&](nlohmann::json& j) { j["kernels"]["streams"][0] = -1; }, "$.kernels.streams[0]", "non-negative integer");
  refused([&](nlohmann::json& j) { j["kernels"]["device"][0] = -2; }, "$.kernels.device[0]", "device index out of range");
  refused([&](nlohmann::json& j) { j["kernels"]["time_us_delta"][6] = 1.5; }, "$.kernels.time_us_delta[6]", "integer or null");
  refused([&](nlohmann::json& j) { j["kernels"]["count"] = 3; }, "$.kernels.device", "expected 3");
  refused([&](nlohmann::json& j) { j["kernels"].erase("stack"); }, "$.kernels.stack", "missing");
  refused([&](nlohmann::json& j) { j["kernels"].erase("count"); }, "$.kernels.count", "non-negative integer");
  refused([&](nlohmann::json& j) { j["kernels"] = nlohmann::json::array(); }, "$.kernels", "expected an object");
  refused([&](nlohmann::json& j) { j["device_memory"]["label"][2] = nstrings + 5; }, "$.device_memory.label[2]",
          "string index out of range");
  refused([&](nlohmann::json& j) { j["device_memory"]["free_bytes"][1] = j["device_memory"]["total_bytes"][1].get<uint64_t>() + 1; },
          "$.device_memory.free_bytes[1]", "more free bytes than total");
  refused([&](nlohmann::json& j) { j["device_memory"]["reserved_bytes"][0] = -5; }, "$.device_memory.reserved_bytes[0]",
          "non-negative integer");
  refused([&](nlohmann::json& j) { j["device_memory"]["total_bytes"].push_back(1); }, "$.device_memory.total_bytes",
          "has 4 entries, expected 3");
}
