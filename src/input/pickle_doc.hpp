// Internal: the value tree the restricted unpickler builds, and the
// conversions from it into the event model shared by the streaming fast path
// (trace entries are turned into Events as soon as they are appended to a
// list) and by the builder that walks the rest of the document.
#pragma once

#include <bit>
#include <cstdint>
#include <new>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "input/memory_budget.hpp"
#include "snapdiff/input/input.hpp"
#include "snapdiff/model/model.hpp"
#include "util/pod_vec.hpp"

namespace snapdiff::detail {

enum class VT : uint8_t { None, Bool, Int, UInt64, BigInt, Float, Str, Bytes, List, Tuple, Dict };
const char* vt_name(VT t);

// 16 bytes. Int: v holds an int64. UInt64: value in [2^63, 2^64). BigInt: does
// not fit 64 bits (x = 1 positive, 2 negative). Str/Bytes: v = StrId.
// List/Tuple/Dict: v = container index.
struct Value {
  VT t = VT::None;
  uint32_t x = 0;
  uint64_t v = 0;
  int64_t i() const { return int64_t(v); }
  double f() const { return std::bit_cast<double>(v); }
};

// 24 bytes; there is one per dict/list/tuple of the input (millions).
struct Container {
  // List/Tuple: into list_pool; Dict: into dict_pool (2 values per item);
  // event-backed dict: index into PickleDoc::events.
  uint32_t off = 0;
  uint32_t size = 0;  // items (pairs for dicts)
  uint32_t cap = 0;
  // kFrameCached: the FrameId of this dict; kStackCached: the StackId of
  // this list/tuple.
  uint32_t cached = 0;
  uint64_t meta = 0;  // byte offset of the creating opcode (low 48 bits), kind, flags

  enum : uint8_t {
    // Dict: a trace entry, turned into an Event when its items arrived; its
    // items are not kept.
    kEventBacked = 1,
    // List: interned as a stack; it may be referenced again (memo) but not
    // modified. Its items may have been released (then size is 0).
    kFrozen = 2,
    kFrameCached = 4,
    kStackCached = 8,
  };
  static constexpr uint64_t kOffMask = (uint64_t(1) << 48) - 1;

  static Container make(VT kind, uint64_t src_off) {
    Container c;
    c.meta = (src_off & kOffMask) | (uint64_t(kind) << 48);
    return c;
  }
  uint64_t src_off() const { return meta & kOffMask; }
  VT kind() const { return VT(uint8_t(meta >> 48)); }
  uint8_t flags() const { return uint8_t(meta >> 56); }
  bool has(uint8_t f) const { return (flags() & f) != 0; }
  void set(uint8_t f) { meta |= uint64_t(f) << 56; }
  void clear(uint8_t f) { meta &= ~(uint64_t(f) << 56); }
  bool event_backed() const { return has(kEventBacked); }
  bool frozen() const { return has(kFrozen); }
};
static_assert(sizeof(Container) == 24);

struct PickleDoc {
  PodVec<Container> conts;
  PodVec<Value> list_pool;
  PodVec<Value> dict_pool;
  std::vector<Event> events;  // one per event-backed dict, in creation order
  Value root;
  int protocol = 0;

  // The memory bound (memory_budget.hpp). What the reader holds is counted
  // as it goes: the document's containers, pool items (their high-water
  // mark: pages once written stay resident) and events; the VM's own memo,
  // stack and read buffer (vm_bytes, updated by the VM at each check); and
  // the model built so far (Trace::memory_bytes: strings, frames, stacks,
  // events, segments, blocks).
  MemoryBudget budget;
  uint64_t vm_bytes = 0;
  uint64_t pool_high = 0;  // items, list_pool + dict_pool

  const Value* items(const Container& c) const {
    return (c.kind() == VT::Dict ? dict_pool.data() : list_pool.data()) + c.off;
  }
  uint64_t doc_bytes() {
    const uint64_t pools = uint64_t(list_pool.size()) + dict_pool.size();
    if (pools > pool_high) pool_high = pools;
    return uint64_t(conts.size()) * sizeof(Container) + pool_high * sizeof(Value) +
           uint64_t(events.size()) * sizeof(Event) + vm_bytes;
  }
  // Refuses (InputError at `offset`) when what is held, plus `more` bytes
  // about to be built, passes the bound.
  void check_memory(const Trace& t, uint64_t offset, uint64_t more = 0) {
    if (budget.bounded()) budget.check(doc_bytes() + t.memory_bytes() + more, offset);
  }
};

// Turns dict/list values into frames, stacks and events; caches by container
// identity so shared (memoized) frame dicts and frame lists are interned once.
class Converter {
 public:
  Converter(PickleDoc& doc, Trace& trace);
  // A frames value whose x is kDirectStack holds a StackId already (made by
  // the reader's trace-entry fast path; never stored in the document).
  static constexpr uint32_t kDirectStack = 1;
  StackId stack_of(const Value& frames_list);
  FrameId frame_of(const Value& frame_dict);
  // True if the key/value pairs hold a string "action" key (a trace entry).
  bool has_action(const Value* kv, size_t pairs) const;
  // Applies trace-entry key/value pairs to `ev` (later keys override).
  void apply_entry_items(const Value* kv, size_t pairs, uint64_t src_off, Event& ev);
  // Looks up key `k` (a StrId) in a dict; nullptr when absent.
  const Value* get(const Container& dict, StrId k) const;
  bool get_u64(const Container& dict, StrId k, uint64_t* out) const;
  bool get_i64(const Container& dict, StrId k, int64_t* out) const;

  // Well-known keys.
  StrId k_action, k_addr, k_size, k_stream, k_time_us, k_frames, k_compile_context, k_user_metadata,
      k_device_free, k_name, k_filename, k_line, s_na, k_real_size, k_history;

  Trace& trace() { return trace_; }
  PickleDoc& doc() { return doc_; }

 private:
  PickleDoc& doc_;
  Trace& trace_;
  enum class EntryKey : uint8_t { None, Action, Addr, Size, Stream, TimeUs, Frames, CompileContext, UserMetadata };
  std::vector<EntryKey> entry_key_;  // by StrId: what a trace entry's key sets
  std::vector<int8_t> kind_cache_;  // by StrId: -2 unknown yet, -1 not a kind, else EventKind
  std::vector<FrameId> scratch_;
};

// read_torch_pickle() for `size` bytes read from `fd` in chunks (a plain
// file: no mapping, no copy of the whole input), held to `budget`; with
// `read_ahead`, the chunks are read on a thread of their own and parsed in
// place.
void read_torch_pickle_fd(int fd, uint64_t size, Trace& out, const ProgressFn& progress, const MemoryBudget& budget,
                          bool read_ahead = false);
// read_torch_pickle() held to `budget` (which counts the input's buffer
// as held already when it is one).
void read_torch_pickle_bounded(const uint8_t* data, size_t size, Trace& out, const ProgressFn& progress,
                               const MemoryBudget& budget);

// read_torch_pickle() with the trace-entry fast path on or off (off: the
// general path alone, what tests compare the fast path's model with);
// returns how many trace entries the fast path took.
uint64_t read_torch_pickle_path(const uint8_t* data, size_t size, Trace& out, bool fast);

// Builds the Trace from a parsed document (root value). Trace entries are
// event-backed dicts already converted while parsing.
void build_trace_from_doc(PickleDoc& doc, Converter& conv, Trace& out);

}  // namespace snapdiff::detail
