#include "caching_allocator.hpp"

#include <algorithm>

namespace snapcapture {

namespace {
constexpr uint64_t kMinBlock = 512;
constexpr uint64_t kSmallSize = uint64_t(1) << 20;     // requests <= 1 MiB: small pool
constexpr uint64_t kSmallBuffer = uint64_t(2) << 20;   // small pool segments
constexpr uint64_t kLargeBuffer = uint64_t(20) << 20;  // large pool segments for requests < 10 MiB
constexpr uint64_t kMinLargeAlloc = uint64_t(10) << 20;
constexpr uint64_t kRoundLarge = uint64_t(2) << 20;
}  // namespace

struct CachingAllocator::Block {
  uint64_t addr = 0, size = 0, requested = 0, stream = 0;
  bool small = false, allocated = false;
  Block* prev = nullptr;  // neighbours in the same segment
  Block* next = nullptr;
  uint32_t scope = 0;
};

bool CachingAllocator::BySize::operator()(const Block* a, const Block* b) const {
  if (a->stream != b->stream) return a->stream < b->stream;
  if (a->size != b->size) return a->size < b->size;
  return a->addr < b->addr;
}

uint64_t CachingAllocator::round_size(uint64_t bytes) {
  if (bytes < kMinBlock) return kMinBlock;
  return kMinBlock * ((bytes + kMinBlock - 1) / kMinBlock);
}

uint64_t CachingAllocator::segment_size(uint64_t rounded) {
  if (rounded <= kSmallSize) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return kLargeBuffer;
  return kRoundLarge * ((rounded + kRoundLarge - 1) / kRoundLarge);
}

CachingAllocator::CachingAllocator(DeviceApi& dev, int device_index) : dev_(dev), device_(device_index) {
  scopes_.push_back(ScopeNode{0, std::string(), {}});
}

CachingAllocator::~CachingAllocator() = default;

void CachingAllocator::push_scope(const std::string& label) {
  auto& children = scopes_[current_scope_].children;
  auto it = children.find(label);
  if (it != children.end()) {
    current_scope_ = it->second;
    return;
  }
  uint32_t id = uint32_t(scopes_.size());
  children.emplace(label, id);
  scopes_.push_back(ScopeNode{current_scope_, label, {}});
  current_scope_ = id;
}

void CachingAllocator::pop_scope() { current_scope_ = scopes_[current_scope_].parent; }

void CachingAllocator::record(snapdiff::EventKind kind, uint64_t addr, uint64_t size, uint64_t stream) {
  if (!recording_) return;
  recs_.push_back({kind, addr, size, stream, dev_.now_us(), current_scope_});
}

void CachingAllocator::record_kernel(const std::string& name, uint64_t stream) {
  if (!recording_) return;
  uint32_t id;
  auto it = kernel_name_index_.find(name);
  if (it != kernel_name_index_.end()) {
    id = it->second;
  } else {
    id = uint32_t(kernel_names_.size());
    kernel_names_.push_back(name);
    kernel_name_index_.emplace(name, id);
  }
  kernel_recs_.push_back({dev_.now_us(), stream, id, current_scope_});
}

void CachingAllocator::record_device_memory(const std::string& label, uint64_t free_bytes, uint64_t total_bytes) {
  if (!recording_) return;
  mem_recs_.push_back({dev_.now_us(), free_bytes, total_bytes, uint64_t(stats_.reserved), label});
}

void CachingAllocator::touch_peaks() {
  stats_.peak_requested = std::max(stats_.peak_requested, stats_.requested);
  stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.allocated);
  stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.reserved);
}

CachingAllocator::Block* CachingAllocator::find_free(Pool& pool, uint64_t size, uint64_t stream) {
  Block key;
  key.stream = stream;
  key.size = size;
  key.addr = 0;
  auto it = pool.lower_bound(&key);
  if (it == pool.end() || (*it)->stream != stream) return nullptr;
  Block* b = *it;
  pool.erase(it);
  return b;
}

CachingAllocator::Block* CachingAllocator::new_segment(uint64_t seg_bytes, uint64_t stream, bool small,
                                                       uint64_t request) {
  uint64_t addr = dev_.malloc(seg_bytes);
  if (addr == 0) {
    release_free_segments();  // like PyTorch: free the cache, then retry once
    addr = dev_.malloc(seg_bytes);
  }
  if (addr == 0) {
    record(snapdiff::EventKind::Oom, 0, request, stream);
    return nullptr;
  }
  storage_.push_back(std::make_unique<Block>());
  Block* b = storage_.back().get();
  b->addr = addr;
  b->size = seg_bytes;
  b->stream = stream;
  b->small = small;
  segments_.push_back(b);
  stats_.reserved += int64_t(seg_bytes);
  touch_peaks();
  record(snapdiff::EventKind::SegmentAlloc, addr, seg_bytes, stream);
  return b;
}

uint64_t CachingAllocator::allocate(uint64_t bytes, uint64_t stream) {
  const uint64_t size = round_size(bytes);
  const bool small = size <= kSmallSize;
  Pool& pool = small ? small_ : large_;
  Block* b = find_free(pool, size, stream);
  if (!b) {
    b = new_segment(segment_size(size), stream, small, bytes);
    if (!b) throw OutOfMemory("out of memory allocating " + std::to_string(bytes) + " bytes");
  }
  // Split when the remainder is worth keeping (PyTorch's shouldSplit).
  const uint64_t remaining = b->size - size;
  if (small ? remaining >= kMinBlock : remaining > kSmallSize) {
    storage_.push_back(std::make_unique<Block>());
    Block* rest = storage_.back().get();
    rest->addr = b->addr + size;
    rest->size = remaining;
    rest->stream = stream;
    rest->small = small;
    rest->prev = b;
    rest->next = b->next;
    if (b->next) b->next->prev = rest;
    b->next = rest;
    b->size = size;
    pool.insert(rest);
  }
  b->allocated = true;
  b->requested = bytes;
  b->scope = current_scope_;
  allocated_[b->addr] = b;
  stats_.requested += int64_t(bytes);
  stats_.allocated += int64_t(b->size);
  touch_peaks();
  record(snapdiff::EventKind::Alloc, b->addr, bytes, stream);
  return b->addr;
}

void CachingAllocator::deallocate(uint64_t addr) {
  auto it = allocated_.find(addr);
  if (it == allocated_.end()) throw std::invalid_argument("deallocate of an address not allocated");
  Block* b = it->second;
  allocated_.erase(it);
  stats_.requested -= int64_t(b->requested);
  stats_.allocated -= int64_t(b->size);
  record(snapdiff::EventKind::FreeRequested, b->addr, b->requested, b->stream);
  record(snapdiff::EventKind::FreeCompleted, b->addr, b->requested, b->stream);
  b->allocated = false;
  b->requested = 0;
  Pool& pool = b->small ? small_ : large_;
  // Merge with free neighbours of the same segment.
  if (b->next && !b->next->allocated) {
    Block* n = b->next;
    pool.erase(n);
    b->size += n->size;
    b->next = n->next;
    if (n->next) n->next->prev = b;
    n->size = 0;
  }
  if (b->prev && !b->prev->allocated) {
    Block* p = b->prev;
    pool.erase(p);
    p->size += b->size;
    p->next = b->next;
    if (b->next) b->next->prev = p;
    b->size = 0;
    b = p;
  }
  pool.insert(b);
}

void CachingAllocator::release_free_segments() {
  std::vector<Block*> keep;
  for (Block* s : segments_) {
    // A segment's first block may have been merged into... it is always the
    // first: merges keep the lower block. Whole-segment free block: no neighbours.
    if (!s->allocated && !s->next && !s->prev) {
      (s->small ? small_ : large_).erase(s);
      stats_.reserved -= int64_t(s->size);
      record(snapdiff::EventKind::SegmentFree, s->addr, s->size, s->stream);
      dev_.free(s->addr);
      s->size = 0;
    } else {
      keep.push_back(s);
    }
  }
  segments_ = std::move(keep);
}

void CachingAllocator::empty_cache() { release_free_segments(); }

snapdiff::Trace CachingAllocator::to_trace() const {
  snapdiff::Trace t;
  t.source.format = "snapcapture";
  std::vector<snapdiff::StackId> stack_of(scopes_.size(), 0);
  std::vector<snapdiff::FrameId> frames;
  // Node 0 is the empty stack; a node's parent always comes before it.
  for (size_t i = 1; i < scopes_.size(); ++i) {
    frames.clear();
    // Innermost first: the last label pushed.
    for (uint32_t n = uint32_t(i); n != 0; n = scopes_[n].parent) {
      snapdiff::Frame f;
      f.name = t.strings.intern(scopes_[n].label);
      f.file = t.strings.intern("snapcapture");
      frames.push_back(t.intern_frame(f));
    }
    stack_of[i] = t.stacks.intern(frames.data(), frames.size());
  }
  snapdiff::Device& d = t.device(device_);
  d.has_trace = true;
  d.events.reserve(recs_.size());
  for (const Rec& r : recs_) {
    snapdiff::Event e;
    e.kind = r.kind;
    e.addr = r.addr;
    e.size = r.size;
    e.stream = r.stream;
    e.time_us = r.time_us;
    e.stack = stack_of[r.scope];
    e.action = t.strings.intern(snapdiff::event_kind_name(r.kind));
    d.events.push_back(e);
  }
  std::vector<snapdiff::StrId> kernel_name(kernel_names_.size());
  for (size_t i = 0; i < kernel_names_.size(); ++i) kernel_name[i] = t.strings.intern(kernel_names_[i]);
  t.kernels.reserve(kernel_recs_.size());
  for (const KernelRec& r : kernel_recs_) {
    snapdiff::KernelLaunch k;
    k.device = device_;
    k.time_us = r.time_us;
    k.name = kernel_name[r.name];
    k.stack = stack_of[r.scope];
    k.stream = r.stream;
    t.kernels.push_back(k);
  }
  for (const MemRec& r : mem_recs_) {
    snapdiff::DeviceMemorySample m;
    m.device = device_;
    m.time_us = r.time_us;
    m.free_bytes = r.free_bytes;
    m.total_bytes = r.total_bytes;
    m.reserved_bytes = r.reserved_bytes;
    m.label = t.strings.intern(r.label);
    t.device_memory.push_back(m);
  }
  // Current segments and their blocks, in address order.
  std::vector<Block*> segs = segments_;
  std::sort(segs.begin(), segs.end(), [](const Block* a, const Block* b) { return a->addr < b->addr; });
  for (const Block* s : segs) {
    snapdiff::Segment sg;
    sg.addr = s->addr;
    sg.stream = s->stream;
    sg.small_pool = s->small;
    sg.first_block = uint32_t(d.blocks.size());
    for (const Block* b = s; b; b = b->next) {
      snapdiff::Block blk;
      blk.addr = b->addr;
      blk.size = b->size;
      blk.requested_size = b->requested;
      blk.state = b->allocated ? snapdiff::BlockState::ActiveAllocated : snapdiff::BlockState::Inactive;
      blk.stack = b->allocated ? stack_of[b->scope] : 0;
      d.blocks.push_back(blk);
      sg.total_size += b->size;
      if (b->allocated) {
        sg.allocated_size += b->size;
        sg.active_size += b->size;
        sg.requested_size += b->requested;
      }
    }
    sg.block_count = uint32_t(d.blocks.size() - sg.first_block);
    d.segments.push_back(sg);
  }
  t.settings.present = true;
  t.metadata.emplace_back("producer", "snapcapture allocator");
  return t;
}

}  // namespace snapcapture
