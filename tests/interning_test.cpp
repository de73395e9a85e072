// Interning (strings, frames, stacks) against plain reference maps, at sizes
// that make the tables grow many times; and the unpickler's fast paths for
// memo runs and short LONG1 integers at their edges.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "snapdiff/error.hpp"
#include "snapdiff/input/input.hpp"
#include "snapdiff/model/model.hpp"
#include "test_util.hpp"

using namespace snapdiff;
using snapdiff::test::PickleWriter;

TEST_CASE("string interning: ids in first-seen order, found again, absent ones not found", "[model]") {
  StringTable t;
  std::map<std::string, StrId> ref{{"", 0}};
  std::mt19937 rng(7);
  std::vector<std::string> order;
  // Short and long, sharing prefixes and suffixes, with NUL bytes: every
  // length the hash reads differently (0..7 tail bytes, whole words).
  for (int i = 0; i < 150000; ++i) {
    std::string s = "f";  // appended in two steps: `"f" + std::to_string()` draws a GCC 12 -Wrestrict false positive
    s += std::to_string(rng() % 60000);
    s.append(rng() % 40, char('a' + i % 3));
    if (i % 11 == 0) s.push_back('\0');
    order.push_back(s);
  }
  for (const std::string& s : order) {
    const StrId id = t.intern(s);
    auto [it, fresh] = ref.emplace(s, StrId(ref.size()));
    CHECK(id == it->second);
  }
  REQUIRE(t.size() == ref.size());
  for (const auto& [s, id] : ref) {
    CHECK(t.find(s) == id);
    CHECK(t.get(id) == s);
    CHECK(t.intern(s) == id);
  }
  CHECK(t.size() == ref.size());
  CHECK(t.find("not interned") == UINT32_MAX);
  CHECK(t.find(std::string("f1\0", 3)) == (ref.count(std::string("f1\0", 3)) ? ref[std::string("f1\0", 3)] : UINT32_MAX));
}

TEST_CASE("frame interning: equal frames share an id, any field apart makes a new one", "[model]") {
  Trace t;
  std::map<std::tuple<StrId, StrId, int64_t>, FrameId> ref;
  std::mt19937 rng(11);
  for (int i = 0; i < 120000; ++i) {
    Frame f;
    f.name = StrId(rng() % 300);
    f.file = StrId(rng() % 50);
    f.line = int64_t(rng() % 40) - 1;  // kNoLine too
    auto [it, fresh] = ref.emplace(std::make_tuple(f.name, f.file, f.line), FrameId(ref.size()));
    CHECK(t.intern_frame(f) == it->second);
  }
  REQUIRE(t.frames.size() == ref.size());
  for (const auto& [k, id] : ref) {
    CHECK(t.frames[id].name == std::get<0>(k));
    CHECK(t.frames[id].file == std::get<1>(k));
    CHECK(t.frames[id].line == std::get<2>(k));
  }
}

TEST_CASE("stack interning: a sequence seen again is the same node; nodes form the tree of prefixes", "[model]") {
  StackTable st;
  std::map<std::vector<FrameId>, StackId> ref;
  std::mt19937 rng(5);
  std::vector<std::vector<FrameId>> seen;
  for (int i = 0; i < 60000; ++i) {
    std::vector<FrameId> f;
    if (!seen.empty() && rng() % 3 == 0) {
      f = seen[rng() % seen.size()];  // again, as a new list in a pickle is
    } else {
      const size_t n = 1 + rng() % 40;
      for (size_t k = 0; k < n; ++k) f.push_back(FrameId(rng() % (k < 20 ? 4 : 500)));  // shared outer frames
      seen.push_back(f);
    }
    const StackId id = st.intern(f.data(), f.size());
    auto [it, fresh] = ref.emplace(f, id);
    CHECK(it->second == id);
    CHECK(st.frames(id) == f);
  }
  // Distinct sequences, distinct nodes; child() finds the nodes intern() made.
  std::map<StackId, int> uses;
  for (const auto& [f, id] : ref) {
    CHECK(++uses[id] == 1);
    StackId node = 0;
    for (size_t k = f.size(); k-- > 0;) node = st.child(node, f[k]);
    CHECK(node == id);
  }
}

namespace {

// {"device_traces": [[{"action": "alloc", "addr": 0, "size": 1, "time_us": <LONG1 bytes>}]]}
int64_t time_from_long1(const std::vector<uint8_t>& le) {
  PickleWriter w;
  w.proto(4).empty_dict().mark().sstr("device_traces").empty_list().empty_list().empty_dict().mark();
  w.sstr("action").sstr("alloc").sstr("addr").int1(0).sstr("size").int1(1).sstr("time_us").long1(le);
  w.setitems().append().append().setitems().stop();
  Trace t = load_trace_from_memory(w.str(), "t.pickle");
  REQUIRE(t.devices.size() == 1);
  REQUIRE(t.devices[0].events.size() == 1);
  return t.devices[0].events[0].time_us;
}

// A file holding `bytes` in the temporary directory; removed by the caller.
std::string temp_file(const std::string& bytes) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("snapdiff-memo-run-" + std::to_string(::getpid()) + ".pickle")).string();
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

std::vector<uint8_t> twos_complement(int64_t v, size_t width) {
  std::vector<uint8_t> b;
  for (size_t i = 0; i < width; ++i) b.push_back(uint8_t(uint64_t(v) >> (8 * i)));
  return b;
}

}  // namespace

TEST_CASE("LONG1 of every width up to 8 bytes decodes as Python reads it", "[input]") {
  for (size_t k = 1; k <= 8; ++k) {
    const int64_t hi = k == 8 ? INT64_MAX : (int64_t(1) << (8 * k - 1)) - 1;
    const int64_t lo = k == 8 ? INT64_MIN : -(int64_t(1) << (8 * k - 1));
    for (int64_t v : {int64_t(0), int64_t(1), int64_t(-1), hi, lo, hi / 3, lo / 5}) {
      INFO("width " << k << " value " << v);
      CHECK(time_from_long1(twos_complement(v, k)) == v);
    }
  }
  // Redundant sign bytes (a writer that does not trim): still the same value.
  CHECK(time_from_long1({0xfe, 0xff, 0xff, 0xff}) == -2);
  CHECK(time_from_long1({0x05, 0x00, 0x00}) == 5);
}

TEST_CASE("a run of memo gets: long runs, a refill in the middle, an unset index named at its offset", "[input]") {
  // One frame dict memoized at 0, then a stack of n gets of it mixed with
  // LONG_BINGETs; read from memory and from a file (chunked reads: runs
  // cross the chunk edges).
  for (size_t n : {size_t(1), size_t(7), size_t(5000), size_t(300000)}) {
    PickleWriter w;
    w.proto(4).empty_dict().mark().sstr("device_traces").empty_list().empty_list().empty_dict().mark();
    w.sstr("action").sstr("alloc").sstr("addr").int1(0).sstr("size").int1(1).sstr("frames").empty_list().mark();
    w.empty_dict().binput(0).mark().sstr("name").sstr("f").sstr("filename").sstr("a.py").sstr("line").int1(3).setitems();
    for (size_t i = 1; i < n; ++i) {
      if (i % 3 == 0) w.long_binget(0);
      else w.binget(0);
    }
    w.appends().setitems().append().append().setitems().stop();
    Trace m = load_trace_from_memory(w.str(), "t.pickle");
    REQUIRE(m.devices.size() == 1);
    CHECK(m.stacks.depth(m.devices[0].events[0].stack) == n);
    const std::string path = temp_file(w.str());
    Trace f = load_trace(path);
    std::remove(path.c_str());
    REQUIRE(f.devices.size() == 1);
    CHECK(f.stacks.depth(f.devices[0].events[0].stack) == n);
  }
  // An index never stored, after a run of good ones: refused at its own offset.
  PickleWriter w;
  w.proto(4).empty_list().binput(0).mark();
  for (int i = 0; i < 100; ++i) w.binget(0);
  const size_t bad = w.str().size();
  w.binget(9).appends().stop();
  uint64_t off = 0;
  std::string msg;
  try {
    load_trace_from_memory(w.str(), "bad.pickle");
  } catch (const InputError& e) {
    off = e.offset();
    msg = e.what();
  }
  CHECK(msg.find("memo index 9 was never stored") != std::string::npos);
  CHECK(off == bad);
}
