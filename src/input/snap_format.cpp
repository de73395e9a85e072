// The native .snap format's JSON form (versions 1 and 2): one document
// with interned strings, frames and stacks, and column arrays per device;
// schemas/snap.schema.json documents it, docs/formats.md explains it. The
// pieces version 3 (binary, snap_binary.cpp) shares with it are here too:
// the non-table parts (write_snap_common, read_snap_common) and the file
// writer of both.
#include <algorithm>
#include <initializer_list>
#include <nlohmann/json.hpp>

#include "input/file_source.hpp"
#include "input/snap_parts.hpp"
#include "snapdiff/error.hpp"
#include "snapdiff/input/input.hpp"
#include "util/json_depth.hpp"
#include "util/output_file.hpp"

namespace snapdiff {

namespace {
using J = nlohmann::json;
constexpr const char* kMagic = "snapdiff.snap";
}  // namespace

namespace {

// A column of times as deltas, each from the previous known time (the
// first from 0); null where the time is unknown.
void push_time_delta(J& col, int64_t t, int64_t& last) {
  if (t == kNoTime) {
    col.push_back(nullptr);
  } else {
    col.push_back(t - last);
    last = t;
  }
}

// How an enum column is written: event kinds and block states as numbers,
// driver calls and callers by name.
J json_kind(EventKind k) { return int(k); }
J json_kind(BlockState s) { return int(s); }
J json_kind(DriverMemoryKind k) { return driver_memory_kind_name(k); }
J json_kind(MemoryCaller c) { return memory_caller_name(c); }

// One row into the JSON form, through its table's column list
// (snap_parts.hpp): into one array per column, or (`row`) into one array.
struct JsonWriter {
  J* c;
  int64_t* last;                   // the previous known time (time columns)
  std::vector<uint64_t>* streams;  // the table's stream list, filled as streams come
  bool row = false;
  size_t i = 0;
  J& next() { return row ? (i++, *c) : c[i++]; }
  void plain(const char*, uint64_t v) { next().push_back(v); }
  void frame(const char*, uint64_t v) { next().push_back(v); }
  void parent(const char*, uint64_t v) { next().push_back(v); }
  void size(const char*, uint64_t v) { next().push_back(v); }
  void addr(const char*, uint64_t v) { next().push_back(v); }
  void time(const char*, int64_t v) { push_time_delta(next(), v, *last); }
  void integer(const char*, int64_t v) { next().push_back(v); }
  void str(const char*, StrId v) { next().push_back(v); }
  void stack(const char*, StackId v) { next().push_back(v); }
  void stream(const char*, uint64_t v) { next().push_back(detail::stream_index(*streams, v)); }
  void device(const char*, int v) { next().push_back(v); }
  void u32(const char*, uint32_t v) { next().push_back(v); }
  void flag(const char*, bool v) { next().push_back(v ? 1 : 0); }
  template <class E>
  void kind(const char*, E v) {
    next().push_back(json_kind(v));
  }
  void triple(const char*, const uint32_t (&v)[3]) { next().push_back(J::array({v[0], v[1], v[2]})); }
  void action(const char*, StrId a, EventKind k) { next().push_back(k == EventKind::Other ? a : 0); }
  void block_count(const char*, uint32_t, uint32_t n) { next().push_back(n); }
  void device_total(const char*, uint64_t) {}
  void at_most(const char*, uint64_t, uint64_t, const char*) {}
  void since_json_v2() {}
};

// Whether a JSON value is a number other than 0, or holds one.
bool nonzero(const J& v) { return v.is_array() ? std::any_of(v.begin(), v.end(), nonzero) : v != 0; }

// A column table: {"count": rows, NAME: [one entry per row], ...}; the
// columns of version 2 only where one of them is not 0 (`*v2` says so).
template <class Row>
J json_columns(const std::vector<Row>& rows, std::vector<uint64_t>* streams = nullptr, bool* v2 = nullptr) {
  const detail::ColumnNames nm = detail::column_names<Row>(true);
  std::vector<J> c(nm.names.size(), J::array());
  int64_t last = 0;
  for (const Row& r : rows) {
    JsonWriter w{c.data(), &last, streams};
    detail::columns(w, r);
  }
  const bool with_v2 = std::any_of(c.begin() + ptrdiff_t(nm.v2_from), c.end(), nonzero);
  if (v2) *v2 = with_v2;
  J o = {{"count", rows.size()}};
  for (size_t i = 0; i < (with_v2 ? c.size() : nm.v2_from); ++i) o[nm.names[i]] = std::move(c[i]);
  return o;
}

// A table of rows: [[a row's columns], ...].
template <class Row>
J json_rows(const std::vector<Row>& rows) {
  J out = J::array();
  for (const Row& r : rows) {
    J row = J::array();
    JsonWriter w{&row, nullptr, nullptr, true};
    detail::columns(w, r);
    out.push_back(std::move(row));
  }
  return out;
}

}  // namespace

// The parts of a .snap document that are not tables: producer, source,
// metadata, allocator settings and annotations (names as string indices).
// Version 3 files carry them in their META section too.
void detail::write_snap_common(const Trace& t, J& j) {
  j["producer"] = {{"name", "snapdiff"}, {"version", SNAPDIFF_VERSION}};
  j["source"] = {{"format", t.source.format},
                 {"format_detail", t.source.format_detail},
                 {"shape", t.source.shape},
                 {"gzip", t.source.gzip},
                 {"file_bytes", t.source.file_bytes}};
  J meta = J::object();
  for (auto& kv : t.metadata) meta[kv.first] = kv.second;
  j["metadata"] = meta;
  const AllocatorSettings& s = t.settings;
  J raw = J::array();
  for (auto& kv : s.raw) raw.push_back(J::array({kv.first, kv.second}));
  j["allocator_settings"] = {{"present", s.present},
                             {"expandable_segments", s.expandable_segments},
                             {"max_split_size", s.max_split_size},
                             {"max_entries", s.max_entries},
                             {"roundup_power2_divisions", s.roundup_power2_divisions},
                             {"raw", raw}};
  J ann = J::array();
  for (const Annotation& a : t.annotations)
    ann.push_back(J::array({a.device, a.time_us == kNoTime ? J(nullptr) : J(a.time_us), a.name, a.start ? 1 : 0}));
  j["annotations"] = std::move(ann);
}

std::string write_snap_json(const Trace& t) {
  J j;
  j["format"] = kMagic;
  detail::write_snap_common(t, j);
  J strings = J::array();
  for (size_t i = 0; i < t.strings.size(); ++i) strings.push_back(std::string(t.strings.get(StrId(i))));
  j["strings"] = std::move(strings);
  j["frames"] = json_rows(t.frames);
  j["stacks"] = json_rows(detail::stack_rows(t));
  J devs = J::array();
  for (const Device& d : t.devices) {
    J dj;
    dj["device"] = d.index;
    dj["has_trace"] = d.has_trace;
    std::vector<uint64_t> streams;
    dj["events"] = json_columns(d.events, &streams);
    dj["streams"] = streams;
    dj["segments"] = json_rows(d.segments);
    dj["blocks"] = json_rows(d.blocks);
    devs.push_back(std::move(dj));
  }
  j["devices"] = std::move(devs);
  // Optional sections: written only when there is something in them, so a
  // trace without kernel launches or device-memory samples writes the same
  // document as before they existed.
  bool kernel_v2 = false, sample_v2 = false;
  if (!t.kernels.empty()) {
    std::vector<uint64_t> streams;
    j["kernels"] = json_columns(t.kernels, &streams, &kernel_v2);
    j["kernels"]["streams"] = streams;
  }
  if (!t.driver_memory.empty()) j["driver_memory"] = json_columns(t.driver_memory);
  if (!t.device_memory.empty()) j["device_memory"] = json_columns(t.device_memory, nullptr, &sample_v2);
  // Version 2 only when the document holds what version 2 added.
  j["version"] = kernel_v2 || sample_v2 || !t.driver_memory.empty() ? 2 : 1;
  // JSON text is UTF-8: a name holding other bytes is written with U+FFFD in
  // their place (docs/formats.md), as every JSON output of snapdiff does.
  return j.dump(-1, ' ', false, J::error_handler_t::replace);
}

void write_snap_file(const Trace& t, const std::string& path, SnapEncoding encoding) {
  if (encoding == SnapEncoding::Binary) {
    write_output_file(path, write_snap_binary(t));
    return;
  }
  const std::string text = write_snap_json(t);
  if (encoding == SnapEncoding::Json) {
    write_output_file(path, text);
    return;
  }
  const std::vector<uint8_t> z = detail::gzip_compress(text);
  write_output_file(path, std::string_view(reinterpret_cast<const char*>(z.data()), z.size()));
}

void write_snap_file(const Trace& t, const std::string& path, bool gzip) {
  write_snap_file(t, path, gzip ? SnapEncoding::JsonGzip : SnapEncoding::Json);
}

void read_snap(std::string_view bytes, Trace& out) {
  if (detail::is_snap_binary(bytes)) detail::read_snap_binary(bytes, out, UINT64_MAX, 0);
  else detail::read_snap_json(bytes, out);
}

namespace {


class SnapReader {
 public:
  explicit SnapReader(Trace& t) : t_(t) {}

  void read(const J& j) {
    if (!j.is_object()) fail("$", "not a .snap document (top level is not an object)");
    if (!j.contains("format") || !j["format"].is_string() || j["format"].get<std::string>() != kMagic)
      fail("$.format", "not a .snap document (expected \"format\": \"snapdiff.snap\"; JSON profiler traces are not read by this version)");
    int64_t v = i64(j, "version", "$.version");
    // A JSON document of a version beyond 2 can only come from a newer
    // snapdiff (version 3 is binary: docs/snap_format.md).
    if (v > kSnapJsonVersion)
      fail("$.version", "written by a newer snapdiff (.snap format version " + std::to_string(v) +
                            "; this build reads versions 1 to " + std::to_string(kSnapJsonVersion) + ")");
    if (v < 1) fail("$.version", "invalid .snap format version " + std::to_string(v));
    const J& strings = arr(j, "strings", "$.strings");
    if (strings.empty() || !strings[0].is_string() || !strings[0].get_ref<const std::string&>().empty())
      fail("$.strings[0]", "string 0 must be the empty string");
    remap_.resize(strings.size());
    for (size_t i = 0; i < strings.size(); ++i) {
      if (!strings[i].is_string()) fail("$.strings[" + std::to_string(i) + "]", "expected a string");
      remap_[i] = t_.strings.intern(strings[i].get_ref<const std::string&>());
    }
    const J& frames = arr(j, "frames", "$.frames");
    frame_map_.resize(frames.size());
    for (size_t i = 0; i < frames.size(); ++i) {
      std::string p = "$.frames[" + std::to_string(i) + "]";
      if (!frames[i].is_array() || frames[i].size() != 3) fail(p, "expected [name, file, line]");
      Frame fr;
      read_row(frames[i], p, fr);
      if (fr.line < 0) fr.line = kNoLine;
      frame_map_[i] = t_.intern_frame(fr);
    }
    const J& stacks = arr(j, "stacks", "$.stacks");
    stack_map_.assign(stacks.size() + 1, 0);
    for (size_t i = 0; i < stacks.size(); ++i) {
      std::string p = "$.stacks[" + std::to_string(i) + "]";
      if (!stacks[i].is_array() || stacks[i].size() != 2) fail(p, "expected [parent, frame]");
      detail::StackNodeRow n;
      read_row(stacks[i], p, n);
      if (n.parent > i) fail(p + "[0]", "parent must refer to an earlier stack node");
      if (n.frame >= frame_map_.size()) fail(p + "[1]", "frame index out of range");
      stack_map_[i + 1] = t_.stacks.child(stack_map_[size_t(n.parent)], frame_map_[size_t(n.frame)]);
    }
    common(j);
    const J& devs = arr(j, "devices", "$.devices");
    for (size_t i = 0; i < devs.size(); ++i) device(devs[i], "$.devices[" + std::to_string(i) + "]");
    if (j.contains("kernels")) kernels(j["kernels"], "$.kernels");
    if (j.contains("device_memory")) device_memory(j["device_memory"], "$.device_memory");
    if (j.contains("driver_memory")) driver_memory(j["driver_memory"], "$.driver_memory");
    t_.source.format = "snap";
    if (t_.source.format_detail.empty()) t_.source.format_detail = "version " + std::to_string(v);
    else t_.source.format_detail = "version " + std::to_string(v) + ", " + t_.source.format_detail;
  }

  // Source, metadata, allocator settings, annotations: what a version 3
  // file's META section holds besides its table counts. Annotation names
  // are string indices (remap_).
  void common(const J& j) {
    if (j.contains("source") && j["source"].is_object()) {
      const J& s = j["source"];
      if (s.contains("format") && s["format"].is_string()) t_.source.format_detail = "from " + s["format"].get<std::string>();
      if (s.contains("shape") && s["shape"].is_string()) t_.source.shape = s["shape"].get<std::string>();
    }
    if (j.contains("metadata") && j["metadata"].is_object())
      for (auto it = j["metadata"].begin(); it != j["metadata"].end(); ++it)
        if (it.value().is_string()) t_.metadata.emplace_back(it.key(), it.value().get<std::string>());
    if (j.contains("allocator_settings") && j["allocator_settings"].is_object()) {
      const J& s = j["allocator_settings"];
      AllocatorSettings& st = t_.settings;
      st.present = s.value("present", false);
      st.expandable_segments = s.value("expandable_segments", false);
      if (s.contains("max_split_size")) st.max_split_size = num_i64(s["max_split_size"], "$.allocator_settings.max_split_size");
      if (s.contains("max_entries")) st.max_entries = num_i64(s["max_entries"], "$.allocator_settings.max_entries");
      if (s.contains("roundup_power2_divisions") && s["roundup_power2_divisions"].is_array())
        for (size_t i = 0; i < s["roundup_power2_divisions"].size() && i < 64; ++i)
          st.roundup_power2_divisions.push_back(
              num_u64(s["roundup_power2_divisions"][i], "$.allocator_settings.roundup_power2_divisions"));
      if (s.contains("raw") && s["raw"].is_array())
        for (const J& kv : s["raw"])
          if (kv.is_array() && kv.size() == 2 && kv[0].is_string() && kv[1].is_string())
            st.raw.emplace_back(kv[0].get<std::string>(), kv[1].get<std::string>());
    }
    if (j.contains("annotations") && j["annotations"].is_array()) {
      const J& an = j["annotations"];
      for (size_t i = 0; i < an.size(); ++i) {
        std::string p = "$.annotations[" + std::to_string(i) + "]";
        const J& a = an[i];
        if (!a.is_array() || a.size() != 4) fail(p, "expected [device, time_us, name, start]");
        Annotation x;
        x.device = int(num_i64(a[0], p + "[0]"));
        x.time_us = a[1].is_null() ? kNoTime : num_i64(a[1], p + "[1]");
        x.name = str(a[2], p + "[2]");
        x.start = num_i64(a[3], p + "[3]") != 0;
        t_.annotations.push_back(x);
      }
    }
  }
  void set_strings(std::vector<StrId> remap) { remap_ = std::move(remap); }

 private:
  [[noreturn]] static void fail(const std::string& path, const std::string& msg) { throw InputError(path, msg); }
  static const J& arr(const J& j, const char* key, const std::string& path) {
    if (!j.contains(key)) fail(path, "missing");
    const J& a = j[key];
    if (!a.is_array()) fail(path, "expected an array");
    return a;
  }
  static int64_t num_i64(const J& v, const std::string& p) {
    if (v.is_number_integer()) {
      if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)) fail(p, "integer out of range");
      return v.get<int64_t>();
    }
    fail(p, "expected an integer");
  }
  static uint64_t num_u64(const J& v, const std::string& p) {
    if (v.is_number_unsigned()) return v.get<uint64_t>();
    if (v.is_number_integer() && v.get<int64_t>() >= 0) return uint64_t(v.get<int64_t>());
    fail(p, "expected a non-negative integer");
  }
  static int64_t i64(const J& j, const char* key, const std::string& p) {
    if (!j.contains(key)) fail(p, "missing");
    return num_i64(j[key], p);
  }
  StrId str(const J& v, const std::string& p) const {
    uint64_t id = num_u64(v, p);
    if (id >= remap_.size()) fail(p, "string index out of range");
    return remap_[id];
  }
  StackId stack(const J& v, const std::string& p) const {
    uint64_t id = num_u64(v, p);
    if (id >= stack_map_.size()) fail(p, "stack index out of range");
    return stack_map_[id];
  }

  // A column section: an object with `count` and the arrays of columns
  // [from, to) of `nm`, each of `count` entries. Returns count.
  static size_t columns(const J& sec, const std::string& p, const detail::ColumnNames& nm, size_t from, size_t to) {
    if (!sec.is_object()) fail(p, "expected an object");
    uint64_t n = num_u64(sec.contains("count") ? sec["count"] : J(), p + ".count");
    for (size_t c = from; c < to; ++c) {
      const std::string& name = nm.names[c];
      const J& a = arr(sec, name.c_str(), p + "." + name);
      if (a.size() != n) fail(p + "." + name, "has " + std::to_string(a.size()) + " entries, expected " + std::to_string(n));
    }
    return size_t(n);
  }
  static std::string at(const std::string& p, const char* col, size_t i) {
    return p + "." + col + "[" + std::to_string(i) + "]";
  }
  // Entry i of a time_us_delta column: null (unknown) or a delta from the
  // previous non-null entry (the first from 0).
  static int64_t time_at(const J& col, const std::string& p, size_t i, int64_t* last_t) {
    if (col[i].is_null()) return kNoTime;
    const J& v = col[i];
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)))
      fail(at(p, "time_us_delta", i), "expected an integer or null");
    int64_t t = 0;
    if (__builtin_add_overflow(*last_t, v.get<int64_t>(), &t) || t == kNoTime)
      fail(at(p, "time_us_delta", i), "time out of range");
    *last_t = t;
    return t;
  }
  static int device_at(const J& col, const std::string& p, size_t i) {
    const J& v = col[i];
    if (!v.is_number_integer()) fail(at(p, "device", i), "expected an integer");
    if (v.is_number_unsigned() ? v.get<uint64_t>() > (1u << 20) : (v.get<int64_t>() < -1 || v.get<int64_t>() > (1 << 20)))
      fail(at(p, "device", i), "device index out of range");
    return int(v.get<int64_t>());
  }
  static uint64_t u64_at(const J& col, const std::string& p, const char* name, size_t i) {
    const J& v = col[i];
    if (v.is_number_unsigned()) return v.get<uint64_t>();
    if (v.is_number_integer() && v.get<int64_t>() >= 0) return uint64_t(v.get<int64_t>());
    fail(at(p, name, i), "expected a non-negative integer");
  }
  StrId str_at(const J& col, const std::string& p, const char* name, size_t i) const {
    uint64_t id = u64_at(col, p, name, i);
    if (id >= remap_.size()) fail(at(p, name, i), "string index out of range");
    return remap_[id];
  }
  StackId stack_at(const J& col, const std::string& p, const char* name, size_t i) const {
    uint64_t id = u64_at(col, p, name, i);
    if (id >= stack_map_.size()) fail(at(p, name, i), "stack index out of range");
    return stack_map_[id];
  }

  void kernels(const J& k, const std::string& p) {
    const detail::ColumnNames nm = detail::column_names<KernelLaunch>(true);
    const size_t n = columns(k, p, nm, 0, nm.v2_from);
    const J& streams = arr(k, "streams", p + ".streams");
    std::vector<uint64_t> sv(streams.size());
    for (size_t i = 0; i < streams.size(); ++i) sv[i] = u64_at(streams, p, "streams", i);
    t_.kernels.resize(n);
    read_columns(k, p, nm, t_.kernels, &sv);
  }

  // The rows of a column section whose columns' lengths are checked, then,
  // where the section has them, the columns of version 2 (all or none).
  template <class Row>
  void read_columns(const J& sec, const std::string& p, const detail::ColumnNames& nm, std::vector<Row>& out,
                    const std::vector<uint64_t>* sv = nullptr, bool strict_time = true) {
    column_pass(sec, p, nm, 0, nm.v2_from, out, sv, strict_time);
    if (nm.v2_from == nm.names.size() || !sec.contains(nm.names[nm.v2_from])) return;
    columns(sec, p, nm, nm.v2_from, nm.names.size());
    column_pass(sec, p, nm, nm.v2_from, nm.names.size(), out, sv, strict_time);
  }
  template <class Row>
  void column_pass(const J& sec, const std::string& p, const detail::ColumnNames& nm, size_t from, size_t to,
                   std::vector<Row>& out, const std::vector<uint64_t>* sv, bool strict_time) {
    std::vector<const J*> cols(nm.names.size(), nullptr);
    for (size_t c = from; c < to; ++c) cols[c] = &sec[nm.names[c]];
    int64_t last_t = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      JsonRow v{*this, p, nm};
      v.cols = cols.data();
      v.i = i;
      v.last_t = &last_t;
      v.sv = sv;
      v.strict_time = strict_time;
      detail::columns(v, out[i]);
      v.flush();
    }
  }
  // A row of a row table (frames, segments, blocks) at path `p`.
  template <class Row>
  void read_row(const J& row, const std::string& p, Row& x, uint64_t* sum = nullptr, size_t blocks_left = 0,
                uint32_t first_block = 0) {
    static const detail::ColumnNames nm = detail::column_names<Row>(true);
    JsonRow v{*this, p, nm};
    v.row = &row;
    v.sum = sum;
    v.blocks_left = blocks_left;
    v.first_block = first_block;
    detail::columns(v, x);
    v.flush();
  }

  // One row of the JSON form, through its table's column list
  // (snap_parts.hpp): entry `i` of each column of a column section (at
  // `p`.NAME[i]), or the entries of a row (`row`, at `p`[k]). Errors and
  // their paths are those of the form's first reader: a size too large is
  // said when the run of size columns ends (in a row, at the row's path).
  struct JsonRow {
    JsonRow(SnapReader& reader, const std::string& path, const detail::ColumnNames& names)
        : r(reader), p(path), nm(names) {}
    SnapReader& r;
    const std::string& p;
    const detail::ColumnNames& nm;
    const J* row = nullptr;
    const J* const* cols = nullptr;  // null: a column this pass does not read
    size_t i = 0;
    int64_t* last_t = nullptr;
    const std::vector<uint64_t>* sv = nullptr;
    bool strict_time = true;
    uint64_t* sum = nullptr;  // of the device_total column over the device
    size_t blocks_left = 0;   // a segment's: the blocks array's rows not yet owned
    uint32_t first_block = 0;
    size_t c = 0, cur = 0;
    std::string pending;  // where a size too large was read

    // The next column; false where this pass skips it.
    bool next(bool size_column = false) {
      if (!size_column) flush();
      cur = c++;
      return row || cols[cur];
    }
    void flush() {
      if (!pending.empty()) fail(pending, detail::kTooLarge);
    }
    const char* name() const { return nm.names[cur].c_str(); }
    std::string path() const { return row ? p + "[" + std::to_string(cur) + "]" : at(p, name(), i); }
    const J& v() const { return row ? (*row)[cur] : (*cols[cur])[i]; }
    uint64_t u64() const { return row ? num_u64(v(), path()) : u64_at(*cols[cur], p, name(), i); }

    void plain(const char*, uint64_t& x) {
      if (next()) x = u64();
    }
    // Their range is checked by the stacks' reader.
    void frame(const char* n, uint64_t& x) { plain(n, x); }
    void parent(const char* n, uint64_t& x) { plain(n, x); }
    void size(const char*, uint64_t& x) {
      if (!next(true)) return;
      x = u64();
      if (x > kMaxDeviceBytes && pending.empty()) pending = row ? p : path();
    }
    void addr(const char* n, uint64_t& x) { plain(n, x); }
    void time(const char*, int64_t& x) {
      if (!next()) return;
      if (strict_time) {
        x = time_at(*cols[cur], p, i, last_t);
      } else if (v().is_null()) {
        x = kNoTime;
      } else {
        x = *last_t + num_i64(v(), path());
        *last_t = x;
      }
    }
    void integer(const char*, int64_t& x) {
      if (next()) x = num_i64(v(), path());
    }
    void str(const char*, StrId& x) {
      if (next()) x = row ? r.str(v(), path()) : r.str_at(*cols[cur], p, name(), i);
    }
    void stack(const char*, StackId& x) {
      if (next()) x = row ? r.stack(v(), path()) : r.stack_at(*cols[cur], p, name(), i);
    }
    void stream(const char*, uint64_t& x) {
      if (!next()) return;
      const uint64_t si = u64();
      if (si >= sv->size()) fail(path(), "stream index out of range");
      x = (*sv)[size_t(si)];
    }
    void device(const char*, int& x) {
      if (next()) x = device_at(*cols[cur], p, i);
    }
    void u32(const char*, uint32_t& x) {
      if (next()) x = u32_at(*cols[cur], p, name(), i);
    }
    void flag(const char*, bool& x) {
      if (next()) x = row ? num_i64(v(), path()) != 0 : flag_at(*cols[cur], p, name(), i);
    }
    template <class E>
    void kind(const char*, E& x) {
      if (next()) read_kind(v(), path(), x);
    }
    void triple(const char*, uint32_t (&x)[3]) {
      if (next()) triple_at(*cols[cur], p, name(), i, x);
    }
    void action(const char*, StrId& x, EventKind k) {
      if (next()) x = r.str_at(*cols[cur], p, name(), i);
      if (k != EventKind::Other) x = r.t_.strings.intern(event_kind_name(k));
    }
    void block_count(const char*, uint32_t& first, uint32_t& count) {
      if (!next()) return;
      const uint64_t bc = u64();
      if (bc > blocks_left) fail(path(), "more blocks than the blocks array holds");
      first = first_block;
      count = uint32_t(bc);
    }
    void device_total(const char* n, uint64_t x) {
      flush();
      *sum += x;
      if (*sum > kMaxDeviceBytes) fail(p + "[" + std::to_string(nm.index(n)) + "]", detail::kSumTooLarge);
    }
    void at_most(const char* n, uint64_t x, uint64_t limit, const char* msg) {
      flush();
      if ((row || cols[nm.index(n)]) && x > limit) fail(at(p, n, i), msg);
    }
    void since_json_v2() {}
  };

  static void read_kind(const J& v, const std::string& p, EventKind& x) {
    const uint64_t k = num_u64(v, p);
    if (k > uint64_t(EventKind::Other)) fail(p, "unknown event kind " + std::to_string(k));
    x = EventKind(k);
  }
  static void read_kind(const J& v, const std::string& p, BlockState& x) {
    const uint64_t k = num_u64(v, p);
    if (k > 2) fail(p, "unknown block state");
    x = BlockState(k);
  }
  static void read_kind(const J& v, const std::string& p, DriverMemoryKind& x) {
    if (!v.is_string() || !parse_driver_memory_kind(v.get_ref<const std::string&>(), &x))
      fail(p, "expected one of alloc, free, alloc_async, free_async, create, release, map, unmap");
  }
  static void read_kind(const J& v, const std::string& p, MemoryCaller& x) {
    if (!v.is_string() || !parse_caller(v.get_ref<const std::string&>(), &x))
      fail(p, "expected one of unknown, pytorch, nccl, cublas, cudnn, other");
  }

  static uint32_t u32_at(const J& col, const std::string& p, const char* name, size_t i) {
    const uint64_t v = u64_at(col, p, name, i);
    if (v > UINT32_MAX) fail(at(p, name, i), "out of range (more than 32 bits)");
    return uint32_t(v);
  }
  static bool flag_at(const J& col, const std::string& p, const char* name, size_t i) {
    const uint64_t v = u64_at(col, p, name, i);
    if (v > 1) fail(at(p, name, i), "expected 0 or 1");
    return v == 1;
  }
  static void triple_at(const J& col, const std::string& p, const char* name, size_t i, uint32_t out[3]) {
    const J& v = col[i];
    if (!v.is_array() || v.size() != 3) fail(at(p, name, i), "expected [x, y, z]");
    for (size_t d = 0; d < 3; ++d) {
      const std::string dp = at(p, name, i) + "[" + std::to_string(d) + "]";
      if (!v[d].is_number_integer() || (!v[d].is_number_unsigned() && v[d].get<int64_t>() < 0) ||
          v[d].get<uint64_t>() > UINT32_MAX)
        fail(dp, "expected an integer from 0 to 2^32 - 1");
      out[d] = uint32_t(v[d].get<uint64_t>());
    }
  }

  void driver_memory(const J& m, const std::string& p) {
    const detail::ColumnNames nm = detail::column_names<DriverMemoryEvent>(true);
    t_.driver_memory.resize(columns(m, p, nm, 0, nm.v2_from));
    read_columns(m, p, nm, t_.driver_memory);
  }

  static bool parse_caller(std::string_view s, MemoryCaller* out) {
    for (MemoryCaller c : {MemoryCaller::Unknown, MemoryCaller::PyTorch, MemoryCaller::Nccl, MemoryCaller::Cublas,
                           MemoryCaller::Cudnn, MemoryCaller::Other})
      if (s == memory_caller_name(c)) {
        *out = c;
        return true;
      }
    return false;
  }

  void device_memory(const J& m, const std::string& p) {
    const detail::ColumnNames nm = detail::column_names<DeviceMemorySample>(true);
    t_.device_memory.resize(columns(m, p, nm, 0, nm.v2_from));
    read_columns(m, p, nm, t_.device_memory);
  }

  void device(const J& d, const std::string& p) {
    if (!d.is_object()) fail(p, "expected an object");
    int64_t idx = i64(d, "device", p + ".device");
    if (idx < -1 || idx > (1 << 20)) fail(p + ".device", "device index out of range");
    Device& dev = t_.device(int(idx));
    dev.has_trace = d.value("has_trace", true);
    const J& streams = arr(d, "streams", p + ".streams");
    std::vector<uint64_t> sv;
    for (size_t i = 0; i < streams.size(); ++i) sv.push_back(num_u64(streams[i], p + ".streams[" + std::to_string(i) + "]"));
    if (!d.contains("events") || !d["events"].is_object()) fail(p + ".events", "expected an object");
    const J& ev = d["events"];
    const std::string ep = p + ".events";
    const detail::ColumnNames nm = detail::column_names<Event>(true);
    dev.events.resize(columns(ev, ep, nm, 0, nm.v2_from));
    read_columns(ev, ep, nm, dev.events, &sv, false);
    const J& blocks = arr(d, "blocks", p + ".blocks");
    const J& segs = arr(d, "segments", p + ".segments");
    uint64_t next_block = 0;
    // Sums per device, as the replay makes them: at most what a device holds.
    uint64_t sum_total = 0, sum_blocks = 0;
    dev.segments.reserve(segs.size());
    dev.blocks.reserve(blocks.size());
    for (size_t i = 0; i < segs.size(); ++i) {
      const std::string sp = p + ".segments[" + std::to_string(i) + "]";
      if (!segs[i].is_array() || segs[i].size() != 12) fail(sp, "expected a 12-element segment row");
      Segment sg;
      read_row(segs[i], sp, sg, &sum_total, blocks.size() - next_block, uint32_t(dev.blocks.size()));
      for (uint64_t b = 0; b < sg.block_count; ++b, ++next_block) {
        const std::string bp = p + ".blocks[" + std::to_string(next_block) + "]";
        const J& bj = blocks[size_t(next_block)];
        if (!bj.is_array() || bj.size() != 5) fail(bp, "expected [addr, size, requested_size, stack, state]");
        read_row(bj, bp, dev.blocks.emplace_back(), &sum_blocks);
      }
      dev.segments.push_back(sg);
    }
    if (next_block != blocks.size()) fail(p + ".blocks", "blocks not owned by any segment");
  }

  Trace& t_;
  std::vector<StrId> remap_;
  std::vector<FrameId> frame_map_;
  std::vector<StackId> stack_map_;
};

}  // namespace

void detail::read_snap_common(const nlohmann::json& j, Trace& t, std::vector<StrId> strings) {
  SnapReader r(t);
  r.set_strings(std::move(strings));
  r.common(j);
}

void detail::read_snap_json(std::string_view text, Trace& out) {
  J j;
  detail::check_json_depth(text);
  try {
    j = J::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    std::string m = e.what();
    // nlohmann: "[json.exception.parse_error.101] parse error at line 1, column 5: ..."
    size_t c = m.find("parse error");
    throw InputError(uint64_t(e.byte > 0 ? e.byte - 1 : 0), "invalid JSON: " + (c != std::string::npos ? m.substr(c) : m));
  } catch (const nlohmann::json::exception& e) {
    // e.g. out_of_range.406: a number literal beyond what a double holds.
    throw InputError("$", std::string("invalid JSON: ") + e.what());
  }
  SnapReader(out).read(j);
  std::sort(out.devices.begin(), out.devices.end(), [](const Device& a, const Device& b) { return a.index < b.index; });
}

}  // namespace snapdiff
