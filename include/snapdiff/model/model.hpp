// snapdiff/model/model.hpp — the one event model every input format is read into.
//
// Nothing after the readers knows which format the data came from. A Trace
// holds interned strings, frames and stacks (a parent-pointer tree), and one
// Device per CUDA device with its chronological event array and the
// dump-time segments and blocks. Besides the allocator's events a Trace may
// hold kernel launches and device-memory samples (from the capture shim, or
// a profiler trace); inputs without them leave both lists empty. A
// torch.profiler trace adds its ops (with the kernels each launched), the
// op each event happened in, and the totals the allocator reported; its
// devices have no segments.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace snapdiff {

using StrId = uint32_t;    // index into StringTable; 0 is the empty string
using FrameId = uint32_t;  // index into Trace::frames
using StackId = uint32_t;  // node of Trace::stacks; 0 is the empty stack

constexpr int64_t kNoTime = std::numeric_limits<int64_t>::min();
constexpr int64_t kNoLine = -1;

// More bytes than any device holds (1 PiB): a size, address range or total
// of an input beyond it is an input error, refused where it is read or
// summed. Every sum of up to 2^13 such values fits in 63 bits, so counters
// checked against it never wrap.
constexpr uint64_t kMaxDeviceBytes = uint64_t(1) << 50;

// Interned UTF-8 strings (bytes kept as given; lone surrogates untouched).
class StringTable {
 public:
  StringTable();
  StrId intern(std::string_view s);
  std::string_view get(StrId id) const { return views_[id]; }
  size_t size() const { return views_.size(); }
  // Returns the id if already interned, else UINT32_MAX.
  StrId find(std::string_view s) const;
  // Resident bytes of the table (the strings, their views and the index),
  // an upper estimate for the memory bound.
  uint64_t memory_bytes() const { return stored_ + uint64_t(views_.size()) * kBytesPerString; }

 private:
  static constexpr uint64_t kBytesPerString = 72;  // view 16, index slots 16 (an upper estimate)
  size_t slot_of(std::string_view s, uint64_t h) const;
  void grow_index();
  std::vector<std::unique_ptr<char[]>> chunks_;
  size_t chunk_used_ = 0, chunk_cap_ = 0;
  uint64_t stored_ = 0;
  std::vector<std::string_view> views_;
  // Open addressing, linear probing, at most half full: each slot holds the
  // string's hash (high 32 bits) and its id + 1 (low 32; 0 = empty).
  std::vector<uint64_t> slots_;
};

struct Frame {
  StrId name = 0;
  StrId file = 0;
  int64_t line = kNoLine;  // kNoLine when unknown (negative or >= 2^63 in input)
  bool operator==(const Frame&) const = default;
};

// Interned stacks as a tree: node = (frame, parent). The stack id of an
// allocation is the node of its innermost frame; walking parents goes outward.
class StackTable {
 public:
  StackTable() { nodes_.push_back({0, 0}); }
  struct Node {
    FrameId frame;
    StackId parent;
  };
  StackId child(StackId parent, FrameId frame);
  // Interns a whole stack given innermost first; one hash lookup when the
  // sequence was seen before.
  StackId intern(const FrameId* innermost_first, size_t n);
  const Node& node(StackId id) const { return nodes_[id]; }
  size_t size() const { return nodes_.size(); }
  // Frames innermost first.
  std::vector<FrameId> frames(StackId id) const;
  size_t depth(StackId id) const;
  // Resident bytes (nodes, their index, the interned sequences), an upper
  // estimate for the memory bound.
  uint64_t memory_bytes() const {
    return uint64_t(nodes_.size()) * 48 + uint64_t(seq_entries_.size()) * 64 + uint64_t(seq_frames_.size()) * 4;
  }

 private:
  std::vector<Node> nodes_;
  // (parent, frame) -> node: open addressing, linear probing, at most half
  // full; a slot holds the node id (0 = empty: the root is no child).
  std::vector<StackId> child_slots_;
  // intern(): sequence hash -> the last stack interned with that hash, and
  // where its frames are kept in seq_frames_ (compared on a hit). Open
  // addressing over seq_entries_ (slot = entry index + 1, 0 = empty).
  struct SeqEntry {
    uint64_t hash;
    StackId node;
    uint32_t n;
    size_t off;
  };
  std::vector<SeqEntry> seq_entries_;
  std::vector<uint32_t> seq_slots_;
  std::vector<FrameId> seq_frames_;
  void grow_children();
  void grow_seq();
};

enum class EventKind : uint8_t {
  Alloc,
  FreeRequested,
  FreeCompleted,
  SegmentAlloc,
  SegmentFree,
  SegmentMap,
  SegmentUnmap,
  Oom,
  Snapshot,
  Annotate,
  UserDefined,
  Other,  // an action string snapdiff does not know; kept, ignored by replay
};
const char* event_kind_name(EventKind k);
// Maps PyTorch's action string; returns false for unknown strings.
bool parse_event_kind(std::string_view s, EventKind* out);

struct Event {
  uint64_t addr = 0;   // block/segment address; for Oom: device_free bytes
  uint64_t size = 0;   // requested bytes (alloc/free), segment bytes, ...
  int64_t time_us = kNoTime;
  uint64_t stream = 0;
  StackId stack = 0;
  StrId compile_context = 0;  // 0 when absent or "N/A"
  StrId user_metadata = 0;    // 0 when absent or ""
  StrId action = 0;           // original action string (kept for EventKind::Other)
  EventKind kind = EventKind::Other;
};

enum class BlockState : uint8_t { ActiveAllocated, ActivePendingFree, Inactive };
const char* block_state_name(BlockState s);

struct Block {
  uint64_t addr = 0;
  uint64_t size = 0;
  uint64_t requested_size = 0;  // meaningful for active blocks only
  StackId stack = 0;
  BlockState state = BlockState::Inactive;
};

struct Segment {
  uint64_t addr = 0;
  uint64_t total_size = 0;
  uint64_t allocated_size = 0;
  uint64_t active_size = 0;
  uint64_t requested_size = 0;
  uint64_t stream = 0;
  int64_t pool_id[2] = {0, 0};
  StackId stack = 0;
  bool small_pool = false;
  bool expandable = false;
  uint32_t first_block = 0;  // index into Device::blocks
  uint32_t block_count = 0;
};

struct Device {
  int index = 0;
  std::vector<Event> events;      // chronological, oldest first
  std::vector<Segment> segments;  // at dump time
  std::vector<Block> blocks;      // at dump time, grouped by segment
  bool has_trace = false;         // a trace list was present (may be empty)
  // Profiler traces ([memory] events): no segments and no requested sizes
  // (an event's size is the block's); the allocator's totals after each
  // event as the trace reported them, and what was allocated before the
  // first event. Empty for snapshots.
  std::vector<int64_t> reported_allocated, reported_reserved;
  int64_t allocated_before = 0;
  StackId before_stack = 0;       // names the bytes allocated before the first event, never freed in it
  // Per event, the innermost op it happened in (kNoOp: none); empty when the
  // input has no ops (a snapshot not joined with a trace).
  std::vector<uint32_t> event_op;
  bool from_profiler() const { return !reported_allocated.empty(); }
};

struct Annotation {
  int device = -1;
  int64_t time_us = kNoTime;
  StrId name = 0;
  bool start = true;
};

// Allocator configuration as recorded; only the keys replay depends on are
// parsed, the rest is kept as text.
struct AllocatorSettings {
  bool present = false;
  bool expandable_segments = false;
  int64_t max_split_size = -1;  // -1: unlimited
  // The history's ring-buffer size when the file records it (-1: it does not;
  // PyTorch 2.11 snapshots do not).
  int64_t max_entries = -1;
  // roundup_power2_divisions per power-of-two MiB bucket (index 0 = "1" MiB).
  std::vector<uint64_t> roundup_power2_divisions;
  std::vector<std::pair<std::string, std::string>> raw;
};

// One kernel launch, with the scope stack it was launched under (the same
// kind of stack as an allocation's: innermost frame = the innermost scope).
// Not an allocator event: the replay never sees it.
struct KernelLaunch {
  int device = 0;
  int64_t time_us = kNoTime;  // Unix-epoch microseconds, like Event::time_us
  StrId name = 0;             // kernel name as recorded (mangled or not)
  StackId stack = 0;          // 0 when launched outside every scope
  uint64_t stream = 0;        // cudaStream_t value; 0 = the default stream
  uint32_t op = UINT32_MAX;   // profiler traces: the launching op (index into Trace::ops)
  // Kernel recordings of the injection library (snapcapture run); 0 where
  // the input does not say.
  uint32_t pid = 0;           // the launching process
  uint32_t thread = 0;        // the launching thread (OS thread id)
  uint32_t grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};
  bool graph = false;         // a CUDA graph launch (name: the API), not one kernel
};

// Who called the driver for device memory, from the shared object of the
// return address (injection library); the rule is caller_of_library().
enum class MemoryCaller : uint8_t { Unknown, PyTorch, Nccl, Cublas, Cudnn, Other };
const char* memory_caller_name(MemoryCaller c);
// "libc10_cuda.so" -> PyTorch, "libnccl.so.2" -> Nccl, "libcublasLt.so.13"
// -> Cublas, "libcudnn_ops.so.9" -> Cudnn, "" -> Unknown, else Other.
MemoryCaller caller_of_library(std::string_view library_basename);

// Device memory taken from or given back to the driver outside what a
// snapshot records (injection library): cuMemAlloc/cuMemFree (and the
// runtime's cudaMalloc/cudaFree through them), stream-ordered pools,
// and the virtual-memory calls (cuMemCreate makes physical memory,
// cuMemMap maps it, cuMemUnmap/cuMemRelease give it back).
enum class DriverMemoryKind : uint8_t { Alloc, Free, AllocAsync, FreeAsync, Create, Release, Map, Unmap };
const char* driver_memory_kind_name(DriverMemoryKind k);
bool parse_driver_memory_kind(std::string_view s, DriverMemoryKind* out);
struct DriverMemoryEvent {
  int device = 0;
  int64_t time_us = kNoTime;    // Unix-epoch microseconds, when the call returned
  uint32_t pid = 0, thread = 0;
  DriverMemoryKind kind = DriverMemoryKind::Alloc;
  MemoryCaller caller = MemoryCaller::Unknown;
  uint64_t addr = 0;            // device pointer (Alloc/Free/*Async/Map/Unmap)
  uint64_t size = 0;            // bytes (Free/Release: of what was allocated; 0 when unknown)
  uint64_t handle = 0;          // CUmemGenericAllocationHandle (Create/Release/Map)
  uint64_t stream = 0;          // *Async
  StrId api = 0;                // "cuMemAlloc_v2", "cudaMalloc", ...
  StrId library = 0;            // caller's shared object, basename ("libnccl.so.2")
};

// An operator a torch.profiler trace recorded (a `cpu_op` range: aten::addmm,
// autograd::engine::evaluate_function: MmBackward0, ...). Ops are stored in
// pre-order, thread by thread: an op's descendants are the ops after it up
// to subtree_end, and its own kernel launches are
// Trace::op_kernels[first_kernel, first_kernel + kernel_count).
constexpr uint32_t kNoOp = UINT32_MAX;
struct TraceOp {
  StrId name = 0;
  int64_t time_us = kNoTime;   // start, Unix-epoch microseconds
  int64_t duration_ns = 0;
  uint32_t thread = 0;         // profiler thread, numbered in order of appearance
  uint32_t parent = kNoOp;     // the enclosing op on the same thread
  uint32_t subtree_end = 0;    // one past its last descendant
  StackId stack = 0;           // its own frame innermost, then enclosing ops, record_function ranges, Python calls
  uint32_t first_kernel = 0;
  uint32_t kernel_count = 0;
};

// A CPU-allocator event of a profiler trace ([memory] with Device Type 0):
// kept apart from the CUDA devices, never replayed.
struct HostMemoryEvent {
  int64_t time_us = kNoTime;
  uint64_t addr = 0;
  int64_t bytes = 0;            // +allocated, -freed
  int64_t total_allocated = 0;  // as the trace reported it after the event
};

// What the device itself reported (cudaMemGetInfo) at one moment, with the
// caching allocator's reserved bytes at that same moment, so that
// (total - free) - reserved is the device memory held outside the allocator:
// the CUDA context, library handles (cuBLAS, ...), loaded modules, and any
// other process on the device.
struct DeviceMemorySample {
  int device = 0;
  int64_t time_us = kNoTime;
  uint64_t free_bytes = 0, total_bytes = 0;
  uint64_t reserved_bytes = 0;  // the caching allocator's reserved bytes at that moment
  StrId label = 0;              // where it was taken, e.g. "after init" (a phase boundary), "interval", "exit"
  uint32_t pid = 0;             // the sampling process (injection library; 0 otherwise)
};

// The run's own names for its tensors: a tensor list (a `snapdiff-tensors`
// sidecar, PATH.tensors.json, written by python/snapdiff/torch.py;
// docs/tensors.md). Each tensor once, then where its storage was at each
// noted moment: the analysis ties a note to the allocation at that address
// live at that time, whose category the run then gives exactly.
enum class TensorKind : uint8_t { Parameter, Buffer, Gradient, OptimizerState };
struct NamedTensor {
  std::string name;     // "model.layers.3.mlp.fc1.weight", "optimizer.state[...].exp_avg"
  TensorKind kind = TensorKind::Parameter;
  std::string dtype;    // "bfloat16"
  std::vector<int64_t> shape;
  bool requires_grad = false;
  int device = 0;
};
struct TensorNote {
  int64_t time_us = kNoTime;  // Unix-epoch microseconds, the clock of Event::time_us
  uint64_t addr = 0;          // the storage's first byte (its allocation's address)
  uint64_t bytes = 0;         // the storage's bytes
  uint32_t tensor = 0;        // index into TensorList::tensors
};
struct TensorList {
  std::string source;                 // the file it was read from ("" when none)
  std::vector<NamedTensor> tensors;
  std::vector<TensorNote> notes;      // chronological
  int64_t moments = 0;                // noted moments (start, around steps, dump)
  bool empty() const { return notes.empty(); }
};

struct SourceInfo {
  std::string format;           // "torch-pickle", "snap", "chrome-trace"
  std::string format_detail;    // e.g. "pickle protocol 4"
  bool gzip = false;
  uint64_t file_bytes = 0;      // on disk
  uint64_t decoded_bytes = 0;   // after decompression
  std::string shape;            // "dict", "segment-list", "legacy-history"
};

struct Trace {
  SourceInfo source;
  StringTable strings;
  std::vector<Frame> frames;
  StackTable stacks;
  std::vector<Device> devices;  // sorted by index
  AllocatorSettings settings;
  std::vector<Annotation> annotations;
  std::vector<std::pair<std::string, std::string>> metadata;  // run metadata (.snap)
  std::vector<KernelLaunch> kernels;               // chronological, all devices
  std::vector<DeviceMemorySample> device_memory;   // chronological, all devices
  std::vector<DriverMemoryEvent> driver_memory;    // chronological, all devices (injection library)
  // From a torch.profiler trace (read directly, or joined into a snapshot).
  std::vector<TraceOp> ops;
  std::vector<uint32_t> op_kernels;                // indices into kernels, grouped by op
  std::vector<HostMemoryEvent> host_memory;        // CPU allocator events, chronological
  TensorList tensors;                              // the run's names for its tensors, if it wrote them

  FrameId intern_frame(const Frame& f);
  size_t event_count() const;
  // Resident bytes of everything above (element sizes times counts, string
  // and stack tables, indexes): what the memory bound counts for a model.
  uint64_t memory_bytes() const;
  Device& device(int index);  // creates it if absent
  const Device* find_device(int index) const;

 private:
  // Position in `devices` by index, so that a file of many devices is read
  // in linear time; rebuilt when `devices` was reordered (the readers sort it).
  mutable std::unordered_map<int, size_t> device_pos_;
  const Device* lookup_device(int index) const;
  // Frame -> id: open addressing, linear probing, at most half full; a
  // slot holds the id + 1 (0 = empty).
  std::vector<FrameId> frame_slots_;
  void grow_frames();
};

}  // namespace snapdiff
