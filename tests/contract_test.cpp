// The bad-input contract for the readers the robustness tests do not cover
// yet: .snap documents and a real profiler trace (truncations, bit flips),
// deep nesting, budget and rules files, and pickles with huge declared
// lengths. Every case ends in a result or an InputError that says where —
// never a crash, a hang, or an allocation sized by the input's claims.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>

#include "input/file_source.hpp"
#include "snapdiff/analysis/attribution.hpp"
#include "snapdiff/input/profiler.hpp"
#include "snapdiff/input/budget_io.hpp"
#include "snapdiff/analysis/check.hpp"
#include "snapdiff/error.hpp"
#include "snapdiff/input/input.hpp"
#include "snapdiff/analysis/analysis.hpp"
#include "snapdiff/report/report.hpp"
#include "snapdiff/report/report_read.hpp"
#include "test_util.hpp"
#include "../fuzz/whatif_program.hpp"
#include "util/read_file.hpp"

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
      } else if (name.rfind("tensors_", 0) == 0) {
        Trace t;
        t.tensors = read_tensor_list(bytes, name);
        (void)analyze(t, {});
      } else if (name.rfind("snap_", 0) == 0) {
        Trace t;
        read_snap(bytes, t);
        (void)analyze(t, {});
      } else if (name.rfind("summary_", 0) == 0) {
        (void)read_summary(bytes, name, kMaxSummaryBytes, uint64_t(512) << 20);
      } else if (name.rfind("whatif_", 0) == 0) {
        // fuzz_whatif: settings, then a program of requests; the figures
        // modelled must be possible (a refused setting is a UsageError).
        fuzz::WhatIfCase c = fuzz::whatif_case(bytes);
        try {
          const WhatIfResult r = what_if(c.trace, {parse_alloc_conf(c.conf)}, c.opts);
          CHECK(fuzz::whatif_impossible(r) == "");
        } catch (const UsageError&) {
        }
      } else {
        Trace t = load_trace_from_memory(bytes, name);
        (void)analyze(t, {});
      }
    } catch (const InputError&) {
    }
  }
  CHECK(n >= 1);
}

// ---- bounds: every read of a non-regular file, every reader ----------------------

namespace {

std::string_view bytes_view(const std::vector<uint8_t>& v) {
  return std::string_view(reinterpret_cast<const char*>(v.data()), v.size());
}

LoadOptions memory_mib(uint64_t mib) {
  LoadOptions o;
  o.max_memory_bytes = mib << 20;
  return o;
}

std::string what_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.describe();
  }
  return "";
}

struct TempDir {
  std::filesystem::path p;
  TempDir() {
    char tmpl[] = "/tmp/snapdiff-bounds-XXXXXX";
    p = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(p); }
  std::string operator/(const char* name) const { return (p / name).string(); }
};

void write_bytes(const std::string& path, std::string_view bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

}  // namespace

TEST_CASE("bounds: rules and budget files are read within a fixed bound, FIFOs without a writer do not hang",
          "[input][contract][bounds]") {
  TempDir d;
  const std::string fifo = d / "nowriter.fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // open() of a FIFO without a writer would wait for one: empty instead.
  CHECK(detail::read_small_file(fifo, "rules file").empty());
  CHECK(what_of([&] { (void)read_budget_file(fifo); }).rfind(fifo + ": ", 0) == 0);
  // Endless: refused one byte past the bound.
  const std::string zero = what_of([] { (void)detail::read_small_file("/dev/zero", "rules file"); });
  CHECK(zero == "/dev/zero: the rules file holds more than 16777216 bytes (the limit for rules files)");
  CHECK(what_of([] { (void)read_budget_file("/dev/zero"); }).find("budget file holds more than") != std::string::npos);
  // A regular file: refused by its size, at any bound given.
  const std::string f = d / "r.json";
  write_bytes(f, std::string(100, ' '));
  CHECK(detail::read_small_file(f, "rules file", 100).size() == 100);
  CHECK(what_of([&] { (void)detail::read_small_file(f, "rules file", 99); }).find("holds more than 99 bytes") !=
        std::string::npos);
  CHECK(what_of([&] { (void)detail::read_small_file(d / "missing", "rules file"); }).find("cannot open the rules file") !=
        std::string::npos);
  CHECK(what_of([&] { (void)detail::read_small_file(d.p.string(), "rules file"); }).find("is a directory") !=
        std::string::npos);
}

TEST_CASE("bounds: endless inputs and --max-input-bytes for every kind of input", "[input][contract][bounds]") {
  LoadOptions small;
  small.max_decoded_bytes = 1'000'000;
  CHECK(what_of([&] { (void)load_trace("/dev/zero", small); }) ==
        "/dev/zero: offset 1000000: the input holds more than 1000000 bytes (the limit; raise it with --max-input-bytes)");
  // Endless and unbounded in size: the memory bound stops it.
  const std::string zero = what_of([] { (void)load_trace("/dev/zero", memory_mib(80)); });
  CHECK(zero.find("/dev/zero: offset ") == 0);
  CHECK(zero.find("needs more than the limit of 80 MiB of memory (raise it with --max-memory)") != std::string::npos);
  // A plain regular file larger than the bound, at any bound: 0, 1, its size - 1.
  const std::string path = test::real_data("small_fp8.pickle");
  const uint64_t size = std::filesystem::file_size(path);
  for (uint64_t limit : {uint64_t(0), uint64_t(1), size - 1}) {
    LoadOptions o;
    o.max_decoded_bytes = limit;
    CHECK(what_of([&] { (void)load_trace(path, o); }) ==
          path + ": the input holds more than " + std::to_string(limit) +
              " bytes (the limit; raise it with --max-input-bytes)");
  }
  LoadOptions exact;
  exact.max_decoded_bytes = size;
  CHECK_NOTHROW(load_trace(path, exact));
}

TEST_CASE("bounds: bytes after a gzip stream are refused, concatenated members read", "[input][contract][bounds]") {
  const std::string raw = test::read_file(test::real_data("small_bf16.pickle"));
  const auto gz = detail::gzip_compress(raw);
  std::string garbage(bytes_view(gz));
  garbage += "garbage!";
  CHECK(what_of([&] { (void)load_trace_from_memory(garbage, "g.pickle.gz"); }) ==
        "g.pickle.gz: offset " + std::to_string(gz.size()) +
            ": 8 bytes after the end of the gzip stream (not another gzip member): the file is damaged or not one gzip file");
  // Two members are one gzip file: read like the plain pickle.
  const size_t h = raw.size() / 2;
  auto a = detail::gzip_compress(std::string_view(raw).substr(0, h));
  const auto b = detail::gzip_compress(std::string_view(raw).substr(h));
  a.insert(a.end(), b.begin(), b.end());
  CHECK(load_trace_from_memory(bytes_view(a), "two.pickle.gz").event_count() ==
        load_trace_from_memory(raw, "plain.pickle").event_count());
  // The streamed reader (a gzip'd Chrome trace in a file) says the same.
  TempDir d;
  std::string trace = test::read_file(test::real_data("small_profile.trace.json.gz"));
  trace += std::string(3, '\0');
  const std::string f = d / "t.json.gz";
  write_bytes(f, trace);
  CHECK(what_of([&] { (void)load_trace(f); }).find("3 bytes after the end of the gzip stream") != std::string::npos);
}

TEST_CASE("bounds: Chrome traces hold their buffers and records to the memory bound", "[input][contract][bounds]") {
  // Files: a regular file is streamed (in memory or from a pipe, a trace is
  // held whole and predicted as JSON text, 9 times its size).
  TempDir d;
  const std::string op = R"({"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":1000,"dur":1})";
  // 600,000 identical events: 46 MB of text, a few hundred KB of gzip.
  std::string text = "{\"traceEvents\": [";
  for (int i = 0; i < 600'000; ++i) text += (i ? "," : "") + op;
  text += "]}";
  const std::string events = d / "events.json.gz";
  write_bytes(events, bytes_view(detail::gzip_compress(text, 6)));
  const std::string refused = what_of([&] { (void)load_trace(events, memory_mib(100)); });
  CHECK(refused.find(events + ": $.traceEvents[") == 0);
  CHECK(refused.find("needs more than the limit of 100 MiB of memory (raise it with --max-memory)") != std::string::npos);
  // One member value of 20 MB: refused before the buffer doubles to hold it.
  const std::string member = d / "member.json.gz";
  write_bytes(member, bytes_view(detail::gzip_compress(
                          "{\"traceEvents\": [" + op + "], \"x\": \"" + std::string(20 << 20, 'a') + "\"}", 1)));
  CHECK(what_of([&] { (void)load_trace(member, memory_mib(100)); })
            .find("a single JSON value larger than 9 MiB (the memory limit; raise it with --max-memory)") !=
        std::string::npos);
  // Spaces between elements are skipped without keeping the buffers that
  // held them (the reading thread retires only buffers it handed elements from).
  const std::string spaces = d / "spaces.json";
  write_bytes(spaces, "{\"traceEvents\": [" + op + "," + std::string(16 << 20, ' ') + op + "]}");
  Trace t = load_trace(spaces, memory_mib(100));
  CHECK(t.ops.size() == 2);
  // A real trace reads under the bound its size predicts.
  const std::string real = test::real_data("small_profile.trace.json.gz");
  LoadOptions p;
  p.max_memory_bytes = std::filesystem::file_size(real) * 16 / 2 + (uint64_t(64) << 20);
  CHECK_NOTHROW(load_trace(real, p));
}

TEST_CASE("bounds: DOM readers (memory timelines, .snap) count tokens before parsing", "[input][contract][bounds]") {
  // 300,000 rows of zeros: about 20 bytes each, 18 times that as a DOM.
  std::string tl = "[[";
  for (int i = 0; i < 300'000; ++i) tl += i ? ",0" : "0";
  tl += "],[";
  for (int i = 0; i < 300'000; ++i) tl += i ? ",[0,0,0,0,0,0,0,0,0]" : "[0,0,0,0,0,0,0,0,0]";
  tl += "]]";
  const auto tgz = detail::gzip_compress(tl, 6);
  CHECK(what_of([&] { (void)read_memory_timeline(bytes_view(tgz), "tl.json.gz", memory_mib(128)); })
            .find("tl.json.gz: reading and analysing this input needs about") == 0);
  // A million empty objects in a .snap: 3 MB of text, 80 MB of DOM.
  std::string snap = "{\"format\": \"snapdiff.snap\", \"version\": 1, \"x\": [";
  for (int i = 0; i < 1'000'000; ++i) snap += i ? ",{}" : "{}";
  snap += "]}";
  const auto sgz = detail::gzip_compress(snap, 6);
  CHECK(what_of([&] { (void)load_trace_from_memory(bytes_view(sgz), "o.snap", memory_mib(128)); })
            .find("(raise it with --max-memory)") != std::string::npos);
  // Real ones read under their predicted bounds.
  LoadOptions o = memory_mib(256);
  CHECK(read_memory_timeline(test::read_file(test::real_data("small_profile.memtl.json")), "m.json", o).sizes.size() ==
        584);
  CHECK_NOTHROW(load_trace_from_memory(small_snap_json(), "s.snap", o));
}
