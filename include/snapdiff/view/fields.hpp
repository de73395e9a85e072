// snapdiff/view/fields.hpp — each view struct's JSON fields, declared once.
//
// fields(v, x) names every field of x in the order the JSON report writes it
// (schemas/report.schema.json), with its JSON key and how it is coded. The
// same list drives the JSON writer (src/report/json_write.hpp), the reader
// (src/report/report_read.cpp) and the tests that hold the schema and the
// read-back view to it (tests/view_fields_test.cpp). x is the struct, or the
// const struct when writing. A visitor V offers:
//   v(key, m)                   a member: a number, bool or string; Phase,
//                               Truncation, Code, OomCause by name; a struct
//                               (its own fields()), a vector of them, an
//                               optional (null when empty)
//   v(key, m, list)             the same with another field list for the struct(s)
//   v.null_if(key, m, none)     m, or null when m == none (kNoTime: v.time(key, m))
//   v.null_below(key, m, min, none)  m, or null when m < min (reading: null gives none)
//   v.null_unless(key, ok, m)   m, or null when !ok (reading: m only when not null)
//   v.flag_null(key, flag, m)   m, or null when !flag (reading: flag = not null)
//   v.group(key, fn)            the fields fn declares, written as one object
//   v.group_or_null(key, flag, fn)  that object, or null when !flag
//   v.when(flag, key, fn)       keys written only when flag (reading: flag = key present)
//   v.computed(key, value)      written, not read back (a constant, a sum)
//   v.derived(key, fn, msg)     written from other fields; reading checks it agrees (else msg)
//   v.categories(key, m)        bytes keyed by the category names in scope
//   v.nonzero_categories(key, m)  the same, only the categories not 0 (reading: 0 for those absent)
//   v.category(key, index, name)  a category by name (null: index -1)
//   v.rule(key, has, name)      a rule by name (null: no rule)
//   v.words(key, x)             the report layer's words about x (write only)
//   v.names_ahead(key, names)   the category names in scope from here on: the
//                               keys of the object at key (read ahead of it)
//   v.first_then(key, list)     the first element's fields here, then key: the others
//   v.special(key, Tag{}, x)    a coding of its own, named by a tag below
#pragma once

#include <cstdint>
#include <optional>
#include <type_traits>
#include <vector>

#include "snapdiff/view/report.hpp"

namespace snapdiff {

// Tags of the codings the visitors implement one by one.
namespace view {
struct History {};      // "none" / "truncated" / "complete" from (has, truncated)
struct SizeClass {};    // FreeSizeClass::label, one of the size classes analyze() counts
struct PeakEvent {};    // the event that set a device's peak, or null
struct Pair {};         // two ints as [first, last], or null (Growth::judged_*)
struct OutsidePid {};   // a process id, null for 0
struct Caller {};       // OutsideRow: "context" or memory_caller_name()
struct Facts {};        // a finding's or warning's facts, by its code (facts_json.cpp)
struct TopPeak {};      // the peak device's peak again, with its "device" (zeros without devices)
struct TopDevice {};    // the peak device's categories, phases, --at and --window again (write only)
struct DeviceNumbers {};  // the devices' numbers (reading: checked against $.devices)
struct PytorchCategories {};  // TimelineMoment: bytes keyed by MemoryTimeline::kCategoryNames
struct Recorded {};     // the allocator settings as recorded, key -> value
struct FrameName {};    // a frame's name, or "<1234 frames elided>" for FrameRef::elided
struct FrameLabel {};
struct Evidence {};     // an explained allocation's evidence and its inferences' words (read back: all as evidence)   // a frame's label, or "<1,234 frames elided>" for FrameRef::elided

// What a visitor tells apart: a list of values, a value that may be absent.
template <class T>
struct IsVector : std::false_type {};
template <class T>
struct IsVector<std::vector<T>> : std::true_type {};
template <class T>
struct IsOptional : std::false_type {};
template <class T>
struct IsOptional<std::optional<T>> : std::true_type {};
}  // namespace view

// The field list of T, for a visitor and a T or const T.
#define SNAPDIFF_FIELDS(T) \
  template <class V, class S> \
  std::enable_if_t<std::is_same_v<std::remove_const_t<S>, T>> fields(V& v, S& x)

SNAPDIFF_FIELDS(Counters) {
  v("requested_bytes", x.requested);
  v("allocated_bytes", x.allocated);
  v("reserved_bytes", x.reserved);
  v("active_bytes", x.active);
}

SNAPDIFF_FIELDS(TruncationEvidence) {
  v("entries", x.entries);
  v.null_if("max_entries", x.max_entries, int64_t(-1));
  v("entries_round", x.entries_round);
  v("head_orphan_free", x.head_orphan_free);
  v("framed_early_blocks", x.framed_early_blocks);
  v("dropped_mid_history", x.dropped_mid_history);
}

SNAPDIFF_FIELDS(PeakPoint) {
  v("bytes", x.bytes);
  v("event_index", x.event_index);
  v.time("time_us", x.time_us);
}

// A frame; its label (how the text report writes it) where the visitor's
// `labels` is on (user frames, call sites), not in stacks of kernels and OOMs.
SNAPDIFF_FIELDS(FrameRef) {
  v.special("name", view::FrameName{}, x);
  v("file", x.file);
  v.null_if("line", x.line, kNoLine);
  bool label = v.labels;
  v.when(label, "label", [&] { v.special("label", view::FrameLabel{}, x); });
}
// A list of frames written without labels.
struct Unlabelled {
  template <class V, class S>
  void operator()(V& v, S& x) const {
    const bool was = v.labels;
    v.labels = false;
    fields(v, x);
    v.labels = was;
  }
};

// How a site row's stack is written: {"path": [labels], "callee": label or null}.
template <class V, class S>
void site_path_fields(V& v, S& s) {
  v("path", s.path);
  v.null_if("callee", s.callee, std::string());
}

SNAPDIFF_FIELDS(IterationStart) {
  v("iteration", x.iteration);
  v("event_index", x.event_index);
  v.time("time_us", x.time_us);
  v("allocated_bytes", x.allocated);
  v("requested_bytes", x.requested);
}

SNAPDIFF_FIELDS(RetainedSite) {
  v("site", x.site);
  v.null_if("model_frame", x.model_frame, std::string());
  v("phase", x.phase);
  v("bytes_per_iteration", x.bytes_per_iteration);
  v("count_per_iteration", x.count_per_iteration);
  v("iterations", x.iterations);
  v("leaked_allocations", x.leaked_allocations);
  v("leaked_at_peak_bytes", x.leaked_at_peak);
}

SNAPDIFF_FIELDS(Growth) {
  v("iteration_starts", x.starts);
  v.computed("method", "median of the changes of allocated bytes between the starts of iterations 2..N");
  v.flag_null("per_iteration_bytes", x.measured, x.per_iteration);
  v("deltas", x.deltas);
  v.special("judged_iterations", view::Pair{}, x);
  v("unjudged_iterations", x.unjudged);
  v("retained_per_iteration_bytes", x.retained_per_iteration);
  v("retained_count_per_iteration", x.retained_count);
  v("leaked_at_peak_bytes", x.leaked_at_peak);
  v("sites", x.sites);
}

SNAPDIFF_FIELDS(PhaseSpan) {
  v("iteration", x.iteration);
  v("phase", x.phase);
  v("start_event", x.start_event);
  v("end_event", x.end_event);
  v("start_requested_bytes", x.start_requested);
  v("peak_event", x.peak_event);
  v("peak_requested_bytes", x.peak_requested);
  v("end_requested_bytes", x.end_requested);
  v("start_allocated_bytes", x.start_allocated);
  v("end_allocated_bytes", x.end_allocated);
  v("start_reserved_bytes", x.start_reserved);
  v("end_reserved_bytes", x.end_reserved);
  v.categories("categories", x.categories);
}

// --at: the replay's counters then, and the moment.
SNAPDIFF_FIELDS(MomentView) {
  fields(v, x.counters);
  v("spec", x.spec);
  v("event_index", x.event_index);
  v.time("time_us", x.time_us);
  v("phase", x.phase);
  v("iteration", x.iteration);
}

SNAPDIFF_FIELDS(WindowView) {
  v("spec", x.spec);
  v("first_event", x.first_event);
  v("last_event", x.last_event);
  v.time("first_time_us", x.first_time_us);
  v.time("last_time_us", x.last_time_us);
}

// A kernel launch (frames innermost first, like every `stack` in the report).
SNAPDIFF_FIELDS(KernelRef) {
  v("name", x.name);
  v.time("time_us", x.time_us);
  v("stream", x.stream);
  v("display", x.display);
  v.words("scope", x);
  v("stack", x.stack, Unlabelled{});
}

// A site row live at the peak (or unknown at it).
SNAPDIFF_FIELDS(SiteRow) {
  v("requested_bytes", x.requested_bytes);
  v("block_bytes", x.block_bytes);
  v("count", x.count);
  v.category("category", x.category, x.category_name);
  v.rule("rule", x.has_rule, x.rule_name);
  v("alloc_phase", x.alloc_phase);
  v("alloc_iteration", x.alloc_iteration);
  v.flag_null("free_phase", x.freed, x.free_phase);
  v.null_unless("free_iteration", x.freed, x.free_iteration);
  v("user_frame", x.site.user);
  v("stack", x.site.stack);
  site_path_fields(v, x.site);
  v("named_tensors", x.named_tensors);
  v("tensors", x.tensors);
  v("copies", x.copies);
}
// A site row at an OOM: no phases, frames without labels.
struct OomSite {
  template <class V, class S>
  void operator()(V& v, S& x) const {
    v("requested_bytes", x.requested_bytes);
    v("block_bytes", x.block_bytes);
    v("count", x.count);
    v.category("category", x.category, x.category_name);
    v.rule("rule", x.has_rule, x.rule_name);
    v("user_frame", x.site.user, Unlabelled{});
    v("stack", x.site.stack, Unlabelled{});
    site_path_fields(v, x.site);
  }
};
// The rows beyond the shown ones, summed.
struct OtherSites {
  template <class V, class S>
  void operator()(V& v, S& x) const {
    v("requested_bytes", x.requested_bytes);
    v("block_bytes", x.block_bytes);
    v("count", x.count);
  }
};

SNAPDIFF_FIELDS(GradientSize) {
  v("tensor_bytes", x.tensor_bytes);
  v("count", x.count);
  v("requested_bytes", x.requested_bytes);
}

// ---- Op and kernel rows (profiler traces, kernel recordings) ---------------

// An op or kernel row. By op: "op" is the op; by kernel: the op holding most
// of its bytes; kernels only (no ops): null, and "site" the row's site last.
struct OpRowFields {
  enum Kind { ByOp, ByKernel, KernelsOnly } kind = ByOp;
  template <class V, class S>
  void operator()(V& v, S& x) const {
    if (kind == ByOp) v.null_if("op", x.op, std::string());
    else if (kind == ByKernel) v.null_if("op", x.other, std::string());
    else v.computed("op", nullptr);
    v.null_if("kernel", x.kernel, std::string());
    v("requested_bytes", x.bytes);
    v("count", x.count);
    v.category("category", x.category, x.category_name);
    v("python_frame", x.python_frame);
    v.null_if("caller", x.caller, std::string());
    v("stack", x.stack_frames, Unlabelled{});
    bool site = kind == KernelsOnly;  // in the kernels-only rows of the shared schema
    v.when(site, "site", [&] { v.null_if("site", x.other, std::string()); });
  }
};
// The rows beyond the shown ones, summed.
struct OpTotal {
  template <class V, class S>
  void operator()(V& v, S& x) const {
    v("requested_bytes", x.bytes);
    v("count", x.count);
  }
};

SNAPDIFF_FIELDS(KernelCoverage) {
  v("allocations", x.allocations);
  v("allocations_with_kernel", x.with_kernel);
  v.computed("allocations_percent", x.allocations ? 100.0 * double(x.with_kernel) / double(x.allocations) : 0.0);
  v("requested_bytes", x.bytes);
  v("requested_bytes_with_kernel", x.bytes_with_kernel);
  v.computed("requested_bytes_percent", x.bytes ? 100.0 * double(x.bytes_with_kernel) / double(x.bytes) : 0.0);
}

// A device's op and kernel rows (keys of the device): inputs with ops, or
// inputs with kernel launches and no ops (by_kernel and its coverage alone).
struct DeviceOps {
  template <class V, class S>
  void operator()(V& v, S& x) const {
    v.when(x.kernels_only, "kernel_coverage", [&] {
      v("by_kernel", x.by_kernel, OpRowFields{OpRowFields::KernelsOnly});
      v("by_kernel_other", x.other_kernels, OpTotal{});
      v("by_kernel_rows", x.kernel_rows);
      v.when(x.kernel_coverage.present, "kernel_coverage", [&] { v("kernel_coverage", x.kernel_coverage); });
    });
    v.when(x.has_ops, "by_op", [&] {
      v("by_op", x.by_op, OpRowFields{OpRowFields::ByOp});
      v("by_op_other", x.other_ops, OpTotal{});
      v("by_kernel", x.by_kernel, OpRowFields{OpRowFields::ByKernel});
      v("by_kernel_other", x.other_kernels, OpTotal{});
      v("by_op_rows", x.ops_rows);
      v("by_kernel_rows", x.kernel_rows);
    });
  }
};

// ---- --memory-timeline -----------------------------------------------------

// A moment of the comparison; `raw`: the raw export (with the bytes before the trace).
struct TimelineMomentFields {
  bool raw = false;
  template <class V, class S>
  void operator()(V& v, S& x) const {
    v("label", x.label);
    v.time("time_us", x.time_us);
    v("event_index", x.event_index);
    v("phase", x.phase);
    v("iteration", x.iteration);
    v.special("pytorch_categories", view::PytorchCategories{}, x.pytorch);
    v("pytorch_total_bytes", x.pytorch_total);
    v.categories("snapdiff_categories", x.snapdiff);
    v("snapdiff_total_bytes", x.snapdiff_total);
    v("unknown_bytes", x.unknown);
    v("placed_bytes", x.placed);
    v("before_profiler_bytes", x.before_profiler);
    bool pre_trace = raw;
    v.when(pre_trace, "pre_trace_live_bytes", [&] {
      v("pre_trace_live_bytes", x.pre_trace_live);
      v.special("pre_trace_tensors", view::PytorchCategories{}, x.pre_trace_tensors);
    });
    v.nonzero_categories("unknown_by_category", x.unknown_by_category);
    v("placements", x.placements, OpRowFields{OpRowFields::ByOp});
    v("allocations_matched", x.allocations_matched);
    v("allocations", x.allocations);
  }
};

// The comparison; its categories are those of its device among `devices`.
struct TimelineFields {
  const std::vector<DeviceView>* devices = nullptr;
  template <class V, class S>
  void operator()(V& v, S& x) const {
    v("name", x.name);
    v("raw", x.raw);
    v("device", x.device);
    v("pytorch_peak_bytes", x.pytorch_peak);
    v.time("pytorch_peak_time_us", x.pytorch_peak_time_us);
    v("method", x.method);
    const std::vector<std::string>* was = v.names;
    v.names = nullptr;
    if (devices)
      for (const DeviceView& d : *devices)
        if (d.device == x.device) v.names = &d.category_names;
    v("moments", x.moments, TimelineMomentFields{x.raw});
    v.names = was;
  }
};

// ---- The first OOM of each device ------------------------------------------

SNAPDIFF_FIELDS(OomView) {
  v("device", x.device);
  v("errors", x.errors);
  v("event_index", x.event_index);
  v.time("time_us", x.time_us);
  v.time("time_since_first_event_us", x.since_first_event_us);
  v("phase", x.phase);
  v("iteration", x.iteration);
  v("stream", x.stream);
  v("user_frame", x.user_frame);
  v("stack", x.site.stack, Unlabelled{});
  v("requested_bytes", x.request);
  v("segment_bytes", x.segment_size);
  v("expandable_segments", x.expandable);
  v("device_free_bytes", x.device_free);
  v.null_if("device_total_bytes", x.device_total, uint64_t(0));
  v.null_if("device_free_sample", x.free_sample, std::string());
  v.group("allocator", [&] {
    v("reserved_bytes", x.held.reserved);
    v("allocated_bytes", x.held.allocated);
    v("active_bytes", x.held.active);
    v("requested_bytes", x.held.requested);
    v("max_reserved_bytes", x.max_reserved);
    v("free_cached_bytes", x.free_cached);
    v("free_blocks", x.free_blocks);
    v("largest_free_block_bytes", x.largest_free_block);
    v("usable_free_bytes", x.stream_free);
    v("usable_free_blocks", x.stream_free_blocks);
    v("usable_largest_free_block_bytes", x.stream_largest_free);
    v("pending_free_bytes", x.pending_free);
  });
  v("cause", x.cause);
  v.group_or_null("cap", x.capped, [&] {
    v.null_below("at_least_bytes", x.cap_at_least, int64_t(1), int64_t(0));
    v("below_bytes", x.cap_below);
  });
  v.null_below("outside_allocator_bytes", x.others, int64_t(0), int64_t(-1));
  v.group("expandable", [&] {
    v("need_bytes", x.expandable_need);
    v("room_bytes", x.expandable_room);
    v("fits", x.expandable_fits);
  });
  v.group_or_null("whatif", x.whatif_run, [&] {
    v("reproduced", x.whatif_reproduced);
    v("tried", x.whatif_tried);
    v("fit", x.whatif_fit);
  });
  v.words("explanation", x);
  v.group("live", [&] {
    v.names_ahead("categories", x.category_names);
    v("allocations", x.live_allocations);
    v("requested_bytes", x.live_requested);
    v.categories("categories", x.categories);
    v.categories("category_allocations", x.category_allocations);
    v("sites", x.sites, OomSite{});
    v("other", x.other_sites, OtherSites{});
  });
}

SNAPDIFF_FIELDS(FreeSizeClass) {
  v.special("class", view::SizeClass{}, x);
  v("blocks", x.blocks);
  v("bytes", x.bytes);
}

SNAPDIFF_FIELDS(Fragmentation) {
  v("free_by_size", x.classes);
  v("reserved_bytes", x.reserved);
  v("allocated_bytes", x.allocated);
  v("requested_bytes", x.requested);
  v("free_cached_bytes", x.free_cached);
  v("pending_free_bytes", x.pending_free);
  v("pending_free_requested_bytes", x.pending_free_requested);
  v("internal_bytes", x.internal);
  v("free_blocks", x.free_blocks);
  v("largest_free_block_bytes", x.largest_free_block);
  v("too_small_threshold_bytes", x.too_small_threshold);
  v("too_small_bytes", x.too_small_bytes);
}

SNAPDIFF_FIELDS(EndStateCheck) {
  v("have_dump", x.have_dump);
  v.derived("matches", [&] { return x.matches(); }, "disagrees with the counters");
  v("replay", x.replay);
  v("dump", x.dump);
  v("replay_segments", x.replay_segments);
  v("dump_segments", x.dump_segments);
}

// A memory pool at the end: the default pool (0, 0), then the private ones
// (CUDA graphs, torch.cuda.MemPool).
SNAPDIFF_FIELDS(PoolUsage) {
  v("id", x.id);
  v.computed("private", x.id[0] != 0 || x.id[1] != 0);
  v("segments", x.segments);
  v("reserved_bytes", x.reserved);
  v("allocated_bytes", x.allocated);
}

SNAPDIFF_FIELDS(DeviceMemoryRow) {
  v("device", x.device);
  v("label", x.label);
  v.time("time_us", x.time_us);
  v.time("time_since_first_event_us", x.since_first_event_us);
  v("free_bytes", x.free_bytes);
  v("total_bytes", x.total_bytes);
  v("used_bytes", x.used_bytes);
  v("reserved_bytes", x.reserved_bytes);
  v("outside_bytes", x.outside_bytes);
}

SNAPDIFF_FIELDS(TraceJoinDevice) {
  v("device", x.device);
  v("method", x.method);
  v("offset_us", x.offset_us);
  v("offset_spread_us", x.offset_spread_us);
  v("trace_allocations", x.trace_allocs);
  v("snapshot_allocations", x.snapshot_allocs);
  v("in_window", x.in_window);
  v("matched", x.matched);
  v("with_op", x.with_op);
}

SNAPDIFF_FIELDS(TraceJoin) {
  v("trace", x.trace_name);
  v("ops", x.ops);
  v("kernels", x.kernels);
  v("devices", x.devices);
}

SNAPDIFF_FIELDS(KernelJoin) {
  v("recording", x.recording_name);
  v("pid", x.pid);
  v("processes", x.processes);
  v("segment_events", x.segment_events);
  v("matched_segments", x.matched_segments);
  v("dump_segments", x.dump_segments);
  v("dump_segments_found", x.dump_segments_found);
  v("offset_measured", x.offset_measured);
  v("offset_us", x.offset_us);
  v("offset_spread_us", x.offset_spread_us);
  v("kernels", x.kernels);
  v("driver_memory_events", x.driver_memory_events);
  v("samples", x.samples);
  v("allocations", x.allocations);
  v.time("recording_first_us", x.recording_first_us);
  v("allocations_before_kernels", x.allocations_before_kernels);
  v("allocations_with_kernel", x.allocations_with_kernel);
}

SNAPDIFF_FIELDS(ExplainItem) {
  v("device", x.device);
  v("addr", x.addr);
  v("requested_bytes", x.requested);
  v("count", x.count);
  v("bytes", x.bytes);
  v("category", x.category);
  v("rule", x.rule);
  v.special("evidence", view::Evidence{}, x);
  v("alloc_event", x.alloc_event);
  v("alloc_phase", x.alloc_phase);
  v("alloc_iteration", x.alloc_iteration);
  v.null_if("free_event", x.free_event, INT64_MAX);
  const bool freed = x.free_event != INT64_MAX;
  v.null_unless("free_phase", freed, x.free_phase);
  v.null_unless("free_iteration", freed, x.free_iteration);
  site_path_fields(v, x.site);
  v.when(x.has_kernels, "kernels", [&] {
    v.group("kernels", [&] {
      v.null_if("kernel", x.kernel, std::string());
      v("while_live", x.kernels_while_live);
      v.null_if("last", x.last_kernel, std::string());
    });
  });
}

SNAPDIFF_FIELDS(TraceActivity::Op) {
  v("op", x.op);
  v("calls", x.calls);
  v("total_ns", x.total_ns);
  v("kernel_launches", x.kernel_launches);
}
SNAPDIFF_FIELDS(TraceActivity::Kernel) {
  v("kernel", x.kernel);
  v("launches", x.launches);
  v.null_if("op", x.op, std::string());
}

// A profiler trace without memory events: what it holds instead.
SNAPDIFF_FIELDS(TraceActivity) {
  v.computed("memory_events", 0);
  v.words("message", x);
  v("ops", x.ops);
  v("op_names", x.op_names);
  v("kernel_launches", x.kernel_launches);
  v("kernel_names", x.kernel_names);
  v("top_ops", x.top_ops);
  v("top_kernels", x.top_kernels);
}

// ---- Findings' and warnings' facts ----------------------------------------

SNAPDIFF_FIELDS(PeakFacts::Part) {
  v("category", x.category);
  v("bytes", x.bytes);
  v("kept_from_iteration", x.kept_from_iteration);
  bool kernel = !x.kernel.empty();
  v.when(kernel, "kernel", [&] {
    v("kernel", x.kernel);
    v("kernel_bytes", x.kernel_bytes);
  });
  bool inference = x.forwards > 0;
  v.when(inference, "forwards", [&] {
    v("forwards", x.forwards);
    v("per_token_bytes", x.per_token);
  });
}
SNAPDIFF_FIELDS(PeakFacts) {
  v("peak_bytes", x.peak);
  v("phase", x.phase);
  v("iteration", x.iteration);
  v("truncated", x.truncated);
  v("parts", x.parts);
}
SNAPDIFF_FIELDS(OptimizerStepFacts) {
  v("iteration", x.iteration);
  v("rise_bytes", x.rise);
  v("new_state_bytes", x.new_state);
  v("similar_steps", x.similar);
  v("steps", x.steps);
  v("temporaries_bytes", x.temporaries);
  v("gradients_bytes", x.gradients);
  v("site", x.site);
  v("site_callee", x.site_callee);
}
SNAPDIFF_FIELDS(UnknownFacts) {
  v("unknown_bytes", x.unknown);
  v("before_profiler_bytes", x.before_profiler);
  v("timeline_placed_bytes", x.timeline_placed);
  bool kernel = !x.kernel.empty();
  v.when(kernel, "kernel", [&] {
    v("kernel", x.kernel);
    v("kernel_bytes", x.kernel_bytes);
  });
}
SNAPDIFF_FIELDS(GrowthFacts::Site) {
  v("site", x.site);
  v("model_frame", x.model_frame);
  v("phase", x.phase);
  v("bytes_per_iteration", x.bytes_per_iteration);
  v("count_per_iteration", x.count_per_iteration);
  v("iterations", x.iterations);
}
SNAPDIFF_FIELDS(GrowthFacts) {
  v("measured", x.measured);
  v("per_iteration_bytes", x.per_iteration);
  v("first_iteration", x.first_iteration);
  v("last_iteration", x.last_iteration);
  v("judged_first", x.judged_first);
  v("judged_last", x.judged_last);
  v("unjudged", x.unjudged);
  v("sites", x.sites);
  v("more_sites", x.more_sites);
  v("retained_per_iteration_bytes", x.retained_per_iteration);
  v("leaked_at_peak_bytes", x.leaked_at_peak);
}
SNAPDIFF_FIELDS(DiffPeakFacts) {
  v("a_bytes", x.a);
  v("b_bytes", x.b);
  v("a_iteration", x.a_iteration);
  v("b_iteration", x.b_iteration);
  v("a_phase", x.a_phase);
  v("b_phase", x.b_phase);
}
SNAPDIFF_FIELDS(DiffCategoryFacts::Group) {
  v("name", x.name);
  v("delta_bytes", x.delta);
  v("sites", x.sites);
  v("all_new", x.all_new);
  v("all_gone", x.all_gone);
}
SNAPDIFF_FIELDS(DiffCategoryFacts) {
  v("category", x.category);
  v("a_bytes", x.a);
  v("b_bytes", x.b);
  v("parameters", x.parameters);
  v("parameter_ratio", x.parameter_ratio);
  v("a_tensors", x.a_tensors);
  v("b_tensors", x.b_tensors);
  v("mostly", x.mostly);
  v("offset", x.offset);
  v("has_top_site", x.has_top_site);
  v("top_delta_bytes", x.top_delta);
  v("top_site", x.top_site);
  v("top_new", x.top_new);
  v("top_gone", x.top_gone);
  v("gradients_kept", x.gradients_kept);
  v("copies_unchanged", x.copies_unchanged);
}
SNAPDIFF_FIELDS(DiffStepFacts) {
  v("a_temporaries_bytes", x.a_temporaries);
  v("b_temporaries_bytes", x.b_temporaries);
  v("a_gradients_bytes", x.a_gradients);
  v("b_gradients_bytes", x.b_gradients);
}
SNAPDIFF_FIELDS(DiffReservedFacts) {
  v("a_reserved_bytes", x.a_reserved);
  v("b_reserved_bytes", x.b_reserved);
  v("a_allocated_bytes", x.a_allocated);
  v("b_allocated_bytes", x.b_allocated);
  v("a_free_cached_bytes", x.a_free_cached);
  v("b_free_cached_bytes", x.b_free_cached);
  v("a_largest_free_block_bytes", x.a_largest_free);
  v("b_largest_free_block_bytes", x.b_largest_free);
}
SNAPDIFF_FIELDS(DiffPhaseFacts::Category) {
  v("category", x.name);
  v("a_bytes", x.a);
  v("b_bytes", x.b);
}
SNAPDIFF_FIELDS(DiffPhaseFacts) {
  v("phase", x.phase);
  v("iteration", x.iteration);
  v("a_bytes", x.a);
  v("b_bytes", x.b);
  v("categories", x.categories);
}
SNAPDIFF_FIELDS(ProfilerWindowFacts) { v("allocated_before_bytes", x.allocated_before); }
SNAPDIFF_FIELDS(HistoryTruncatedFacts) {
  v("requested_bytes", x.requested);
  v("reserved_bytes", x.reserved);
  v("allocations", x.allocations);
  v("allocated_estimated", x.allocated_estimated);
  v("truncation", x.kind);
  v("evidence", x.evidence);
}
SNAPDIFF_FIELDS(EndStateFacts) {
  v("truncated", x.truncated);
  v("replay", x.replay);
  v("dump", x.dump);
}
SNAPDIFF_FIELDS(InconsistentFacts) {
  v("events", x.events);
  v("reported_totals", x.reported_totals);
  v("first", x.first);
}
SNAPDIFF_FIELDS(OomFacts) {
  v("errors", x.errors);
  v("has_first", x.has_first);
  v("first_size_bytes", x.first_size);
  v("first_free_bytes", x.first_free);
}
SNAPDIFF_FIELDS(OutsideFacts) {
  v("holder", x.holder);
  v.special("pid", view::OutsidePid{}, x.pid);
  v("bytes", x.bytes);
  v("device_peak_bytes", x.device_peak);
}

// ---- Device memory outside the allocator ----------------------------------

SNAPDIFF_FIELDS(OutsideChange) {
  v("row", x.row);
  v("bytes", x.bytes);
}

SNAPDIFF_FIELDS(OutsideSample) {
  v.time("time_us", x.time_us);
  v("label", x.label);
  v("used_bytes", x.used);
  v("changes", x.changes);
}

// A row of a device; "allocator": the PyTorch row of the snapshot's process.
struct OutsideRowFields {
  uint32_t snapshot_pid = 0;
  template <class V, class S>
  void operator()(V& v, S& x) const {
    v.words("name", x);
    v.special("caller", view::Caller{}, x);
    v("library", x.library);
    v.null_unless("pid", !x.context, x.pid);
    v.computed("allocator", !x.context && x.caller == MemoryCaller::PyTorch && x.pid == snapshot_pid && snapshot_pid != 0);
    v.flag_null("at_peak_bytes", x.at_peak_known, x.at_peak);
    v("at_exit_bytes", x.at_exit);
    v("max_bytes", x.max_bytes);
    v.time("max_time_us", x.max_time_us);
  }
};

SNAPDIFF_FIELDS(OutsideDevice) {
  v("device", x.device);
  v("processes", x.pids);
  v.special("snapshot_pid", view::OutsidePid{}, x.snapshot_pid);
  v("driver_events", x.driver_events);
  v("unmatched_frees", x.unmatched_frees);
  v("samples", x.samples);
  v("total_bytes", x.total_bytes);
  v.time("first_time_us", x.first_time_us);
  v.time("peak_time_us", x.peak_time_us);
  v.time("peak_sample_time_us", x.peak_sample_time_us);
  v.time("exit_time_us", x.exit_time_us);
  v("exit_from_sample", x.exit_from_sample);
  v("rows", x.rows, OutsideRowFields{x.snapshot_pid});
  v("over_time", x.over_time);
  v.flag_null("outside_at_peak_bytes", x.outside_at_peak_known, x.outside_at_peak);
  v("outside_at_exit_bytes", x.outside_at_exit);
  v.group_or_null("device_peak", x.device_peak_known, [&] {
    v("bytes", x.device_peak.bytes);
    v.time("time_us", x.device_peak.time_us);
    v("reserved_bytes", x.device_peak.reserved);
    v("outside_bytes", x.device_peak.outside);
  });
  v("pytorch_peak_allocated_bytes", x.peak_allocated);
  v("pytorch_peak_reserved_bytes", x.peak_reserved);
  v.group("reserved_check", [&] {
    v("samples", x.checked_samples);
    v("mismatched", x.mismatched_samples);
    v("largest_difference_bytes", x.largest_mismatch);
    v.time("first_mismatch_time_us", x.first_mismatch_time_us);
  });
}

// ---- Findings, warnings, devices and the report ---------------------------

SNAPDIFF_FIELDS(Finding) {
  v("kind", x.code);
  v.words("message", x);
  v("bytes", x.bytes);
  v.special("facts", view::Facts{}, x);
}
SNAPDIFF_FIELDS(Warning) {
  v("code", x.code);
  v.words("message", x);
  v("device", x.device);
  v.special("facts", view::Facts{}, x);
}

// A device's peak: the requested peak's figures (derived from the points
// below), its phase, the four points, the event that set it and, for inputs
// with kernel launches, the launches around it.
struct DevicePeak {
  bool kernels = false;
  template <class V, class S>
  void operator()(V& v, S& x) const {
    const char* disagrees = "disagrees with the peak points below it";
    v.derived("requested_bytes", [&x] { return x.peak_requested.bytes; }, disagrees);
    v.derived("allocated_bytes", [&x] { return x.peak_allocated.bytes; }, disagrees);
    v.derived("reserved_bytes", [&x] { return x.peak_reserved.bytes; }, disagrees);
    v.derived("active_bytes", [&x] { return x.peak_active.bytes; }, disagrees);
    v.derived("event_index", [&x] { return x.peak_requested.event_index; }, disagrees);
    v.derived_time("time_us", [&x] { return x.peak_requested.time_us; }, disagrees);
    v("phase", x.peak_phase);
    v("iteration", x.peak_iteration);
    v("requested", x.peak_requested);
    v("allocated", x.peak_allocated);
    v("reserved", x.peak_reserved);
    v("active", x.peak_active);
    v("allocated_bytes_at_peak", x.allocated_at_peak);
    v("active_bytes_at_peak", x.active_at_peak);
    v.group_or_null("reached_by", x.has_peak_event, [&] {
      v("action", x.reached_by.kind);
      v("size", x.reached_by.size);
      v("addr", x.reached_by.addr);
      v("stream", x.reached_by.stream);
      v("user_frame", x.peak_user_frame);
    });
    bool launches = kernels;
    v.when(launches, "kernel_before", [&] {
      v("kernel_before", x.kernel_before);
      v("kernel_after", x.kernel_after);
    });
  }
};

// A device (the report's $.devices[]); `kernels`: the input has kernel launches.
struct DeviceFields {
  bool kernels = false;
  template <class V, class S>
  void operator()(V& v, S& x) const {
    v.names_ahead("categories", x.category_names);
    v("device", x.device);
    v("events", x.events);
    v("streams", x.streams);
    v.special("history", view::History{}, x);
    v("truncation", x.truncation);
    v("truncation_evidence", x.truncation_evidence);
    v.time("first_time_us", x.first_time_us);
    v.time("last_time_us", x.last_time_us);
    v.group("peak", [&] { DevicePeak{kernels}(v, x); });
    v.group("before_first_event", [&] {
      fields(v, x.baseline);
      v("allocations", x.pre_trace_allocations);
      v("allocated_estimated", x.allocated_estimated);
    });
    v.group("live_at_peak", [&] {
      v("allocations", x.peak_live_allocations);
      v("requested_bytes", x.peak_live_requested);
      v("sites", x.sites);
      v("other", x.other_sites, OtherSites{});
      v("gradient_sizes", x.gradient_sizes);
    });
    v.categories("categories", x.categories);
    v.categories("category_allocations", x.category_allocations);
    v.categories("category_sites", x.category_sites);
    v("unknown_held_from_before", x.unknown_held_from_before);
    v("phase_evidence", x.phase_evidence);
    v("iterations", x.iterations);
    v("phases", x.phases);
    v("growth", x.growth);
    bool at = x.at.has_value(), window = x.window.has_value();
    v.when(at, "at", [&] { v("at", x.at); });
    v.when(window, "window", [&] { v("window", x.window); });
    v("unknown_at_peak", x.unknown_sites);
    v("findings", x.findings);
    v("fragmentation_at_peak", x.frag);
    v("end_state", x.end_check);
    v("pools", x.pools);
    v("replay_inconsistencies", x.inconsistencies);
    v("oom_events", x.oom_events);
    v.when(x.reported_totals, "counters", [&] {
      v.derived("counters", [] { return std::string("reported"); }, "expected \"reported\"");
    });
    DeviceOps{}(v, x);
  }
};

// The report, after its "schema" and "tool" (written and checked by hand).
SNAPDIFF_FIELDS(Report) {
  v.group("input", [&] {
    v("name", x.input_name);
    v("format", x.source.format);
    v("format_detail", x.source.format_detail);
    v("gzip", x.source.gzip);
    v("file_bytes", x.source.file_bytes);
    v("shape", x.source.shape);
    v("events", x.events);
    v.special("history", view::History{}, x);
    v("truncation", x.truncation);
    bool launches = x.kernel_launches > 0;
    v.when(launches, "kernel_launches", [&] { v("kernel_launches", x.kernel_launches); });
    bool profiler = x.profiler_trace || x.ops > 0;
    v.when(profiler, "profiler", [&] {
      v.group("profiler", [&] {
        v("ops", x.ops);
        v("cpu_memory_events", x.host_memory_events);
        v("cpu_memory_peak_bytes", x.host_peak_bytes);
        v("trace", x.profiler_trace);
      });
    });
    v.special("devices", view::DeviceNumbers{}, x);
  });
  bool oom = !x.ooms.empty();
  v.when(oom, "oom", [&] { v.group("oom", [&] { v.first_then("other_devices", x.ooms); }); });
  v.group("allocator_settings", [&] {
    v("present", x.allocator_settings.present);
    v("expandable_segments", x.allocator_settings.expandable_segments);
    v.null_if("max_split_size", x.allocator_settings.max_split_size, int64_t(-1));
    v.special("recorded", view::Recorded{}, x.allocator_settings);
  });
  v.special("peak", view::TopPeak{}, x);
  v.special("categories", view::TopDevice{}, x);
  v("devices", x.devices, DeviceFields{x.kernel_launches > 0});
  bool memory = !x.device_memory.empty();
  v.when(memory, "device_memory", [&] {
    v.group("device_memory", [&] {
      v("samples", x.device_memory);
      v("outside_min_bytes", x.outside_min_bytes);
      v("outside_max_bytes", x.outside_max_bytes);
    });
  });
  bool outside = !x.outside.empty();
  v.when(outside, "outside_allocator", [&] { v("outside_allocator", x.outside); });
  v.when(x.timeline.present, "memory_timeline", [&] { v("memory_timeline", x.timeline, TimelineFields{&x.devices}); });
  v.when(x.activity.present, "profiler_activity", [&] { v("profiler_activity", x.activity); });
  bool join = !x.join.devices.empty() || !x.join.trace_name.empty();
  v.when(join, "trace_join", [&] { v("trace_join", x.join); });
  bool kernel_join = x.kernel_join.joined();
  v.when(kernel_join, "kernel_join", [&] { v("kernel_join", x.kernel_join); });
  bool explain = !x.explain_query.empty();
  v.when(explain, "explain", [&] {
    v.group("explain", [&] {
      v("query", x.explain_query);
      v("matches", x.explain_total);
      v("items", x.explain);
    });
  });
  v("site_depth", x.site_depth);  // the --depth of the site rows' paths
  v("warnings", x.warnings);
}

}  // namespace snapdiff
