// The three jobs of the attribution, each on its own (src/analysis/
// attribution_parts.hpp): phases from hand-written events, a category from
// the first rule that holds, an inference from an annotation. The traces are
// written event by event; the expected spans, categories and facts are worked
// out from the rules in the comments.
#include <catch2/catch.hpp>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "analysis/engine/attribution_parts.hpp"
#include "snapdiff/model/frames.hpp"

using namespace snapdiff;

namespace {

// Rules of our own, tried before the built-in ones: frames "fwd", "bwd" and
// "opt" are the three phases; an allocation under "opt" is optimizer state.
RuleSet test_rules() {
  RuleSet rs = RuleSet::builtin();
  rs.add_json(R"({"format": "snapdiff.rules", "version": 1,
      "phase_hints": [{"phase": "forward", "name": "^fwd$"}, {"phase": "backward", "name": "^bwd$"},
                      {"phase": "optimizer", "name": "^opt$"}],
      "rules": [{"name": "opt-state", "category": "optimizer_state", "evidence": "made by opt",
                 "when": {"frame_name": "^opt$", "alloc_phase": ["optimizer"]}}]})",
              "test");
  return rs;
}

// A device-0 history of allocations and frees, one frame deep.
struct History {
  Trace t;
  std::vector<uint32_t> alloc_of_event;
  Attribution a;

  // Frame `name` inside the stack `outer` (0: a stack of one frame).
  StackId frame(const char* name, StackId outer = 0) {
    Frame f;
    f.name = t.strings.intern(name);
    return t.stacks.child(outer, t.intern_frame(f));
  }
  // An allocation at `addr` under frame `name`; returns its index.
  uint32_t alloc(uint64_t addr, const char* name, int64_t time_us = kNoTime) {
    return alloc_at(addr, frame(name), time_us);
  }
  // An allocation with stack `stack` (0: no frames, as on the autograd engine's threads).
  uint32_t alloc_at(uint64_t addr, StackId stack, int64_t time_us) {
    Event e;
    e.kind = EventKind::Alloc;
    e.addr = addr;
    e.size = 1024;
    e.stack = stack;
    e.time_us = time_us;
    Allocation al;
    al.addr = addr;
    al.requested = 1024;
    al.stack = e.stack;
    al.alloc_event = int64_t(t.device(0).events.size());
    push(e, uint32_t(a.allocations.size()));
    a.allocations.push_back(al);
    return uint32_t(a.allocations.size() - 1);
  }
  void free(uint32_t id, int64_t time_us = kNoTime) {
    Event e;
    e.kind = EventKind::FreeRequested;
    e.addr = a.allocations[id].addr;
    e.size = 1024;
    e.time_us = time_us;
    a.allocations[id].free_event = a.allocations[id].free_requested_event = int64_t(t.device(0).events.size());
    push(e, id);
  }
  void push(const Event& e, uint32_t id) {
    t.device(0).events.push_back(e);
    alloc_of_event.push_back(id);
  }
};

const DeviceReplay& no_replay() {
  FAIL("the replay was asked for");
  static DeviceReplay r;
  return r;
}

}  // namespace

TEST_CASE("phases on their own: each frame's hint places its event, a forward after a backward starts an iteration",
          "[analysis][phases]") {
  History h;
  // forward, backward, optimizer (iteration 1); forward (iteration 2).
  h.alloc(0x1000, "fwd");
  h.alloc(0x2000, "bwd");
  h.alloc(0x3000, "opt");
  h.alloc(0x4000, "fwd");
  const RuleSet rs = test_rules();
  h.a.categories = rs.categories;
  const FrameTable ft(h.t);
  detail::RuleMatcher m(h.t, ft, rs);
  const std::function<const DeviceReplay&()> get = no_replay;
  detail::LazyReplay replay(get);
  detail::find_phases(h.t, h.t.devices[0], m, replay, h.alloc_of_event, h.a);
  REQUIRE(h.a.spans.size() == 4);
  const Phase want[] = {Phase::Forward, Phase::Backward, Phase::Optimizer, Phase::Forward};
  const int iteration[] = {1, 1, 1, 2};
  for (size_t i = 0; i < 4; ++i) {
    INFO("span " << i);
    CHECK(h.a.spans[i].phase == want[i]);
    CHECK(h.a.spans[i].iteration == iteration[i]);
    CHECK(h.a.spans[i].start_event == int64_t(i));
    CHECK(h.a.event_span[i] == i);
  }
  CHECK(h.a.iterations == 2);
  CHECK(h.a.phase_evidence == "stack frames");
}

TEST_CASE("phases on their own: a closure's forward and backward inside an annotated step are not the optimizer's",
          "[analysis][phases]") {
  // Gradient accumulation over two micro-batches, the second run by
  // optimizer.step(closure) (Lightning, LBFGS): inside the Optimizer.step
  // annotation [100, 200] the closure's forward (its loss is user code under
  // the step's frame), its backward (the engine's frameless allocations
  // too), then the step's own update. A second step [400, 500] runs a
  // closure and allocates nothing of its own: an optimizer phase without
  // events after it. A third step [600, 700] calls its closure twice with
  // its own work between (LBFGS): one iteration, the work the optimizer's.
  History h;
  const StackId opt = h.frame("opt");
  h.alloc(0x1000, "fwd", 10);             // 0: micro-batch 1, outside the step
  h.alloc(0x2000, "bwd", 20);             // 1
  h.alloc_at(0x3000, 0, 25);              // 2: the engine's thread
  h.alloc(0x4000, "fwd", 110);            // 3: micro-batch 2, inside the closure
  h.alloc_at(0x5000, h.frame("loss", opt), 115);  // 4: the loss, under the step's frame
  h.alloc(0x6000, "bwd", 120);            // 5
  h.alloc_at(0x7000, 0, 125);             // 6: a gradient, on the engine's thread
  h.alloc(0x8000, "opt", 150);            // 7: the update
  h.alloc(0x9000, "opt", 160);            // 8
  h.alloc(0xa000, "fwd", 300);            // 9: the next step's first micro-batch
  h.alloc(0xb000, "bwd", 310);            // 10
  h.alloc(0xc000, "fwd", 410);            // 11: its closure
  h.alloc(0xd000, "bwd", 420);            // 12
  h.alloc_at(0xe000, 0, 430);             // 13
  h.alloc(0xf000, "fwd", 610);            // 14: the third step's first call
  h.alloc(0x10000, "bwd", 620);           // 15
  h.alloc(0x11000, "opt", 630);           // 16: the step's work between calls
  h.alloc(0x12000, "fwd", 640);           // 17: the second call
  h.alloc(0x13000, "bwd", 650);           // 18
  h.alloc(0x14000, "opt", 660);           // 19
  for (const auto& [start, end] : {std::pair<int64_t, int64_t>{100, 200}, {400, 500}, {600, 700}}) {
    h.t.annotations.push_back({0, start, h.t.strings.intern("Optimizer.step#AdamW.step"), true});
    h.t.annotations.push_back({0, end, h.t.strings.intern("Optimizer.step#AdamW.step"), false});
  }
  const RuleSet rs = test_rules();
  h.a.categories = rs.categories;
  const FrameTable ft(h.t);
  detail::RuleMatcher m(h.t, ft, rs);
  const std::function<const DeviceReplay&()> get = no_replay;
  detail::LazyReplay replay(get);
  detail::find_phases(h.t, h.t.devices[0], m, replay, h.alloc_of_event, h.a);
  const Phase want[] = {Phase::Forward,  Phase::Backward,  Phase::Backward,  Phase::Forward,  Phase::Forward,
                        Phase::Backward, Phase::Backward,  Phase::Optimizer, Phase::Optimizer, Phase::Forward,
                        Phase::Backward, Phase::Forward,   Phase::Backward,  Phase::Backward,  Phase::Forward,
                        Phase::Backward, Phase::Optimizer, Phase::Forward,   Phase::Backward,  Phase::Optimizer};
  for (size_t i = 0; i < 20; ++i) {
    INFO("event " << i);
    CHECK(h.a.phase_at(int64_t(i)) == want[i]);
    CHECK(h.a.iteration_at(int64_t(i)) == (i < 9 ? 1 : i < 14 ? 2 : 3));
  }
  // One iteration per step; one optimizer phase per step but for the closure called twice.
  std::vector<PhaseSpan> steps;
  for (const PhaseSpan& s : h.a.spans)
    if (s.phase == Phase::Optimizer) steps.push_back(s);
  REQUIRE(steps.size() == 4);
  CHECK(steps[0].start_event == 7);
  CHECK(steps[0].end_event == 8);
  CHECK(steps[1].empty());
  CHECK(steps[1].start_event == 14);
  CHECK(steps[1].iteration == 2);
  CHECK(steps[2].start_event == 16);
  CHECK(steps[3].start_event == 19);
  CHECK(h.a.iterations == 3);
}

TEST_CASE("rules on their own: the first rule whose conditions all hold gives the category", "[analysis][rules]") {
  History h;
  const uint32_t state = h.alloc(0x1000, "opt");
  const uint32_t other = h.alloc(0x2000, "opt");
  const RuleSet rs = test_rules();
  h.a.categories = rs.categories;
  const FrameTable ft(h.t);
  detail::RuleMatcher m(h.t, ft, rs);
  // Spans set by hand (no phase finding): the first allocation made in an
  // optimizer step, the second in a forward.
  for (Phase p : {Phase::Optimizer, Phase::Forward}) {
    PhaseSpan s;
    s.iteration = 1;
    s.phase = p;
    s.start_event = s.end_event = int64_t(h.a.spans.size());
    h.a.spans.push_back(s);
  }
  h.a.event_span = {0, 1};
  h.a.event_alloc = h.alloc_of_event;
  detail::SpanQueries spans(h.a);
  detail::Categorizer c(rs, m, spans, h.a);
  c.categorize_one(state);
  c.categorize_one(other);
  REQUIRE(h.a.allocations[state].rule >= 0);
  CHECK(rs.rules[size_t(h.a.allocations[state].rule)].name == "opt-state");
  CHECK(h.a.categories[h.a.allocations[state].category] == "optimizer_state");
  // Its frame matches, its phase does not: a later rule, or none, decides.
  CHECK((h.a.allocations[other].rule < 0 || rs.rules[size_t(h.a.allocations[other].rule)].name != "opt-state"));
}

TEST_CASE("inferences on their own: a free inside Optimizer.zero_grad is marked, with its evidence", "[analysis][infer]") {
  History h;
  const uint32_t grad = h.alloc(0x1000, "bwd", 10);
  const uint32_t act = h.alloc(0x2000, "fwd", 20);
  h.free(act, 30);   // before zero_grad
  h.free(grad, 45);  // inside zero_grad [40, 50]
  h.t.annotations.push_back({0, 40, h.t.strings.intern("Optimizer.zero_grad#SGD.zero_grad"), true});
  h.t.annotations.push_back({0, 50, h.t.strings.intern("Optimizer.zero_grad#SGD.zero_grad"), false});
  const RuleSet rs = test_rules();
  h.a.categories = rs.categories;
  const FrameTable ft(h.t);
  const std::function<const DeviceReplay&()> get = no_replay;
  detail::LazyReplay replay(get);
  detail::SpanQueries spans(h.a);
  detail::RuleMatcher m(h.t, ft, rs);
  detail::Inferrer infer(h.t, ft, h.t.devices[0], rs, m, replay, spans, h.a);
  infer.infer_zero_grad();
  CHECK(h.a.allocations[grad].facts == kFactZeroGradFree);
  CHECK(h.a.allocations[act].facts == 0);
  CHECK(h.a.fact_evidence[6] == "freed inside an Optimizer.zero_grad annotation (1 allocations)");
}
