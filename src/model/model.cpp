#include <cstring>

#include "snapdiff/error.hpp"
#include "snapdiff/model/model.hpp"

namespace snapdiff {

std::string InputError::describe() const {
  std::string s = file_.empty() ? std::string("<input>") : file_;
  if (has_offset_) s += ": offset " + std::to_string(offset_);
  else if (!path_.empty()) s += ": " + path_;
  s += ": ";
  s += what();
  return s;
}

namespace {
constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;
// Murmur3's finaliser: every input bit reaches every output bit.
uint64_t mix64(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h;
}
// A string's hash: 8 bytes a step, the tail read as at most two overlapping
// words. Names and file names are a few dozen bytes: fewer steps than the
// general-purpose hash, and no call.
uint64_t hash_string(std::string_view s) {
  const char* p = s.data();
  size_t n = s.size();
  uint64_t h = uint64_t(n) * kMul ^ 0x27d4eb2f165667c5ull;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = (h ^ w) * kMul;
    h ^= h >> 29;
  }
  uint64_t w = 0;
  if (n >= 4) {
    uint32_t a, b;
    std::memcpy(&a, p, 4);
    std::memcpy(&b, p + n - 4, 4);
    w = (uint64_t(a) << 32) | b;
  } else if (n > 0) {
    w = (uint64_t(uint8_t(p[0])) << 16) | (uint64_t(uint8_t(p[n / 2])) << 8) | uint8_t(p[n - 1]);
  }
  return mix64(h ^ w);
}
}  // namespace

StringTable::StringTable() { intern(""); }

size_t StringTable::slot_of(std::string_view s, uint64_t h) const {
  const size_t mask = slots_.size() - 1;
  const uint64_t tag = h >> 32;
  for (size_t i = size_t(h) & mask;; i = (i + 1) & mask) {
    const uint64_t e = slots_[i];
    if (e == 0) return i;
    if ((e >> 32) == tag && views_[uint32_t(e) - 1] == s) return i;
  }
}

void StringTable::grow_index() {
  std::vector<uint64_t> old(slots_.size() < 1024 ? 2048 : 2 * slots_.size(), 0);
  old.swap(slots_);
  const size_t mask = slots_.size() - 1;
  for (uint64_t e : old) {
    if (e == 0) continue;
    // The slot keeps only the hash's high half: the index bits come from
    // hashing the string again (rare: the table doubles).
    const uint64_t h = hash_string(views_[uint32_t(e) - 1]);
    size_t i = size_t(h) & mask;
    while (slots_[i] != 0) i = (i + 1) & mask;
    slots_[i] = e;
  }
}

StrId StringTable::intern(std::string_view s) {
  if (2 * (views_.size() + 1) > slots_.size()) grow_index();
  const uint64_t h = hash_string(s);
  const size_t slot = slot_of(s, h);
  if (slots_[slot] != 0) return StrId(uint32_t(slots_[slot]) - 1);
  if (chunks_.empty() || s.size() > chunk_cap_ - chunk_used_) {
    size_t cap = s.size() > (size_t(1) << 20) ? s.size() : (size_t(1) << 20);
    chunks_.emplace_back(new char[cap]);
    chunk_used_ = 0;
    chunk_cap_ = cap;
  }
  char* dst = chunks_.back().get() + chunk_used_;
  if (!s.empty()) std::memcpy(dst, s.data(), s.size());
  chunk_used_ += s.size();
  stored_ += s.size();
  std::string_view stored(dst, s.size());
  StrId id = StrId(views_.size());
  views_.push_back(stored);
  slots_[slot] = ((h >> 32) << 32) | (uint64_t(id) + 1);
  return id;
}

StrId StringTable::find(std::string_view s) const {
  if (slots_.empty()) return UINT32_MAX;
  const size_t slot = slot_of(s, hash_string(s));
  return slots_[slot] == 0 ? UINT32_MAX : StrId(uint32_t(slots_[slot]) - 1);
}

namespace {
uint64_t hash_child(StackId parent, FrameId frame) { return mix64((uint64_t(parent) << 32) | frame); }
}  // namespace

void StackTable::grow_children() {
  std::vector<StackId> old(child_slots_.size() < 1024 ? 2048 : 2 * child_slots_.size(), 0);
  old.swap(child_slots_);
  const size_t mask = child_slots_.size() - 1;
  for (StackId id : old) {
    if (id == 0) continue;
    size_t i = size_t(hash_child(nodes_[id].parent, nodes_[id].frame)) & mask;
    while (child_slots_[i] != 0) i = (i + 1) & mask;
    child_slots_[i] = id;
  }
}

StackId StackTable::child(StackId parent, FrameId frame) {
  if (2 * nodes_.size() > child_slots_.size()) grow_children();
  const size_t mask = child_slots_.size() - 1;
  size_t i = size_t(hash_child(parent, frame)) & mask;
  for (;; i = (i + 1) & mask) {
    const StackId id = child_slots_[i];
    if (id == 0) break;
    if (nodes_[id].parent == parent && nodes_[id].frame == frame) return id;
  }
  StackId id = StackId(nodes_.size());
  nodes_.push_back({frame, parent});
  child_slots_[i] = id;
  return id;
}

namespace {
// Hash of a frame sequence: four independent lanes over pairs of ids, so the
// multiplies overlap instead of forming one long dependency chain.
uint64_t hash_frames(const FrameId* f, size_t n) {
  constexpr uint64_t K = 0x9E3779B97F4A7C15ull;
  uint64_t a = 0xcbf29ce484222325ull ^ n, b = 0x84222325cbf29ce4ull, c = 0x100000001b3ull, d = K;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w[4];
    std::memcpy(w, f + i, sizeof w);
    a = (a ^ w[0]) * K;
    b = (b ^ w[1]) * K;
    c = (c ^ w[2]) * K;
    d = (d ^ w[3]) * K;
    a ^= a >> 29;
    b ^= b >> 29;
    c ^= c >> 29;
    d ^= d >> 29;
  }
  for (; i < n; ++i) a = ((a ^ f[i]) * K) ^ (a >> 31);
  uint64_t h = a ^ ((b << 17) | (b >> 47)) ^ ((c << 31) | (c >> 33)) ^ ((d << 47) | (d >> 17));
  h ^= h >> 32;
  h *= K;
  h ^= h >> 29;
  return h;
}
}  // namespace

void StackTable::grow_seq() {
  std::vector<uint32_t> old(seq_slots_.size() < 1024 ? 2048 : 2 * seq_slots_.size(), 0);
  old.swap(seq_slots_);
  const size_t mask = seq_slots_.size() - 1;
  for (uint32_t e : old) {
    if (e == 0) continue;
    size_t i = size_t(seq_entries_[e - 1].hash) & mask;
    while (seq_slots_[i] != 0) i = (i + 1) & mask;
    seq_slots_[i] = e;
  }
}

StackId StackTable::intern(const FrameId* f, size_t n) {
  if (n == 0) return 0;
  if (2 * (seq_entries_.size() + 1) > seq_slots_.size()) grow_seq();
  const uint64_t h = hash_frames(f, n);
  const size_t mask = seq_slots_.size() - 1;
  size_t slot = size_t(h) & mask;
  for (; seq_slots_[slot] != 0; slot = (slot + 1) & mask)
    if (seq_entries_[seq_slots_[slot] - 1].hash == h) break;
  SeqEntry* e = seq_slots_[slot] ? &seq_entries_[seq_slots_[slot] - 1] : nullptr;
  if (e && e->n == n && std::memcmp(seq_frames_.data() + e->off, f, n * sizeof(FrameId)) == 0) return e->node;
  StackId node = 0;
  for (size_t i = n; i-- > 0;) node = child(node, f[i]);
  if (e && e->n == n) {
    // Same length: reuse the slot's storage.
    std::memcpy(seq_frames_.data() + e->off, f, n * sizeof(FrameId));
    e->node = node;
  } else {
    size_t off = seq_frames_.size();
    seq_frames_.insert(seq_frames_.end(), f, f + n);
    if (e) {
      *e = SeqEntry{h, node, uint32_t(n), off};
    } else {
      seq_entries_.push_back(SeqEntry{h, node, uint32_t(n), off});
      seq_slots_[slot] = uint32_t(seq_entries_.size());
    }
  }
  return node;
}

std::vector<FrameId> StackTable::frames(StackId id) const {
  std::vector<FrameId> out;
  while (id != 0) {
    out.push_back(nodes_[id].frame);
    id = nodes_[id].parent;
  }
  return out;
}

size_t StackTable::depth(StackId id) const {
  size_t d = 0;
  while (id != 0) {
    ++d;
    id = nodes_[id].parent;
  }
  return d;
}

namespace {
struct KindName {
  EventKind kind;
  const char* name;
};
constexpr KindName kKinds[] = {
    {EventKind::Alloc, "alloc"},
    {EventKind::FreeRequested, "free_requested"},
    {EventKind::FreeCompleted, "free_completed"},
    {EventKind::SegmentAlloc, "segment_alloc"},
    {EventKind::SegmentFree, "segment_free"},
    {EventKind::SegmentMap, "segment_map"},
    {EventKind::SegmentUnmap, "segment_unmap"},
    {EventKind::Oom, "oom"},
    {EventKind::Snapshot, "snapshot"},
    {EventKind::Annotate, "annotate"},
    {EventKind::UserDefined, "user_defined"},
    {EventKind::Other, "other"},
};
}  // namespace

const char* event_kind_name(EventKind k) {
  for (const auto& kn : kKinds)
    if (kn.kind == k) return kn.name;
  return "other";
}

bool parse_event_kind(std::string_view s, EventKind* out) {
  for (const auto& kn : kKinds)
    if (kn.kind != EventKind::Other && s == kn.name) {
      *out = kn.kind;
      return true;
    }
  if (s == "free") {  // synthetic merged free (viewer-made files)
    *out = EventKind::FreeCompleted;
    return true;
  }
  return false;
}

namespace {
constexpr struct {
  DriverMemoryKind kind;
  const char* name;
} kDriverKinds[] = {
    {DriverMemoryKind::Alloc, "alloc"},   {DriverMemoryKind::Free, "free"},
    {DriverMemoryKind::AllocAsync, "alloc_async"}, {DriverMemoryKind::FreeAsync, "free_async"},
    {DriverMemoryKind::Create, "create"}, {DriverMemoryKind::Release, "release"},
    {DriverMemoryKind::Map, "map"},       {DriverMemoryKind::Unmap, "unmap"},
};

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
}  // namespace

const char* driver_memory_kind_name(DriverMemoryKind k) {
  for (const auto& kn : kDriverKinds)
    if (kn.kind == k) return kn.name;
  return "alloc";
}

bool parse_driver_memory_kind(std::string_view s, DriverMemoryKind* out) {
  for (const auto& kn : kDriverKinds)
    if (s == kn.name) {
      *out = kn.kind;
      return true;
    }
  return false;
}

const char* memory_caller_name(MemoryCaller c) {
  switch (c) {
    case MemoryCaller::Unknown: return "unknown";
    case MemoryCaller::PyTorch: return "pytorch";
    case MemoryCaller::Nccl: return "nccl";
    case MemoryCaller::Cublas: return "cublas";
    case MemoryCaller::Cudnn: return "cudnn";
    case MemoryCaller::Other: return "other";
  }
  return "unknown";
}

MemoryCaller caller_of_library(std::string_view lib) {
  if (lib.empty()) return MemoryCaller::Unknown;
  // PyTorch's CUDA allocator lives in libc10_cuda; libtorch_cuda and
  // libtorch_python call cudaMalloc directly for a few buffers of their own.
  if (starts_with(lib, "libc10_cuda") || starts_with(lib, "libc10.") || starts_with(lib, "libtorch"))
    return MemoryCaller::PyTorch;
  if (starts_with(lib, "libnccl")) return MemoryCaller::Nccl;
  if (starts_with(lib, "libcublas")) return MemoryCaller::Cublas;
  if (starts_with(lib, "libcudnn")) return MemoryCaller::Cudnn;
  return MemoryCaller::Other;
}

const char* block_state_name(BlockState s) {
  switch (s) {
    case BlockState::ActiveAllocated: return "active_allocated";
    case BlockState::ActivePendingFree: return "active_pending_free";
    case BlockState::Inactive: return "inactive";
  }
  return "inactive";
}

namespace {
uint64_t hash_frame(const Frame& f) {
  return mix64(((uint64_t(f.name) << 32) | f.file) ^ (uint64_t(f.line) * kMul));
}
}  // namespace

void Trace::grow_frames() {
  std::vector<FrameId> old(frame_slots_.size() < 1024 ? 2048 : 2 * frame_slots_.size(), 0);
  old.swap(frame_slots_);
  const size_t mask = frame_slots_.size() - 1;
  for (FrameId e : old) {
    if (e == 0) continue;
    size_t i = size_t(hash_frame(frames[e - 1])) & mask;
    while (frame_slots_[i] != 0) i = (i + 1) & mask;
    frame_slots_[i] = e;
  }
}

FrameId Trace::intern_frame(const Frame& f) {
  // Sized by `frames` (every frame is interned here): at most half full.
  if (2 * (frames.size() + 1) > frame_slots_.size()) grow_frames();
  const size_t mask = frame_slots_.size() - 1;
  size_t i = size_t(hash_frame(f)) & mask;
  for (;; i = (i + 1) & mask) {
    const FrameId e = frame_slots_[i];
    if (e == 0) break;
    if (frames[e - 1] == f) return e - 1;
  }
  FrameId id = FrameId(frames.size());
  frames.push_back(f);
  frame_slots_[i] = id + 1;
  return id;
}

uint64_t Trace::memory_bytes() const {
  uint64_t b = strings.memory_bytes() + stacks.memory_bytes() + uint64_t(frames.size()) * (sizeof(Frame) + 56);
  for (const Device& d : devices)
    b += sizeof(Device) + d.events.size() * sizeof(Event) + d.segments.size() * sizeof(Segment) +
         d.blocks.size() * sizeof(Block) + (d.reported_allocated.size() + d.reported_reserved.size()) * sizeof(int64_t) +
         d.event_op.size() * sizeof(uint32_t);
  b += annotations.size() * sizeof(Annotation) + kernels.size() * sizeof(KernelLaunch) +
       device_memory.size() * sizeof(DeviceMemorySample) +
       driver_memory.size() * sizeof(DriverMemoryEvent) + ops.size() * sizeof(TraceOp) +
       op_kernels.size() * sizeof(uint32_t) + host_memory.size() * sizeof(HostMemoryEvent);
  for (const auto& [k, v] : settings.raw) b += 64 + k.size() + v.size();
  for (const auto& [k, v] : metadata) b += 64 + k.size() + v.size();
  b += tensors.notes.size() * sizeof(TensorNote);
  for (const NamedTensor& t : tensors.tensors) b += sizeof(NamedTensor) + t.name.size() + t.shape.size() * 8;
  return b;
}

size_t Trace::event_count() const {
  size_t n = 0;
  for (const auto& d : devices) n += d.events.size();
  return n;
}

const Device* Trace::lookup_device(int index) const {
  auto it = device_pos_.find(index);
  if (it != device_pos_.end() && it->second < devices.size() && devices[it->second].index == index)
    return &devices[it->second];
  // Stale (devices sorted or added elsewhere) or absent: index them again.
  // Every device has a distinct index, so an index map of the same size
  // holds them all and a miss means absent.
  if (it != device_pos_.end() || device_pos_.size() != devices.size()) {
    device_pos_.clear();
    for (size_t i = 0; i < devices.size(); ++i) device_pos_.emplace(devices[i].index, i);
    it = device_pos_.find(index);
    if (it != device_pos_.end() && devices[it->second].index == index) return &devices[it->second];
  }
  return nullptr;
}

Device& Trace::device(int index) {
  if (const Device* d = lookup_device(index)) return devices[size_t(d - devices.data())];
  devices.emplace_back();
  devices.back().index = index;
  device_pos_[index] = devices.size() - 1;
  return devices.back();
}

const Device* Trace::find_device(int index) const { return lookup_device(index); }

}  // namespace snapdiff
