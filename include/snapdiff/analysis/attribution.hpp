// snapdiff/analysis/attribution.hpp — what every allocated byte is, phase by phase.
//
// Two steps, both driven by data (rules/builtin.json and a user's --rules
// file, docs/attribution.md):
//  1. phases: each event is placed in init / forward / backward / optimizer /
//     other of an iteration, from the innermost frame of its stack that
//     matches a phase hint, optimizer annotations, and its neighbours in time
//     (allocations without frames, e.g. the autograd engine's threads);
//  2. categories: each allocation (alloc ... free_requested) gets exactly one
//     category from the first rule whose conditions (frames, phases of its
//     allocation and free, lifetime, size) hold.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "snapdiff/model/frames.hpp"
#include "snapdiff/model/model.hpp"
#include "snapdiff/view/basics.hpp"
#include "snapdiff/analysis/pattern.hpp"
#include "snapdiff/analysis/replay.hpp"

namespace snapdiff {


// Built-in categories, in report order; rules may add their own names.
extern const char* const kBuiltinCategories[];
constexpr int kBuiltinCategoryCount = 14;

// What the analysis infers about an allocation beyond its own stack and
// lifetime (docs/attribution.md "Inferences"); rules name them in
// "inferred". Bit i of Allocation::facts is kFactNames[i].
enum Fact : uint32_t {
  kFactGraphPool = 1u << 0,          // in a private pool that is a CUDA graph's (not a user MemPool)
  kFactPreParameter = 1u << 1,       // from before the recording; size-matched to a parameter
  kFactPreGradient = 1u << 2,        // from before the recording; size-matched to a gradient
  kFactPreOptimizerState = 1u << 3,  // from before the recording; size-matched to optimizer state
  kFactParamSized = 1u << 4,         // a parameter's element count in a narrower dtype, made in a forward
  kFactParamCopySite = 1u << 5,      // ... at a site whose forward allocations match parameters one to one
  kFactZeroGradFree = 1u << 6,       // freed inside Optimizer.zero_grad
  kFactInputSite = 1u << 7,          // made at a site that makes the input batch in other iterations
  kFactGraphGradient = 1u << 8,      // graph-pool memory of a parameter's size alive into the optimizer step
  kFactKeptBuffer = 1u << 9,         // a backward buffer never freed while later gradients are made and freed
  kFactFrozenParameter = 1u << 10,   // from before the recording, never freed, shown to be the model (frozen)
  kFactTrainedTensor = 1u << 11,     // kept, with a gradient and optimizer state of its size: a trained tensor
  kFactKvCacheHeld = 1u << 12,       // inference: held from one decoding forward into the next
  kFactKvCacheGrowth = 1u << 13,     // inference: a chain of blocks at one site, each a constant step larger, replacing the last
  kFactInferenceInput = 1u << 14,    // inference: made by the code that calls the forwards, before them, read by them
  kFactNotedParameter = 1u << 15,    // the run's tensor list names it a parameter or buffer (docs/tensors.md)
  kFactNotedGradient = 1u << 16,     // ... a parameter's gradient
  kFactNotedOptimizerState = 1u << 17,  // ... the optimizer's state
};
constexpr int kFactCount = 18;
extern const char* const kFactNames[kFactCount];

enum class Lifetime : uint8_t {
  Any,
  WithinPhase,
  OutlivesPhase,
  CrossesIteration,
  WithinIteration,
  NeverFreed,
  HeldToEnd,  // never freed, or only after the run's last forward, backward and step, an iteration or more later
  AliveAtNextOptimizer,
  SpansBackward,
};

struct Rule {
  std::string name, category, evidence, origin;  // origin: "builtin" or the rules file
  int category_index = -1;
  // Conditions; empty/unset ones always hold.
  std::string frame_name_re, frame_file_re;
  Pattern frame_name, frame_file;
  bool has_frame_name = false, has_frame_file = false;
  uint8_t alloc_phases = 0xff;  // bit per Phase
  uint16_t free_phases = 0xffff;  // bit per Phase, bit 7 = never freed
  uint8_t stack_hints = 0xff;   // bit per Phase, bit 7 = no hint
  Lifetime lifetime = Lifetime::Any;
  std::vector<uint64_t> sizes;
  uint64_t min_bytes = 0, max_bytes = UINT64_MAX;
  int replaces_category = -1;
  int unlike_sizes_of = -1;  // size is not 1/4..4x that of any allocation of this category
  bool no_later_optimizer = false;
  uint32_t facts_any = 0;  // "inferred": at least one of these Fact bits
};

struct PhaseHint {
  Phase phase;
  std::string name_re, file_re;
  Pattern name, file;
  bool has_name = false, has_file = false;
  bool ignore = false;  // "phase": "ignore": the frame never decides (torch.compile's own frames)
  bool outer = false;   // "outer": true: frames inside this one cannot change its phase
};

class RuleSet {
 public:
  // Limits that keep rules from costing more than the input they read
  // (docs/attribution.md, docs/reliability.md "Time"): beyond them a rules
  // file is an input error naming the JSON path. Counts include the built-in
  // rules; a pattern's program size is RE2's instruction count, what
  // matching one byte can cost when RE2's automaton gives out.
  static constexpr size_t kMaxRules = 10000;
  static constexpr size_t kMaxHints = 1000;
  // Every phase span keeps its bytes per category: spans x categories.
  static constexpr size_t kMaxCategories = 256;
  static constexpr size_t kMaxPatternBytes = 4096;
  // x{n,m}: copies of x a repetition makes (nested counts multiply); large
  // counts make automata whose states cost that much per byte matched.
  static constexpr uint64_t kMaxRepeat = 100;
  static constexpr int64_t kMaxProgramSize = 250000;  // all patterns together
  // The rules shipped in rules/builtin.json (compiled in).
  static RuleSet builtin();
  // Adds a rules file's hints and rules ahead of the ones already loaded.
  // Throws InputError (file, JSON path) on a malformed file.
  void add_file(const std::string& path);
  void add_json(const std::string& text, const std::string& origin);

  std::vector<PhaseHint> hints;
  std::vector<Rule> rules;
  std::vector<std::string> categories;  // built-ins first, then rule-defined
  int category_index(const std::string& name);
  int64_t program_size = 0;  // of every pattern loaded, once a rules file is (kMaxProgramSize)
};

struct Allocation {
  uint64_t addr = 0;
  uint64_t requested = 0;
  StackId stack = 0;
  uint32_t pool = 0;               // index into DeviceReplay::pools: 0 the default pool, else a private one
  int64_t alloc_event = -1;        // -1: before the recorded history
  // Live until its free completes (free_completed; free_requested in inputs
  // without completions): INT64_MAX while alive at the end.
  int64_t free_event = INT64_MAX;
  int64_t free_requested_event = INT64_MAX;  // the user's free; -1: before the history
  // The user's free where the history has it, else the completion: what the
  // rules and the reports mean by "freed".
  int64_t user_free() const {
    return free_requested_event >= 0 && free_requested_event != INT64_MAX ? free_requested_event : free_event;
  }
  uint16_t category = 0;
  int16_t rule = -1;  // index into RuleSet::rules; -1 = no rule (unknown)
  uint32_t facts = 0;  // Fact bits
};


struct Attribution {
  std::vector<std::string> categories;  // names, indexable by Allocation::category
  std::vector<Allocation> allocations;
  std::vector<uint32_t> event_span;     // per event: index into spans
  std::vector<uint32_t> event_alloc;    // per event: the allocation it allocates or frees (UINT32_MAX: none)
  std::vector<PhaseSpan> spans;
  std::string phase_evidence;           // how phases were found
  std::string fact_evidence[kFactCount];  // what decided each inference in this run ("freed inside an
                                          // Optimizer.zero_grad annotation (3 allocations)"), but:
  PreTraceEvidence pre_trace;             // what decided the pre-trace inferences (facts 1 to 3)
  int iterations = 0;
  uint64_t allocs_without_frames = 0;
  // Allocations the run's tensor list names (Trace::tensors): (allocation,
  // the first tensor noted in it, the tensors noted in it), by allocation.
  struct Named {
    uint32_t allocation = 0, tensor = 0, tensors = 1;
  };
  std::vector<Named> named;
  std::vector<std::string> tensor_names;  // the tensor list's names, by tensor index
  const Named* named_of(uint32_t allocation) const;
  // An inference run with a KV cache: its forwards and the cache's growth
  // per generated token (0: allocated once, or no cache).
  int kv_cache_forwards = 0;
  int64_t kv_cache_per_token = 0;
  // Copies of parameters: the ratio of a parameter's bytes to its copy's
  // that the copy inference found (0: none), and with a tensor list, the
  // named parameters by their storage's bytes, so that a copy's row names
  // whose copies it holds (every parameter of the copy's size times the
  // ratio: the pattern of their names).
  uint64_t copy_ratio = 0;
  std::unordered_map<uint64_t, std::vector<uint32_t>> parameters_of_bytes;
  const std::vector<uint32_t>* copied_parameters(const Allocation& al) const;

  Phase phase_at(int64_t event) const;
  int iteration_at(int64_t event) const;
  // Requested bytes per category live right after each given event (-1:
  // before the first event). One sweep for all indices.
  std::vector<std::vector<int64_t>> categories_at(const std::vector<int64_t>& events) const;
  // Allocations live right after `event`.
  std::vector<uint32_t> live_at(int64_t event) const;
  int unknown_index() const;
};

Attribution attribute(const Trace& trace, const FrameTable& frames, const Device& dev, const DeviceReplay& replay,
                      const RuleSet& rules);

}  // namespace snapdiff
