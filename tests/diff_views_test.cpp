// diff_views(): the diff of two report views alone (no traces) against
// diff_reports() of the same runs, on pairs of real recordings.
#include <catch2/catch.hpp>
#include <filesystem>
#include <memory>

#include "snapdiff/analysis/diff.hpp"
#include "snapdiff/input/input.hpp"
#include "snapdiff/report/diff_report.hpp"
#include "test_util.hpp"

using namespace snapdiff;

namespace {

// A recording of tests/data/real (STEM.pickle or STEM.pickle.gz),
// tests/data/variants (STEM.pickle.gz) or tests/data/capture ("capture/NAME.snap").
std::string recording(const std::string& stem) {
  if (stem.starts_with("capture/")) return test::required(test::fixture(stem));
  const std::string real = std::string(SNAPDIFF_SOURCE_DIR) + "/tests/data/real/" + stem;
  for (const char* ext : {".pickle", ".pickle.gz"})
    if (std::filesystem::exists(real + ext)) return real + ext;
  return test::required(test::fixture("variants/" + stem + ".pickle.gz"));
}

nlohmann::json truth_of(const std::string& stem) {
  const std::string real = std::string(SNAPDIFF_SOURCE_DIR) + "/tests/data/real/" + stem + ".truth.json";
  if (std::filesystem::exists(real)) return test::truth(stem);
  return nlohmann::json::parse(test::read_file(test::required(test::fixture("variants/" + stem + ".truth.json"))));
}

struct Pair {
  std::string a, b;
};
const Pair kPairs[] = {
    {"ans_gpt2_py", "ans_gpt2_cpp"},       // Python-only stacks against C++ ones
    {"small_bf16", "small_fp8"},           // a dtype change
    {"small_fp8", "small_fp8_pw"},         // code moved: sites matched by function and file
    {"fsdp2_gpt2", "fsdp2_late_gpt2"},     // a complete history against a late start
    {"late_gpt2", "expandable_gpt2"},      // an allocator setting
    {"adam_loop", "adamw_fused"},          // optimizer temporaries
    {"cat_autocast_gpt2", "cat_autocast_cpp"},
    {"late_resnet", "cat_resnet50_sgd"},    // other models: gradients of sizes on one side alone
    {"capture/small_bf16.snap", "capture/small_fp8.snap"},  // snapcapture's scope labels
};

// Every number of two findings, their site groups included (gradients are
// matched by tensor size in both diffs, from each view's gradient_sizes).
void check_finding(const Finding& w, const Finding& g) {
  REQUIRE(g.code == w.code);
  CHECK(g.bytes == w.bytes);
  REQUIRE(g.facts.index() == w.facts.index());
  if (const auto* x = std::get_if<DiffPeakFacts>(&w.facts)) {
    const auto& y = std::get<DiffPeakFacts>(g.facts);
    CHECK(y.a == x->a);
    CHECK(y.b == x->b);
    CHECK(y.a_iteration == x->a_iteration);
    CHECK(y.b_iteration == x->b_iteration);
    CHECK(y.a_phase == x->a_phase);
    CHECK(y.b_phase == x->b_phase);
    return;
  }
  if (const auto* x = std::get_if<DiffCategoryFacts>(&w.facts)) {
    const auto& y = std::get<DiffCategoryFacts>(g.facts);
    INFO("category " << x->category);
    CHECK(y.category == x->category);
    CHECK(y.a == x->a);
    CHECK(y.b == x->b);
    CHECK(y.parameters == x->parameters);
    CHECK(y.parameter_ratio == x->parameter_ratio);
    CHECK(y.a_tensors == x->a_tensors);
    CHECK(y.b_tensors == x->b_tensors);
    CHECK(y.gradients_kept == x->gradients_kept);
    auto same = [](const std::vector<DiffCategoryFacts::Group>& p, const std::vector<DiffCategoryFacts::Group>& q) {
      REQUIRE(q.size() == p.size());
      for (size_t i = 0; i < p.size(); ++i) {
        CHECK(q[i].name == p[i].name);
        CHECK(q[i].delta == p[i].delta);
        CHECK(q[i].sites == p[i].sites);
        CHECK(q[i].all_new == p[i].all_new);
        CHECK(q[i].all_gone == p[i].all_gone);
      }
    };
    same(x->mostly, y.mostly);
    same(x->offset, y.offset);
    CHECK(y.has_top_site == x->has_top_site);
    CHECK(y.top_delta == x->top_delta);
    CHECK(y.top_site == x->top_site);
    return;
  }
  if (const auto* x = std::get_if<DiffStepFacts>(&w.facts)) {
    const auto& y = std::get<DiffStepFacts>(g.facts);
    CHECK(y.a_temporaries == x->a_temporaries);
    CHECK(y.b_temporaries == x->b_temporaries);
    CHECK(y.a_gradients == x->a_gradients);
    CHECK(y.b_gradients == x->b_gradients);
    return;
  }
  if (const auto* x = std::get_if<DiffReservedFacts>(&w.facts)) {
    const auto& y = std::get<DiffReservedFacts>(g.facts);
    CHECK(y.a_reserved == x->a_reserved);
    CHECK(y.b_reserved == x->b_reserved);
    CHECK(y.a_allocated == x->a_allocated);
    CHECK(y.b_allocated == x->b_allocated);
    CHECK(y.a_free_cached == x->a_free_cached);
    CHECK(y.b_free_cached == x->b_free_cached);
    CHECK(y.a_largest_free == x->a_largest_free);
    CHECK(y.b_largest_free == x->b_largest_free);
    return;
  }
  if (const auto* x = std::get_if<DiffPhaseFacts>(&w.facts)) {
    const auto& y = std::get<DiffPhaseFacts>(g.facts);
    CHECK(y.phase == x->phase);
    CHECK(y.iteration == x->iteration);
    CHECK(y.a == x->a);
    CHECK(y.b == x->b);
    REQUIRE(y.categories.size() == x->categories.size());
    for (size_t i = 0; i < x->categories.size(); ++i) {
      CHECK(y.categories[i].name == x->categories[i].name);
      CHECK(y.categories[i].a == x->categories[i].a);
      CHECK(y.categories[i].b == x->categories[i].b);
    }
    return;
  }
  FAIL("a diff finding with facts of another kind");
}

// Peaks, categories, phases and findings of `got` against `want`.
void check_same_numbers(const Diff& want, const Diff& got) {
  for (int i = 0; i < 4; ++i) CHECK(got.peak_delta[i] == want.peak_delta[i]);
  REQUIRE(got.categories.size() == want.categories.size());
  for (size_t i = 0; i < want.categories.size(); ++i) {
    CHECK(got.categories[i].name == want.categories[i].name);
    CHECK(got.categories[i].a == want.categories[i].a);
    CHECK(got.categories[i].b == want.categories[i].b);
  }
  REQUIRE(got.phases.size() == want.phases.size());
  for (size_t i = 0; i < want.phases.size(); ++i) {
    const PhaseDelta& w = want.phases[i];
    const PhaseDelta& g = got.phases[i];
    CHECK(g.iteration == w.iteration);
    CHECK(g.phase == w.phase);
    CHECK(g.occurrence == w.occurrence);
    CHECK(g.in_a == w.in_a);
    CHECK(g.in_b == w.in_b);
    CHECK(g.a_peak == w.a_peak);
    CHECK(g.b_peak == w.b_peak);
    CHECK(g.a_start == w.a_start);
    CHECK(g.b_start == w.b_start);
    CHECK(g.a_opt_temp == w.a_opt_temp);
    CHECK(g.b_opt_temp == w.b_opt_temp);
  }
  REQUIRE(got.findings.size() == want.findings.size());
  for (size_t i = 0; i < want.findings.size(); ++i) check_finding(want.findings[i], got.findings[i]);
}

// The site rows of one category ("": all), in order.
std::vector<const SiteDelta*> rows_of(const Diff& d, const std::string& category = "") {
  std::vector<const SiteDelta*> out;
  for (const SiteDelta& s : d.sites)
    if (category.empty() || s.category == category) out.push_back(&s);
  return out;
}

constexpr size_t kAllSites = 10000000;

}  // namespace

TEST_CASE("diff_views of two report views gives diff_reports' numbers and sites", "[analysis]") {
  size_t moved = 0, rows = 0, findings = 0, gradient_rows = 0;
  for (const Pair& p : kPairs) {
    INFO(p.a << " -> " << p.b);
    Trace ta = load_trace(recording(p.a)), tb = load_trace(recording(p.b));
    ReportOptions ro;
    ro.top_sites = kAllSites;  // every site a row: the views hold all diff_reports() reads
    Analysis ra = analyze(ta, ro), rb = analyze(tb, ro);
    DiffOptions o;
    o.top_sites = kAllSites;
    const Diff want = diff_reports(ra, rb, o);
    const Diff got = diff_views(report_view(ra), report_view(rb), o);
    check_same_numbers(want, got);
    // The changed sites, gradients (by tensor size) included, row for row.
    const auto w = rows_of(want), g = rows_of(got);
    REQUIRE(g.size() == w.size());
    for (size_t i = 0; i < w.size(); ++i) {
      INFO("row " << i << ": " << w[i]->key);
      CHECK(g[i]->key == w[i]->key);
      CHECK(g[i]->category == w[i]->category);
      CHECK(g[i]->a == w[i]->a);
      CHECK(g[i]->b == w[i]->b);
      CHECK(g[i]->a_count == w[i]->a_count);
      CHECK(g[i]->b_count == w[i]->b_count);
      CHECK(g[i]->moved == w[i]->moved);
      CHECK(g[i]->display == w[i]->display);
      moved += w[i]->moved;
      rows += 1;
    }
    findings += want.findings.size();
    for (const SiteDelta* s : rows_of(got, "gradient")) ++gradient_rows;
    CHECK(got.other_sites.a == 0);
    CHECK(got.other_sites.b == 0);
    // The peak delta is PyTorch's own (snapcapture's recordings have no truth file).
    if (p.a.starts_with("capture/")) continue;
    const auto ja = truth_of(p.a), jb = truth_of(p.b);
    CHECK(got.peak_delta[0] == jb["memory_stats"]["requested_bytes.all.peak"].get<int64_t>() -
                                     ja["memory_stats"]["requested_bytes.all.peak"].get<int64_t>());
  }
  // The pairs exercise each path: rows matched by stack, rows moved, findings.
  CHECK(rows > 100);
  CHECK(moved > 0);
  CHECK(findings > 10);
  CHECK(gradient_rows > 0);
}

TEST_CASE("diff_views of views with their default rows: the numbers of diff_reports, the rest in other sites",
          "[analysis]") {
  size_t gradient_rows = 0;
  for (const Pair& p : kPairs) {
    INFO(p.a << " -> " << p.b);
    Trace ta = load_trace(recording(p.a)), tb = load_trace(recording(p.b));
    Analysis ra = analyze(ta, {}), rb = analyze(tb, {});
    const Diff want = diff_reports(ra, rb, {});
    const Report va = report_view(ra), vb = report_view(rb);
    const Diff got = diff_views(va, vb, {});
    for (int i = 0; i < 4; ++i) CHECK(got.peak_delta[i] == want.peak_delta[i]);
    REQUIRE(got.categories.size() == want.categories.size());
    for (size_t i = 0; i < want.categories.size(); ++i) CHECK(got.categories[i].delta() == want.categories[i].delta());
    CHECK(got.phases.size() == want.phases.size());
    // The findings that read no sites agree whatever rows the views kept.
    for (const Finding& f : want.findings) {
      if (f.code == Code::DiffCategory) continue;
      bool found = false;
      for (const Finding& x : got.findings) {
        if (x.code != f.code) continue;
        // Phase findings: one per kind of phase.
        if (f.code == Code::DiffPhase &&
            std::get<DiffPhaseFacts>(x.facts).phase != std::get<DiffPhaseFacts>(f.facts).phase)
          continue;
        check_finding(f, x), found = true;
      }
      CHECK(found);
    }
    // Every view row lands in one diff row (or, beyond each view's rows, in
    // other_sites); rows left out are unchanged: the deltas add up to the
    // change of the bytes live at the peaks.
    int64_t sum = got.other_sites.delta();
    for (const SiteDelta& s : got.sites) sum += s.delta();
    CHECK(sum == vb.devices[vb.peak_device].peak_live_requested - va.devices[va.peak_device].peak_live_requested);
    // Gradients by tensor size whatever rows the views kept: with every
    // changed row of the diffs kept, the rows of diff_reports().
    DiffOptions all;
    all.top_sites = kAllSites;
    const Diff want_all = diff_reports(ra, rb, all), got_all = diff_views(va, vb, all);
    const auto wg = rows_of(want_all, "gradient"), gg = rows_of(got_all, "gradient");
    gradient_rows += wg.size();
    REQUIRE(gg.size() == wg.size());
    for (size_t i = 0; i < wg.size(); ++i) {
      CHECK(gg[i]->key == wg[i]->key);
      CHECK(gg[i]->tensor_bytes == wg[i]->tensor_bytes);
      CHECK(gg[i]->a == wg[i]->a);
      CHECK(gg[i]->b == wg[i]->b);
    }
    // A view against itself: no site changes, nothing to say.
    const Diff same = diff_views(va, va, {});
    CHECK(same.sites.empty());
    CHECK(same.findings.empty());
  }
  CHECK(gradient_rows > 0);
}

TEST_CASE("diff_views needs nothing but the views: traces and analyses gone", "[analysis]") {
  const Pair p{"small_bf16", "small_fp8"};
  Diff want;
  std::unique_ptr<Report> va, vb;
  {
    Trace ta = load_trace(recording(p.a)), tb = load_trace(recording(p.b));
    ReportOptions ro;
    ro.top_sites = kAllSites;
    Analysis ra = analyze(ta, ro), rb = analyze(tb, ro);
    DiffOptions o;
    o.top_sites = kAllSites;
    want = diff_reports(ra, rb, o);
    va = std::make_unique<Report>(report_view(ra));
    vb = std::make_unique<Report>(report_view(rb));
  }  // the traces, their frame tables and the analyses are destroyed here
  DiffOptions o;
  o.top_sites = kAllSites;
  o.a_name = p.a;
  o.b_name = p.b;
  const Diff got = diff_views(*va, *vb, o);
  check_same_numbers(want, got);
  REQUIRE(!got.sites.empty());
  const auto w = rows_of(want), g = rows_of(got);
  REQUIRE(g.size() == w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    CHECK(g[i]->key == w[i]->key);
    CHECK(g[i]->delta() == w[i]->delta());
  }
  // The renderers read it like any diff.
  const std::string text = render_diff_text(got);
  CHECK(text.find(p.b) != std::string::npos);
  CHECK(!render_diff_json(got).empty());
}

TEST_CASE("diff_views writes site rows at --depth as diff_reports does, from the frames the views kept", "[analysis]") {
  for (const Pair& p : {Pair{"small_bf16", "small_fp8"}, Pair{"cat_autocast_gpt2", "cat_autocast_cpp"},
                        Pair{"capture/small_bf16.snap", "capture/small_fp8.snap"}}) {
    for (size_t depth : {size_t(0), size_t(3)}) {
      INFO(p.a << " -> " << p.b << ", --depth " << depth);
      Trace ta = load_trace(recording(p.a)), tb = load_trace(recording(p.b));
      ReportOptions ro;
      ro.top_sites = kAllSites;
      ro.site_depth = depth;  // the views' paths as deep as the diff's rows
      Analysis ra = analyze(ta, ro), rb = analyze(tb, ro);
      DiffOptions o;
      o.top_sites = kAllSites;
      o.depth = depth;
      const Diff want = diff_reports(ra, rb, o);
      const Diff got = diff_views(report_view(ra), report_view(rb), o);
      check_same_numbers(want, got);
      const auto w = rows_of(want), g = rows_of(got);
      REQUIRE(g.size() == w.size());
      REQUIRE(!w.empty());
      for (size_t i = 0; i < w.size(); ++i) {
        INFO("row " << i << ": " << w[i]->key);
        CHECK(g[i]->key == w[i]->key);
        CHECK(g[i]->display == w[i]->display);
        CHECK(g[i]->a_display == w[i]->a_display);
      }
    }
  }
}

TEST_CASE("diff_views keys a stack the view cut as diff_reports writes its key", "[analysis]") {
  // One 3,000-frame stack (the view keeps its 500 innermost and 500 outermost
  // frames, and one for those between), with frame 1,500 `middle`; A
  // allocates 1 MiB there, B 3 MiB.
  const size_t depth = 3000;
  auto make = [&](Trace& t, const char* middle, uint64_t size) {
    StackId s = 0;
    for (size_t i = 0; i < depth; ++i) {
      Frame f;
      f.name = t.strings.intern(i == depth / 2 ? std::string(middle) : std::string("f").append(std::to_string(i)));
      f.file = t.strings.intern("/home/u/model.py");
      f.line = int64_t(i);
      s = t.stacks.child(s, t.intern_frame(f));
    }
    test::push_alloc(t, 1 << 20, size, s, 1);
  };
  Trace ta, tb, tc;
  make(ta, "mid", 1 << 20);
  make(tb, "mid", 3 << 20);
  make(tc, "other_mid", 3 << 20);
  Analysis ra = analyze(ta, {}), rb = analyze(tb, {}), rc = analyze(tc, {});
  const Diff want = diff_reports(ra, rb, {});
  const Diff got = diff_views(report_view(ra), report_view(rb), {});
  REQUIRE(want.sites.size() == 1);
  REQUIRE(got.sites.size() == 1);
  CHECK(got.sites[0].key == want.sites[0].key);
  CHECK(got.sites[0].key.find(";<2000 frames elided>;") != std::string::npos);
  CHECK(got.sites[0].delta() == 2 << 20);
  CHECK(got.sites[0].display == want.sites[0].display);
  // Stacks that differ only in the frames the view left out: diff_reports()
  // tells them apart (one gone, one new); the views cannot, and match them.
  const Diff whole = diff_reports(ra, rc, {});
  const Diff cut = diff_views(report_view(ra), report_view(rc), {});
  CHECK(whole.sites.size() == 2);
  REQUIRE(cut.sites.size() == 1);
  CHECK(cut.sites[0].a_count == 1);
  CHECK(cut.sites[0].b_count == 1);
  CHECK(cut.sites[0].key == whole.sites[0].key);
}
