// The machine-readable report (schemas/report.schema.json).
#include <nlohmann/json.hpp>

#include "snapdiff/report.hpp"

namespace snapdiff {

namespace {

using J = nlohmann::ordered_json;

J frame_json(const Trace& t, FrameId f) {
  const Frame& fr = t.frames[f];
  J j;
  j["name"] = std::string(t.strings.get(fr.name));
  j["file"] = std::string(t.strings.get(fr.file));
  if (fr.line >= 0) j["line"] = fr.line;
  else j["line"] = nullptr;
  return j;
}

J peak_json(const PeakPoint& p) {
  J j;
  j["bytes"] = p.bytes;
  j["event_index"] = p.event_index;
  j["time_us"] = p.time_us == kNoTime ? J(nullptr) : J(p.time_us);
  return j;
}

J counters_json(const Counters& c) {
  J j;
  j["requested_bytes"] = c.requested;
  j["allocated_bytes"] = c.allocated;
  j["reserved_bytes"] = c.reserved;
  return j;
}

J device_peak(const DeviceReport& d, const Trace& t) {
  const DeviceReplay& rp = d.replay;
  J p;
  p["requested_bytes"] = rp.peak_requested.bytes;
  p["allocated_bytes"] = rp.peak_allocated.bytes;
  p["reserved_bytes"] = rp.peak_reserved.bytes;
  p["event_index"] = rp.peak_allocated.event_index;
  p["time_us"] = rp.peak_allocated.time_us == kNoTime ? J(nullptr) : J(rp.peak_allocated.time_us);
  p["requested"] = peak_json(rp.peak_requested);
  p["allocated"] = peak_json(rp.peak_allocated);
  p["reserved"] = peak_json(rp.peak_reserved);
  if (rp.peak_allocated.event_index >= 0) {
    J e;
    e["action"] = event_kind_name(d.peak_event.kind);
    e["size"] = d.peak_event.size;
    e["addr"] = d.peak_event.addr;
    e["stream"] = d.peak_event.stream;
    FrameId uf = user_frame(t, d.peak_stack);
    e["user_frame"] = uf == UINT32_MAX ? J(nullptr) : frame_json(t, uf);
    p["reached_by"] = e;
  } else {
    p["reached_by"] = nullptr;
  }
  return p;
}

}  // namespace

std::string render_json(const Report& r, const Trace& t) {
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
  in["devices"] = J::array();
  for (const DeviceReport& d : r.devices) in["devices"].push_back(d.device);
  j["input"] = in;
  if (!r.devices.empty()) {
    J top = device_peak(r.devices[r.peak_device], t);
    top["device"] = r.devices[r.peak_device].device;
    j["peak"] = top;
  } else {
    j["peak"] = {{"requested_bytes", 0}, {"allocated_bytes", 0}, {"reserved_bytes", 0}, {"event_index", -1},
                 {"time_us", nullptr}, {"device", nullptr}};
  }
  j["devices"] = J::array();
  for (const DeviceReport& d : r.devices) {
    const DeviceReplay& rp = d.replay;
    J dj;
    dj["device"] = d.device;
    dj["events"] = d.events;
    dj["streams"] = rp.streams;
    dj["history"] = !(rp.has_trace && d.events > 0) ? "none" : rp.truncated ? "truncated" : "complete";
    dj["first_time_us"] = d.first_time_us == kNoTime ? J(nullptr) : J(d.first_time_us);
    dj["last_time_us"] = d.last_time_us == kNoTime ? J(nullptr) : J(d.last_time_us);
    dj["peak"] = device_peak(d, t);
    dj["before_first_event"] = counters_json(rp.baseline);
    dj["before_first_event"]["allocations"] = rp.pre_trace_allocations;
    dj["before_first_event"]["allocated_estimated"] = rp.allocated_estimated;
    J live;
    live["allocations"] = d.peak_live_allocations;
    live["requested_bytes"] = d.peak_live_requested;
    live["sites"] = J::array();
    for (const SiteRow& s : d.sites) {
      J sj;
      sj["requested_bytes"] = s.requested_bytes;
      sj["block_bytes"] = s.block_bytes;
      sj["count"] = s.count;
      FrameId uf = user_frame(t, s.stack);
      sj["user_frame"] = uf == UINT32_MAX ? J(nullptr) : frame_json(t, uf);
      sj["stack"] = J::array();
      for (FrameId f : t.stacks.frames(s.stack)) sj["stack"].push_back(frame_json(t, f));
      live["sites"].push_back(sj);
    }
    live["other"] = {{"requested_bytes", d.other_sites.requested_bytes},
                     {"block_bytes", d.other_sites.block_bytes},
                     {"count", d.other_sites.count}};
    dj["live_at_peak"] = live;
    const Fragmentation& f = d.frag;
    dj["fragmentation_at_peak"] = {{"reserved_bytes", f.reserved},
                                   {"allocated_bytes", f.allocated},
                                   {"requested_bytes", f.requested},
                                   {"free_cached_bytes", f.free_cached},
                                   {"pending_free_bytes", f.pending_free},
                                   {"internal_bytes", f.internal},
                                   {"free_blocks", f.free_blocks},
                                   {"largest_free_block_bytes", f.largest_free_block},
                                   {"too_small_threshold_bytes", f.too_small_threshold},
                                   {"too_small_bytes", f.too_small_bytes}};
    J ec;
    ec["have_dump"] = rp.end_check.have_dump;
    ec["matches"] = rp.end_check.matches();
    ec["replay"] = counters_json(rp.end_check.replay);
    ec["dump"] = counters_json(rp.end_check.dump);
    ec["replay_segments"] = rp.end_check.replay_segments;
    ec["dump_segments"] = rp.end_check.dump_segments;
    dj["end_state"] = ec;
    dj["replay_inconsistencies"] = rp.inconsistencies;
    dj["oom_events"] = rp.oom_events;
    j["devices"].push_back(dj);
  }
  j["warnings"] = J::array();
  for (const Warning& w : r.warnings) j["warnings"].push_back({{"code", w.code}, {"message", w.message}});
  return j.dump(2) + "\n";
}

}  // namespace snapdiff
