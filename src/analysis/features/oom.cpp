// An out-of-memory error explained: the allocator's state at the first oom
// entry of each device, what CUDA said was free then, the cause that follows
// from the two (docs/cli.md, "OUT OF MEMORY"), and what was live.
#include <algorithm>
#include <unordered_map>

#include "analysis/analyze/analyze_parts.hpp"
#include "analysis/analyze/report_view_build.hpp"
#include "snapdiff/analysis/whatif.hpp"
#include "snapdiff/analysis/analysis.hpp"

namespace snapdiff {

const char* oom_cause_name(OomCause c) {
  switch (c) {
    case OomCause::Fragmentation: return "fragmentation";
    case OomCause::ProcessCap: return "process_cap";
    case OomCause::OtherProcesses: return "other_processes";
    case OomCause::DeviceFull: return "device_full";
  }
  return "device_full";
}

bool oom_cause_from_name(std::string_view name, OomCause* out) {
  for (OomCause c : {OomCause::Fragmentation, OomCause::ProcessCap, OomCause::OtherProcesses, OomCause::DeviceFull})
    if (name == oom_cause_name(c)) return *out = c, true;
  return false;
}

namespace detail {

namespace {

constexpr uint64_t kMiB = uint64_t(1) << 20;

// PyTorch's get_allocation_size(): the segment a request that no cached
// block serves asks CUDA for (its "Tried to allocate").
uint64_t segment_for(uint64_t size) {
  if (size <= kMiB) return 2 * kMiB;           // kSmallBuffer, for kSmallSize requests
  if (size < 10 * kMiB) return 20 * kMiB;      // kLargeBuffer, below kMinLargeAlloc
  return (size + 2 * kMiB - 1) / (2 * kMiB) * (2 * kMiB);  // kRoundLarge
}

// to - from in microseconds, saturated at the int64 range (times at its
// extremes are crafted, not measured).
int64_t clamped_us(int64_t from, int64_t to) {
  int64_t d = 0;
  if (__builtin_sub_overflow(to, from, &d)) return to > from ? INT64_MAX : INT64_MIN + 1;
  return d == INT64_MIN || d == kNoTime ? INT64_MIN + 1 : d;
}

// The live allocations after `event` by stack and category, largest first:
// the first `top` rows (written out as --explain writes a site), the rest
// summed into `other`.
void live_rows(const FrameTable& ft, const RuleSet& rules, const Attribution& at, int64_t event, const AllocatorState& st,
               size_t top, OomView& v) {
  std::unordered_map<uint64_t, uint64_t> block_of;
  for (const LiveAllocation& la : st.live) block_of[la.addr] = la.block_size;
  detail::SiteRows rows(at.categories.size());
  v.category_allocations.assign(at.categories.size(), 0);
  for (uint32_t id : at.live_at(event)) {
    const Allocation& al = at.allocations[id];
    auto b = block_of.find(al.addr);
    rows.add(at, al, int64_t(b != block_of.end() ? b->second : al.requested));
    ++v.category_allocations[al.category];
    ++v.live_allocations;
    v.live_requested += int64_t(al.requested);
  }
  detail::keep_top(ft, at, rules, rows.rows(), top, 4, v.sites, v.other_sites);
}

// Why the request failed, from what the allocator held and what CUDA had free.
void decide(OomView& v) {
  // A new segment was refused though CUDA had room for it: not the device.
  v.capped = v.device_free >= v.segment_size;
  // PyTorch refuses a segment when reserved + its size exceeds the cap, and
  // never refused the most it held: the cap is in [max_reserved, reserved + segment).
  v.cap_below = v.held.reserved + int64_t(v.segment_size);
  v.cap_at_least = v.max_reserved < v.cap_below ? v.max_reserved : 0;
  if (v.device_total > 0) v.others = int64_t(v.device_total) - int64_t(v.device_free) - v.held.reserved;
  // Fragmentation: enough free cache where the request could use it, no
  // block large enough. Expandable segments grow one segment page by page,
  // so their free pieces are not what stands in the way.
  const bool fragmented = !v.expandable && v.stream_free >= int64_t(v.request) && v.stream_largest_free < v.request;
  if (fragmented) v.cause = OomCause::Fragmentation;
  else if (v.capped) v.cause = OomCause::ProcessCap;
  else if (v.device_total > 0 && v.held.reserved * 2 < int64_t(v.device_total)) v.cause = OomCause::OtherProcesses;
  else v.cause = OomCause::DeviceFull;
  // With expandable segments the allocator would have needed what is
  // allocated plus the request mapped; it is known to be able to hold the
  // most it held under a cap, or what it held plus CUDA's free bytes.
  v.expandable_need = v.held.allocated + int64_t(v.request);
  v.expandable_room = v.capped ? std::max(v.max_reserved, v.held.reserved) : v.held.reserved + int64_t(v.device_free);
  v.expandable_fits = v.expandable_need <= v.expandable_room;
}

// The settings the OOM section tries: those users reach for first.
const char* const kOomSettings[] = {"expandable_segments:True", "max_split_size_mb:128", "max_split_size_mb:512",
                                    "garbage_collection_threshold:0.8"};

// OomView::whatif_*: the model, where the limit is known and the model
// reproduces this error under the recorded settings.
// `rp` is the device's replay, made by analyze(): the model runs on it
// instead of replaying the run again.
void whatif_at(const Trace& trace, const Device& dev, const DeviceReplay& rp, OomView& v) {
  for (const Segment& s : dev.segments)
    if (s.pool_id[0] != 0 || s.pool_id[1] != 0) return;  // private pools: not modelled
  int64_t low = 0, high = 0;  // the limit lies in [low, high]
  if (v.capped) {
    if (v.cap_below <= v.cap_at_least) return;
    low = v.cap_at_least;
    high = v.cap_below - 1;
  } else {
    if (v.device_free == 0) return;
    low = high = v.held.reserved + int64_t(v.device_free);
  }
  const AllocConf recorded = alloc_conf_of(trace.settings);
  std::vector<AllocConf> confs;
  for (const char* c : kOomSettings) {
    AllocConf a = parse_alloc_conf(c);
    if (a.expandable_segments == recorded.expandable_segments && a.max_split_size == recorded.max_split_size &&
        a.garbage_collection_threshold == recorded.garbage_collection_threshold)
      continue;
    if (a.garbage_collection_threshold > 0 && !v.capped) continue;  // acts only under a cap
    confs.push_back(a);
  }
  WhatIfOptions o;
  o.threads = 1;
  o.limit_is_fraction = v.capped;
  o.memory_limit = high;
  v.whatif_run = true;
  // Under the largest limit possible the recorded settings must still fail here.
  if (whatif_device(trace) != &dev) return;  // the model takes the device with the most allocations
  const WhatIfResult hi = what_if(trace, dev, rp, {}, o);
  if (!hi.calibration.oom || hi.calibration.oom->event_index != v.event_index) return;
  v.whatif_reproduced = true;
  o.memory_limit = low;
  const WhatIfResult lo = what_if(trace, dev, rp, confs, o);
  for (const WhatIfScenario& s : lo.scenarios) {
    v.whatif_tried.push_back(s.alloc_conf);
    if (!s.oom || s.oom->event_index > v.event_index) v.whatif_fit.push_back(s.alloc_conf);
  }
}

OomView explain_device(const Trace& trace, const Device& dev, const DeviceAnalysis& d, const Analysis& r,
                       size_t top) {
  OomView v;
  v.device = d.device;
  v.errors = d.replay.oom_events;
  for (size_t i = 0; i < dev.events.size(); ++i)
    if (dev.events[i].kind == EventKind::Oom) {
      v.event_index = int64_t(i);
      break;
    }
  const Event& e = dev.events[size_t(v.event_index)];
  v.time_us = e.time_us;
  if (e.time_us != kNoTime && d.first_time_us != kNoTime) v.since_first_event_us = clamped_us(d.first_time_us, e.time_us);
  v.phase = d.attr.phase_at(v.event_index);
  v.iteration = d.attr.iteration_at(v.event_index);
  v.stream = e.stream;
  const FrameTable& ft = *r.frames;
  if (e.stack != 0) {
    const FrameId uf = ft.user_frame(e.stack);
    if (uf != kNoFrame) v.user_frame = frame_ref(ft, uf);
    v.site = site_frames(ft, e.stack);
  }
  v.request = e.size;  // params.size(): already rounded
  v.segment_size = segment_for(e.size);
  v.expandable = trace.settings.expandable_segments;
  v.device_free = e.addr;  // an oom entry's addr is CUDA's free bytes
  const DeviceMemorySample* nearest = nullptr;
  auto distance = [&](const DeviceMemorySample& m) {
    return m.time_us == kNoTime || e.time_us == kNoTime ? UINT64_MAX
           : m.time_us > e.time_us                      ? uint64_t(m.time_us) - uint64_t(e.time_us)
                                                        : uint64_t(e.time_us) - uint64_t(m.time_us);
  };
  for (const DeviceMemorySample& m : trace.device_memory)
    if (m.device == d.device && m.total_bytes > 0) {
      if (v.device_total == 0) v.device_total = m.total_bytes;
      if (!nearest || distance(m) < distance(*nearest)) nearest = &m;
    }
  if (v.device_free == 0 && nearest) {
    v.device_free = nearest->free_bytes;
    v.free_sample = std::string(trace.strings.get(nearest->label));
    if (v.free_sample.empty()) v.free_sample = "unlabelled";
  }
  // The allocator right after the oom entry: PyTorch writes it once it has
  // returned every cached segment it could, so this is the state it failed in.
  const AllocatorState st = allocator_state_at(trace, dev, v.event_index);
  v.held = st.counters;
  v.pending_free = int64_t(st.pending_free_bytes);
  const bool small = e.size <= kMiB;
  for (const FreeBlockInfo& fb : st.free_blocks) {
    v.free_cached += int64_t(fb.size);
    ++v.free_blocks;
    v.largest_free_block = std::max(v.largest_free_block, fb.size);
    if (fb.pool != 0 || fb.stream != e.stream || (!fb.expandable && fb.small != small)) continue;
    v.stream_free += int64_t(fb.size);
    ++v.stream_free_blocks;
    v.stream_largest_free = std::max(v.stream_largest_free, fb.size);
  }
  v.max_reserved = d.replay.baseline.reserved;
  for (int64_t i = 0; i <= v.event_index; ++i) v.max_reserved = std::max(v.max_reserved, d.replay.reserved[size_t(i)]);
  decide(v);
  whatif_at(trace, dev, d.replay, v);
  // Live at the oom entry, by category and site.
  v.category_names = d.attr.categories;
  v.categories = d.attr.categories_at({v.event_index})[0];
  live_rows(ft, *r.rules, d.attr, v.event_index, st, top, v);
  return v;
}

}  // namespace

void explain_ooms(const Trace& trace, Analysis& r, size_t top_sites) {
  for (const DeviceAnalysis& d : r.devices) {
    if (d.replay.oom_events == 0 || d.replay.reported_totals) continue;
    const Device* dev = trace.find_device(d.device);
    if (!dev) continue;
    r.ooms.push_back(explain_device(trace, *dev, d, r, top_sites));
  }
}

}  // namespace detail
}  // namespace snapdiff
