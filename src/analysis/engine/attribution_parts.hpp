// Internal: the three jobs of attribute() (attribution.cpp drives them), each
// in its own file and testable on its own:
//  - phases and iterations (attribution_phases.cpp): find_phases() places
//    every event in a span of (iteration, phase); measure_spans() finds each
//    span's requested peak;
//  - rule matching (attribution_rules.cpp): the RuleMatcher (frames and
//    stacks against the rules' patterns) and the Categorizer (the first rule
//    whose conditions hold gives an allocation its category);
//  - category inference (attribution_infer.cpp): the Inferrer marks
//    allocations with Fact bits from what the first round of categories says
//    about the rest (docs/attribution.md "Inferences").
// What they share: the Attribution being filled, the replay waited for on
// first use (LazyReplay), and the spans' queries (SpanQueries).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "analysis/engine/rule_matcher.hpp"
#include "snapdiff/analysis/attribution.hpp"

namespace snapdiff::detail {

constexpr int8_t kHintOptFrame = -4;  // an optimizer frame outside every timed step annotation

// The replay, possibly still running on another thread: waits for it on
// first use.
class LazyReplay {
 public:
  explicit LazyReplay(const std::function<const DeviceReplay&()>& get) : get_(get) {}
  const DeviceReplay& operator()() {
    if (!rp_) rp_ = &get_();
    return *rp_;
  }

 private:
  const std::function<const DeviceReplay&()>& get_;
  const DeviceReplay* rp_ = nullptr;
};

// Phases and iterations: fills a.event_span, a.spans, a.iterations and
// a.phase_evidence from the events' stacks (the matcher's phase hints), the
// optimizer annotations and, without frames that tell forward from backward,
// the allocations' lifetimes (a.allocations, alloc_of_event: per event the
// allocation it makes or frees) and the replay's requested bytes.
void find_phases(const Trace& t, const Device& d, RuleMatcher& m, LazyReplay& replay,
                 const std::vector<uint32_t>& alloc_of_event, Attribution& a);
// Each span's requested bytes before it and at its peak (and which event).
void measure_spans(const DeviceReplay& rp, Attribution& a);

// Questions about the spans that the rules and the inferences ask (the spans
// must be final: answers are cached).
class SpanQueries {
 public:
  explicit SpanQueries(const Attribution& a) : a_(a) {}
  // The phase of the allocation's span; PreTrace when made before the history.
  Phase alloc_phase(const Allocation& al) const {
    return al.alloc_event < 0 ? Phase::PreTrace : a_.spans[a_.event_span[size_t(al.alloc_event)]].phase;
  }
  // The first event of the next span of phase `p` after `after_event`'s span
  // (-1: from before the first span); INT64_MAX when none.
  int64_t next_span_start(int64_t after_event, Phase p);
  // The index of a category by name; -1 when the rules have none.
  int category(const char* name) const;

 private:
  const Attribution& a_;
  std::vector<int64_t> next_start_[kPhaseCount];
};

// Rule matching: gives one allocation its category (and rule), from the
// first rule whose conditions hold. Keeps what it learns across calls (sizes
// of the tracked categories, the gradient size ratio, replaced tensors), so
// allocations are categorized in order of allocation.
class Categorizer {
 public:
  Categorizer(const RuleSet& rs, RuleMatcher& m, SpanQueries& spans, Attribution& a);
  void categorize_one(uint32_t id);

 private:
  const std::vector<uint32_t>& frameless_for(Phase p);
  int grad_ratio(int cat);
  const std::unordered_map<uint64_t, std::vector<uint32_t>>& frees_in_span(uint32_t span);
  bool holds(size_t ri, uint32_t id);

  const RuleSet& rs_;
  RuleMatcher& m_;
  SpanQueries& spans_;
  Attribution& a_;
  uint16_t unknown_ = 0;  // the index of `unknown` among the categories
  std::unordered_map<uint32_t, std::unordered_map<uint64_t, std::vector<uint32_t>>> freed_in_span_;
  std::unordered_set<uint32_t> replaced_;
  static_assert(int(Phase::PreTrace) == 5, "one list per Phase");
  std::array<std::vector<uint32_t>, 6> frameless_by_phase_;  // frameless_for(), by Phase
  std::array<bool, 6> frameless_known_{};
  std::unordered_map<int, std::unordered_set<uint64_t>> sizes_of_;
  std::vector<int> tracked_;
  std::unordered_map<int, int> ratio_;
};

// Category inference: each infer_*() sets Fact bits on the allocations it
// recognises and says why in a.fact_evidence; it returns whether it marked
// any (the caller then categorizes those again).
class Inferrer {
 public:
  Inferrer(const Trace& t, const FrameTable& ft, const Device& d, const RuleSet& rs, RuleMatcher& m,
           LazyReplay& replay, SpanQueries& spans, Attribution& a)
      : t_(t), ft_(ft), d_(d), rs_(rs), m_(m), replay_(replay), spans_(spans), a_(a) {}

  // Each allocation's pool (the replay's, or the dump segment's for
  // `dump_blocks`: (allocation, segment)) and which private pools are a
  // CUDA graph's. Only a dump with private pools asks the replay.
  void infer_pools(bool private_pools, const std::vector<std::pair<uint32_t, uint32_t>>& dump_blocks);
  void infer_zero_grad();
  // The run's tensor list tied to allocations (attribution_noted.cpp).
  void infer_noted();
  bool infer_kept_buffers();
  bool infer_pre_trace();
  bool infer_frozen();
  bool infer_copies();
  bool infer_input_sites();
  bool infer_graph_gradients();
  // An inference run (forwards, no backward, no optimizer step): the KV
  // cache a decoding loop keeps and the input it reads
  // (attribution_inference.cpp); then, with the final categories, the
  // cache's figures for --explain.
  bool infer_inference();
  void describe_kv_cache(int64_t peak_event);

 private:
  static constexpr uint64_t kMinCopyBytes = 64 << 10;
  int cat(const char* name) const { return spans_.category(name); }
  bool stack_mentions(StackId s, std::initializer_list<std::string_view> needles) const;
  int states_per_parameter() const;
  uint64_t infer_replaced_state();
  // (cast_sizes: per parameter size, the most gradients of it cast up in one iteration.)
  bool narrow_compute(uint64_t ratio, std::unordered_map<uint64_t, int64_t>* cast_sizes = nullptr);
  // What a stack's frames say about a parameter copy made there.
  enum class CopyFrames : uint8_t { None, AutocastCast, FunctionForward, ActivationOp };
  CopyFrames copy_frames(StackId stack) const;

  const Trace& t_;
  const FrameTable& ft_;
  const Device& d_;
  const RuleSet& rs_;
  RuleMatcher& m_;
  LazyReplay& replay_;
  SpanQueries& spans_;
  Attribution& a_;
  std::string replaced_evidence_;  // infer_replaced_state()'s figures
  // infer_inference(): whether the run is inference, the first event of each
  // decoding forward and the last allocation inside one, the growing chains.
  bool inference_ = false;
  std::vector<int64_t> run_starts_;
  int64_t last_forward_ = -1;
  uint64_t growth_sites_ = 0, growth_chains_ = 0;
};

}  // namespace snapdiff::detail
