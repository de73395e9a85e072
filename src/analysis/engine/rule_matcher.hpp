// Internal: what a rule set's phase hints and frame conditions say about one
// trace's frames and stacks, worked out once per trace and shared by all of
// its devices (attribution_rules.cpp).
//
// Linear in the trace: each distinct frame is matched once against every
// pattern of the rule set together (PatternSet: one pass over its name and
// one over its file), and each stack node is visited once, building on its
// parent (a stack is its innermost frame under its parent's stack). Nothing
// walks a whole stack per stack, so a stack 100,000 frames deep costs what
// 100,000 frames cost, not what 100,000 stacks of 100,000 frames would.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <unordered_map>
#include <vector>

#include "snapdiff/analysis/attribution.hpp"

namespace snapdiff::detail {

constexpr int8_t kHintNone = -1;   // frames, but none matched a hint (user code)
constexpr int8_t kHintEmpty = -3;  // no frames at all
constexpr int8_t kHintOuter = 0x10;  // bit of a frame hint that frames inside it cannot override

class RuleMatcher {
 public:
  RuleMatcher(const Trace& t, const FrameTable& ft, const RuleSet& rs);

  // The phase of the first hint matching the innermost frame of `s` that any
  // hint matches; kHintNone when none does, kHintEmpty for the empty stack.
  int8_t stack_hint(StackId s);
  // The rules with frame conditions that hold on some frame of `s`
  // (name and file on the same frame), ascending. Stable references.
  const std::vector<uint32_t>& stack_rules(StackId s);
  // The rules without frame conditions, ascending.
  const std::vector<uint32_t>& frameless_rules() const { return frameless_; }

 private:
  void match_frame(FrameId f);
  uint32_t intern(std::vector<uint32_t>&& v);
  uint32_t unite(uint32_t a, uint32_t b);
  void grow_nodes();

  const Trace& t_;
  const FrameTable& ft_;
  const RuleSet& rs_;
  PatternSet names_, files_;
  // Per pattern of names_ / files_: the hints and the rules that use it.
  std::vector<std::vector<uint32_t>> name_hints_, file_hints_, name_rules_, file_rules_;
  std::vector<uint8_t> hint_conds_, rule_conds_;  // how many of its patterns must match
  std::vector<uint32_t> frameless_;
  // Per frame (filled by match_frame): its hint, and the set of rules whose
  // frame conditions it satisfies.
  std::vector<int8_t> frame_hint_;
  std::vector<uint32_t> frame_set_;
  // Per stack node.
  std::vector<int8_t> node_hint_;
  std::vector<uint32_t> node_set_;
  // Sets of rule indices, interned by content; 0 is the empty set.
  std::deque<std::vector<uint32_t>> sets_;
  std::unordered_map<uint64_t, uint32_t> set_by_hash_;
  std::unordered_map<uint64_t, uint32_t> unions_;  // (a << 32 | b) -> a ∪ b
  std::vector<int> scratch_names_, scratch_files_;
  std::vector<uint32_t> scratch_;
};

// attribute() with the trace's matcher (analyze() makes one per trace).
Attribution attribute(const Trace& trace, const FrameTable& frames, const Device& dev, const DeviceReplay& replay,
                      const RuleSet& rules, RuleMatcher& matcher);
// The same while the replay may still be running on another thread:
// `replay()` returns it, waiting for it on first use. The attribution asks
// for it only where it needs the replay's counters or pools (splitting a
// stretch by its shape, a dump with private pools, each phase's peak), so
// most of it runs beside the replay.
Attribution attribute(const Trace& trace, const FrameTable& frames, const Device& dev,
                      const std::function<const DeviceReplay&()>& replay, const RuleSet& rules, RuleMatcher& matcher);

}  // namespace snapdiff::detail
