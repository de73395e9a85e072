// `snapdiff check`: sizes and tolerances, every threshold kind passing and
// failing on real snapshots (figures against PyTorch's own memory_stats),
// truncated histories, budget files (round trip, bad files with JSON paths),
// and the renderers (JSON, JUnit XML, GitHub annotations).
#include <catch2/catch.hpp>
#include <map>
#include <nlohmann/json.hpp>

#include "snapdiff/input/budget_io.hpp"
#include "snapdiff/analysis/category_extent.hpp"
#include "snapdiff/analysis/check.hpp"
#include "snapdiff/report/check_report.hpp"
#include "snapdiff/error.hpp"
#include "snapdiff/input/input.hpp"
#include "snapdiff/analysis/analysis.hpp"
#include "snapdiff/report/report.hpp"
#include "test_util.hpp"

using namespace snapdiff;

namespace {

const PeakFigures& figures(const std::string& stem) {
  static std::map<std::string, PeakFigures> cache;
  auto it = cache.find(stem);
  if (it != cache.end()) return it->second;
  std::string path = test::real_data(stem + ".pickle");
  REQUIRE(test::file_exists(path));
  Trace t = load_trace(path);
  ReportOptions o;
  o.input_name = stem + ".pickle";
  return cache[stem] = peak_figures(analyze(t, o));
}

int64_t truth_peak(const std::string& stem, const char* counter) {
  return test::truth(stem)["memory_stats"][std::string(counter) + "_bytes.all.peak"].get<int64_t>();
}

const CheckItem& item(const CheckResult& r, const std::string& name) {
  for (const CheckItem& i : r.items)
    if (i.name == name) return i;
  FAIL("no threshold " << name);
  return r.items.front();
}

int category_index(const Attribution& at, const std::string& name) {
  for (size_t i = 0; i < at.categories.size(); ++i)
    if (at.categories[i] == name) return int(i);
  return -1;
}

CheckOptions increase(const std::string& max, Metric m = Metric::Allocated) {
  CheckOptions o;
  o.metric = m;
  o.max_increase = parse_amount(max);
  return o;
}

// Expects parse_budget to throw InputError at `path`.
void bad_budget(const std::string& text, const std::string& path) {
  INFO(text);
  try {
    parse_budget(text, "memory-budget.json");
    FAIL("accepted");
  } catch (const InputError& e) {
    CHECK(e.json_path() == path);
    CHECK(e.file() == "memory-budget.json");
    CHECK(e.describe().find("memory-budget.json: " + path) == 0);
  }
}

const char* kGoodBudget = R"({"schema": "snapdiff/budget/1", "metric": "allocated",
  "peak": {"requested_bytes": 100, "allocated_bytes": 1000, "reserved_bytes": 2000},
  "categories": {"parameter": 60, "activation": 40},
  "tolerance": {"max_increase": "2%", "warn_increase": "1%"},
  "limits": {"max_peak": "60GiB", "categories": {"optimizer_temporary": "1GiB", "workspace": 4096}},
  "source": {"file": "run.pickle", "events": 5, "device": 0, "history": "complete"}})";

}  // namespace

TEST_CASE("sizes and tolerances parse", "[analysis][check]") {
  CHECK(parse_size("512MiB") == 512LL << 20);
  CHECK(parse_size("60GiB") == 60LL << 30);
  CHECK(parse_size("1.5GB") == 1500000000LL);
  CHECK(parse_size("1.5GiB") == 3LL << 29);
  CHECK(parse_size("4096") == 4096);
  CHECK(parse_size("4096B") == 4096);
  CHECK(parse_size(" 2 kib ") == 2048);
  CHECK(parse_size("3kB") == 3000);
  CHECK(parse_size("1TB") == 1000000000000LL);
  for (const char* bad : {"", "MiB", "-1GiB", "1.2.3MB", "12XB", "2%", "1e9", "0x10", "1 G", "99999999999TiB"}) {
    INFO(bad);
    CHECK_FALSE(parse_size(bad).has_value());
  }
  auto p = parse_amount("2%");
  REQUIRE(p);
  CHECK(p->percent);
  CHECK(p->bytes_of(326411776) == 6528235);  // floor(326411776 * 0.02)
  CHECK(p->bytes_of(0) == 0);
  auto h = parse_amount("0.5%");
  REQUIRE(h);
  CHECK(h->bytes_of(1000) == 5);
  auto b = parse_amount("512MiB");
  REQUIRE(b);
  CHECK_FALSE(b->percent);
  CHECK(b->bytes_of(1) == 512LL << 20);
  CHECK(b->text == "512MiB");
  CHECK_FALSE(parse_amount("%").has_value());
  CHECK_FALSE(parse_amount("-2%").has_value());
  CHECK_FALSE(parse_amount("two%").has_value());
  CHECK(parse_metric("reserved") == Metric::Reserved);
  CHECK_THROWS_AS(parse_metric("peak"), UsageError);
}

TEST_CASE("peak figures are PyTorch's peaks", "[analysis][check]") {
  for (const char* stem : {"small_bf16", "small_fp8", "small_fp8_pw"}) {
    INFO(stem);
    const PeakFigures& f = figures(stem);
    CHECK(f.requested == truth_peak(stem, "requested"));
    CHECK(f.allocated == truth_peak(stem, "allocated"));
    CHECK(f.reserved == truth_peak(stem, "reserved"));
    CHECK(f.history == "complete");
    int64_t sum = 0;
    for (const auto& c : f.categories) sum += c.second;
    CHECK(sum == f.requested);  // categories at the peak sum to the requested peak
    REQUIRE(f.categories.size() >= 8);
    CHECK(f.categories[0].first == "parameter");
  }
}

TEST_CASE("category extents: one sweep gives what every moment of the run holds", "[analysis][check]") {
  // Against a sweep that adds up the live allocations at every moment from
  // scratch (each allocation live from its alloc event until its free
  // completes), per category over the run and per phase kind over its spans;
  // and the phase kinds' counter peaks against PyTorch's own peaks.
  for (const char* stem : {"small_bf16", "small_fp8", "small_fp8_pw"}) {
    INFO(stem);
    Trace t = load_trace(test::real_data(std::string(stem) + ".pickle"));
    const Analysis a = analyze(t, {});
    REQUIRE(a.devices.size() == 1);
    const DeviceAnalysis& d = a.devices[0];
    const Attribution& at = d.attr;
    const CategoryExtents x = category_extents(d.replay, at);
    const size_t nc = at.categories.size();
    const int64_t n = int64_t(d.events);
    REQUIRE(x.categories.size() == nc);
    std::vector<int64_t> run(nc, INT64_MIN);
    std::vector<std::vector<int64_t>> in_phase(kPhaseCount, std::vector<int64_t>(nc, INT64_MIN));
    std::vector<int64_t> alloc_peak(kPhaseCount, INT64_MIN), req_peak(kPhaseCount, INT64_MIN),
        res_peak(kPhaseCount, INT64_MIN);
    auto live = [&](int64_t e) {
      std::vector<int64_t> v(nc, 0);
      for (const Allocation& al : at.allocations)
        if (al.alloc_event <= e && al.free_event > e) v[al.category] += int64_t(al.requested);
      return v;
    };
    auto fold = [&](int64_t e, int ph) {
      const std::vector<int64_t> v = live(e);
      for (size_t c = 0; c < nc; ++c) {
        run[c] = std::max(run[c], v[c]);
        if (ph >= 0) in_phase[size_t(ph)][c] = std::max(in_phase[size_t(ph)][c], v[c]);
      }
      if (ph >= 0 && e >= 0) {
        alloc_peak[size_t(ph)] = std::max(alloc_peak[size_t(ph)], d.replay.allocated[size_t(e)]);
        req_peak[size_t(ph)] = std::max(req_peak[size_t(ph)], d.replay.requested[size_t(e)]);
        res_peak[size_t(ph)] = std::max(res_peak[size_t(ph)], d.replay.reserved[size_t(e)]);
      }
    };
    fold(-1, -1);
    for (int64_t e = 0; e < n; ++e) fold(e, int(at.spans[at.event_span[size_t(e)]].phase));
    for (const PhaseSpan& sp : at.spans)
      if (sp.empty()) fold(sp.peak_event, int(sp.phase));
    for (size_t c = 0; c < nc; ++c) {
      INFO(at.categories[c]);
      CHECK(x.categories[c].bytes == run[c]);
      // Where: the state after that event holds it.
      CHECK(live(x.categories[c].event_index)[c] == run[c]);
      for (int ph = 0; ph < kPhaseCount; ++ph) {
        if (x.phases[size_t(ph)].spans == 0) continue;
        INFO(phase_name(Phase(ph)));
        CHECK(x.phases[size_t(ph)].categories[c].bytes == in_phase[size_t(ph)][c]);
        CHECK(x.phases[size_t(ph)].categories[c].phase == Phase(ph));
      }
    }
    int64_t alloc_max = 0, req_max = 0, res_max = 0;
    for (int ph = 0; ph < kPhaseCount; ++ph) {
      const PhaseExtent& p = x.phases[size_t(ph)];
      if (p.spans == 0) continue;
      if (alloc_peak[size_t(ph)] != INT64_MIN) CHECK(p.allocated.bytes == alloc_peak[size_t(ph)]);
      if (req_peak[size_t(ph)] != INT64_MIN) CHECK(p.requested.bytes == req_peak[size_t(ph)]);
      if (res_peak[size_t(ph)] != INT64_MIN) CHECK(p.reserved.bytes == res_peak[size_t(ph)]);
      alloc_max = std::max(alloc_max, p.allocated.bytes);
      req_max = std::max(req_max, p.requested.bytes);
      res_max = std::max(res_max, p.reserved.bytes);
    }
    // The recordings start from an empty allocator, so the highest phase
    // peak is the run's: PyTorch's max_memory_allocated and memory_stats peaks.
    CHECK(alloc_max == test::truth(stem)["max_memory_allocated"].get<int64_t>());
    CHECK(req_max == truth_peak(stem, "requested"));
    CHECK(res_max == truth_peak(stem, "reserved"));
    CHECK(res_max == test::truth(stem)["max_memory_reserved"].get<int64_t>());
    // Every optimizer step's own peak holds no more optimizer temporaries
    // than the optimizer phases' largest.
    const int tmp = category_index(at, "optimizer_temporary");
    REQUIRE(tmp >= 0);
    for (const PhaseSpan& sp : at.spans)
      if (sp.phase == Phase::Optimizer)
        CHECK(x.phases[size_t(Phase::Optimizer)].categories[size_t(tmp)].bytes >= sp.categories[size_t(tmp)]);
  }
}

TEST_CASE("category maxima over the run: PyTorch's optimizer state, and limits on them", "[analysis][check]") {
  for (const char* stem : {"small_bf16", "small_fp8", "small_fp8_pw"}) {
    INFO(stem);
    const PeakFigures& f = figures(stem);
    REQUIRE(f.category_max.size() == f.categories.size());
    // A category's largest is at least what it holds at the peak.
    for (const auto& [name, v] : f.categories) CHECK(f.max_of(name)->bytes >= v);
    // Adam's state, created at the first step and kept: PyTorch's own total.
    CHECK(f.max_of("optimizer_state")->bytes == test::truth(stem)["optimizer_state_bytes"].get<int64_t>());
    REQUIRE(f.phase_peak("optimizer"));
    CHECK(f.phase_peak("optimizer")->spans == 3);
    CHECK(f.phase_peak("optimizer")->category("optimizer_state")->bytes ==
          test::truth(stem)["optimizer_state_bytes"].get<int64_t>());
  }
  // small_fp8's foreach Adam: temporaries live in the optimizer steps,
  // none at the peak (a backward), so a limit at the peak would not see them.
  const PeakFigures& fp8 = figures("small_fp8");
  const int64_t tmp = fp8.max_of("optimizer_temporary")->bytes;
  CHECK(fp8.category("optimizer_temporary") == 0);
  REQUIRE(tmp > 0);
  CHECK(fp8.max_of("optimizer_temporary")->phase == "optimizer");
  CHECK(fp8.phase_peak("optimizer")->category("optimizer_temporary")->bytes == tmp);
  CHECK(fp8.phase_peak("forward")->category("optimizer_temporary")->bytes == 0);
  CheckOptions o;
  o.limits.push_back({"optimizer_temporary", tmp - 1, std::to_string(tmp - 1)});
  o.limits.push_back({"optimizer_temporary", tmp, std::to_string(tmp), "optimizer"});
  o.limits.push_back({"optimizer_temporary", 0, "0", "forward"});
  CheckResult r = evaluate_check(fp8, std::nullopt, "", o);
  CHECK(r.status == CheckStatus::Fail);
  const CheckItem& run = item(r, "limit.optimizer_temporary");
  CHECK(run.status == CheckStatus::Fail);
  CHECK(run.measured_bytes == tmp);
  CHECK(run.margin_bytes == -1);
  REQUIRE(run.has_at);
  CHECK(run.at.phase == "optimizer");
  CHECK(run.at.iteration >= 1);
  CHECK(item(r, "limit.optimizer:optimizer_temporary").status == CheckStatus::Pass);
  CHECK(item(r, "limit.optimizer:optimizer_temporary").margin_bytes == 0);
  CHECK(item(r, "limit.forward:optimizer_temporary").status == CheckStatus::Pass);
  // A phase kind the run does not have cannot be measured: a warning.
  PeakFigures none = fp8;
  none.phases.clear();
  CheckOptions p;
  p.limits.push_back({"optimizer_temporary", 1, "1", "optimizer"});
  CheckResult w = evaluate_check(none, std::nullopt, "", p);
  CHECK(w.status == CheckStatus::Warn);
  CHECK(item(w, "limit.optimizer:optimizer_temporary").message.find("no optimizer phase") != std::string::npos);
  p.limits[0].phase = "optimiser";
  CHECK_THROWS_AS(evaluate_check(fp8, std::nullopt, "", p), UsageError);
}

TEST_CASE("the seed's FP8 run: optimizer temporaries over the limit in the optimizer step", "[analysis][check]") {
  // snapcapture's FP8 run (5.37 B parameters, bf16 primary weights, foreach
  // Adam): the step's temporaries are far above 1 GiB, the peak (a
  // backward) holds none of them, and --limit optimizer_temporary=1GiB fails.
  const std::string run = std::string(SNAPDIFF_SOURCE_DIR) + "/sample_snapshots/fp8_no_pw";
  auto sum = nlohmann::json::parse(test::read_file(test::required(run + ".summary.json")));
  Trace t = load_trace(test::required(run + ".snap"));
  ReportOptions ro;
  ro.input_name = "fp8_no_pw.snap";
  const Analysis a = analyze(t, ro);
  const PeakFigures f = peak_figures(a);
  CHECK(f.allocated == sum["peak_allocated"].get<int64_t>());
  const int64_t tmp = f.max_of("optimizer_temporary")->bytes;
  CHECK(f.category("optimizer_temporary") < (1LL << 30));  // what the old check measured
  CHECK(tmp > (1LL << 30));
  // Live at the optimizer steps' own peaks, found from the spans' breakdowns.
  const DeviceAnalysis& d = a.devices[a.peak_device];
  int64_t at_step_peaks = 0;
  for (const PhaseSpan& sp : d.attr.spans)
    if (sp.phase == Phase::Optimizer)
      at_step_peaks = std::max(at_step_peaks, sp.categories[size_t(category_index(d.attr, "optimizer_temporary"))]);
  CHECK(at_step_peaks > (1LL << 30));
  CHECK(f.phase_peak("optimizer")->category("optimizer_temporary")->bytes >= at_step_peaks);
  CHECK(f.phase_peak("optimizer")->category("optimizer_temporary")->bytes == tmp);
  CheckOptions o;
  o.limits.push_back({"optimizer_temporary", 1LL << 30, "1GiB"});
  o.limits.push_back({"optimizer_temporary", 1LL << 30, "1GiB", "optimizer"});
  CheckResult r = evaluate_check(f, std::nullopt, "", o);
  CHECK(r.status == CheckStatus::Fail);
  CHECK(item(r, "limit.optimizer_temporary").status == CheckStatus::Fail);
  CHECK(item(r, "limit.optimizer:optimizer_temporary").status == CheckStatus::Fail);
  CHECK(item(r, "limit.optimizer_temporary").at.phase == "optimizer");
  // snapcapture's own figures: foreach Adam makes one temporary per
  // parameter, in the parameters' dtype, all live together: the parameter
  // bytes. And the first iteration's allocated high point (the allocator's
  // max_memory_allocated after it) is its optimizer step, where the state is
  // created while those temporaries are live.
  CHECK(tmp == sum["classes"]["param_bytes"].get<int64_t>());
  const PhasePeak& opt = *f.phase_peak("optimizer");
  CHECK(opt.allocated.bytes == sum["iters"][0]["peak_so_far"].get<int64_t>());
  CHECK(opt.allocated.iteration == 1);
  CHECK(opt.category("optimizer_state")->bytes == sum["classes"]["optimizer_state_bytes"].get<int64_t>());
}

TEST_CASE("increase threshold: measured is the exact peak difference", "[analysis][check]") {
  const PeakFigures &bf16 = figures("small_bf16"), &fp8 = figures("small_fp8");
  for (auto [m, name] : {std::pair{Metric::Requested, "requested"}, std::pair{Metric::Allocated, "allocated"},
                         std::pair{Metric::Reserved, "reserved"}}) {
    INFO(name);
    CheckResult r = evaluate_check(fp8, bf16, "snapshot", increase("50%", m));
    const CheckItem& it = item(r, std::string("increase.") + name);
    CHECK(it.measured_bytes == truth_peak("small_fp8", name) - truth_peak("small_bf16", name));
    CHECK(it.baseline_bytes == truth_peak("small_bf16", name));
    CHECK(it.status == CheckStatus::Pass);
  }
  // Allocated: 326,411,776 -> 334,807,552 B is +8,395,776 B, +2.57%.
  CheckResult fail = evaluate_check(fp8, bf16, "snapshot", increase("2%"));
  const CheckItem& f = item(fail, "increase.allocated");
  CHECK(f.measured_bytes == 8395776);
  CHECK(f.limit_bytes == 6528235);
  CHECK(f.margin_bytes == 6528235 - 8395776);
  CHECK(f.status == CheckStatus::Fail);
  CHECK(fail.status == CheckStatus::Fail);
  CheckResult pass = evaluate_check(fp8, bf16, "snapshot", increase("3%"));
  CHECK(item(pass, "increase.allocated").status == CheckStatus::Pass);
  CHECK(pass.status == CheckStatus::Pass);
  // Absolute increase: exactly the difference passes, one byte less fails.
  CHECK(evaluate_check(fp8, bf16, "snapshot", increase("8395776")).status == CheckStatus::Pass);
  CHECK(evaluate_check(fp8, bf16, "snapshot", increase("8395775B")).status == CheckStatus::Fail);
  CHECK(evaluate_check(fp8, bf16, "snapshot", increase("8MiB")).status == CheckStatus::Fail);  // 8,388,608 B
  CHECK(evaluate_check(fp8, bf16, "snapshot", increase("9MiB")).status == CheckStatus::Pass);
  // A smaller candidate passes even a zero tolerance.
  CheckResult down = evaluate_check(figures("small_fp8_pw"), fp8, "snapshot", increase("0%"));
  CHECK(item(down, "increase.allocated").measured_bytes ==
        truth_peak("small_fp8_pw", "allocated") - truth_peak("small_fp8", "allocated"));
  CHECK(down.status == CheckStatus::Pass);
  // Reserved rises 12,582,912 B (+3.59%): 3% fails it while allocated passes.
  CHECK(evaluate_check(fp8, bf16, "snapshot", increase("3%", Metric::Reserved)).status == CheckStatus::Fail);
}

TEST_CASE("warning level below the failure level", "[analysis][check]") {
  const PeakFigures &bf16 = figures("small_bf16"), &fp8 = figures("small_fp8");
  CheckOptions o = increase("3%");
  o.warn_increase = parse_amount("1%");
  CheckResult r = evaluate_check(fp8, bf16, "snapshot", o);
  CHECK(item(r, "increase.allocated").status == CheckStatus::Warn);
  CHECK(item(r, "increase.allocated").warn_bytes == 3264117);
  CHECK(r.status == CheckStatus::Warn);
  o.warn_increase = parse_amount("2.6%");
  CHECK(evaluate_check(fp8, bf16, "snapshot", o).status == CheckStatus::Pass);
  // Above the failure level: fail, not warn.
  o = increase("2%");
  o.warn_increase = parse_amount("1%");
  CHECK(evaluate_check(fp8, bf16, "snapshot", o).status == CheckStatus::Fail);
  // A warning level alone never fails.
  CheckOptions w;
  w.warn_increase = parse_amount("1%");
  CheckResult wr = evaluate_check(fp8, bf16, "snapshot", w);
  CHECK(wr.status == CheckStatus::Warn);
  // Warning above failure is a usage error.
  o = increase("1%");
  o.warn_increase = parse_amount("2%");
  CHECK_THROWS_AS(evaluate_check(fp8, bf16, "snapshot", o), UsageError);
}

TEST_CASE("absolute peak and category limits", "[analysis][check]") {
  const PeakFigures& fp8 = figures("small_fp8");
  int64_t peak = truth_peak("small_fp8", "allocated");
  CheckOptions o;
  o.max_peak = peak;
  o.max_peak_text = std::to_string(peak);
  CheckResult at = evaluate_check(fp8, std::nullopt, "", o);
  CHECK(item(at, "max_peak.allocated").status == CheckStatus::Pass);
  CHECK(item(at, "max_peak.allocated").measured_bytes == peak);
  CHECK(item(at, "max_peak.allocated").margin_bytes == 0);
  o.max_peak = peak - 1;
  CheckResult over = evaluate_check(fp8, std::nullopt, "", o);
  CHECK(over.status == CheckStatus::Fail);
  CHECK(item(over, "max_peak.allocated").margin_bytes == -1);
  o.max_peak = parse_size("60GiB");
  CHECK(evaluate_check(fp8, std::nullopt, "", o).status == CheckStatus::Pass);
  o.metric = Metric::Reserved;
  o.max_peak = truth_peak("small_fp8", "reserved") - 1;
  CHECK(evaluate_check(fp8, std::nullopt, "", o).status == CheckStatus::Fail);
  o.max_peak = truth_peak("small_fp8", "reserved");
  CHECK(evaluate_check(fp8, std::nullopt, "", o).status == CheckStatus::Pass);

  // Category limits, on requested bytes at the peak; PyTorch's own total
  // optimizer state bytes are what the run holds there.
  int64_t state = test::truth("small_fp8")["optimizer_state_bytes"].get<int64_t>();
  REQUIRE(fp8.category("optimizer_state") == state);
  CheckOptions c;
  c.limits.push_back({"optimizer_state", state, std::to_string(state)});
  c.limits.push_back({"optimizer_temporary", 1LL << 30, "1GiB"});
  CheckResult cr = evaluate_check(fp8, std::nullopt, "", c);
  CHECK(cr.status == CheckStatus::Pass);
  CHECK(item(cr, "limit.optimizer_state").measured_bytes == state);
  c.limits[0].bytes = state - 1;
  CheckResult cf = evaluate_check(fp8, std::nullopt, "", c);
  CHECK(cf.status == CheckStatus::Fail);
  CHECK(item(cf, "limit.optimizer_state").status == CheckStatus::Fail);
  CHECK(item(cf, "limit.optimizer_temporary").status == CheckStatus::Pass);
  CHECK(cf.count(CheckStatus::Fail) == 1);
  c.limits.push_back({"no_such_category", 1, "1"});
  CHECK_THROWS_AS(evaluate_check(fp8, std::nullopt, "", c), UsageError);
}

TEST_CASE("thresholds that cannot be evaluated are usage errors", "[analysis][check]") {
  const PeakFigures& fp8 = figures("small_fp8");
  CHECK_THROWS_AS(evaluate_check(fp8, std::nullopt, "", CheckOptions{}), UsageError);
  CHECK_THROWS_AS(evaluate_check(fp8, std::nullopt, "", increase("2%")), UsageError);
}

TEST_CASE("a late start passes by default, saying what its peak is; a wrap does not", "[analysis][check]") {
  PeakFigures f = figures("small_bf16");
  f.history = "truncated";
  f.truncation = "late_start";
  CheckOptions o;
  o.max_peak = parse_size("60GiB");
  const CheckResult r = evaluate_check(f, std::nullopt, "", o);
  CHECK(r.status == CheckStatus::Pass);
  CHECK(item(r, "history").status == CheckStatus::Pass);
  CHECK(item(r, "history").message.find("the peak is the recorded window's, counting the memory held at the window's start") !=
        std::string::npos);
  CHECK(render_check_text(r).find("  pass history: candidate history starts after memory was already in use") !=
        std::string::npos);
  f.truncation = "wrapped";
  const CheckResult w = evaluate_check(f, std::nullopt, "", o);
  CHECK(item(w, "history").status == CheckStatus::Fail);
  CHECK(item(w, "history").message.find("--allow-truncated") != std::string::npos);
  CHECK(item(w, "history").message.find("--allow-late-start") == std::string::npos);
}

TEST_CASE("a truncated candidate fails unless allowed", "[analysis][check]") {
  Trace t = load_trace(test::real_data("small_bf16.pickle"));
  REQUIRE(t.devices.size() == 1);
  auto& ev = t.devices[0].events;
  ev.erase(ev.begin(), ev.begin() + 200);  // as if the ring buffer had wrapped
  ReportOptions ro;
  ro.input_name = "wrapped.pickle";
  PeakFigures f = peak_figures(analyze(t, ro));
  REQUIRE(f.history == "truncated");
  CheckOptions o;
  o.max_peak = parse_size("60GiB");
  CheckResult r = evaluate_check(f, std::nullopt, "", o);
  CHECK(r.status == CheckStatus::Fail);
  CHECK(item(r, "history").status == CheckStatus::Fail);
  CHECK(item(r, "history").message.find("truncated") != std::string::npos);
  CHECK(item(r, "history").message.find("--allow-truncated") != std::string::npos);
  CHECK(item(r, "max_peak.allocated").status == CheckStatus::Pass);
  o.allow_truncated = true;
  CheckResult a = evaluate_check(f, std::nullopt, "", o);
  CHECK(a.status == CheckStatus::Warn);
  CHECK(item(a, "history").status == CheckStatus::Warn);
  // A complete history passes the history gate.
  CHECK(item(evaluate_check(figures("small_bf16"), std::nullopt, "", o), "history").status == CheckStatus::Pass);
}

TEST_CASE("budget file round trip", "[analysis][check]") {
  const PeakFigures &bf16 = figures("small_bf16"), &fp8 = figures("small_fp8");
  Budget b;
  b.metric = Metric::Allocated;
  b.peak = fp8;
  b.max_increase = parse_amount("2%");
  b.warn_increase = parse_amount("1%");
  b.max_peak = parse_size("60GiB");
  b.max_peak_text = "60GiB";
  b.limits.push_back({"optimizer_temporary", 1LL << 30, "1GiB"});
  std::string text = write_budget_json(b);
  auto j = nlohmann::json::parse(text);
  CHECK(j["schema"] == "snapdiff/budget/2");
  CHECK(j["peak"]["allocated_bytes"] == truth_peak("small_fp8", "allocated"));
  CHECK(j["tolerance"]["max_increase"] == "2%");
  CHECK(j["limits"]["categories"]["optimizer_temporary"] == "1GiB");
  CHECK(j["source"]["file"] == "small_fp8.pickle");

  Budget back = parse_budget(text, "memory-budget.json");
  CHECK(back.metric == Metric::Allocated);
  CHECK(back.peak.requested == fp8.requested);
  CHECK(back.peak.allocated == fp8.allocated);
  CHECK(back.peak.reserved == fp8.reserved);
  CHECK(back.peak.categories == fp8.categories);
  CHECK(back.peak.history == "complete");
  REQUIRE(back.max_increase);
  CHECK(back.max_increase->text == "2%");
  REQUIRE(back.warn_increase);
  CHECK(back.warn_increase->pct == 1.0);
  CHECK(back.max_peak == (60LL << 30));
  REQUIRE(back.limits.size() == 1);
  CHECK(back.limits[0].bytes == 1LL << 30);
  CHECK(write_budget_json(back).find("\"allocated_bytes\": 334807552") != std::string::npos);
  // The phase peaks and the category maxima come back byte for byte.
  REQUIRE(!fp8.phases.empty());
  REQUIRE(back.peak.phases.size() == fp8.phases.size());
  for (size_t i = 0; i < fp8.phases.size(); ++i) {
    INFO(fp8.phases[i].phase);
    CHECK(back.peak.phases[i].phase == fp8.phases[i].phase);
    CHECK(back.peak.phases[i].spans == fp8.phases[i].spans);
    for (Metric m : {Metric::Requested, Metric::Allocated, Metric::Reserved})
      CHECK(back.peak.phases[i].peak(m).bytes == fp8.phases[i].peak(m).bytes);
    // Categories a phase kind never holds are left out of the file.
    for (const auto& [name, v] : fp8.phases[i].categories) {
      const ExtentPoint* bv = back.peak.phases[i].category(name);
      CHECK((bv ? bv->bytes : 0) == v.bytes);
    }
  }
  REQUIRE(back.peak.category_max.size() == fp8.category_max.size());
  for (size_t c = 0; c < fp8.category_max.size(); ++c) {
    CHECK(back.peak.category_max[c].first == fp8.category_max[c].first);
    CHECK(back.peak.category_max[c].second.bytes == fp8.category_max[c].second.bytes);
  }
  // Phase limits go under limits.phases and come back with their phase.
  Budget pb = b;
  pb.limits.push_back({"optimizer_temporary", 1LL << 20, "1MiB", "optimizer"});
  const std::string ptext = write_budget_json(pb);
  CHECK(nlohmann::json::parse(ptext)["limits"]["phases"]["optimizer"]["optimizer_temporary"] == "1MiB");
  Budget pback = parse_budget(ptext, "b.json");
  REQUIRE(pback.limits.size() == 2);
  CHECK((pback.limits[1].phase == "optimizer" && pback.limits[1].category == "optimizer_temporary" &&
         pback.limits[1].bytes == 1LL << 20));

  std::vector<std::string> categories;
  for (const auto& c : fp8.categories) categories.push_back(c.first);
  auto opts_of = [&](const Budget& bb) { return check_options(CheckRequest{}, bb, "b.json", categories); };
  // The run checked against its own budget passes; a smaller run too.
  CheckResult self = evaluate_check(fp8, back.peak, "budget", opts_of(back));
  CHECK(self.status == CheckStatus::Pass);
  CHECK(item(self, "increase.allocated").measured_bytes == 0);
  CHECK(evaluate_check(bf16, back.peak, "budget", opts_of(back)).status == CheckStatus::Pass);
  // A budget from the smaller run, a tighter tolerance, the bigger run: fails.
  Budget small;
  small.peak = bf16;
  small.max_increase = parse_amount("1%");
  Budget sb = parse_budget(write_budget_json(small), "b.json");
  CheckResult r = evaluate_check(fp8, sb.peak, "budget", opts_of(sb));
  CHECK(r.status == CheckStatus::Fail);
  CHECK(item(r, "increase.allocated").measured_bytes == 8395776);
  // No baseline_history gate against a budget.
  for (const CheckItem& i : r.items) CHECK(i.name != "baseline_history");
}

TEST_CASE("the request's thresholds override a budget's; limits merge by category", "[analysis][check]") {
  const PeakFigures& fp8 = figures("small_fp8");
  const std::vector<std::string> categories = {"activation", "optimizer_temporary", "workspace"};
  Budget b;
  b.metric = Metric::Reserved;
  b.peak = fp8;
  b.max_increase = parse_amount("2%");
  b.warn_increase = parse_amount("1%");
  b.max_peak = 60LL << 30;
  b.max_peak_text = "60GiB";
  b.limits = {{"optimizer_temporary", 1LL << 30, "1GiB"}, {"activation", 2LL << 30, "2GiB"}};

  const CheckOptions same = check_options(CheckRequest{}, b, "b.json", categories);
  CHECK(same.metric == Metric::Reserved);
  CHECK(same.max_increase->text == "2%");
  CHECK(same.warn_increase->text == "1%");
  CHECK(same.max_peak_text == "60GiB");
  CHECK(same.limits.size() == 2);
  CHECK_FALSE(same.allow_truncated);

  CheckRequest req;
  req.metric = Metric::Allocated;
  req.max_increase = parse_amount("5%");
  req.max_peak = 1LL << 40;
  req.max_peak_text = "1TiB";
  add_limit(req.limits, {"activation", 1LL << 30, "1GiB"});
  add_limit(req.limits, {"workspace", 1LL << 20, "1MiB"});
  req.allow_truncated = true;
  const CheckOptions o = check_options(req, b, "b.json", categories);
  CHECK(o.metric == Metric::Allocated);
  CHECK(o.max_increase->text == "5%");
  CHECK(o.warn_increase->text == "1%");
  CHECK(o.max_peak == (1LL << 40));
  CHECK(o.max_peak_text == "1TiB");
  REQUIRE(o.limits.size() == 3);
  CHECK((o.limits[0].category == "optimizer_temporary" && o.limits[0].text == "1GiB"));
  CHECK((o.limits[1].category == "activation" && o.limits[1].text == "1GiB"));  // replaced in place
  CHECK((o.limits[2].category == "workspace" && o.limits[2].text == "1MiB"));
  CHECK(o.allow_truncated);

  // A warning level given alone is held to the budget's failure level.
  CheckRequest warn;
  warn.warn_increase = parse_amount("3%");
  CHECK_THROWS_WITH(check_options(warn, b, "b.json", categories),
                    "--warn-increase 3% is above the budget's max_increase 2%");
  // A budget limit on a category the rules do not define: the budget file is at fault.
  Budget odd = b;
  odd.limits.push_back({"no_such", 1, "1"});
  try {
    check_options(CheckRequest{}, odd, "b.json", categories);
    FAIL("accepted");
  } catch (const InputError& e) {
    CHECK(e.describe() == "b.json: $.limits.categories: unknown category 'no_such'");
  }
  // Without a budget: the request as given, allocated by default.
  const CheckOptions plain = check_options(req);
  CHECK(plain.metric == Metric::Allocated);
  CHECK(plain.limits.size() == 2);
  CHECK(check_options(CheckRequest{}).metric == Metric::Allocated);
}

TEST_CASE("a budget written from a run", "[analysis][check]") {
  const PeakFigures& fp8 = figures("small_fp8");
  CheckRequest req;
  const Budget b = budget_from_run(fp8, req);
  CHECK(b.metric == Metric::Allocated);
  CHECK(b.peak.allocated == fp8.allocated);
  REQUIRE(b.max_increase);
  CHECK(b.max_increase->text == "2%");  // the default tolerance
  CHECK_FALSE(b.warn_increase);
  CHECK_FALSE(b.max_peak);
  CHECK(b.limits.empty());
  req.warn_increase = parse_amount("3%");
  CHECK_THROWS_WITH(budget_from_run(fp8, req), "--warn-increase 3% is above --max-increase 2%");
  req.max_increase = parse_amount("4%");
  req.metric = Metric::Reserved;
  add_limit(req.limits, {"activation", 1, "1"});
  const Budget w = budget_from_run(fp8, req);
  CHECK(w.metric == Metric::Reserved);
  CHECK(w.warn_increase->text == "3%");
  CHECK(w.limits.size() == 1);
}

TEST_CASE("limits: one per category and phase, named by the rules", "[analysis][check]") {
  std::vector<CategoryLimit> l;
  add_limit(l, {"a", 1, "1"});
  add_limit(l, {"b", 2, "2"});
  add_limit(l, {"a", 3, "3"});
  add_limit(l, {"a", 4, "4", "optimizer"});  // the same category in one phase kind: a limit of its own
  REQUIRE(l.size() == 3);
  CHECK((l[0].category == "a" && l[0].bytes == 3));
  CHECK(l[1].category == "b");
  CHECK((l[2].key() == "optimizer:a" && l[2].bytes == 4));
  add_limit(l, {"a", 5, "5", "optimizer"});
  REQUIRE(l.size() == 3);
  CHECK(l[2].bytes == 5);
  CHECK_NOTHROW(check_limit_categories(l, {"a", "b", "c"}));
  CHECK_THROWS_WITH(check_limit_categories(l, {"a", "c"}), "--limit: unknown category 'b' (a, c)");
  l.push_back({"a", 1, "1", "optimiser"});
  CHECK_THROWS_WITH(check_limit_categories(l, {"a", "b", "c"}),
                    "--limit: unknown phase 'optimiser' (init, forward, backward, optimizer, other)");
}

TEST_CASE("a bad budget file names the file and the JSON path", "[analysis][check]") {
  CHECK_NOTHROW(parse_budget(kGoodBudget, "memory-budget.json"));
  Budget g = parse_budget(kGoodBudget, "memory-budget.json");
  CHECK(g.limits.size() == 2);
  CHECK(g.limits[1].bytes == 4096);
  CHECK(g.peak.name == "memory-budget.json (from run.pickle)");
  auto with = [](const std::string& from, const std::string& to) {
    std::string s = kGoodBudget;
    size_t p = s.find(from);
    REQUIRE(p != std::string::npos);
    return s.replace(p, from.size(), to);
  };
  bad_budget(with("\"snapdiff/budget/1\"", "\"snapdiff/report/1\""), "$.schema");
  // Version 1 files (written before phase peaks were kept) read as before;
  // the keys of version 2 are not theirs.
  bad_budget(with("\"metric\"", "\"phases\": {}, \"metric\""), "$.phases");
  auto v2 = [&](const std::string& from, const std::string& to) {
    std::string s2 = with(from, to);
    return s2.replace(s2.find("snapdiff/budget/1"), 17, "snapdiff/budget/2");
  };
  CHECK(parse_budget(v2("\"metric\"", "\"phases\": {}, \"metric\""), "b.json").peak.phases.empty());
  const std::string phased = v2("\"metric\"", R"("category_max": {"parameter": 60}, "phases": {"optimizer":
      {"spans": 3, "requested_bytes": 90, "allocated_bytes": 900, "reserved_bytes": 2000,
       "categories": {"parameter": 60, "optimizer_temporary": 30}}}, "metric")");
  Budget pg = parse_budget(phased, "b.json");
  REQUIRE(pg.peak.phases.size() == 1);
  CHECK(pg.peak.phase_peak("optimizer")->allocated.bytes == 900);
  CHECK(pg.peak.phase_peak("optimizer")->category("optimizer_temporary")->bytes == 30);
  CHECK(pg.peak.max_of("parameter")->bytes == 60);
  bad_budget(v2("\"metric\"", "\"phases\": {\"optimiser\": {}}, \"metric\""), "$.phases.optimiser");
  bad_budget(v2("\"metric\"", "\"phases\": {\"forward\": {\"requested_bytes\": 1}}, \"metric\""),
             "$.phases.forward.allocated_bytes");
  bad_budget(v2("\"metric\"", "\"category_max\": {\"parameter\": -1}, \"metric\""), "$.category_max.parameter");
  bad_budget(v2("\"max_peak\"", "\"phases\": {\"optimizer\": {\"optimizer_temporary\": \"1 gig\"}}, \"max_peak\""),
             "$.limits.phases.optimizer.optimizer_temporary");
  bad_budget(v2("\"max_peak\"", "\"phases\": {\"step\": {}}, \"max_peak\""), "$.limits.phases.step");
  bad_budget(with("\"metric\": \"allocated\"", "\"metric\": \"peak\""), "$.metric");
  bad_budget(with("\"allocated_bytes\": 1000", "\"allocated_bytes\": \"1000\""), "$.peak.allocated_bytes");
  bad_budget(with("\"allocated_bytes\": 1000", "\"allocated_bytes\": -5"), "$.peak.allocated_bytes");
  bad_budget(with("\"allocated_bytes\": 1000, ", ""), "$.peak.allocated_bytes");
  bad_budget(with("\"max_increase\": \"2%\"", "\"max_increase\": \"2 percent\""), "$.tolerance.max_increase");
  bad_budget(with("\"tolerance\"", "\"tolerence\""), "$.tolerence");
  bad_budget(with("\"max_peak\": \"60GiB\"", "\"max_peak\": true"), "$.limits.max_peak");
  bad_budget(with("\"optimizer_temporary\": \"1GiB\"", "\"optimizer_temporary\": \"1 gigabyte\""),
             "$.limits.categories.optimizer_temporary");
  bad_budget(with("\"parameter\": 60", "\"parameter\": 6.5"), "$.categories.parameter");
  bad_budget(with("\"events\": 5", "\"events\": \"x\""), "$.source.events");
  bad_budget("[1, 2]", "$");
  bad_budget("{}", "$.schema");
  // Not JSON at all: a byte offset.
  try {
    parse_budget("{\"schema\": ", "b.json");
    FAIL("accepted");
  } catch (const InputError& e) {
    CHECK(e.has_offset());
    CHECK(e.file() == "b.json");
  }
  CHECK_THROWS_AS(read_budget_file("/nonexistent/memory-budget.json"), InputError);
}

TEST_CASE("JSON verdict", "[report][check]") {
  const PeakFigures &bf16 = figures("small_bf16"), &fp8 = figures("small_fp8");
  CheckOptions o = increase("2%");
  o.max_peak = parse_size("60GiB");
  o.max_peak_text = "60GiB";
  CheckResult r = evaluate_check(fp8, bf16, "snapshot", o);
  auto j = nlohmann::json::parse(render_check_json(r));
  CHECK(j["schema"] == "snapdiff/check/1");
  CHECK(j["status"] == "fail");
  CHECK(j["metric"] == "allocated");
  CHECK(j["candidate"]["peak"]["allocated_bytes"] == truth_peak("small_fp8", "allocated"));
  CHECK(j["baseline"]["kind"] == "snapshot");
  REQUIRE(j["thresholds"].size() == 4);  // history, baseline_history, increase, max_peak
  CHECK(j["thresholds"][2]["name"] == "increase.allocated");
  CHECK(j["thresholds"][2]["status"] == "fail");
  CHECK(j["thresholds"][2]["measured_bytes"] == 8395776);
  CHECK(j["thresholds"][2]["limit"] == "2%");
  CHECK(j["thresholds"][3]["status"] == "pass");
  CHECK(j["summary"]["failed"] == 1);
  CHECK(j["summary"]["passed"] == 3);
}

TEST_CASE("text verdict: one line per threshold", "[report][check]") {
  const PeakFigures &bf16 = figures("small_bf16"), &fp8 = figures("small_fp8");
  std::string t = render_check_text(evaluate_check(fp8, bf16, "snapshot", increase("2%")));
  CHECK(t.rfind("snapdiff check: FAIL", 0) == 0);
  CHECK(t.find("increase.allocated  +2% (6.2 MiB)  +8.0 MiB (+2.57%)  -1.8 MiB  FAIL") != std::string::npos);
  std::string p = render_check_text(evaluate_check(fp8, bf16, "snapshot", increase("3%")));
  CHECK(p.rfind("snapdiff check: PASS", 0) == 0);
  CHECK(p.find("FAIL") == std::string::npos);
}

TEST_CASE("JUnit XML: one testcase per threshold, escaped", "[report][check]") {
  PeakFigures fp8 = figures("small_fp8");
  fp8.name = "runs/<a&b> \"q\" 'x'\x01.pickle";
  CheckOptions o = increase("2%");
  o.limits.push_back({"optimizer_state", 1, "1"});
  o.limits.push_back({"parameter", 1LL << 40, "1TiB"});
  CheckResult r = evaluate_check(fp8, figures("small_bf16"), "snapshot", o);
  std::string x = render_check_junit(r);
  CHECK(x.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites ", 0) == 0);
  CHECK(x.find("tests=\"5\" failures=\"2\"") != std::string::npos);
  size_t cases = 0, failures = 0;
  for (size_t p = x.find("<testcase "); p != std::string::npos; p = x.find("<testcase ", p + 1)) ++cases;
  for (size_t p = x.find("<failure "); p != std::string::npos; p = x.find("<failure ", p + 1)) ++failures;
  CHECK(cases == 5);
  CHECK(failures == 2);
  CHECK(x.find("runs/&lt;a&amp;b&gt; &quot;q&quot; &apos;x&apos;\\x01.pickle") != std::string::npos);  // a control byte as text
  CHECK(x.find("<a&b>") == std::string::npos);
  CHECK(x.find('\x01') == std::string::npos);
  CHECK(xml_escape("a<b>&\"'") == "a&lt;b&gt;&amp;&quot;&apos;");
}

TEST_CASE("GitHub annotations", "[report][check]") {
  const PeakFigures &bf16 = figures("small_bf16"), &fp8 = figures("small_fp8");
  CheckOptions o = increase("3%");
  o.warn_increase = parse_amount("1%");
  o.max_peak = 1000;
  o.max_peak_text = "1000";
  std::string g = render_check_github(evaluate_check(fp8, bf16, "snapshot", o));
  CHECK(g.find("::warning title=snapdiff check increase.allocated::") == 0);
  CHECK(g.find("\n::error title=snapdiff check max_peak.allocated::") != std::string::npos);
  CHECK(g.find("%25") != std::string::npos);  // "+2.57%" escaped
  size_t lines = 0;
  for (char c : g) lines += c == '\n';
  CHECK(lines == 2);
  CHECK(render_check_github(evaluate_check(fp8, bf16, "snapshot", increase("50%"))).empty());
}

TEST_CASE("check findings: failed limits first, then the largest rise, each with its site at the peak", "[report][check]") {
  PeakFigures base, cand;
  base.name = "base";
  cand.name = "cand";
  base.requested = base.allocated = base.reserved = 100;
  cand.requested = cand.allocated = cand.reserved = 160;
  base.categories = {{"parameter", 50}, {"activation", 40}, {"temporary", 10}, {"gradient", 0}};
  cand.categories = {{"parameter", 50}, {"activation", 90}, {"temporary", 20}, {"gradient", 0}};
  cand.sites = {{"temporary", 15, 1, "step (train.py:9)", ""}, {"activation", 60, 4, "fwd (model.py:88)", "gelu (act.py:3)"}};
  CheckOptions o = increase("1%");
  SECTION("against a baseline: what rose, largest rise first; unchanged categories are not findings") {
    const CheckResult r = evaluate_check(cand, base, "snapshot", o);
    REQUIRE(r.findings.size() == 2);
    CHECK(r.findings[0].category == "activation");
    CHECK(r.findings[0].change == 50);
    REQUIRE(r.findings[0].site);
    CHECK(r.findings[0].site->site == "fwd (model.py:88)");
    CHECK(r.findings[1].category == "temporary");
    CHECK(r.findings[1].change == 10);
    const std::string h = render_check_headline(r);
    CHECK(h.rfind("allocated peak +60 B (+60.00%) over the baseline > +1%: activation +50 B at the peak; its largest site "
                  "holds 60 B: fwd (model.py:88) [in gelu (act.py:3)]", 0) == 0);
  }
  SECTION("a failed category limit comes first even when it rose less") {
    o.limits.push_back(CategoryLimit("temporary", 5, "5B"));
    const CheckResult r = evaluate_check(cand, base, "snapshot", o);
    REQUIRE(r.findings.size() == 2);
    CHECK(r.findings[0].category == "temporary");
    CHECK(r.findings[1].category == "activation");
  }
  SECTION("without a baseline: the largest at the peak, no change, and a category without a listed site has none") {
    CheckOptions abs;
    abs.max_peak = 1000;
    abs.max_peak_text = "1000B";
    const CheckResult r = evaluate_check(cand, std::nullopt, "", abs);
    REQUIRE(r.findings.size() == 3);
    CHECK(r.findings[0].category == "activation");
    CHECK(!r.findings[0].change);
    CHECK(r.findings[1].category == "parameter");
    CHECK(!r.findings[1].site);
    CHECK(render_check_headline(r).rfind("within every threshold: allocated peak 160 B", 0) == 0);
  }
}
