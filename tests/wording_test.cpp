// Every sentence snapdiff prints reads as plain English: each finding and
// warning template rendered with edge-case numbers (one, zero, huge, the
// phases with awkward names), and every line of the text report of every
// real recording, checked for the slips a template makes ("1 allocations",
// "iterations 3-3", "during the other", "0.00x").
#include <catch2/catch.hpp>
#include <functional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "report/format.hpp"
#include "snapdiff/analysis/analysis.hpp"
#include "snapdiff/analysis/catalogue.hpp"
#include "snapdiff/input/input.hpp"
#include "snapdiff/analysis/diff.hpp"
#include "snapdiff/analysis/ranks.hpp"
#include "snapdiff/report/ranks_report.hpp"
#include "snapdiff/report/report.hpp"
#include "test_util.hpp"

using namespace snapdiff;

namespace {

// The slips, each with the pattern that finds it. Table columns are text
// too, so the line checks use the same list.
struct Slip {
  const char* what;
  std::regex re;
};
const std::vector<Slip>& slips() {
  static const std::vector<Slip> v = {
      {"a singular count with a plural noun",
       std::regex(R"((^|[^0-9.,])1 (allocations|errors|steps|tensors|call paths|iterations|phases|sites|blocks|events|)"
                  R"(entries|frees|segments|kernels|ops|frames|devices|streams|times|parameters|rows|gradients|)"
                  R"(launches|moments|categories|files|ranks)\b)")},
      {"a range from a number to itself", std::regex(R"(\b(iterations?|events?) ([0-9]+)-\2\b)")},
      {"a ratio that rounds to nothing", std::regex(R"(\b0\.00x\b)")},
      {"a phase named as a noun it is not", std::regex(R"(during the (other|pre-trace|pre_trace)\b)")},
      {"a number that is not one", std::regex(R"(\b(nan|-?inf)\b)", std::regex::icase)},
      {"a doubled word", std::regex(R"(\b(the|a|of|in|at|is|to) \1\b)")},
      {"punctuation after a space", std::regex(R"( [,.;:](\s|$))")},
      {"doubled punctuation", std::regex(R"([,;]\s*[,;:.]|:\s+[,;:.]|:[,;.]|(^|[^.])\.\.([^.]|$))")},
      {"an empty quote or parenthesis", std::regex(R"(\(\s*\)|''|``)")},
  };
  return v;
}

std::vector<std::string> slips_in(const std::string& text) {
  std::vector<std::string> out;
  for (const Slip& s : slips())
    if (std::regex_search(text, s.re)) out.push_back(s.what);
  return out;
}

// A sentence is also checked for what only sentences must do.
void check_sentence(const std::string& text) {
  INFO(text);
  CHECK(slips_in(text).empty());
  CHECK(!text.empty());
  CHECK(text.find("  ") == std::string::npos);
  CHECK(text.back() != ' ');
}

// Edge-case facts for each code. A new code without samples fails the
// coverage test below: its template is then untested.
Finding finding(Code c, decltype(Finding::facts) f) {
  Finding x;
  x.code = c;
  x.facts = std::move(f);
  return x;
}

std::vector<Finding> finding_samples() {
  std::vector<Finding> v;
  const int64_t huge = int64_t(1) << 50;
  for (Phase ph : {Phase::Init, Phase::Forward, Phase::Backward, Phase::Optimizer, Phase::Other, Phase::PreTrace})
    for (int it : {0, 1, 7})
      for (bool trunc : {false, true}) {
        PeakFacts p;
        p.peak = it == 7 ? huge : 1000;
        p.phase = ph;
        p.iteration = it;
        p.truncated = trunc;
        if (it > 0) p.parts = {{"gradient", 1, it - 1}, {"activation", 0, 0}};
        v.push_back(finding(Code::Peak, p));
      }
  for (size_t similar : {size_t(0), size_t(1), size_t(4)})
    for (int64_t temps : {int64_t(0), int64_t(1), huge}) {
      OptimizerStepFacts s;
      s.iteration = 1;
      s.rise = temps;
      s.new_state = similar == 1 ? 1 : 0;
      s.similar = similar;
      s.steps = similar + 1;
      s.temporaries = temps;
      s.gradients = temps == 1 ? 0 : huge;
      s.site = temps ? "_multi_tensor_adam (torch/optim/adam.py:544)" : "";
      s.site_callee = similar ? "torch._foreach_add" : "";
      v.push_back(finding(Code::OptimizerTransient, s));
    }
  for (int64_t before : {int64_t(0), int64_t(1), int64_t(5000)}) {
    UnknownFacts u;
    u.unknown = 5000;
    u.before_profiler = before;
    v.push_back(finding(Code::Unknown, u));
  }
  for (int n : {0, 1, 3}) {
    GrowthFacts g;
    g.measured = n > 0;
    g.per_iteration = n == 0 ? 0 : n == 1 ? 1 : huge;
    g.first_iteration = 2;
    g.last_iteration = 2 + n;
    g.judged_first = 1;
    g.judged_last = n;
    g.unjudged = n == 1 ? 1 : 2;
    for (int k = 0; k < n; ++k)
      g.sites.push_back({"forward (train.py:12)", k ? "" : "forward (gpt2/modeling_gpt2.py:697)",
                         k == 1 ? Phase::Other : Phase::Forward, k ? 1 : huge, uint64_t(k == 2 ? 4000000000u : 1), n});
    g.more_sites = size_t(n == 3);
    g.retained_per_iteration = n == 0 ? 0 : 1;
    g.leaked_at_peak = n == 0 ? 0 : huge;
    v.push_back(finding(Code::Growth, g));
  }
  for (int64_t b : {int64_t(0), int64_t(1), huge}) {
    DiffReservedFacts r;
    r.a_reserved = 1000;
    r.b_reserved = b;
    r.a_allocated = 1;
    r.b_allocated = b;
    r.a_free_cached = 0;
    r.b_free_cached = b;
    r.a_largest_free = 0;
    r.b_largest_free = uint64_t(b);
    v.push_back(finding(Code::DiffReserved, r));
  }
  for (int64_t b : {int64_t(0), int64_t(1000), huge}) {
    DiffPeakFacts d;
    d.a = 1000;
    d.b = b;
    d.a_iteration = 1;
    d.b_iteration = 0;
    d.a_phase = Phase::Other;
    d.b_phase = Phase::PreTrace;
    v.push_back(finding(Code::DiffPeak, d));
  }
  for (double ratio : {0.0, 0.001, 0.5, 1.0, 2.0})
    for (bool groups : {false, true}) {
      DiffCategoryFacts c;
      c.category = "parameter";
      c.a = 1000;
      c.b = int64_t(1000 * ratio);
      c.parameters = true;
      c.parameter_ratio = ratio;
      c.a_tensors = 1;
      c.b_tensors = ratio == 0.0 ? 0 : 1;
      if (groups) {
        c.mostly = {{"forward (model.py:43)", 5, 1, true, false}};
        c.offset = {{"backward (model.py:58)", -5, 2, false, true}};
      } else {
        c.has_top_site = true;
        c.top_delta = -1;
        c.top_site = "forward (model.py:37)";
        c.top_gone = true;
      }
      c.gradients_kept = groups;
      v.push_back(finding(Code::DiffCategory, c));
    }
  for (int64_t g : {int64_t(0), int64_t(1000)}) {
    DiffStepFacts s;
    s.a_temporaries = 0;
    s.b_temporaries = 1000;
    s.a_gradients = g;
    s.b_gradients = g;
    v.push_back(finding(Code::DiffOptimizerTransient, s));
  }
  for (int n : {0, 1, 3})
    for (Phase p : {Phase::Forward, Phase::PreTrace}) {
      DiffPhaseFacts f;
      f.phase = p;
      f.iteration = n;
      f.a = n == 3 ? huge : 1000;
      f.b = n == 0 ? 0 : 1;
      for (int k = 0; k < n; ++k) f.categories.push_back({k ? "optimizer_temporary" : "activation", k ? huge : 0, 1});
      v.push_back(finding(Code::DiffPhase, f));
    }
  return v;
}

Warning warning(Code c, decltype(Warning::facts) f) {
  Warning w;
  w.code = c;
  w.facts = std::move(f);
  return w;
}

std::vector<Warning> warning_samples() {
  std::vector<Warning> v;
  v.push_back(warning(Code::ProfilerWindow, ProfilerWindowFacts{1}));
  for (Truncation k : {Truncation::None, Truncation::LateStart, Truncation::Wrapped, Truncation::Unknown})
    for (uint64_t n : {uint64_t(0), uint64_t(1), uint64_t(1000000)}) {
      HistoryTruncatedFacts h;
      h.requested = int64_t(n);
      h.reserved = int64_t(n);
      h.allocations = n;
      h.allocated_estimated = n == 1;
      h.kind = k;
      h.evidence.entries = n;
      h.evidence.max_entries = n == 1 ? -1 : int64_t(n);
      h.evidence.framed_early_blocks = n;
      h.evidence.dropped_mid_history = n;
      v.push_back(warning(Code::HistoryTruncated, h));
    }
  v.push_back(warning(Code::NoHistory, std::monostate{}));
  for (bool trunc : {false, true}) {
    EndStateFacts e;
    e.truncated = trunc;
    e.replay.allocated = 1;
    v.push_back(warning(Code::EndStateMismatch, e));
  }
  for (uint64_t n : {uint64_t(1), uint64_t(3)}) {
    InconsistentFacts i;
    i.events = n;
    i.reported_totals = n == 3;
    i.first = n == 1 ? "" : "free of an unknown block at 0x7f00";
    v.push_back(warning(Code::ReplayInconsistent, i));
  }
  for (uint64_t n : {uint64_t(1), uint64_t(2)}) {
    OomFacts o;
    o.errors = n;
    o.has_first = n == 1;
    o.first_size = 1;
    o.first_free = 0;
    v.push_back(warning(Code::Oom, o));
  }
  v.push_back(warning(Code::NoTimestamps, std::monostate{}));
  for (uint32_t pid : {uint32_t(0), uint32_t(42)})
    for (const char* holder : {"NCCL", "PyTorch", "libfoo.so", "unknown caller"}) {
      OutsideFacts o;
      o.holder = holder;
      o.pid = pid;
      o.bytes = pid == 0 ? (int64_t(1) << 30) : 1;
      o.device_peak = pid == 0 ? int64_t(15) << 30 : 1;
      v.push_back(warning(Code::OutsideAllocator, o));
    }
  return v;
}

}  // namespace

TEST_CASE("wording: every finding and warning code has edge-case samples here", "[report][wording]") {
  std::set<Code> covered;
  for (const Finding& f : finding_samples()) covered.insert(f.code);
  for (const Warning& w : warning_samples()) covered.insert(w.code);
  for (const CatalogueEntry& e : catalogue()) {
    INFO("code " << e.name << ": add samples to tests/wording_test.cpp");
    CHECK(covered.count(e.code) == 1);
  }
}

TEST_CASE("wording: finding templates read as plain English with edge-case numbers", "[report][wording]") {
  for (const Finding& f : finding_samples()) {
    const std::string t = finding_text(f);
    check_sentence(t);
    CHECK(t.back() == '.');
  }
}

TEST_CASE("wording: warning templates read as plain English with edge-case numbers", "[report][wording]") {
  for (const Warning& w : warning_samples()) check_sentence(warning_text(w));
}

TEST_CASE("wording: the slip patterns find the slips they name", "[report][wording]") {
  for (const char* bad : {"1 allocations", "(4 phases of iterations 3-3 omitted)", "reached during the other:",
                          "B's parameters take 0.00x A's bytes", "rises nan", "in in the", "at 3 ,", "a; . b", "()"})
    CHECK(!slips_in(bad).empty());
  for (const char* good : {"11 allocations", "1 allocation", "iterations 3-4", "1.0 MiB", "during the forward",
                           "events 33-34", "e.g. fp8", "...", "0.5x", "aten::mm", "(first: x)"})
    CHECK(slips_in(good).empty());
}

TEST_CASE("wording: every line of the text report of every real recording", "[report][wording]") {
  std::vector<std::string> files;
  for (const auto& r : test::real_recordings()) files.push_back(test::real_data(r.first));
  REQUIRE(files.size() >= 10);
  for (const std::string& path : files) {
    const Trace t = load_trace(path);
    ReportOptions o;
    o.input_name = path;
    const std::string text = render_text(analyze_report(t, o));
    size_t start = 0;
    while (start < text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      const std::string line = text.substr(start, end - start);
      INFO(path << ": " << line);
      CHECK(slips_in(line).empty());
      start = end + 1;
    }
  }
}

TEST_CASE("wording: every line of the reports of many ranks", "[report][wording]") {
  // Two real recordings standing for two ranks, a third that failed, a
  // rank not told; a metric that varies and one that does not.
  std::vector<Trace> traces;
  for (const char* f : {"fsdp2_gpt2.pickle.gz", "ddp_gpt2.pickle.gz"}) traces.push_back(load_trace(test::real_data(f)));
  std::vector<Analysis> runs;
  for (const Trace& t : traces) runs.push_back(analyze(t, {}));
  RanksView v;
  for (size_t i = 0; i < runs.size(); ++i) {
    RankEntry e;
    e.name = "rank" + std::to_string(i) + ".pickle";
    e.rank = i == 0 ? 0 : -1;
    e.report = report_view(runs[i]);
    v.ranks.push_back(e);
  }
  RankEntry bad;
  bad.name = "rank7.pickle";
  bad.rank = 7;
  bad.error = "rank7.pickle: byte 0: not a snapshot";
  v.ranks.push_back(bad);
  v.read = 2;
  v.failed = 1;
  v.superseded = {"old/rank0.pickle"};
  for (int varies = 0; varies < 2; ++varies) {
    RankMetric m;
    m.name = varies ? "peak requested" : "peak reserved";
    m.key = varies ? "peak_requested_bytes" : "peak_reserved_bytes";
    m.values = {1 << 30, varies ? 3 << 29 : 1 << 30, 0};
    m.max = m.values[1];
    m.min = m.median = 1 << 30;
    m.max_entry = varies ? 1 : 0;
    m.max_over_median = double(m.max) / double(m.median);
    v.metrics.push_back(m);
  }
  v.worst = 1;
  v.median = 0;
  v.worst_vs_median = diff_reports(runs[0], runs[1], {});
  v.shown = 1;
  RanksDiff d;
  RankPair p;
  p.rank = 0;
  p.a_name = "a/rank0.pickle";
  p.b_name = "b/rank0.pickle";
  p.diff = diff_reports(runs[0], runs[1], {});
  RankPair q = p;
  q.rank = 1;
  q.a_error = "a/rank1.pickle: byte 0: not a snapshot";
  q.diff.reset();
  d.pairs = {p, q};
  d.only_b = {2};
  for (int64_t delta : {int64_t(1) << 30, int64_t(0), -(int64_t(1) << 20)}) {
    RankOutlier o;
    o.rank = 0;
    o.delta = delta;
    o.others_median = delta ? 0 : 1 << 20;
    o.category = delta ? "activation" : "";
    o.category_delta = delta;
    d.outliers.push_back(o);
  }
  d.shown = 0;
  for (const std::string& text : {render_ranks_text(v), render_ranks_markdown(v), render_ranks_diff_text(d), render_ranks_diff_markdown(d)}) {
    size_t start = 0;
    while (start < text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      const std::string line = text.substr(start, end - start);
      INFO(line);
      CHECK(slips_in(line).empty());
      start = end + 1;
    }
  }
}

TEST_CASE("--explain: the report layer words the pre-trace inferences from their facts", "[report]") {
  PreTraceEvidence e;
  e.blocks[0] = 12, e.bytes[0] = (96 << 20) + (1 << 19);  // rounds up to 97 MiB
  e.blocks[1] = 1, e.bytes[1] = 1;
  e.blocks[2] = 24, e.bytes[2] = int64_t(192) << 20;
  e.states = 2;
  e.states_from = PreTraceEvidence::StatesFrom::OptimizerClass;
  ExplainItem it;
  it.evidence = "the rule's words";
  for (int i = 0; i < 3; ++i) {
    InferredEvidence f;
    f.fact = std::string("fact") + char('0' + i);
    f.pre_trace = i;
    f.facts = e;
    it.inferred.push_back(f);
  }
  InferredEvidence other;
  other.fact = "zero_grad_free";
  other.words = "as the analysis says";
  it.inferred.push_back(other);
  CHECK(detail::explain_evidence(it) ==
        "the rule's words; inferred (fact0): 12 blocks (97 MiB) never freed, with no training step recorded to match"
        "; inferred (fact1): 1 blocks (0 MiB) kept as gradients: none is made in the recording, one per parameter"
        "; inferred (fact2): 24 blocks (192 MiB): 2 optimizer states per parameter (the optimizer class "
        "(Optimizer.step annotation)), size-matched to the parameters"
        "; inferred (zero_grad_free): as the analysis says");
  it.inferred.resize(1);
  it.inferred[0].facts.steps = true;
  it.inferred[0].facts.states_from = PreTraceEvidence::StatesFrom::SizeClasses;
  it.inferred[0].facts.grouped = true;
  CHECK(detail::explain_evidence(it) ==
        "the rule's words; inferred (fact0): 12 blocks (97 MiB) the first of each parameter-sized group of 4 blocks "
        "(parameter, gradient, states; the blocks of each size; parameters and states in groups of 3 blocks of one "
        "size, the parameters adding up to an iteration's gradients)");
  it.inferred[0].facts.gradients = 30;
  CHECK(detail::explain_evidence(it) ==
        "the rule's words; inferred (fact0): 12 blocks (97 MiB) size-matched to the 30 gradients one iteration makes "
        "(and the model's buffers of those sizes)");
  it.inferred[0].facts.states_from = PreTraceEvidence::StatesFrom::Unknown;
  it.inferred[0].facts.gradients = 0;
  CHECK(detail::explain_evidence(it).ends_with("(parameter, gradient, states; parameters and states in groups of 3 "
                                               "blocks of one size, the parameters adding up to an iteration's gradients)"));
}

TEST_CASE("--explain: the report layer says why no rule matched from when the allocation lived", "[report]") {
  ExplainItem it;
  it.rule = "(none)";
  CHECK(detail::explain_evidence(it) ==
        "no rule matched: held since before recording, never freed in the window: model weights, buffers or caches "
        "allocated before recording started; its size matches no gradient or optimizer state the recording shows, "
        "and nothing shows it is the model (counted apart as unknown_held_from_before)");
  it.free_event = 3, it.free_phase = Phase::Optimizer;
  CHECK(detail::explain_evidence(it) == std::string("no rule matched: allocated before recording started, freed in ") +
                                            phase_name(Phase::Optimizer) +
                                            ", and its size matches no gradient or optimizer state the recording shows");
  it.alloc_event = 5, it.alloc_phase = Phase::Forward;
  it.free_event = 9, it.free_phase = Phase::Backward;
  CHECK(detail::explain_evidence(it) == std::string("no rule matched: allocated in ") + phase_name(Phase::Forward) +
                                            ", freed in " + phase_name(Phase::Backward));
  it.evidence = "as read back";  // a view read back from JSON keeps the words
  CHECK(detail::explain_evidence(it) == "as read back");
}
