// The join of a snapshot with a kernel recording of the same run, and the
// kernel each allocation was made for (snapdiff/analysis/kernel_join.hpp,
// docs/capture.md "Joining a recording").
#include "snapdiff/analysis/kernel_join.hpp"
#include "analysis/joins/quantile.hpp"

#include "util/utc_time.hpp"

#include <algorithm>
#include <cstdint>
#include <cmath>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "snapdiff/error.hpp"

namespace snapdiff {

namespace {

// *d = a - b; false when that does not fit int64 (hostile times:
// such a pair is never within any bound).
bool time_diff(int64_t a, int64_t b, int64_t* d) { return !__builtin_sub_overflow(a, b, d); }
int64_t sat_add(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return b > 0 ? INT64_MAX : INT64_MIN;
  return r;
}

struct Window {
  int64_t first = kNoTime, last = kNoTime;
  void add(int64_t t) {
    if (t == kNoTime) return;
    if (first == kNoTime || t < first) first = t;
    if (last == kNoTime || t > last) last = t;
  }
  bool known() const { return first != kNoTime; }
  bool contains(int64_t t, int64_t slack) const {
    return known() && t != kNoTime && t >= sat_add(first, -slack) && t <= sat_add(last, slack);
  }
};

// Driver calls of one process at one device and address that may have made
// a snapshot segment, in time order (unknown times first), searched per
// segment event in O(log n): cudaMalloc's by size, each size's times
// sorted; mappings with a tree of their smallest size over time ranges
// (a mapping serves a segment_map event of at least its size).
// The snapshot's segment_alloc events at one device and address: by size,
// their times (known ones sorted, and how many unknown).
struct SegTimes {
  std::vector<int64_t> known;
  uint64_t unknown = 0;
};

class CallIndex {
 public:
  // How many of the segment_alloc events (by size) match() would match, from
  // the calls' side: every one when the first call of its size has no time,
  // else those without a time and those within the bound of a call (the
  // calls' merged intervals, each counted by binary search). A process's
  // count costs its calls, not the snapshot's events at the address.
  uint64_t alloc_matches(const std::map<uint64_t, SegTimes>& by_size) const {
    uint64_t n = 0;
    for (const auto& [size, times] : allocs_) {
      auto it = by_size.find(size);
      if (it == by_size.end() || times.empty()) continue;
      const SegTimes& st = it->second;
      if (times.front() == kNoTime) {
        n += st.known.size() + st.unknown;
        continue;
      }
      n += st.unknown;
      for (size_t i = 0; i < times.size();) {
        const int64_t lo = sat_add(times[i], -kKernelJoinMaxOffsetUs);
        int64_t hi = sat_add(times[i], kKernelJoinMaxOffsetUs);
        size_t j = i + 1;
        for (; j < times.size() && sat_add(times[j], -kKernelJoinMaxOffsetUs) <= hi; ++j)
          hi = std::max(hi, sat_add(times[j], kKernelJoinMaxOffsetUs));
        n += uint64_t(std::upper_bound(st.known.begin(), st.known.end(), hi) -
                      std::lower_bound(st.known.begin(), st.known.end(), lo));
        i = j;
      }
    }
    return n;
  }

  void add(const DriverMemoryEvent& e) {
    if (e.kind == DriverMemoryKind::Alloc) allocs_[e.size].push_back(e.time_us);
    else maps_.push_back({e.time_us, e.size == 0 ? UINT64_MAX : e.size});
  }
  void finish() {
    for (auto& kv : allocs_) std::stable_sort(kv.second.begin(), kv.second.end());
    std::stable_sort(maps_.begin(), maps_.end(), [](const MapCall& a, const MapCall& b) { return a.time < b.time; });
    n_ = 1;
    while (n_ < maps_.size()) n_ *= 2;
    tree_.assign(2 * n_, UINT64_MAX);
    for (size_t i = 0; i < maps_.size(); ++i) tree_[n_ + i] = maps_[i].size;
    for (size_t i = n_ - 1; i >= 1; --i) tree_[i] = std::min(tree_[2 * i], tree_[2 * i + 1]);
  }
  // The call the original nearest-in-time rule picks for a segment event:
  // none; a match without a time difference (either time unknown: the first
  // call of the right size); or the nearest known time within the bound,
  // the earlier one on a tie. Returns false for none; *delta (snapshot minus
  // recording) and *timed are set for a match.
  bool match(bool map, uint64_t size, int64_t time, int64_t* delta, bool* timed) const {
    const std::vector<int64_t>* times = nullptr;
    if (!map) {
      auto it = allocs_.find(size);
      if (it == allocs_.end()) return false;
      times = &it->second;
    }
    const size_t n = map ? maps_.size() : times->size();
    auto time_of = [&](size_t i) { return map ? maps_[i].time : (*times)[i]; };
    const size_t none = SIZE_MAX;
    auto first_ok = [&](size_t from) { return map ? first_fitting(from, size) : from < n ? from : none; };
    auto last_ok = [&](size_t before) { return map ? last_fitting(before, size) : before > 0 ? before - 1 : none; };
    const size_t f = first_ok(0);
    if (f == none) return false;
    *timed = false;
    *delta = 0;
    if (time == kNoTime || time_of(f) == kNoTime) return true;
    // Every call that fits has a known time from here (unknown ones sort first).
    size_t lo = 0, hi = n;
    while (lo < hi) {
      const size_t mid = lo + (hi - lo) / 2;
      if (time_of(mid) < time) lo = mid + 1;
      else hi = mid;
    }
    const size_t l = last_ok(lo), r = first_ok(lo);
    bool found = false;
    int64_t best = 0;
    for (size_t i : {l, r}) {
      int64_t d = 0;
      if (i == none || !time_diff(time, time_of(i), &d)) continue;
      if (d > kKernelJoinMaxOffsetUs || d < -kKernelJoinMaxOffsetUs) continue;
      if (!found || std::llabs(d) < std::llabs(best)) best = d, found = true;
    }
    if (!found) return false;
    *delta = best;
    *timed = true;
    return true;
  }

 private:
  struct MapCall {
    int64_t time;
    uint64_t size;
  };
  // The first mapping at index >= from whose size is at most `size`.
  size_t first_fitting(size_t from, uint64_t size) const { return descend(1, 0, n_, from, SIZE_MAX, size, true); }
  // The last mapping at index < before whose size is at most `size`.
  size_t last_fitting(size_t before, uint64_t size) const {
    return before == 0 ? SIZE_MAX : descend(1, 0, n_, 0, before, size, false);
  }
  // Within node [nlo, nhi) and the query range [qlo, qhi): the leftmost
  // (or rightmost) leaf with tree value <= size.
  size_t descend(size_t node, size_t nlo, size_t nhi, size_t qlo, size_t qhi, uint64_t size, bool leftmost) const {
    if (maps_.empty() || nhi <= qlo || nlo >= qhi || tree_[node] > size) return SIZE_MAX;
    if (nhi - nlo == 1) return nlo < maps_.size() ? nlo : SIZE_MAX;
    const size_t mid = nlo + (nhi - nlo) / 2;
    const size_t a = leftmost ? descend(2 * node, nlo, mid, qlo, qhi, size, true)
                              : descend(2 * node + 1, mid, nhi, qlo, qhi, size, false);
    if (a != SIZE_MAX) return a;
    return leftmost ? descend(2 * node + 1, mid, nhi, qlo, qhi, size, true)
                    : descend(2 * node, nlo, mid, qlo, qhi, size, false);
  }
  std::map<uint64_t, std::vector<int64_t>> allocs_;  // cudaMalloc's by size: their times
  std::vector<MapCall> maps_;
  size_t n_ = 1;
  std::vector<uint64_t> tree_;  // min size over each node's range of maps_
};

bool pytorch_caller(MemoryCaller c) { return c == MemoryCaller::PyTorch || c == MemoryCaller::Unknown; }

// A driver call that can have made a snapshot segment.
bool segment_call(const DriverMemoryEvent& e) {
  return pytorch_caller(e.caller) && (e.kind == DriverMemoryKind::Alloc || e.kind == DriverMemoryKind::Map);
}

struct Candidate {
  uint32_t pid = 0;
  uint64_t matched = 0, dump_found = 0, kernels = 0;
};

using joins::quantile_of_sorted;

std::string window_text(const Window& w) {
  return utc_time(w.first, true) + " to " + utc_time(w.last, true);
}

// Copies a stack of one Trace into another (frames interned there).
class StackCopier {
 public:
  StackCopier(const Trace& from, Trace& to) : from_(from), to_(to) {}
  StackId copy(StackId s) {
    if (s == 0) return 0;
    if (auto it = memo_.find(s); it != memo_.end()) return it->second;
    const std::vector<FrameId> fs = from_.stacks.frames(s);
    std::vector<FrameId> mapped;
    mapped.reserve(fs.size());
    for (FrameId f : fs) {
      const Frame& fr = from_.frames[f];
      mapped.push_back(to_.intern_frame({str(fr.name), str(fr.file), fr.line}));
    }
    const StackId out = to_.stacks.intern(mapped.data(), mapped.size());
    memo_.emplace(s, out);
    return out;
  }
  StrId str(StrId s) { return s == 0 ? 0 : to_.strings.intern(from_.strings.get(s)); }

 private:
  const Trace& from_;
  Trace& to_;
  std::unordered_map<StackId, StackId> memo_;
};

int64_t shifted(int64_t t, int64_t off) {
  if (t == kNoTime) return t;
  int64_t r = 0;
  if (__builtin_add_overflow(t, off, &r)) return t;
  return r;
}

}  // namespace

Joined<KernelJoin> join_kernel_recording(Trace snapshot, const Trace& recording, const std::string& recording_name,
                                         const std::string& snapshot_name) {
  KernelJoin j;
  j.recording_name = recording_name;
  auto refuse = [&](const std::string& why) {
    InputError e("not a kernel recording of the run of " + snapshot_name + ": " + why);
    e.set_file(recording_name);
    throw e;
  };
  if (recording.kernels.empty() && recording.driver_memory.empty() && recording.device_memory.empty())
    refuse("it holds no kernel launches, driver memory calls or device-memory samples");

  // The snapshot's segment events and its time window.
  struct SegEvent {
    int device;
    uint64_t addr, size;
    int64_t time;
    bool map;
  };
  std::vector<SegEvent> segs;
  Window snap_w;
  std::set<std::pair<int, uint64_t>> dump_addrs;
  for (const Device& d : snapshot.devices) {
    for (const Event& e : d.events) {
      snap_w.add(e.time_us);
      if (e.kind == EventKind::SegmentAlloc || e.kind == EventKind::SegmentMap)
        segs.push_back({d.index, e.addr, e.size, e.time_us, e.kind == EventKind::SegmentMap});
    }
    for (const Segment& s : d.segments) dump_addrs.insert({d.index, s.addr});
  }
  j.segment_events = segs.size();
  j.dump_segments = dump_addrs.size();

  // The recording by process.
  std::map<uint32_t, Candidate> by_pid;
  Window rec_w;
  for (const KernelLaunch& k : recording.kernels) {
    ++by_pid[k.pid].kernels;
    rec_w.add(k.time_us);
  }
  for (const DriverMemoryEvent& e : recording.driver_memory) {
    by_pid[e.pid].pid = e.pid;
    rec_w.add(e.time_us);
  }
  for (const DeviceMemorySample& m : recording.device_memory) {
    by_pid[m.pid].pid = m.pid;
    rec_w.add(m.time_us);
  }
  for (auto& kv : by_pid) kv.second.pid = kv.first;
  j.processes = by_pid.size();

  if (snap_w.known() && rec_w.known() &&
      (snap_w.last < sat_add(rec_w.first, -kKernelJoinMaxOffsetUs) ||
       rec_w.last < sat_add(snap_w.first, -kKernelJoinMaxOffsetUs)))
    refuse("the two were not recorded at the same time (the snapshot's events from " + window_text(snap_w) +
           ", the recording's from " + window_text(rec_w) + ")");

  // Driver calls that may have made a segment, by (device, addr, pid); and
  // what each process still held at its end.
  std::map<std::tuple<int, uint64_t, uint32_t>, CallIndex> calls;
  std::map<uint32_t, std::set<std::pair<int, uint64_t>>> held;
  for (const DriverMemoryEvent& e : recording.driver_memory) {
    if (segment_call(e)) {
      calls[{e.device, e.addr, e.pid}].add(e);
      held[e.pid].insert({e.device, e.addr});
    } else if (e.kind == DriverMemoryKind::Free || e.kind == DriverMemoryKind::Unmap) {
      held[e.pid].erase({e.device, e.addr});
    }
  }
  for (auto& kv : calls) kv.second.finish();

  // Each segment event against every process with calls at its device and
  // address: the call of the segment's size (a mapping: at most the mapped
  // range's), nearest in time and within the bound. A binary search each:
  // a segment made and freed at one address 100,000 times, against as many
  // calls there, used to compare every pair (13 s).
  // Counted per process from its calls (segment_alloc events) or per
  // mapping event (segment_map); the differences only for the process
  // picked, below: many processes with calls at one address used to cost
  // processes x events, in time and in differences kept.
  struct SegsAt {
    std::map<uint64_t, SegTimes> allocs;  // by size
    std::vector<const SegEvent*> maps;
  };
  std::map<std::pair<int, uint64_t>, SegsAt> segs_at;
  for (const SegEvent& s : segs) {
    SegsAt& a = segs_at[{s.device, s.addr}];
    if (s.map) a.maps.push_back(&s);
    else if (s.time == kNoTime) ++a.allocs[s.size].unknown;
    else a.allocs[s.size].known.push_back(s.time);
  }
  for (auto& kv : segs_at)
    for (auto& st : kv.second.allocs) std::sort(st.second.known.begin(), st.second.known.end());
  for (const auto& [key, index] : calls) {
    auto at = segs_at.find({std::get<0>(key), std::get<1>(key)});
    if (at == segs_at.end()) continue;
    Candidate& c = by_pid[std::get<2>(key)];
    c.matched += index.alloc_matches(at->second.allocs);
    for (const SegEvent* s : at->second.maps) {
      int64_t d = 0;
      bool timed = false;
      c.matched += index.match(true, s->size, s->time, &d, &timed);
    }
  }
  for (auto& kv : by_pid) {
    Candidate& c = kv.second;
    if (auto h = held.find(c.pid); h != held.end())
      for (const auto& a : h->second) c.dump_found += dump_addrs.count(a);
  }

  // The process: most matched segment events, then dump-time segments
  // found, then kernels, then the lowest pid.
  const Candidate* pick = nullptr;
  for (const auto& kv : by_pid) {
    const Candidate& c = kv.second;
    if (!pick || std::tie(c.matched, c.dump_found, c.kernels) > std::tie(pick->matched, pick->dump_found, pick->kernels))
      pick = &c;
  }
  if (!pick) refuse("it holds no process");
  // The picked process's differences, segment event by segment event.
  std::vector<double> deltas;
  for (const SegEvent& s : segs) {
    auto it = calls.find({s.device, s.addr, pick->pid});
    int64_t d = 0;
    bool timed = false;
    if (it != calls.end() && it->second.match(s.map, s.size, s.time, &d, &timed) && timed) deltas.push_back(double(d));
  }
  uint64_t segs_in_window = 0;
  for (const SegEvent& s : segs) segs_in_window += rec_w.contains(s.time, 0);
  if (pick->matched == 0 && pick->dump_found == 0 && segs_in_window > 0)
    refuse("none of the snapshot's " + std::to_string(segs_in_window) +
           " segment allocations inside the recording's time window was made by a process of the recording, "
           "and no dump-time segment is at an address one of them holds");
  j.pid = pick->pid;
  j.matched_segments = pick->matched;
  j.dump_segments_found = pick->dump_found;
  int64_t off = 0;
  if (!deltas.empty()) {
    std::vector<double> d = std::move(deltas);
    std::sort(d.begin(), d.end());
    j.offset_measured = true;
    j.offset_us = quantile_of_sorted(d, 0.5);
    j.offset_spread_us = (quantile_of_sorted(d, 0.75) - quantile_of_sorted(d, 0.25)) / 2;
    off = std::llround(j.offset_us);
  }

  // Copy the process's data, shifted onto the snapshot's clock.
  StackCopier cp(recording, snapshot);
  Window proc_w;  // the process's recorded moments, shifted
  const size_t k0 = snapshot.kernels.size();
  for (const KernelLaunch& k : recording.kernels) {
    if (k.pid != j.pid) continue;
    KernelLaunch x = k;
    x.time_us = shifted(k.time_us, off);
    proc_w.add(x.time_us);
    x.name = cp.str(k.name);
    x.stack = cp.copy(k.stack);
    x.op = kNoOp;
    snapshot.kernels.push_back(x);
  }
  j.kernels = snapshot.kernels.size() - k0;
  for (const DriverMemoryEvent& e : recording.driver_memory) {
    if (e.pid != j.pid) continue;
    DriverMemoryEvent x = e;
    x.time_us = shifted(e.time_us, off);
    proc_w.add(x.time_us);
    x.api = cp.str(e.api);
    x.library = cp.str(e.library);
    snapshot.driver_memory.push_back(x);
    ++j.driver_memory_events;
  }
  for (const DeviceMemorySample& m : recording.device_memory) {
    if (m.pid != j.pid) continue;
    DeviceMemorySample x = m;
    x.time_us = shifted(m.time_us, off);
    proc_w.add(x.time_us);
    x.label = cp.str(m.label);
    snapshot.device_memory.push_back(x);
    ++j.samples;
  }
  // Chronological again (a launch of the snapshot's own and one copied at
  // the same microsecond keep their order: the snapshot's first). A profiler
  // join's op_kernels index the kernels: there the copied ones stay after.
  auto by_time = [](const auto& a, const auto& b) {
    const int64_t x = a.time_us == kNoTime ? INT64_MIN : a.time_us, y = b.time_us == kNoTime ? INT64_MIN : b.time_us;
    return x < y;
  };
  if (snapshot.op_kernels.empty()) std::stable_sort(snapshot.kernels.begin(), snapshot.kernels.end(), by_time);
  std::stable_sort(snapshot.driver_memory.begin(), snapshot.driver_memory.end(), by_time);
  std::stable_sort(snapshot.device_memory.begin(), snapshot.device_memory.end(), by_time);

  // The snapshot's allocations against the launches.
  j.recording_first_us = proc_w.first;
  const StreamLaunches launches(snapshot, j.recording_first_us);
  for (const Device& d : snapshot.devices) {
    for (const Event& e : d.events) {
      if (e.kind != EventKind::Alloc) continue;
      ++j.allocations;
      if (e.time_us != kNoTime && proc_w.known() && e.time_us < proc_w.first) ++j.allocations_before_kernels;
      if (e.time_us != kNoTime && launches.first_at_or_after(d.index, e.stream, e.time_us) >= 0)
        ++j.allocations_with_kernel;
    }
  }
  return {std::move(snapshot), std::move(j)};
}

StreamLaunches::StreamLaunches(const Trace& t, int64_t not_before) : not_before_(not_before) {
  std::map<std::pair<int, uint64_t>, List> m;
  std::map<int, int64_t> first;
  for (size_t i = 0; i < t.kernels.size(); ++i) {
    const KernelLaunch& k = t.kernels[i];
    if (k.time_us == kNoTime) continue;
    List& l = m[{k.device, k.stream}];
    l.times.push_back(k.time_us);
    l.kernels.push_back(uint32_t(i));
    auto [it, fresh] = first.emplace(k.device, k.time_us);
    if (!fresh && k.time_us < it->second) it->second = k.time_us;
  }
  for (auto& kv : m) {
    List& l = kv.second;
    // Launches are chronological in a Trace; sorted here all the same (by
    // time, then recorded order).
    if (!std::is_sorted(l.times.begin(), l.times.end())) {
      std::vector<size_t> order(l.times.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return l.times[a] < l.times[b]; });
      List s;
      for (size_t i : order) s.times.push_back(l.times[i]), s.kernels.push_back(l.kernels[i]);
      l = std::move(s);
    }
    lists_.emplace_back(kv.first, std::move(l));
  }
  first_.assign(first.begin(), first.end());
}

const StreamLaunches::List* StreamLaunches::find(int device, uint64_t stream) const {
  auto it = std::lower_bound(lists_.begin(), lists_.end(), std::make_pair(device, stream),
                             [](const auto& e, const std::pair<int, uint64_t>& k) { return e.first < k; });
  return it != lists_.end() && it->first == std::make_pair(device, stream) ? &it->second : nullptr;
}

int64_t StreamLaunches::first_at_or_after(int device, uint64_t stream, int64_t t) const {
  const List* l = find(device, stream);
  if (!l || t == kNoTime || (not_before_ != kNoTime && t < not_before_)) return -1;
  auto it = std::lower_bound(l->times.begin(), l->times.end(), t);
  return it == l->times.end() ? -1 : int64_t(l->kernels[size_t(it - l->times.begin())]);
}

uint64_t StreamLaunches::count_between(int device, uint64_t stream, int64_t from, int64_t to, int64_t* last) const {
  *last = -1;
  const List* l = find(device, stream);
  if (!l || from == kNoTime || to == kNoTime || to < from) return 0;
  const size_t a = size_t(std::lower_bound(l->times.begin(), l->times.end(), from) - l->times.begin());
  const size_t b = size_t(std::upper_bound(l->times.begin(), l->times.end(), to) - l->times.begin());
  if (b <= a) return 0;
  *last = l->kernels[b - 1];
  return b - a;
}

int64_t StreamLaunches::first_time(int device) const {
  auto it = std::lower_bound(first_.begin(), first_.end(), device,
                             [](const std::pair<int, int64_t>& e, int d) { return e.first < d; });
  return it != first_.end() && it->first == device ? it->second : kNoTime;
}

std::vector<AllocationKernels> allocation_kernels(const StreamLaunches& launches, const Device& dev,
                                                  const Attribution& at, const std::vector<uint32_t>& ids,
                                                  int64_t moment) {
  std::vector<AllocationKernels> out(ids.size());
  if (launches.empty()) return out;
  const int64_t n = int64_t(dev.events.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const Allocation& al = at.allocations[ids[i]];
    if (al.alloc_event < 0 || al.alloc_event >= n) continue;
    const Event& e = dev.events[size_t(al.alloc_event)];
    if (e.time_us == kNoTime) continue;
    AllocationKernels& k = out[i];
    k.kernel = launches.first_at_or_after(dev.index, e.stream, e.time_us);
    int64_t end = al.user_free();
    if (moment >= 0 && moment < end) end = moment;
    int64_t end_t = kNoTime;
    if (end >= 0 && end < n) end_t = dev.events[size_t(end)].time_us;
    else if (end >= n) end_t = INT64_MAX;  // alive at the end: every launch after it
    k.while_live = launches.count_between(dev.index, e.stream, e.time_us, end_t, &k.last);
  }
  return out;
}

}  // namespace snapdiff
