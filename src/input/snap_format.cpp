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
  // Version 2 only when the document holds what version 2 added.
  const bool kernel_v2 = std::any_of(t.kernels.begin(), t.kernels.end(), [](const KernelLaunch& k) {
    return k.pid || k.thread || k.graph || k.grid[0] || k.grid[1] || k.grid[2] || k.block[0] || k.block[1] ||
           k.block[2];
  });
  const bool sample_v2 = std::any_of(t.device_memory.begin(), t.device_memory.end(),
                                     [](const DeviceMemorySample& m) { return m.pid != 0; });
  j["version"] = kernel_v2 || sample_v2 || !t.driver_memory.empty() ? 2 : 1;
  detail::write_snap_common(t, j);
  J strings = J::array();
  for (size_t i = 0; i < t.strings.size(); ++i) strings.push_back(std::string(t.strings.get(StrId(i))));
  j["strings"] = std::move(strings);
  J frames = J::array();
  for (const Frame& f : t.frames) frames.push_back(J::array({f.name, f.file, f.line}));
  j["frames"] = std::move(frames);
  J stacks = J::array();
  for (size_t i = 1; i < t.stacks.size(); ++i) {
    const auto& n = t.stacks.node(StackId(i));
    stacks.push_back(J::array({n.parent, n.frame}));
  }
  j["stacks"] = std::move(stacks);
  J devs = J::array();
  for (const Device& d : t.devices) {
    J dj;
    dj["device"] = d.index;
    dj["has_trace"] = d.has_trace;
    std::vector<uint64_t> streams;
    J kind = J::array(), time = J::array(), addr = J::array(), size = J::array(), stream = J::array(),
      stack = J::array(), cc = J::array(), um = J::array(), action = J::array();
    int64_t last_t = 0;
    for (const Event& e : d.events) {
      kind.push_back(int(e.kind));
      push_time_delta(time, e.time_us, last_t);
      addr.push_back(e.addr);
      size.push_back(e.size);
      size_t si = 0;
      while (si < streams.size() && streams[si] != e.stream) ++si;
      if (si == streams.size()) streams.push_back(e.stream);
      stream.push_back(si);
      stack.push_back(e.stack);
      cc.push_back(e.compile_context);
      um.push_back(e.user_metadata);
      action.push_back(e.kind == EventKind::Other ? e.action : 0);
    }
    dj["streams"] = streams;
    dj["events"] = {{"count", d.events.size()}, {"kind", kind},   {"time_us_delta", time},
                    {"addr", addr},             {"size", size},   {"stream", stream},
                    {"stack", stack},           {"compile_context", cc}, {"user_metadata", um},
                    {"action", action}};
    J segs = J::array();
    for (const Segment& sg : d.segments)
      segs.push_back(J::array({sg.addr, sg.total_size, sg.allocated_size, sg.active_size, sg.requested_size,
                               sg.stream, sg.small_pool ? 1 : 0, sg.expandable ? 1 : 0, sg.pool_id[0], sg.pool_id[1],
                               sg.stack, sg.block_count}));
    dj["segments"] = std::move(segs);
    J blocks = J::array();
    for (const Block& b : d.blocks)
      blocks.push_back(J::array({b.addr, b.size, b.requested_size, b.stack, int(b.state)}));
    dj["blocks"] = std::move(blocks);
    devs.push_back(std::move(dj));
  }
  j["devices"] = std::move(devs);
  // Optional sections: written only when there is something in them, so a
  // trace without kernel launches or device-memory samples writes the same
  // document as before they existed.
  if (!t.kernels.empty()) {
    std::vector<uint64_t> streams;
    J device = J::array(), time = J::array(), name = J::array(), stack = J::array(), stream = J::array();
    int64_t last_t = 0;
    for (const KernelLaunch& k : t.kernels) {
      device.push_back(k.device);
      push_time_delta(time, k.time_us, last_t);
      name.push_back(k.name);
      stack.push_back(k.stack);
      size_t si = 0;
      while (si < streams.size() && streams[si] != k.stream) ++si;
      if (si == streams.size()) streams.push_back(k.stream);
      stream.push_back(si);
    }
    j["kernels"] = {{"count", t.kernels.size()}, {"streams", streams}, {"device", device}, {"time_us_delta", time},
                    {"name", name},              {"stack", stack},     {"stream", stream}};
    if (kernel_v2) {
      J pid = J::array(), thread = J::array(), grid = J::array(), block = J::array(), graph = J::array();
      for (const KernelLaunch& k : t.kernels) {
        pid.push_back(k.pid);
        thread.push_back(k.thread);
        grid.push_back(J::array({k.grid[0], k.grid[1], k.grid[2]}));
        block.push_back(J::array({k.block[0], k.block[1], k.block[2]}));
        graph.push_back(k.graph ? 1 : 0);
      }
      J& kj = j["kernels"];
      kj["pid"] = std::move(pid);
      kj["thread"] = std::move(thread);
      kj["grid"] = std::move(grid);
      kj["block"] = std::move(block);
      kj["graph"] = std::move(graph);
    }
  }
  if (!t.driver_memory.empty()) {
    J device = J::array(), time = J::array(), pid = J::array(), thread = J::array(), kind = J::array(),
      caller = J::array(), addr = J::array(), size = J::array(), handle = J::array(), stream = J::array(),
      api = J::array(), library = J::array();
    int64_t last_t = 0;
    for (const DriverMemoryEvent& e : t.driver_memory) {
      device.push_back(e.device);
      push_time_delta(time, e.time_us, last_t);
      pid.push_back(e.pid);
      thread.push_back(e.thread);
      kind.push_back(driver_memory_kind_name(e.kind));
      caller.push_back(memory_caller_name(e.caller));
      addr.push_back(e.addr);
      size.push_back(e.size);
      handle.push_back(e.handle);
      stream.push_back(e.stream);
      api.push_back(e.api);
      library.push_back(e.library);
    }
    j["driver_memory"] = {{"count", t.driver_memory.size()}, {"device", device}, {"time_us_delta", time},
                          {"pid", pid},     {"thread", thread}, {"kind", kind},   {"caller", caller},
                          {"addr", addr},   {"size", size},     {"handle", handle}, {"stream", stream},
                          {"api", api},     {"library", library}};
  }
  if (!t.device_memory.empty()) {
    J device = J::array(), time = J::array(), free_b = J::array(), total_b = J::array(), reserved_b = J::array(),
      label = J::array();
    int64_t last_t = 0;
    for (const DeviceMemorySample& m : t.device_memory) {
      device.push_back(m.device);
      push_time_delta(time, m.time_us, last_t);
      free_b.push_back(m.free_bytes);
      total_b.push_back(m.total_bytes);
      reserved_b.push_back(m.reserved_bytes);
      label.push_back(m.label);
    }
    j["device_memory"] = {{"count", t.device_memory.size()}, {"device", device},         {"time_us_delta", time},
                          {"free_bytes", free_b},             {"total_bytes", total_b},   {"reserved_bytes", reserved_b},
                          {"label", label}};
    if (sample_v2) {
      J pid = J::array();
      for (const DeviceMemorySample& m : t.device_memory) pid.push_back(m.pid);
      j["device_memory"]["pid"] = std::move(pid);
    }
  }
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

constexpr const char* kTooLarge = "implausibly large size: more than any device holds (2^50 bytes)";
constexpr const char* kSumTooLarge =
    "the device's dumped sizes sum to more than any device holds (2^50 bytes): the file is corrupt";

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
      const J& f = frames[i];
      if (!f.is_array() || f.size() != 3) fail(p, "expected [name, file, line]");
      Frame fr;
      fr.name = str(f[0], p + "[0]");
      fr.file = str(f[1], p + "[1]");
      fr.line = num_i64(f[2], p + "[2]");
      if (fr.line < 0) fr.line = kNoLine;
      frame_map_[i] = t_.intern_frame(fr);
    }
    const J& stacks = arr(j, "stacks", "$.stacks");
    stack_map_.assign(stacks.size() + 1, 0);
    for (size_t i = 0; i < stacks.size(); ++i) {
      std::string p = "$.stacks[" + std::to_string(i) + "]";
      const J& s = stacks[i];
      if (!s.is_array() || s.size() != 2) fail(p, "expected [parent, frame]");
      uint64_t parent = num_u64(s[0], p + "[0]");
      uint64_t frame = num_u64(s[1], p + "[1]");
      if (parent > i) fail(p + "[0]", "parent must refer to an earlier stack node");
      if (frame >= frame_map_.size()) fail(p + "[1]", "frame index out of range");
      stack_map_[i + 1] = t_.stacks.child(stack_map_[parent], frame_map_[frame]);
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

  // A column section: an object with `count` and the named arrays, each of
  // `count` entries. Returns count.
  static size_t columns(const J& sec, const std::string& p, std::initializer_list<const char*> cols) {
    if (!sec.is_object()) fail(p, "expected an object");
    uint64_t n = num_u64(sec.contains("count") ? sec["count"] : J(), p + ".count");
    for (const char* c : cols) {
      const J& a = arr(sec, c, p + "." + c);
      if (a.size() != n) fail(p + "." + c, "has " + std::to_string(a.size()) + " entries, expected " + std::to_string(n));
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
    const size_t n = columns(k, p, {"device", "time_us_delta", "name", "stack", "stream"});
    const J& streams = arr(k, "streams", p + ".streams");
    std::vector<uint64_t> sv(streams.size());
    for (size_t i = 0; i < streams.size(); ++i) sv[i] = u64_at(streams, p, "streams", i);
    const J &dev = k["device"], &time = k["time_us_delta"], &name = k["name"], &stk = k["stack"], &stream = k["stream"];
    t_.kernels.resize(n);
    int64_t last_t = 0;
    for (size_t i = 0; i < n; ++i) {
      KernelLaunch& x = t_.kernels[i];
      x.device = device_at(dev, p, i);
      x.time_us = time_at(time, p, i, &last_t);
      x.name = str_at(name, p, "name", i);
      x.stack = stack_at(stk, p, "stack", i);
      uint64_t si = u64_at(stream, p, "stream", i);
      if (si >= sv.size()) fail(at(p, "stream", i), "stream index out of range");
      x.stream = sv[si];
    }
    // Version 2: the injection library's columns, all or none.
    if (!k.contains("pid")) return;
    columns(k, p, {"pid", "thread", "grid", "block", "graph"});
    const J &pid = k["pid"], &thread = k["thread"], &grid = k["grid"], &block = k["block"], &graph = k["graph"];
    for (size_t i = 0; i < n; ++i) {
      KernelLaunch& x = t_.kernels[i];
      x.pid = u32_at(pid, p, "pid", i);
      x.thread = u32_at(thread, p, "thread", i);
      triple_at(grid, p, "grid", i, x.grid);
      triple_at(block, p, "block", i, x.block);
      x.graph = flag_at(graph, p, "graph", i);
    }
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
    const size_t n = columns(m, p, {"device", "time_us_delta", "pid", "thread", "kind", "caller", "addr", "size",
                                    "handle", "stream", "api", "library"});
    const J &dev = m["device"], &time = m["time_us_delta"], &pid = m["pid"], &thread = m["thread"],
            &kind = m["kind"], &caller = m["caller"], &addr = m["addr"], &size = m["size"], &handle = m["handle"],
            &stream = m["stream"], &api = m["api"], &library = m["library"];
    t_.driver_memory.resize(n);
    int64_t last_t = 0;
    for (size_t i = 0; i < n; ++i) {
      DriverMemoryEvent& x = t_.driver_memory[i];
      x.device = device_at(dev, p, i);
      x.time_us = time_at(time, p, i, &last_t);
      x.pid = u32_at(pid, p, "pid", i);
      x.thread = u32_at(thread, p, "thread", i);
      if (!kind[i].is_string() || !parse_driver_memory_kind(kind[i].get_ref<const std::string&>(), &x.kind))
        fail(at(p, "kind", i), "expected one of alloc, free, alloc_async, free_async, create, release, map, unmap");
      if (!caller[i].is_string() || !parse_caller(caller[i].get_ref<const std::string&>(), &x.caller))
        fail(at(p, "caller", i), "expected one of unknown, pytorch, nccl, cublas, cudnn, other");
      x.addr = u64_at(addr, p, "addr", i);
      x.size = u64_at(size, p, "size", i);
      if (x.size > kMaxDeviceBytes) fail(at(p, "size", i), kTooLarge);
      x.handle = u64_at(handle, p, "handle", i);
      x.stream = u64_at(stream, p, "stream", i);
      x.api = str_at(api, p, "api", i);
      x.library = str_at(library, p, "library", i);
    }
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
    const size_t n =
        columns(m, p, {"device", "time_us_delta", "free_bytes", "total_bytes", "reserved_bytes", "label"});
    const J &dev = m["device"], &time = m["time_us_delta"], &free_b = m["free_bytes"], &total_b = m["total_bytes"],
            &reserved_b = m["reserved_bytes"], &label = m["label"];
    t_.device_memory.resize(n);
    int64_t last_t = 0;
    for (size_t i = 0; i < n; ++i) {
      DeviceMemorySample& x = t_.device_memory[i];
      x.device = device_at(dev, p, i);
      x.time_us = time_at(time, p, i, &last_t);
      x.free_bytes = u64_at(free_b, p, "free_bytes", i);
      x.total_bytes = u64_at(total_b, p, "total_bytes", i);
      x.reserved_bytes = u64_at(reserved_b, p, "reserved_bytes", i);
      if (x.total_bytes > kMaxDeviceBytes) fail(at(p, "total_bytes", i), kTooLarge);
      if (x.reserved_bytes > kMaxDeviceBytes) fail(at(p, "reserved_bytes", i), kTooLarge);
      if (x.free_bytes > x.total_bytes) fail(at(p, "free_bytes", i), "more free bytes than total bytes");
      x.label = str_at(label, p, "label", i);
    }
    if (m.contains("pid")) {
      columns(m, p, {"pid"});
      for (size_t i = 0; i < n; ++i) t_.device_memory[i].pid = u32_at(m["pid"], p, "pid", i);
    }
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
    std::string ep = p + ".events";
    uint64_t n = num_u64(ev.contains("count") ? ev["count"] : J(), ep + ".count");
    const char* cols[] = {"kind", "time_us_delta", "addr", "size", "stream", "stack", "compile_context", "user_metadata", "action"};
    for (const char* c : cols) {
      const J& a = arr(ev, c, ep + "." + c);
      if (a.size() != n) fail(ep + "." + c, "has " + std::to_string(a.size()) + " entries, expected " + std::to_string(n));
    }
    const J &kind = ev["kind"], &time = ev["time_us_delta"], &addr = ev["addr"], &size = ev["size"],
              &stream = ev["stream"], &stk = ev["stack"], &cc = ev["compile_context"], &um = ev["user_metadata"],
              &action = ev["action"];
    dev.events.resize(size_t(n));
    int64_t last_t = 0;
    for (size_t i = 0; i < n; ++i) {
      Event& e = dev.events[i];
      std::string ix = "[" + std::to_string(i) + "]";
      uint64_t k = num_u64(kind[i], ep + ".kind" + ix);
      if (k > uint64_t(EventKind::Other)) fail(ep + ".kind" + ix, "unknown event kind " + std::to_string(k));
      e.kind = EventKind(k);
      if (time[i].is_null()) {
        e.time_us = kNoTime;
      } else {
        int64_t dt = num_i64(time[i], ep + ".time_us_delta" + ix);
        e.time_us = last_t + dt;
        last_t = e.time_us;
      }
      e.addr = num_u64(addr[i], ep + ".addr" + ix);
      e.size = num_u64(size[i], ep + ".size" + ix);
      if (e.size > kMaxDeviceBytes) fail(ep + ".size" + ix, kTooLarge);
      uint64_t s = num_u64(stream[i], ep + ".stream" + ix);
      if (s >= sv.size()) fail(ep + ".stream" + ix, "stream index out of range");
      e.stream = sv[s];
      e.stack = stack(stk[i], ep + ".stack" + ix);
      e.compile_context = str(cc[i], ep + ".compile_context" + ix);
      e.user_metadata = str(um[i], ep + ".user_metadata" + ix);
      e.action = str(action[i], ep + ".action" + ix);
      if (e.kind != EventKind::Other) e.action = t_.strings.intern(event_kind_name(e.kind));
    }
    const J& blocks = arr(d, "blocks", p + ".blocks");
    const J& segs = arr(d, "segments", p + ".segments");
    uint64_t next_block = 0;
    // Sums per device, as the replay makes them: at most what a device holds.
    uint64_t sum_total = 0, sum_blocks = 0;
    dev.segments.reserve(segs.size());
    dev.blocks.reserve(blocks.size());
    for (size_t i = 0; i < segs.size(); ++i) {
      std::string sp = p + ".segments[" + std::to_string(i) + "]";
      const J& s = segs[i];
      if (!s.is_array() || s.size() != 12) fail(sp, "expected a 12-element segment row");
      Segment sg;
      sg.addr = num_u64(s[0], sp + "[0]");
      sg.total_size = num_u64(s[1], sp + "[1]");
      sg.allocated_size = num_u64(s[2], sp + "[2]");
      sg.active_size = num_u64(s[3], sp + "[3]");
      sg.requested_size = num_u64(s[4], sp + "[4]");
      if (sg.total_size > kMaxDeviceBytes || sg.allocated_size > kMaxDeviceBytes || sg.active_size > kMaxDeviceBytes ||
          sg.requested_size > kMaxDeviceBytes)
        fail(sp, kTooLarge);
      sum_total += sg.total_size;
      if (sum_total > kMaxDeviceBytes) fail(sp + "[1]", kSumTooLarge);
      sg.stream = num_u64(s[5], sp + "[5]");
      sg.small_pool = num_i64(s[6], sp + "[6]") != 0;
      sg.expandable = num_i64(s[7], sp + "[7]") != 0;
      sg.pool_id[0] = num_i64(s[8], sp + "[8]");
      sg.pool_id[1] = num_i64(s[9], sp + "[9]");
      sg.stack = stack(s[10], sp + "[10]");
      uint64_t bc = num_u64(s[11], sp + "[11]");
      if (bc > blocks.size() - next_block) fail(sp + "[11]", "more blocks than the blocks array holds");
      sg.first_block = uint32_t(dev.blocks.size());
      sg.block_count = uint32_t(bc);
      for (uint64_t b = 0; b < bc; ++b, ++next_block) {
        std::string bp = p + ".blocks[" + std::to_string(next_block) + "]";
        const J& bj = blocks[size_t(next_block)];
        if (!bj.is_array() || bj.size() != 5) fail(bp, "expected [addr, size, requested_size, stack, state]");
        Block blk;
        blk.addr = num_u64(bj[0], bp + "[0]");
        blk.size = num_u64(bj[1], bp + "[1]");
        blk.requested_size = num_u64(bj[2], bp + "[2]");
        if (blk.size > kMaxDeviceBytes || blk.requested_size > kMaxDeviceBytes) fail(bp, kTooLarge);
        sum_blocks += blk.size;
        if (sum_blocks > kMaxDeviceBytes) fail(bp + "[1]", kSumTooLarge);
        blk.stack = stack(bj[3], bp + "[3]");
        uint64_t st = num_u64(bj[4], bp + "[4]");
        if (st > 2) fail(bp + "[4]", "unknown block state");
        blk.state = BlockState(st);
        dev.blocks.push_back(blk);
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
