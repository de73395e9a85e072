// Growth across iterations and what is retained (growth.hpp): the two leak
// recordings against PyTorch's own memory_allocated() at each iteration's
// start and the tensors the loop kept; every non-leaking recording states
// no growth and holds nothing `leaked`; the finding's words on edge cases.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cstdlib>
#include <string>

#include "snapdiff/analysis/analysis.hpp"
#include "snapdiff/input/input.hpp"
#include "snapdiff/report/report.hpp"
#include "test_util.hpp"

using namespace snapdiff;

namespace {

// PyTorch's growth: the median (lower middle) of the changes of
// memory_allocated() between the starts of the loop's iterations 2..N.
int64_t truth_growth(const nlohmann::json& tr) {
  std::vector<int64_t> d;
  const auto& it = tr["iterations"];
  for (size_t i = 2; i < it.size(); ++i)
    d.push_back(it[i]["start"]["memory_allocated"].get<int64_t>() - it[i - 1]["start"]["memory_allocated"].get<int64_t>());
  std::sort(d.begin(), d.end());
  return d.empty() ? 0 : d[(d.size() - 1) / 2];
}

const Finding* growth_finding(const DeviceAnalysis& d) {
  for (const Finding& f : d.findings)
    if (f.code == Code::Growth) return &f;
  return nullptr;
}

}  // namespace

TEST_CASE("growth: the two leak runs grow as PyTorch's memory_allocated() says, and the retained site is named", "[analysis]") {
  struct Case {
    const char* stem;
    const char* site;  // a frame the named site must show
  };
  for (const Case& c : {Case{"ans_leak_logits_gpt2", "modeling_gpt2.py:697"}, Case{"ans_leak_resnet", "record_batch_stats"}}) {
    DYNAMIC_SECTION(c.stem) {
      Trace t = load_trace(test::real_data(std::string(c.stem) + ".pickle.gz"));
      Analysis a = analyze(t, {});
      const DeviceAnalysis& d = a.devices[a.peak_device];
      const auto tr = test::truth(c.stem);
      const Growth& g = d.growth;
      // One snapdiff iteration per loop iteration, and the replay's memory
      // is PyTorch's, to the byte, at the loop's marks matched in time (the
      // event right before time_us). snapdiff's iterations start where its
      // phases say, which need not be the loop's mark (zero_grad's frees may
      // fall before it): the growth below compares the changes.
      REQUIRE(g.starts.size() == tr["iterations"].size());
      const Device& dev = t.devices[0];
      for (size_t k = 0; k < g.starts.size(); ++k) {
        const int64_t at_us = tr["iterations"][k]["start"]["time_us"].get<int64_t>();
        int64_t e = -1;
        for (size_t i = 0; i < dev.events.size() && dev.events[i].time_us <= at_us; ++i) e = int64_t(i);
        REQUIRE(e >= 0);
        INFO("iteration " << g.starts[k].iteration);
        CHECK(d.replay.allocated[size_t(e)] == tr["iterations"][k]["start"]["memory_allocated"].get<int64_t>());
      }
      // (1) Growth per iteration within 1% of PyTorch's.
      REQUIRE(g.measured);
      const int64_t want = truth_growth(tr);
      INFO("snapdiff " << g.per_iteration << " B/iteration, PyTorch " << want);
      CHECK(want > 0);
      CHECK(std::llabs(g.per_iteration - want) * 100 <= want);
      // (2) One site, one allocation per iteration, the bytes the loop kept.
      REQUIRE(g.sites.size() == 1);
      const int64_t kept = tr["retained_per_iteration"][0].get<int64_t>();
      CHECK(g.sites[0].bytes_per_iteration == kept);
      CHECK(g.sites[0].count_per_iteration == 1);
      CHECK(g.retained_per_iteration == kept);
      const std::string named = g.sites[0].site + " " + g.sites[0].model_frame;
      INFO(named);
      CHECK(named.find(c.site) != std::string::npos);
      // Judged: made in iteration i, alive at the start of i + 2.
      CHECK(g.judged_first == 1);
      CHECK(g.judged_last == int(g.starts.size()) - 2);
      CHECK(g.unjudged == 2);
      // (3) `leaked` at the peak: the retained tensors PyTorch saw live there.
      const int64_t retained = tr["at_peak"]["retained"].get<int64_t>();
      const int64_t leaked = test::category_at_peak(d, "leaked");
      INFO("leaked " << leaked << ", PyTorch's retained " << retained);
      CHECK(std::llabs(leaked - retained) * 100 <= retained);
      CHECK(leaked == g.leaked_at_peak);
      // The categories still sum to the peak.
      int64_t sum = 0;
      for (int64_t b : d.categories) sum += b;
      CHECK(sum == d.replay.peak_requested.bytes);
      // The finding says it, with the site.
      const Finding* f = growth_finding(d);
      REQUIRE(f);
      const std::string text = finding_text(*f);
      INFO(text);
      CHECK(text.find("Memory grows " + human_bytes(g.per_iteration) + " per iteration") == 0);
      CHECK(text.find(c.site) != std::string::npos);
      CHECK(text.find("one " + human_bytes(kept) + " allocation") != std::string::npos);
    }
  }
}

TEST_CASE("growth: runs that do not leak state no growth and hold nothing leaked", "[analysis]") {
  // Optimizer state and gradients made by the first iteration, gradients
  // kept by zero_grad(set_to_none=False), caches that reach a steady state.
  std::vector<std::pair<std::string, std::string>> runs;
  for (const auto& r : test::real_recordings()) {
    const std::string& s = r.second;
    if (s.rfind("cat_", 0) == 0 || (s.rfind("small_", 0) == 0 && r.first == s + ".pickle") || s == "ans_gpt2_py" ||
        s == "ans_gpt2_cpp")
      runs.push_back(r);
  }
  REQUIRE(runs.size() >= 15);
  for (const auto& [file, stem] : runs) {
    DYNAMIC_SECTION(file) {
      Trace t = load_trace(test::real_data(file));
      Analysis a = analyze(t, {});
      for (const DeviceAnalysis& d : a.devices) {
        INFO("device " << d.device << ", " << d.attr.iterations << " iterations");
        CHECK(d.growth.sites.empty());
        CHECK(growth_finding(d) == nullptr);
        CHECK(test::category_at_peak(d, "leaked") == 0);
        for (const Allocation& al : d.attr.allocations) CHECK(d.attr.categories[al.category] != "leaked");
      }
    }
  }
}

TEST_CASE("growth: the finding reads as plain English at its edges", "[report]") {
  GrowthFacts f;
  f.measured = true;
  f.per_iteration = 0;
  f.first_iteration = 2;
  f.last_iteration = 3;
  f.judged_first = f.judged_last = 1;
  f.unjudged = 1;
  f.sites.push_back({"loop (train.py:10)", "", Phase::Other, 0, 1, 1});
  f.retained_per_iteration = 0;
  f.leaked_at_peak = 0;
  std::string m = finding_text(Finding{Code::Growth, 0, f});
  INFO(m);
  CHECK(m.find("does not grow") != std::string::npos);
  CHECK(m.find("from the start of iteration 2 to that of iteration 3") != std::string::npos);
  CHECK(m.find("kept in iteration 1)") != std::string::npos);
  CHECK(m.find("iterations 1 to 1") == std::string::npos);
  CHECK(m.find("one 0 B allocation") != std::string::npos);
  CHECK(m.find("the last iteration's allocations") != std::string::npos);
  CHECK(m.find("None of it is live at the peak.") != std::string::npos);
  CHECK(m.find("1 allocations") == std::string::npos);

  // Huge counts, several sites, a model frame.
  f.per_iteration = int64_t(3) << 40;
  f.first_iteration = 2;
  f.last_iteration = 150;
  f.judged_first = 1;
  f.judged_last = 148;
  f.unjudged = 2;
  f.sites = {{"train (t.py:5)", "forward (m/model.py:9)", Phase::Forward, int64_t(1) << 40, 4000000000ull, 147},
             {"train (t.py:6)", "", Phase::Backward, 1 << 20, 1, 148}};
  f.more_sites = 1;
  f.retained_per_iteration = (int64_t(1) << 40) + (1 << 20);
  f.leaked_at_peak = int64_t(5) << 40;
  m = finding_text(Finding{Code::Growth, 0, f});
  INFO(m);
  CHECK(m.find("Memory grows 3.0 TiB per iteration (the median change of allocated memory between the starts of "
               "iterations 2 to 150)") == 0);
  CHECK(m.find("3 sites keep allocations every iteration") != std::string::npos);
  CHECK(m.find("4,000,000,000 allocations (1.0 TiB in all) made in each forward at forward (m/model.py:9), called "
               "from train (t.py:5) (kept in iterations 2 to 148)") != std::string::npos);
  CHECK(m.find("one 1.0 MiB allocation made in each backward at train (t.py:6) (kept in iterations 1 to 148)") !=
        std::string::npos);
  CHECK(m.find("; and 1 more site.") != std::string::npos);
  CHECK(m.find("the last 2 iterations' allocations") != std::string::npos);
  CHECK(m.find("5.0 TiB of leaked memory is live at the peak.") != std::string::npos);
}
