// The bad-input contract in process: every truncation of a real snapshot, bit
// flips and random bytes give an InputError (never a crash or a hang).
#include <catch2/catch.hpp>
#include <filesystem>
#include <random>

#include "input/file_source.hpp"
#include "snapdiff/error.hpp"
#include "snapdiff/input/input.hpp"
#include "snapdiff/analysis/analysis.hpp"
#include "snapdiff/report/report.hpp"
#include "test_util.hpp"

using namespace snapdiff;

TEST_CASE("every truncation of a real snapshot is an input error", "[input][robust]") {
  std::string full = test::read_file(test::real_data("small_oom.pickle"));
  REQUIRE(full.size() > 1000);
  size_t errors = 0;
  for (size_t len = 0; len < full.size(); ++len) {
    try {
      load_trace_from_memory(std::string_view(full.data(), len), "t.pickle");
    } catch (const InputError& e) {
      ++errors;
      if (e.has_offset()) REQUIRE(e.offset() <= len);
    }
  }
  // No proper prefix of a pickle holds its STOP opcode, so all must fail.
  CHECK(errors == full.size());
  CHECK_NOTHROW(load_trace_from_memory(full, "t.pickle"));
}

TEST_CASE("truncated gzip input is an input error", "[input][robust]") {
  std::string raw = test::read_file(test::real_data("small_bf16.pickle"));
  auto z = detail::gzip_compress(raw);
  std::string gz(z.begin(), z.end());
  for (size_t len = 0; len < gz.size(); len += 97)
    CHECK_THROWS_AS(load_trace_from_memory(std::string_view(gz.data(), len), "t.gz"), InputError);
  CHECK_NOTHROW(load_trace_from_memory(gz, "t.gz"));
}

TEST_CASE("gzip output beyond the limit is refused", "[input][robust]") {
  std::string zeros(8 << 20, '\0');
  auto z = detail::gzip_compress(zeros);
  LoadOptions o;
  o.max_decoded_bytes = 1 << 20;
  try {
    load_trace_from_memory(std::string_view(reinterpret_cast<const char*>(z.data()), z.size()), "bomb.gz", o);
    FAIL("accepted");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("--max-input-bytes") != std::string::npos);
  }
}

TEST_CASE("bit flips in a real snapshot never crash", "[input][robust]") {
  std::string full = test::read_file(test::real_data("small_oom.pickle"));
  std::mt19937_64 rng(12345);
  for (int i = 0; i < 1500; ++i) {
    std::string m = full;
    int flips = 1 + int(rng() % 4);
    for (int k = 0; k < flips; ++k) m[rng() % m.size()] ^= char(1 << (rng() % 8));
    REQUIRE(test::survives(m));
  }
}

TEST_CASE("random bytes are refused", "[input][robust]") {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 500; ++i) {
    std::string m(1 + rng() % 512, '\0');
    for (auto& c : m) c = char(rng());
    if (i % 2) m[0] = char(0x80);  // make it look like a pickle
    REQUIRE(test::survives(m));
  }
}

// ---- bounds: the memory bound counted as the reader builds ------------------------
//
// --max-memory was a prediction from the input's size, which memo sharing
// or a gzip of tiny opcodes defeats. The reader now counts what it builds
// and refuses the moment the count passes the bound (docs/reliability.md,
// "Bounds"); bench/hostile/probes_bounds.py measures the RSS of the same
// shapes at the command line.

namespace {

using test::PickleWriter;

std::string_view as_view(const std::vector<uint8_t>& v) {
  return std::string_view(reinterpret_cast<const char*>(v.data()), v.size());
}

LoadOptions bounded(uint64_t mib) {
  LoadOptions o;
  o.max_memory_bytes = mib << 20;
  return o;
}

bool memory_refusal(const InputError& e) {
  const std::string w = e.what();
  return w.find("needs more than the limit of") != std::string::npos &&
         w.find("(raise it with --max-memory)") != std::string::npos;
}

// {"segments": [seg] * segments, "device_traces": [[]]} where seg holds
// [block] * blocks: one segment dict and one block dict, shared by the memo.
std::string shared_blocks(int segments, int blocks) {
  PickleWriter w;
  w.proto(4).empty_dict().memoize().mark();  // root (memo 0)
  w.sstr("segments").empty_list().memoize().mark();  // memo 1
  w.empty_dict().memoize().mark();  // the segment (memo 2)
  w.sstr("device").int1(0).sstr("address").int4(1 << 20).sstr("total_size").int4(1 << 20).sstr("blocks");
  w.empty_list().memoize().mark();  // memo 3
  w.empty_dict().memoize().mark().sstr("address").int4(1 << 20).sstr("size").int4(512).sstr("state");  // memo 4
  w.sstr("active_allocated").setitems();
  for (int i = 1; i < blocks; ++i) w.binget(4);
  w.appends().setitems();
  for (int i = 1; i < segments; ++i) w.binget(2);
  w.appends();
  w.sstr("device_traces").empty_list().empty_list().append();
  w.setitems().stop();
  return w.str();
}

// {"segments": [], "device_traces": [[ev] * refs]}: one trace entry, shared.
std::string shared_event(int refs) {
  PickleWriter w;
  w.proto(4).empty_dict().mark().sstr("segments").empty_list().sstr("device_traces").empty_list().empty_list();
  w.mark().empty_dict().memoize().mark().sstr("action").sstr("alloc").sstr("addr").int4(4096).sstr("size").int4(512);
  w.setitems();
  for (int i = 1; i < refs; ++i) w.binget(0);
  w.appends().append().setitems().stop();
  return w.str();
}

}  // namespace

TEST_CASE("bounds: a memo sharing one segment and one block is counted as it is expanded", "[input][robust][bounds]") {
  // 4 million blocks from 8 KB of input.
  const std::string big = shared_blocks(2000, 2000);
  CHECK(big.size() < 16000);
  try {
    load_trace_from_memory(big, "shared.pickle", bounded(100));
    FAIL("accepted");
  } catch (const InputError& e) {
    CHECK(memory_refusal(e));
    CHECK(e.has_offset());
    CHECK(e.describe().rfind("shared.pickle: offset ", 0) == 0);
  }
  // The same shape, small, reads and gives every block.
  Trace t = load_trace_from_memory(shared_blocks(20, 30), "small.pickle", bounded(100));
  REQUIRE(t.devices.size() == 1);
  CHECK(t.devices[0].segments.size() == 20);
  CHECK(t.devices[0].blocks.size() == 600);
}

TEST_CASE("bounds: one trace entry referenced millions of times", "[input][robust][bounds]") {
  const std::string big = shared_event(2'000'000);
  CHECK(big.size() < 4'100'000);
  // Passes the prediction from its size (1.5 x 4 MB + 64 MiB), not the count.
  CHECK(predicted_memory_bytes(big.size(), false) < (uint64_t(100) << 20));
  try {
    load_trace_from_memory(big, "event.pickle", bounded(100));
    FAIL("accepted");
  } catch (const InputError& e) {
    CHECK(memory_refusal(e));
  }
  Trace t = load_trace_from_memory(shared_event(1000), "event.pickle", bounded(100));
  CHECK(t.event_count() == 1000);
}

TEST_CASE("bounds: LONG_BINPUT at huge indices never sizes the memo by the index", "[input][robust][bounds]") {
  PickleWriter w;
  w.proto(4).int1(1);
  for (uint32_t i = 1; i <= 63; ++i) w.long_binput(i << 20);
  w.long_binput(0xffffffffu).long_binget(0xffffffffu).stop();
  // Read with a bound just above the program's fixed share: the memo takes
  // a few KiB, not the 512 MiB an array resized to the index did.
  try {
    load_trace_from_memory(w.str(), "memo.pickle", bounded(70));
    FAIL("accepted");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("not a PyTorch memory snapshot") != std::string::npos);
  }
  // A million far indices are counted (the sparse memo) and refused.
  PickleWriter m;
  m.proto(4).int1(1);
  for (uint32_t i = 0; i < 1'000'000; ++i) m.long_binput(8192 + i);
  m.stop();
  try {
    load_trace_from_memory(m.str(), "memo.pickle", bounded(100));
    FAIL("accepted");
  } catch (const InputError& e) {
    CHECK(memory_refusal(e));
  }
}

TEST_CASE("bounds: a gzip of ten million empty lists", "[input][robust][bounds]") {
  std::string text = "\x80\x04";
  text.append(10'000'000, ']');
  text += '.';
  const auto gz = detail::gzip_compress(text, 9);
  CHECK(gz.size() < 100'000);
  try {
    load_trace_from_memory(as_view(gz), "lists.pickle.gz", bounded(100));
    FAIL("accepted");
  } catch (const InputError& e) {
    CHECK(memory_refusal(e));
  }
}

TEST_CASE("bounds: an ordinary pickle of many dumped blocks", "[input][robust][bounds]") {
  // PyTorch's shape, written by snapdiff's own pickle writer: 400,000 blocks.
  Trace src;
  Device& d = src.device(0);
  const uint64_t n = 400'000, base = uint64_t(1) << 40;
  Segment sg;
  sg.addr = base;
  sg.total_size = sg.allocated_size = sg.active_size = sg.requested_size = n * 512;
  sg.block_count = uint32_t(n);
  d.segments.push_back(sg);
  for (uint64_t i = 0; i < n; ++i) {
    Block b;
    b.addr = base + i * 512;
    b.size = b.requested_size = 512;
    b.state = BlockState::ActiveAllocated;
    d.blocks.push_back(b);
  }
  const std::string bytes = write_torch_pickle(src);
  REQUIRE(predicted_memory_bytes(bytes.size(), false) < (uint64_t(100) << 20));
  try {
    load_trace_from_memory(bytes, "blocks.pickle", bounded(100));
    FAIL("accepted");
  } catch (const InputError& e) {
    CHECK(memory_refusal(e));
  }
  // Read, and analysed, under a bound that holds it.
  Trace t = load_trace_from_memory(bytes, "blocks.pickle", bounded(1024));
  CHECK(t.devices[0].blocks.size() == n);
}

TEST_CASE("bounds: real snapshots read under the bound their size predicts", "[input][robust][bounds]") {
  // The running count must never refuse what the prediction lets through:
  // each real recording, read with exactly its predicted bound.
  for (const char* name : {"small_bf16.pickle", "small_fp8.pickle", "small_oom.pickle", "med_bf16_cpp.pickle",
                           "small_bf16_expandable.pickle"}) {
    INFO(name);
    const std::string path = test::real_data(name);
    LoadOptions o;
    o.max_memory_bytes = predicted_memory_bytes(test::read_file(path).size(), false);
    Trace t = load_trace(path, o);
    CHECK(t.event_count() > 0);
  }
  const std::string xxl = test::unpacked_data("xxl_fp8.pickle");
  LoadOptions o;
  o.max_memory_bytes = predicted_memory_bytes(uint64_t(std::filesystem::file_size(xxl)), false);
  Trace t = load_trace(xxl, o);
  CHECK(t.event_count() > 900'000);
}

// ---- bounds: sizes and sums beyond any device -------------------------------------

namespace {

Trace with_segments(const std::vector<uint64_t>& sizes) {
  Trace t;
  Device& d = t.device(0);
  uint64_t addr = uint64_t(1) << 52;
  for (uint64_t s : sizes) {
    Segment sg;
    sg.addr = addr;
    sg.total_size = s;
    sg.first_block = uint32_t(d.blocks.size());
    sg.block_count = 1;
    Block b;
    b.addr = addr;
    b.size = s;
    d.blocks.push_back(b);
    d.segments.push_back(sg);
    addr += s;
  }
  return t;
}

Trace with_allocs(size_t n, uint64_t size) {
  Trace t;
  Device& d = t.device(0);
  d.has_trace = true;
  for (size_t i = 0; i < n; ++i) {
    Event e;
    e.kind = EventKind::Alloc;
    e.action = t.strings.intern("alloc");
    e.addr = (uint64_t(1) << 40) + i * 4096;
    e.size = size;
    e.time_us = int64_t(1000 + i);
    d.events.push_back(e);
  }
  return t;
}

std::string error_of(const std::string& bytes) {
  try {
    Trace t = load_trace_from_memory(bytes, "sums.pickle");
    (void)analyze(t, {});
  } catch (const InputError& e) {
    return e.describe();
  }
  return "";
}

}  // namespace

TEST_CASE("bounds: sizes and their sums beyond 2^50 bytes are input errors, never wrapped", "[input][robust][bounds]") {
  static_assert(kMaxDeviceBytes == uint64_t(1) << 50);
  // 257 segments totalling 2^64 + 1000 bytes: each beyond any device.
  std::vector<uint64_t> wrap(257, ((~uint64_t(0)) / 257) + 1);
  CHECK(error_of(write_torch_pickle(with_segments(wrap))).find("more than any device holds") != std::string::npos);
  // 1,100 segments of 1 TiB: each plausible, their sum not.
  const std::string many = error_of(write_torch_pickle(with_segments(std::vector<uint64_t>(1100, uint64_t(1) << 40))));
  CHECK(many.find("total_size of device 0 sum to more than any device holds") != std::string::npos);
  CHECK(many.rfind("sums.pickle: offset ", 0) == 0);
  // 1,000 of them: 2^50 - 2^40 in all, read.
  CHECK(error_of(write_torch_pickle(with_segments(std::vector<uint64_t>(1000, uint64_t(1) << 40)))).empty());
  // 300 allocations of 2^56 - 1 bytes: each refused where it is read.
  const std::string big = error_of(write_torch_pickle(with_allocs(300, (uint64_t(1) << 56) - 1)));
  CHECK(big.find("field 'size' is negative or implausibly large") != std::string::npos);
  // 1,100 allocations of 1 TiB: the replay's running total passes 2^50 at event 1024.
  const std::string sum = error_of(write_torch_pickle(with_allocs(1100, uint64_t(1) << 40)));
  CHECK(sum.find("device 0, event 1024: the requested bytes come to") != std::string::npos);
  CHECK(sum.find("beyond what any device holds") != std::string::npos);
  CHECK(error_of(write_torch_pickle(with_allocs(1000, uint64_t(1) << 40))).empty());
}
