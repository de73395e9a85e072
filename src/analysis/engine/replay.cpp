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
//  * allocated bytes drop at free_requested; requested and active bytes at
//    free_completed, when the block returns to the pool (merging with free
//    neighbours of the same segment): for a block used on other streams that
//    is after those streams are done (free_block, via process_events);
//  * reserved bytes change at segment_alloc/free and segment_map/unmap; an
//    expandable segment is one virtual reservation whose pages are mapped and
//    unmapped (partially, and again), its mapped pages forming free blocks.
// When the history is partial (recording started late, or the ring buffer
// wrapped), the state before the first event is rebuilt from every
// constraint the file holds (reconstruct_initial_state).
#include <algorithm>
#include <map>
#include <optional>
#include <unordered_map>

#include "analysis/engine/addr_map.hpp"
#include "analysis/engine/allocator_constants.hpp"
#include "snapdiff/analysis/replay.hpp"
#include "snapdiff/error.hpp"
#include "util/hugepages.hpp"

namespace snapdiff {

namespace {
using alloc::kMinBlock;
using alloc::kSmallSize;
constexpr size_t kMaxNotes = 8;
}  // namespace

const char* truncation_name(Truncation t) {
  switch (t) {
    case Truncation::None: return "none";
    case Truncation::LateStart: return "late_start";
    case Truncation::Wrapped: return "wrapped";
    case Truncation::Unknown: return "unknown";
  }
  return "unknown";
}

bool truncation_from_name(std::string_view name, Truncation* out) {
  for (Truncation t : {Truncation::None, Truncation::LateStart, Truncation::Wrapped, Truncation::Unknown})
    if (name == truncation_name(t)) return *out = t, true;
  return false;
}

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
// All four within +-2^50: one comparison (each shifted into [0, 2^51]; the
// OR of such values passes 2^51 only when one is beyond, or at the very
// edge, where check_counters decides).
inline bool maybe_beyond(const Counters& c) {
  constexpr uint64_t k = kMaxDeviceBytes;
  return ((uint64_t(c.requested) + k) | (uint64_t(c.allocated) + k) | (uint64_t(c.reserved) + k) |
          (uint64_t(c.active) + k)) >= 2 * k;
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
  check_total(device, where, "active", c.active);
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
  uint64_t addr, size;  // expandable: the lowest address seen mapped, and hi - addr
  uint64_t hi;          // expandable: one past the highest address ever mapped
  uint64_t stream;
  uint32_t pool;        // index into DeviceReplay::pools
  bool expandable, live;
};

// A set of disjoint half-open address ranges, merged when they touch.
class RangeSet {
 public:
  void add(uint64_t lo, uint64_t hi) {
    if (lo >= hi) return;
    auto it = r_.upper_bound(lo);
    if (it != r_.begin() && std::prev(it)->second >= lo) {
      --it;
      lo = it->first;
      hi = std::max(hi, it->second);
      it = r_.erase(it);
    }
    while (it != r_.end() && it->first <= hi) {
      hi = std::max(hi, it->second);
      it = r_.erase(it);
    }
    r_.emplace(lo, hi);
  }
  void remove(uint64_t lo, uint64_t hi) {
    if (lo >= hi) return;
    auto it = r_.upper_bound(lo);
    if (it != r_.begin() && std::prev(it)->second > lo) --it;
    while (it != r_.end() && it->first < hi) {
      uint64_t a = it->first, b = it->second;
      it = r_.erase(it);
      if (a < lo) r_.emplace(a, lo);
      if (b > hi) it = r_.emplace(hi, b).first, ++it;
    }
  }
  // The parts of [lo, hi) not in the set.
  void missing(uint64_t lo, uint64_t hi, std::vector<std::pair<uint64_t, uint64_t>>* out) const {
    uint64_t cur = lo;
    auto it = r_.upper_bound(lo);
    if (it != r_.begin() && std::prev(it)->second > lo) --it;
    for (; it != r_.end() && it->first < hi && cur < hi; ++it) {
      if (it->first > cur) out->push_back({cur, it->first});
      cur = std::max(cur, it->second);
    }
    if (cur < hi) out->push_back({cur, hi});
  }
  const std::map<uint64_t, uint64_t>& ranges() const { return r_; }

 private:
  std::map<uint64_t, uint64_t> r_;  // lo -> hi
};

// One significant decimal digit times a power of ten (>= 1000), or a power of
// two (>= 1024): the max_entries people pass (1000, 10000, 100000, 1000000,
// 5000, 2^16, ...). A ring buffer that wrapped holds exactly max_entries.
bool round_count(uint64_t n) {
  if (n >= 1024 && (n & (n - 1)) == 0) return true;
  if (n < 1000) return false;
  while (n % 10 == 0) n /= 10;
  return n < 10;
}

// What reconstruct_initial_state() gathers before it places anything.
struct EarlyState {
  static constexpr int64_t kNever = INT64_MAX;
  static constexpr uint32_t kAllocSeen = 4;
  struct Pre {
    uint64_t addr, requested, size, stream;
    StackId stack;
    bool exact, pending;
    int64_t completes;  // event index of its free_completed; kNever: still active at the dump
  };
  std::vector<Pre> pre;
  detail::AddrMap pre_open;  // address -> index into pre, while its free has not completed
  // Per block address: 1 allocated in the history, 2 freed there (pending),
  // 3 completed-free there; kAllocSeen added once the history allocated it.
  detail::AddrMap st;
  struct PreSeg {
    uint64_t addr, size, stream;
  };
  std::vector<PreSeg> pre_segs;
  detail::AddrMap seg_live;  // segment address -> 1 while the history has it allocated
  detail::AddrMap created;   // every address a segment_alloc names
  RangeSet mapped, touched, pre_mapped;
  std::vector<std::pair<uint64_t, uint64_t>> gaps;
  std::vector<std::pair<uint64_t, int64_t>> allocs;  // (address, event index) of each address's first alloc
  // The segments before the first event.
  struct Seg0 {
    uint64_t addr, size, stream;
    bool expandable;
  };
  std::vector<Seg0> seg0;
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
  bool seg_expandable(int32_t s) const { return s >= 0 && segs_[size_t(s)].expandable; }
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
    if (seg_expandable(seg)) mapped_[addr] = id;
    return id;
  }
  void unindex(uint32_t id) {
    RBlock& b = blocks_[id];
    if (by_start_.find(b.addr) == id) by_start_.erase(b.addr);
    if (by_end_.find(b.addr + b.size) == id) by_end_.erase(b.addr + b.size);
    if (seg_expandable(b.seg)) {
      auto it = mapped_.find(b.addr);
      if (it != mapped_.end() && it->second == id) mapped_.erase(it);
    }
  }
  void drop_block(uint32_t id) {
    unindex(id);
    blocks_[id].live = false;
    free_slots_.push_back(id);
  }
  void resize_block(uint32_t id, uint64_t new_addr, uint64_t new_size) {
    unindex(id);
    RBlock& b = blocks_[id];
    b.addr = new_addr;
    b.size = new_size;
    by_start_.put(b.addr, id);
    by_end_.put(b.addr + b.size, id);
    if (seg_expandable(b.seg)) mapped_[b.addr] = id;
  }
  // Free neighbours merge within a segment. Mapped pages of expandable
  // segments that touch belong to one virtual reservation (reservations are
  // larger than the device, so two never touch where pages are mapped), even
  // when the rebuilt pre-trace state split it into two RSegs.
  bool mergeable(uint32_t a, const RBlock& b) const {
    if (a == detail::AddrMap::kNone) return false;
    const RBlock& n = blocks_[a];
    if (!n.live || n.state != BS::Free || n.seg < 0 || b.seg < 0) return false;
    return n.seg == b.seg || (seg_expandable(n.seg) && seg_expandable(b.seg));
  }
  // Merge free block `id` with its free neighbours; returns the surviving id.
  uint32_t coalesce(uint32_t id) {
    uint32_t nx = by_start_.find(blocks_[id].addr + blocks_[id].size);
    if (nx != id && mergeable(nx, blocks_[id])) {
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
  // The counters after each addition of the rebuilt initial state (sizes at
  // most 2^50 each: one check per addition keeps every sum from wrapping).
  void guard_initial() const {
    if (beyond_device(c_.requested) || beyond_device(c_.allocated) || beyond_device(c_.reserved) ||
        beyond_device(c_.active))
      check_counters(dev_.index, "before the first event", c_);
  }
  uint32_t pool_index(const int64_t id[2]) {
    auto [it, fresh] = pool_of_id_.try_emplace({id[0], id[1]}, uint32_t(out.pools.size()));
    if (fresh) {
      PoolUsage p;
      p.id[0] = id[0];
      p.id[1] = id[1];
      out.pools.push_back(p);
    }
    return it->second;
  }
  // The pool of a segment made at `addr`, from the dumped segments (the
  // history of PyTorch 2.11 does not name pools); the default pool when the
  // segment is gone by the dump.
  uint32_t dump_pool(uint64_t addr, bool expandable) const;
  // The expandable segment a mapping at [addr, addr+size) belongs to, made
  // when it is the first mapping of a reservation.
  int32_t expandable_seg(uint64_t addr, uint64_t size, uint64_t stream);
  void index_dump_pools();
  std::vector<PoolUsage> pool_usage() const;
  // The steps of reconstruct_initial_state(), in order.
  void scan_history(EarlyState& es);
  void scan_dump(EarlyState& es);
  void early_segments(EarlyState& es);
  void classify_truncation(bool partial);
  void build_early_state(EarlyState& es);
  void place_early_blocks(EarlyState& es, int32_t sid, uint64_t lo, uint64_t hi, bool expandable, size_t& pi);

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
  std::map<uint64_t, uint32_t> mapped_;    // blocks of expandable segments by address (ordered)
  std::map<uint64_t, int32_t> exp_by_base_; // expandable segments by their lowest address
  // Dumped segments' pools: non-expandable by address; expandable mapped
  // ranges as (lo, hi, pool) sorted by lo.
  std::unordered_map<uint64_t, uint32_t> dump_pool_by_addr_;
  std::map<std::pair<int64_t, int64_t>, uint32_t> pool_of_id_;
  std::vector<std::pair<std::pair<uint64_t, uint64_t>, uint32_t>> dump_pool_ranges_;
};

void Replayer::index_dump_pools() {
  const int64_t def[2] = {0, 0};
  pool_index(def);  // index 0: the default pool
  for (const Segment& sg : dev_.segments) {
    uint32_t p = pool_index(sg.pool_id);
    if (sg.expandable) dump_pool_ranges_.push_back({{sg.addr, sg.addr + sg.total_size}, p});
    else dump_pool_by_addr_[sg.addr] = p;
  }
  std::sort(dump_pool_ranges_.begin(), dump_pool_ranges_.end());
}

uint32_t Replayer::dump_pool(uint64_t addr, bool expandable) const {
  if (!expandable) {
    auto it = dump_pool_by_addr_.find(addr);
    return it == dump_pool_by_addr_.end() ? 0 : it->second;
  }
  auto it = std::upper_bound(dump_pool_ranges_.begin(), dump_pool_ranges_.end(),
                             std::make_pair(std::make_pair(addr, UINT64_MAX), UINT32_MAX));
  if (it == dump_pool_ranges_.begin()) return 0;
  --it;
  return addr < it->first.second ? it->second : 0;
}

int32_t Replayer::expandable_seg(uint64_t addr, uint64_t size, uint64_t stream) {
  auto it = exp_by_base_.upper_bound(addr);
  if (it != exp_by_base_.begin()) {
    const int32_t s = std::prev(it)->second;
    if (addr <= segs_[size_t(s)].hi) return s;
  }
  // Just below a known part (a pre-trace reservation whose lower pages the
  // history maps again): that segment, reaching lower now.
  if (it != exp_by_base_.end() && it->first == addr + size) {
    const int32_t s = it->second;
    exp_by_base_.erase(it);
    segs_[size_t(s)].addr = addr;
    exp_by_base_[addr] = s;
    return s;
  }
  const int32_t s = int32_t(segs_.size());
  segs_.push_back({addr, 0, addr + size, stream, dump_pool(addr, true), true, true});
  exp_by_base_[addr] = s;
  return s;
}

void Replayer::do_alloc(size_t i, const Event& e) {
  uint64_t r = allocator_round_size(e.size, trace_.settings);
  uint32_t id = by_start_.find(e.addr);
  if (id != detail::AddrMap::kNone && blocks_[id].state != BS::Free) {
    note(i, "alloc at an address that is still allocated; treating the old block as freed");
    do_free_completed(i, e);
    id = by_start_.find(e.addr);
  }
  if (id == detail::AddrMap::kNone || blocks_[id].state != BS::Free || blocks_[id].size < r) {
    if (id == detail::AddrMap::kNone) note(i, "alloc outside every free block of the replayed layout");
    else note(i, "alloc larger than the free block at its address");
    int32_t seg = -1;
    if (id != detail::AddrMap::kNone) {
      seg = blocks_[id].seg;
      drop_block(id);
    }
    id = new_block(e.addr, r, seg, BS::Free);
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
  wadd(c_.active, a.size);
  if (!out.alloc_pool.empty()) out.alloc_pool[i] = a.seg >= 0 ? segs_[size_t(a.seg)].pool : 0;
}

// The user freed the block: allocated_bytes drops now; requested_bytes and
// active_bytes only when the free completes (free_block), which for a block
// used on other streams comes after those streams are done.
void Replayer::do_free_requested(size_t i, uint64_t addr, bool quiet) {
  uint32_t id = by_start_.find(addr);
  if (id == detail::AddrMap::kNone || blocks_[id].state != BS::Alloc) {
    if (!quiet) note(i, "free of an address that is not allocated");
    return;
  }
  RBlock& b = blocks_[id];
  b.state = BS::Pending;
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
  wsub(c_.requested, b.requested);
  wsub(c_.active, b.size);
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
  segs_.push_back({e.addr, e.size, e.addr + e.size, e.stream, dump_pool(e.addr, false), false, true});
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
        if (blocks_[b].state != BS::Free) {
          wsub(c_.requested, blocks_[b].requested);
          wsub(c_.active, blocks_[b].size);
          if (blocks_[b].state == BS::Alloc) wsub(c_.allocated, blocks_[b].size);
        }
        drop_block(b);
      }
    return;
  }
  drop_block(id);
}

// Pages mapped into an expandable segment: a free block that merges with the
// free mapped pages around it (PyTorch's map_block).
void Replayer::do_map(size_t i, const Event& e) {
  wadd(c_.reserved, e.size);
  if (e.size == 0) return;
  auto it = mapped_.upper_bound(e.addr + e.size - 1);
  if (it != mapped_.begin()) {
    const RBlock& b = blocks_[std::prev(it)->second];
    if (b.addr + b.size > e.addr) {
      note(i, "segment_map of pages that are already mapped in the replayed layout");
      return;
    }
  }
  int32_t seg = expandable_seg(e.addr, e.size, e.stream);
  RSeg& s = segs_[size_t(seg)];
  s.hi = std::max(s.hi, e.addr + e.size);
  s.size = s.hi - s.addr;
  coalesce(new_block(e.addr, e.size, seg, BS::Free));
}

// Pages unmapped from an expandable segment (PyTorch's unmap_block, on
// empty_cache or before a retry): they leave free blocks; what is left of
// those blocks on either side stays mapped and free.
void Replayer::do_unmap(size_t i, const Event& e) {
  wsub(c_.reserved, e.size);
  if (e.size == 0) return;
  const uint64_t lo = e.addr, hi = e.addr + e.size;
  auto it = mapped_.upper_bound(lo);
  if (it != mapped_.begin() && blocks_[std::prev(it)->second].addr + blocks_[std::prev(it)->second].size > lo) --it;
  std::vector<uint32_t> hit;
  uint64_t covered = 0;
  bool busy = false;
  for (; it != mapped_.end() && it->first < hi; ++it) {
    const RBlock& b = blocks_[it->second];
    if (b.state != BS::Free) busy = true;
    hit.push_back(it->second);
    covered += std::min(hi, b.addr + b.size) - std::max(lo, b.addr);
  }
  if (busy || covered != e.size) {
    note(i, "segment_unmap of a range that is not free in the replayed layout");
    if (busy) return;
  }
  for (uint32_t id : hit) {
    const RBlock b = blocks_[id];
    drop_block(id);
    if (b.addr < lo) new_block(b.addr, lo - b.addr, b.seg, BS::Free);
    if (b.addr + b.size > hi) new_block(hi, b.addr + b.size - hi, b.seg, BS::Free);
  }
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

// Rebuilds what was live before the first recorded event from every
// constraint the file holds: frees of blocks the history never allocated
// (address and requested size), blocks alive at the dump but never allocated
// in it (exact sizes), segments freed but never created, pages unmapped but
// never mapped, dumped segments and mapped ranges the history did not make,
// and the allocations the history makes while an early block is still live
// (they bound its size). Then tells a late start from a wrapped ring buffer.
void Replayer::reconstruct_initial_state() {
  index_dump_pools();
  EarlyState es;
  TruncationEvidence& evd = out.truncation_evidence;
  evd.entries = dev_.events.size();
  evd.max_entries = trace_.settings.max_entries;
  scan_history(es);
  scan_dump(es);
  early_segments(es);
  classify_truncation(!es.pre.empty() || !es.seg0.empty());
  out.pre_trace_allocations = 0;
  build_early_state(es);
  check_counters(dev_.index, "before the first event", c_);
  out.baseline = c_;
  if (out.pools.size() > 1) out.alloc_pool.assign(dev_.events.size(), 0);
}

// Step 1: what the history says of the state before it.
void Replayer::scan_history(EarlyState& es) {
  const auto& ev = dev_.events;
  constexpr int64_t kNever = EarlyState::kNever;
  constexpr uint32_t kAllocSeen = EarlyState::kAllocSeen;
  auto seen_bit = [](uint32_t s) { return s == detail::AddrMap::kNone ? 0u : s & kAllocSeen; };
  TruncationEvidence& evd = out.truncation_evidence;
  bool seen_alloc = false;
  for (size_t i = 0; i < ev.size(); ++i) {
    const Event& e = ev[i];
    switch (e.kind) {
      case EventKind::Alloc: {
        // The allocator reuses addresses: most allocs are of an address
        // seen before, and only the first matters below.
        if (!seen_bit(es.st.find(e.addr))) es.allocs.push_back({e.addr, int64_t(i)});
        es.st.put(e.addr, 1 | kAllocSeen);
        seen_alloc = true;
        break;
      }
      case EventKind::FreeRequested: {
        const uint32_t s = es.st.find(e.addr);
        if (s == detail::AddrMap::kNone) {
          es.pre_open.put(e.addr, uint32_t(es.pre.size()));
          es.pre.push_back({e.addr, e.size, 0, e.stream, e.stack, false, false, kNever});
        } else if ((s & 3) == 3) {
          ++evd.dropped_mid_history;
        }
        es.st.put(e.addr, 2 | seen_bit(s));
        break;
      }
      case EventKind::FreeCompleted: {
        const uint32_t s = es.st.find(e.addr);
        if (s == detail::AddrMap::kNone) {
          es.pre.push_back({e.addr, e.size, 0, e.stream, e.stack, false, true, int64_t(i)});
          if (!seen_alloc) evd.head_orphan_free = true;
        } else if ((s & 3) == 3) {
          ++evd.dropped_mid_history;
        } else if (uint32_t p = es.pre_open.find(e.addr); p != detail::AddrMap::kNone) {
          es.pre[p].completes = int64_t(i);
        }
        es.pre_open.erase(e.addr);
        es.st.put(e.addr, 3 | seen_bit(s));
        break;
      }
      case EventKind::SegmentAlloc:
        es.seg_live.put(e.addr, 1);
        es.created.put(e.addr, 1);
        break;
      case EventKind::SegmentFree:
        if (es.seg_live.find(e.addr) == detail::AddrMap::kNone && es.created.find(e.addr) == detail::AddrMap::kNone)
          es.pre_segs.push_back({e.addr, e.size, e.stream});
        es.seg_live.erase(e.addr);
        break;
      case EventKind::SegmentMap:
        es.mapped.add(e.addr, e.addr + e.size);
        es.touched.add(e.addr, e.addr + e.size);
        break;
      case EventKind::SegmentUnmap: {
        // Pages the history never touched must have been mapped before it.
        es.gaps.clear();
        es.touched.missing(e.addr, e.addr + e.size, &es.gaps);
        for (auto& g : es.gaps) es.pre_mapped.add(g.first, g.second);
        es.mapped.remove(e.addr, e.addr + e.size);
        es.touched.add(e.addr, e.addr + e.size);
        break;
      }
      default: break;
    }
  }
}

// Step 2: dumped state the history did not make.
void Replayer::scan_dump(EarlyState& es) {
  constexpr int64_t kNever = EarlyState::kNever;
  TruncationEvidence& evd = out.truncation_evidence;
  for (const Segment& sg : dev_.segments) {
    if (sg.expandable) {
      es.gaps.clear();
      es.touched.missing(sg.addr, sg.addr + sg.total_size, &es.gaps);
      for (auto& g : es.gaps) es.pre_mapped.add(g.first, g.second);
    } else if (es.created.find(sg.addr) == detail::AddrMap::kNone) {
      es.pre_segs.push_back({sg.addr, sg.total_size, sg.stream});
    }
    for (uint32_t k = 0; k < sg.block_count; ++k) {
      const Block& b = dev_.blocks[sg.first_block + k];
      if (b.state == BlockState::Inactive) continue;
      const uint32_t s = es.st.find(b.addr);
      if (s == detail::AddrMap::kNone) {
        es.pre.push_back({b.addr, b.requested_size, b.size, sg.stream, b.stack, true,
                          b.state == BlockState::ActivePendingFree, kNever});
        if (b.stack != 0) ++evd.framed_early_blocks;
      } else if (uint32_t p = es.pre_open.find(b.addr); p != detail::AddrMap::kNone) {
        // Freed in the history but still waiting at the dump: the dump has its size.
        es.pre[p].size = b.size;
        es.pre[p].exact = true;
      }
    }
  }
}

// Step 3: the segments before the first event, in address order, and the
// early blocks and the history's allocations by address (each address once,
// with its earliest event).
void Replayer::early_segments(EarlyState& es) {
  using Seg0 = EarlyState::Seg0;
  using Pre = EarlyState::Pre;
  for (const EarlyState::PreSeg& p : es.pre_segs) es.seg0.push_back({p.addr, p.size, p.stream, false});
  {
    // The stream of each early mapped range: that of the dumped mapped range
    // holding its start (0 when none does).
    std::vector<std::pair<uint64_t, const Segment*>> exp_dump;
    for (const Segment& sg : dev_.segments)
      if (sg.expandable) exp_dump.push_back({sg.addr, &sg});
    std::sort(exp_dump.begin(), exp_dump.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto& r : es.pre_mapped.ranges()) {
      uint64_t stream = 0;
      auto it = std::upper_bound(exp_dump.begin(), exp_dump.end(), r.first,
                                 [](uint64_t a, const auto& e) { return a < e.first; });
      if (it != exp_dump.begin() && r.first < std::prev(it)->second->addr + std::prev(it)->second->total_size)
        stream = std::prev(it)->second->stream;
      es.seg0.push_back({r.first, r.second - r.first, stream, true});
    }
  }
  std::sort(es.seg0.begin(), es.seg0.end(), [](const Seg0& a, const Seg0& b) { return a.addr < b.addr; });
  std::sort(es.pre.begin(), es.pre.end(), [](const Pre& a, const Pre& b) { return a.addr < b.addr; });
  std::sort(es.allocs.begin(), es.allocs.end());
}

// Step 4: a late start, a wrapped ring buffer, or unknown.
void Replayer::classify_truncation(bool partial) {
  TruncationEvidence& evd = out.truncation_evidence;
  out.truncated = partial && dev_.has_trace;
  evd.entries_round = round_count(evd.entries);
  if (!out.truncated) out.truncation = Truncation::None;
  else if (evd.max_entries >= 0)
    out.truncation = evd.entries >= uint64_t(evd.max_entries) ? Truncation::Wrapped : Truncation::LateStart;
  // A ring that wrapped holds exactly max_entries, and people pass round
  // numbers. Otherwise a late start, unless the file shows entries lost from
  // a history that was on: blocks allocated before the first event that
  // carry a stack (PyTorch keeps a live block's stack outside the ring, so
  // only blocks allocated while recording have one; with a non-round count
  // that is a restarted history or an odd max_entries), or frees of blocks
  // the history had already seen freed.
  else if (evd.entries_round) out.truncation = Truncation::Wrapped;
  else if (evd.framed_early_blocks > 0 || evd.dropped_mid_history > 0) out.truncation = Truncation::Unknown;
  else out.truncation = Truncation::LateStart;
}

// Step 5: the early blocks of one segment [lo, hi), from es.pre[pi] on,
// with the free blocks between them.
void Replayer::place_early_blocks(EarlyState& es, int32_t sid, uint64_t lo, uint64_t hi, bool expandable, size_t& pi) {
  using Pre = EarlyState::Pre;
  const int64_t mss = trace_.settings.max_split_size;
  uint64_t cur = lo;
  while (pi < es.pre.size() && es.pre[pi].addr < lo) ++pi;  // outside every segment
  for (; pi < es.pre.size() && es.pre[pi].addr < hi; ++pi) {
    Pre& p = es.pre[pi];
    if (p.addr < cur) continue;  // overlaps the previous one: inconsistent, skip
    const uint64_t next = (pi + 1 < es.pre.size() && es.pre[pi + 1].addr < hi) ? es.pre[pi + 1].addr : hi;
    uint64_t size = p.size;
    if (!p.exact) {
      // The block is at least its rounded request; it also took the free
      // bytes after it when they were too few to split off. Its end is
      // bounded by the next block known to exist while it lived: the next
      // early block, the segment's end, or an allocation the history makes
      // before this block's free completes.
      const uint64_t r = allocator_round_size(p.requested, trace_.settings);
      uint64_t bound = next;
      const uint64_t window = p.addr + r + kSmallSize + kMinBlock;
      for (auto a = std::lower_bound(es.allocs.begin(), es.allocs.end(), std::make_pair(p.addr + r, int64_t(-1)));
           a != es.allocs.end() && a->first < std::min(bound, window); ++a)
        if (a->second < p.completes) {
          bound = a->first;
          break;
        }
      const uint64_t gap = bound > p.addr + r ? bound - (p.addr + r) : 0;
      const bool small = p.requested <= kSmallSize;
      bool split;
      if (small || expandable || trace_.settings.expandable_segments) split = gap >= kMinBlock;
      else split = (mss < 0 || r < uint64_t(mss)) && gap > kSmallSize;
      size = split || gap == 0 ? r : bound - p.addr;
      out.allocated_estimated |= size != r || gap > 0;
    }
    if (p.addr + size > hi) size = hi - p.addr;
    if (p.addr > cur) new_block(cur, p.addr - cur, sid, BS::Free);
    uint32_t id = new_block(p.addr, size, sid, p.pending ? BS::Pending : BS::Alloc);
    RBlock& b = blocks_[id];
    b.requested = p.requested;
    b.stack = p.stack;
    b.stream = p.stream;
    b.alloc_event = -1;
    wadd(c_.requested, p.requested);
    wadd(c_.active, size);
    if (!p.pending) {
      wadd(c_.allocated, size);
      ++out.pre_trace_allocations;
    }
    guard_initial();
    cur = p.addr + size;
  }
  if (cur < hi) new_block(cur, hi - cur, sid, BS::Free);
}

// Step 6: the segments and blocks before the first event, and the early
// allocations outside every known segment.
void Replayer::build_early_state(EarlyState& es) {
  size_t pi = 0;
  for (const EarlyState::Seg0& s0 : es.seg0) {
    int32_t sid;
    if (s0.expandable) {
      sid = expandable_seg(s0.addr, s0.size, s0.stream);
      RSeg& s = segs_[size_t(sid)];
      s.hi = std::max(s.hi, s0.addr + s0.size);
      s.size = s.hi - s.addr;
    } else {
      sid = int32_t(segs_.size());
      segs_.push_back({s0.addr, s0.size, s0.addr + s0.size, s0.stream, dump_pool(s0.addr, false), false, true});
      seg_by_addr_.put(s0.addr, uint32_t(sid));
    }
    wadd(c_.reserved, s0.size);
    guard_initial();
    place_early_blocks(es, sid, s0.addr, s0.addr + s0.size, s0.expandable, pi);
  }
  // Early allocations outside every known segment: kept as orphans.
  for (const EarlyState::Pre& p : es.pre) {
    if (by_start_.find(p.addr) != detail::AddrMap::kNone) continue;
    uint64_t size = p.exact ? p.size : allocator_round_size(p.requested, trace_.settings);
    uint32_t id = new_block(p.addr, size, -1, p.pending ? BS::Pending : BS::Alloc);
    blocks_[id].requested = p.requested;
    blocks_[id].stack = p.stack;
    blocks_[id].stream = p.stream;
    wadd(c_.requested, p.requested);
    wadd(c_.active, size);
    if (!p.pending) {
      wadd(c_.allocated, size);
      ++out.pre_trace_allocations;
    }
    guard_initial();
  }
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
      if (b.state == BlockState::Inactive) continue;
      wadd(ck.dump.active, b.size);
      wadd(ck.dump.requested, b.requested_size);
      if (b.state == BlockState::ActiveAllocated) wadd(ck.dump.allocated, b.size);
    }
    // Each size is at most 2^50 (the readers): checked per segment, no sum wraps.
    if (beyond_device(ck.dump.requested) || beyond_device(ck.dump.allocated) || beyond_device(ck.dump.reserved) ||
        beyond_device(ck.dump.active))
      check_counters(dev_.index, "the dumped segments", ck.dump);
  }
  ck.dump_segments = dev_.segments.size();
  out.pools = pool_usage();
  for (const PoolUsage& p : out.pools) ck.replay_segments += p.segments;
}

// Each pool's segments as PyTorch dumps them (each cudaMalloc'd segment, and
// each contiguous mapped range of an expandable one), its reserved bytes and
// the block bytes allocated in it, at this moment.
std::vector<PoolUsage> Replayer::pool_usage() const {
  std::vector<PoolUsage> pools = out.pools;
  for (PoolUsage& p : pools) p.segments = 0, p.reserved = 0, p.allocated = 0;
  for (const RSeg& s : segs_)
    if (s.live && !s.expandable) {
      ++pools[s.pool].segments;
      wadd(pools[s.pool].reserved, s.size);
    }
  uint64_t run_end = UINT64_MAX;
  for (auto& kv : mapped_) {
    const RBlock& b = blocks_[kv.second];
    PoolUsage& p = pools[segs_[size_t(b.seg)].pool];
    if (b.addr != run_end) ++p.segments;
    wadd(p.reserved, b.size);
    run_end = b.addr + b.size;
  }
  for (const RBlock& b : blocks_)
    if (b.live && b.state == BS::Alloc && b.seg >= 0) wadd(pools[segs_[size_t(b.seg)].pool].allocated, b.size);
  return pools;
}

AllocatorState Replayer::state() const {
  AllocatorState st;
  st.counters = c_;
  st.pools = pool_usage();
  // The live segments by address, numbered in that order.
  std::vector<int32_t> seg_index(segs_.size(), -1);
  {
    std::vector<uint32_t> order;
    for (uint32_t s = 0; s < segs_.size(); ++s)
      if (segs_[s].live) order.push_back(s);
    std::sort(order.begin(), order.end(), [&](uint32_t x, uint32_t y) { return segs_[x].addr < segs_[y].addr; });
    for (uint32_t s : order) {
      seg_index[s] = int32_t(st.segments.size());
      const RSeg& g = segs_[s];
      st.segments.push_back({g.addr, g.size, g.stream, g.pool, g.expandable});
    }
  }
  for (const RBlock& b : blocks_) {
    if (!b.live) continue;
    const uint32_t pool = b.seg >= 0 ? segs_[size_t(b.seg)].pool : 0;
    const int32_t seg = b.seg >= 0 ? seg_index[size_t(b.seg)] : -1;
    if (b.state == BS::Free) {
      const RSeg* sg = b.seg >= 0 ? &segs_[size_t(b.seg)] : nullptr;
      // PyTorch's small pool lives in 2 MiB segments (kSmallBuffer); a large
      // pool's segment is never 2 MiB (at least 10 MiB, or 20 MiB).
      st.free_blocks.push_back({b.addr, b.size, seg_expandable(b.seg), pool, sg ? sg->stream : b.stream,
                                sg && !sg->expandable && sg->size == (uint64_t(2) << 20), seg});
      continue;
    }
    const bool pending = b.state == BS::Pending;
    st.live.push_back({b.addr, b.requested, b.size, b.stream, b.stack, b.alloc_event, pool, pending, seg});
    if (pending) {
      st.pending_free_bytes += b.size;
      st.pending_free_requested += b.requested;
    }
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
  // A profiler trace reports allocated bytes only; active is taken to be the
  // same (it reports no cross-stream waits).
  out.baseline.requested = out.baseline.allocated = out.baseline.active = dev.allocated_before;
  out.baseline.reserved = n ? dev.reported_reserved[0] : 0;
  out.pre_trace_allocations = pre.pre.size() + (pre.residual > 0 ? 1 : 0);
  out.truncated = dev.allocated_before > 0 || !pre.pre.empty();
  // A profiled window starts when the profiler does: a late start by nature.
  out.truncation = out.truncated ? Truncation::LateStart : Truncation::None;
  out.truncation_evidence.entries = n;
  out.truncation_evidence.entries_round = round_count(n);
  {
    const int64_t def[2] = {0, 0};
    PoolUsage p;
    p.id[0] = def[0];
    p.id[1] = def[1];
    out.pools.push_back(p);
  }
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
  take(out.peak_active, out.baseline.active, -1);
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
    out.active.push_back(alloc);
    take(out.peak_requested, sum, int64_t(i));
    take(out.peak_allocated, alloc, int64_t(i));
    take(out.peak_reserved, dev.reported_reserved[i], int64_t(i));
    take(out.peak_active, alloc, int64_t(i));
  }
  out.streams = any_alloc ? 1 : 0;
  out.end = n ? Counters{out.requested.back(), out.allocated.back(), out.reserved.back(), out.active.back()}
             : out.baseline;
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
    st.counters.allocated = st.counters.active = dev.reported_allocated[size_t(last)];
    st.counters.reserved = dev.reported_reserved[size_t(last)];
  } else {
    st.counters.allocated = st.counters.active = dev.allocated_before;
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
  for (std::vector<int64_t>* v : {&r.out.requested, &r.out.allocated, &r.out.reserved, &r.out.active}) {
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
  take(r.out.peak_active, r.counters().active, -1);
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
    r.out.active.push_back(c.active);
    take(r.out.peak_requested, c.requested, int64_t(i));
    take(r.out.peak_allocated, c.allocated, int64_t(i));
    take(r.out.peak_reserved, c.reserved, int64_t(i));
    take(r.out.peak_active, c.active, int64_t(i));
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

std::vector<AllocatorState> allocator_states_at(const Trace& trace, const Device& dev,
                                                const std::vector<int64_t>& event_indices) {
  std::vector<AllocatorState> out;
  if (dev.from_profiler()) {
    for (int64_t e : event_indices) out.push_back(reported_state_at(dev, e));
    return out;
  }
  Replayer r(trace, dev);
  r.reconstruct_initial_state();
  const int64_t n = int64_t(dev.events.size());
  int64_t done = -1;  // events stepped: [0, done]
  for (int64_t e : event_indices) {
    const int64_t last = std::min<int64_t>(e, n - 1);
    for (; done < last; ++done) r.step(size_t(done + 1));
    out.push_back(r.state());
  }
  return out;
}

}  // namespace snapdiff
