// The reader's trace-entry fast path (pickle_reader.cpp, VM::try_entry)
// against its general path, and its read-ahead against reading in place: on every real recording and on hand-made shapes
// at and just beyond the fast path's edges, the model built with it is the
// model built without it, field for field (the .snap JSON of the whole
// Trace: strings, frames, stacks in id order, events, segments). Errors are
// the general path's (same message, same offset).
#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <functional>

#include "input/file_source.hpp"
#include "input/pickle_doc.hpp"
#include "snapdiff/error.hpp"
#include "snapdiff/input/input.hpp"
#include "test_util.hpp"

using namespace snapdiff;
using snapdiff::test::PickleWriter;

namespace {

std::string model_of(const std::string& bytes, bool fast, uint64_t* fast_entries = nullptr) {
  Trace t;
  const uint64_t n = detail::read_torch_pickle_path(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), t, fast);
  if (fast_entries) *fast_entries = n;
  if (!fast) CHECK(n == 0);
  return write_snap_json(t);
}

std::string error_of(const std::string& bytes, bool fast) {
  try {
    model_of(bytes, fast);
  } catch (const InputError& e) {
    return std::to_string(e.offset()) + ": " + e.describe();
  }
  return "";
}

// Returns how many entries the fast path took.
uint64_t same_model(const std::string& bytes) {
  INFO("fast: " << error_of(bytes, true) << " general: " << error_of(bytes, false));
  uint64_t taken = 0;
  const std::string fast = model_of(bytes, true, &taken), general = model_of(bytes, false);
  CHECK(fast.size() == general.size());
  CHECK(fast == general);
  return taken;
}

// {"device_traces": [[ENTRY, ENTRY, ...]]}: `entries` writes the entries
// (each pushed, then appended with APPENDS by this wrapper).
std::string snapshot(const std::function<void(PickleWriter&)>& entries) {
  PickleWriter w;
  w.proto(4).empty_dict().memoize().mark().sstr("device_traces").memoize().empty_list().memoize();
  w.empty_list().memoize().mark();
  entries(w);
  w.appends().append().setitems().stop();
  return w.str();
}

// A frame dict written out, memoized or not.
void frame(PickleWriter& w, const std::string& name, int line, bool memo) {
  w.empty_dict();
  if (memo) w.memoize();
  w.mark().sstr("filename").sstr("m.py").sstr("line").int2(uint16_t(line)).sstr("name").sstr(name).setitems();
}

}  // namespace

TEST_CASE("fast path: every real recording builds the same model", "[input][pickle][fast]") {
  const auto dir = std::filesystem::path(SNAPDIFF_SOURCE_DIR) / "tests/data/real";
  int files = 0;
  uint64_t taken = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    const bool gz = name.size() > 10 && name.ends_with(".pickle.gz");
    if (!gz && !name.ends_with(".pickle")) continue;
    std::string bytes = test::read_file(e.path().string());
    if (gz) {
      auto raw = detail::gunzip(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), uint64_t(1) << 32);
      bytes.assign(raw.begin(), raw.end());
    }
    INFO(name);
    taken += same_model(bytes);
    ++files;
  }
  CHECK(files >= 40);
  CHECK(taken > 0);
  // The largest: a million entries (unpacked by the build), nearly all of
  // them taken by the fast path.
  Trace t = load_trace(test::unpacked_data("xxl_fp8.pickle"));
  const uint64_t entries = t.devices[0].events.size();
  CHECK(same_model(test::read_file(test::unpacked_data("xxl_fp8.pickle"))) > entries * 95 / 100);
}

TEST_CASE("fast path: entries of every shape it takes or hands back", "[input][pickle][fast]") {
  SECTION("frames by memo, a shared frames list, memo puts of every kind") {
    // Entry 1 has new memoized frames (the general path's); 2-4 are taken.
    CHECK(same_model(snapshot([](PickleWriter& w) {
      // Entry 1: new frames written out and memoized (handed back: the
      // general path makes them), its frames list memoized.
      w.empty_dict().memoize().mark().sstr("action").memoize().sstr("alloc").memoize();
      w.sstr("addr").memoize().int4(4096).sstr("size").memoize().int2(512).sstr("frames").memoize();
      w.empty_list().memoize().mark();
      // Memo: 4 the entry, 5-9 its keys and "alloc", 10 the list.
      frame(w, "f", 1, true);  // memo 11
      frame(w, "g", 2, true);  // memo 12
      w.appends().sstr("stream").memoize().int1(0).setitems();  // 13
      // Entry 2: the same frames by memo (BINGET, LONG_BINGET), BINPUT puts.
      w.empty_dict().binput(14).mark().binget(5).binget(6).binget(7).int4(8192).binget(8).int2(64);
      w.binget(9).empty_list().long_binput(15).mark().binget(12).long_binget(11).appends();
      w.binget(13).int1(0).setitems();
      // Entry 3: the frames list of entry 2, shared by memo; one of 1 frame (APPEND).
      w.empty_dict().memoize().mark().binget(5).sstr("free_requested").binget(7).int4(8192).binget(9);
      w.binget(15).setitems();
      w.empty_dict().mark().binget(5).binget(6).binget(7).int4(64).binget(9).empty_list().binget(11);
      w.append().setitems();
    })) == 3);
  }
  SECTION("frames written out without a memo put (the unshared shape), repeated keys") {
    CHECK(same_model(snapshot([](PickleWriter& w) {
      for (int i = 0; i < 3; ++i) {
        w.empty_dict().mark().sstr("action").sstr("alloc").sstr("addr").int4(4096 * (i + 1));
        w.sstr("size").int2(100).sstr("frames").empty_list().mark();
        frame(w, "a", 3, false);
        // A repeated key: the last value counts; a line that is not an int.
        w.empty_dict().mark().sstr("name").sstr("x").sstr("name").sstr("b").sstr("line").sstr("7");
        w.sstr("filename").sstr("n.py").setitems();
        frame(w, "a", 3, false);
        w.appends().sstr("size").int2(uint16_t(200 + i)).setitems();
      }
    })) == 3);
  }
  SECTION("long stacks in several APPENDS batches; an empty frames list; no frames") {
    same_model(snapshot([](PickleWriter& w) {
      frame(w, "r", 1, true);  // memo 4 (pushed, then popped)
      w.raw({'0'});
      w.empty_dict().mark().sstr("action").sstr("alloc").sstr("addr").int4(64).sstr("size").int1(8);
      w.sstr("frames").empty_list();
      for (int b = 0; b < 3; ++b) {
        w.mark();
        for (int i = 0; i < 1000; ++i) w.binget(4);
        w.appends();
      }
      w.binget(4).append().setitems();
      w.empty_dict().mark().sstr("action").sstr("alloc").sstr("addr").int4(128).sstr("size").int1(8);
      w.sstr("frames").empty_list().setitems();
      w.empty_dict().mark().sstr("action").sstr("free").sstr("addr").int4(128).sstr("size").int1(8).setitems();
    }));
  }
  SECTION("a stack past the fast path's 4,096 frames") {
    same_model(snapshot([](PickleWriter& w) {
      frame(w, "deep", 9, true);
      w.raw({'0'});
      w.empty_dict().mark().sstr("action").sstr("alloc").sstr("addr").int4(64).sstr("size").int1(8);
      w.sstr("frames").empty_list();
      for (int b = 0; b < 5; ++b) {
        w.mark();
        for (int i = 0; i < 1000; ++i) w.binget(4);
        w.appends();
      }
      w.setitems();
    }));
  }
  SECTION("shapes handed back: a list under another key, two frames keys, a dict value, no action") {
    same_model(snapshot([](PickleWriter& w) {
      frame(w, "h", 4, true);
      w.raw({'0'});
      // A list under "stack" is not a frames list: not interned.
      w.empty_dict().mark().sstr("action").sstr("alloc").sstr("addr").int4(64).sstr("size").int1(8);
      w.sstr("stack").empty_list().mark().binget(4).binget(4).appends().setitems();
      // Two 'frames' keys: the second (a list by memo) counts.
      w.empty_dict().mark().sstr("action").sstr("alloc").sstr("addr").int4(96).sstr("size").int1(8);
      w.sstr("frames").empty_list().memoize().mark().binget(4).binget(4).appends();
      w.sstr("frames").empty_list().mark().binget(4).appends().setitems();
      // A dict value: the general path's.
      w.empty_dict().mark().sstr("action").sstr("alloc").sstr("addr").int4(128).sstr("size").int1(8);
      w.sstr("user_metadata").empty_dict().setitems();
      // SETITEM of one pair, then a later SETITEMS on the same dict.
      w.empty_dict().mark().sstr("action").sstr("alloc").sstr("addr").int4(160).setitems();
      w.mark().sstr("size").int1(32).setitems();
    }));
    // No 'action': not a trace entry.
    const std::string no_action = snapshot([](PickleWriter& w) {
      w.empty_dict().mark().sstr("addr").int4(64).sstr("size").int1(8).setitems();
    });
    CHECK(error_of(no_action, true) == error_of(no_action, false));
    CHECK(!error_of(no_action, true).empty());
  }
  SECTION("errors are the general path's") {
    const std::string bad_size = snapshot([](PickleWriter& w) {
      w.empty_dict().mark().sstr("action").sstr("alloc").sstr("addr").int4(64).sstr("size").int4(-5).setitems();
    });
    CHECK(!error_of(bad_size, true).empty());
    CHECK(error_of(bad_size, true) == error_of(bad_size, false));
    const std::string float_time = snapshot([](PickleWriter& w) {
      w.empty_dict().mark().sstr("action").sstr("alloc").sstr("addr").int4(64).sstr("time_us").binfloat(1.5).setitems();
    });
    CHECK(!error_of(float_time, true).empty());
    CHECK(error_of(float_time, true) == error_of(float_time, false));
    const std::string not_dict_frame = snapshot([](PickleWriter& w) {
      w.sstr("s").memoize().raw({'0'});  // memo 4: a string
      w.empty_dict().mark().sstr("action").sstr("alloc").sstr("addr").int4(64).sstr("size").int1(8);
      w.sstr("frames").empty_list().mark().binget(4).appends().setitems();
    });
    CHECK(!error_of(not_dict_frame, true).empty());
    CHECK(error_of(not_dict_frame, true) == error_of(not_dict_frame, false));
    // Cut in the middle of an entry: the general path's truncation message.
    std::string cut = snapshot([](PickleWriter& w) {
      w.empty_dict().mark().sstr("action").sstr("alloc").sstr("addr").int4(64).sstr("frames").empty_list();
      w.mark().binget(0).binget(0);
    });
    cut.resize(cut.size() - 8);
    CHECK(!error_of(cut, true).empty());
    CHECK(error_of(cut, true) == error_of(cut, false));
  }
}

// ---- reading ahead (ReadAhead: the file read on a thread of its own, parsed
// in place in its chunks) against reading on the parsing thread --------------

namespace {

// A file holding `bytes`, removed when it goes.
struct TempFile {
  std::string path;
  explicit TempFile(const std::string& bytes, const std::string& tag) {
    path = (std::filesystem::temp_directory_path() /
            ("snapdiff-ahead-" + tag + "-" + std::to_string(::getpid()) + ".pickle"))
               .string();
    std::ofstream(path, std::ios::binary) << bytes;
  }
  ~TempFile() { std::filesystem::remove(path); }
};

// The model (or the error) of `size` bytes of the file read through its
// descriptor, ahead or not.
std::string fd_outcome(const std::string& path, uint64_t size, bool ahead) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  std::string r;
  try {
    Trace t;
    detail::read_torch_pickle_fd(fd, size, t, ProgressFn(), detail::MemoryBudget(), ahead);
    r = write_snap_json(t);
  } catch (const InputError& e) {
    r = "error " + std::to_string(e.offset()) + ": " + e.describe();
  }
  ::close(fd);
  return r;
}

void same_read(const std::string& bytes, const std::string& tag) {
  TempFile f(bytes, tag);
  const std::string ahead = fd_outcome(f.path, bytes.size(), true);
  CHECK(ahead.rfind("error", 0) != 0);
  CHECK(ahead == fd_outcome(f.path, bytes.size(), false));
  CHECK(ahead == model_of(bytes, true));
}

}  // namespace

TEST_CASE("read-ahead: the model of a file read ahead is the one read in place", "[input][pickle][ahead]") {
  SECTION("real recordings, and the million-entry one (650 chunks)") {
    for (const char* name : {"small_oom.pickle", "fsdp2_gpt2.pickle.gz", "ans_gpt2_cpp.pickle.gz"}) {
      const auto path = std::filesystem::path(test::real_data(name));
      std::string bytes = test::read_file(path.string());
      if (std::string(name).ends_with(".gz")) {
        auto raw = detail::gunzip(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), uint64_t(1) << 32);
        bytes.assign(raw.begin(), raw.end());
      }
      INFO(name);
      same_read(bytes, "real");
    }
    const std::string xxl = test::unpacked_data("xxl_fp8.pickle");
    const uint64_t size = std::filesystem::file_size(xxl);
    const std::string ahead = fd_outcome(xxl, size, true);
    CHECK(ahead == fd_outcome(xxl, size, false));
  }
  SECTION("strings longer than a chunk, and text lines, across chunk boundaries") {
    for (size_t long_len : {size_t(100), size_t(300) << 10, size_t(700) << 10}) {
      std::string bytes = snapshot([&](PickleWriter& w) {
        for (int i = 0; i < 4000; ++i) {
          w.empty_dict().mark().sstr("action").sstr("alloc").sstr("addr").int4(64 * (i + 1));
          // Protocol 0 text lines (read line by line) and, now and then, a
          // long user_metadata string (BINUNICODE).
          w.sstr("size").bytes("I" + std::to_string(1000 + i) + "\n");
          if (i % 1000 == 999) w.sstr("user_metadata").ustr(std::string(long_len, char('a' + i % 26)));
          w.setitems();
        }
      });
      INFO(long_len);
      same_read(bytes, "long");
    }
  }
  SECTION("a file shorter than its size said: the same truncation, at the same offset") {
    std::string bytes = snapshot([](PickleWriter& w) {
      for (int i = 0; i < 20000; ++i)
        w.empty_dict().mark().sstr("action").sstr("alloc").sstr("addr").int4(64 * (i + 1)).sstr("size").int2(8).setitems();
    });
    TempFile f(bytes, "short");
    for (uint64_t more : {uint64_t(1), uint64_t(300) << 10}) {
      const std::string ahead = fd_outcome(f.path, bytes.size() + more, true);
      INFO(ahead);
      CHECK(ahead.rfind("error", 0) != 0);  // STOP is reached before the end the size said
      CHECK(ahead == fd_outcome(f.path, bytes.size() + more, false));
    }
    // Cut before STOP: the general path's message from both.
    TempFile cut(bytes.substr(0, bytes.size() - 700), "cut");
    const std::string ahead = fd_outcome(cut.path, bytes.size(), true);
    CHECK(ahead.rfind("error", 0) == 0);
    CHECK(ahead == fd_outcome(cut.path, bytes.size(), false));
  }
}
