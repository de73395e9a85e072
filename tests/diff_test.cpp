// snapdiff diff on real pairs, against PyTorch's own figures.
#include <catch2/catch.hpp>
#include <cmath>
#include <nlohmann/json.hpp>

#include "snapdiff/analysis/diff.hpp"
#include "snapdiff/input/input.hpp"
#include "snapdiff/report/diff_report.hpp"
#include "test_util.hpp"

using namespace snapdiff;

namespace {
struct Pair {
  Trace ta, tb;
  Analysis ra, rb;
  Diff d;
};
std::unique_ptr<Pair> diff_of(const std::string& a, const std::string& b) {
  auto p = std::make_unique<Pair>();
  p->ta = load_trace(test::real_data(a + ".pickle"));
  p->tb = load_trace(test::real_data(b + ".pickle"));
  p->ra = analyze(p->ta, {});
  p->rb = analyze(p->tb, {});
  DiffOptions o;
  o.a_name = a;
  o.b_name = b;
  p->d = diff_reports(p->ra, p->rb, o);
  return p;
}
int64_t cat_delta(const Diff& d, const std::string& name) {
  for (const CategoryDelta& c : d.categories)
    if (c.name == name) return c.delta();
  return 0;
}
}  // namespace

TEST_CASE("diff of real pairs: peak delta exact, parameter delta within 1%", "[analysis][diff]") {
  for (auto [a, b] : {std::pair<std::string, std::string>{"small_bf16", "small_fp8"}, {"small_fp8", "small_fp8_pw"}}) {
    INFO(a << " -> " << b);
    auto p = diff_of(a, b);
    auto ta = test::truth(a), tb = test::truth(b);
    CHECK(p->d.peak_delta[0] == tb["memory_stats"]["requested_bytes.all.peak"].get<int64_t>() -
                                    ta["memory_stats"]["requested_bytes.all.peak"].get<int64_t>());
    CHECK(p->d.peak_delta[1] == tb["memory_stats"]["allocated_bytes.all.peak"].get<int64_t>() -
                                    ta["memory_stats"]["allocated_bytes.all.peak"].get<int64_t>());
    CHECK(p->d.peak_delta[2] == tb["memory_stats"]["reserved_bytes.all.peak"].get<int64_t>() -
                                    ta["memory_stats"]["reserved_bytes.all.peak"].get<int64_t>());
    CHECK(p->d.peak_delta[3] == tb["memory_stats"]["active_bytes.all.peak"].get<int64_t>() -
                                    ta["memory_stats"]["active_bytes.all.peak"].get<int64_t>());
    int64_t want = tb["param_bytes"].get<int64_t>() - ta["param_bytes"].get<int64_t>();
    int64_t got = cat_delta(p->d, "parameter");
    INFO("parameter delta " << got << " want " << want);
    CHECK(std::llabs(got - want) <= std::max<int64_t>(std::llabs(want) / 100, 0));
    // The category deltas sum to the peak delta exactly.
    int64_t sum = 0;
    for (const CategoryDelta& c : p->d.categories) sum += c.delta();
    CHECK(sum == p->d.peak_delta[0]);
  }
}

TEST_CASE("diff shows the foreach step's transient and its absence in the per-parameter loop", "[analysis][diff]") {
  auto p = diff_of("small_fp8", "small_fp8_pw");
  double grads = double(test::truth("small_fp8")["grad_bytes"].get<int64_t>());  // one bf16 copy of the parameters
  bool seen = false;
  for (const PhaseDelta& ph : p->d.phases) {
    if (ph.iteration != 2 || ph.phase != Phase::Optimizer) continue;
    seen = true;
    CHECK(double(ph.a_opt_temp) >= 0.9 * grads);
    CHECK(double(ph.b_opt_temp) <= 0.6 * grads);
  }
  CHECK(seen);
  bool finding = false;
  for (const Finding& f : p->d.findings)
    if (f.code == Code::DiffOptimizerTransient) {
      finding = true;
      CHECK(f.bytes < 0);
      CHECK(finding_text(f).find("foreach") != std::string::npos);
    }
  CHECK(finding);
  bool params = false;
  for (const Finding& f : p->d.findings)
    params |= f.code == Code::DiffCategory && finding_text(f).rfind("parameter", 0) == 0 && finding_text(f).find("half the bytes") != std::string::npos;
  CHECK(params);
}

TEST_CASE("a snapshot diffed with itself: all deltas zero, no findings", "[analysis][diff]") {
  auto p = diff_of("small_bf16", "small_bf16");
  for (int i = 0; i < 3; ++i) CHECK(p->d.peak_delta[i] == 0);
  for (const CategoryDelta& c : p->d.categories) CHECK(c.delta() == 0);
  for (const PhaseDelta& ph : p->d.phases) CHECK((ph.in_a && ph.in_b && ph.a_peak == ph.b_peak));
  CHECK(p->d.sites.empty());
  CHECK(p->d.findings.empty());
}

TEST_CASE("diff JSON carries the documented fields; markdown opens with a table", "[report][diff]") {
  auto p = diff_of("small_bf16", "small_fp8");
  auto j = nlohmann::json::parse(render_diff_json(p->d));
  CHECK(j["schema"] == "snapdiff/diff/1");
  CHECK(j["a"]["schema"] == "snapdiff/report/1");
  CHECK(j["b"]["peak"]["requested_bytes"].get<int64_t>() == p->rb.devices[0].replay.peak_requested.bytes);
  CHECK(j["delta"]["peak"]["requested_bytes"].get<int64_t>() == p->d.peak_delta[0]);
  CHECK(j["delta"]["peak"]["allocated_bytes"].get<int64_t>() == p->d.peak_delta[1]);
  CHECK(j["delta"]["peak"]["reserved_bytes"].get<int64_t>() == p->d.peak_delta[2]);
  CHECK(j["delta"]["categories"].is_object());
  REQUIRE(j["phases"].is_array());
  CHECK(j["phases"][0].contains("a_peak_requested_bytes"));
  CHECK(j["phases"][0].contains("b_peak_requested_bytes"));
  CHECK(j["sites"].is_array());
  for (auto& f : j["findings"]) {
    CHECK(f.contains("kind"));
    CHECK(f.contains("message"));
    CHECK(f.contains("bytes"));
  }
  std::string md = render_diff_markdown(p->d);
  CHECK(md.find("| peak | A | B |") != std::string::npos);
  CHECK(md.find("<details>") != std::string::npos);
}

TEST_CASE("sites match by function and file, not line numbers", "[analysis][diff]") {
  Trace ta = load_trace(test::real_data("small_bf16.pickle"));
  Trace tb = load_trace(test::real_data("small_bf16.pickle"));
  // Shift every line number in B, as an edit above the code would.
  for (Frame& f : tb.frames)
    if (f.line >= 0) f.line += 7;
  Analysis ra = analyze(ta, {}), rb = analyze(tb, {});
  Diff d = diff_reports(ra, rb, {});
  CHECK(d.sites.empty());
  CHECK(d.findings.empty());
}

TEST_CASE("deep stacks are matched whole, their keys cut for display", "[analysis][diff]") {
  // Two runs, each: one 3,000-frame stack alike in both, and one whose frame
  // 1,500 (in the part a key leaves out) differs between them.
  const size_t depth = 3000;
  auto make = [&](Trace& t, const char* middle) {
    std::vector<FrameId> fr;
    for (size_t i = 0; i < depth; ++i) {
      Frame f;
      f.name = t.strings.intern(i == depth / 2 ? std::string(middle) : std::string("f").append(std::to_string(i)));
      f.file = t.strings.intern("/home/u/model.py");
      f.line = int64_t(i);
      fr.push_back(t.intern_frame(f));
    }
    StackId same = 0, other = 0;
    for (size_t i = 0; i < depth; ++i) other = t.stacks.child(other, fr[i]);
    Frame g;
    g.name = t.strings.intern("g");
    g.file = t.strings.intern("/home/u/model.py");
    const FrameId gf = t.intern_frame(g);
    for (size_t i = 0; i < depth; ++i) same = t.stacks.child(same, i == depth / 2 ? gf : fr[i]);
    Device& d = t.device(0);
    d.has_trace = true;
    uint64_t addr = 1 << 20;
    for (StackId s : {same, other}) {
      Event e;
      e.kind = EventKind::Alloc;
      e.addr = addr;
      e.size = (s == same ? 3 : 1) << 20;
      e.stack = s;
      e.time_us = int64_t(addr);
      addr += 8 << 20;
      d.events.push_back(e);
    }
  };
  Trace ta, tb;
  make(ta, "mid_a");
  make(tb, "mid_b");
  Analysis ra = analyze(ta, {}), rb = analyze(tb, {});
  Diff d = diff_reports(ra, rb, {});
  // The alike stack: one row, no change (not listed); the other: gone in A's
  // form, new in B's, though their keys print alike.
  REQUIRE(d.sites.size() == 2);
  CHECK(d.sites[0].key == d.sites[1].key);
  CHECK(d.sites[0].key.find("frames elided>;") != std::string::npos);
  CHECK(d.sites[0].key.size() < 20 * kShownFrames);
  CHECK(((d.sites[0].a == 1 << 20 && d.sites[1].b == 1 << 20) || (d.sites[0].b == 1 << 20 && d.sites[1].a == 1 << 20)));
  CHECK(d.peak_delta[0] == 0);
}
