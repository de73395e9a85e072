// The replay against PyTorch's CUDACachingAllocator rules (c10/cuda/
// CUDACachingAllocator.cpp, 2.x), on histories written by hand: the timing
// of the four counters (requested, allocated, reserved, active), block
// splitting, expandable segments (map, unmap, re-map), private pools, and
// what a history that starts mid-run looks like (late start, wrapped ring,
// unknown).
//
// Every expected number below is worked out by hand from the rules, in the
// comments next to it; none was taken from snapdiff's output. The rules:
//   * a request rounds up to 512 bytes; <= 1 MiB is the small pool (2 MiB
//     segments), larger the large pool;
//   * a free block is split when the remainder is >= 512 bytes (small pool,
//     or any expandable segment) or > 1 MiB (large pool, not expandable);
//     else the whole block is handed out;
//   * alloc:          requested += request, allocated += block, active += block;
//   * free_requested: allocated -= block (the user's free; the block may
//                     still be in use on other streams);
//   * free_completed: requested -= the block's request, active -= block; the
//                     block is free and merges with free neighbours;
//   * segment_alloc/free, segment_map/unmap: reserved +/- size.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "snapdiff/analysis/replay.hpp"
#include "snapdiff/model/model.hpp"

using namespace snapdiff;

namespace {

constexpr uint64_t MiB = uint64_t(1) << 20;
constexpr int64_t iMiB = int64_t(MiB);
constexpr uint64_t kStream = 1;

Block used(uint64_t addr, uint64_t size, uint64_t requested) {
  return Block{addr, size, requested, 0, BlockState::ActiveAllocated};
}
Block pending(uint64_t addr, uint64_t size, uint64_t requested) {
  return Block{addr, size, requested, 0, BlockState::ActivePendingFree};
}
Block unused(uint64_t addr, uint64_t size) { return Block{addr, size, 0, 0, BlockState::Inactive}; }

// A device-0 history and its dump, written event by event.
class Hist {
 public:
  explicit Hist(bool expandable_segments = false) {
    Device& d = t.device(0);
    d.has_trace = true;
    if (expandable_segments) {
      t.settings.present = true;
      t.settings.expandable_segments = true;
      t.settings.raw.push_back({"expandable_segments", "True"});
    }
  }
  Hist(const Hist&) = delete;
  Hist& operator=(const Hist&) = delete;

  Device& dev() { return t.devices[0]; }
  size_t size() { return dev().events.size(); }

  void ev(EventKind k, uint64_t addr, uint64_t size, uint64_t stream = kStream) {
    Event e;
    e.kind = k;
    e.action = t.strings.intern(event_kind_name(k));
    e.addr = addr;
    e.size = size;
    e.stream = stream;
    e.time_us = clock_ += 10;
    dev().events.push_back(e);
  }
  void segment_alloc(uint64_t a, uint64_t n) { ev(EventKind::SegmentAlloc, a, n); }
  void segment_free(uint64_t a, uint64_t n) { ev(EventKind::SegmentFree, a, n); }
  void map(uint64_t a, uint64_t n) { ev(EventKind::SegmentMap, a, n); }
  void unmap(uint64_t a, uint64_t n) { ev(EventKind::SegmentUnmap, a, n); }
  void alloc(uint64_t a, uint64_t req) { ev(EventKind::Alloc, a, req); }
  // PyTorch records both frees with the block's requested size.
  void free_requested(uint64_t a, uint64_t req) { ev(EventKind::FreeRequested, a, req); }
  void free_completed(uint64_t a, uint64_t req) { ev(EventKind::FreeCompleted, a, req); }
  // A free of a block used on no other stream: PyTorch completes it at once.
  void free(uint64_t a, uint64_t req) {
    free_requested(a, req);
    free_completed(a, req);
  }

  // One dumped segment (blocks in address order, covering it).
  void dump(uint64_t addr, uint64_t total, std::initializer_list<Block> blocks, int64_t pool0 = 0, int64_t pool1 = 0,
            bool expandable = false, bool small = false) {
    Device& d = dev();
    Segment sg;
    sg.addr = addr;
    sg.total_size = total;
    sg.stream = kStream;
    sg.pool_id[0] = pool0;
    sg.pool_id[1] = pool1;
    sg.expandable = expandable;
    sg.small_pool = small;
    sg.first_block = uint32_t(d.blocks.size());
    uint64_t covered = 0;
    for (const Block& b : blocks) {
      REQUIRE(b.addr == addr + covered);  // the test's own dump is well formed
      covered += b.size;
      if (b.state == BlockState::ActiveAllocated) sg.allocated_size += b.size;
      if (b.state != BlockState::Inactive) {
        sg.active_size += b.size;
        sg.requested_size += b.requested_size;
      }
      d.blocks.push_back(b);
    }
    REQUIRE(covered == total);
    sg.block_count = uint32_t(blocks.size());
    d.segments.push_back(sg);
  }
  void dump_expandable(uint64_t addr, uint64_t total, std::initializer_list<Block> blocks) {
    dump(addr, total, blocks, 0, 0, true, false);
  }

  DeviceReplay replay() { return replay_device(t, dev()); }
  AllocatorState state_at(int64_t i) { return allocator_state_at(t, dev(), i); }

  Trace t;

 private:
  int64_t clock_ = 1'700'000'000'000'000;
};

// Counters written {requested, allocated, reserved, active}.
void check_same(const Counters& got, const Counters& want) {
  CHECK(got.requested == want.requested);
  CHECK(got.allocated == want.allocated);
  CHECK(got.reserved == want.reserved);
  CHECK(got.active == want.active);
}

// The four per-event counter vectors, event by event.
void check_series(const DeviceReplay& r, const std::vector<Counters>& want) {
  REQUIRE(r.requested.size() == want.size());
  REQUIRE(r.allocated.size() == want.size());
  REQUIRE(r.reserved.size() == want.size());
  REQUIRE(r.active.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("after event " << i);
    CHECK(r.requested[i] == want[i].requested);
    CHECK(r.allocated[i] == want[i].allocated);
    CHECK(r.reserved[i] == want[i].reserved);
    CHECK(r.active[i] == want[i].active);
  }
}

// The four counters after event i.
Counters after(const DeviceReplay& r, size_t i) {
  REQUIRE(i < r.requested.size());
  REQUIRE(i < r.allocated.size());
  REQUIRE(i < r.reserved.size());
  REQUIRE(i < r.active.size());
  return {r.requested[i], r.allocated[i], r.reserved[i], r.active[i]};
}

const LiveAllocation* live_at(const AllocatorState& s, uint64_t addr) {
  for (const LiveAllocation& a : s.live)
    if (a.addr == addr) return &a;
  return nullptr;
}

// Free blocks as (addr, size), in address order.
std::vector<std::pair<uint64_t, uint64_t>> free_ranges(const AllocatorState& s) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (const FreeBlockInfo& f : s.free_blocks) out.push_back({f.addr, f.size});
  std::sort(out.begin(), out.end());
  return out;
}
using Ranges = std::vector<std::pair<uint64_t, uint64_t>>;

// A complete history ends where it began: nothing inconsistent, nothing
// before it.
void check_complete(const DeviceReplay& r) {
  CHECK(r.inconsistencies == 0);
  CHECK_FALSE(r.truncated);
  CHECK(r.truncation == Truncation::None);
  CHECK(r.pre_trace_allocations == 0);
  check_same(r.baseline, {0, 0, 0, 0});
  CHECK(r.end_check.have_dump);
  CHECK(r.end_check.matches());
}

}  // namespace

// ---- the timing of the four counters ----------------------------------------

TEST_CASE("replay: free_requested lowers allocated, free_completed lowers requested and active", "[analysis][replay]") {
  // One large-pool segment of 20 MiB. A is used on a second stream: its
  // free_completed comes only after B was allocated.
  const uint64_t G = 0x7f0000000000;
  const uint64_t c = 4 * MiB - 1000;  // C's request: 4,193,304 bytes
  Hist h;
  h.segment_alloc(G, 20 * MiB);        // 0
  h.alloc(G, 4 * MiB);                 // 1 A: 20 - 4 = 16 MiB left > 1 MiB: split, A = 4 MiB
  h.free_requested(G, 4 * MiB);        // 2 A: pending (used on stream 2)
  h.alloc(G + 4 * MiB, 6 * MiB);       // 3 B: 16 - 6 = 10 MiB left: split, B = 6 MiB
  h.free_completed(G, 4 * MiB);        // 4 A: free; B (allocated) beside it, no merge
  h.alloc(G, c);                       // 5 C: rounds to 8,191 x 512 = 4,193,792; the 4 MiB block
                                       //   leaves 512 bytes, not > 1 MiB: C gets all 4 MiB
  h.free(G + 4 * MiB, 6 * MiB);        // 6, 7 B: no other stream; merges with [G+10, G+20)
  h.free(G, c);                        // 8, 9 C: merges: [G, G+20) free
  h.dump(G, 20 * MiB, {unused(G, 20 * MiB)});
  REQUIRE(h.size() == 10);

  const DeviceReplay r = h.replay();
  const int64_t ci = int64_t(c);
  check_series(r, {
                      {0, 0, 20 * iMiB, 0},                               // 0
                      {4 * iMiB, 4 * iMiB, 20 * iMiB, 4 * iMiB},          // 1 +A
                      {4 * iMiB, 0, 20 * iMiB, 4 * iMiB},                 // 2 A requested free: allocated only
                      {10 * iMiB, 6 * iMiB, 20 * iMiB, 10 * iMiB},        // 3 +B (A still in requested, active)
                      {6 * iMiB, 6 * iMiB, 20 * iMiB, 6 * iMiB},          // 4 A completed
                      {6 * iMiB + ci, 10 * iMiB, 20 * iMiB, 10 * iMiB},   // 5 +C: request c, block 4 MiB
                      {6 * iMiB + ci, 4 * iMiB, 20 * iMiB, 10 * iMiB},    // 6 B requested
                      {ci, 4 * iMiB, 20 * iMiB, 4 * iMiB},                // 7 B completed
                      {ci, 0, 20 * iMiB, 4 * iMiB},                       // 8 C requested
                      {0, 0, 20 * iMiB, 0},                               // 9 C completed
                  });
  // Peaks: requested 10 MiB only after event 3 (after 5 it is 10 MiB - 1000);
  // allocated 10 MiB only after event 5; active 10 MiB after 3, 5 and 6.
  CHECK(r.peak_requested.bytes == 10 * iMiB);
  CHECK(r.peak_requested.event_index == 3);
  CHECK(r.peak_requested.time_us == h.dev().events[3].time_us);
  CHECK(r.peak_allocated.bytes == 10 * iMiB);
  CHECK(r.peak_allocated.event_index == 5);
  CHECK(r.peak_reserved.bytes == 20 * iMiB);
  CHECK(r.peak_active.bytes == 10 * iMiB);
  check_same(r.end, {0, 0, 20 * iMiB, 0});
  check_complete(r);
  CHECK(r.truncation_evidence.entries == 10);
  CHECK(r.truncation_evidence.max_entries == -1);
  CHECK_FALSE(r.truncation_evidence.entries_round);
  REQUIRE(r.pools.size() == 1);
  CHECK(r.pools[0].id[0] == 0);
  CHECK(r.pools[0].id[1] == 0);
  CHECK(r.pools[0].segments == 1);
  CHECK(r.pools[0].reserved == 20 * iMiB);
  CHECK(r.pools[0].allocated == 0);

  SECTION("between the two frees the block is live, pending, and not allocated") {
    const AllocatorState s = h.state_at(3);
    check_same(s.counters, {10 * iMiB, 6 * iMiB, 20 * iMiB, 10 * iMiB});
    REQUIRE(s.live.size() == 2);
    const LiveAllocation* a = live_at(s, G);
    REQUIRE(a != nullptr);
    CHECK(a->pending_free);
    CHECK(a->requested == 4 * MiB);
    CHECK(a->block_size == 4 * MiB);
    CHECK(a->alloc_event == 1);
    const LiveAllocation* b = live_at(s, G + 4 * MiB);
    REQUIRE(b != nullptr);
    CHECK_FALSE(b->pending_free);
    CHECK(b->requested == 6 * MiB);
    CHECK(b->block_size == 6 * MiB);
    CHECK(b->alloc_event == 3);
    CHECK(s.pending_free_bytes == 4 * MiB);
    CHECK(s.pending_free_requested == 4 * MiB);
    CHECK(free_ranges(s) == Ranges{{G + 10 * MiB, 10 * MiB}});
  }
  SECTION("the completed free is a free block; the whole block goes to the next request") {
    const AllocatorState s4 = h.state_at(4);
    CHECK(s4.live.size() == 1);
    CHECK(s4.pending_free_bytes == 0);
    CHECK(s4.pending_free_requested == 0);
    CHECK(free_ranges(s4) == Ranges{{G, 4 * MiB}, {G + 10 * MiB, 10 * MiB}});
    const AllocatorState s5 = h.state_at(5);
    const LiveAllocation* cc = live_at(s5, G);
    REQUIRE(cc != nullptr);
    CHECK(cc->requested == c);
    CHECK(cc->block_size == 4 * MiB);
    CHECK(free_ranges(s5) == Ranges{{G + 10 * MiB, 10 * MiB}});
    // Everything freed merges back into the one segment-sized block.
    CHECK(free_ranges(h.state_at(9)) == Ranges{{G, 20 * MiB}});
    CHECK(h.state_at(9).live.empty());
  }
}

TEST_CASE("replay: a free still pending at the dump counts in requested and active, not allocated", "[analysis][replay]") {
  // PyTorch dumps such a block as active_pending_free with its requested
  // size; the end state compares all four counters with the dump.
  const uint64_t G = 0x7f0000000000;
  Hist h;
  h.segment_alloc(G, 20 * MiB);          // 0
  h.alloc(G, 4 * MiB);                   // 1 A: split
  h.alloc(G + 4 * MiB, 6 * MiB);         // 2 B: split
  h.free_requested(G, 4 * MiB);          // 3 A: waits on another stream until after the dump
  h.dump(G, 20 * MiB, {pending(G, 4 * MiB, 4 * MiB), used(G + 4 * MiB, 6 * MiB, 6 * MiB), unused(G + 10 * MiB, 10 * MiB)});

  const DeviceReplay r = h.replay();
  const int64_t M = iMiB;
  check_series(r, {
                      {0, 0, 20 * M, 0},                    // 0
                      {4 * M, 4 * M, 20 * M, 4 * M},        // 1 +A
                      {10 * M, 10 * M, 20 * M, 10 * M},     // 2 +B
                      {10 * M, 6 * M, 20 * M, 10 * M},      // 3 A requested
                  });
  check_same(r.end, {10 * M, 6 * M, 20 * M, 10 * M});
  // The dump's counters: requested and active of both active blocks, allocated of B.
  check_same(r.end_check.dump, {10 * M, 6 * M, 20 * M, 10 * M});
  check_complete(r);
  const AllocatorState s = h.state_at(3);
  CHECK(s.pending_free_bytes == 4 * MiB);
  CHECK(s.pending_free_requested == 4 * MiB);
  REQUIRE(live_at(s, G) != nullptr);
  CHECK(live_at(s, G)->pending_free);
}

// ---- splitting ------------------------------------------------------------------

TEST_CASE("replay: small requests round up to 512 bytes and split off any remainder of 512 bytes or more", "[analysis][replay]") {
  const uint64_t H = 0x7e0000000000;
  Hist h;
  h.segment_alloc(H, 2 * MiB);          // 0 a small-pool segment
  h.alloc(H, 1000);                     // 1 a: 1000 -> 1024; 2 MiB - 1024 left: split
  h.alloc(H + 1024, MiB);               // 2 b: exactly 1 MiB, still the small pool; 1 MiB - 1024 left: split
  h.alloc(H + 1024 + MiB, 1);           // 3 c: 1 -> 512; 1 MiB - 1536 left: split
  h.free(H, 1000);                      // 4, 5 a: b beside it is allocated, no merge
  h.alloc(H, 700);                      // 6 d: 700 -> 1024 = the free block: nothing left, whole
  h.dump(H, 2 * MiB,
         {used(H, 1024, 700), used(H + 1024, MiB, MiB), used(H + 1024 + MiB, 512, 1),
          unused(H + 1536 + MiB, MiB - 1536)},
         0, 0, false, true);

  const DeviceReplay r = h.replay();
  const int64_t M = iMiB, two = 2 * iMiB;
  check_series(r, {
                      {0, 0, two, 0},                                 // 0
                      {1000, 1024, two, 1024},                        // 1 +a
                      {1000 + M, 1024 + M, two, 1024 + M},            // 2 +b
                      {1001 + M, 1536 + M, two, 1536 + M},            // 3 +c
                      {1001 + M, 512 + M, two, 1536 + M},             // 4 a requested
                      {1 + M, 512 + M, two, 512 + M},                 // 5 a completed
                      {701 + M, 1536 + M, two, 1536 + M},             // 6 +d
                  });
  check_same(r.end, {701 + M, 1536 + M, two, 1536 + M});
  check_complete(r);
  CHECK(free_ranges(h.state_at(6)) == Ranges{{H + 1536 + MiB, MiB - 1536}});
}

TEST_CASE("replay: a large block is split only when more than 1 MiB remains, an expandable one from 512 bytes", "[analysis][replay]") {
  SECTION("large pool, fixed segments") {
    const uint64_t L1 = 0x7d0000000000, L2 = 0x7d1000000000;
    const uint64_t y = 19 * MiB - 512;
    Hist h;
    h.segment_alloc(L1, 20 * MiB);      // 0
    h.alloc(L1, 19 * MiB);              // 1 x: exactly 1 MiB would remain, not > 1 MiB: x gets all 20 MiB
    h.segment_alloc(L2, 20 * MiB);      // 2
    h.alloc(L2, y);                     // 3 y: 1 MiB + 512 remains, > 1 MiB: split, y = 19 MiB - 512
    h.alloc(L2 + y, MiB + 512);         // 4 z: > 1 MiB, the large pool; the remainder exactly: whole
    h.free(L1, 19 * MiB);               // 5, 6 x
    h.dump(L1, 20 * MiB, {unused(L1, 20 * MiB)});
    h.dump(L2, 20 * MiB, {used(L2, y, y), used(L2 + y, MiB + 512, MiB + 512)});

    const DeviceReplay r = h.replay();
    const int64_t M = iMiB;
    check_series(r, {
                        {0, 0, 20 * M, 0},                       // 0
                        {19 * M, 20 * M, 20 * M, 20 * M},        // 1 +x: block 20 MiB
                        {19 * M, 20 * M, 40 * M, 20 * M},        // 2
                        {38 * M - 512, 39 * M - 512, 40 * M, 39 * M - 512},  // 3 +y
                        {39 * M, 40 * M, 40 * M, 40 * M},        // 4 +z: 1 MiB + 512
                        {39 * M, 20 * M, 40 * M, 40 * M},        // 5 x requested
                        {20 * M, 20 * M, 40 * M, 20 * M},        // 6 x completed
                    });
    const AllocatorState s1 = h.state_at(1);
    const LiveAllocation* x = live_at(s1, L1);
    REQUIRE(x != nullptr);
    CHECK(x->block_size == 20 * MiB);
    CHECK(free_ranges(h.state_at(1)).empty());
    check_same(r.end, {20 * M, 20 * M, 40 * M, 20 * M});
    check_complete(r);
  }
  SECTION("expandable segment") {
    const uint64_t E = 0x7c0000000000;
    Hist h(true);
    h.map(E, 20 * MiB);                 // 0
    h.alloc(E, 19 * MiB);               // 1 x: 1 MiB remains, >= 512 in an expandable segment: split, x = 19 MiB
    h.dump_expandable(E, 20 * MiB, {used(E, 19 * MiB, 19 * MiB), unused(E + 19 * MiB, MiB)});

    const DeviceReplay r = h.replay();
    check_series(r, {{0, 0, 20 * iMiB, 0}, {19 * iMiB, 19 * iMiB, 20 * iMiB, 19 * iMiB}});
    CHECK(free_ranges(h.state_at(1)) == Ranges{{E + 19 * MiB, MiB}});
    check_complete(r);
  }
}

// ---- expandable segments ----------------------------------------------------------

TEST_CASE("replay: expandable segments map, unmap in parts, and map again", "[analysis][replay]") {
  // Large-pool pages of 20 MiB. The dump of an expandable device lists the
  // contiguous mapped ranges, each an expandable segment with its blocks.
  const uint64_t E = 0x7b0000000000;
  Hist h(true);
  h.map(E, 40 * MiB);                    // 0 two pages: one free block [E, E+40)
  h.alloc(E, 30 * MiB);                  // 1 A: 10 MiB left: split
  h.alloc(E + 30 * MiB, 10 * MiB);       // 2 B: the rest exactly
  h.free(E, 30 * MiB);                   // 3, 4 A: free [E, E+30)
  h.unmap(E, 20 * MiB);                  // 5 the first page: [E+20, E+30) stays free and mapped
  h.free(E + 30 * MiB, 10 * MiB);        // 6, 7 B: merges with [E+20, E+30): free [E+20, E+40)
  h.unmap(E + 20 * MiB, 20 * MiB);       // 8 the rest: nothing mapped
  h.map(E, 20 * MiB);                    // 9 the first page again: free [E, E+20)
  h.alloc(E, 8 * MiB);                   // 10 C: 12 MiB left: split
  h.dump_expandable(E, 20 * MiB, {used(E, 8 * MiB, 8 * MiB), unused(E + 8 * MiB, 12 * MiB)});

  const DeviceReplay r = h.replay();
  const int64_t M = iMiB;
  check_series(r, {
                      {0, 0, 40 * M, 0},                    // 0 map 40
                      {30 * M, 30 * M, 40 * M, 30 * M},     // 1 +A
                      {40 * M, 40 * M, 40 * M, 40 * M},     // 2 +B
                      {40 * M, 10 * M, 40 * M, 40 * M},     // 3 A requested
                      {10 * M, 10 * M, 40 * M, 10 * M},     // 4 A completed
                      {10 * M, 10 * M, 20 * M, 10 * M},     // 5 unmap 20
                      {10 * M, 0, 20 * M, 10 * M},          // 6 B requested
                      {0, 0, 20 * M, 0},                    // 7 B completed
                      {0, 0, 0, 0},                         // 8 unmap 20
                      {0, 0, 20 * M, 0},                    // 9 map 20 again
                      {8 * M, 8 * M, 20 * M, 8 * M},        // 10 +C
                  });
  CHECK(r.peak_reserved.bytes == 40 * M);
  CHECK(r.peak_allocated.bytes == 40 * M);
  CHECK(r.peak_allocated.event_index == 2);
  check_same(r.end, {8 * M, 8 * M, 20 * M, 8 * M});
  check_complete(r);
  REQUIRE(r.pools.size() == 1);
  CHECK(r.pools[0].segments == 1);  // one mapped range at the end
  CHECK(r.pools[0].reserved == 20 * M);
  CHECK(r.pools[0].allocated == 8 * M);

  const AllocatorState s5 = h.state_at(5);
  CHECK(free_ranges(s5) == Ranges{{E + 20 * MiB, 10 * MiB}});
  for (const FreeBlockInfo& f : s5.free_blocks) CHECK(f.expandable);
  CHECK(free_ranges(h.state_at(7)) == Ranges{{E + 20 * MiB, 20 * MiB}});
  const AllocatorState s8 = h.state_at(8);
  CHECK(s8.free_blocks.empty());
  CHECK(s8.live.empty());
  check_same(s8.counters, {0, 0, 0, 0});
  CHECK(free_ranges(h.state_at(9)) == Ranges{{E, 20 * MiB}});
}

TEST_CASE("replay: one unmap spans pages mapped by separate segment_map events", "[analysis][replay]") {
  const uint64_t E = 0x7a0000000000;
  Hist h(true);
  h.map(E, 20 * MiB);                    // 0
  h.map(E + 20 * MiB, 20 * MiB);         // 1
  h.map(E + 40 * MiB, 20 * MiB);         // 2 three maps, one free block [E, E+60)
  h.alloc(E, 50 * MiB);                  // 3 A across the first two map boundaries: 10 MiB left, split
  h.free(E, 50 * MiB);                   // 4, 5 A: merges: [E, E+60) free
  h.unmap(E, 60 * MiB);                  // 6 all three pages at once
  h.map(E + 20 * MiB, 20 * MiB);         // 7 the middle page alone
  h.alloc(E + 20 * MiB, 20 * MiB);       // 8 B: the whole page
  h.dump_expandable(E + 20 * MiB, 20 * MiB, {used(E + 20 * MiB, 20 * MiB, 20 * MiB)});

  const DeviceReplay r = h.replay();
  const int64_t M = iMiB;
  check_series(r, {
                      {0, 0, 20 * M, 0},                    // 0
                      {0, 0, 40 * M, 0},                    // 1
                      {0, 0, 60 * M, 0},                    // 2
                      {50 * M, 50 * M, 60 * M, 50 * M},     // 3 +A
                      {50 * M, 0, 60 * M, 50 * M},          // 4 A requested
                      {0, 0, 60 * M, 0},                    // 5 A completed
                      {0, 0, 0, 0},                         // 6 unmap 60
                      {0, 0, 20 * M, 0},                    // 7 map 20
                      {20 * M, 20 * M, 20 * M, 20 * M},     // 8 +B
                  });
  CHECK(free_ranges(h.state_at(2)) == Ranges{{E, 60 * MiB}});
  CHECK(free_ranges(h.state_at(3)) == Ranges{{E + 50 * MiB, 10 * MiB}});
  CHECK(free_ranges(h.state_at(5)) == Ranges{{E, 60 * MiB}});
  CHECK(h.state_at(6).free_blocks.empty());
  check_same(r.end, {20 * M, 20 * M, 20 * M, 20 * M});
  check_complete(r);
}

TEST_CASE("replay: an unmap inside a free block leaves the free remainders on both sides", "[analysis][replay]") {
  // empty_cache() on a free block [E+5, E+55) unmaps the one page wholly
  // inside it, [E+20, E+40); the parts before and after stay mapped and free.
  const uint64_t E = 0x790000000000;
  Hist h(true);
  h.map(E, 60 * MiB);                    // 0 three pages, one event
  h.alloc(E, 5 * MiB);                   // 1 A: split
  h.alloc(E + 5 * MiB, 50 * MiB);        // 2 B: 5 MiB left, split
  h.alloc(E + 55 * MiB, 5 * MiB);        // 3 C: the rest exactly
  h.free(E + 5 * MiB, 50 * MiB);         // 4, 5 B: free [E+5, E+55) (A and C allocated beside it)
  h.unmap(E + 20 * MiB, 20 * MiB);       // 6 free [E+5, E+20) and [E+40, E+55)
  h.alloc(E + 5 * MiB, 15 * MiB);        // 7 F: the first remainder exactly
  h.alloc(E + 40 * MiB, 15 * MiB);       // 8 D: the second remainder exactly
  h.dump_expandable(E, 20 * MiB, {used(E, 5 * MiB, 5 * MiB), used(E + 5 * MiB, 15 * MiB, 15 * MiB)});
  h.dump_expandable(E + 40 * MiB, 20 * MiB,
                    {used(E + 40 * MiB, 15 * MiB, 15 * MiB), used(E + 55 * MiB, 5 * MiB, 5 * MiB)});

  const DeviceReplay r = h.replay();
  const int64_t M = iMiB;
  check_series(r, {
                      {0, 0, 60 * M, 0},                    // 0
                      {5 * M, 5 * M, 60 * M, 5 * M},        // 1 +A
                      {55 * M, 55 * M, 60 * M, 55 * M},     // 2 +B
                      {60 * M, 60 * M, 60 * M, 60 * M},     // 3 +C
                      {60 * M, 10 * M, 60 * M, 60 * M},     // 4 B requested
                      {10 * M, 10 * M, 60 * M, 10 * M},     // 5 B completed
                      {10 * M, 10 * M, 40 * M, 10 * M},     // 6 unmap 20
                      {25 * M, 25 * M, 40 * M, 25 * M},     // 7 +F
                      {40 * M, 40 * M, 40 * M, 40 * M},     // 8 +D
                  });
  CHECK(free_ranges(h.state_at(6)) == Ranges{{E + 5 * MiB, 15 * MiB}, {E + 40 * MiB, 15 * MiB}});
  CHECK(h.state_at(8).free_blocks.empty());
  check_same(r.end, {40 * M, 40 * M, 40 * M, 40 * M});
  check_complete(r);
  REQUIRE(r.pools.size() == 1);
  CHECK(r.pools[0].segments == 2);  // two mapped ranges
  CHECK(r.pools[0].reserved == 40 * M);
}

// ---- private pools ----------------------------------------------------------------------

TEST_CASE("replay: a private pool's segment and blocks are counted apart from the default pool", "[analysis][replay]") {
  // D: the default pool (large, 20 MiB). G: a small segment of a CUDA
  // graph's private pool, created in the history; the dump names its pool
  // (1, 0) and lists it first.
  const uint64_t D = 0x7f0000000000, G = 0x7f1000000000;
  Hist h;
  h.segment_alloc(D, 20 * MiB);          // 0
  h.alloc(D, 4 * MiB);                   // 1 X: split
  h.segment_alloc(G, 2 * MiB);           // 2 the private pool's segment
  h.alloc(G, 1000);                      // 3 Y: 1000 -> 1024, split
  h.alloc(G + 1024, 512);                // 4 Z: 512, split
  h.free(G + 1024, 512);                 // 5, 6 Z: merges with the rest of G
  h.dump(G, 2 * MiB, {used(G, 1024, 1000), unused(G + 1024, 2 * MiB - 1024)}, 1, 0, false, true);
  h.dump(D, 20 * MiB, {used(D, 4 * MiB, 4 * MiB), unused(D + 4 * MiB, 16 * MiB)});

  const DeviceReplay r = h.replay();
  const int64_t M = iMiB;
  check_series(r, {
                      {0, 0, 20 * M, 0},                                  // 0
                      {4 * M, 4 * M, 20 * M, 4 * M},                      // 1 +X
                      {4 * M, 4 * M, 22 * M, 4 * M},                      // 2 +G
                      {4 * M + 1000, 4 * M + 1024, 22 * M, 4 * M + 1024}, // 3 +Y
                      {4 * M + 1512, 4 * M + 1536, 22 * M, 4 * M + 1536}, // 4 +Z
                      {4 * M + 1512, 4 * M + 1024, 22 * M, 4 * M + 1536}, // 5 Z requested
                      {4 * M + 1000, 4 * M + 1024, 22 * M, 4 * M + 1024}, // 6 Z completed
                  });
  check_same(r.end, {4 * M + 1000, 4 * M + 1024, 22 * M, 4 * M + 1024});
  check_complete(r);
  REQUIRE(r.pools.size() == 2);
  CHECK(r.pools[0].id[0] == 0);
  CHECK(r.pools[0].id[1] == 0);
  CHECK(r.pools[0].segments == 1);
  CHECK(r.pools[0].reserved == 20 * M);
  CHECK(r.pools[0].allocated == 4 * M);
  CHECK(r.pools[1].id[0] == 1);
  CHECK(r.pools[1].id[1] == 0);
  CHECK(r.pools[1].segments == 1);
  CHECK(r.pools[1].reserved == 2 * M);
  CHECK(r.pools[1].allocated == 1024);

  const AllocatorState s = h.state_at(4);
  const LiveAllocation* x = live_at(s, D);
  const LiveAllocation* y = live_at(s, G);
  const LiveAllocation* z = live_at(s, G + 1024);
  REQUIRE(x != nullptr);
  REQUIRE(y != nullptr);
  REQUIRE(z != nullptr);
  CHECK(x->pool == 0);
  CHECK(y->pool == 1);
  CHECK(z->pool == 1);
  for (const FreeBlockInfo& f : s.free_blocks) CHECK(f.pool == (f.addr >= G ? 1u : 0u));
  REQUIRE(s.pools.size() == 2);
  CHECK(s.pools[0].allocated == 4 * M);
  CHECK(s.pools[1].allocated == 1536);  // Y 1024 + Z 512
  CHECK(s.pools[1].reserved == 2 * M);
}

// ---- histories that start mid-run ---------------------------------------------------------

TEST_CASE("replay: a late start: a block from before the recording is in the baseline", "[analysis][replay][truncated]") {
  // S: a 20 MiB segment made before recording started, holding parameter P
  // (8 MiB - 100 requested, an 8 MiB block); P is never allocated in the
  // history, which begins with ordinary allocations. Padded to entry counts
  // that are not round (1500: two significant digits; 1536: no power of
  // two; 999: below 1000), with no max_entries recorded: a late start.
  const uint64_t S = 0x7f0000000000;
  const uint64_t p = 8 * MiB - 100;
  const size_t n = GENERATE(as<size_t>{}, 4, 999, 1001, 1500, 1536, 12000);
  INFO("entries " << n);
  const size_t k = (n - 4) % 3;   // tail allocations after the padding
  const size_t m = (n - 4) / 3;   // padding cycles
  Hist h;
  h.alloc(S + 8 * MiB, 2 * MiB);         // 0 T: [S+8, S+20) free: 10 MiB left, split
  h.alloc(S + 10 * MiB, 3 * MiB);        // 1 U: 7 MiB left, split
  h.free(S + 8 * MiB, 2 * MiB);          // 2, 3 T: P and U allocated beside it, no merge
  for (size_t i = 0; i < m; ++i) {       // Q: T's 2 MiB block, whole, and free again
    h.alloc(S + 8 * MiB, 2 * MiB);
    h.free(S + 8 * MiB, 2 * MiB);
  }
  for (size_t j = 0; j < k; ++j) h.alloc(S + (13 + 2 * j) * MiB, 2 * MiB);  // split from [S+13, S+20)
  REQUIRE(h.size() == n);
  if (k == 0)
    h.dump(S, 20 * MiB,
           {used(S, 8 * MiB, p), unused(S + 8 * MiB, 2 * MiB), used(S + 10 * MiB, 3 * MiB, 3 * MiB),
            unused(S + 13 * MiB, 7 * MiB)});
  else if (k == 1)
    h.dump(S, 20 * MiB,
           {used(S, 8 * MiB, p), unused(S + 8 * MiB, 2 * MiB), used(S + 10 * MiB, 3 * MiB, 3 * MiB),
            used(S + 13 * MiB, 2 * MiB, 2 * MiB), unused(S + 15 * MiB, 5 * MiB)});
  else
    h.dump(S, 20 * MiB,
           {used(S, 8 * MiB, p), unused(S + 8 * MiB, 2 * MiB), used(S + 10 * MiB, 3 * MiB, 3 * MiB),
            used(S + 13 * MiB, 2 * MiB, 2 * MiB), used(S + 15 * MiB, 2 * MiB, 2 * MiB), unused(S + 17 * MiB, 3 * MiB)});

  const DeviceReplay r = h.replay();
  const int64_t M = iMiB, pi = int64_t(p), tail = int64_t(2 * k) * M;
  CHECK(r.truncated);
  CHECK(r.truncation == Truncation::LateStart);
  CHECK(r.truncation_evidence.entries == n);
  CHECK(r.truncation_evidence.max_entries == -1);
  CHECK_FALSE(r.truncation_evidence.entries_round);
  CHECK_FALSE(r.truncation_evidence.head_orphan_free);
  CHECK(r.inconsistencies == 0);
  CHECK(r.pre_trace_allocations == 1);
  CHECK_FALSE(r.allocated_estimated);  // P's block is in the dump
  check_same(r.baseline, {pi, 8 * M, 20 * M, 8 * M});
  REQUIRE(r.requested.size() == n);
  REQUIRE(r.active.size() == n);
  check_same(after(r, 0), {pi + 2 * M, 10 * M, 20 * M, 10 * M});
  check_same(after(r, 3), {pi + 3 * M, 11 * M, 20 * M, 11 * M});
  check_same(r.end, {pi + 3 * M + tail, 11 * M + tail, 20 * M, 11 * M + tail});
  CHECK(r.end_check.matches());
  // Requested peaks with P and U live, plus T (or Q, 2 MiB) or the tail (2k MiB).
  CHECK(r.peak_requested.bytes == pi + 3 * M + std::max<int64_t>(2 * M, tail));
  const AllocatorState s = h.state_at(-1);
  REQUIRE(s.live.size() == 1);
  CHECK(s.live[0].addr == S);
  CHECK(s.live[0].requested == p);
  CHECK(s.live[0].block_size == 8 * MiB);
  CHECK(s.live[0].alloc_event == -1);
  CHECK_FALSE(s.live[0].pending_free);
  check_same(s.counters, {pi, 8 * M, 20 * M, 8 * M});
}

namespace {
// A history that begins with the free of a block allocated before it (W: 4
// MiB at S, in a 20 MiB segment made before it), then reuses S for n
// entries in all, and ends with 2 or 3 blocks of 2 MiB allocated.
void wrapped_history(Hist& h, uint64_t S, size_t n) {
  const size_t k = 2 + (n - 4) % 3;      // tail allocations
  const size_t m = (n - 2 - k) / 3;      // alloc/free cycles
  h.free(S, 4 * MiB);                    // 0, 1 W: never allocated in the history
  for (size_t i = 0; i < m; ++i) {       // V: 4 MiB at S, split from the free segment, freed
    h.alloc(S, 4 * MiB);
    h.free(S, 4 * MiB);
  }
  for (size_t j = 0; j < k; ++j) h.alloc(S + 2 * j * MiB, 2 * MiB);  // each split from the free rest
  REQUIRE(h.size() == n);
  if (k == 2)
    h.dump(S, 20 * MiB, {used(S, 2 * MiB, 2 * MiB), used(S + 2 * MiB, 2 * MiB, 2 * MiB), unused(S + 4 * MiB, 16 * MiB)});
  else
    h.dump(S, 20 * MiB,
           {used(S, 2 * MiB, 2 * MiB), used(S + 2 * MiB, 2 * MiB, 2 * MiB), used(S + 4 * MiB, 2 * MiB, 2 * MiB),
            unused(S + 6 * MiB, 14 * MiB)});
}
}  // namespace

TEST_CASE("replay: a round entry count that begins with frees of unseen blocks is a wrapped ring", "[analysis][replay][truncated]") {
  // Round: one significant digit times a power of ten, >= 1000 (1000, 2000,
  // 5000, 10000), or a power of two >= 1024 (1024, 16384).
  const uint64_t S = 0x7f0000000000;
  const size_t n = GENERATE(as<size_t>{}, 1000, 10000, 2000, 5000, 1024, 16384);
  INFO("entries " << n);
  Hist h;
  wrapped_history(h, S, n);
  const int64_t M = iMiB, tail = int64_t(2 + (n - 4) % 3) * 2 * M;

  const DeviceReplay r = h.replay();
  CHECK(r.truncated);
  CHECK(r.truncation == Truncation::Wrapped);
  CHECK(r.truncation_evidence.entries == n);
  CHECK(r.truncation_evidence.max_entries == -1);
  CHECK(r.truncation_evidence.entries_round);
  CHECK(r.inconsistencies == 0);
  // W before the first event: request 4 MiB rounds to 4 MiB, and 16 MiB
  // beside it would have been split off.
  check_same(r.baseline, {4 * M, 4 * M, 20 * M, 4 * M});
  check_same(after(r, 0), {4 * M, 0, 20 * M, 4 * M});
  check_same(after(r, 1), {0, 0, 20 * M, 0});
  check_same(r.end, {tail, tail, 20 * M, tail});
  CHECK(r.end_check.matches());
}

TEST_CASE("replay: a history that begins by completing a free it never requested is a late start", "[analysis][replay][truncated]") {
  // W (4 MiB at S) was freed by the user before recording started and was
  // waiting on another stream: before the first event it counts in
  // requested and active, not in allocated. The first malloc after the
  // recording starts completes such frees first (process_events), so a late
  // start can begin this way; 5 entries is not a round count, and no block
  // from before the history carries a stack: a late start.
  const uint64_t S = 0x7f0000000000;
  Hist h;
  h.free_completed(S, 4 * MiB);          // 0 W: free, merges with the free rest of S
  h.alloc(S, 3 * MiB);                   // 1 V: 17 MiB left, split
  h.alloc(S + 3 * MiB, 2 * MiB);         // 2 V2: split
  h.free(S + 3 * MiB, 2 * MiB);          // 3, 4 V2
  h.dump(S, 20 * MiB, {used(S, 3 * MiB, 3 * MiB), unused(S + 3 * MiB, 17 * MiB)});

  const DeviceReplay r = h.replay();
  const int64_t M = iMiB;
  CHECK(r.truncated);
  CHECK(r.truncation == Truncation::LateStart);
  CHECK(r.truncation_evidence.entries == 5);
  CHECK(r.truncation_evidence.max_entries == -1);
  CHECK_FALSE(r.truncation_evidence.entries_round);
  CHECK(r.truncation_evidence.head_orphan_free);
  CHECK(r.inconsistencies == 0);
  check_same(r.baseline, {4 * M, 0, 20 * M, 4 * M});
  check_series(r, {
                      {0, 0, 20 * M, 0},                    // 0 W completed
                      {3 * M, 3 * M, 20 * M, 3 * M},        // 1 +V
                      {5 * M, 5 * M, 20 * M, 5 * M},        // 2 +V2
                      {5 * M, 3 * M, 20 * M, 5 * M},        // 3 V2 requested
                      {3 * M, 3 * M, 20 * M, 3 * M},        // 4 V2 completed
                  });
  check_same(r.end, {3 * M, 3 * M, 20 * M, 3 * M});
  CHECK(r.end_check.matches());
  const AllocatorState s = h.state_at(-1);
  REQUIRE(s.live.size() == 1);
  CHECK(s.live[0].addr == S);
  CHECK(s.live[0].pending_free);
  CHECK(s.live[0].requested == 4 * MiB);
  CHECK(s.live[0].block_size == 4 * MiB);
  CHECK(s.live[0].alloc_event == -1);
  CHECK(s.pending_free_bytes == 4 * MiB);
  CHECK(s.pending_free_requested == 4 * MiB);
  check_same(s.counters, {4 * M, 0, 20 * M, 4 * M});
}

TEST_CASE("replay: the size of a block from before the history is bounded by the allocation after it", "[analysis][replay][truncated]") {
  // S: a large-pool segment of 20 MiB from before the history. W at S was
  // allocated before it; while W is still live the history allocates X at
  // S + 4 MiB, so W ends at or before S + 4 MiB. The gap between W's
  // rounded request and S + 4 MiB is at most 1 MiB, and no block of a
  // large, fixed segment is that small (large requests are > 1 MiB and
  // remainders are split off only when > 1 MiB), so W's block is all
  // 4 MiB:
  //   4 MiB - 100 rounds to 4 MiB itself;
  //   3 MiB + 100 rounds to 3 MiB + 512, whose remainder of 1 MiB - 512
  //   stayed in the block.
  // Then Y takes the freed 4 MiB exactly, which only fits if W was 4 MiB.
  const uint64_t S = 0x7f0000000000;
  const uint64_t q = GENERATE(as<uint64_t>{}, 4 * MiB - 100, 3 * MiB + 100);
  INFO("W requested " << q);
  Hist h;
  h.alloc(S + 4 * MiB, 2 * MiB);         // 0 X: [S+4, S+20) free: 14 MiB left, split
  h.free(S, q);                          // 1, 2 W: free [S, S+4); X allocated beside it
  h.alloc(S, 4 * MiB);                   // 3 Y: the 4 MiB block exactly
  h.dump(S, 20 * MiB, {used(S, 4 * MiB, 4 * MiB), used(S + 4 * MiB, 2 * MiB, 2 * MiB), unused(S + 6 * MiB, 14 * MiB)});

  const DeviceReplay r = h.replay();
  const int64_t M = iMiB, qi = int64_t(q);
  CHECK(r.truncated);
  CHECK(r.inconsistencies == 0);
  CHECK(r.pre_trace_allocations == 1);
  check_same(r.baseline, {qi, 4 * M, 20 * M, 4 * M});
  check_series(r, {
                      {qi + 2 * M, 6 * M, 20 * M, 6 * M},   // 0 +X
                      {qi + 2 * M, 2 * M, 20 * M, 6 * M},   // 1 W requested: its 4 MiB block
                      {2 * M, 2 * M, 20 * M, 2 * M},        // 2 W completed
                      {6 * M, 6 * M, 20 * M, 6 * M},        // 3 +Y
                  });
  check_same(r.end, {6 * M, 6 * M, 20 * M, 6 * M});
  CHECK(r.end_check.matches());
  const AllocatorState s = h.state_at(-1);
  const LiveAllocation* w = live_at(s, S);
  REQUIRE(w != nullptr);
  CHECK(w->block_size == 4 * MiB);
  CHECK(w->requested == q);
  CHECK(w->alloc_event == -1);
  CHECK(free_ranges(s) == Ranges{{S + 4 * MiB, 16 * MiB}});
  CHECK(free_ranges(h.state_at(2)) == Ranges{{S, 4 * MiB}, {S + 6 * MiB, 14 * MiB}});
}

TEST_CASE("replay: an early block that carries a stack, with a count that is no round max_entries, is of unknown cause", "[analysis][replay][truncated]") {
  // P (8 MiB at S) is alive at the dump and was never allocated in the
  // history, yet the dump has its stack: it was allocated while recording
  // was on, so entries were lost (a wrapped ring, or a restarted history);
  // 3 entries is no round max_entries. Without the stack: a late start.
  const uint64_t S = 0x7f0000000000;
  const bool framed = GENERATE(true, false);
  Hist h;
  h.alloc(S + 8 * MiB, 2 * MiB);  // 0 Q: split from the free rest
  h.free(S + 8 * MiB, 2 * MiB);   // 1, 2
  Block p = used(S, 8 * MiB, 8 * MiB);
  if (framed) p.stack = h.t.stacks.child(0, h.t.intern_frame(Frame{h.t.strings.intern("build"), 0, 1}));
  h.dump(S, 20 * MiB, {p, unused(S + 8 * MiB, 12 * MiB)});
  const DeviceReplay r = h.replay();
  CHECK(r.truncated);
  CHECK(r.inconsistencies == 0);
  CHECK(r.end_check.matches());
  CHECK(r.truncation_evidence.framed_early_blocks == (framed ? 1u : 0u));
  CHECK(r.truncation == (framed ? Truncation::Unknown : Truncation::LateStart));
}
