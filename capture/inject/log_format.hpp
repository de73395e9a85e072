// capture/inject/log_format.hpp — the raw log libsnapcapture_inject.so writes
// while the program runs, one file per process (`<dir>/<pid>.sclog`), and
// `snapcapture run` turns into a .snap when the program has exited
// (capture/inject/log_reader.cpp). Plain C++, no CUDA: the writer and the
// reader are built and tested everywhere.
//
// The file is a header and then records, each 8-byte aligned, each starting
// with RecordHead. The writer maps the file and grows it in zero-filled
// chunks, so a process that ends without running its exit handlers
// (os._exit, a signal) leaves every record it finished: the reader stops at
// the first record whose type is 0 (the unwritten tail) or whose size does
// not fit. Integers are the writer's native byte order (little-endian on
// every machine CUDA runs on; the header's magic tells).
#pragma once

#include <cstdint>

namespace snapcapture::log {

constexpr char kMagic[8] = {'S', 'C', 'A', 'P', 'L', 'O', 'G', '1'};
constexpr uint32_t kVersion = 1;
constexpr const char* kFileSuffix = ".sclog";

struct FileHeader {
  char magic[8];
  uint32_t version;
  uint32_t pid;
  uint32_t ppid;
  uint32_t header_bytes;     // sizeof(FileHeader) as written
  int64_t start_us;          // CLOCK_REALTIME microseconds when the log was opened
};

enum class RecordType : uint16_t {
  End = 0,          // never written: the zero-filled tail
  String = 1,       // StringRecord + `bytes` chars (not NUL-terminated)
  Kernel = 2,       // KernelRecord
  Memory = 3,       // MemoryRecord
  Sample = 4,       // SampleRecord
  Context = 5,      // ContextRecord
  Note = 6,         // NoteRecord: a string id of a message (subscriber refused, ...)
  Command = 7,      // CommandRecord: a string id of the command line
};

struct RecordHead {
  uint16_t type;     // RecordType
  uint16_t reserved;
  uint32_t bytes;    // the whole record, head included, a multiple of 8
};

// Strings are interned by the writer: ids start at 1; 0 is "".
struct StringRecord {
  RecordHead head;
  uint32_t id;
  uint32_t length;   // bytes that follow
};

// How a kernel reached the GPU.
enum class LaunchApi : uint16_t {
  Unknown = 0,
  RuntimeLaunch = 1,     // cudaLaunchKernel, cudaLaunchKernelExC, cudaLaunchCooperativeKernel (and _ptsz)
  DriverLaunch = 2,      // cuLaunchKernel, cuLaunchKernelEx, cuLaunchCooperativeKernel (and _ptsz)
  RuntimeGraph = 3,      // cudaGraphLaunch
  DriverGraph = 4,       // cuGraphLaunch
};

struct KernelRecord {
  RecordHead head;
  int64_t time_us;       // CLOCK_REALTIME microseconds at the call's entry
  uint64_t stream;       // the stream handle's value (0: the legacy default stream)
  uint32_t thread;       // OS thread id
  int32_t device;        // CUDA device ordinal (-1: unknown)
  uint32_t name;         // string id: the symbol name as the API gave it (mangled)
  uint16_t api;          // LaunchApi
  uint16_t cbid;         // CUPTI callback id (for reference)
  uint32_t grid[3];
  uint32_t block[3];
};

enum class MemoryOp : uint16_t {
  Alloc = 1,        // cuMemAlloc_v2, cuMemAllocPitch_v2, cuMemAllocManaged; cudaMalloc, cudaMallocPitch, cudaMallocManaged
  Free = 2,         // cuMemFree_v2, cudaFree
  AllocAsync = 3,   // cuMemAllocAsync, cuMemAllocFromPoolAsync, cudaMallocAsync, cudaMallocFromPoolAsync
  FreeAsync = 4,    // cuMemFreeAsync, cudaFreeAsync
  Create = 5,       // cuMemCreate
  Release = 6,      // cuMemRelease
  Map = 7,          // cuMemMap
  Unmap = 8,        // cuMemUnmap
};

struct MemoryRecord {
  RecordHead head;
  int64_t time_us;       // CLOCK_REALTIME microseconds when the call returned
  uint64_t addr;         // device pointer (0 when the op has none)
  uint64_t size;         // bytes asked for (Alloc/Create/Map/Unmap/AllocAsync); 0 for frees
  uint64_t handle;       // physical allocation handle (Create/Release/Map)
  uint64_t stream;       // *Async
  uint32_t thread;
  int32_t device;        // -1: unknown
  uint32_t api;          // string id of the API's name ("cuMemAlloc_v2")
  uint32_t library;      // string id of the caller's shared object, basename ("libnccl.so.2"; 0: not found)
  uint16_t op;           // MemoryOp
  uint16_t reserved;
  int32_t result;        // CUresult / cudaError_t of the call (0: success; failures are recorded too)
};

struct SampleRecord {
  RecordHead head;
  int64_t time_us;
  uint64_t free_bytes;
  uint64_t total_bytes;
  int32_t device;
  uint32_t label;        // string id: "start", "interval", "exit", ...
};

struct ContextRecord {
  RecordHead head;
  int64_t time_us;
  uint64_t context;
  int32_t device;
  uint32_t created;      // 1 created, 0 destroyed
};

struct NoteRecord {
  RecordHead head;
  int64_t time_us;
  uint32_t text;         // string id
  uint32_t reserved;
};

struct CommandRecord {
  RecordHead head;
  uint32_t text;         // string id: the command line, arguments separated by spaces
  uint32_t reserved;
};

constexpr uint32_t round8(uint32_t n) { return (n + 7u) & ~7u; }

static_assert(sizeof(FileHeader) % 8 == 0);
static_assert(sizeof(KernelRecord) % 8 == 0);
static_assert(sizeof(MemoryRecord) % 8 == 0);
static_assert(sizeof(SampleRecord) % 8 == 0);
static_assert(sizeof(ContextRecord) % 8 == 0);
static_assert(sizeof(NoteRecord) % 8 == 0);
static_assert(sizeof(CommandRecord) % 8 == 0);

}  // namespace snapcapture::log
