// Internal: the value tree the restricted unpickler builds, and the
// conversions from it into the event model shared by the streaming fast path
// (trace entries are turned into Events as soon as they are appended to a
// list) and by the builder that walks the rest of the document.
#pragma once

#include <bit>
#include <cstdint>
#include <string>
#include <vector>

#include "snapdiff/model.hpp"

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

struct Container {
  uint64_t off = 0;       // into list_pool (List/Tuple) or dict_pool (Dict, 2 values per item)
  uint32_t size = 0;      // items (pairs for dicts)
  uint32_t cap = 0;
  VT kind = VT::List;
  bool consumed = false;  // a trace-entry dict already turned into an Event
  uint32_t batch = UINT32_MAX;  // List: index of the Event batch its entries went to
  uint64_t src_off = 0;   // byte offset of the opcode that created it
};

struct PickleDoc {
  std::vector<Container> conts;
  std::vector<Value> list_pool;
  std::vector<Value> dict_pool;
  std::vector<std::vector<Event>> batches;
  std::vector<uint64_t> batch_other_items;  // non-entry items seen in each batch's list
  Value root;
  int protocol = 0;

  const Value* items(const Container& c) const {
    return (c.kind == VT::Dict ? dict_pool.data() : list_pool.data()) + c.off;
  }
};

// Turns dict/list values into frames, stacks and events; caches by container
// identity so shared (memoized) frame dicts and frame lists are interned once.
class Converter {
 public:
  Converter(PickleDoc& doc, Trace& trace);
  StackId stack_of(const Value& frames_list);
  FrameId frame_of(const Value& frame_dict);
  // Fills `ev` from a trace-entry dict. Returns false if `dict` has no string
  // "action" key (then it is not a trace entry).
  bool is_entry(const Container& dict) const;
  void entry_to_event(const Container& dict, Event& ev);
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
  std::vector<std::pair<uint32_t, FrameId>> frame_cache_;  // by container: (size+1, id)
  std::vector<std::pair<uint32_t, StackId>> stack_cache_;
  std::vector<int8_t> kind_cache_;  // by StrId: -2 unknown yet, -1 not a kind, else EventKind
  std::vector<FrameId> scratch_;
};

// Builds the Trace from a parsed document (root value). Trace entries
// already streamed into batches are picked up, the rest converted here.
void build_trace_from_doc(PickleDoc& doc, Converter& conv, Trace& out);

}  // namespace snapdiff::detail
