// write_torch_pickle: PyTorch-shaped snapshot pickles. Every real snapshot
// read, written and read back is the same trace with the same report;
// pickle -> .snap -> pickle too; the bytes use only plain-data opcodes with
// well-formed frames and memo references; shared stacks are written once;
// the corner cases of the model (several devices, oom, unknown actions,
// unknown lines, huge values, settings) survive the trip.
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "snapdiff/error.hpp"
#include "snapdiff/input/input.hpp"
#include "snapdiff/analysis/replay.hpp"
#include "snapdiff/analysis/analysis.hpp"
#include "snapdiff/report/report.hpp"
#include "test_util.hpp"

using namespace snapdiff;

namespace {

using FrameText = std::tuple<std::string, std::string, int64_t>;

// A trace's stacks and strings as text, so that two traces read separately
// (different string and stack ids) can be compared.
class Names {
 public:
  explicit Names(const Trace& t) : t_(t) {}
  std::string s(StrId id) const { return std::string(t_.strings.get(id)); }
  const std::vector<FrameText>& stack(StackId id) {
    auto it = cache_.find(id);
    if (it != cache_.end()) return it->second;
    std::vector<FrameText> v;
    for (FrameId f : t_.stacks.frames(id)) {
      const Frame& fr = t_.frames[f];
      v.emplace_back(s(fr.name), s(fr.file), fr.line);
    }
    return cache_.emplace(id, std::move(v)).first->second;
  }

 private:
  const Trace& t_;
  std::map<StackId, std::vector<FrameText>> cache_;
};

// "" when `b` holds the same model as `a` (events, segments, blocks,
// settings, annotations), else the first difference. `b` may have extra
// devices as long as they are empty (a gap in device_traces).
std::string trace_diff(const Trace& a, const Trace& b) {
  Names na(a), nb(b);
  auto at = [](const std::string& what, size_t i) { return what + "[" + std::to_string(i) + "]"; };
  for (const Device& da : a.devices) {
    std::string dn = "device " + std::to_string(da.index);
    const Device* db = b.find_device(da.index);
    if (!db) {
      if (!da.has_trace && da.events.empty() && da.segments.empty()) continue;  // nothing to write
      return dn + ": missing";
    }
    if (da.has_trace != db->has_trace) return dn + ": has_trace differs";
    if (da.events.size() != db->events.size())
      return dn + ": " + std::to_string(da.events.size()) + " events, read back " + std::to_string(db->events.size());
    for (size_t i = 0; i < da.events.size(); ++i) {
      const Event &x = da.events[i], &y = db->events[i];
      std::string w = dn + " " + at("event", i) + ": ";
      if (x.kind != y.kind) return w + "kind";
      if (x.addr != y.addr) return w + "addr";
      if (x.size != y.size) return w + "size";
      if (x.stream != y.stream) return w + "stream";
      if (x.time_us != y.time_us) return w + "time_us";
      if (na.stack(x.stack) != nb.stack(y.stack)) return w + "frames";
      if (na.s(x.compile_context) != nb.s(y.compile_context)) return w + "compile_context";
      if (na.s(x.user_metadata) != nb.s(y.user_metadata)) return w + "user_metadata";
      if (x.kind == EventKind::Other && na.s(x.action) != nb.s(y.action)) return w + "action";
    }
    if (da.segments.size() != db->segments.size()) return dn + ": segment count";
    for (size_t i = 0; i < da.segments.size(); ++i) {
      const Segment &x = da.segments[i], &y = db->segments[i];
      std::string w = dn + " " + at("segment", i) + ": ";
      if (x.addr != y.addr || x.total_size != y.total_size || x.allocated_size != y.allocated_size ||
          x.active_size != y.active_size || x.requested_size != y.requested_size)
        return w + "address or sizes";
      if (x.stream != y.stream) return w + "stream";
      if (x.pool_id[0] != y.pool_id[0] || x.pool_id[1] != y.pool_id[1]) return w + "pool id";
      if (x.small_pool != y.small_pool || x.expandable != y.expandable) return w + "type";
      if (na.stack(x.stack) != nb.stack(y.stack)) return w + "frames";
      if (x.block_count != y.block_count) return w + "block count";
      for (uint32_t k = 0; k < x.block_count; ++k) {
        const Block &p = da.blocks[x.first_block + k], &q = db->blocks[y.first_block + k];
        std::string v = w + at("block", k) + ": ";
        if (p.addr != q.addr || p.size != q.size || p.requested_size != q.requested_size) return v + "address or sizes";
        if (p.state != q.state) return v + "state";
        if (na.stack(p.stack) != nb.stack(q.stack)) return v + "frames";
      }
    }
  }
  for (const Device& db : b.devices)
    if (!a.find_device(db.index) && (!db.events.empty() || !db.segments.empty()))
      return "device " + std::to_string(db.index) + ": not in the original";
  const AllocatorSettings &sa = a.settings, &sb = b.settings;
  if (sa.present != sb.present) return "allocator_settings: present";
  if (sa.expandable_segments != sb.expandable_segments) return "allocator_settings: expandable_segments";
  if (sa.max_split_size != sb.max_split_size) return "allocator_settings: max_split_size";
  if (sa.roundup_power2_divisions != sb.roundup_power2_divisions) return "allocator_settings: roundup_power2_divisions";
  if (sa.raw != sb.raw) return "allocator_settings: raw key/value text";
  if (a.annotations.size() != b.annotations.size()) return "annotation count";
  for (size_t i = 0; i < a.annotations.size(); ++i) {
    const Annotation &x = a.annotations[i], &y = b.annotations[i];
    if (x.device != y.device || x.time_us != y.time_us || x.start != y.start || na.s(x.name) != nb.s(y.name))
      return at("annotation", i);
  }
  return "";
}

std::string report_json_without_input(const Trace& t) {
  Analysis r = analyze(t, {});
  auto j = nlohmann::json::parse(render_json(report_view(r)));
  j.erase("input");
  return j.dump(1);
}
std::string report_text_without_input(const Trace& t) {
  Analysis r = analyze(t, {});
  std::string s = render_text(report_view(r));
  size_t a = s.find("INPUT\n");
  size_t b = s.find("\nPEAK");
  return a == std::string::npos || b == std::string::npos ? s : s.substr(0, a) + s.substr(b);
}

// The real snapshots (xz'd ones are left to the benchmarks).
std::vector<std::string> real_pickles() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(std::string(SNAPDIFF_SOURCE_DIR) + "/tests/data/real")) {
    std::string name = e.path().filename().string();
    if (name.size() > 7 && name.compare(name.size() - 7, 7, ".pickle") == 0) out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Walks the opcodes: "" when only the plain-data opcodes this writer may use
// appear, PROTO 4 comes first, every FRAME covers whole opcodes, every memo
// reference names an earlier BINPUT and STOP ends the bytes.
struct OpcodeScan {
  std::string error;
  size_t frames = 0, puts = 0, gets = 0;
};
OpcodeScan scan_opcodes(const std::string& p) {
  OpcodeScan r;
  auto u = [&](size_t at, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= uint64_t(uint8_t(p[at + size_t(i)])) << (8 * i);
    return v;
  };
  if (p.size() < 3 || uint8_t(p[0]) != 0x80 || p[1] != 4) {
    r.error = "does not start with PROTO 4";
    return r;
  }
  std::set<uint64_t> memo;
  size_t pos = 2, frame_end = 0;
  while (true) {
    if (frame_end && pos == frame_end) frame_end = 0;
    if (pos >= p.size()) {
      r.error = "no STOP";
      return r;
    }
    size_t at = pos;
    uint8_t op = uint8_t(p[pos++]);
    size_t arg = 0;
    switch (op) {
      case 0x95:  // FRAME
        if (frame_end) {
          r.error = "FRAME inside a frame at " + std::to_string(at);
          return r;
        }
        frame_end = pos + 8 + size_t(u(pos, 8));
        arg = 8;
        ++r.frames;
        break;
      case '.':
        if (pos != p.size()) r.error = "bytes after STOP";
        else if (frame_end && frame_end != pos) r.error = "STOP before the end of its frame";
        return r;
      case '(': case '}': case ']': case 'u': case 's': case 'e': case 'a': case 0x86: case 0x88: case 0x89: case 'N':
        break;
      case 'K': arg = 1; break;
      case 'M': arg = 2; break;
      case 'J': arg = 4; break;
      case 'G': arg = 8; break;
      case 0x8a: arg = 1 + size_t(u(pos, 1)); break;
      case 0x8c: arg = 1 + size_t(u(pos, 1)); break;
      case 'X': arg = 4 + size_t(u(pos, 4)); break;
      case 0x8d: arg = 8 + size_t(u(pos, 8)); break;
      case 'q': memo.insert(u(pos, 1)); arg = 1; ++r.puts; break;
      case 'r': memo.insert(u(pos, 4)); arg = 4; ++r.puts; break;
      case 'h': case 'j': {
        int n = op == 'h' ? 1 : 4;
        if (!memo.count(u(pos, n))) {
          r.error = "memo reference to an unset index at " + std::to_string(at);
          return r;
        }
        arg = size_t(n);
        ++r.gets;
        break;
      }
      default: {
        char buf[64];
        std::snprintf(buf, sizeof buf, "opcode 0x%02x at %zu", unsigned(op), at);
        r.error = buf;
        return r;
      }
    }
    pos += arg;
    if (pos > p.size() || (frame_end && pos > frame_end)) {
      r.error = "opcode at " + std::to_string(at) + " runs past its frame or the end";
      return r;
    }
  }
}

void check_same_reports(const Trace& a, const Trace& b) {
  CHECK(report_json_without_input(a) == report_json_without_input(b));
  CHECK(report_text_without_input(a) == report_text_without_input(b));
  Analysis ra = analyze(a, {}), rb = analyze(b, {});
  REQUIRE(ra.devices.size() == rb.devices.size());
  for (size_t d = 0; d < ra.devices.size(); ++d) {
    const DeviceReplay &x = ra.devices[d].replay, &y = rb.devices[d].replay;
    CHECK(x.peak_requested.bytes == y.peak_requested.bytes);
    CHECK(x.peak_allocated.bytes == y.peak_allocated.bytes);
    CHECK(x.peak_reserved.bytes == y.peak_reserved.bytes);
    CHECK(x.peak_requested.event_index == y.peak_requested.event_index);
    CHECK(x.peak_allocated.event_index == y.peak_allocated.event_index);
  }
}

}  // namespace

TEST_CASE("every real snapshot: read, write_torch_pickle, read back is the same trace", "[input][pickle_writer]") {
  auto files = real_pickles();
  REQUIRE(files.size() >= 7);
  for (const std::string& name : files) {
    INFO(name);
    const std::string path = test::real_data(name);
    Trace a = load_trace(path);
    std::string bytes = write_torch_pickle(a);
    Trace b = load_trace_from_memory(bytes, "out.pickle");
    CHECK(b.source.format == "torch-pickle");
    CHECK(b.source.format_detail.find("protocol 4") != std::string::npos);
    CHECK(b.source.shape == "dict");
    CHECK(trace_diff(a, b) == "");
    check_same_reports(a, b);
    // PyTorch's own figures, from the written pickle.
    std::string stem = name.substr(0, name.size() - 7);
    {  // every real recording has its truth file
      Analysis r = analyze(b, {});
      const DeviceReplay& rp = r.devices[r.peak_device].replay;
      auto ms = test::truth(stem)["memory_stats"];
      CHECK(rp.peak_requested.bytes == ms["requested_bytes.all.peak"].get<int64_t>());
      CHECK(rp.peak_allocated.bytes == ms["allocated_bytes.all.peak"].get<int64_t>());
      CHECK(rp.peak_reserved.bytes == ms["reserved_bytes.all.peak"].get<int64_t>());
    }
    // Plain opcodes, sound frames and memo; shared strings and stacks.
    OpcodeScan sc = scan_opcodes(bytes);
    CHECK(sc.error == "");
    CHECK(sc.gets > sc.puts);
    CHECK(sc.frames >= 1);
    // Memo sharing keeps it smaller than the pickle PyTorch wrote.
    CHECK(bytes.size() < test::read_file(path).size());
    // Deterministic: writing what was read back gives the same bytes.
    CHECK(write_torch_pickle(b) == bytes);
  }
}

TEST_CASE("pickle -> .snap -> pickle is the same trace and the same bytes", "[input][pickle_writer]") {
  for (const std::string& name : real_pickles()) {
    INFO(name);
    Trace a = load_trace(test::real_data(name));
    Trace s = load_trace_from_memory(write_snap_json(a), "x.snap");
    REQUIRE(s.source.format == "snap");
    std::string bytes = write_torch_pickle(s);
    Trace c = load_trace_from_memory(bytes, "back.pickle");
    CHECK(trace_diff(a, c) == "");
    check_same_reports(a, c);
    CHECK(bytes == write_torch_pickle(a));
  }
}

TEST_CASE("the small fixtures and legacy shapes survive the trip", "[input][pickle_writer]") {
  for (const char* f : {"tiny_p0.pickle", "tiny_p2.pickle", "tiny_p4.pickle", "tiny_p5.pickle", "legacy_history.pickle",
                        "legacy_segment_list.pickle"}) {
    INFO(f);
    Trace a = load_trace(test::required(test::fixture(f)));
    std::string bytes = write_torch_pickle(a);
    CHECK(scan_opcodes(bytes).error == "");
    Trace b = load_trace_from_memory(bytes, "out.pickle");
    CHECK(trace_diff(a, b) == "");
    check_same_reports(a, b);
  }
  // A bare segment list has no history: it stays without one (an empty
  // device_traces), not a history that would read as truncated.
  Trace seg = load_trace(test::fixture("legacy_segment_list.pickle"));
  Trace back = load_trace_from_memory(write_torch_pickle(seg), "x.pickle");
  for (const Device& d : back.devices) CHECK_FALSE(d.has_trace);
}

TEST_CASE("corner cases of the model survive the trip", "[input][pickle_writer]") {
  Trace a;
  StringTable& s = a.strings;
  std::string long_name(300, 'x');  // BINUNICODE instead of SHORT_BINUNICODE
  FrameId f_user = a.intern_frame({s.intern("forward"), s.intern("/src/model.py"), 42});
  FrameId f_lib = a.intern_frame({s.intern(long_name), s.intern("lib.py"), 0});
  FrameId f_unknown = a.intern_frame({s.intern("fake"), s.intern("/x/fake_tensor.py"), kNoLine});
  FrameId f_big = a.intern_frame({s.intern("big"), s.intern("big.py"), int64_t(1) << 40});
  // A deep stack shared by thousands of events: written once.
  std::vector<FrameId> deep;
  for (int i = 0; i < 40; ++i)
    deep.push_back(a.intern_frame({s.intern("layer_" + std::to_string(i)), s.intern("/deep/unique_file_name.py"), i}));
  StackId st_deep = a.stacks.intern(deep.data(), deep.size());
  FrameId sa[] = {f_lib, f_user};
  StackId st_a = a.stacks.intern(sa, 2);
  FrameId sb[] = {f_unknown, f_big, f_user};
  StackId st_b = a.stacks.intern(sb, 3);

  const uint64_t seg_addr = 0x7f0000000000ull;
  for (int dev : {0, 2}) {
    Device& d = a.device(dev);
    d.has_trace = true;
    Segment sg;
    sg.addr = seg_addr + uint64_t(dev) * (1ull << 32);
    sg.total_size = 2 << 20;
    sg.allocated_size = 1024;
    sg.active_size = 1536;
    sg.requested_size = 1000;
    sg.stream = dev == 2 ? 0xfffffffffffffff0ull : 0;  // negative as int64
    sg.pool_id[0] = dev;
    sg.pool_id[1] = 7;
    sg.small_pool = true;
    sg.expandable = dev == 2;
    sg.stack = st_a;
    sg.first_block = uint32_t(d.blocks.size());
    d.blocks.push_back({sg.addr, 1024, 1000, st_a, BlockState::ActiveAllocated});
    d.blocks.push_back({sg.addr + 1024, 512, 300, st_b, BlockState::ActivePendingFree});
    d.blocks.push_back({sg.addr + 1536, (2 << 20) - 1536, 16384, 0, BlockState::Inactive});
    sg.block_count = 3;
    d.segments.push_back(sg);
    auto ev = [&](EventKind k, uint64_t addr, uint64_t size, StackId stack, int64_t t) {
      Event e;
      e.kind = k;
      e.action = s.intern(event_kind_name(k));
      e.addr = addr;
      e.size = size;
      e.stack = stack;
      e.time_us = t;
      e.stream = sg.stream;
      d.events.push_back(e);
    };
    int64_t t0 = 1796036370758480;
    ev(EventKind::SegmentAlloc, sg.addr, sg.total_size, st_a, t0);
    for (int i = 0; i < 1100; ++i) {  // more than one APPENDS batch
      ev(EventKind::Alloc, sg.addr + 2048, 512, st_deep, t0 + 2 * i + 1);
      ev(EventKind::FreeRequested, sg.addr + 2048, 512, st_deep, t0 + 2 * i + 2);
      ev(EventKind::FreeCompleted, sg.addr + 2048, 512, 0, kNoTime);
    }
    ev(EventKind::Alloc, sg.addr, 1000, st_a, t0 + 5000);
    ev(EventKind::Alloc, sg.addr + 1024, 300, st_b, t0 + 5001);
    ev(EventKind::FreeRequested, sg.addr + 1024, 300, st_b, t0 + 5002);
    ev(EventKind::Oom, 149335179264ull, 100000000000000ull, st_b, t0 + 5003);  // addr = device_free
    ev(EventKind::Snapshot, 0, 1536, 0, t0 + 5004);
    Event other;
    other.kind = EventKind::Other;
    other.action = s.intern("some_future_action");
    other.addr = 0x8000000000000010ull;  // >= 2^63: a 9-byte LONG1
    other.size = 1;
    other.time_us = -5;
    other.compile_context = s.intern("Torch-Compiled Region: 0/0");
    other.user_metadata = s.intern("phase=fwd");
    d.events.push_back(other);
  }
  a.device(3);  // segments and events of nobody: no trace list of its own
  AllocatorSettings& st = a.settings;
  st.present = true;
  st.expandable_segments = true;
  st.max_split_size = 512 << 20;
  st.roundup_power2_divisions = {4, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  st.raw = {{"PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True,roundup_power2_divisions:[1:4,4:8]"},
            {"max_split_size", "536870912"},
            {"garbage_collection_threshold", "0.600000"},
            {"expandable_segments", "true"},
            {"pinned_num_register_threads", "1"},
            {"release_lock_on_cudamalloc", "false"},
            {"roundup_power2_divisions", "1:4,4:8"},
            {"some_future_float", "1.500000"},
            {"some_future_none", "None"},
            {"some_future_text", "hello"}};
  a.annotations.push_back({0, 1796036370760831, s.intern("my_user_region"), true});
  a.annotations.push_back({0, 1796036370760900, s.intern("my_user_region"), false});
  a.annotations.push_back({2, kNoTime, s.intern("no time"), true});

  std::string bytes = write_torch_pickle(a);
  OpcodeScan sc = scan_opcodes(bytes);
  CHECK(sc.error == "");
  Trace b = load_trace_from_memory(bytes, "corner.pickle");
  CHECK(trace_diff(a, b) == "");
  // device_traces holds lists 0..2: device 1 gets an empty one, device 3
  // (above the last traced device) none.
  const Device* d1 = b.find_device(1);
  REQUIRE(d1);
  CHECK(d1->has_trace);
  CHECK(d1->events.empty());
  const Device* d3 = b.find_device(3);
  CHECK((d3 == nullptr || !d3->has_trace));
  // The unknown line comes back unknown, the huge one as it was.
  Names nb(b);
  const Device* d0 = b.find_device(0);
  REQUIRE(d0);
  auto frames_b = nb.stack(d0->blocks[1].stack);
  REQUIRE(frames_b.size() == 3);
  CHECK(std::get<2>(frames_b[0]) == kNoLine);
  CHECK(std::get<2>(frames_b[1]) == int64_t(1) << 40);
  // The 40-frame stack of 4400 events is in the bytes once: its file name
  // string appears once, and the whole pickle stays small.
  size_t n = 0;
  for (size_t p = bytes.find("unique_file_name"); p != std::string::npos; p = bytes.find("unique_file_name", p + 1))
    ++n;
  CHECK(n == 1);
  CHECK(bytes.size() < a.event_count() * 80);
  // The oom event keeps its device_free.
  CHECK(d0->events[d0->events.size() - 3].kind == EventKind::Oom);
  CHECK(d0->events[d0->events.size() - 3].addr == 149335179264ull);
  CHECK(b.settings.raw == a.settings.raw);
  CHECK(write_torch_pickle(b) == bytes);
}

TEST_CASE("settings the model only has as parsed fields are written", "[input][pickle_writer]") {
  Trace a;
  a.settings.present = true;
  a.settings.expandable_segments = true;
  a.settings.max_split_size = 1 << 30;
  a.settings.roundup_power2_divisions = {0, 4};
  Trace b = load_trace_from_memory(write_torch_pickle(a), "s.pickle");
  CHECK(b.settings.present);
  CHECK(b.settings.expandable_segments);
  CHECK(b.settings.max_split_size == 1 << 30);
  CHECK(b.settings.roundup_power2_divisions == a.settings.roundup_power2_divisions);
  // Absent settings stay absent.
  Trace none;
  Trace c = load_trace_from_memory(write_torch_pickle(none), "n.pickle");
  CHECK_FALSE(c.settings.present);
  CHECK(c.devices.empty());
}

TEST_CASE("write_torch_pickle_file writes plain and gzip'd files atomically", "[input][pickle_writer]") {
  Trace a = load_trace(test::real_data("small_oom.pickle"));
  for (bool gz : {false, true}) {
    INFO(gz);
    std::string path = gz ? "pickle_writer_test.pickle.gz" : "pickle_writer_test.pickle";
    write_torch_pickle_file(a, path, gz);
    Trace b = load_trace(path);
    CHECK(b.source.gzip == gz);
    CHECK(trace_diff(a, b) == "");
    std::string raw = test::read_file(path);
    if (gz) CHECK((uint8_t(raw[0]) == 0x1f && uint8_t(raw[1]) == 0x8b));
    else CHECK(raw == write_torch_pickle(a));
    std::remove(path.c_str());
  }
  CHECK_THROWS_AS(write_torch_pickle_file(a, "no-such-directory/x.pickle", false), OutputError);
}
