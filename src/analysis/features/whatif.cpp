// `snapdiff whatif`: PyTorch's CUDA caching allocator (c10/cuda/
// CUDACachingAllocator.cpp, 2.11) as a model that decides where each
// request goes, fed with a recorded run's requests and frees.
//
// The rules it follows (the names are PyTorch's):
//  * round_size: 512-byte granularity, or roundup_power2_divisions;
//  * get_pool: requests of at most 1 MiB (rounded) in the small pool, the
//    rest in the large one; blocks of a pool are kept per stream;
//  * get_free_block: the smallest free block of the stream at least as large
//    (lowest address among equals); with max_split_size, no block of that
//    size or more for a smaller request, and none 20 MiB or more above a
//    larger request; expandable segments count a tail block's unmapped
//    space as its size for the best fit;
//  * get_allocation_size: 2 MiB segments for the small pool, 20 MiB for
//    requests under 10 MiB, else the request rounded up to 2 MiB;
//  * when a segment cannot be had within the limit: release oversize
//    cached blocks (release_available_cached_blocks, with max_split_size),
//    then every free segment (release_cached_blocks), retrying after each;
//    under a memory fraction, garbage_collect_cached_blocks first;
//  * should_split: the small pool, or expandable segments, split off any
//    rest of 512 bytes or more; the large pool, a rest above 1 MiB of a
//    request under max_split_size; the front part is handed out;
//  * a freed block merges with free neighbours of its segment;
//  * expandable segments: per stream and pool one address range, mapped in
//    pages of 2 MiB (small) or 20 MiB (large) at its free tail, unmapped
//    (whole pages inside free blocks) by release_cached_blocks.
#include "snapdiff/analysis/whatif.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <iterator>
#include <limits>
#include <set>
#include <thread>
#include <tuple>
#include <unordered_map>

#include "analysis/engine/allocator_constants.hpp"
#include "snapdiff/error.hpp"
#include "util/quote_value.hpp"

namespace snapdiff {

namespace {

using alloc::kLargeBuffer;
using alloc::kMinBlock;
using alloc::kMinLargeAlloc;
using alloc::kRoundLarge;
using alloc::kSmallBuffer;
using alloc::kSmallSize;
constexpr uint64_t kNoSplitLimit = std::numeric_limits<uint64_t>::max();
constexpr uint64_t kExpandableRange = uint64_t(1) << 40;  // an expandable segment's address range
// The model's device addresses: segments are placed downwards from here, and
// their addresses are never reused, so every cudaMalloc'd byte of the run
// must fit below it (about 2^61.9: thousands of the largest segments a
// reader admits, kMaxDeviceBytes each). Whatever does not is an
// out-of-memory error of the model, never a wrapped address; it also keeps
// every counter (at most what is mapped at once) within int64's range.
// Expandable pages are aligned to absolute addresses, so this is 2^52 (the
// start the replay tests were made with) plus a multiple of 20 MiB.
constexpr uint64_t kAddressSpace = (uint64_t(1) << 52) + uint64_t(15) * (uint64_t(1) << 58);
static_assert(kAddressSpace % kLargeBuffer == (uint64_t(1) << 52) % kLargeBuffer);
constexpr size_t kRoundupBuckets = 16;

std::string trim(std::string_view s) {
  size_t a = 0, b = s.size();
  while (a < b && (s[a] == ' ' || s[a] == '\t')) ++a;
  while (b > a && (s[b - 1] == ' ' || s[b - 1] == '\t')) --b;
  return std::string(s.substr(a, b - a));
}

uint64_t parse_u64(const std::string& key, const std::string& v) {
  const bool digits = !v.empty() && v.size() <= 15 && std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits) throw UsageError("--alloc-conf: " + capped_value(key) + ":" + capped_value(v) + ": expected a whole number");
  return std::stoull(v);
}

bool power_of_two(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

size_t log2_of(uint64_t v) { return size_t(63 - __builtin_clzll(v)); }

// "4" or "[256:1,512:2,1024:4,>:8]" (keys in MiB, powers of two).
std::vector<uint64_t> parse_roundup(const std::string& v) {
  std::vector<uint64_t> out(kRoundupBuckets, 0);
  auto check_div = [&](uint64_t d) {
    if (d != 0 && d != 1 && !power_of_two(d))
      throw UsageError("--alloc-conf: roundup_power2_divisions: " + std::to_string(d) + " is not a power of two");
    return d;
  };
  if (v.empty() || v.front() != '[') {
    std::fill(out.begin(), out.end(), check_div(parse_u64("roundup_power2_divisions", v)));
    return out;
  }
  if (v.back() != ']') throw UsageError("--alloc-conf: roundup_power2_divisions: " + capped_value(v) + ": a list ends with ]");
  std::string body = v.substr(1, v.size() - 2);
  bool first = true;
  size_t last = 0;
  size_t pos = 0;
  while (pos <= body.size()) {
    size_t comma = body.find(',', pos);
    std::string item = trim(body.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
    pos = comma == std::string::npos ? body.size() + 1 : comma + 1;
    size_t colon = item.find(':');
    if (colon == std::string::npos)
      throw UsageError("--alloc-conf: roundup_power2_divisions: '" + capped_value(item) + "' is not SIZE_MB:DIVISIONS");
    const std::string k = trim(item.substr(0, colon));
    const uint64_t d = check_div(parse_u64("roundup_power2_divisions", trim(item.substr(colon + 1))));
    if (k == ">") {
      std::fill(out.begin() + std::min<size_t>(last + 1, kRoundupBuckets), out.end(), d);
      continue;
    }
    const uint64_t mb = parse_u64("roundup_power2_divisions", k);
    if (!power_of_two(mb))
      throw UsageError("--alloc-conf: roundup_power2_divisions: " + capped_value(k) + " MiB is not a power of two");
    const size_t idx = std::min(log2_of(mb), kRoundupBuckets - 1);
    if (first) {
      std::fill(out.begin(), out.begin() + idx, d);
      first = false;
    }
    out[idx] = d;
    last = idx;
  }
  return out;
}

bool parse_bool(const std::string& key, const std::string& v) {
  if (v == "True" || v == "true" || v == "1") return true;
  if (v == "False" || v == "false" || v == "0") return false;
  throw UsageError("--alloc-conf: " + capped_value(key) + ":" + capped_value(v) + ": expected True or False");
}

}  // namespace

AllocConf parse_alloc_conf(std::string_view text) {
  AllocConf c;
  c.text = std::string(text);
  std::string s(text);
  // Split on commas outside brackets.
  std::vector<std::string> items;
  int depth = 0;
  std::string cur;
  for (char ch : s) {
    if (ch == '[') ++depth;
    if (ch == ']') --depth;
    if (ch == ',' && depth == 0) {
      items.push_back(trim(cur));
      cur.clear();
    } else {
      cur += ch;
    }
  }
  if (!trim(cur).empty() || !items.empty()) items.push_back(trim(cur));
  for (const std::string& item : items) {
    if (item.empty()) continue;
    const size_t colon = item.find(':');
    if (colon == std::string::npos) throw UsageError("--alloc-conf: '" + capped_value(item) + "' is not KEY:VALUE");
    const std::string key = trim(item.substr(0, colon)), v = trim(item.substr(colon + 1));
    if (key == "max_split_size_mb") {
      const uint64_t mb = parse_u64(key, v);
      if (mb <= 20) throw UsageError("--alloc-conf: max_split_size_mb:" + capped_value(v) + ": PyTorch requires more than 20");
      // Beyond any device (2^42 MiB would wrap the byte count): no limit, as it acts.
      c.max_split_size = mb >= (uint64_t(1) << 42) ? -1 : int64_t(mb << 20);
    } else if (key == "roundup_power2_divisions") {
      c.roundup_power2_divisions = parse_roundup(v);
    } else if (key == "garbage_collection_threshold") {
      char* end = nullptr;
      const double t = std::strtod(v.c_str(), &end);
      if (v.empty() || end != v.c_str() + v.size() || !(t > 0.0 && t < 1.0))
        throw UsageError("--alloc-conf: garbage_collection_threshold:" + capped_value(v) + ": expected a number between 0 and 1");
      c.garbage_collection_threshold = t;
    } else if (key == "expandable_segments") {
      c.expandable_segments = parse_bool(key, v);
    } else if (key == "release_lock_on_cudamalloc") {
      parse_bool(key, v);
      c.notes.push_back("release_lock_on_cudamalloc changes which thread waits, not memory: no effect on the figures");
    } else if (key == "backend") {
      if (v != "native")
        throw UsageError("--alloc-conf: backend:" + capped_value(v) + " is not modelled (only the native caching allocator is)");
    } else if (key.rfind("pinned_", 0) == 0) {
      throw UsageError("--alloc-conf: " + capped_value(key) + " is about pinned host memory, not the GPU's: not modelled");
    } else {
      throw UsageError("--alloc-conf: " + capped_value(key) + " is not a setting the model covers (max_split_size_mb, "
                       "roundup_power2_divisions, garbage_collection_threshold, expandable_segments, "
                       "release_lock_on_cudamalloc, backend:native)");
    }
  }
  return c;
}

AllocConf alloc_conf_of(const AllocatorSettings& s) {
  AllocConf c;
  for (const auto& [k, v] : s.raw)
    if (k == "PYTORCH_CUDA_ALLOC_CONF") c.text = v;
  c.expandable_segments = s.expandable_segments;
  c.max_split_size = s.max_split_size;
  for (const auto& [k, v] : s.raw)
    if (k == "garbage_collection_threshold") c.garbage_collection_threshold = std::strtod(v.c_str(), nullptr);
  bool any = false;
  for (uint64_t d : s.roundup_power2_divisions) any |= d > 1;
  if (any) c.roundup_power2_divisions = s.roundup_power2_divisions;
  return c;
}

std::vector<std::string> sweep_alloc_confs() {
  return {"",
          "expandable_segments:True",
          "max_split_size_mb:128",
          "max_split_size_mb:512",
          "roundup_power2_divisions:4",
          "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]",
          "expandable_segments:True,roundup_power2_divisions:4",
          "garbage_collection_threshold:0.6,max_split_size_mb:256"};
}

namespace {

struct Blk {
  uint64_t addr = 0, size = 0, requested = 0, stream = 0;
  int32_t prev = -1, next = -1;
  uint32_t seg = 0;
  bool allocated = false;  // handed out (or pending its free_completed)
  bool mapped = true;      // expandable segments: backed by memory
  bool small = false;
  uint64_t gc_base = 0;
};

struct Seg {
  uint64_t stream = 0;
  bool small = false, expandable = false, alive = true;
  uint64_t page = 0;  // expandable: mapping granularity
  int32_t first = -1;
  uint64_t mapped = 0;
};

// Free blocks ordered as PyTorch's BlockComparatorSize: stream, size, address.
using Key = std::tuple<uint64_t, uint64_t, uint64_t, int32_t>;

class Model {
 public:
  Model(const AllocConf& c, const WhatIfOptions& o, int64_t limit)
      : conf_(c), limit_(limit > 0 ? uint64_t(limit) : 0), fraction_(o.limit_is_fraction && limit > 0) {
    settings_.roundup_power2_divisions = c.roundup_power2_divisions;
    mss_ = c.max_split_size > 0 ? uint64_t(c.max_split_size) : kNoSplitLimit;
  }

  // The block handed out, or -1 when the request cannot be met (OOM).
  int32_t alloc(uint64_t requested, uint64_t stream) {
    // Beyond what a segment could hold (the readers refuse such sizes; this
    // keeps the rounding below from wrapping): out of memory.
    if (requested > kMaxDeviceBytes) return -1;
    const uint64_t size = allocator_round_size(requested, settings_);
    const bool small = size <= kSmallSize;
    const uint64_t alloc_size = small ? kSmallBuffer : size < kMinLargeAlloc ? kLargeBuffer
                                                       : kRoundLarge * ((size + kRoundLarge - 1) / kRoundLarge);
    int32_t b = get_free_block(small, stream, size);
    if (b < 0) {
      if (fraction_ && conf_.garbage_collection_threshold > 0) garbage_collect();
      b = alloc_block(small, stream, size, alloc_size);
      if (b < 0 && release_available_cached_blocks(small, stream, size)) b = alloc_block(small, stream, size, alloc_size);
      if (b < 0 && release_cached_blocks()) b = alloc_block(small, stream, size, alloc_size);
      if (b < 0) return -1;
    }
    Blk& blk = b_[size_t(b)];
    const uint64_t rest = blk.size - size;
    const bool split = blk.small || conf_.expandable_segments ? rest >= kMinBlock : size < mss_ && rest > kSmallSize;
    if (split) {
      const int32_t r = new_block(blk.addr + size, rest, blk.seg, stream, blk.small);
      Blk& nb = b_[size_t(r)];
      Blk& ob = b_[size_t(b)];
      nb.prev = b;
      nb.next = ob.next;
      if (ob.next >= 0) b_[size_t(ob.next)].prev = r;
      ob.next = r;
      ob.size = size;
      insert_free(r);
    }
    Blk& out = b_[size_t(b)];
    out.allocated = true;
    out.requested = requested;
    requested_ += int64_t(requested);
    allocated_ += int64_t(out.size);
    active_ += int64_t(out.size);
    return b;
  }

  void free_requested(int32_t b) { allocated_ -= int64_t(b_[size_t(b)].size); }

  void free_completed(int32_t b) {
    Blk& blk = b_[size_t(b)];
    requested_ -= int64_t(blk.requested);
    active_ -= int64_t(blk.size);
    blk.allocated = false;
    blk.requested = 0;
    int32_t m = merge(b);
    insert_free(m);
  }

  // empty_cache(): every free segment back to CUDA, free pages unmapped.
  void empty_cache() { release_cached_blocks(); }

  int64_t requested_ = 0, allocated_ = 0, active_ = 0;
  uint64_t reserved_ = 0, segments_ = 0, mallocs_ = 0, frees_ = 0;

 private:
  int32_t new_block(uint64_t addr, uint64_t size, uint32_t seg, uint64_t stream, bool small) {
    Blk n;
    n.addr = addr;
    n.size = size;
    n.seg = seg;
    n.stream = stream;
    n.small = small;
    b_.push_back(n);
    return int32_t(b_.size() - 1);
  }
  std::set<Key>& pool(bool small) { return small ? small_ : large_; }
  std::set<Key>& unmapped(bool small) { return small ? small_unmapped_ : large_unmapped_; }
  // The free blocks release_cached_blocks() and garbage_collect() act on,
  // kept apart so each call costs what it releases: a whole segment
  // (non-expandable), or a block of an expandable segment holding at least
  // one whole page (unmap() leaves the others as they are). Neither
  // property changes while a block is free: its address, size and whether
  // it has neighbours change only out of the pools.
  bool whole(const Blk& b) const { return b.prev < 0 && b.next < 0 && !segs_[b.seg].expandable; }
  bool holds_page(const Blk& b) const {
    const Seg& s = segs_[b.seg];
    if (!s.expandable) return false;
    const uint64_t lo = ((b.addr + s.page - 1) / s.page) * s.page, hi = ((b.addr + b.size) / s.page) * s.page;
    return hi > lo;
  }
  void insert_free(int32_t i) {
    Blk& b = b_[size_t(i)];
    b.gc_base = calls_[b.small];
    const Key k{b.stream, b.mapped ? b.size : 0, b.addr, i};
    if (!b.mapped) {
      unmapped(b.small).insert(k);
      return;
    }
    pool(b.small).insert(k);
    if (whole(b)) whole_[b.small].insert(k);
    else if (holds_page(b)) unmappable_[b.small].insert(k);
  }
  void erase_free(int32_t i) {
    const Blk& b = b_[size_t(i)];
    const Key k{b.stream, b.mapped ? b.size : 0, b.addr, i};
    if (!b.mapped) {
      unmapped(b.small).erase(k);
      return;
    }
    pool(b.small).erase(k);
    whole_[b.small].erase(k);
    unmappable_[b.small].erase(k);
  }
  bool is_free(int32_t i) const { return i >= 0 && !b_[size_t(i)].allocated; }

  // Merges free block i with its free neighbours of the same mapping;
  // returns the merged block (not in any pool).
  int32_t merge(int32_t i) {
    for (int side = 0; side < 2; ++side) {
      Blk& b = b_[size_t(i)];
      const int32_t n = side == 0 ? b.prev : b.next;
      if (!is_free(n) || b_[size_t(n)].mapped != b.mapped) continue;
      erase_free(n);
      Blk& o = b_[size_t(n)];
      if (side == 0) {  // o before b: o absorbs b
        o.size += b.size;
        o.next = b.next;
        if (b.next >= 0) b_[size_t(b.next)].prev = n;
        i = n;
      } else {
        b.size += o.size;
        b.next = o.next;
        if (o.next >= 0) b_[size_t(o.next)].prev = i;
      }
    }
    return i;
  }

  int32_t get_free_block(bool small, uint64_t stream, uint64_t size) {
    auto& p = pool(small);
    if (fraction_ && conf_.garbage_collection_threshold > 0) ++calls_[small];
    auto it = p.lower_bound({stream, size, 0, -1});
    if (it == p.end() || std::get<0>(*it) != stream) return -1;
    if (conf_.expandable_segments) {
      // A tail block followed by unmapped space counts as what it can grow to.
      auto grow = [&](const Key& k) {
        const Blk& b = b_[size_t(std::get<3>(k))];
        return b.size + (b.next >= 0 && !b_[size_t(b.next)].mapped ? b_[size_t(b.next)].size : 0);
      };
      auto next = std::next(it);
      while (next != p.end() && std::get<0>(*next) == stream && grow(*next) < grow(*it)) it = next++;
    }
    const uint64_t found = std::get<1>(*it);
    if (size < mss_ && found >= mss_) return -1;
    if (size >= mss_ && found >= size + kLargeBuffer) return -1;
    const int32_t i = std::get<3>(*it);
    erase_free(i);
    return i;
  }

  // reserved_ never passes limit_ (nor kAddressSpace), so neither sum wraps.
  bool fits(uint64_t more) const { return limit_ == 0 || more <= limit_ - std::min(limit_, reserved_); }

  int32_t alloc_block(bool small, uint64_t stream, uint64_t size, uint64_t alloc_size) {
    if (conf_.expandable_segments) return expandable_block(small, stream, size);
    if (!fits(alloc_size) || alloc_size > next_addr_) return -1;
    Seg s;
    s.stream = stream;
    s.small = small;
    s.mapped = alloc_size;
    segs_.push_back(s);
    // CUDA hands out device addresses from the top down: a newer segment
    // lies below the older ones, which decides ties between equal blocks.
    next_addr_ -= ((alloc_size + kRoundLarge - 1) / kRoundLarge) * kRoundLarge;
    const int32_t b = new_block(next_addr_, alloc_size, uint32_t(segs_.size() - 1), stream, small);
    segs_.back().first = b;
    reserved_ += alloc_size;
    ++segments_;
    ++mallocs_;
    return b;
  }

  // Expandable: the lowest-address unmapped range of the stream whose free
  // block before it and the range together hold `size`; a new range when
  // none. Maps whole pages at its start.
  int32_t expandable_block(bool small, uint64_t stream, uint64_t size) {
    auto& um = unmapped(small);
    int32_t tail = -1;
    for (auto it = um.lower_bound({stream, 0, 0, -1}); it != um.end() && std::get<0>(*it) == stream; ++it) {
      const int32_t u = std::get<3>(*it);
      const int32_t prev = b_[size_t(u)].prev;
      const uint64_t have = (is_free(prev) && b_[size_t(prev)].mapped ? b_[size_t(prev)].size : 0) + b_[size_t(u)].size;
      if (have >= size) {
        tail = u;
        break;
      }
    }
    if (tail < 0) {
      // A request larger than a whole range cannot be mapped in one: PyTorch
      // reserves each range once, the device's size; out of memory.
      if (size > kExpandableRange || kExpandableRange > next_addr_) return -1;
      Seg s;
      s.stream = stream;
      s.small = small;
      s.expandable = true;
      s.page = small ? kSmallBuffer : kLargeBuffer;
      segs_.push_back(s);
      next_addr_ -= kExpandableRange;
      tail = new_block(next_addr_, kExpandableRange, uint32_t(segs_.size() - 1), stream, small);
      b_[size_t(tail)].mapped = false;
      segs_.back().first = tail;
      insert_free(tail);
    }
    Blk& u = b_[size_t(tail)];
    const uint64_t page = segs_[u.seg].page;
    const int32_t prev = u.prev;
    const uint64_t before = is_free(prev) && b_[size_t(prev)].mapped ? b_[size_t(prev)].size : 0;
    const uint64_t need = size > before ? size - before : 0;
    const uint64_t map = std::min(u.size, ((need + page - 1) / page) * page);
    if (!fits(map)) return -1;
    erase_free(tail);
    if (map < b_[size_t(tail)].size) {  // the rest stays unmapped, after the mapped part
      Blk& t = b_[size_t(tail)];
      const int32_t r = new_block(t.addr + map, t.size - map, t.seg, stream, small);
      Blk& rb = b_[size_t(r)];
      Blk& tb = b_[size_t(tail)];
      rb.mapped = false;
      rb.prev = tail;
      rb.next = tb.next;
      if (tb.next >= 0) b_[size_t(tb.next)].prev = r;
      tb.next = r;
      tb.size = map;
      insert_free(r);
    }
    b_[size_t(tail)].mapped = true;
    if (segs_[b_[size_t(tail)].seg].mapped == 0) ++segments_;
    segs_[b_[size_t(tail)].seg].mapped += map;
    reserved_ += map;
    ++mallocs_;
    return merge(tail);  // with the free block before it; not in a pool
  }

  // Whole free segments (non-expandable) released; returns their bytes.
  uint64_t release_block(int32_t i) {
    Blk& b = b_[size_t(i)];
    erase_free(i);
    Seg& s = segs_[b.seg];
    s.alive = false;
    reserved_ -= b.size;
    --segments_;
    ++frees_;
    return b.size;
  }

  bool release_available_cached_blocks(bool small, uint64_t stream, uint64_t size) {
    if (mss_ == kNoSplitLimit) return false;
    auto& p = pool(small);
    const uint64_t want = std::max(size, mss_);
    auto whole = [&](const Key& k) {
      const Blk& b = b_[size_t(std::get<3>(k))];
      return b.prev < 0 && b.next < 0 && !segs_[b.seg].expandable;
    };
    auto it = p.lower_bound({stream, want, 0, -1});
    if (it != p.end() && std::get<0>(*it) == stream) {
      if (!whole(*it)) return false;
      release_block(std::get<3>(*it));
      return true;
    }
    if (it == p.begin()) return false;
    --it;
    uint64_t released = 0;
    std::vector<int32_t> go;
    while (released < want && std::get<1>(*it) >= mss_ && std::get<0>(*it) == stream) {
      if (whole(*it)) {
        go.push_back(std::get<3>(*it));
        released += std::get<1>(*it);
      }
      if (it == p.begin()) break;
      --it;
    }
    for (int32_t i : go) release_block(i);
    return released >= want;
  }

  bool release_cached_blocks() {
    for (bool small : {true, false}) {
      std::vector<int32_t> whole, to_unmap;
      for (const Key& k : whole_[small]) whole.push_back(std::get<3>(k));
      for (const Key& k : unmappable_[small]) to_unmap.push_back(std::get<3>(k));
      for (int32_t i : whole) release_block(i);
      for (int32_t i : to_unmap) unmap(i);
    }
    return true;
  }

  // Unmaps the whole pages inside free block i of an expandable segment.
  void unmap(int32_t i) {
    Blk& b = b_[size_t(i)];
    Seg& s = segs_[b.seg];
    const uint64_t lo = ((b.addr + s.page - 1) / s.page) * s.page, hi = ((b.addr + b.size) / s.page) * s.page;
    if (hi <= lo) return;
    erase_free(i);
    // Splits block `at` at `addr`; returns the part from `addr` on.
    auto cut = [&](int32_t at, uint64_t addr) {
      Blk& a = b_[size_t(at)];
      const int32_t n = new_block(addr, a.addr + a.size - addr, a.seg, a.stream, a.small);
      Blk& nb = b_[size_t(n)];
      Blk& ab = b_[size_t(at)];
      nb.prev = at;
      nb.next = ab.next;
      if (ab.next >= 0) b_[size_t(ab.next)].prev = n;
      ab.next = n;
      ab.size = addr - ab.addr;
      return n;
    };
    int32_t mid = i;
    if (lo > b_[size_t(i)].addr) {
      mid = cut(i, lo);
      insert_free(i);  // the mapped part before
    }
    if (hi < b_[size_t(mid)].addr + b_[size_t(mid)].size) {
      const int32_t after = cut(mid, hi);
      insert_free(after);  // the mapped part after
    }
    Blk& m = b_[size_t(mid)];
    m.mapped = false;
    reserved_ -= m.size;
    s.mapped -= m.size;
    if (s.mapped == 0) --segments_;
    ++frees_;
    insert_free(merge(mid));
  }

  void garbage_collect() {
    // The threshold comes from the file (allocator_settings) as any double:
    // the product is clamped to the uint64 range (NaN, negative: 0).
    const double t = conf_.garbage_collection_threshold * double(limit_);
    const uint64_t threshold = !(t > 0) ? 0 : t >= 18446744073709551615.0 ? UINT64_MAX : uint64_t(t);
    if (reserved_ <= threshold) return;
    const uint64_t target = reserved_ - threshold;
    const std::set<Key>& p = whole_[0];  // the large pool's whole free segments, in the pool's order
    double total_age = 0;
    uint64_t freeable = 0;
    for (const Key& k : p) {
      total_age += double(calls_[0] - b_[size_t(std::get<3>(k))].gc_base);
      ++freeable;
    }
    uint64_t reclaimed = 0;
    bool freed = true;
    while (reclaimed < target && freed && freeable > 0) {
      const double age = total_age / double(freeable);
      freed = false;
      std::vector<int32_t> go;
      for (const Key& k : p) {
        const int32_t i = std::get<3>(k);
        if (double(calls_[0] - b_[size_t(i)].gc_base) >= age) go.push_back(i);
      }
      for (int32_t i : go) {
        freed = true;
        total_age -= double(calls_[0] - b_[size_t(i)].gc_base);
        --freeable;
        reclaimed += release_block(i);
      }
    }
  }

  AllocConf conf_;
  AllocatorSettings settings_;
  uint64_t mss_ = kNoSplitLimit;
  uint64_t limit_ = 0;
  bool fraction_ = false;
  std::vector<Blk> b_;
  std::vector<Seg> segs_;
  std::set<Key> small_, large_, small_unmapped_, large_unmapped_;
  std::set<Key> whole_[2], unmappable_[2];  // [small]: subsets of small_/large_ (see insert_free)
  uint64_t next_addr_ = kAddressSpace;  // segments are placed below it
  uint64_t calls_[2] = {0, 0};  // [small]: get_free_block calls, for garbage collection ages
};

bool is_segment_release(EventKind k) { return k == EventKind::SegmentFree || k == EventKind::SegmentUnmap; }

WhatIfScenario run_one(const Device& dev, const AllocatorState& before, const AllocConf& conf, const WhatIfOptions& opts,
                       int64_t limit, bool limit_is_fraction, uint64_t* unknown_frees) {
  WhatIfOptions o = opts;
  o.limit_is_fraction = limit_is_fraction;
  Model m(conf, o, limit);
  WhatIfScenario sc;
  sc.alloc_conf = conf.text;
  sc.notes = conf.notes;
  std::unordered_map<uint64_t, int32_t> live;  // recorded address -> block
  live.reserve(4096);
  uint64_t unknown = 0;
  const std::vector<Event>& ev = dev.events;
  // A partial history: the blocks alive before its first event (rebuilt by
  // the exact replay from the dump) are requested first, in address order.
  for (const LiveAllocation& a : before.live) {
    if (a.alloc_event >= 0) continue;
    const int32_t b = m.alloc(a.requested, a.stream);
    if (b < 0) {
      sc.oom = WhatIfOom{-1, a.requested, m.reserved_};
      return sc;
    }
    live[a.addr] = b;
    if (a.pending_free) m.free_requested(b);
  }
  auto peaks = [&](int64_t i) {
    sc.requested = std::max(sc.requested, m.requested_);
    if (m.allocated_ > sc.allocated) {
      sc.allocated = m.allocated_;
      sc.cached_at_peak = int64_t(m.reserved_) - m.allocated_;
    }
    sc.active = std::max(sc.active, m.active_);
    sc.segments_peak = std::max(sc.segments_peak, m.segments_);
    if (int64_t(m.reserved_) > sc.reserved) {
      sc.reserved = int64_t(m.reserved_);
      sc.reserved_peak_event = i;
      sc.segments = m.segments_;
    }
  };
  for (size_t i = 0; i < ev.size(); ++i) {
    const Event& e = ev[i];
    switch (e.kind) {
      case EventKind::Alloc:
      case EventKind::Oom: {
        const int32_t b = m.alloc(e.size, e.stream);
        if (b < 0) {
          sc.oom = WhatIfOom{int64_t(i), e.size, m.reserved_};
          sc.cuda_mallocs = m.mallocs_;
          sc.cuda_frees = m.frees_;
          return sc;
        }
        if (e.kind == EventKind::Alloc) {
          live[e.addr] = b;
        } else {  // the recorded run failed here; in this model it fits (and is given back at once)
          m.free_requested(b);
          m.free_completed(b);
          sc.notes.push_back("the recorded run ran out of memory at event " + std::to_string(i) +
                             "; under this setting that request fits (the rest of the window is the recorded run's)");
        }
        break;
      }
      case EventKind::FreeRequested: {
        auto it = live.find(e.addr);
        if (it == live.end()) {
          ++unknown;
          break;
        }
        m.free_requested(it->second);
        break;
      }
      case EventKind::FreeCompleted: {
        auto it = live.find(e.addr);
        if (it == live.end()) break;
        m.free_completed(it->second);
        live.erase(it);
        break;
      }
      case EventKind::SegmentFree:
      case EventKind::SegmentUnmap: {
        // A run of releases not followed by a segment_alloc/map is
        // empty_cache(); one followed by it is the allocator's own retry,
        // which the model decides for itself.
        if (i > 0 && is_segment_release(ev[i - 1].kind)) break;
        size_t j = i;
        while (j < ev.size() && is_segment_release(ev[j].kind)) ++j;
        const bool retry = j < ev.size() && (ev[j].kind == EventKind::SegmentAlloc || ev[j].kind == EventKind::SegmentMap);
        if (!retry) m.empty_cache();
        break;
      }
      default: break;
    }
    peaks(int64_t(i));
  }
  sc.cuda_mallocs = m.mallocs_;
  sc.cuda_frees = m.frees_;
  *unknown_frees = unknown;
  return sc;
}

}  // namespace

const Device* whatif_device(const Trace& trace) {
  const Device* dev = nullptr;
  uint64_t most = 0;
  for (const Device& d : trace.devices) {
    uint64_t n = 0;
    for (const Event& e : d.events) n += e.kind == EventKind::Alloc;
    if (n > most || !dev) {
      most = n;
      dev = &d;
    }
  }
  return most == 0 ? nullptr : dev;
}

WhatIfResult what_if(const Trace& trace, const std::vector<AllocConf>& confs, const WhatIfOptions& opts) {
  const Device* dev = whatif_device(trace);
  if (!dev)
    throw UsageError("whatif needs an allocation history (record with torch.cuda.memory._record_memory_history)");
  return what_if(trace, *dev, replay_device(trace, *dev), confs, opts);
}

WhatIfResult what_if(const Trace& trace, const Device& device, const DeviceReplay& rep, const std::vector<AllocConf>& confs,
                     const WhatIfOptions& opts) {
  const Device* dev = &device;
  uint64_t most = 0;
  for (const Event& e : dev->events) most += e.kind == EventKind::Alloc;
  if (dev->from_profiler())
    throw UsageError("whatif needs a memory snapshot: a profiler trace records no requested sizes or streams' frees");
  for (const Segment& s : dev->segments)
    if (s.pool_id[0] != 0 || s.pool_id[1] != 0)
      throw UsageError("whatif: the run uses a private memory pool (CUDA graphs, torch.cuda.MemPool), which the model "
                       "does not cover");
  WhatIfResult r;
  r.device = dev->index;
  r.events = dev->events.size();
  r.allocs = most;
  r.truncation = rep.truncated ? rep.truncation : Truncation::None;
  r.partial = rep.truncated;
  r.memory_limit = opts.memory_limit;
  bool fraction = opts.memory_limit > 0 && opts.limit_is_fraction;
  r.limit_source = opts.memory_limit > 0 ? "given" : "none";
  if (opts.memory_limit <= 0) {
    // The run's own out-of-memory: what it held then plus what the device had free.
    for (size_t i = 0; i < dev->events.size(); ++i)
      if (dev->events[i].kind == EventKind::Oom) {
        const AllocatorState st = allocator_state_at(trace, *dev, int64_t(i));
        r.memory_limit = st.counters.reserved + int64_t(dev->events[i].addr);
        r.limit_source = "the recorded out-of-memory error: reserved then plus the device's free memory";
        fraction = false;
        break;
      }
  }
  AllocatorState before;
  if (r.partial) before = allocator_state_at(trace, *dev, -1);
  r.recorded_conf = alloc_conf_of(trace.settings).text;
  r.recorded_requested = rep.peak_requested.bytes;
  r.recorded_allocated = rep.peak_allocated.bytes;
  r.recorded_active = rep.peak_active.bytes;
  r.recorded_reserved = rep.peak_reserved.bytes;
  r.recorded_oom = rep.oom_events > 0;
  // The calibration first, then the scenarios, `threads` at a time.
  std::vector<AllocConf> all;
  all.push_back(alloc_conf_of(trace.settings));
  all.insert(all.end(), confs.begin(), confs.end());
  std::vector<WhatIfScenario> out(all.size());
  std::vector<uint64_t> unknown(all.size(), 0);
  const size_t workers = std::max<size_t>(1, std::min<size_t>(opts.threads, all.size()));
  std::vector<std::thread> pool;
  std::vector<std::exception_ptr> errors(workers);
  for (size_t w = 0; w < workers; ++w)
    pool.emplace_back([&, w] {
      try {
        for (size_t k = w; k < all.size(); k += workers)
          out[k] = run_one(*dev, before, all[k], opts, r.memory_limit, fraction, &unknown[k]);
      } catch (...) {
        errors[w] = std::current_exception();
      }
    });
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  r.calibration = std::move(out[0]);
  r.scenarios.assign(std::make_move_iterator(out.begin() + 1), std::make_move_iterator(out.end()));
  for (uint64_t u : unknown) r.unknown_frees = std::max(r.unknown_frees, u);
  return r;
}

}  // namespace snapdiff
