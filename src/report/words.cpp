// The words of every finding and warning: the analysis gives a code and its
// numbers (snapdiff/view/report.hpp), this file says them, once, for every
// renderer.
#include <cctype>
#include <cstdio>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "report/format.hpp"
#include "report/text_util.hpp"
#include "snapdiff/model/frame_names.hpp"
#include "snapdiff/report/report.hpp"

namespace snapdiff {

namespace {

using detail::count_of;
using detail::with_commas;

std::string change_percent(int64_t delta, int64_t base) { return detail::change_percent(delta, base, 1, "0%", "new"); }

// Where in an iteration something happens, as a clause: "in the backward
// pass", "outside the forward, backward and optimizer step".
std::string phase_clause(Phase p) {
  switch (p) {
    case Phase::Init: return "while the model is built, before the first iteration";
    case Phase::Forward: return "in the forward pass";
    case Phase::Backward: return "in the backward pass";
    case Phase::Optimizer: return "in the optimizer step";
    case Phase::Other: return "outside the forward, backward and optimizer step";
    case Phase::PreTrace: return "before the recorded history";
  }
  return "";
}

std::string peak_words(const PeakFacts& f) {
  std::string m = "The peak, " + human_bytes(f.peak) + ", is reached";
  if (f.iteration > 0 && f.phase != Phase::PreTrace && f.phase != Phase::Init)
    m += " in iteration " + std::to_string(f.iteration) + (f.truncated ? " of the recorded window" : "") + ", " +
         phase_clause(f.phase);
  else m += " " + phase_clause(f.phase);
  bool first = true;
  for (const PeakFacts::Part& p : f.parts) {
    if (p.bytes <= 0) continue;
    m += (first ? ": " : ", ") + p.category + " " + human_bytes(p.bytes);
    first = false;
    if (p.kept_from_iteration > 0 && p.kept_from_iteration < f.iteration)
      m += " (kept from iteration " + std::to_string(p.kept_from_iteration) +
           ": gradients are not freed between iterations)";
    if (!p.kernel.empty())
      m += " (" + (p.kernel_bytes == p.bytes ? std::string("all of it") : human_bytes(p.kernel_bytes) + " of it") +
           " made for the kernel " + p.kernel + ")";
    if (p.forwards > 0)
      m += " (the KV cache of an inference run of " + std::to_string(p.forwards) + " forwards: " +
           (p.per_token > 0 ? "+" + human_bytes(p.per_token) + " per generated token for the whole batch"
                            : std::string("allocated once at its full length")) +
           "; --explain kv_cache)";
  }
  return m + ".";
}

std::string step_words(const OptimizerStepFacts& f) {
  std::string m = "The optimizer step of iteration " + std::to_string(f.iteration) + " rises " + human_bytes(f.rise) +
                  " above its start";
  if (f.new_state > 0) m += " (" + human_bytes(f.new_state) + " of it new optimizer state, created on the first step)";
  if (f.similar > 0)
    m += " (" + std::to_string(f.similar + 1) + " of the " + count_of(f.steps, "step") + " rise as much)";
  if (f.temporaries > 0) {
    m += ": " + human_bytes(f.temporaries) + " of optimizer temporaries live at its peak";
    if (f.gradients > 0 && f.temporaries * 10 >= f.gradients * 9)
      m += ", about one copy of all gradients (" + human_bytes(f.gradients) +
           ") — a multi-tensor (foreach) step materializes each stage for every parameter at once";
    else if (f.gradients > 0)
      m += " (" + std::to_string(int64_t(100.0 * double(f.temporaries) / double(f.gradients) + 0.5)) +
           "% of the gradients' size: the update works on a part of the parameters at a time)";
    if (!f.site.empty()) {
      m += "; largest site " + f.site;
      if (!f.site_callee.empty()) m += " in " + f.site_callee;
    }
  }
  return m + ".";
}

std::string unknown_words(const UnknownFacts& f) {
  std::string m = human_bytes(f.unknown) + " at the peak fits no rule";
  if (f.before_profiler > 0) {
    if (f.timeline_placed > 0)
      m += ": " + human_bytes(f.before_profiler) +
           " of it was allocated before the profiler started and is still alive, and PyTorch's memory timeline does "
           "not know it as tensors either (library workspaces and other buffers; the timeline placed the other " +
           human_bytes(f.timeline_placed) + " from before the profiler)";
    else
      m += ": " + human_bytes(f.before_profiler) +
           " of it was allocated before the profiler started and is still alive (typically parameters, optimizer "
           "state and library workspaces; a trace does not say which: join a snapshot of the run with --trace, or "
           "compare PyTorch's view with --memory-timeline)";
    m += f.unknown > f.before_profiler ? "; for the rest see UNKNOWN AT THE PEAK." : ".";
  } else {
    if (!f.kernel.empty())
      m += "; " + (f.kernel_bytes == f.unknown ? std::string("all of it") : human_bytes(f.kernel_bytes) + " of it") +
           " was made for the kernel " + f.kernel;
    m += "; see UNKNOWN AT THE PEAK for each allocation's frames, phase and lifetime.";
  }
  return m;
}

std::string iterations_words(int a, int b) {
  return a == b ? "iteration " + std::to_string(a) : "iterations " + std::to_string(a) + " to " + std::to_string(b);
}

std::string growth_site_words(const GrowthFacts::Site& s) {
  std::string m = s.count_per_iteration == 1
                      ? "one " + human_bytes(s.bytes_per_iteration) + " allocation"
                      : with_commas(s.count_per_iteration) + " allocations (" + human_bytes(s.bytes_per_iteration) +
                            " in all)";
  const Phase p = s.phase;
  m += p == Phase::Forward || p == Phase::Backward ? std::string(" made in each ") + phase_name(p)
       : p == Phase::Optimizer                      ? std::string(" made in each optimizer step")
                                                    : std::string(" made in each iteration");
  if (!s.model_frame.empty()) m += " at " + s.model_frame + ", called from " + s.site;
  else m += " at " + s.site;
  return m;
}

std::string growth_words(const GrowthFacts& f) {
  std::string m;
  if (f.measured && f.per_iteration > 0) m = "Memory grows " + human_bytes(f.per_iteration) + " per iteration";
  else if (f.measured) m = "Memory at the iterations' starts does not grow (" + human_delta(f.per_iteration) + " per iteration)";
  else m = "Memory is retained from iteration to iteration";
  if (f.measured)
    m += f.last_iteration == f.first_iteration + 1
             ? " (the change of allocated memory from the start of iteration " + std::to_string(f.first_iteration) +
                   " to that of iteration " + std::to_string(f.last_iteration) + ")"
             : " (the median change of allocated memory between the starts of iterations " +
                   std::to_string(f.first_iteration) + " to " + std::to_string(f.last_iteration) + ")";
  m += f.measured && f.per_iteration <= 0 ? ", but " : ": ";
  const size_t n = f.sites.size() + f.more_sites;
  if (n == 0) m += "no site keeps allocations from one iteration to the next";
  if (n > 1)
    m += std::to_string(n) + " sites keep allocations every iteration, " + human_bytes(f.retained_per_iteration) +
         " per iteration in all: ";
  for (size_t k = 0; k < f.sites.size(); ++k) {
    const GrowthFacts::Site& s = f.sites[k];
    if (k) m += k + 1 == f.sites.size() && f.more_sites == 0 ? "; and " : "; ";
    m += growth_site_words(s);
    if (n == 1)
      m += std::string(s.model_frame.empty() ? "" : ",") + (s.count_per_iteration == 1 ? " is never freed" : " are never freed");
    m += " (kept in " + iterations_words(f.judged_last - s.iterations + 1, f.judged_last) + ")";
  }
  if (f.more_sites > 0)
    m += "; and " + std::to_string(f.more_sites) + (f.more_sites == 1 ? " more site" : " more sites");
  m += ". An allocation counts as retained when it is still alive two iterations after the one that made it; ";
  m += f.unjudged == 1 ? "the last iteration's allocations cannot be judged yet"
                       : "the last " + std::to_string(f.unjudged) + " iterations' allocations cannot be judged yet";
  m += " (those of these sites never freed count as leaked). ";
  if (f.leaked_at_peak > 0) m += human_bytes(f.leaked_at_peak) + " of leaked memory is live at the peak.";
  else m += "None of it is live at the peak.";
  return m;
}

std::string diff_peak_words(const DiffPeakFacts& f) {
  const int64_t delta = f.b - f.a;
  return "The peak moves " + human_delta(delta) + " (" + change_percent(delta, f.a) + "): " + human_bytes(f.a) +
         " in A (iteration " + std::to_string(f.a_iteration) + ", " + phase_name(f.a_phase) + ") against " +
         human_bytes(f.b) + " in B (iteration " + std::to_string(f.b_iteration) + ", " + phase_name(f.b_phase) + ").";
}

std::string groups_words(const std::vector<DiffCategoryFacts::Group>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    const DiffCategoryFacts::Group& g = v[i];
    out += (i ? ", " : "") + human_delta(g.delta) + " at " + g.name;
    if (g.sites > 1) out += " (" + count_of(g.sites, "call path") + ")";
    out += g.all_new ? " [NEW]" : g.all_gone ? " [GONE]" : "";
  }
  return out;
}

std::string diff_category_words(const DiffCategoryFacts& f) {
  if (f.copies_unchanged)
    return f.category + " unchanged at the peak (" + human_bytes(f.a) + " in A, " + human_bytes(f.b) +
           " in B) while the parameters change: the copies of parameters (casts, transposes kept for the "
           "backward) are made in both runs.";
  std::string m = f.category + " " + human_delta(f.b - f.a) + " at the peak (" + human_bytes(f.a) + " in A, " +
                  human_bytes(f.b) + " in B)";
  if (f.parameters) {
    const double r = f.parameter_ratio;
    // A ratio is said only where it reads as one: both runs have parameter
    // tensors and it does not round to 0.00.
    const std::string tensors =
        " (" + count_of(f.a_tensors, "tensor") + " in A, " + std::to_string(f.b_tensors) + " in B)";
    if (f.a_tensors == 0 || f.b_tensors == 0) {
      m += std::string(": ") + (f.b_tensors == 0 ? "B" : "A") + " has no tensors known as parameters at its peak (" +
           std::to_string(f.b_tensors == 0 ? f.a_tensors : f.b_tensors) + (f.b_tensors == 0 ? " in A)" : " in B)");
    } else if (r < 0.005) {
      m += ": B's parameters take less than 1% of A's bytes" + tensors;
    } else {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.2f", r);
      m += ": B's parameters take " + std::string(buf) + "x A's bytes" + tensors;
      if (r > 0.4 && r < 0.6) m += " — B stores its weights in half the bytes per element (e.g. 1-byte FP8 instead of 2-byte bf16)";
      else if (r > 1.8 && r < 2.2) m += " — B stores its weights in twice the bytes per element (e.g. fp32 instead of bf16)";
    }
  }
  if (!f.mostly.empty()) m += "; mostly " + groups_words(f.mostly);
  if (!f.offset.empty()) m += "; partly offset by " + groups_words(f.offset);
  if (f.has_top_site)
    m += "; largest change " + human_delta(f.top_delta) + " at " + f.top_site +
         (f.top_new ? " [NEW]" : f.top_gone ? " [GONE]" : "");
  if (f.gradients_kept) m += " (gradients kept from earlier iterations)";
  return m + ".";
}

std::string diff_reserved_words(const DiffReservedFacts& f) {
  const int64_t dr = f.b_reserved - f.a_reserved, da = f.b_allocated - f.a_allocated;
  std::string m = "Reserved memory " + human_delta(dr) + " (" + change_percent(dr, f.a_reserved) + "): " +
                  human_bytes(f.a_reserved) + " at A's reserved peak against " + human_bytes(f.b_reserved) +
                  " at B's, while the allocated peak ";
  m += da == 0 ? "stays at " + human_bytes(f.a_allocated)
               : "moves " + human_delta(da) + " (" + human_bytes(f.a_allocated) + " in A, " + human_bytes(f.b_allocated) + " in B)";
  m += "; at each peak the cache holds " + human_bytes(f.a_free_cached) + " free in A (largest free block " +
       human_bytes(int64_t(f.a_largest_free)) + ") and " + human_bytes(f.b_free_cached) + " in B (largest " +
       human_bytes(int64_t(f.b_largest_free)) + ").";
  return m;
}

std::string diff_phase_words(const DiffPhaseFacts& f) {
  std::string name = phase_name(f.phase);
  if (!name.empty()) name[0] = char(std::toupper(static_cast<unsigned char>(name[0])));
  std::string m = name + " phase peak " + human_delta(f.b - f.a) + " (iteration " + std::to_string(f.iteration) + ": " +
                  human_bytes(f.a) + " in A, " + human_bytes(f.b) + " in B)";
  for (size_t i = 0; i < f.categories.size(); ++i) {
    const DiffPhaseFacts::Category& c = f.categories[i];
    m += (i == 0 ? ": mostly " : ", ") + c.name + " " + human_delta(c.b - c.a);
  }
  return m + ".";
}

// What kind of step a run takes, from its temporaries against its gradients.
std::string step_kind(int64_t temporaries, int64_t gradients) {
  if (gradients <= 0) return "";
  const double r = double(temporaries) / double(gradients);
  char buf[160];
  if (r >= 0.9)
    std::snprintf(buf, sizeof buf,
                  " (%.0f%% of its gradients: a multi-tensor/foreach step materializes each stage for every parameter at once)",
                  100 * r);
  else if (r > 0)
    std::snprintf(buf, sizeof buf, " (%.0f%% of its gradients: the update works on a part of the parameters at a time)",
                  100 * r);
  else
    std::snprintf(buf, sizeof buf, " (none: the update works in place)");
  return buf;
}

std::string diff_step_words(const DiffStepFacts& f) {
  return "Optimizer step transient " + human_delta(f.b_temporaries - f.a_temporaries) + ": A's largest step holds " +
         human_bytes(f.a_temporaries) + " of optimizer temporaries at its peak" +
         step_kind(f.a_temporaries, f.a_gradients) + "; B's " + human_bytes(f.b_temporaries) +
         step_kind(f.b_temporaries, f.b_gradients) + ".";
}

// Why a history starts mid-run, from the evidence the analysis decided on.
std::string history_cut_words(const HistoryTruncatedFacts& f) {
  const TruncationEvidence& e = f.evidence;
  switch (f.kind) {
    case Truncation::LateStart:
      return "recording started after memory was already in use (the model or optimizer were built before "
             "torch.cuda.memory._record_memory_history was called)";
    case Truncation::Wrapped:
      if (e.max_entries >= 0)
        return "the recorded history starts mid-run: the ring buffer of max_entries=" +
               with_commas(uint64_t(e.max_entries)) + " wrapped and dropped the oldest entries";
      return "the recorded history starts mid-run: the ring buffer wrapped and dropped the oldest entries (the file "
             "does not record max_entries, but its " +
             count_of(e.entries, "entry", "entries") + (e.entries == 1 ? " is" : " are") + " a round number, as a max_entries is)";
    case Truncation::None:  // truncated without a kind told: say so
    case Truncation::Unknown: break;
  }
  std::string m = "the recorded history starts mid-run, and the file cannot tell whether recording started late or "
                  "the ring buffer wrapped (" + count_of(e.entries, "entry", "entries");
  if (e.max_entries >= 0) m += ", max_entries=" + with_commas(uint64_t(e.max_entries));
  if (e.framed_early_blocks > 0)
    m += "; " + count_of(e.framed_early_blocks, "block") +
         " allocated before the first event carry stacks, so they were allocated while recording, yet the "
         "count is not a round max_entries";
  if (e.dropped_mid_history > 0)
    m += "; " + count_of(e.dropped_mid_history, "free") + " of blocks the history had already seen freed";
  return m + ")";
}

// How to record the whole run, for each kind.
const char* history_remedy(Truncation kind) {
  switch (kind) {
    case Truncation::LateStart: return ". Call _record_memory_history before the model is built to see it";
    case Truncation::Wrapped: return ". Record with a larger max_entries to see it";
    case Truncation::None:
    case Truncation::Unknown: break;
  }
  return ". Call _record_memory_history before the model is built, with a max_entries above the run's entries, to "
         "see it";
}

std::string history_truncated_words(const HistoryTruncatedFacts& f) {
  return history_cut_words(f) + ". " + human_bytes(f.requested) + " in " + count_of(f.allocations, "allocation") + " and " + human_bytes(f.reserved) +
         " of segments were live before the first event. They are rebuilt from later frees and the "
         "dump, so the requested peak is exact for the recorded window; a higher peak before the window "
         "cannot be seen" +
         (f.allocated_estimated ? ", and block sizes of some early allocations are estimated, so the "
                                  "allocated peak may be off by their rounding"
                                : "") +
         history_remedy(f.kind);
}

// The counters that differ, replay - dump: "+1.0 MiB allocated, +2.0 MiB active".
std::string counter_differences(const Counters& replay, const Counters& dump) {
  const std::pair<const char*, int64_t> deltas[] = {{"requested", replay.requested - dump.requested},
                                                    {"allocated", replay.allocated - dump.allocated},
                                                    {"active", replay.active - dump.active},
                                                    {"reserved", replay.reserved - dump.reserved}};
  std::string out;
  for (const auto& [name, delta] : deltas)
    if (delta != 0) out += (out.empty() ? "" : ", ") + human_delta(delta) + " " + name;
  return out;
}

std::string end_state_words(const EndStateFacts& f) {
  if (f.truncated) {
    const std::string by = counter_differences(f.replay, f.dump);
    return "replayed end state differs from the dump" + (by.empty() ? std::string() : " by " + by) +
           " (expected with a truncated history)";
  }
  auto counters = [](const Counters& c) {
    return "requested " + std::to_string(c.requested) + ", allocated " + std::to_string(c.allocated) + ", active " +
           std::to_string(c.active) + ", reserved " + std::to_string(c.reserved);
  };
  return "replayed end state (" + counters(f.replay) + ") differs from the dumped segments (" + counters(f.dump) + ")";
}

// The INPUT line's words for why a history is truncated.
const char* truncation_reason(Truncation t) {
  switch (t) {
    case Truncation::LateStart: return "recording started late";
    case Truncation::Wrapped: return "ring buffer wrapped";
    case Truncation::None:  // truncated without a kind told
    case Truncation::Unknown: break;
  }
  return "cannot tell whether the recording started late or the ring buffer wrapped";
}

std::string oom_words(const OomFacts& f) {
  std::string m = "the run hit " + count_of(f.errors, "out-of-memory error");
  if (f.has_first)
    m += "; the first asked for " + human_bytes(int64_t(f.first_size)) + " while CUDA reported " +
         human_bytes(int64_t(f.first_free)) + " free on the device";
  return m;
}

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

}  // namespace

namespace detail {

std::string history_words(const Report& r) {
  if (!r.has_history)
    return r.activity.present ? "none: the trace holds no memory events (recorded without profile_memory=True)" : "none (dump-time state only)";
  if (!r.history_truncated) return "complete";
  if (r.profiler_trace) return "the profiled window (allocations made before it: see WARNINGS)";
  // Truncated devices that disagree on why are named one by one (the
  // report's own kind is then unknown).
  auto kind = [](Truncation t) { return t == Truncation::None ? Truncation::Unknown : t; };
  std::vector<const DeviceView*> cut;
  for (const DeviceView& d : r.devices)
    if (d.truncated) cut.push_back(&d);
  bool agree = true;
  for (const DeviceView* d : cut) agree = agree && kind(d->truncation) == kind(cut.front()->truncation);
  if (agree) return std::string("truncated (") + truncation_reason(r.truncation) + ")";
  std::string s = "truncated (";
  for (size_t i = 0; i < cut.size(); ++i)
    s += (i ? "; cuda:" : "cuda:") + std::to_string(cut[i]->device) + ": " + truncation_reason(cut[i]->truncation);
  return s + ")";
}

// What decided a pre-trace inference (0 parameters, 1 gradients, 2 optimizer
// states): the blocks taken, their MiB, and why.
std::string pre_trace_words(const PreTraceEvidence& e, int which) {
  auto mib = [](int64_t b) { return std::to_string((b + (1 << 19)) >> 20) + " MiB"; };
  using From = PreTraceEvidence::StatesFrom;
  std::string from = e.states_from == From::RecordingCreates ? "the recording creates the optimizer state"
                     : e.states_from == From::OptimizerClass ? "the optimizer class (Optimizer.step annotation)"
                     : e.states_from == From::GradientSizes  ? "the blocks of each gradient's size"
                     : e.states_from == From::SizeClasses    ? "the blocks of each size"
                                                             : "";
  if (e.grouped) {
    from += from.empty() ? "" : "; ";
    from += "parameters and states in groups of " + std::to_string(e.states + 1) +
            " blocks of one size, the parameters adding up to an iteration's gradients";
  }
  const uint64_t n = e.blocks[which];
  if (which == 0)
    return std::to_string(n) + " blocks (" + mib(e.bytes[0]) + ") " +
           (e.gradients > 0 ? "size-matched to the " + std::to_string(e.gradients) +
                                  " gradients one iteration makes (and the model's buffers of those sizes)"
            : e.steps       ? "the first of each parameter-sized group of " + std::to_string(e.states + 2) +
                            " blocks (parameter, gradient, states; " + from + ")"
                            : "never freed, with no training step recorded to match");
  if (which == 1)
    return std::to_string(n) + " blocks (" + mib(e.bytes[1]) +
           ") kept as gradients: none is made in the recording, one per parameter";
  return std::to_string(n) + " blocks (" + mib(e.bytes[2]) + "): " + std::to_string(e.states) +
         " optimizer states per parameter (" + from + "), size-matched to the parameters";
}

// Why no rule placed an allocation (rule "(none)"), from when it lived.
std::string no_rule_words(const ExplainItem& it) {
  const bool freed = it.free_event != INT64_MAX;
  std::string s = "no rule matched: allocated ";
  if (it.alloc_event < 0 && !freed) {
    return "no rule matched: held since before recording, never freed in the window: model weights, buffers or "
           "caches allocated before recording started; its size matches no gradient or optimizer state the "
           "recording shows, and nothing shows it is the model (counted apart as unknown_held_from_before)";
  } else if (it.alloc_event < 0) {
    s += "before recording started, freed in ";
    s += phase_name(it.free_phase);
    s += ", and its size matches no gradient or optimizer state the recording shows";
  } else {
    s += "in ";
    s += phase_name(it.alloc_phase);
    s += freed ? ", freed in " : ", never freed";
    if (freed) s += phase_name(it.free_phase);
  }
  return s;
}

std::string explain_evidence(const ExplainItem& it) {
  std::string s = it.evidence.empty() && it.rule == "(none)" ? no_rule_words(it) : it.evidence;
  for (const InferredEvidence& f : it.inferred) {
    s += "; inferred (";
    s += f.fact;
    s += "): ";
    s += f.pre_trace >= 0 ? pre_trace_words(f.facts, f.pre_trace) : f.words;
  }
  return s;
}

}  // namespace detail

std::vector<std::pair<std::string, std::string>> detail::settings_rows(const AllocatorSettings& s) {
  std::vector<std::pair<std::string, std::string>> out;
  if (!s.present) return out;
  if (s.raw.empty()) {  // a .snap: the parsed keys only
    out.emplace_back("expandable_segments", s.expandable_segments ? "true" : "false");
    out.emplace_back("max_split_size", s.max_split_size < 0 ? "unlimited" : std::to_string(s.max_split_size));
  }
  for (const auto& kv : s.raw) {
    std::string v = kv.second;
    // PyTorch writes SIZE_MAX for an unlimited max_split_size.
    if (kv.first == "max_split_size" && (s.max_split_size < 0 || v == "18446744073709551615" || v == "-1")) v = "unlimited";
    if (v.empty()) v = "\"\"";
    // Floats as the reader wrote them ("0.800000"): without trailing zeros.
    if (const size_t dot = v.find('.'); dot != std::string::npos && dot > 0 &&
        v.find_first_not_of("0123456789.-") == std::string::npos) {
      while (v.back() == '0') v.pop_back();
      if (v.back() == '.') v.pop_back();
    }
    out.emplace_back(kv.first, v);
  }
  return out;
}

std::string detail::settings_text(const AllocatorSettings& s) {
  if (!s.present) return "not recorded";
  std::string out;
  for (const auto& kv : settings_rows(s)) out += (out.empty() ? "" : ", ") + kv.first + " " + kv.second;
  return out;
}

std::string finding_text(const Finding& f) {
  return std::visit(Overloaded{[](const PeakFacts& x) { return peak_words(x); },
                               [](const OptimizerStepFacts& x) { return step_words(x); },
                               [](const UnknownFacts& x) { return unknown_words(x); },
                               [](const GrowthFacts& x) { return growth_words(x); },
                               [](const DiffPeakFacts& x) { return diff_peak_words(x); },
                               [](const DiffCategoryFacts& x) { return diff_category_words(x); },
                               [](const DiffStepFacts& x) { return diff_step_words(x); },
                               [](const DiffReservedFacts& x) { return diff_reserved_words(x); },
                               [](const DiffPhaseFacts& x) { return diff_phase_words(x); }},
                    f.facts);
}

std::string warning_text(const Warning& w) {
  std::string m = "device " + std::to_string(w.device) + ": ";
  switch (w.code) {
    case Code::ProfilerWindow:
      return m + "the profiler started with " +
             human_bytes(std::get<ProfilerWindowFacts>(w.facts).allocated_before) +
             " already allocated (the model, optimizer state, workspaces and the like): " +
             "allocations freed inside the trace are known by their frees; the rest is one row, "
             "'<allocated before the profiler started>', whose sites the trace cannot tell. The peak is exact "
             "for the profiled window (= the largest Total Allocated the trace reports); a higher peak before "
             "it cannot be seen";
    case Code::HistoryTruncated: return m + history_truncated_words(std::get<HistoryTruncatedFacts>(w.facts));
    case Code::NoHistory:
      return m +
             "the snapshot has no allocation history (recorded without _record_memory_history, or a bare segment "
             "list): the figures are the dump-time state only, not a peak";
    case Code::EndStateMismatch: return m + end_state_words(std::get<EndStateFacts>(w.facts));
    case Code::ReplayInconsistent: {
      const InconsistentFacts& f = std::get<InconsistentFacts>(w.facts);
      return m + count_of(f.events, "event") +
             (f.reported_totals ? (f.events == 1 ? " disagrees" : " disagree") + std::string(" with the totals the trace reports")
                                : std::string(" did not fit the replayed allocator layout")) +
             (f.first.empty() ? std::string() : " (first: " + f.first + ")");
    }
    case Code::Oom: return m + oom_words(std::get<OomFacts>(w.facts));
    case Code::NoTimestamps: return m + "events carry no time_us (PyTorch < 2.2): times are event indices";
    case Code::OutsideAllocator: {
      const OutsideFacts& f = std::get<OutsideFacts>(w.facts);
      const std::string who =
          f.pid != 0 ? (f.holder == "PyTorch" ? "the PyTorch allocator of process " + std::to_string(f.pid)
                                              : f.holder + " of process " + std::to_string(f.pid))
                     : f.holder;
      return m + who + " holds " + human_bytes(f.bytes) + " outside the allocator at the peak: " +
             (f.device_peak > 0 ? detail::compact_percent(double(f.bytes) / double(f.device_peak)) : std::string("all")) +
             " of the device peak (" + human_bytes(f.device_peak) + ")";
    }
    default: return m + std::string(code_name(w.code));
  }
}

}  // namespace snapdiff
