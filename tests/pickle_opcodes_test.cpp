// The restricted unpickler, opcode by opcode, on tiny hand-made inputs and on
// fixtures pickled by Python itself (tests/data/make_fixtures.py).
#include <catch2/catch.hpp>
#include <functional>

#include "snapdiff/error.hpp"
#include "snapdiff/input/input.hpp"
#include "test_util.hpp"

using namespace snapdiff;
using snapdiff::test::PickleWriter;

namespace {

Trace parse(const PickleWriter& w) { return load_trace_from_memory(w.str(), "test.pickle"); }

// {"device_traces": [[{"action": "alloc", "addr": 4096, "size": <value>}]]}
PickleWriter entry_with_size(const std::function<void(PickleWriter&)>& size_value, int proto = 4) {
  PickleWriter w;
  w.proto(proto).empty_dict().mark().sstr("device_traces").empty_list().empty_list().empty_dict().mark();
  w.sstr("action").sstr("alloc").sstr("addr").int2(4096).sstr("size");
  size_value(w);
  w.setitems().append().append().setitems().stop();
  return w;
}

uint64_t size_of(const PickleWriter& w) {
  Trace t = parse(w);
  REQUIRE(t.devices.size() == 1);
  REQUIRE(t.devices[0].events.size() == 1);
  return t.devices[0].events[0].size;
}

std::string error_of(const std::string& bytes, uint64_t* offset = nullptr) {
  try {
    load_trace_from_memory(bytes, "bad.pickle");
  } catch (const InputError& e) {
    if (offset) *offset = e.offset();
    return e.describe();
  }
  return "";
}

}  // namespace

TEST_CASE("integer opcodes", "[input][pickle]") {
  CHECK(size_of(entry_with_size([](PickleWriter& w) { w.int1(200); })) == 200);
  CHECK(size_of(entry_with_size([](PickleWriter& w) { w.int2(65535); })) == 65535);
  CHECK(size_of(entry_with_size([](PickleWriter& w) { w.int4(2147483647); })) == 2147483647u);
  // LONG1 of 6 bytes (Python, minimal width) and 8 bytes (C++ pickler).
  CHECK(size_of(entry_with_size([](PickleWriter& w) { w.long1({0x00, 0x10, 0x20, 0x30, 0x40, 0x7f}); })) ==
        0x7f4030201000ull);
  CHECK(size_of(entry_with_size([](PickleWriter& w) { w.long1({1, 0, 0, 0, 0, 0, 0, 0}); })) == 1);
  // LONG1 with 9 bytes: 2^64-1 (a -1 line stored unsigned) decodes, but as a
  // size it is refused: sizes are summed in 64-bit counters.
  CHECK(error_of(entry_with_size([](PickleWriter& w) { w.long1({0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00}); }).str())
            .find("implausibly large") != std::string::npos);
  CHECK(error_of(entry_with_size([](PickleWriter& w) { w.int4(-5); }).str()).find("negative") != std::string::npos);
  CHECK(size_of(entry_with_size([](PickleWriter& w) { w.long4({0x34, 0x12}); })) == 0x1234);
  CHECK(size_of(entry_with_size([](PickleWriter& w) { w.long1({}); })) == 0);
  // Text INT/LONG.
  CHECK(size_of(entry_with_size([](PickleWriter& w) { w.bytes("I12345\n"); })) == 12345);
  CHECK(size_of(entry_with_size([](PickleWriter& w) { w.bytes("L99999999999L\n"); })) == 99999999999ull);
}

TEST_CASE("LONG1 beyond 64 bits is refused where an int64 is needed, kept as unknown for frame lines", "[input][pickle]") {
  std::vector<uint8_t> huge(17, 0x11);
  std::string e = error_of(entry_with_size([&](PickleWriter& w) { w.long1(huge); }).str());
  CHECK(e.find("size") != std::string::npos);

  // Frame line 2^64-1 (9-byte LONG1) -> unknown line, not a crash.
  PickleWriter w;
  w.proto(4).empty_dict().mark().sstr("device_traces").empty_list().empty_list().empty_dict().mark();
  w.sstr("action").sstr("alloc").sstr("addr").int1(0).sstr("size").int1(1).sstr("frames").empty_list();
  w.empty_dict().mark().sstr("name").sstr("f").sstr("filename").sstr("x.py").sstr("line");
  w.long1({0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00}).setitems().append();
  w.empty_dict().mark().sstr("name").sstr("g").sstr("filename").sstr("y.py").sstr("line").long1(huge).setitems().append();
  w.setitems().append().append().setitems().stop();
  Trace t = parse(w);
  StackId s = t.devices[0].events[0].stack;
  auto frames = t.stacks.frames(s);
  REQUIRE(frames.size() == 2);
  CHECK(t.frames[frames[0]].line == kNoLine);
  CHECK(t.frames[frames[1]].line == kNoLine);
  CHECK(t.strings.get(t.frames[frames[0]].name) == "f");
}

TEST_CASE("string opcodes and BINFLOAT, bools, None, tuples", "[input][pickle]") {
  PickleWriter w;
  w.proto(4).empty_dict().mark();
  w.sstr("segments").empty_list().empty_dict().mark();
  w.ustr("device").int1(3).ustr8("address").int4(1 << 20).sstr("total_size").int4(2 << 20);
  w.sstr("segment_type").ustr("small").sstr("is_expandable").raw({0x88});
  w.sstr("segment_pool_id").int1(7).int1(9).raw({0x86});  // TUPLE2
  w.sstr("frames").raw({'N'});                             // None
  w.sstr("blocks").empty_list().setitems().append();
  w.sstr("allocator_settings").empty_dict().mark();
  w.sstr("garbage_collection_threshold").binfloat(0.5).sstr("expandable_segments").raw({0x89});
  w.sstr("note").raw({'C', 3}).bytes("abc");  // SHORT_BINBYTES
  w.setitems().setitems().stop();
  Trace t = parse(w);
  REQUIRE(t.devices.size() == 1);
  const Device& d = t.devices[0];
  CHECK(d.index == 3);
  REQUIRE(d.segments.size() == 1);
  CHECK(d.segments[0].addr == (1u << 20));
  CHECK(d.segments[0].total_size == (2u << 20));
  CHECK(d.segments[0].small_pool);
  CHECK(d.segments[0].expandable);
  CHECK(d.segments[0].pool_id[0] == 7);
  CHECK(d.segments[0].pool_id[1] == 9);
  CHECK(d.segments[0].stack == 0);
  bool saw_gc = false;
  for (auto& kv : t.settings.raw)
    if (kv.first == "garbage_collection_threshold") saw_gc = kv.second.rfind("0.5", 0) == 0;
  CHECK(saw_gc);
  CHECK_FALSE(t.settings.expandable_segments);
}

TEST_CASE("memo holds references: shared frames stay shared, late fills are seen", "[input][pickle]") {
  // Frame dict memoized while empty (as Python does), filled afterwards, then
  // referenced by BINGET / LONG_BINGET from two entries.
  PickleWriter w;
  w.proto(4).empty_dict().memoize().mark().sstr("device_traces").memoize().empty_list().memoize();
  w.empty_list().memoize().mark();
  // entry 1
  w.empty_dict().mark().sstr("action").binput(10).sstr("alloc").sstr("addr").int1(0).sstr("size").int1(5);
  w.sstr("frames").binput(11).empty_list().long_binput(12).empty_dict().long_binput(13).mark();
  w.sstr("name").sstr("fn").sstr("filename").sstr("m.py").sstr("line").int1(3).setitems().append();
  w.setitems();
  // entry 2: shares the whole frames list (LONG_BINGET 12) and the key strings
  w.empty_dict().mark().binget(10).sstr("alloc").sstr("addr").int2(512).sstr("size").int1(6);
  w.binget(11).long_binget(12).setitems();
  // entry 3: a new list holding the shared frame dict twice
  w.empty_dict().mark().binget(10).sstr("alloc").sstr("addr").int2(1024).sstr("size").int1(7);
  w.binget(11).empty_list().mark().long_binget(13).long_binget(13).appends().setitems();
  w.appends().append().setitems().stop();
  Trace t = parse(w);
  const auto& ev = t.devices[0].events;
  REQUIRE(ev.size() == 3);
  CHECK(ev[0].stack != 0);
  CHECK(ev[0].stack == ev[1].stack);
  CHECK(t.stacks.depth(ev[2].stack) == 2);
  CHECK(t.frames.size() == 1);  // one frame, interned once
  CHECK(t.strings.get(t.frames[0].name) == "fn");
  CHECK(t.frames[0].line == 3);
}

TEST_CASE("refused opcodes name the opcode and its offset", "[input][pickle][security]") {
  struct Case {
    uint8_t op;
    const char* name;
  };
  Case cases[] = {{'c', "GLOBAL"}, {0x93, "STACK_GLOBAL"}, {'R', "REDUCE"}, {'b', "BUILD"},
                  {'i', "INST"},   {'o', "OBJ"},          {0x81, "NEWOBJ"}, {0x92, "NEWOBJ_EX"},
                  {'P', "PERSID"}, {'Q', "BINPERSID"},    {0x82, "EXT1"},   {0x83, "EXT2"},
                  {0x84, "EXT4"},  {0x97, "NEXT_BUFFER"}, {0x98, "READONLY_BUFFER"}, {0x8f, "EMPTY_SET"}};
  for (const Case& c : cases) {
    PickleWriter w;
    w.proto(4).empty_dict().raw({c.op}).bytes("os\nsystem\n");
    uint64_t off = 99;
    std::string e = error_of(w.str(), &off);
    INFO(c.name);
    CHECK(e.find(std::string("refused pickle opcode ") + c.name) != std::string::npos);
    CHECK(off == 3);
  }
}

TEST_CASE("a pickle that would call os.system is refused and runs nothing", "[input][pickle][security]") {
  std::remove("/tmp/snapdiff_pwned");
  for (const char* f : {"evil_os_system.pickle", "evil_os_system_p4.pickle"}) {
    INFO(f);
    try {
      load_trace(test::fixture(f));
      FAIL("accepted a hostile pickle");
    } catch (const InputError& e) {
      std::string m = e.describe();
      CHECK((m.find("GLOBAL") != std::string::npos || m.find("REDUCE") != std::string::npos));
      CHECK(m.find("offset") != std::string::npos);
    }
  }
  CHECK_FALSE(test::file_exists("/tmp/snapdiff_pwned"));
}

TEST_CASE("every protocol Python writes reads the same", "[input][pickle]") {
  Trace ref = load_trace(test::fixture("tiny_p4.pickle"));
  REQUIRE(ref.devices.size() == 1);
  REQUIRE(ref.devices[0].events.size() == 5);
  for (const char* f : {"tiny_p0.pickle", "tiny_p1.pickle", "tiny_p2.pickle", "tiny_p3.pickle", "tiny_p5.pickle",
                        "tiny_p4.pickle.gz", "tiny_trailing.pickle"}) {
    INFO(f);
    Trace t = load_trace(test::fixture(f));
    REQUIRE(t.devices.size() == 1);
    const auto& a = ref.devices[0].events;
    const auto& b = t.devices[0].events;
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      CHECK(a[i].kind == b[i].kind);
      CHECK(a[i].addr == b[i].addr);
      CHECK(a[i].size == b[i].size);
      CHECK(a[i].time_us == b[i].time_us);
      CHECK(t.stacks.depth(b[i].stack) == ref.stacks.depth(a[i].stack));
      CHECK(t.strings.get(b[i].user_metadata) == ref.strings.get(a[i].user_metadata));
    }
    CHECK(t.devices[0].segments.size() == 1);
    CHECK(t.devices[0].blocks.size() == 2);
    CHECK(t.annotations.size() == 1);
  }
  Trace gz = load_trace(test::fixture("tiny_p4.pickle.gz"));
  CHECK(gz.source.gzip);
  // The frame with line 2^64-1 reads as an unknown line; the shared list is one stack.
  const auto& ev = ref.devices[0].events;
  CHECK(ev[0].stack == ev[1].stack);
  auto fr = ref.stacks.frames(ev[2].stack);
  REQUIRE(fr.size() == 2);
  CHECK(ref.frames[fr[0]].line == kNoLine);
  CHECK(ref.strings.get(ev[2].user_metadata) == "phase=fwd");
  CHECK(ev[1].compile_context == 0);  // "N/A"
}

TEST_CASE("legacy shapes: bare segment list, blocks with history", "[input][pickle]") {
  Trace a = load_trace(test::fixture("legacy_segment_list.pickle"));
  CHECK(a.source.shape == "segment-list");
  REQUIRE(a.devices.size() == 1);
  CHECK(a.devices[0].segments.size() == 1);
  CHECK(a.devices[0].events.empty());

  Trace b = load_trace(test::fixture("legacy_history.pickle"));
  CHECK(b.source.shape.find("legacy-history") != std::string::npos);
  REQUIRE(b.devices.size() == 1);
  REQUIRE(b.devices[0].blocks.size() == 2);
  CHECK(b.devices[0].blocks[0].requested_size == 1000);
  CHECK(b.devices[0].blocks[0].stack != 0);
  CHECK(b.devices[0].blocks[0].addr == 0x7F0000000000ull);  // recomputed from the segment
  CHECK(b.devices[0].blocks[1].addr == 0x7F0000000000ull + (2u << 20) - 1024);
}

TEST_CASE("malformed pickles give input errors with offsets", "[input][pickle]") {
  uint64_t off = 0;
  CHECK(error_of("", &off).find("empty") != std::string::npos);
  CHECK(error_of("\x80\x09}.", &off).find("unsupported pickle protocol 9") != std::string::npos);
  CHECK(error_of(std::string("\x80\x04}", 3), &off).find("no STOP") != std::string::npos);
  CHECK(error_of("\x80\x04.", &off).find("empty stack") != std::string::npos);
  CHECK(error_of("\x80\x04h\x05.", &off).find("memo index 5") != std::string::npos);
  CHECK(off == 2);
  // A declared string length far beyond the input is refused, not allocated.
  PickleWriter w;
  w.proto(4).raw({0x8d}).le(uint64_t(1) << 60, 8).bytes("abc");
  CHECK(error_of(w.str(), &off).find("exceeds") != std::string::npos);
  PickleWriter w2;
  w2.proto(4).raw({'j'}).le(0xfffffff0u, 4).stop();
  CHECK(error_of(w2.str()).find("never stored") != std::string::npos);
  PickleWriter w3;  // LONG_BINPUT to a huge index: sparse memo, no giant allocation
  w3.proto(4).empty_dict().long_binput(0xfffffff0u).raw({'0'}).long_binget(0xfffffff0u).stop();
  CHECK_THROWS_AS(load_trace_from_memory(w3.str(), "x"), InputError);  // a dict, but not a snapshot
  CHECK(error_of("\x80\x04K\x01.").find("not a PyTorch memory snapshot") != std::string::npos);
  CHECK(error_of(test::read_file(test::fixture("deep_nesting.pickle"))).find("expected dict") != std::string::npos);
}
