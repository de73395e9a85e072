// The bad-input contract for the readers the robustness tests do not cover
// yet: .snap documents and a real profiler trace (truncations, bit flips),
// deep nesting, budget and rules files, and pickles with huge declared
// lengths. Every case ends in a result or an InputError that says where —
// never a crash, a hang, or an allocation sized by the input's claims.
#include <catch2/catch.hpp>
#include <filesystem>
#include <random>

#include "input/file_source.hpp"
#include "snapdiff/analysis/attribution.hpp"
#include "snapdiff/input/budget_io.hpp"
#include "snapdiff/analysis/check.hpp"
#include "snapdiff/error.hpp"
#include "snapdiff/input/input.hpp"
#include "snapdiff/analysis/analysis.hpp"
#include "snapdiff/report/report.hpp"
#include "test_util.hpp"

using namespace snapdiff;

namespace {

std::string src(const std::string& rel) { return std::string(SNAPDIFF_SOURCE_DIR) + "/" + rel; }

// A small real .snap document (snapcapture's OOM run), as JSON text.
std::string small_snap_json() {
  std::string gz = test::read_file(src("tests/data/capture/small_oom_fp8.snap"));
  auto raw = detail::gunzip(reinterpret_cast<const uint8_t*>(gz.data()), gz.size(), uint64_t(64) << 20);
  return std::string(raw.begin(), raw.end());
}

bool located(const InputError& e) { return e.has_offset() || !e.json_path().empty(); }

}  // namespace

TEST_CASE("every truncation of a real .snap is a located input error", "[input][contract]") {
  std::string full = small_snap_json();
  REQUIRE(full.size() > 10000);
  REQUIRE_NOTHROW(load_trace_from_memory(full, "t.snap"));
  size_t errors = 0, with_place = 0;
  // Every prefix of the first 4 KiB and the last 4 KiB, and every 7th in between.
  for (size_t len = 0; len < full.size(); len += (len < 4096 || len + 4096 > full.size()) ? 1 : 7) {
    try {
      load_trace_from_memory(std::string_view(full.data(), len), "t.snap");
    } catch (const InputError& e) {
      ++errors;
      with_place += located(e) ? 1 : 0;
    }
  }
  size_t tried = 0;
  for (size_t len = 0; len < full.size(); len += (len < 4096 || len + 4096 > full.size()) ? 1 : 7) ++tried;
  CHECK(errors == tried);
  // A prefix too short to tell a format from has no position to report.
  CHECK(with_place + 2 >= errors);
}

TEST_CASE("truncations of a gzip'd .snap are input errors", "[input][contract]") {
  std::string gz = test::read_file(src("tests/data/capture/small_oom_fp8.snap"));
  for (size_t len = 0; len < gz.size(); len += 13)
    CHECK_THROWS_AS(load_trace_from_memory(std::string_view(gz.data(), len), "t.snap"), InputError);
}

TEST_CASE("bit flips in a real .snap never crash", "[input][contract]") {
  std::string full = small_snap_json();
  std::mt19937_64 rng(2026);
  for (int i = 0; i < 1500; ++i) {
    std::string m = full;
    int flips = 1 + int(rng() % 4);
    for (int k = 0; k < flips; ++k) m[rng() % m.size()] ^= char(1 << (rng() % 8));
    REQUIRE(test::survives(m));
  }
}

// A real torch.profiler trace (the joint run recorded on an H200), as JSON.
std::string real_trace_json() {
  std::string gz = test::read_file(src("tests/data/profile/joint.trace.json.gz"));
  auto raw = detail::gunzip(reinterpret_cast<const uint8_t*>(gz.data()), gz.size(), uint64_t(64) << 20);
  return std::string(raw.begin(), raw.end());
}

TEST_CASE("truncations of a real profiler trace are located input errors", "[input][contract][trace]") {
  const std::string full = real_trace_json();
  REQUIRE(full.size() > 100000);
  REQUIRE_NOTHROW(load_trace_from_memory(full, "t.json"));
  // Every prefix of the first 4 KiB and of the last 512 bytes (the closing
  // members and brackets), and every 4,099th in between.
  size_t tried = 0, errors = 0, with_place = 0;
  for (size_t len = 0; len < full.size(); len += (len < 4096 || len + 512 > full.size()) ? 1 : 4099) {
    ++tried;
    try {
      load_trace_from_memory(std::string_view(full.data(), len), "t.json");
    } catch (const InputError& e) {
      ++errors;
      with_place += located(e) ? 1 : 0;
    }
  }
  CHECK(errors == tried);
  // A prefix too short to tell a format from (the first bytes) has no place.
  CHECK(with_place + 16 >= errors);
  // gzip'd: cut anywhere, an input error.
  const std::string gz = test::read_file(src("tests/data/profile/joint.trace.json.gz"));
  for (size_t len = 0; len < gz.size(); len += 97)
    CHECK_THROWS_AS(load_trace_from_memory(std::string_view(gz.data(), len), "t.json.gz"), InputError);
}

TEST_CASE("bit flips in a real profiler trace never crash", "[input][contract][trace]") {
  const std::string full = real_trace_json();
  std::mt19937_64 rng(2027);
  for (int i = 0; i < 400; ++i) {
    std::string m = full;
    int flips = 1 + int(rng() % 4);
    for (int k = 0; k < flips; ++k) m[rng() % m.size()] ^= char(1 << (rng() % 8));
    REQUIRE(test::survives(m));
  }
}

TEST_CASE("deeply nested JSON is refused without exhausting the stack", "[input][contract]") {
  for (size_t depth : {size_t(1000), size_t(100000), size_t(1000000)}) {
    INFO(depth);
    std::string doc = R"({"format": "snapdiff.snap", "version": 1, "x": )" + std::string(depth, '[') +
                      std::string(depth, ']') + "}";
    CHECK_THROWS_AS(load_trace_from_memory(doc, "deep.snap"), InputError);
    std::string unclosed = std::string(depth, '{');
    CHECK_THROWS_AS(load_trace_from_memory(unclosed, "deep.snap"), InputError);
  }
}

TEST_CASE("budget and rules files: truncations and bit flips are input errors, never crashes", "[analysis][contract]") {
  std::string budget = test::read_file(src("fuzz/seeds/budget_example.json"));
  std::string rules = test::read_file(src("fuzz/seeds/rules_user.json"));
  // Every proper prefix of the document (without its final newline) is broken.
  for (std::string* s : {&budget, &rules})
    while (!s->empty() && (s->back() == '\n' || s->back() == ' ')) s->pop_back();
  REQUIRE_NOTHROW(parse_budget(budget, "b.json"));
  RuleSet base = RuleSet::builtin();
  {
    RuleSet r = base;
    REQUIRE_NOTHROW(r.add_json(rules, "r.json"));
  }
  for (size_t len = 0; len < budget.size(); ++len)
    CHECK_THROWS_AS(parse_budget(budget.substr(0, len), "b.json"), InputError);
  for (size_t len = 0; len < rules.size(); ++len) {
    RuleSet r = base;
    CHECK_THROWS_AS(r.add_json(rules.substr(0, len), "r.json"), InputError);
  }
  std::mt19937_64 rng(99);
  for (int i = 0; i < 1000; ++i) {
    std::string b = budget, q = rules;
    b[rng() % b.size()] ^= char(1 << (rng() % 8));
    q[rng() % q.size()] ^= char(1 << (rng() % 8));
    try {
      (void)parse_budget(b, "b.json");
    } catch (const InputError&) {
    }
    RuleSet r = base;
    try {
      r.add_json(q, "r.json");
    } catch (const InputError&) {
    }
  }
}

TEST_CASE("huge declared lengths are refused at once, without allocating them", "[input][contract][pickle]") {
  // Each opcode claims far more bytes than the input holds.
  struct Case {
    const char* name;
    std::vector<uint8_t> bytes;
  };
  auto le = [](uint64_t v, int n) {
    std::vector<uint8_t> out;
    for (int i = 0; i < n; ++i) out.push_back(uint8_t(v >> (8 * i)));
    return out;
  };
  auto cat = [](std::vector<uint8_t> a, const std::vector<uint8_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  std::vector<Case> cases = {
      {"BINUNICODE8 2^62", cat(cat({0x80, 4, 0x8d}, le(uint64_t(1) << 62, 8)), {'a', '.'})},
      {"BINBYTES8 2^62", cat(cat({0x80, 4, 0x8e}, le(uint64_t(1) << 62, 8)), {'a', '.'})},
      {"BINUNICODE 4 GiB", cat(cat({0x80, 2, 'X'}, le(0xffffffffu, 4)), {'a', '.'})},
      {"LONG4 4 GiB", cat(cat({0x80, 2, 0x8b}, le(0xfffffff0u, 4)), {1, '.'})},
      {"FRAME 2^60", cat(cat({0x80, 4, 0x95}, le(uint64_t(1) << 60, 8)), {'N', '.'})},
      {"BINBYTES 4 GiB", cat(cat({0x80, 3, 'B'}, le(0xffffffffu, 4)), {'a', '.'})},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    try {
      load_trace_from_memory(std::string_view(reinterpret_cast<const char*>(c.bytes.data()), c.bytes.size()),
                             "huge.pickle");
      FAIL("accepted");
    } catch (const InputError& e) {
      // An attempt to allocate the claimed size would end in bad_alloc (or
      // the sanitizer's allocation-size error), not in this located error.
      CHECK(e.has_offset());
    }
  }
}

TEST_CASE("every fuzzer finding stays fixed (tests/data/fuzz_regressions)", "[input][contract][fuzz]") {
  namespace fs = std::filesystem;
  size_t n = 0;
  for (const auto& entry : fs::directory_iterator(src("tests/data/fuzz_regressions"))) {
    const std::string name = entry.path().filename().string();
    const std::string bytes = test::read_file(entry.path().string());
    INFO(name);
    ++n;
    // The file name says which reader found it; each must end in a result or
    // an InputError (anything else escaping is what the fuzzer reported).
    try {
      if (name.rfind("budget_", 0) == 0) {
        (void)parse_budget(bytes, name);
      } else if (name.rfind("rules_", 0) == 0) {
        RuleSet r = RuleSet::builtin();
        r.add_json(bytes, name);
      } else if (name.rfind("snap_", 0) == 0) {
        Trace t;
        read_snap(bytes, t);
        (void)analyze(t, {});
      } else {
        Trace t = load_trace_from_memory(bytes, name);
        (void)analyze(t, {});
      }
    } catch (const InputError&) {
    }
  }
  CHECK(n >= 1);
}
