// The machine-readable report (schemas/report.schema.json).
#include <nlohmann/json.hpp>
#include <optional>

#include "report/facts_json.hpp"
#include "report/format.hpp"
#include "report/oom_report.hpp"
#include "report/outside_report.hpp"
#include "report/profiler_report.hpp"
#include "snapdiff/report/report.hpp"

namespace snapdiff {

namespace {

using J = nlohmann::ordered_json;
using detail::counters_json;
using detail::frame_json;
using detail::truncation_evidence_json;

J peak_json(const PeakPoint& p) {
  J j;
  j["bytes"] = p.bytes;
  j["event_index"] = p.event_index;
  j["time_us"] = p.time_us == kNoTime ? J(nullptr) : J(p.time_us);
  return j;
}

// The memory pools at the end: the default pool (0, 0), then the private
// ones (CUDA graphs, torch.cuda.MemPool).
J pools_json(const std::vector<PoolUsage>& pools) {
  J a = J::array();
  for (const PoolUsage& p : pools)
    a.push_back({{"id", J::array({p.id[0], p.id[1]})},
                 {"private", p.id[0] != 0 || p.id[1] != 0},
                 {"segments", p.segments},
                 {"reserved_bytes", p.reserved},
                 {"allocated_bytes", p.allocated}});
  return a;
}

J categories_json(const std::vector<std::string>& names, const std::vector<int64_t>& v) {
  J j = J::object();
  for (size_t i = 0; i < names.size() && i < v.size(); ++i) j[names[i]] = v[i];
  return j;
}

// Memory at each iteration's start, growth per iteration, leaking sites.
J growth_json(const Growth& g) {
  J starts = J::array();
  for (const IterationStart& s : g.starts)
    starts.push_back({{"iteration", s.iteration}, {"event_index", s.event_index},
                      {"time_us", s.time_us == kNoTime ? J(nullptr) : J(s.time_us)},
                      {"allocated_bytes", s.allocated}, {"requested_bytes", s.requested}});
  J sites = J::array();
  for (const RetainedSite& r : g.sites)
    sites.push_back({{"site", r.site}, {"model_frame", r.model_frame.empty() ? J(nullptr) : J(r.model_frame)},
                     {"phase", phase_name(r.phase)}, {"bytes_per_iteration", r.bytes_per_iteration},
                     {"count_per_iteration", r.count_per_iteration}, {"iterations", r.iterations},
                     {"leaked_allocations", r.leaked_allocations}, {"leaked_at_peak_bytes", r.leaked_at_peak}});
  J j;
  j["iteration_starts"] = std::move(starts);
  j["method"] = "median of the changes of allocated bytes between the starts of iterations 2..N";
  j["per_iteration_bytes"] = g.measured ? J(g.per_iteration) : J(nullptr);
  j["deltas"] = g.deltas;
  j["judged_iterations"] = g.judged_last >= g.judged_first && g.judged_first > 0
                               ? J::array({g.judged_first, g.judged_last})
                               : J(nullptr);
  j["unjudged_iterations"] = g.unjudged;
  j["retained_per_iteration_bytes"] = g.retained_per_iteration;
  j["retained_count_per_iteration"] = g.retained_count;
  j["leaked_at_peak_bytes"] = g.leaked_at_peak;
  j["sites"] = std::move(sites);
  return j;
}

J phases_json(const DeviceView& d) {
  J phases = J::array();
  for (const PhaseSpan& ps : d.phases)
    phases.push_back({{"iteration", ps.iteration},
                      {"phase", phase_name(ps.phase)},
                      {"start_event", ps.start_event},
                      {"end_event", ps.end_event},
                      {"start_requested_bytes", ps.start_requested},
                      {"peak_event", ps.peak_event},
                      {"peak_requested_bytes", ps.peak_requested},
                      {"end_requested_bytes", ps.end_requested},
                      {"start_allocated_bytes", ps.start_allocated},
                      {"end_allocated_bytes", ps.end_allocated},
                      {"start_reserved_bytes", ps.start_reserved},
                      {"end_reserved_bytes", ps.end_reserved},
                      {"categories", categories_json(d.category_names, ps.categories)}});
  return phases;
}

// --at's moment and --window's range; null when not given.
J at_json(const DeviceView& d) {
  if (!d.at) return nullptr;
  J j = counters_json(d.at->counters);
  j["spec"] = d.at->spec;
  j["event_index"] = d.at->event_index;
  j["time_us"] = d.at->time_us == kNoTime ? J(nullptr) : J(d.at->time_us);
  j["phase"] = phase_name(d.at->phase);
  j["iteration"] = d.at->iteration;
  return j;
}
J window_json(const DeviceView& d) {
  if (!d.window) return nullptr;
  return {{"spec", d.window->spec},
          {"first_event", d.window->first_event},
          {"last_event", d.window->last_event},
          {"first_time_us", d.window->first_time_us == kNoTime ? J(nullptr) : J(d.window->first_time_us)},
          {"last_time_us", d.window->last_time_us == kNoTime ? J(nullptr) : J(d.window->last_time_us)}};
}

// A kernel launch: its name, time, stream and scope stack (frames innermost
// first, like every `stack` in the report); null when there is none.
J kernel_json(const std::optional<KernelRef>& k) {
  if (!k) return nullptr;
  J j;
  j["name"] = k->name;
  j["time_us"] = k->time_us == kNoTime ? J(nullptr) : J(k->time_us);
  j["stream"] = k->stream;
  j["display"] = k->display;
  j["scope"] = k->scope;
  j["stack"] = J::array();
  for (const FrameRef& f : k->stack) j["stack"].push_back(frame_json(f, false));
  return j;
}

J device_peak(const DeviceView& d, bool kernels) {
  J p;
  p["requested_bytes"] = d.peak_requested.bytes;
  p["allocated_bytes"] = d.peak_allocated.bytes;
  p["reserved_bytes"] = d.peak_reserved.bytes;
  p["active_bytes"] = d.peak_active.bytes;
  p["event_index"] = d.peak_requested.event_index;
  p["time_us"] = d.peak_requested.time_us == kNoTime ? J(nullptr) : J(d.peak_requested.time_us);
  p["phase"] = phase_name(d.peak_phase);
  p["iteration"] = d.peak_iteration;
  p["requested"] = peak_json(d.peak_requested);
  p["allocated"] = peak_json(d.peak_allocated);
  p["reserved"] = peak_json(d.peak_reserved);
  p["active"] = peak_json(d.peak_active);
  p["allocated_bytes_at_peak"] = d.allocated_at_peak;
  p["active_bytes_at_peak"] = d.active_at_peak;
  if (d.peak_index >= 0) {
    J e;
    e["action"] = event_kind_name(d.peak_event.kind);
    e["size"] = d.peak_event.size;
    e["addr"] = d.peak_event.addr;
    e["stream"] = d.peak_event.stream;
    e["user_frame"] = d.peak_user_frame ? frame_json(*d.peak_user_frame, true) : J(nullptr);
    p["reached_by"] = e;
  } else {
    p["reached_by"] = nullptr;
  }
  if (kernels) {
    p["kernel_before"] = kernel_json(d.kernel_before);
    p["kernel_after"] = kernel_json(d.kernel_after);
  }
  return p;
}

J site_json(const SiteRow& s) {
  J sj;
  sj["requested_bytes"] = s.requested_bytes;
  sj["block_bytes"] = s.block_bytes;
  sj["count"] = s.count;
  sj["category"] = s.category >= 0 ? J(s.category_name) : J(nullptr);
  sj["rule"] = s.has_rule ? J(s.rule_name) : J(nullptr);
  sj["alloc_phase"] = phase_name(s.alloc_phase);
  sj["alloc_iteration"] = s.alloc_iteration;
  sj["free_phase"] = s.freed ? J(phase_name(s.free_phase)) : J(nullptr);
  sj["free_iteration"] = s.freed ? J(s.free_iteration) : J(nullptr);
  sj["user_frame"] = s.site.user ? frame_json(*s.site.user, true) : J(nullptr);
  sj["stack"] = J::array();
  for (const FrameRef& f : s.site.stack) sj["stack"].push_back(frame_json(f, true));
  detail::site_path_json(sj, s.site);
  return sj;
}

}  // namespace

std::string render_json(const Report& r) {
  const bool kernels = r.kernel_launches > 0;
  J j;
  j["schema"] = "snapdiff/report/1";
  j["tool"] = {{"name", "snapdiff"}, {"version", SNAPDIFF_VERSION}};
  J in;
  in["name"] = r.input_name;
  in["format"] = r.source.format;
  in["format_detail"] = r.source.format_detail;
  in["gzip"] = r.source.gzip;
  in["file_bytes"] = r.source.file_bytes;
  in["shape"] = r.source.shape;
  in["events"] = r.events;
  in["history"] = !r.has_history ? "none" : r.history_truncated ? "truncated" : "complete";
  in["truncation"] = truncation_name(r.truncation);
  if (r.kernel_launches > 0) in["kernel_launches"] = r.kernel_launches;
  if (r.profiler_trace || r.ops > 0) in["profiler"] = detail::profiler_input_json(r);
  in["devices"] = J::array();
  for (const DeviceView& d : r.devices) in["devices"].push_back(d.device);
  j["input"] = in;
  if (!r.ooms.empty()) j["oom"] = detail::oom_json(r);
  {
    const AllocatorSettings& s = r.allocator_settings;
    J as;
    as["present"] = s.present;
    as["expandable_segments"] = s.expandable_segments;
    as["max_split_size"] = s.max_split_size < 0 ? J(nullptr) : J(s.max_split_size);
    J raw = J::object();
    for (const auto& kv : s.raw) raw[kv.first] = kv.second;
    as["recorded"] = raw;
    j["allocator_settings"] = as;
  }
  if (!r.devices.empty()) {
    J top = device_peak(r.devices[r.peak_device], kernels);
    top["device"] = r.devices[r.peak_device].device;
    j["peak"] = top;
  } else {
    j["peak"] = {{"requested_bytes", 0}, {"allocated_bytes", 0}, {"reserved_bytes", 0}, {"active_bytes", 0},
                 {"event_index", -1}, {"time_us", nullptr}, {"device", nullptr}};
  }
  if (!r.devices.empty()) {
    const DeviceView& top = r.devices[r.peak_device];
    j["categories"] = categories_json(top.category_names, top.categories);
    j["phases"] = phases_json(top);
    if (top.at) j["at"] = at_json(top);
    if (top.window) j["window"] = window_json(top);
  } else {
    j["categories"] = J::object();
    j["phases"] = J::array();
  }
  j["devices"] = J::array();
  for (const DeviceView& d : r.devices) {
    J dj;
    dj["device"] = d.device;
    dj["events"] = d.events;
    dj["streams"] = d.streams;
    dj["history"] = !(d.has_trace && d.events > 0) ? "none" : d.truncated ? "truncated" : "complete";
    dj["truncation"] = truncation_name(d.truncation);
    dj["truncation_evidence"] = truncation_evidence_json(d.truncation_evidence);
    dj["first_time_us"] = d.first_time_us == kNoTime ? J(nullptr) : J(d.first_time_us);
    dj["last_time_us"] = d.last_time_us == kNoTime ? J(nullptr) : J(d.last_time_us);
    dj["peak"] = device_peak(d, kernels);
    dj["before_first_event"] = counters_json(d.baseline);
    dj["before_first_event"]["allocations"] = d.pre_trace_allocations;
    dj["before_first_event"]["allocated_estimated"] = d.allocated_estimated;
    J live;
    live["allocations"] = d.peak_live_allocations;
    live["requested_bytes"] = d.peak_live_requested;
    live["sites"] = J::array();
    for (const SiteRow& s : d.sites) live["sites"].push_back(site_json(s));
    live["other"] = {{"requested_bytes", d.other_sites.requested_bytes},
                     {"block_bytes", d.other_sites.block_bytes},
                     {"count", d.other_sites.count}};
    dj["live_at_peak"] = live;
    dj["categories"] = categories_json(d.category_names, d.categories);
    {
      J allocs = J::object(), sites = J::object();
      for (size_t i = 0; i < d.category_names.size(); ++i) {
        if (i < d.category_allocations.size()) allocs[d.category_names[i]] = d.category_allocations[i];
        if (i < d.category_sites.size()) sites[d.category_names[i]] = d.category_sites[i];
      }
      dj["category_allocations"] = std::move(allocs);
      dj["category_sites"] = std::move(sites);
    }
    dj["phase_evidence"] = d.phase_evidence;
    dj["iterations"] = d.iterations;
    dj["phases"] = phases_json(d);
    dj["growth"] = growth_json(d.growth);
    if (d.at) dj["at"] = at_json(d);
    if (d.window) dj["window"] = window_json(d);
    J unk = J::array();
    for (const SiteRow& s : d.unknown_sites) unk.push_back(site_json(s));
    dj["unknown_at_peak"] = std::move(unk);
    J fnd = J::array();
    for (const Finding& f : d.findings) fnd.push_back({{"kind", std::string(code_name(f.code))},
                    {"message", finding_text(f)},
                    {"bytes", f.bytes},
                    {"facts", detail::finding_facts_json(f)}});
    dj["findings"] = std::move(fnd);
    const Fragmentation& f = d.frag;
    J classes = J::array();
    for (const FreeSizeClass& c : d.frag.classes)
      classes.push_back({{"class", c.label}, {"blocks", c.blocks}, {"bytes", c.bytes}});
    dj["fragmentation_at_peak"] = {{"free_by_size", classes},{"reserved_bytes", f.reserved},
                                   {"allocated_bytes", f.allocated},
                                   {"requested_bytes", f.requested},
                                   {"free_cached_bytes", f.free_cached},
                                   {"pending_free_bytes", f.pending_free},
                                   {"pending_free_requested_bytes", f.pending_free_requested},
                                   {"internal_bytes", f.internal},
                                   {"free_blocks", f.free_blocks},
                                   {"largest_free_block_bytes", f.largest_free_block},
                                   {"too_small_threshold_bytes", f.too_small_threshold},
                                   {"too_small_bytes", f.too_small_bytes}};
    J ec;
    ec["have_dump"] = d.end_check.have_dump;
    ec["matches"] = d.end_check.matches();
    ec["replay"] = counters_json(d.end_check.replay);
    ec["dump"] = counters_json(d.end_check.dump);
    ec["replay_segments"] = d.end_check.replay_segments;
    ec["dump_segments"] = d.end_check.dump_segments;
    dj["end_state"] = ec;
    dj["pools"] = pools_json(d.pools);
    dj["replay_inconsistencies"] = d.inconsistencies;
    dj["oom_events"] = d.oom_events;
    if (d.reported_totals) dj["counters"] = "reported";
    if (d.has_ops || d.kernels_only) {
      J ops = detail::ops_json(d);
      for (auto it = ops.begin(); it != ops.end(); ++it) dj[it.key()] = it.value();
    }
    j["devices"].push_back(dj);
  }
  if (!r.device_memory.empty()) {
    J samples = J::array();
    for (const DeviceMemoryRow& m : r.device_memory)
      samples.push_back({{"device", m.device},
                         {"label", m.label},
                         {"time_us", m.time_us == kNoTime ? J(nullptr) : J(m.time_us)},
                         {"time_since_first_event_us",
                          m.since_first_event_us == kNoTime ? J(nullptr) : J(m.since_first_event_us)},
                         {"free_bytes", m.free_bytes},
                         {"total_bytes", m.total_bytes},
                         {"used_bytes", m.used_bytes},
                         {"reserved_bytes", m.reserved_bytes},
                         {"outside_bytes", m.outside_bytes}});
    j["device_memory"] = {{"samples", std::move(samples)},
                          {"outside_min_bytes", r.outside_min_bytes},
                          {"outside_max_bytes", r.outside_max_bytes}};
  }
  if (!r.outside.empty()) j["outside_allocator"] = detail::outside_json(r);
  if (r.timeline.present) j["memory_timeline"] = detail::timeline_json(r);
  if (r.activity.present) j["profiler_activity"] = detail::activity_json(r);
  if (!r.join.devices.empty() || !r.join.trace_name.empty()) {
    J jn;
    jn["trace"] = r.join.trace_name;
    jn["ops"] = r.join.ops;
    jn["kernels"] = r.join.kernels;
    jn["devices"] = J::array();
    for (const TraceJoinDevice& x : r.join.devices)
      jn["devices"].push_back({{"device", x.device},
                               {"method", x.method},
                               {"offset_us", x.offset_us},
                               {"offset_spread_us", x.offset_spread_us},
                               {"trace_allocations", x.trace_allocs},
                               {"snapshot_allocations", x.snapshot_allocs},
                               {"in_window", x.in_window},
                               {"matched", x.matched},
                               {"with_op", x.with_op}});
    j["trace_join"] = jn;
  }
  if (r.kernel_join.joined()) {
    const KernelJoin& k = r.kernel_join;
    j["kernel_join"] = {{"recording", k.recording_name},
                        {"pid", k.pid},
                        {"processes", k.processes},
                        {"segment_events", k.segment_events},
                        {"matched_segments", k.matched_segments},
                        {"dump_segments", k.dump_segments},
                        {"dump_segments_found", k.dump_segments_found},
                        {"offset_measured", k.offset_measured},
                        {"offset_us", k.offset_us},
                        {"offset_spread_us", k.offset_spread_us},
                        {"kernels", k.kernels},
                        {"driver_memory_events", k.driver_memory_events},
                        {"samples", k.samples},
                        {"allocations", k.allocations},
                        {"recording_first_us", k.recording_first_us == kNoTime ? J(nullptr) : J(k.recording_first_us)},
                        {"allocations_before_kernels", k.allocations_before_kernels},
                        {"allocations_with_kernel", k.allocations_with_kernel}};
  }
  if (!r.explain_query.empty()) {
    J ex;
    ex["query"] = r.explain_query;
    ex["matches"] = r.explain_total;
    ex["items"] = J::array();
    for (const ExplainItem& it : r.explain) {
      ex["items"].push_back({{"device", it.device},
                             {"addr", it.addr},
                             {"requested_bytes", it.requested},
                             {"count", it.count},
                             {"bytes", it.bytes},
                             {"category", it.category},
                             {"rule", it.rule},
                             {"evidence", it.evidence},
                             {"alloc_event", it.alloc_event},
                             {"alloc_phase", phase_name(it.alloc_phase)},
                             {"alloc_iteration", it.alloc_iteration},
                             {"free_event", it.free_event == INT64_MAX ? J(nullptr) : J(it.free_event)},
                             {"free_phase", it.free_event == INT64_MAX ? J(nullptr) : J(phase_name(it.free_phase))},
                             {"free_iteration", it.free_event == INT64_MAX ? J(nullptr) : J(it.free_iteration)}});
      detail::site_path_json(ex["items"].back(), it.site);
      if (it.has_kernels)
        ex["items"].back()["kernels"] = {{"kernel", it.kernel.empty() ? J(nullptr) : J(it.kernel)},
                                         {"while_live", it.kernels_while_live},
                                         {"last", it.last_kernel.empty() ? J(nullptr) : J(it.last_kernel)}};
    }
    j["explain"] = ex;
  }
  j["site_depth"] = r.site_depth;  // the --depth of the site rows' paths (read back by report_read.cpp)
  j["warnings"] = J::array();
  for (const Warning& w : r.warnings) j["warnings"].push_back({{"code", std::string(code_name(w.code))},
                             {"message", warning_text(w)},
                             {"device", w.device},
                             {"facts", detail::warning_facts_json(w)}});
  // Names are bytes: invalid UTF-8 in one becomes U+FFFD, and the controls
  // JSON lets stand raw are written as \u escapes (docs/reliability.md).
  return detail::json_safe(j.dump(2, ' ', false, J::error_handler_t::replace)) + "\n";
}

}  // namespace snapdiff
