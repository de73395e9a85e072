// Replay of PyTorch's CUDACachingAllocator block layout.
//
// The rules (c10/cuda/CUDACachingAllocator.cpp, PyTorch 2.x):
//  * a request is rounded up to 512 bytes (round_size; optionally to
//    power-of-two divisions), requests <= 1 MiB use the small pool;
//  * an allocation takes a free block; the recorded address tells which. The
//    block is split when the remainder is >= 512 bytes (small pool, or any
//    expandable segment) or > 1 MiB (large pool, and only below
//    max_split_size); otherwise the whole block is handed out, and
//    allocated_bytes counts the whole block;
//  * allocated/requested bytes drop at free_requested; the block returns to
//    the pool (merging with free neighbours of the same segment) at
//    free_completed;
//  * reserved bytes change at segment_alloc/free and segment_map/unmap.
// When the history is truncated (the ring buffer wrapped), the state before
// the first event is rebuilt from frees of unseen allocations and from the
// blocks alive at dump time.
#include <algorithm>
#include <map>
#include <optional>
#include <unordered_map>

#include "analysis/addr_map.hpp"
#include "snapdiff/analysis/replay.hpp"
#include "snapdiff/error.hpp"
#include "util/hugepages.hpp"

namespace snapdiff {

namespace {
constexpr uint64_t kMinBlock = 512;
constexpr uint64_t kSmallSize = uint64_t(1) << 20;
constexpr size_t kMaxNotes = 8;
}  // namespace

uint64_t allocator_round_size(uint64_t size, const AllocatorSettings& s) {
  if (size < kMinBlock) return kMinBlock;
  uint64_t divisions = 0;
  if (!s.roundup_power2_divisions.empty()) {
    uint64_t mb = size >> 20;
    size_t idx = mb == 0 ? 0 : size_t(63 - __builtin_clzll(mb));
    if (idx >= s.roundup_power2_divisions.size()) idx = s.roundup_power2_divisions.size() - 1;
    divisions = s.roundup_power2_divisions[idx];
  }
  if (divisions > 1 && size > kMinBlock * divisions) {
    if ((size & (size - 1)) == 0) return size;
    uint64_t floor2 = uint64_t(1) << (63 - __builtin_clzll(size));
    uint64_t div = floor2 >> (63 - __builtin_clzll(divisions));
    if (div == 0) return floor2 << 1;
    uint64_t rf = size & ~(div - 1);
    return rf == size ? size : rf + div;
  }
  if (size > UINT64_MAX - kMinBlock) return size;
  return kMinBlock * ((size + kMinBlock - 1) / kMinBlock);
}

namespace {

enum class BS : uint8_t { Free, Alloc, Pending };

// Counter updates wrap instead of overflowing (no undefined behaviour on
// hostile sizes). The readers refuse any size beyond kMaxDeviceBytes and
// the counters are checked against it after every event (check_total), so
// they never come near a wrap: a few hundred sizes just below 2^56 once
// summed to a negative peak, 257 dumped segments to a reserved total of
// 1000 bytes.
inline void wadd(int64_t& c, uint64_t v) { c = int64_t(uint64_t(c) + v); }
inline void wsub(int64_t& c, uint64_t v) { c = int64_t(uint64_t(c) - v); }

inline bool beyond_device(int64_t c) {
  return c > int64_t(kMaxDeviceBytes) || c < -int64_t(kMaxDeviceBytes);
}
// All three within +-2^50: one comparison (each shifted into [0, 2^51]; the
// OR of such values passes 2^51 only when one is beyond, or at the very
// edge, where check_counters decides).
inline bool maybe_beyond(const Counters& c) {
  constexpr uint64_t k = kMaxDeviceBytes;
  return ((uint64_t(c.requested) + k) | (uint64_t(c.allocated) + k) | (uint64_t(c.reserved) + k)) >= 2 * k;
}
// `where`: "event 17" or "before the first event"; `what`: "allocated".
[[noreturn, gnu::noinline]] void refuse_total(int device, const std::string& where, const char* what, int64_t v) {
  throw InputError("device " + std::to_string(device) + ", " + where + ": the " + what + " bytes come to " +
                   std::to_string(v) + ", beyond what any device holds (2^50 bytes): the input is corrupt");
}
inline void check_total(int device, const std::string& where, const char* what, int64_t v) {
  if (beyond_device(v)) refuse_total(device, where, what, v);
}
void check_counters(int device, const std::string& where, const Counters& c) {
  check_total(device, where, "requested", c.requested);
  check_total(device, where, "allocated", c.allocated);
  check_total(device, where, "reserved", c.reserved);
}

struct RBlock {
  uint64_t addr, size, requested, stream;
  int64_t alloc_event;
  StackId stack;
  int32_t seg;  // -1: outside any known segment (inconsistent input)
  BS state;
  bool live;
};

struct RSeg {
  uint64_t addr, size;
  bool expandable, live;
};

class Replayer {
 public:
  Replayer(const Trace& t, const Device& d) : trace_(t), dev_(d) {}

  DeviceReplay out;

  void reconstruct_initial_state();
  void step(size_t i);
  void finish_end_check();
  AllocatorState state() const;
  const Counters& counters() const { return c_; }

 private:
  void note(size_t i, const std::string& msg) {
    ++out.inconsistencies;
    if (out.notes.size() < kMaxNotes) out.notes.push_back("event " + std::to_string(i) + ": " + msg);
  }
  uint32_t new_block(uint64_t addr, uint64_t size, int32_t seg, BS st) {
    uint32_t id;
    if (!free_slots_.empty()) {
      id = free_slots_.back();
      free_slots_.pop_back();
    } else {
      id = uint32_t(blocks_.size());
      blocks_.emplace_back();
    }
    RBlock& b = blocks_[id];
    b = RBlock{addr, size, 0, 0, -1, 0, seg, st, true};
    by_start_.put(addr, id);
    by_end_.put(addr + size, id);
    return id;
  }
  void drop_block(uint32_t id) {
    RBlock& b = blocks_[id];
    if (by_start_.find(b.addr) == id) by_start_.erase(b.addr);
    if (by_end_.find(b.addr + b.size) == id) by_end_.erase(b.addr + b.size);
    b.live = false;
    free_slots_.push_back(id);
  }
  void resize_block(uint32_t id, uint64_t new_addr, uint64_t new_size) {
    RBlock& b = blocks_[id];
    if (by_start_.find(b.addr) == id) by_start_.erase(b.addr);
    if (by_end_.find(b.addr + b.size) == id) by_end_.erase(b.addr + b.size);
    b.addr = new_addr;
    b.size = new_size;
    by_start_.put(b.addr, id);
    by_end_.put(b.addr + b.size, id);
  }
  bool mergeable(uint32_t a, const RBlock& b) const {
    if (a == detail::AddrMap::kNone) return false;
    const RBlock& n = blocks_[a];
    return n.live && n.state == BS::Free && n.seg == b.seg && n.seg >= 0;
  }
  // Merge free block `id` with its free neighbours; returns the surviving id.
  uint32_t coalesce(uint32_t id) {
    RBlock& b = blocks_[id];
    uint32_t nx = by_start_.find(b.addr + b.size);
    if (nx != id && mergeable(nx, b)) {
      uint64_t add = blocks_[nx].size;
      drop_block(nx);
      resize_block(id, blocks_[id].addr, blocks_[id].size + add);
    }
    uint32_t pv = by_end_.find(blocks_[id].addr);
    if (pv != id && mergeable(pv, blocks_[id])) {
      uint64_t add = blocks_[id].size;
      drop_block(id);
      resize_block(pv, blocks_[pv].addr, blocks_[pv].size + add);
      return pv;
    }
    return id;
  }
  bool seg_expandable(int32_t s) const { return s >= 0 && segs_[size_t(s)].expandable; }
  // The counters after each addition of the rebuilt initial state (sizes at
  // most 2^50 each: one check per addition keeps every sum from wrapping).
  void guard_initial() const {
    if (beyond_device(c_.requested) || beyond_device(c_.allocated) || beyond_device(c_.reserved))
      check_counters(dev_.index, "before the first event", c_);
  }

  void do_alloc(size_t i, const Event& e);
  void do_free_requested(size_t i, uint64_t addr, bool quiet);
  void do_free_completed(size_t i, const Event& e);
  void do_segment_alloc(size_t i, const Event& e);
  void do_segment_free(size_t i, const Event& e);
  void do_map(size_t i, const Event& e);
  void do_unmap(size_t i, const Event& e);

  const Trace& trace_;
  const Device& dev_;
  Counters c_;
  std::vector<RBlock> blocks_;
  std::vector<uint32_t> free_slots_;
  std::vector<RSeg> segs_;
  detail::AddrMap by_start_, by_end_, seg_by_addr_;
};

void Replayer::do_alloc(size_t i, const Event& e) {
  uint64_t r = allocator_round_size(e.size, trace_.settings);
  uint32_t id = by_start_.find(e.addr);
  if (id != detail::AddrMap::kNone && blocks_[id].state != BS::Free) {
    note(i, "alloc at an address that is still allocated; treating the old block as freed");
    if (blocks_[id].state == BS::Alloc) do_free_requested(i, e.addr, true);
    blocks_[id].state = BS::Free;
    id = coalesce(id);
    id = by_start_.find(e.addr);
  }
  if (id == detail::AddrMap::kNone || blocks_[id].size < r) {
    if (id == detail::AddrMap::kNone) note(i, "alloc outside every free block of the replayed layout");
    else note(i, "alloc larger than the free block at its address");
    if (id != detail::AddrMap::kNone) drop_block(id);
    id = new_block(e.addr, r, -1, BS::Free);
  }
  RBlock& b = blocks_[id];
  uint64_t remaining = b.size - r;
  bool small = e.size <= kSmallSize;
  bool split;
  if (small || seg_expandable(b.seg) || trace_.settings.expandable_segments) {
    split = remaining >= kMinBlock;
  } else {
    int64_t mss = trace_.settings.max_split_size;
    split = (mss < 0 || r < uint64_t(mss)) && remaining > kSmallSize;
  }
  if (split) {
    int32_t seg = b.seg;
    uint64_t rest_addr = b.addr + r;
    resize_block(id, b.addr, r);
    new_block(rest_addr, remaining, seg, BS::Free);
  }
  RBlock& a = blocks_[id];
  a.state = BS::Alloc;
  a.requested = e.size;
  a.stack = e.stack;
  a.stream = e.stream;
  a.alloc_event = int64_t(i);
  wadd(c_.requested, e.size);
  wadd(c_.allocated, a.size);
}

void Replayer::do_free_requested(size_t i, uint64_t addr, bool quiet) {
  uint32_t id = by_start_.find(addr);
  if (id == detail::AddrMap::kNone || blocks_[id].state != BS::Alloc) {
    if (!quiet) note(i, "free of an address that is not allocated");
    return;
  }
  RBlock& b = blocks_[id];
  b.state = BS::Pending;
  wsub(c_.requested, b.requested);
  wsub(c_.allocated, b.size);
}

void Replayer::do_free_completed(size_t i, const Event& e) {
  uint32_t id = by_start_.find(e.addr);
  if (id == detail::AddrMap::kNone || blocks_[id].state == BS::Free) {
    note(i, "free_completed of an address that is not allocated");
    return;
  }
  if (blocks_[id].state == BS::Alloc) do_free_requested(i, e.addr, true);
  RBlock& b = blocks_[id];
  if (b.seg < 0) {  // orphan from inconsistent input: forget it
    drop_block(id);
    return;
  }
  b.state = BS::Free;
  b.requested = 0;
  b.stack = 0;
  coalesce(id);
}

void Replayer::do_segment_alloc(size_t i, const Event& e) {
  wadd(c_.reserved, e.size);
  if (by_start_.find(e.addr) != detail::AddrMap::kNone) note(i, "segment_alloc over an existing block");
  int32_t s = int32_t(segs_.size());
  segs_.push_back({e.addr, e.size, false, true});
  seg_by_addr_.put(e.addr, uint32_t(s));
  new_block(e.addr, e.size, s, BS::Free);
}

void Replayer::do_segment_free(size_t i, const Event& e) {
  wsub(c_.reserved, e.size);
  uint32_t s = seg_by_addr_.find(e.addr);
  if (s != detail::AddrMap::kNone) {
    segs_[s].live = false;
    seg_by_addr_.erase(e.addr);
  }
  uint32_t id = by_start_.find(e.addr);
  if (id == detail::AddrMap::kNone || blocks_[id].state != BS::Free || blocks_[id].size != e.size) {
    note(i, "segment_free of a segment that is not entirely free in the replayed layout");
    // Drop whatever lies inside the range so the layout stays consistent.
    for (uint32_t b = 0; b < blocks_.size(); ++b)
      if (blocks_[b].live && blocks_[b].addr >= e.addr && blocks_[b].addr < e.addr + e.size) {
        if (blocks_[b].state == BS::Alloc) {
          wsub(c_.requested, blocks_[b].requested);
          wsub(c_.allocated, blocks_[b].size);
        }
        drop_block(b);
      }
    return;
  }
  drop_block(id);
}

void Replayer::do_map(size_t i, const Event& e) {
  (void)i;
  wadd(c_.reserved, e.size);
  // Which expandable segment: the one whose mapped part ends here or starts
  // right after; otherwise a new one.
  int32_t seg = -1;
  uint32_t pv = by_end_.find(e.addr);
  uint32_t nx = by_start_.find(e.addr + e.size);
  if (pv != detail::AddrMap::kNone && seg_expandable(blocks_[pv].seg)) seg = blocks_[pv].seg;
  else if (nx != detail::AddrMap::kNone && seg_expandable(blocks_[nx].seg)) seg = blocks_[nx].seg;
  if (seg < 0) {
    seg = int32_t(segs_.size());
    segs_.push_back({e.addr, e.size, true, true});
  }
  uint32_t id = new_block(e.addr, e.size, seg, BS::Free);
  coalesce(id);
}

void Replayer::do_unmap(size_t i, const Event& e) {
  wsub(c_.reserved, e.size);
  uint32_t hit = detail::AddrMap::kNone;
  for (uint32_t b = 0; b < blocks_.size(); ++b) {
    const RBlock& x = blocks_[b];
    if (x.live && x.addr <= e.addr && e.addr + e.size <= x.addr + x.size) {
      hit = b;
      break;
    }
  }
  if (hit == detail::AddrMap::kNone || blocks_[hit].state != BS::Free) {
    note(i, "segment_unmap of a range that is not free in the replayed layout");
    return;
  }
  RBlock b = blocks_[hit];
  drop_block(hit);
  if (b.addr < e.addr) new_block(b.addr, e.addr - b.addr, b.seg, BS::Free);
  if (e.addr + e.size < b.addr + b.size)
    new_block(e.addr + e.size, b.addr + b.size - (e.addr + e.size), b.seg, BS::Free);
}

void Replayer::step(size_t i) {
  const Event& e = dev_.events[i];
  switch (e.kind) {
    case EventKind::Alloc: do_alloc(i, e); break;
    case EventKind::FreeRequested: do_free_requested(i, e.addr, false); break;
    case EventKind::FreeCompleted: do_free_completed(i, e); break;
    case EventKind::SegmentAlloc: do_segment_alloc(i, e); break;
    case EventKind::SegmentFree: do_segment_free(i, e); break;
    case EventKind::SegmentMap: do_map(i, e); break;
    case EventKind::SegmentUnmap: do_unmap(i, e); break;
    case EventKind::Oom: ++out.oom_events; break;
    default: break;
  }
}

// Rebuilds what was live before the first recorded event.
void Replayer::reconstruct_initial_state() {
  const auto& ev = dev_.events;
  struct Pre {
    uint64_t addr, requested, size, stream;
    StackId stack;
    bool exact_size, pending;
  };
  std::vector<Pre> pre;
  // 0 = unseen, 1 = allocated in trace, 2 = pending in trace
  detail::AddrMap st;
  std::vector<std::pair<uint64_t, uint64_t>> pre_segments;  // (addr,size) freed/unmapped but never created
  detail::AddrMap seg_seen;
  std::vector<std::pair<uint64_t, uint64_t>> mapped_in_trace;
  detail::AddrMap created;  // every address a segment_alloc names
  for (size_t i = 0; i < ev.size(); ++i) {
    const Event& e = ev[i];
    switch (e.kind) {
      case EventKind::Alloc: st.put(e.addr, 1); break;
      case EventKind::FreeRequested: {
        uint32_t s = st.find(e.addr);
        if (s != 1) pre.push_back({e.addr, e.size, 0, e.stream, e.stack, false, false});
        st.put(e.addr, 2);
        break;
      }
      case EventKind::FreeCompleted: {
        uint32_t s = st.find(e.addr);
        if (s == detail::AddrMap::kNone) pre.push_back({e.addr, e.size, 0, e.stream, e.stack, false, true});
        st.erase(e.addr);
        break;
      }
      case EventKind::SegmentAlloc:
        seg_seen.put(e.addr, 1);
        created.put(e.addr, 1);
        break;
      case EventKind::SegmentFree:
        if (seg_seen.find(e.addr) == detail::AddrMap::kNone) pre_segments.push_back({e.addr, e.size});
        seg_seen.erase(e.addr);
        break;
      case EventKind::SegmentMap: mapped_in_trace.push_back({e.addr, e.size}); break;
      case EventKind::SegmentUnmap: {
        bool seen = false;
        for (auto& m : mapped_in_trace)
          if (m.first <= e.addr && e.addr + e.size <= m.first + m.second) seen = true;
        if (!seen) pre_segments.push_back({e.addr, e.size});
        break;
      }
      default: break;
    }
  }
  // Blocks alive at dump time but never allocated in the trace.
  for (const Segment& sg : dev_.segments) {
    for (uint32_t k = 0; k < sg.block_count; ++k) {
      const Block& b = dev_.blocks[sg.first_block + k];
      if (b.state == BlockState::Inactive) continue;
      uint32_t s = st.find(b.addr);
      if (b.state == BlockState::ActiveAllocated && s != 1)
        pre.push_back({b.addr, b.requested_size, b.size, sg.stream, b.stack, true, false});
      else if (b.state == BlockState::ActivePendingFree && s == detail::AddrMap::kNone)
        pre.push_back({b.addr, b.requested_size, b.size, sg.stream, b.stack, true, true});
    }
  }
  // Segments present before the first event: dump segments not created in
  // the trace, plus segments released in the trace but never created.
  struct Seg0 {
    uint64_t addr, size;
    bool expandable;
  };
  std::vector<Seg0> seg0;
  for (const Segment& sg : dev_.segments) {
    if (sg.expandable) {
      // Mapped extent at dump minus what the trace mapped (approximate when
      // pages were mapped and unmapped repeatedly).
      uint64_t lo = sg.addr, hi = sg.addr + sg.total_size;
      std::vector<std::pair<uint64_t, uint64_t>> cut;
      for (auto& m : mapped_in_trace)
        if (m.first < hi && m.first + m.second > lo) cut.push_back(m);
      std::sort(cut.begin(), cut.end());
      uint64_t cur = lo;
      for (auto& m : cut) {
        if (m.first > cur) seg0.push_back({cur, m.first - cur, true});
        cur = std::max(cur, m.first + m.second);
      }
      if (cur < hi) seg0.push_back({cur, hi - cur, true});
    } else if (created.find(sg.addr) == detail::AddrMap::kNone) {
      seg0.push_back({sg.addr, sg.total_size, false});
    }
  }
  for (auto& p : pre_segments) seg0.push_back({p.first, p.second, dev_.segments.empty() ? false : trace_.settings.expandable_segments});
  std::sort(seg0.begin(), seg0.end(), [](const Seg0& a, const Seg0& b) { return a.addr < b.addr; });
  std::sort(pre.begin(), pre.end(), [](const Pre& a, const Pre& b) { return a.addr < b.addr; });

  bool truncated = !pre.empty() || !pre_segments.empty();
  // A trace that exists but whose dump shows segments it never created also
  // started mid-run.
  if (dev_.has_trace && !seg0.empty()) truncated = true;
  out.truncated = truncated && dev_.has_trace;
  out.pre_trace_allocations = 0;

  size_t pi = 0;
  for (const Seg0& s0 : seg0) {
    int32_t sid = int32_t(segs_.size());
    segs_.push_back({s0.addr, s0.size, s0.expandable, true});
    if (!s0.expandable) seg_by_addr_.put(s0.addr, uint32_t(sid));
    wadd(c_.reserved, s0.size);
    guard_initial();
    uint64_t cur = s0.addr, end = s0.addr + s0.size;
    while (pi < pre.size() && pre[pi].addr < s0.addr) {  // outside every segment
      ++pi;
    }
    for (; pi < pre.size() && pre[pi].addr < end; ++pi) {
      Pre& p = pre[pi];
      if (p.addr < cur) continue;  // overlaps the previous one: inconsistent, skip
      uint64_t next = (pi + 1 < pre.size() && pre[pi + 1].addr < end) ? pre[pi + 1].addr : end;
      uint64_t size = p.size;
      if (!p.exact_size) {
        uint64_t r = allocator_round_size(p.requested, trace_.settings);
        uint64_t gap = next > p.addr + r ? next - (p.addr + r) : 0;
        bool small = p.requested <= kSmallSize;
        size = (gap > 0 && ((small || s0.expandable) ? gap < kMinBlock : gap <= kSmallSize)) ? next - p.addr : r;
        out.allocated_estimated = true;
      }
      if (p.addr + size > end) size = end - p.addr;
      if (p.addr > cur) new_block(cur, p.addr - cur, sid, BS::Free);
      uint32_t id = new_block(p.addr, size, sid, p.pending ? BS::Pending : BS::Alloc);
      RBlock& b = blocks_[id];
      b.requested = p.requested;
      b.stack = p.stack;
      b.stream = p.stream;
      b.alloc_event = -1;
      if (!p.pending) {
        wadd(c_.requested, p.requested);
        wadd(c_.allocated, size);
        ++out.pre_trace_allocations;
        guard_initial();
      }
      cur = p.addr + size;
    }
    if (cur < end) new_block(cur, end - cur, sid, BS::Free);
  }
  // Pre-trace allocations outside every known segment: keep them as orphans.
  for (const Pre& p : pre) {
    if (by_start_.find(p.addr) != detail::AddrMap::kNone) continue;
    uint64_t size = p.exact_size ? p.size : allocator_round_size(p.requested, trace_.settings);
    uint32_t id = new_block(p.addr, size, -1, p.pending ? BS::Pending : BS::Alloc);
    blocks_[id].requested = p.requested;
    blocks_[id].stack = p.stack;
    blocks_[id].stream = p.stream;
    if (!p.pending) {
      wadd(c_.requested, p.requested);
      wadd(c_.allocated, size);
      ++out.pre_trace_allocations;
      guard_initial();
    }
  }
  check_counters(dev_.index, "before the first event", c_);
  out.baseline = c_;
}

void Replayer::finish_end_check() {
  out.end = c_;
  EndStateCheck& ck = out.end_check;
  ck.replay = c_;
  ck.have_dump = !dev_.segments.empty() || dev_.has_trace;
  for (const Segment& sg : dev_.segments) {
    wadd(ck.dump.reserved, sg.total_size);
    for (uint32_t k = 0; k < sg.block_count; ++k) {
      const Block& b = dev_.blocks[sg.first_block + k];
      if (b.state == BlockState::ActiveAllocated) {
        wadd(ck.dump.allocated, b.size);
        wadd(ck.dump.requested, b.requested_size);
      }
    }
    // Each size is at most 2^50 (the readers): checked per segment, no sum wraps.
    if (beyond_device(ck.dump.requested) || beyond_device(ck.dump.allocated) || beyond_device(ck.dump.reserved))
      check_counters(dev_.index, "the dumped segments", ck.dump);
  }
  ck.dump_segments = dev_.segments.size();
  for (const RSeg& s : segs_) ck.replay_segments += s.live ? 1 : 0;
}

AllocatorState Replayer::state() const {
  AllocatorState st;
  st.counters = c_;
  for (const RBlock& b : blocks_) {
    if (!b.live) continue;
    if (b.state == BS::Alloc)
      st.live.push_back({b.addr, b.requested, b.size, b.stream, b.stack, b.alloc_event});
    else if (b.state == BS::Free)
      st.free_blocks.push_back({b.addr, b.size, seg_expandable(b.seg)});
    else
      st.pending_free_bytes += b.size;
  }
  return st;
}

// Profiler traces: no block layout to replay. Event sizes are block sizes,
// so the requested counter is the running sum of the events from what was
// allocated before the first one (= allocated, checked against the totals
// the trace reported); allocated and reserved are those totals.
struct ReportedLive {
  std::vector<LiveAllocation> pre;  // allocated before the first event (freed in it), and the rest as one
  uint64_t residual = 0;
};

ReportedLive reported_pre_trace(const Device& dev, DeviceReplay* out) {
  ReportedLive r;
  detail::AddrMap live;
  int64_t pre_sum = 0;
  for (size_t i = 0; i < dev.events.size(); ++i) {
    const Event& e = dev.events[i];
    if (e.kind == EventKind::Alloc) {
      live.put(e.addr, 1);
    } else if (e.kind == EventKind::FreeRequested) {
      if (live.find(e.addr) == detail::AddrMap::kNone) {
        r.pre.push_back({e.addr, e.size, e.size, e.stream, e.stack, -1});
        wadd(pre_sum, e.size);
        check_total(dev.index, "event " + std::to_string(i), "freed-before-the-trace", pre_sum);
      } else {
        live.erase(e.addr);
      }
    }
  }
  int64_t residual = int64_t(uint64_t(dev.allocated_before) - uint64_t(pre_sum));
  if (residual < 0) {
    if (out) {
      ++out->inconsistencies;
      if (out->notes.size() < kMaxNotes)
        out->notes.push_back("the trace frees " + std::to_string(pre_sum) + " bytes allocated before its first event, more than the " +
                             std::to_string(dev.allocated_before) + " it reports allocated then");
    }
    residual = 0;
  }
  r.residual = uint64_t(residual);
  return r;
}

DeviceReplay replay_reported(const Device& dev) {
  DeviceReplay out;
  out.device = dev.index;
  out.has_trace = dev.has_trace;
  out.reported_totals = true;
  ReportedLive pre = reported_pre_trace(dev, &out);
  const size_t n = dev.events.size();
  out.baseline.requested = out.baseline.allocated = dev.allocated_before;
  out.baseline.reserved = n ? dev.reported_reserved[0] : 0;
  out.pre_trace_allocations = pre.pre.size() + (pre.residual > 0 ? 1 : 0);
  out.truncated = dev.allocated_before > 0 || !pre.pre.empty();
  auto take = [&](PeakPoint& p, int64_t v, int64_t idx) {
    if (v > p.bytes || (p.event_index == -1 && idx == -1)) {
      p.bytes = v;
      p.event_index = idx;
      p.time_us = idx >= 0 ? dev.events[size_t(idx)].time_us : kNoTime;
    }
  };
  take(out.peak_requested, out.baseline.requested, -1);
  take(out.peak_allocated, out.baseline.allocated, -1);
  take(out.peak_reserved, out.baseline.reserved, -1);
  out.requested.reserve(n);
  out.allocated.reserve(n);
  out.reserved.reserve(n);
  int64_t sum = dev.allocated_before;
  bool any_alloc = false;
  for (size_t i = 0; i < n; ++i) {
    const Event& e = dev.events[i];
    if (e.kind == EventKind::Alloc) wadd(sum, e.size), any_alloc = true;
    else if (e.kind == EventKind::FreeRequested) wsub(sum, e.size);
    else if (e.kind == EventKind::Oom) ++out.oom_events;
    if (beyond_device(sum)) [[unlikely]]
      refuse_total(dev.index, "event " + std::to_string(i), "allocated (summed from the events)", sum);
    const int64_t alloc = dev.reported_allocated[i];
    if (alloc != sum) {
      ++out.inconsistencies;
      if (out.notes.size() < kMaxNotes)
        out.notes.push_back("event " + std::to_string(i) + ": the trace reports " + std::to_string(alloc) +
                            " bytes allocated, the events sum to " + std::to_string(sum));
    }
    out.requested.push_back(sum);
    out.allocated.push_back(alloc);
    out.reserved.push_back(dev.reported_reserved[i]);
    take(out.peak_requested, sum, int64_t(i));
    take(out.peak_allocated, alloc, int64_t(i));
    take(out.peak_reserved, dev.reported_reserved[i], int64_t(i));
  }
  out.streams = any_alloc ? 1 : 0;
  out.end = n ? Counters{out.requested.back(), out.allocated.back(), out.reserved.back()} : out.baseline;
  out.end_check.have_dump = false;
  out.end_check.replay = out.end;
  return out;
}

AllocatorState reported_state_at(const Device& dev, int64_t event_index) {
  AllocatorState st;
  ReportedLive pre = reported_pre_trace(dev, nullptr);
  std::unordered_map<uint64_t, LiveAllocation> live;
  for (const LiveAllocation& la : pre.pre) live.emplace(la.addr, la);
  int64_t sum = dev.allocated_before;
  const int64_t last = std::min<int64_t>(event_index, int64_t(dev.events.size()) - 1);
  for (int64_t i = 0; i <= last; ++i) {
    const Event& e = dev.events[size_t(i)];
    if (e.kind == EventKind::Alloc) {
      live[e.addr] = LiveAllocation{e.addr, e.size, e.size, e.stream, e.stack, i};
      wadd(sum, e.size);
    } else if (e.kind == EventKind::FreeRequested) {
      live.erase(e.addr);
      wsub(sum, e.size);
    }
  }
  st.live.reserve(live.size() + 1);
  for (auto& kv : live) st.live.push_back(kv.second);
  if (pre.residual > 0) st.live.push_back({0, pre.residual, pre.residual, 0, dev.before_stack, -1});
  std::sort(st.live.begin(), st.live.end(), [](const LiveAllocation& a, const LiveAllocation& b) { return a.addr < b.addr; });
  st.counters.requested = sum;
  if (last >= 0) {
    st.counters.allocated = dev.reported_allocated[size_t(last)];
    st.counters.reserved = dev.reported_reserved[size_t(last)];
  } else {
    st.counters.allocated = dev.allocated_before;
    st.counters.reserved = dev.events.empty() ? 0 : dev.reported_reserved[0];
  }
  return st;
}

}  // namespace

namespace detail {

// replay_device(), and when `at_peak` is given, also what
// allocator_state_at(trace, dev, <allocated peak event>) returns: the second
// replay starts from a copy of the reconstructed initial state.
DeviceReplay replay_with_peak_state(const Trace& trace, const Device& dev, AllocatorState* at_peak) {
  if (dev.from_profiler()) {
    DeviceReplay out = replay_reported(dev);
    if (at_peak) *at_peak = reported_state_at(dev, out.peak_requested.event_index);
    return out;
  }
  Replayer r(trace, dev);
  r.out.device = dev.index;
  r.out.has_trace = dev.has_trace;
  r.reconstruct_initial_state();
  std::optional<Replayer> initial;
  if (at_peak) initial.emplace(r);
  const size_t n = dev.events.size();
  // Filled below without zeroing first; huge pages spare most page faults.
  for (std::vector<int64_t>* v : {&r.out.requested, &r.out.allocated, &r.out.reserved}) {
    v->reserve(n);
    detail::advise_hugepages(v->data(), n * sizeof(int64_t));
  }
  auto take = [&](PeakPoint& p, int64_t v, int64_t idx) {
    if (v > p.bytes || (p.event_index == -1 && idx == -1)) {
      p.bytes = v;
      p.event_index = idx;
      p.time_us = idx >= 0 ? dev.events[size_t(idx)].time_us : kNoTime;
    }
  };
  take(r.out.peak_requested, r.counters().requested, -1);
  take(r.out.peak_allocated, r.counters().allocated, -1);
  take(r.out.peak_reserved, r.counters().reserved, -1);
  std::vector<uint64_t> streams;
  for (size_t i = 0; i < n; ++i) {
    r.step(i);
    const Counters& c = r.counters();
    // No counter beyond what a device holds (the replay of the same events
    // up to the peak, below, and allocator_state_at's, stay within too).
    if (maybe_beyond(c)) [[unlikely]]
      check_counters(dev.index, "event " + std::to_string(i), c);
    r.out.requested.push_back(c.requested);
    r.out.allocated.push_back(c.allocated);
    r.out.reserved.push_back(c.reserved);
    take(r.out.peak_requested, c.requested, int64_t(i));
    take(r.out.peak_allocated, c.allocated, int64_t(i));
    take(r.out.peak_reserved, c.reserved, int64_t(i));
  }
  {
    std::vector<uint64_t> s;
    for (const Event& e : dev.events)
      if (e.kind == EventKind::Alloc && (s.empty() || s.back() != e.stream)) s.push_back(e.stream);
    std::sort(s.begin(), s.end());
    r.out.streams = uint64_t(std::unique(s.begin(), s.end()) - s.begin());
  }
  r.finish_end_check();
  if (at_peak) {
    int64_t last = std::min<int64_t>(r.out.peak_requested.event_index, int64_t(n) - 1);
    for (int64_t i = 0; i <= last; ++i) initial->step(size_t(i));
    *at_peak = initial->state();
  }
  return std::move(r.out);
}

}  // namespace detail

DeviceReplay replay_device(const Trace& trace, const Device& dev) {
  return detail::replay_with_peak_state(trace, dev, nullptr);
}

AllocatorState allocator_state_at(const Trace& trace, const Device& dev, int64_t event_index) {
  if (dev.from_profiler()) return reported_state_at(dev, event_index);
  Replayer r(trace, dev);
  r.reconstruct_initial_state();
  int64_t last = std::min<int64_t>(event_index, int64_t(dev.events.size()) - 1);
  for (int64_t i = 0; i <= last; ++i) r.step(size_t(i));
  return r.state();
}

}  // namespace snapdiff
