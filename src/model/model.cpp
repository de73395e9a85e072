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

StringTable::StringTable() { intern(""); }

StrId StringTable::intern(std::string_view s) {
  auto it = index_.find(s);
  if (it != index_.end()) return it->second;
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
  index_.emplace(stored, id);
  return id;
}

StrId StringTable::find(std::string_view s) const {
  auto it = index_.find(s);
  return it == index_.end() ? UINT32_MAX : it->second;
}

StackId StackTable::child(StackId parent, FrameId frame) {
  uint64_t key = (uint64_t(parent) << 32) | frame;
  auto it = index_.find(key);
  if (it != index_.end()) return it->second;
  StackId id = StackId(nodes_.size());
  nodes_.push_back({frame, parent});
  index_.emplace(key, id);
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

StackId StackTable::intern(const FrameId* f, size_t n) {
  if (n == 0) return 0;
  uint64_t h = hash_frames(f, n);
  auto it = seq_index_.find(h);
  if (it != seq_index_.end()) {
    const SeqEntry& e = it->second;
    if (e.n == n && std::memcmp(seq_frames_.data() + e.off, f, n * sizeof(FrameId)) == 0) return e.node;
  }
  StackId node = 0;
  for (size_t i = n; i-- > 0;) node = child(node, f[i]);
  if (it != seq_index_.end() && it->second.n == n) {
    // Same length: reuse the slot's storage.
    std::memcpy(seq_frames_.data() + it->second.off, f, n * sizeof(FrameId));
    it->second.node = node;
  } else {
    size_t off = seq_frames_.size();
    seq_frames_.insert(seq_frames_.end(), f, f + n);
    seq_index_[h] = SeqEntry{node, uint32_t(n), off};
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

FrameId Trace::intern_frame(const Frame& f) {
  auto it = frame_index_.find(f);
  if (it != frame_index_.end()) return it->second;
  FrameId id = FrameId(frames.size());
  frames.push_back(f);
  frame_index_.emplace(f, id);
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
