// The injection library's raw log: LogWriter -> file -> log reader -> Trace
// (capture/inject/), bad logs refused with the file and byte offset, and the
// .snap format's version 2 sections (driver_memory, the kernels' process
// columns) round-tripped.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cxxabi.h>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <vector>

#include "demangle.hpp"
#include "log_reader.hpp"
#include "log_test_util.hpp"
#include "snapdiff/error.hpp"
#include "snapdiff/input/input.hpp"
#include "test_util.hpp"

using namespace snapdiff;
using namespace test_log;
namespace lg = snapcapture::log;

namespace {

constexpr uint64_t MiB = uint64_t(1) << 20;
constexpr uint64_t GiB = uint64_t(1) << 30;

// A fresh folder under the working directory, removed with its files.
struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "capture_log_test.XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    for (const std::string& f : lg::logs_in_dir(path)) ::unlink(f.c_str());
    for (const char* extra : {"/bad.log"}) ::unlink((path + extra).c_str());
    ::rmdir(path.c_str());
  }
  std::string log_of(pid_t pid) const { return path + "/" + std::to_string(pid) + ".sclog"; }
};

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string name_of(const Trace& t, StrId id) { return std::string(t.strings.get(id)); }

std::string meta(const Trace& t, const std::string& key) {
  for (const auto& kv : t.metadata)
    if (kv.first == key) return kv.second;
  return "(absent)";
}

}  // namespace

TEST_CASE("log writer -> reader: kernels demangled, frees sized, samples' reserved bytes", "[input]") {
  TempDir dir;
  {
    LogWriter w;
    w.set_dir(dir.path);
    command(w, "python train.py --steps 3");
    const int64_t t0 = LogWriter::now_us();
    sample(w, t0, 139 * GiB, 140 * GiB, "start");
    memory(w, t0 + 10, MemoryOp::Alloc, 0x7f0000000000, 2 * MiB, "libc10_cuda.so");
    memory(w, t0 + 11, MemoryOp::Alloc, 0x7f1000000000, 3 * MiB, "libnccl.so.2");
    memory(w, t0 + 12, MemoryOp::Alloc, 0, 64 * GiB, "libc10_cuda.so", 0, 0, /*result=*/2);  // out of memory
    kernel(w, t0 + 20, "_ZN2at6native29vectorized_elementwise_kernelILi4EEEviT_", 0x55aa);
    kernel(w, t0 + 21, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 0x77);
    kernel(w, t0 + 22, "cudaGraphLaunch", 0x55aa, 0, LaunchApi::RuntimeGraph);
    // Expandable segments: physical memory made, then mapped.
    memory(w, t0 + 30, MemoryOp::Create, 0, 20 * MiB, "libc10_cuda.so", 0, /*handle=*/42);
    memory(w, t0 + 31, MemoryOp::Map, 0x7f2000000000, 20 * MiB, "libc10_cuda.so", 0, 42);
    sample(w, t0 + 40, 100 * GiB, 140 * GiB, "interval");
    memory(w, t0 + 50, MemoryOp::Free, 0x7f0000000000, 0, "libc10_cuda.so", /*device=*/-1);
    memory(w, t0 + 51, MemoryOp::Unmap, 0x7f2000000000, 20 * MiB, "libc10_cuda.so");
    memory(w, t0 + 52, MemoryOp::Release, 0, 0, "libc10_cuda.so", 0, 42);
    note(w, t0 + 53, "CUPTI already has a subscriber: nothing recorded");
    sample(w, t0 + 60, 120 * GiB, 140 * GiB, "exit");
    w.flush();
    REQUIRE_FALSE(w.failed());
  }
  const Trace t = lg::read_logs({dir.path});
  CHECK(t.source.format == "snapcapture-log");
  REQUIRE(t.kernels.size() == 3);
  CHECK(name_of(t, t.kernels[0].name) == "void at::native::vectorized_elementwise_kernel<4>(int, 4)");
  CHECK(name_of(t, t.kernels[1].name) == "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  CHECK(t.kernels[0].stream == 0x55aa);
  CHECK(t.kernels[0].pid == uint32_t(::getpid()));
  CHECK(t.kernels[0].thread == 7);
  CHECK(t.kernels[0].grid[0] == 128);
  CHECK(t.kernels[0].grid[1] == 2);
  CHECK(t.kernels[0].block[0] == 256);
  CHECK_FALSE(t.kernels[0].graph);
  CHECK(t.kernels[2].graph);
  CHECK(name_of(t, t.kernels[2].name) == "cudaGraphLaunch");

  // The failed call is not memory: 7 of the 8 memory records.
  REQUIRE(t.driver_memory.size() == 7);
  const DriverMemoryEvent& a = t.driver_memory[0];
  CHECK(a.kind == DriverMemoryKind::Alloc);
  CHECK(a.caller == MemoryCaller::PyTorch);
  CHECK(name_of(t, a.api) == "cuMemAlloc_v2");
  CHECK(name_of(t, a.library) == "libc10_cuda.so");
  CHECK(t.driver_memory[1].caller == MemoryCaller::Nccl);
  const DriverMemoryEvent& f = t.driver_memory[4];
  CHECK(f.kind == DriverMemoryKind::Free);
  CHECK(f.size == 2 * MiB);  // the size of the allocation it frees
  CHECK(f.device == 0);      // and its device, which the record did not know
  CHECK(t.driver_memory[5].kind == DriverMemoryKind::Unmap);
  CHECK(t.driver_memory[5].size == 20 * MiB);
  CHECK(t.driver_memory[6].kind == DriverMemoryKind::Release);
  CHECK(t.driver_memory[6].size == 20 * MiB);  // of the cuMemCreate of its handle

  // PyTorch's bytes from the driver at each sample: none, 2 MiB allocated +
  // 20 MiB mapped (NCCL's 3 MiB are not PyTorch's), then all given back.
  REQUIRE(t.device_memory.size() == 3);
  CHECK(t.device_memory[0].reserved_bytes == 0);
  CHECK(t.device_memory[1].reserved_bytes == 22 * MiB);
  CHECK(t.device_memory[2].reserved_bytes == 0);
  CHECK(t.device_memory[1].free_bytes == 100 * GiB);
  CHECK(t.device_memory[1].total_bytes == 140 * GiB);
  CHECK(name_of(t, t.device_memory[2].label) == "exit");
  CHECK(t.device_memory[2].pid == uint32_t(::getpid()));

  const std::string key = "capture.process." + std::to_string(::getpid()) + ".";
  CHECK(meta(t, key + "command") == "python train.py --steps 3");
  CHECK(meta(t, key + "ppid") == std::to_string(::getppid()));
  CHECK(meta(t, key + "notes") == "CUPTI already has a subscriber: nothing recorded");
  CHECK(meta(t, "capture.processes") == std::to_string(::getpid()));
}

TEST_CASE("log writer: a forked child writes a log of its own; two processes read as one trace", "[input]") {
  TempDir dir;
  LogWriter w;
  w.set_dir(dir.path);
  const int64_t t0 = LogWriter::now_us();
  kernel(w, t0, "parent_first");
  memory(w, t0 + 1, MemoryOp::Alloc, 0x1000, 4 * MiB, "libc10_cuda.so");
  w.lock();  // as pthread_atfork's prepare handler does
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    w.reset_after_fork();
    w.unlock();
    // The same address in another process is another allocation.
    memory(w, t0 + 5, MemoryOp::Alloc, 0x1000, 1 * MiB, "libc10_cuda.so", 1);
    kernel(w, t0 + 6, "child_kernel", 0, 1);
    memory(w, t0 + 7, MemoryOp::Free, 0x1000, 0, "libc10_cuda.so", 1);
    sample(w, t0 + 8, 10 * GiB, 80 * GiB, "exit", 1);
    ::_exit(0);  // no flush, no destructors: the records are in the file all the same
  }
  w.unlock();
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  kernel(w, t0 + 10, "parent_after_fork");
  memory(w, t0 + 11, MemoryOp::Free, 0x1000, 0, "libc10_cuda.so");
  w.flush();

  // The parent's log has none of the child's records.
  const Trace parent = lg::read_logs({dir.log_of(::getpid())});
  REQUIRE(parent.kernels.size() == 2);
  CHECK(name_of(parent, parent.kernels[1].name) == "parent_after_fork");

  const Trace t = lg::read_logs({dir.path});
  REQUIRE(t.kernels.size() == 3);
  CHECK(name_of(t, t.kernels[0].name) == "parent_first");
  CHECK(name_of(t, t.kernels[1].name) == "child_kernel");  // sorted by time across the processes
  CHECK(t.kernels[1].pid == uint32_t(child));
  CHECK(t.kernels[1].device == 1);
  CHECK(name_of(t, t.kernels[2].name) == "parent_after_fork");
  REQUIRE(t.driver_memory.size() == 4);
  // Each process's free is sized from its own allocation at that address.
  CHECK(t.driver_memory[2].pid == uint32_t(child));
  CHECK(t.driver_memory[2].size == 1 * MiB);
  CHECK(t.driver_memory[3].pid == uint32_t(::getpid()));
  CHECK(t.driver_memory[3].size == 4 * MiB);
  REQUIRE(t.device_memory.size() == 1);
  CHECK(t.device_memory[0].reserved_bytes == 0);
  CHECK(t.device_memory[0].pid == uint32_t(child));
  CHECK(meta(t, "capture.process." + std::to_string(child) + ".ppid") == std::to_string(::getpid()));
  const std::string pids = meta(t, "capture.processes");
  CHECK(pids.find(std::to_string(child)) != std::string::npos);
  CHECK(pids.find(std::to_string(::getpid())) != std::string::npos);
}

TEST_CASE("log writer: records past one 8 MiB chunk are all read back", "[input]") {
  TempDir dir;
  LogWriter w;
  w.set_dir(dir.path);
  const int64_t t0 = 1700000000000000;
  const size_t n = 300000;  // 64-byte records: 19 MB, three chunks and windows
  for (size_t i = 0; i < n; ++i) kernel(w, t0 + int64_t(i), i % 2 ? "odd" : "even", i % 5);
  REQUIRE_FALSE(w.failed());
  const Trace t = lg::read_logs({dir.path});
  REQUIRE(t.kernels.size() == n);
  CHECK(t.kernels[n - 1].time_us == t0 + int64_t(n - 1));
  CHECK(name_of(t, t.kernels[n - 1].name) == "odd");
  CHECK(name_of(t, t.kernels[n - 2].name) == "even");
  CHECK(t.kernels[n - 2].stream == (n - 2) % 5);
  // A memory bound below what the model needs refuses the log, naming it.
  lg::ReadOptions small;
  small.max_memory_bytes = 4 << 20;  // the log alone is 19 MB
  try {
    lg::read_logs({dir.path}, small);
    FAIL("accepted");
  } catch (const InputError& e) {
    CHECK(e.describe().find(dir.log_of(::getpid()) + ": offset ") == 0);
    CHECK(e.describe().find("needs more than the limit of 4 MiB of memory") != std::string::npos);
  }
  // 40 MiB holds the log (24 MiB on disk) but not the model besides (300,000 launches of 72 bytes, 21 MB).
  small.max_memory_bytes = 40 << 20;
  try {
    lg::read_logs({dir.path}, small);
    FAIL("accepted");
  } catch (const InputError& e) {
    CHECK(e.describe().find(dir.log_of(::getpid()) + ": offset ") == 0);
    CHECK(e.describe().find("needs more than the limit of 40 MiB of memory") != std::string::npos);
  }
}

TEST_CASE("log writer: threads appending at once lose no record and keep each thread's order", "[input]") {
  TempDir dir;
  LogWriter w;
  w.set_dir(dir.path);
  constexpr int kThreads = 4, kEach = 20000;
  std::vector<std::thread> threads;
  for (int th = 0; th < kThreads; ++th)
    threads.emplace_back([&w, th] {
      const std::string name = "thread_" + std::to_string(th);
      for (int i = 0; i < kEach; ++i)
        kernel(w, 1000 + i, name.c_str(), uint64_t(i), 0, LaunchApi::RuntimeLaunch, uint32_t(th + 1));
    });
  for (auto& t : threads) t.join();
  REQUIRE_FALSE(w.failed());
  // Read in file order (read_log_bytes does not sort).
  Trace t;
  lg::read_log_bytes(slurp(dir.log_of(::getpid())), "threads.sclog", t);
  REQUIRE(t.kernels.size() == size_t(kThreads) * kEach);
  std::vector<uint64_t> next(kThreads + 1, 0);
  size_t in_order = 0, named = 0;
  for (const KernelLaunch& k : t.kernels) {
    REQUIRE(k.thread >= 1);
    REQUIRE(k.thread <= uint32_t(kThreads));
    if (name_of(t, k.name) == "thread_" + std::to_string(k.thread - 1)) ++named;
    if (k.stream == next[k.thread]) ++in_order;
    next[k.thread] = k.stream + 1;
  }
  CHECK(named == t.kernels.size());
  CHECK(in_order == t.kernels.size());
  for (int th = 1; th <= kThreads; ++th) CHECK(next[size_t(th)] == uint64_t(kEach));
}

TEST_CASE("log reader: a log cut inside a record reads up to its last whole record", "[input]") {
  TempDir dir;
  {
    LogWriter w;
    w.set_dir(dir.path);
    kernel(w, 100, "k0");
    kernel(w, 200, "k1");
    kernel(w, 300, "k2");
  }
  const std::string bytes = slurp(dir.log_of(::getpid()));
  // Header 32, then "k0" (string 24, kernel 64), "k1" (24 + 64), "k2" (24 + 64).
  const size_t end_of_k1 = sizeof(FileHeader) + 2 * (24 + sizeof(KernelRecord));
  for (size_t cut : {end_of_k1 + 24 + 40, end_of_k1 + 10, end_of_k1}) {
    INFO(cut);
    Trace t;
    lg::read_log_bytes(std::string_view(bytes).substr(0, cut), "cut.sclog", t);
    REQUIRE(t.kernels.size() == 2);
    CHECK(name_of(t, t.kernels[1].name) == "k1");
  }
  // The whole file (its zero-filled tail included) has all three.
  Trace whole;
  lg::read_log_bytes(bytes, "whole.sclog", whole);
  CHECK(whole.kernels.size() == 3);
  Trace cut;
  lg::read_log_bytes(std::string_view(bytes).substr(0, end_of_k1 + 24 + 40), "cut.sclog", cut);
  CHECK(meta(cut, "capture.process." + std::to_string(::getpid()) + ".notes").find("ends inside a record") !=
        std::string::npos);
}

TEST_CASE("log reader: a file that is not a log, or a record that lies, is refused with file and offset", "[input]") {
  TempDir dir;
  {
    LogWriter w;
    w.set_dir(dir.path);
    kernel(w, 100, "k0", 0, 3);
    memory(w, 101, MemoryOp::Alloc, 0x10, 4096, "libcublasLt.so.13");
  }
  const std::string good = slurp(dir.log_of(::getpid()));
  const size_t string_at = sizeof(FileHeader), kernel_at = string_at + 24;
  auto refused = [&](const std::string& bytes, uint64_t offset, const std::string& words) {
    Trace t;
    try {
      lg::read_log_bytes(bytes, "run/1234.sclog", t);
      FAIL("accepted: " << words);
    } catch (const InputError& e) {
      INFO(e.describe());
      CHECK(e.describe().find("run/1234.sclog: offset " + std::to_string(offset) + ": ") == 0);
      CHECK(e.describe().find(words) != std::string::npos);
    }
  };
  refused("{\"format\": \"snapdiff.snap\"}", 0, "not a snapcapture log");
  refused(good.substr(0, 20), 0, "not a snapcapture log");
  auto edit = [&](size_t at, const void* v, size_t n) {
    std::string b = good;
    std::memcpy(b.data() + at, v, n);
    return b;
  };
  const uint32_t v9 = 9;
  refused(edit(offsetof(FileHeader, version), &v9, 4), offsetof(FileHeader, version), "log version 9");
  const uint16_t type99 = 99;
  refused(edit(kernel_at, &type99, 2), kernel_at, "unknown record type 99");
  const uint32_t bytes16 = 16;
  refused(edit(kernel_at + 4, &bytes16, 4), kernel_at + 4, "has size 16, expected 64");
  const uint32_t bytes12 = 12;
  refused(edit(kernel_at + 4, &bytes12, 4), kernel_at + 4, "not a positive multiple of 8");
  const uint32_t undefined_id = 77;
  refused(edit(kernel_at + offsetof(KernelRecord, name), &undefined_id, 4), kernel_at + offsetof(KernelRecord, name),
          "string id 77 is not defined");
  const int32_t device = 1 << 24;
  refused(edit(kernel_at + offsetof(KernelRecord, device), &device, 4), kernel_at + offsetof(KernelRecord, device),
          "device 16777216 out of range");
  const uint32_t huge_string = 1u << 30;
  refused(edit(string_at + offsetof(StringRecord, length), &huge_string, 4), string_at + 4, "string record");
  // After the api's string (16 + 13 bytes, 32) and the library's (16 + 17, 40).
  const size_t memory_at = kernel_at + sizeof(KernelRecord) + 32 + 40;
  const uint16_t op9 = 9;
  refused(edit(memory_at + offsetof(MemoryRecord, op), &op9, 2), memory_at + offsetof(MemoryRecord, op),
          "unknown memory operation 9");

  const int64_t negative = -5;
  refused(edit(kernel_at + offsetof(KernelRecord, time_us), &negative, 8), kernel_at + offsetof(KernelRecord, time_us),
          "time -5 us out of range");

  // Any one byte changed: read, or refused with an InputError; never more.
  const size_t used = memory_at + sizeof(MemoryRecord) + 16;
  size_t read_back = 0, refused_n = 0;
  for (size_t at = 0; at < used && at < good.size(); ++at) {
    for (uint8_t v : {uint8_t(0x00), uint8_t(0xff), uint8_t(0x07)}) {
      std::string b = good.substr(0, used);
      b[at] = char(v);
      Trace t;
      try {
        lg::read_log_bytes(b, "flip.sclog", t);
        ++read_back;
        // What reads, writes as a .snap that reads back.
        const Trace back = load_trace_from_memory(write_snap_json(t), "flip.snap");
        CHECK(back.kernels.size() == t.kernels.size());
        CHECK(back.driver_memory.size() == t.driver_memory.size());
      } catch (const InputError& e) {
        CHECK(e.describe().find("flip.sclog: offset ") == 0);
        ++refused_n;
      }
    }
  }
  CHECK(read_back > 0);
  CHECK(refused_n > 0);

  // A file on disk: the error names it.
  const std::string bad = dir.path + "/bad.log";
  { std::ofstream(bad, std::ios::binary) << edit(kernel_at, &type99, 2); }
  try {
    lg::read_logs({bad});
    FAIL("accepted");
  } catch (const InputError& e) {
    CHECK(e.describe() == bad + ": offset " + std::to_string(kernel_at) + ": unknown record type 99");
  }
  // Unchanged, it reads; the cuBLAS library is the caller.
  const Trace t = lg::read_logs({dir.path});
  REQUIRE(t.driver_memory.size() == 1);
  CHECK(t.driver_memory[0].caller == MemoryCaller::Cublas);
  CHECK(t.kernels.at(0).device == 3);
}

TEST_CASE("log writer: a folder that cannot be written drops the records and says so", "[input]") {
  LogWriter w;
  w.set_dir("capture_log_test.no-such-folder/below");
  CHECK_FALSE(w.ensure_open());
  CHECK(w.failed());
  CHECK(w.intern("name") == 0);
  kernel(w, 1, "k");  // dropped, no crash
  CHECK(w.failed());
  struct stat st{};
  CHECK(::stat("capture_log_test.no-such-folder", &st) != 0);
}

namespace {
Trace recorded_trace(const TempDir& dir) {
  LogWriter w;
  w.set_dir(dir.path);
  const int64_t t0 = 1765000000000000;
  sample(w, t0, 139 * GiB, 140 * GiB, "start");
  memory(w, t0 + 10, MemoryOp::Alloc, 0x7f0000000000, 2 * MiB, "libc10_cuda.so");
  memory(w, t0 + 11, MemoryOp::AllocAsync, 0x7f1000000000, 3 * MiB, "libnccl.so.2");
  kernel(w, t0 + 20, "_Z6kernelPfi", 0x55aa);
  kernel(w, t0 + 22, "cudaGraphLaunch", 0x55aa, 0, LaunchApi::RuntimeGraph);
  memory(w, t0 + 30, MemoryOp::Create, 0, 20 * MiB, "", 0, 42);
  memory(w, t0 + 50, MemoryOp::Free, 0x7f0000000000, 0, "libc10_cuda.so");
  sample(w, t0 + 60, 120 * GiB, 140 * GiB, "exit");
  w.flush();
  return lg::read_logs({dir.path});
}
}  // namespace

TEST_CASE(".snap version 2 round-trips driver memory and the kernels' process columns", "[input]") {
  TempDir dir;
  const Trace a = recorded_trace(dir);
  REQUIRE(a.driver_memory.size() == 4);
  const std::string snap = write_snap_json(a);
  const auto j = nlohmann::json::parse(snap);
  CHECK(j["version"] == 2);
  CHECK(j["driver_memory"]["kind"][1] == "alloc_async");
  CHECK(j["driver_memory"]["caller"][1] == "nccl");
  CHECK(j["kernels"]["grid"][0] == nlohmann::json::array({128, 2, 1}));
  CHECK(j["kernels"]["graph"][1] == 1);
  CHECK(j["device_memory"]["pid"][0] == ::getpid());
  const Trace b = load_trace_from_memory(snap, "k.snap");
  REQUIRE(b.kernels.size() == a.kernels.size());
  for (size_t i = 0; i < a.kernels.size(); ++i) {
    INFO(i);
    const KernelLaunch &x = a.kernels[i], &y = b.kernels[i];
    CHECK(y.time_us == x.time_us);
    CHECK(name_of(b, y.name) == name_of(a, x.name));
    CHECK(y.stream == x.stream);
    CHECK(y.pid == x.pid);
    CHECK(y.thread == x.thread);
    CHECK(y.graph == x.graph);
    for (int d = 0; d < 3; ++d) {
      CHECK(y.grid[d] == x.grid[d]);
      CHECK(y.block[d] == x.block[d]);
    }
  }
  CHECK(name_of(b, b.kernels[0].name) == "kernel(float*, int)");
  REQUIRE(b.driver_memory.size() == a.driver_memory.size());
  for (size_t i = 0; i < a.driver_memory.size(); ++i) {
    INFO(i);
    const DriverMemoryEvent &x = a.driver_memory[i], &y = b.driver_memory[i];
    CHECK(y.device == x.device);
    CHECK(y.time_us == x.time_us);
    CHECK(y.pid == x.pid);
    CHECK(y.thread == x.thread);
    CHECK(y.kind == x.kind);
    CHECK(y.caller == x.caller);
    CHECK(y.addr == x.addr);
    CHECK(y.size == x.size);
    CHECK(y.handle == x.handle);
    CHECK(y.stream == x.stream);
    CHECK(name_of(b, y.api) == name_of(a, x.api));
    CHECK(name_of(b, y.library) == name_of(a, x.library));
  }
  REQUIRE(b.device_memory.size() == 2);
  CHECK(b.device_memory[1].pid == a.device_memory[1].pid);
  CHECK(b.device_memory[1].reserved_bytes == 0);
  CHECK(meta(b, "capture.processes") == std::to_string(::getpid()));
  // A second generation writes the same document.
  auto j1 = j, j2 = nlohmann::json::parse(write_snap_json(b));
  j1.erase("source");
  j2.erase("source");
  CHECK(j1 == j2);
}

TEST_CASE(".snap version rule: 1 unless version 2's fields are there; 3 is refused", "[input]") {
  // A pickle converted writes version 1, as before version 2 existed.
  const Trace p = load_trace(test::fixture("tiny_p4.pickle"));
  CHECK(nlohmann::json::parse(write_snap_json(p))["version"] == 1);
  // Kernels without the injection library's columns: still version 1, no new columns.
  Trace k = load_trace(test::fixture("tiny_p4.pickle"));
  KernelLaunch plain;
  plain.time_us = 5;
  plain.name = k.strings.intern("gemm");
  k.kernels.push_back(plain);
  auto jk = nlohmann::json::parse(write_snap_json(k));
  CHECK(jk["version"] == 1);
  CHECK_FALSE(jk["kernels"].contains("pid"));
  // One kernel with a thread id makes it version 2.
  k.kernels[0].thread = 9;
  CHECK(nlohmann::json::parse(write_snap_json(k))["version"] == 2);
  // Driver memory alone, too.
  Trace d = load_trace(test::fixture("tiny_p4.pickle"));
  DriverMemoryEvent e;
  e.time_us = 1;
  e.size = 4096;
  d.driver_memory.push_back(e);
  auto jd = nlohmann::json::parse(write_snap_json(d));
  CHECK(jd["version"] == 2);
  CHECK_FALSE(jd.contains("kernels"));
  CHECK(load_trace_from_memory(jd.dump(), "d.snap").driver_memory.size() == 1);
  jd["version"] = 3;
  try {
    load_trace_from_memory(jd.dump(), "new.snap");
    FAIL("accepted");
  } catch (const InputError& e2) {
    CHECK(e2.describe() == "new.snap: $.version: written by a newer snapdiff (.snap format version 3; this build "
                           "reads versions 1 to 2)");
  }
}

TEST_CASE("bad driver_memory and kernel process columns are refused with a JSON path", "[input]") {
  TempDir dir;
  const auto good = nlohmann::json::parse(write_snap_json(recorded_trace(dir)));
  auto refused = [&](const std::function<void(nlohmann::json&)>& edit, const std::string& path,
                     const std::string& words) {
    auto j = good;
    edit(j);
    try {
      load_trace_from_memory(j.dump(), "bad.snap");
      FAIL("accepted: " << path);
    } catch (const InputError& e) {
      INFO(e.describe());
      CHECK(e.describe().find("bad.snap: " + path + ": ") == 0);
      CHECK(e.describe().find(words) != std::string::npos);
    }
  };
  const size_t nstrings = good["strings"].size();
  refused([](nlohmann::json& j) { j["driver_memory"]["kind"][0] = "borrow"; }, "$.driver_memory.kind[0]",
          "expected one of alloc, free");
  refused([](nlohmann::json& j) { j["driver_memory"]["kind"][0] = 1; }, "$.driver_memory.kind[0]", "expected one of");
  refused([](nlohmann::json& j) { j["driver_memory"]["caller"][2] = "me"; }, "$.driver_memory.caller[2]",
          "expected one of unknown, pytorch");
  refused([&](nlohmann::json& j) { j["driver_memory"]["api"][1] = nstrings; }, "$.driver_memory.api[1]",
          "string index out of range");
  refused([](nlohmann::json& j) { j["driver_memory"]["size"][3] = uint64_t(1) << 51; }, "$.driver_memory.size[3]",
          "more than any device holds");
  refused([](nlohmann::json& j) { j["driver_memory"]["pid"][0] = uint64_t(1) << 33; }, "$.driver_memory.pid[0]",
          "out of range");
  refused([](nlohmann::json& j) { j["driver_memory"].erase("handle"); }, "$.driver_memory.handle", "missing");
  refused([](nlohmann::json& j) { j["driver_memory"]["count"] = 2; }, "$.driver_memory.device", "expected 2");
  refused([](nlohmann::json& j) { j["kernels"]["grid"][1] = nlohmann::json::array({1, 2}); }, "$.kernels.grid[1]",
          "expected [x, y, z]");
  refused([](nlohmann::json& j) { j["kernels"]["block"][0][2] = -1; }, "$.kernels.block[0][2]", "expected an integer");
  refused([](nlohmann::json& j) { j["kernels"]["graph"][0] = 2; }, "$.kernels.graph[0]", "expected 0 or 1");
  refused([](nlohmann::json& j) { j["kernels"].erase("thread"); }, "$.kernels.thread", "missing");
  refused([](nlohmann::json& j) { j["device_memory"]["pid"].push_back(1); }, "$.device_memory.pid",
          "has 3 entries, expected 2");
}

namespace {

// A kernel name of `levels` nested templates A<previous, previous>, each
// level a parameter of its own, spelled through back-references: about 12
// bytes a level, and a demangled text that doubles with each.
std::string nested_name(int levels) {
  auto seq = [](int i) {  // <seq-id> of substitution i: S_, S0_, ..., SZ_, S10_
    if (i == 0) return std::string("S_");
    std::string d;
    for (int k = i - 1;; k /= 36) {
      d.insert(d.begin(), "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"[k % 36]);
      if (k < 36) break;
    }
    return "S" + d + "_";
  };
  std::string n = "_Z6kernel1AI1BS0_E";  // candidates A (0), B (1), A<B, B> (2)
  for (int k = 2; k <= levels; ++k) n += "S_I" + seq(k) + seq(k) + "E";
  return n;
}

}  // namespace

TEST_CASE("kernel names: demangled when the bound allows, else kept mangled", "[input]") {
  // As before: mangled C++ demangled, anything else as it is.
  CHECK(lg::demangle_kernel_name("_ZN2at6native18elementwise_kernelILi128ELi2EEEviT_") ==
        "void at::native::elementwise_kernel<128, 2>(int, 128)");
  CHECK(lg::demangle_kernel_name("ncclDevKernel_AllReduce_Sum_f32_RING_LL") == "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  CHECK(lg::demangle_kernel_name("_Z") == "_Z");
  CHECK(lg::demangle_kernel_name("_Znot a name") == "_Znot a name");
  // The bound holds what __cxa_demangle prints, for kernels of every shape
  // (templates, lambdas in local scopes, packs, literals, expressions).
  for (const char* name : {
           "_ZN2at6native18elementwise_kernelILi128ELi2EEEviT_",
           "_Z6kernelIJifEEvDpT_",
           "_Z11flip_filterI6__halfS0_EvPT0_PKT_iiii",
           "_Z13gemmk1_kernelIidLi256ELi5ELb0ELb0ELb0ELb0E23cublasGemvTensorBatchedIKdES2_S0_IdEdLi0EEv18cublasGemmk1ParamsIT0_T7_T8_T9_T10_N8biasTypeINS8_10value_typeES9_E4typeEE",
           "_ZN8internal5gemvx6kernelIii13__nv_bfloat16S2_S2_fLb0ELb0ELb0ELb0ELi5ELb0E18cublasGemvParamsExIi23cublasGemvTensorBatchedIKS2_ES6_S4_IS2_EfEEENSt9enable_ifIXntT5_EvE4typeET11_",
           "_ZN2at6native29vectorized_elementwise_kernelILi4EZZZNS0_21compare_scalar_kernelIfEEvRNS_18TensorIteratorBaseENS0_50_GLOBAL__N__d2ba9fa4_23_CompareKernels_cu_6f4b2e5b6OpTypeET_ENKUlvE_clEvENKUlvE0_clEvEUlfE_NS_6detail5ArrayIPcLi2EEEEEviT0_T1_",
           "_ZN7cutlass6KernelINS_4gemm6kernel4GemmINS1_11threadblock12MmaPipelinedINS1_9GemmShapeILi128ELi128ELi8EEEEELb0EEEEEvNT_6ParamsE",
       }) {
    INFO(name);
    int status = 0;
    char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
    REQUIRE(status == 0);
    const std::optional<uint64_t> bound = lg::demangled_length_bound(name);
    REQUIRE(bound.has_value());
    CHECK(*bound >= std::strlen(d));
    CHECK(lg::demangle_kernel_name(name) == d);
    std::free(d);
  }
  // Each level doubles the text: 3 levels demangle (bound above the text),
  // 26 (1.1 GB of text) are kept mangled, found from the mangled name alone.
  const std::string small = nested_name(3);
  CHECK(lg::demangle_kernel_name(small) ==
        "kernel(A<B, B>, A<A<B, B>, A<B, B> >, A<A<A<B, B>, A<B, B> >, A<A<B, B>, A<B, B> > >)");
  for (int levels : {26, 200, 2000}) {
    INFO(levels);
    const std::string big = nested_name(levels);
    const std::optional<uint64_t> bound = lg::demangled_length_bound(big);
    CHECK((!bound || *bound > lg::kMaxDemangledBytes));
    CHECK(lg::demangle_kernel_name(big) == big);
  }
  // Nesting deeper than the bound's parser follows, and names past 64 KiB,
  // are kept without a deep recursion.
  const std::string deep = "_Z1f" + std::string(100000, 'P') + "i";
  CHECK(!lg::demangled_length_bound(deep));
  CHECK(lg::demangle_kernel_name(deep) == deep);
  const std::string deep_args = "_Z1f" + std::string(5000, 'I') + "i" + std::string(5000, 'E');
  CHECK(lg::demangle_kernel_name(deep_args) == deep_args);
  const std::string long_name = "_Z" + std::to_string(70000) + std::string(70000, 'a') + "v";
  CHECK(!lg::demangled_length_bound(long_name));
}

TEST_CASE("log reader: a kernel name that demangles past the bound keeps its mangled name", "[input]") {
  TempDir dir;
  const std::string big = nested_name(26);
  {
    LogWriter w;
    w.set_dir(dir.path);
    kernel(w, 100, big.c_str());
    kernel(w, 200, "_ZN2at6native18elementwise_kernelILi128ELi2EEEviT_");
  }
  const Trace t = lg::read_logs({dir.path});
  REQUIRE(t.kernels.size() == 2);
  CHECK(name_of(t, t.kernels[0].name) == big);
  CHECK(name_of(t, t.kernels[1].name) == "void at::native::elementwise_kernel<128, 2>(int, 128)");
}

TEST_CASE("log reader: a FIFO, a device or a log past --max-input-bytes is refused before it is read", "[input]") {
  TempDir dir;
  const std::string fifo = dir.path + "/7.sclog";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // No writer: opened without blocking, refused at once (it used to hang).
  try {
    lg::read_logs({fifo});
    FAIL("a FIFO was read");
  } catch (const InputError& e) {
    CHECK(e.describe() == fifo + ": not a snapcapture log: a FIFO, not a regular file");
  }
  // A folder holding it: the same error, naming the FIFO.
  try {
    lg::read_logs({dir.path});
    FAIL("a FIFO in a folder was read");
  } catch (const InputError& e) {
    CHECK(e.describe().find("7.sclog: not a snapcapture log: a FIFO") != std::string::npos);
  }
  ::unlink(fifo.c_str());
  try {
    lg::read_logs({"/dev/zero"});
    FAIL("/dev/zero was read");
  } catch (const InputError& e) {
    CHECK(e.describe() == "/dev/zero: not a snapcapture log: a character device, not a regular file");
  }
  {
    LogWriter w;
    w.set_dir(dir.path);
    for (int i = 0; i < 100; ++i) kernel(w, 100 + i, "k");
  }
  lg::ReadOptions small;
  small.max_input_bytes = 4096;
  try {
    lg::read_logs({dir.path}, small);
    FAIL("a log past --max-input-bytes was read");
  } catch (const InputError& e) {
    CHECK(e.describe().find("the logs hold more than --max-input-bytes 4096 bytes") != std::string::npos);
  }
  small.max_input_bytes = 64 << 20;
  CHECK(lg::read_logs({dir.path}, small).kernels.size() == 100);
}
