// The machine-readable report (schemas/report.schema.json).
#include <nlohmann/json.hpp>
#include <optional>

#include "report/facts_json.hpp"
#include "report/format.hpp"
#include "report/json_write.hpp"
#include "report/oom_report.hpp"
#include "report/outside_report.hpp"
#include "report/profiler_report.hpp"
#include "snapdiff/report/report.hpp"

namespace snapdiff {

namespace {

using J = nlohmann::ordered_json;
using detail::counters_json;
using detail::frame_json;
using detail::JsonWriter;
using detail::to_json;
using detail::truncation_evidence_json;

J categories_json(const std::vector<std::string>& names, const std::vector<int64_t>& v) {
  J j = J::object();
  for (size_t i = 0; i < names.size() && i < v.size(); ++i) j[names[i]] = v[i];
  return j;
}

J phases_json(const DeviceView& d) {
  J j;
  JsonWriter w(j);
  w.names = &d.category_names;
  return w.value(d.phases);
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
  p["requested"] = to_json(d.peak_requested);
  p["allocated"] = to_json(d.peak_allocated);
  p["reserved"] = to_json(d.peak_reserved);
  p["active"] = to_json(d.peak_active);
  p["allocated_bytes_at_peak"] = d.allocated_at_peak;
  p["active_bytes_at_peak"] = d.active_at_peak;
  if (d.peak_index >= 0) {
    J e;
    e["action"] = event_kind_name(d.reached_by.kind);
    e["size"] = d.reached_by.size;
    e["addr"] = d.reached_by.addr;
    e["stream"] = d.reached_by.stream;
    e["user_frame"] = d.peak_user_frame ? frame_json(*d.peak_user_frame, true) : J(nullptr);
    p["reached_by"] = e;
  } else {
    p["reached_by"] = nullptr;
  }
  if (kernels) {
    p["kernel_before"] = to_json(d.kernel_before);
    p["kernel_after"] = to_json(d.kernel_after);
  }
  return p;
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
    if (top.at) j["at"] = to_json(*top.at);
    if (top.window) j["window"] = to_json(*top.window);
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
    live["sites"] = to_json(d.sites);
    JsonWriter{live}("other", d.other_sites, OtherSites{});
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
    dj["growth"] = to_json(d.growth);
    if (d.at) dj["at"] = to_json(*d.at);
    if (d.window) dj["window"] = to_json(*d.window);
    dj["unknown_at_peak"] = to_json(d.unknown_sites);
    J fnd = J::array();
    for (const Finding& f : d.findings) fnd.push_back({{"kind", std::string(code_name(f.code))},
                    {"message", finding_text(f)},
                    {"bytes", f.bytes},
                    {"facts", detail::finding_facts_json(f)}});
    dj["findings"] = std::move(fnd);
    dj["fragmentation_at_peak"] = to_json(d.frag);
    dj["end_state"] = to_json(d.end_check);
    dj["pools"] = to_json(d.pools);
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
    J samples = to_json(r.device_memory);
    j["device_memory"] = {{"samples", std::move(samples)},
                          {"outside_min_bytes", r.outside_min_bytes},
                          {"outside_max_bytes", r.outside_max_bytes}};
  }
  if (!r.outside.empty()) j["outside_allocator"] = detail::outside_json(r);
  if (r.timeline.present) j["memory_timeline"] = detail::timeline_json(r);
  if (r.activity.present) j["profiler_activity"] = detail::activity_json(r);
  if (!r.join.devices.empty() || !r.join.trace_name.empty()) {
    j["trace_join"] = to_json(r.join);
  }
  if (r.kernel_join.joined()) {
    j["kernel_join"] = to_json(r.kernel_join);
  }
  if (!r.explain_query.empty()) {
    J ex;
    ex["query"] = r.explain_query;
    ex["matches"] = r.explain_total;
    ex["items"] = to_json(r.explain);
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
