// snapcapture's caching allocator: the same block rules as PyTorch's
// CUDACachingAllocator (c10/cuda/CUDACachingAllocator.cpp), so snapshots it
// writes replay exactly in snapdiff. Plain C++: the device is behind
// DeviceApi, a real CUDA one in snapcapture and a fake one in the tests.
//
//  * requests are rounded up to 512 bytes; <= 1 MiB use the small pool
//    (2 MiB segments), larger the large pool (20 MiB segments below
//    10 MiB, else a segment of their own rounded up to 2 MiB);
//  * a request takes the best-fitting free block of its pool and stream
//    (smallest size, then lowest address); the block is split when the
//    remainder is >= 512 B (small pool) or > 1 MiB (large pool);
//  * a free block merges with free neighbours of the same segment;
//  * when the device is full, cached segments that are entirely free are
//    released and the allocation retried; then it is an out-of-memory error.
// Every alloc, free and segment event is recorded with its time, stream and
// the current scope stack (labels the workload pushes and pops); so are the
// kernel launches and device-memory samples the workload reports.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "snapdiff/model/model.hpp"

namespace snapcapture {

class DeviceApi {
 public:
  virtual ~DeviceApi() = default;
  // Returns 0 when the device cannot provide `bytes`.
  virtual uint64_t malloc(uint64_t bytes) = 0;
  virtual void free(uint64_t addr) = 0;
  virtual int64_t now_us() = 0;
};

struct OutOfMemory : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct AllocatorStats {
  int64_t requested = 0, allocated = 0, reserved = 0;
  int64_t peak_requested = 0, peak_allocated = 0, peak_reserved = 0;
};

class CachingAllocator {
 public:
  CachingAllocator(DeviceApi& dev, int device_index);
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // Throws OutOfMemory (after recording an `oom` event) when it cannot be met.
  uint64_t allocate(uint64_t bytes, uint64_t stream = 0);
  void deallocate(uint64_t addr);
  // Releases every cached segment that holds no allocation.
  void empty_cache();

  void push_scope(const std::string& label);
  void pop_scope();

  // A kernel launch under the current scope stack, timed by the DeviceApi's
  // now_us(). Cheap: a 24-byte record (the name is interned here).
  void record_kernel(const std::string& name, uint64_t stream = 0);
  // What cudaMemGetInfo reported, with the allocator's reserved bytes at
  // this moment (the difference is memory held outside the allocator).
  void record_device_memory(const std::string& label, uint64_t free_bytes, uint64_t total_bytes);

  // With recording off the allocator only allocates (to measure what
  // recording costs); scopes are still tracked.
  void set_recording(bool on) { recording_ = on; }

  const AllocatorStats& stats() const { return stats_; }
  // Everything recorded so far, in snapdiff's event model: events and
  // kernel launches with stacks built from the scope labels, device-memory
  // samples, and the current segments and blocks.
  snapdiff::Trace to_trace() const;

  static uint64_t round_size(uint64_t bytes);
  static uint64_t segment_size(uint64_t rounded);

 private:
  struct Block;
  struct BySize {
    bool operator()(const Block* a, const Block* b) const;
  };
  using Pool = std::set<Block*, BySize>;

  Block* find_free(Pool& pool, uint64_t size, uint64_t stream);
  Block* new_segment(uint64_t seg_bytes, uint64_t stream, bool small, uint64_t request);
  void release_free_segments();
  void record(snapdiff::EventKind kind, uint64_t addr, uint64_t size, uint64_t stream);
  void touch_peaks();

  DeviceApi& dev_;
  int device_;
  Pool small_, large_;
  std::map<uint64_t, Block*> allocated_;  // by address
  std::vector<std::unique_ptr<Block>> storage_;
  std::vector<Block*> segments_;  // first block of each live segment
  AllocatorStats stats_;
  // The recording, kept as plain data until to_trace().
  struct Rec {
    snapdiff::EventKind kind;
    uint64_t addr, size, stream;
    int64_t time_us;
    uint32_t scope;  // index into scopes_
  };
  std::vector<Rec> recs_;
  struct KernelRec {
    int64_t time_us;
    uint64_t stream;
    uint32_t name;   // index into kernel_names_
    uint32_t scope;  // index into scopes_
  };
  std::vector<KernelRec> kernel_recs_;
  std::vector<std::string> kernel_names_;
  std::unordered_map<std::string, uint32_t> kernel_name_index_;
  struct MemRec {
    int64_t time_us;
    uint64_t free_bytes, total_bytes, reserved_bytes;
    std::string label;
  };
  std::vector<MemRec> mem_recs_;
  // Scope stacks as a tree: node 0 is the empty stack, each node one label
  // below its parent. push_scope/pop_scope are one hash lookup.
  struct ScopeNode {
    uint32_t parent;
    std::string label;
    std::unordered_map<std::string, uint32_t> children;
  };
  std::vector<ScopeNode> scopes_;
  uint32_t current_scope_ = 0;
  bool recording_ = true;
};

}  // namespace snapcapture
