// snapdiff diff's site matching, reserved finding and allocator settings on
// real recordings, against PyTorch's own figures (the .truth.json files).
#include <catch2/catch.hpp>
#include <cmath>
#include <nlohmann/json.hpp>

#include "snapdiff/analysis/diff.hpp"
#include "snapdiff/input/input.hpp"
#include "snapdiff/report/diff_report.hpp"
#include "snapdiff/report/report.hpp"
#include "test_util.hpp"

using namespace snapdiff;

namespace {
struct Pair {
  Trace ta, tb;
  Analysis ra, rb;
  Diff d;
};
std::unique_ptr<Pair> diff_files(const std::string& a, const std::string& b, size_t depth = 1) {
  auto p = std::make_unique<Pair>();
  p->ta = load_trace(a);
  p->tb = load_trace(b);
  p->ra = analyze(p->ta, {});
  p->rb = analyze(p->tb, {});
  DiffOptions o;
  o.depth = depth;
  o.top_sites = 1000;
  p->d = diff_reports(p->ra, p->rb, o);
  return p;
}
int64_t cat_delta(const Diff& d, const std::string& name) {
  for (const CategoryDelta& c : d.categories)
    if (c.name == name) return c.delta();
  return 0;
}
// The B bytes of rows whose display names `where` in `category`, growing.
int64_t grown_at(const Diff& d, const std::string& where, const std::string& category) {
  int64_t sum = 0;
  for (const SiteDelta& s : d.sites)
    if (s.category == category && s.display.find(where) != std::string::npos && s.delta() > 0) sum += s.delta();
  return sum;
}
}  // namespace

TEST_CASE("FP8 diff: the FP8 bytes are named at the lines that allocate them", "[analysis]") {
  // small_fp8 keeps, per linear, an FP8 copy of its input (torch_reference.py
  // line 37, activation) and FP8 transposes of its weights (line 43,
  // parameter_copy); neither exists in bf16.
  auto p = diff_files(test::real_data("small_bf16.pickle"), test::real_data("small_fp8.pickle"));
  const int64_t copies = cat_delta(p->d, "parameter_copy");
  REQUIRE(copies > 0);
  CHECK(grown_at(p->d, "torch_reference.py:43)", "parameter_copy") == copies);
  CHECK(grown_at(p->d, "torch_reference.py:37)", "activation") > 0);
  // Every row matched by its lines shows a line its own key has.
  for (const SiteDelta& s : p->d.sites) {
    if (s.moved || s.tensor_bytes || s.display.find("torch_reference.py:") == std::string::npos) continue;
    const size_t at = s.display.find("torch_reference.py:") + 19;
    const std::string line = s.display.substr(at, s.display.find(')', at) - at);
    INFO(s.display << "  key " << s.key);
    CHECK(s.key.find("torch_reference.py:" + line + ";") != std::string::npos);
  }
  // The findings carry the same lines.
  bool named = false;
  for (const Finding& f : p->d.findings)
    if (f.code == Code::DiffCategory && std::get<DiffCategoryFacts>(f.facts).category == "parameter_copy")
      named = finding_text(f).find("torch_reference.py:43)") != std::string::npos;
  CHECK(named);
}

TEST_CASE("sites on one side alone fall back to function and file, marked", "[analysis]") {
  // Every line of B shifted: no stack with its lines exists in both runs, all
  // match by function and file, with nothing changed.
  Trace ta = load_trace(test::real_data("small_bf16.pickle"));
  Trace tb = load_trace(test::real_data("small_bf16.pickle"));
  for (Frame& f : tb.frames)
    if (f.line >= 0) f.line += 7;
  Analysis ra = analyze(ta, {}), rb = analyze(tb, {});
  DiffOptions o;
  Diff d = diff_reports(ra, rb, o);
  CHECK(d.sites.empty());
  // One line of B moved (the frame of a site at A's peak): its stacks exist
  // on one side alone each, and match by function and file, marked.
  Trace tc = load_trace(test::real_data("small_bf16.pickle"));
  FrameId uf = kNoFrame;
  for (uint32_t id : ra.devices[0].attr.live_at(ra.devices[0].peak_index)) {
    const Allocation& al = ra.devices[0].attr.allocations[id];
    if (al.stack != 0 && ra.devices[0].attr.categories[al.category] == "activation") {
      uf = ra.frames->user_frame(al.stack);
      if (uf != kNoFrame) break;
    }
  }
  REQUIRE(uf != kNoFrame);
  tc.frames[uf].line += 1000;
  Analysis rb2 = analyze(tc, {});
  Diff d2 = diff_reports(ra, rb2, o);
  REQUIRE(d2.sites.empty());  // moved, unchanged: nothing to list
  // A site that moved and grew: f at line 10 with 1 MiB in A, at line 20
  // with 3 MiB in B; its caller unchanged.
  auto make = [](Trace& t, int64_t line, uint64_t size) {
    Frame f, m;
    f.name = t.strings.intern("f");
    f.file = t.strings.intern("/home/u/model.py");
    f.line = line;
    m.name = t.strings.intern("main");
    m.file = t.strings.intern("/home/u/train.py");
    m.line = 5;
    const StackId s = t.stacks.child(t.stacks.child(0, t.intern_frame(m)), t.intern_frame(f));
    test::push_alloc(t, 1 << 20, size, s, 1);
  };
  Trace sa, sb;
  make(sa, 10, 1 << 20);
  make(sb, 20, 3 << 20);
  Analysis qa = analyze(sa, {}), qb = analyze(sb, {});
  d2 = diff_reports(qa, qb, o);
  REQUIRE(d2.sites.size() == 1);
  CHECK(d2.sites[0].moved);
  CHECK(d2.sites[0].delta() == 2 << 20);
  CHECK(d2.sites[0].display.find("model.py:20") != std::string::npos);
  CHECK(d2.sites[0].a_display.find("model.py:10") != std::string::npos);
  const std::string text = render_diff_text(d2, kMaxTextWidth);
  CHECK(text.find("[MOVED]") != std::string::npos);
  CHECK(text.find("(in A: ") != std::string::npos);
  auto j = nlohmann::json::parse(render_diff_json(d2));
  bool json_marked = false;
  for (auto& r : j["sites"]) json_marked |= r["matched_by"] == "function_and_file";
  CHECK(json_marked);
  CHECK(render_diff_markdown(d2).find("[MOVED]") != std::string::npos);
}

TEST_CASE("sites matched by function and file: one row per line, never two lines of a run merged", "[analysis]") {
  // small_fp8 against small_fp8_pw: the reference workload's forward keeps an
  // FP8 input copy (torch_reference.py:37) and an FP8 weight transpose (:43)
  // in both runs, called from other lines in B (the FP8-primary-weight
  // path), so their stacks with lines exist on one side alone each.
  auto p = diff_files(test::real_data("small_fp8.pickle"), test::real_data("small_fp8_pw.pickle"));
  size_t moved = 0;
  for (const SiteDelta& s : p->d.sites) {
    if (!s.moved) continue;
    ++moved;
    INFO(s.display << "  (in A: " << s.a_display << ")");
    // A moved row pairs one site of each run: its B line and its A line are
    // the same line of the same function, or the code around it shifted.
    for (const char* line : {"torch_reference.py:37)", "torch_reference.py:43)"})
      CHECK((s.display.find(line) != std::string::npos) == (s.a_display.find(line) != std::string::npos));
  }
  CHECK(moved > 0);
  // The changed rows hold no more of B than B's bytes live at its peak.
  int64_t b = p->d.other_sites.b;
  for (const SiteDelta& s : p->d.sites) b += s.b;
  CHECK(b <= p->rb.devices[p->rb.peak_device].peak_live_requested);
  // Synthetic: A allocates at lines 37 and 43 of f, called from main:5; B at
  // the same two lines called from main:9 (the caller moved). Two moved rows,
  // each line with its own, nothing new or gone.
  auto make = [](Trace& t, int64_t caller_line, std::initializer_list<std::pair<int64_t, uint64_t>> sites) {
    int64_t time = 1;
    for (auto [line, size] : sites) {
      Frame f, m;
      f.name = t.strings.intern("forward");
      f.file = t.strings.intern("/home/u/model.py");
      f.line = line;
      m.name = t.strings.intern("main");
      m.file = t.strings.intern("/home/u/train.py");
      m.line = caller_line;
      const StackId s = t.stacks.child(t.stacks.child(0, t.intern_frame(m)), t.intern_frame(f));
      test::push_alloc(t, uint64_t(time) << 24, size, s, time);
      ++time;
    }
  };
  Trace sa, sb;
  make(sa, 5, {{37, 1 << 20}, {43, 4 << 20}});
  make(sb, 9, {{37, 1 << 20}, {43, 6 << 20}});
  Analysis qa = analyze(sa, {}), qb = analyze(sb, {});
  DiffOptions o;
  const Diff d = diff_reports(qa, qb, o);
  REQUIRE(d.sites.size() == 1);  // line 37 moved unchanged: not listed
  CHECK(d.sites[0].moved);
  CHECK(d.sites[0].delta() == 2 << 20);
  CHECK(d.sites[0].display.find("model.py:43") != std::string::npos);
  CHECK(d.sites[0].a_display.find("model.py:43") != std::string::npos);
  // B adds a third line (49) under the moved caller: new, not merged.
  Trace sc;
  make(sc, 9, {{37, 1 << 20}, {43, 4 << 20}, {49, 8 << 20}});
  Analysis qc = analyze(sc, {});
  const Diff d2 = diff_reports(qa, qc, o);
  REQUIRE(d2.sites.size() == 1);
  CHECK(d2.sites[0].a_count == 0);  // [NEW]
  CHECK(d2.sites[0].display.find("model.py:49") != std::string::npos);
}

TEST_CASE("the same run recorded with Python and with C++ stacks diffs as no change", "[analysis]") {
  // One workload, one seed, recorded with stacks="python" and stacks="all":
  // the reference workload (small_bf16, small_bf16_cpp) and transformers'
  // GPT-2 (ans_gpt2_py, ans_gpt2_cpp). PyTorch's peaks are equal.
  for (auto [a, b] : {std::pair<std::string, std::string>{"small_bf16", "small_bf16_cpp"}, {"ans_gpt2_py", "ans_gpt2_cpp"}}) {
    INFO(a << " -> " << b);
    auto ta = test::truth(a), tb = test::truth(b);
    REQUIRE(ta["memory_stats"]["requested_bytes.all.peak"] == tb["memory_stats"]["requested_bytes.all.peak"]);
    const std::string ext = a == "small_bf16" ? ".pickle" : ".pickle.gz";
    auto p = diff_files(test::real_data(a + ext), test::real_data(b + ext));
    const int64_t peak = p->rb.devices[0].replay.peak_requested.bytes;
    CHECK(peak == tb["memory_stats"]["requested_bytes.all.peak"].get<int64_t>());
    for (const SiteDelta& s : p->d.sites) {
      INFO(s.display << " " << s.delta());
      CHECK(std::llabs(s.delta()) <= peak / 100);
    }
    for (const CategoryDelta& c : p->d.categories) {
      INFO(c.name);
      CHECK(std::llabs(c.delta()) <= peak / 100);
    }
    // The other way round too.
    auto q = diff_files(test::real_data(b + ext), test::real_data(a + ext));
    for (const SiteDelta& s : q->d.sites) CHECK(std::llabs(s.delta()) <= peak / 100);
  }
}

TEST_CASE("gradients are matched by tensor size, not by the engine's stack", "[analysis]") {
  // bf16 -> fp8 keeps the same parameters: their gradients' sizes are equal,
  // whatever stack (none, or backward's) each run recorded them under.
  auto p = diff_files(test::real_data("small_bf16.pickle"), test::real_data("small_fp8.pickle"));
  REQUIRE(test::truth("small_bf16")["grad_bytes"] == test::truth("small_fp8")["grad_bytes"]);
  const int64_t grads = test::truth("small_bf16")["grad_bytes"].get<int64_t>();
  for (const SiteDelta& s : p->d.sites) {
    if (s.category != "gradient") continue;
    INFO(s.display << " " << s.delta());
    CHECK(s.tensor_bytes > 0);
    CHECK(std::llabs(s.delta()) < grads / 100);
  }
  CHECK(cat_delta(p->d, "gradient") == 0);
}

TEST_CASE("diff finds a change of reserved memory the requested bytes do not show", "[analysis]") {
  // expandable_gpt2 (expandable segments) against small_bf16: PyTorch's own
  // reserved and allocated peaks; the finding carries them.
  for (auto [a, b] : {std::pair<std::string, std::string>{"small_bf16", "small_bf16_expandable"},
                      {"fsdp2_gpt2", "ddp_gpt2"}}) {
    INFO(a << " -> " << b);
    auto path = [](const std::string& stem) {
      return test::file_exists(std::string(SNAPDIFF_SOURCE_DIR) + "/tests/data/real/" + stem + ".pickle")
                 ? test::real_data(stem + ".pickle")
                 : test::real_data(stem + ".pickle.gz");
    };
    auto p = diff_files(path(a), path(b));
    auto ta = test::truth(a), tb = test::truth(b);
    const int64_t ra = ta["memory_stats"]["reserved_bytes.all.peak"].get<int64_t>();
    const int64_t rb = tb["memory_stats"]["reserved_bytes.all.peak"].get<int64_t>();
    const int64_t aa = ta["memory_stats"]["allocated_bytes.all.peak"].get<int64_t>();
    const int64_t ab = tb["memory_stats"]["allocated_bytes.all.peak"].get<int64_t>();
    const bool material = std::llabs(rb - ra) >= std::max<int64_t>(std::max(ra, rb) / 100, 1 << 20);
    const Finding* found = nullptr;
    for (const Finding& f : p->d.findings)
      if (f.code == Code::DiffReserved) found = &f;
    CHECK((found != nullptr) == material);
    if (!found) continue;
    const auto& r = std::get<DiffReservedFacts>(found->facts);
    CHECK(r.a_reserved == ra);
    CHECK(r.b_reserved == rb);
    CHECK(r.a_allocated == aa);
    CHECK(r.b_allocated == ab);
    CHECK(found->bytes == rb - ra);
    CHECK(r.a_free_cached >= 0);
    CHECK(r.b_free_cached >= 0);
    const std::string text = finding_text(*found);
    CHECK(text.rfind("Reserved memory ", 0) == 0);
    auto j = nlohmann::json::parse(render_diff_json(p->d));
    bool kind = false;
    for (auto& f : j["findings"]) kind |= f["kind"] == "reserved";
    CHECK(kind);
  }
}

TEST_CASE("allocator settings: read, printed in the report, diffed side by side", "[report]") {
  Trace te = load_trace(test::real_data("expandable_gpt2.pickle.gz"));
  Trace tp = load_trace(test::real_data("fsdp2_gpt2.pickle.gz"));
  // The truth's alloc_conf is the PYTORCH_CUDA_ALLOC_CONF the run had.
  REQUIRE(test::truth("expandable_gpt2")["alloc_conf"] == "expandable_segments:True");
  REQUIRE(test::truth("fsdp2_gpt2")["alloc_conf"] == "");
  CHECK(te.settings.present);
  CHECK(te.settings.expandable_segments);
  CHECK(tp.settings.present);
  CHECK_FALSE(tp.settings.expandable_segments);
  Analysis ae = analyze(te, {}), ap = analyze(tp, {});
  const Report re = report_view(ae);
  const std::string text = render_text(re, kMaxTextWidth);
  const size_t at = text.find("  allocator   settings: ");
  REQUIRE(at != std::string::npos);
  CHECK(text.find("expandable_segments true", at) != std::string::npos);
  auto j = nlohmann::json::parse(render_json(re));
  CHECK(j["allocator_settings"]["present"] == true);
  CHECK(j["allocator_settings"]["expandable_segments"] == true);
  Diff d = diff_reports(ap, ae, {});
  const std::string dt = render_diff_text(d, kMaxTextWidth);
  const size_t block = dt.find("ALLOCATOR SETTINGS");
  REQUIRE(block != std::string::npos);
  const size_t row = dt.find("\n  expandable_segments ", block);
  REQUIRE(row != std::string::npos);
  const std::string line = dt.substr(row + 1, dt.find('\n', row + 1) - row - 1);
  CHECK(line.find("false") != std::string::npos);
  CHECK(line.find("true") != std::string::npos);
  CHECK(line.find("<- differs") != std::string::npos);
  auto dj = nlohmann::json::parse(render_diff_json(d));
  bool differs = false;
  for (auto& s : dj["allocator_settings"])
    if (s["setting"] == "expandable_segments") differs = s["differs"] == true && s["a"] == "false" && s["b"] == "true";
  CHECK(differs);
}

TEST_CASE("--depth shows N frames per site row", "[analysis]") {
  auto one = diff_files(test::real_data("small_bf16.pickle"), test::real_data("small_fp8.pickle"), 1);
  auto three = diff_files(test::real_data("small_bf16.pickle"), test::real_data("small_fp8.pickle"), 3);
  auto whole = diff_files(test::real_data("small_bf16.pickle"), test::real_data("small_fp8.pickle"), 0);
  REQUIRE(one->d.sites.size() == three->d.sites.size());
  size_t deeper = 0;
  auto frames = [](const std::string& s) {
    size_t n = 1;
    for (size_t i = s.find(" <- "); i != std::string::npos; i = s.find(" <- ", i + 1)) ++n;
    return n;
  };
  for (size_t i = 0; i < three->d.sites.size(); ++i) {
    CHECK(frames(one->d.sites[i].display) == 1);
    CHECK(frames(three->d.sites[i].display) <= 3);
    CHECK(frames(whole->d.sites[i].display) >= frames(three->d.sites[i].display));
    deeper += frames(three->d.sites[i].display) > 1;
  }
  CHECK(deeper > 0);
  // Reports: the LIVE AT THE PEAK rows.
  Trace t = load_trace(test::real_data("small_fp8.pickle"));
  ReportOptions o;
  o.site_depth = 1;
  const std::string r1 = render_text(report_view(analyze(t, o)), kMaxTextWidth);
  o.site_depth = 0;
  const std::string r0 = render_text(report_view(analyze(t, o)), kMaxTextWidth);
  const size_t a1 = r1.find("LIVE AT THE PEAK"), a0 = r0.find("LIVE AT THE PEAK");
  REQUIRE(a1 != std::string::npos);
  const std::string live1 = r1.substr(a1, r1.find("\n\n", a1) - a1), live0 = r0.substr(a0, r0.find("\n\n", a0) - a0);
  // (the header line names "<- callers")
  CHECK(live1.find(" <- ", live1.find('\n', live1.find("SITE"))) == std::string::npos);
  CHECK(live0.find(" <- ", live0.find('\n', live0.find("SITE"))) != std::string::npos);
}
