// .snap version 3 (binary, docs/snap_format.md): lossless against the
// readers of PyTorch's pickles and of the JSON form, refused with a byte
// offset when truncated or corrupt, never believed when a count lies.
#include <zstd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <nlohmann/json.hpp>

#include "snapdiff/analysis/analysis.hpp"
#include "snapdiff/error.hpp"
#include "snapdiff/input/input.hpp"
#include "snapdiff/report/report.hpp"
#include "test_util.hpp"

using namespace snapdiff;

namespace {

// Every field of the model the .snap format carries, compared one by one.
void expect_same_trace(const Trace& a, const Trace& b) {
  REQUIRE(b.strings.size() >= a.strings.size());
  for (size_t i = 0; i < a.strings.size(); ++i) REQUIRE(a.strings.get(StrId(i)) == b.strings.get(StrId(i)));
  REQUIRE(a.frames == b.frames);
  REQUIRE(a.stacks.size() == b.stacks.size());
  for (size_t i = 0; i < a.stacks.size(); ++i) {
    REQUIRE(a.stacks.node(StackId(i)).parent == b.stacks.node(StackId(i)).parent);
    REQUIRE(a.stacks.node(StackId(i)).frame == b.stacks.node(StackId(i)).frame);
  }
  CHECK(a.source.shape == b.source.shape);
  CHECK(a.settings.present == b.settings.present);
  CHECK(a.settings.expandable_segments == b.settings.expandable_segments);
  CHECK(a.settings.max_split_size == b.settings.max_split_size);
  CHECK(a.settings.max_entries == b.settings.max_entries);
  CHECK(a.settings.roundup_power2_divisions == b.settings.roundup_power2_divisions);
  CHECK(a.settings.raw == b.settings.raw);
  CHECK(a.metadata.size() == b.metadata.size());
  REQUIRE(a.annotations.size() == b.annotations.size());
  for (size_t i = 0; i < a.annotations.size(); ++i) {
    CHECK(a.annotations[i].device == b.annotations[i].device);
    CHECK(a.annotations[i].time_us == b.annotations[i].time_us);
    CHECK(a.annotations[i].name == b.annotations[i].name);
    CHECK(a.annotations[i].start == b.annotations[i].start);
  }
  REQUIRE(a.devices.size() == b.devices.size());
  for (size_t d = 0; d < a.devices.size(); ++d) {
    const Device &x = a.devices[d], &y = b.devices[d];
    CHECK(x.index == y.index);
    CHECK(x.has_trace == y.has_trace);
    REQUIRE(x.events.size() == y.events.size());
    size_t bad = 0;
    for (size_t i = 0; i < x.events.size(); ++i) {
      const Event &e = x.events[i], &f = y.events[i];
      if (e.kind != f.kind || e.addr != f.addr || e.size != f.size || e.time_us != f.time_us || e.stream != f.stream ||
          e.stack != f.stack || e.compile_context != f.compile_context || e.user_metadata != f.user_metadata ||
          b.strings.get(f.action) != a.strings.get(e.action))
        ++bad;
    }
    CHECK(bad == 0);
    REQUIRE(x.segments.size() == y.segments.size());
    for (size_t i = 0; i < x.segments.size(); ++i) {
      const Segment &s = x.segments[i], &t = y.segments[i];
      CHECK((s.addr == t.addr && s.total_size == t.total_size && s.allocated_size == t.allocated_size &&
             s.active_size == t.active_size && s.requested_size == t.requested_size && s.stream == t.stream &&
             s.pool_id[0] == t.pool_id[0] && s.pool_id[1] == t.pool_id[1] && s.stack == t.stack &&
             s.small_pool == t.small_pool && s.expandable == t.expandable && s.first_block == t.first_block &&
             s.block_count == t.block_count));
    }
    REQUIRE(x.blocks.size() == y.blocks.size());
    for (size_t i = 0; i < x.blocks.size(); ++i) {
      const Block &s = x.blocks[i], &t = y.blocks[i];
      CHECK((s.addr == t.addr && s.size == t.size && s.requested_size == t.requested_size && s.stack == t.stack &&
             s.state == t.state));
    }
  }
  REQUIRE(a.kernels.size() == b.kernels.size());
  for (size_t i = 0; i < a.kernels.size(); ++i) {
    const KernelLaunch &k = a.kernels[i], &l = b.kernels[i];
    CHECK((k.device == l.device && k.time_us == l.time_us && k.name == l.name && k.stack == l.stack &&
           k.stream == l.stream && k.pid == l.pid && k.thread == l.thread && k.graph == l.graph &&
           std::equal(k.grid, k.grid + 3, l.grid) && std::equal(k.block, k.block + 3, l.block)));
  }
  REQUIRE(a.device_memory.size() == b.device_memory.size());
  for (size_t i = 0; i < a.device_memory.size(); ++i) {
    const DeviceMemorySample &m = a.device_memory[i], &n = b.device_memory[i];
    CHECK((m.device == n.device && m.time_us == n.time_us && m.free_bytes == n.free_bytes &&
           m.total_bytes == n.total_bytes && m.reserved_bytes == n.reserved_bytes && m.label == n.label &&
           m.pid == n.pid));
  }
  REQUIRE(a.driver_memory.size() == b.driver_memory.size());
  for (size_t i = 0; i < a.driver_memory.size(); ++i) {
    const DriverMemoryEvent &m = a.driver_memory[i], &n = b.driver_memory[i];
    CHECK((m.device == n.device && m.time_us == n.time_us && m.pid == n.pid && m.thread == n.thread &&
           m.kind == n.kind && m.caller == n.caller && m.addr == n.addr && m.size == n.size && m.handle == n.handle &&
           m.stream == n.stream && m.api == n.api && m.library == n.library));
  }
}

std::string report_json_without_input(const Trace& t) {
  auto j = nlohmann::json::parse(render_json(report_view(analyze(t, {}))));
  j.erase("input");
  return j.dump(1);
}

// A version 3 file taken apart: its sections' tags and decoded payloads,
// and put back together with every section stored (codec 0).
struct Section {
  std::string tag, payload;
  size_t offset = 0;  // of its header in the file it came from
};
uint64_t le(const std::string& f, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | uint8_t(f[at + size_t(i)]);
  return v;
}
std::vector<Section> split(const std::string& f) {
  std::vector<Section> out;
  size_t off = 16;
  for (uint64_t i = 0, n = le(f, 12, 4); i < n; ++i) {
    Section s;
    s.tag = f.substr(off, 4);
    s.offset = off;
    const uint8_t codec = uint8_t(f[off + 4]);
    const uint64_t stored = le(f, off + 8, 8), decoded = le(f, off + 16, 8);
    const std::string body = f.substr(off + 24, size_t(stored));
    if (codec == 0) {
      s.payload = body;
    } else {
      s.payload.resize(size_t(decoded));
      REQUIRE(ZSTD_decompress(s.payload.data(), s.payload.size(), body.data(), body.size()) == decoded);
    }
    out.push_back(s);
    off += 24 + size_t(stored);
  }
  REQUIRE(off == f.size());
  return out;
}
void put(std::string& o, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) o.push_back(char(v >> (8 * i)));
}
std::string join(const std::vector<Section>& secs) {
  std::string o("\x89SNAPDF\n", 8);
  put(o, 3, 4);
  put(o, secs.size(), 4);
  for (const Section& s : secs) {
    o += s.tag;
    o.append(4, '\0');
    put(o, s.payload.size(), 8);
    put(o, s.payload.size(), 8);
    o += s.payload;
  }
  return o;
}

InputError refused(const std::string& bytes) {
  try {
    load_trace_from_memory(bytes, "x.snap");
  } catch (const InputError& e) {
    return e;
  }
  FAIL("accepted");
  throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE("v3 .snap: pickle -> v3 -> the same model, field by field", "[input]") {
  std::vector<std::string> files = {"small_bf16.pickle", "small_fp8.pickle", "small_oom.pickle",
                                    "small_bf16_expandable.pickle", "small_bf16_cpp.pickle"};
  // A few of the recorded runs too (PyTorch's own pickles, gzip'd).
  for (const auto& [file, stem] : test::real_recordings())
    if (stem == "ddp_gpt2" || stem == "expandable_gpt2" || stem == "cat_fsdp2_gpt2" || stem == "ans_oom_frag")
      files.push_back(file);
  REQUIRE(files.size() >= 8);
  for (const std::string& f : files) {
    INFO(f);
    const Trace a = load_trace(test::real_data(f));
    const std::string bytes = write_snap_binary(a);
    REQUIRE(bytes.substr(0, 8) == std::string("\x89SNAPDF\n", 8));
    const Trace b = load_trace_from_memory(bytes, "x.snap");
    CHECK(b.source.format == "snap");
    CHECK(b.source.format_detail.rfind("version 3", 0) == 0);
    expect_same_trace(a, b);
    // The same report (the JSON form and the binary agree too).
    CHECK(report_json_without_input(a) == report_json_without_input(b));
    // Written again from what was read: the same bytes but for META's source.
    const auto sa = split(bytes), sb = split(write_snap_binary(b));
    REQUIRE(sa.size() == sb.size());
    for (size_t i = 1; i < sa.size(); ++i) CHECK(sa[i].payload == sb[i].payload);
  }
}

TEST_CASE("v3 .snap: kernel launches, device-memory samples and driver memory round trip", "[input]") {
  for (const char* f : {"capture/fp8_mlp.kernels.snap", "capture/fsdp_gpt2.kernels.snap"}) {
    INFO(f);
    const Trace a = load_trace(test::real_data(f));  // the JSON form, version 2
    REQUIRE(!a.kernels.empty());
    REQUIRE(!a.driver_memory.empty());
    REQUIRE(!a.device_memory.empty());
    const Trace b = load_trace_from_memory(write_snap_binary(a), "k.snap");
    expect_same_trace(a, b);
    // Back to JSON: the same document as the one committed (but for its source).
    auto j1 = nlohmann::json::parse(write_snap_json(a)), j2 = nlohmann::json::parse(write_snap_json(b));
    j1.erase("source");
    j2.erase("source");
    CHECK(j1 == j2);
  }
}

TEST_CASE("v3 .snap: version 1 files still read, and report as their v3 conversion does", "[input]") {
  for (const char* f : {"bf16.snap", "fp8_no_pw.snap", "fp8_pw.snap", "gpt2_run.kernels.snap"}) {
    INFO(f);
    const Trace a = load_trace(std::string(SNAPDIFF_SOURCE_DIR) + "/sample_snapshots/" + f);
    CHECK(a.source.format_detail.rfind("version 3", 0) != 0);
    const Trace b = load_trace_from_memory(write_snap_binary(a), "b.snap");
    expect_same_trace(a, b);
    CHECK(report_json_without_input(a) == report_json_without_input(b));
  }
}

TEST_CASE("v3 .snap: written to disk by write_snap_file, read back; JSON on request", "[input]") {
  const Trace a = load_trace(test::real_data("small_fp8.pickle"));
  const std::string path = "snap_binary_test.snap";
  write_snap_file(a, path);
  const std::string bytes = test::read_file(path);
  CHECK(bytes.substr(0, 8) == std::string("\x89SNAPDF\n", 8));
  CHECK(bytes == write_snap_binary(a));
  const Trace b = load_trace(path);
  CHECK(!b.source.gzip);
  expect_same_trace(a, b);
  write_snap_file(a, path, SnapEncoding::Json);
  CHECK(test::read_file(path).front() == '{');
  write_snap_file(a, path, SnapEncoding::JsonGzip);
  CHECK(load_trace(path).source.gzip);
  std::remove(path.c_str());
}

TEST_CASE("v3 .snap: truncated anywhere, refused with a byte offset", "[input]") {
  const Trace a = load_trace(test::real_data("small_oom.pickle"));
  const std::string f = write_snap_binary(a);
  std::vector<size_t> cuts = {0, 1, 7, 8, 12, 15, 16};
  for (const Section& s : split(f))
    for (size_t d : {size_t(0), size_t(1), size_t(4), size_t(23), size_t(24), size_t(25)}) cuts.push_back(s.offset + d);
  for (size_t c = 0; c < f.size(); c += 61) cuts.push_back(c);
  cuts.push_back(f.size() - 1);
  for (size_t c : cuts) {
    INFO("cut at " << c);
    const InputError e = refused(f.substr(0, c));
    if (c >= 8) CHECK(e.has_offset());  // shorter than the magic: not told from other inputs
  }
  // Bytes after the last section are refused too.
  CHECK(refused(f + "x").describe().find("after the last section") != std::string::npos);
}

TEST_CASE("v3 .snap: a lying count or length is refused, never believed", "[input]") {
  const Trace a = load_trace(test::real_data("small_fp8.pickle"));
  const std::vector<Section> good = split(write_snap_binary(a));
  // The stored form reads like the compressed one.
  expect_same_trace(a, load_trace_from_memory(join(good), "stored.snap"));
  auto with_meta = [&](const std::function<void(nlohmann::json&)>& edit) {
    auto secs = good;
    auto m = nlohmann::json::parse(secs[0].payload);
    edit(m);
    secs[0].payload = m.dump();
    return join(secs);
  };
  for (uint64_t lie : {uint64_t(1) << 40, uint64_t(1) << 62, uint64_t(UINT64_MAX)}) {
    INFO(lie);
    const InputError e = refused(with_meta([&](nlohmann::json& m) { m["devices"][0]["events"] = lie; }));
    CHECK(e.has_offset());
    CHECK(e.describe().find("EVTS") != std::string::npos);
    CHECK(refused(with_meta([&](nlohmann::json& m) { m["strings"] = lie; })).describe().find("STRS") != std::string::npos);
    CHECK(refused(with_meta([&](nlohmann::json& m) { m["devices"][0]["blocks"] = lie; })).has_offset());
  }
  // One event fewer than the columns hold.
  CHECK(refused(with_meta([&](nlohmann::json& m) { m["devices"][0]["events"] = m["devices"][0]["events"].get<uint64_t>() - 1; }))
            .describe()
            .find("after its last row") != std::string::npos);
  // A section's decoded length beyond what deflate can give, and a stored
  // length beyond the file.
  std::string f = write_snap_binary(a);
  const size_t evts = split(f)[4].offset;
  REQUIRE(f.substr(evts, 4) == "EVTS");
  std::string big = f;
  for (int i = 0; i < 8; ++i) big[evts + 16 + size_t(i)] = char(0x7f);
  CHECK(refused(big).describe().find("more than zstd can give") != std::string::npos);
  std::string longer = f;
  longer[evts + 8 + 6] = char(0x7f);
  CHECK(refused(longer).describe().find("past the end of the file") != std::string::npos);
  REQUIRE(good[4].tag == "EVTS");
  const std::string& ev = good[4].payload;
  // A newer version.
  std::string newer = f;
  newer[8] = 4;
  CHECK(refused(newer).describe().find("newer snapdiff") != std::string::npos);
  // Every byte of the events section flipped, one at a time (stored, so the
  // columns themselves are corrupt): refused or read, never a crash.
  for (size_t i = 0; i < ev.size(); i += 3) {
    auto s2 = good;
    s2[4].payload[i] = char(s2[4].payload[i] ^ 0xff);
    try {
      Trace t = load_trace_from_memory(join(s2), "flip.snap");
    } catch (const InputError& e) {
      CHECK(e.has_offset());
    }
  }
  // And in the compressed file.
  for (size_t i = 16; i < f.size(); i += 5) {
    std::string g = f;
    g[i] = char(g[i] ^ 0x5a);
    try {
      Trace t = load_trace_from_memory(g, "flip.snap");
    } catch (const InputError& e) {
      CHECK((e.has_offset() || !e.json_path().empty()));
    }
  }
}

TEST_CASE("v3 .snap: --max-memory refuses a large file before it is built", "[input]") {
  // 2,000,000 events alike: a small file (they compress to almost nothing)
  // whose model and analysis need hundreds of MB.
  Trace a = load_trace(test::real_data("small_fp8.pickle"));
  const Event e = a.devices[0].events[0];
  a.devices[0].events.assign(2000000, e);
  const std::string f = write_snap_binary(a);
  REQUIRE(f.size() < (size_t(4) << 20));
  LoadOptions o;
  o.max_memory_bytes = uint64_t(256) << 20;
  const InputError err = [&] {
    try {
      load_trace_from_memory(f, "m.snap", o);
    } catch (const InputError& x) {
      return x;
    }
    FAIL("accepted");
    throw std::logic_error("unreachable");
  }();
  CHECK(err.describe().find("--max-memory") != std::string::npos);
  o.max_memory_bytes = uint64_t(2) << 30;
  CHECK(load_trace_from_memory(f, "m.snap", o).devices[0].events.size() == 2000000);
}
