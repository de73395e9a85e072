// Internal: the pieces the two .snap encodings share (snap_format.cpp, the
// JSON document of versions 1 and 2; snap_binary.cpp, version 3).
#pragma once

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "snapdiff/input/input.hpp"

namespace snapdiff::detail {

// The two readers' (binary and JSON .snap) words for a size no device holds.
inline constexpr const char* kTooLarge = "implausibly large size: more than any device holds (2^50 bytes)";
inline constexpr const char* kSumTooLarge =
    "the device's dumped sizes sum to more than any device holds (2^50 bytes): the file is corrupt";

// The first bytes of a version 3 file: 0x89 "SNAPDF" '\n' (docs/snap_format.md).
constexpr char kSnapBinaryMagic[8] = {'\x89', 'S', 'N', 'A', 'P', 'D', 'F', '\n'};
inline bool is_snap_binary(std::string_view head) {
  return head.size() >= 8 && head.substr(0, 8) == std::string_view(kSnapBinaryMagic, 8);
}

// producer, source, metadata, allocator_settings, annotations (names as
// string indices) into `j`.
void write_snap_common(const Trace& t, nlohmann::json& j);
// Reads them back from `j` (source, metadata, allocator_settings,
// annotations; errors with their JSON path); `strings` maps the document's
// string indices to `t`'s.
void read_snap_common(const nlohmann::json& j, Trace& t, std::vector<StrId> strings);

// ---- the columns of the tables -------------------------------------------
//
// Each table's columns are declared once, here, in their order: a function
// `columns(v, row)` per row struct calls the visitor `v` once per column
// (with its name and the field), and the binary writer and reader
// (snap_binary.cpp) and the JSON form's writer and reader (snap_format.cpp)
// are visitors. docs/snap_format.md ("Tables") is the same list in words.
// What a call says about its column:
//   plain    an unsigned integer as it is
//   size     bytes, at most kMaxDeviceBytes
//   addr     an address: binary, the difference from the previous row
//   time     Unix-epoch microseconds: binary, the difference from the
//            previous row; JSON, `NAME_delta`, from the previous known time
//            (null: unknown)
//   integer  signed
//   str, stack    an index into the string table, the stack tree
//   frame    an index into the frames table
//   parent   an earlier row of the same table, at most this row's index:
//            binary, this row's index minus it; JSON, as it is
//   stream   a stream, stored as an index into the table's stream list
//   device   a device index, signed, -1 to 2^20
//   u32, flag (0 or 1), kind (an enum, KindColumn below)
//   triple   three u32: binary, columns NAME_x, NAME_y, NAME_z; JSON, one
//            column of [x, y, z]
//   action   the event's action string, kept only for EventKind::Other
//   block_count   a segment's blocks: the next rows of the blocks table
// and the checks across columns, which store nothing:
//   device_total(NAME, x)      the column's values sum to at most
//                              kMaxDeviceBytes over the device
//   at_most(NAME, x, y, msg)   x <= y, else msg on column NAME
//   since_json_v2()            the columns after it came with version 2 of
//                              the JSON form (written there only when one
//                              of them is not 0)

// The index of stream `s` in a table's stream list, appended when new.
inline size_t stream_index(std::vector<uint64_t>& streams, uint64_t s) {
  size_t i = 0;
  while (i < streams.size() && streams[i] != s) ++i;
  if (i == streams.size()) streams.push_back(s);
  return i;
}

// An enum column: its largest value and what a reader says past it.
template <class E>
struct KindColumn;
template <>
struct KindColumn<EventKind> {
  static constexpr uint64_t kMax = uint64_t(EventKind::Other);
  static constexpr const char* kUnknown = "unknown event kind";
};
template <>
struct KindColumn<BlockState> {
  static constexpr uint64_t kMax = uint64_t(BlockState::Inactive);
  static constexpr const char* kUnknown = "unknown block state";
};
template <>
struct KindColumn<DriverMemoryKind> {
  static constexpr uint64_t kMax = uint64_t(DriverMemoryKind::Unmap);
  static constexpr const char* kUnknown = "unknown driver memory kind";
};
template <>
struct KindColumn<MemoryCaller> {
  static constexpr uint64_t kMax = uint64_t(MemoryCaller::Other);
  static constexpr const char* kUnknown = "unknown caller";
};

// FRMS (the JSON form: rows [name, file, line]).
template <class V, class R>
  requires std::is_same_v<std::remove_const_t<R>, Frame>
[[gnu::always_inline]] inline void columns(V& v, R& f) {
  v.str("name", f.name);
  v.str("file", f.file);
  v.integer("line", f.line);
}

// A node of the stack tree as the file stores it: row i is node i + 1 (node
// 0 is the empty stack), with its parent node and its frame (file indices).
struct StackNodeRow {
  uint64_t parent = 0;
  uint64_t frame = 0;
};

// The trace's stack tree as those rows.
inline std::vector<StackNodeRow> stack_rows(const Trace& t) {
  std::vector<StackNodeRow> rows(t.stacks.size() - 1);
  for (size_t i = 1; i < t.stacks.size(); ++i) rows[i - 1] = {t.stacks.node(StackId(i)).parent, t.stacks.node(StackId(i)).frame};
  return rows;
}

// STKS (the JSON form: rows [parent, frame]).
template <class V, class R>
  requires std::is_same_v<std::remove_const_t<R>, StackNodeRow>
[[gnu::always_inline]] inline void columns(V& v, R& n) {
  v.parent("parent", n.parent);
  v.frame("frame", n.frame);
}

// EVTS (the JSON form: `events`, a column object).
template <class V, class R>
  requires std::is_same_v<std::remove_const_t<R>, Event>
[[gnu::always_inline]] inline void columns(V& v, R& e) {
  v.kind("kind", e.kind);
  v.time("time_us", e.time_us);
  v.addr("addr", e.addr);
  v.size("size", e.size);
  v.stream("stream", e.stream);
  v.stack("stack", e.stack);
  v.str("compile_context", e.compile_context);
  v.str("user_metadata", e.user_metadata);
  v.action("action", e.action, e.kind);
}

// SEGS (the JSON form: rows).
template <class V, class R>
  requires std::is_same_v<std::remove_const_t<R>, Segment>
[[gnu::always_inline]] inline void columns(V& v, R& s) {
  v.plain("addr", s.addr);
  v.size("total_size", s.total_size);
  v.size("allocated_size", s.allocated_size);
  v.size("active_size", s.active_size);
  v.size("requested_size", s.requested_size);
  v.device_total("total_size", s.total_size);
  v.plain("stream", s.stream);
  v.flag("small_pool", s.small_pool);
  v.flag("expandable", s.expandable);
  v.integer("pool_id_0", s.pool_id[0]);
  v.integer("pool_id_1", s.pool_id[1]);
  v.stack("stack", s.stack);
  v.block_count("block_count", s.first_block, s.block_count);
}

// BLKS (the JSON form: rows).
template <class V, class R>
  requires std::is_same_v<std::remove_const_t<R>, Block>
[[gnu::always_inline]] inline void columns(V& v, R& b) {
  v.addr("addr", b.addr);
  v.size("size", b.size);
  v.size("requested_size", b.requested_size);
  v.device_total("size", b.size);
  v.stack("stack", b.stack);
  v.kind("state", b.state);
}

// KERN (the JSON form: `kernels`).
template <class V, class R>
  requires std::is_same_v<std::remove_const_t<R>, KernelLaunch>
[[gnu::always_inline]] inline void columns(V& v, R& k) {
  v.device("device", k.device);
  v.time("time_us", k.time_us);
  v.str("name", k.name);
  v.stack("stack", k.stack);
  v.stream("stream", k.stream);
  v.since_json_v2();
  v.u32("pid", k.pid);
  v.u32("thread", k.thread);
  v.triple("grid", k.grid);
  v.triple("block", k.block);
  v.flag("graph", k.graph);
}

// DMEM (the JSON form: `device_memory`).
template <class V, class R>
  requires std::is_same_v<std::remove_const_t<R>, DeviceMemorySample>
[[gnu::always_inline]] inline void columns(V& v, R& m) {
  v.device("device", m.device);
  v.time("time_us", m.time_us);
  v.plain("free_bytes", m.free_bytes);
  v.size("total_bytes", m.total_bytes);
  v.size("reserved_bytes", m.reserved_bytes);
  v.at_most("free_bytes", m.free_bytes, m.total_bytes, "more free bytes than total bytes");
  v.str("label", m.label);
  v.since_json_v2();
  v.u32("pid", m.pid);
}

// DRVM (the JSON form: `driver_memory`).
template <class V, class R>
  requires std::is_same_v<std::remove_const_t<R>, DriverMemoryEvent>
[[gnu::always_inline]] inline void columns(V& v, R& e) {
  v.device("device", e.device);
  v.time("time_us", e.time_us);
  v.u32("pid", e.pid);
  v.u32("thread", e.thread);
  v.kind("kind", e.kind);
  v.kind("caller", e.caller);
  v.plain("addr", e.addr);
  v.size("size", e.size);
  v.plain("handle", e.handle);
  v.plain("stream", e.stream);
  v.str("api", e.api);
  v.str("library", e.library);
}

// The names of a table's columns, in order (`json`: as the JSON form names
// them), and where version 2's begin (the JSON form; else their count).
struct ColumnNames {
  explicit ColumnNames(bool json_form) : json(json_form) {}
  bool json;
  std::vector<std::string> names;
  size_t v2_from = SIZE_MAX;
  // A column of each kind but time and triple: its name.
#define SNAPDIFF_COLUMN_NAME(kind) \
  template <class... A>            \
  void kind(const char* n, A&&...) { names.emplace_back(n); }
  SNAPDIFF_COLUMN_NAME(plain)
  SNAPDIFF_COLUMN_NAME(size)
  SNAPDIFF_COLUMN_NAME(addr)
  SNAPDIFF_COLUMN_NAME(integer)
  SNAPDIFF_COLUMN_NAME(str)
  SNAPDIFF_COLUMN_NAME(stack)
  SNAPDIFF_COLUMN_NAME(frame)
  SNAPDIFF_COLUMN_NAME(parent)
  SNAPDIFF_COLUMN_NAME(stream)
  SNAPDIFF_COLUMN_NAME(device)
  SNAPDIFF_COLUMN_NAME(u32)
  SNAPDIFF_COLUMN_NAME(flag)
  SNAPDIFF_COLUMN_NAME(kind)
  SNAPDIFF_COLUMN_NAME(action)
  SNAPDIFF_COLUMN_NAME(block_count)
#undef SNAPDIFF_COLUMN_NAME
  template <class... A>
  void time(const char* n, A&&...) { names.push_back(std::string(n) + (json ? "_delta" : "")); }
  template <class... A>
  void triple(const char* n, A&&...) {
    if (json) {
      names.emplace_back(n);
    } else {
      for (const char* axis : {"_x", "_y", "_z"}) names.push_back(n + std::string(axis));
    }
  }
  template <class... A>
  void device_total(A&&...) {}
  template <class... A>
  void at_most(A&&...) {}
  void since_json_v2() { v2_from = names.size(); }
  // The index of a column by name.
  size_t index(const char* n) const { return size_t(std::find(names.begin(), names.end(), n) - names.begin()); }
};

template <class Row>
ColumnNames column_names(bool json) {
  ColumnNames c(json);
  Row row{};
  columns(c, row);
  if (c.v2_from == SIZE_MAX) c.v2_from = c.names.size();
  return c;
}

// The JSON document (versions 1 and 2).
void read_snap_json(std::string_view text, Trace& out);

// Version 3. The reader refuses, before it builds anything, a file whose
// decoded sections would pass `max_decoded_bytes` or whose model would pass
// `max_memory_bytes` (0: unbounded); errors carry the byte offset in the file.
void read_snap_binary(std::string_view bytes, Trace& out, uint64_t max_decoded_bytes, uint64_t max_memory_bytes);

}  // namespace snapdiff::detail
