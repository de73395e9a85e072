// capture/inject/inject.cpp — libsnapcapture_inject.so: loaded by the CUDA
// driver into an unmodified program through CUDA_INJECTION64_PATH (the
// driver calls InitializeInjection() from cuInit), it subscribes to CUPTI's
// callback API and appends to the process's raw log (log_format.hpp):
//   - every kernel launch, from the runtime's and the driver's entry points
//     (a runtime launch that reaches the driver is recorded once), and every
//     CUDA graph launch;
//   - every device-memory call of the driver (and of the runtime, which
//     reaches the driver), with the shared object that called it;
//   - cuMemGetInfo for every context, at its creation, every
//     SNAPCAPTURE_INTERVAL_MS milliseconds (default 200; 0: never) from a
//     thread of its own, before a context is destroyed, and at exit.
// Environment: SNAPCAPTURE_LOG_DIR (the folder of the logs; without it
// nothing is recorded), SNAPCAPTURE_INTERVAL_MS. `snapcapture run` sets both.
//
// The library must never take the program down: no exceptions leave a
// callback, every CUDA and CUPTI result is checked and a failure drops the
// record, and when CUPTI already has a subscriber (a profiler) it says so
// once on stderr and records nothing.
#include <cuda.h>
#include <cupti.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "log_writer.hpp"
#include "util/terminal_text.hpp"

namespace {

// One line on the program's stderr, through the project's one escaper: the
// names in it (a folder, a subscriber's name) come from the environment.
void say(const std::string& message) {
  const std::string line = snapdiff::escape_for_terminal("snapcapture: " + message) + "\n";
  std::fputs(line.c_str(), stderr);
}

}  // namespace

namespace {

using snapcapture::log::ContextRecord;
using snapcapture::log::KernelRecord;
using snapcapture::log::LaunchApi;
using snapcapture::log::LogWriter;
using snapcapture::log::MemoryOp;
using snapcapture::log::MemoryRecord;
using snapcapture::log::NoteRecord;
using snapcapture::log::RecordType;
using snapcapture::log::SampleRecord;

// CUPTI and the driver, found at run time (dlopen/dlsym): the library links
// neither, so `snapcapture run` can preload it into every process it starts
// (LD_PRELOAD, for the interposers at the end of this file) without dragging
// them into programs that never touch CUDA.
struct Api {
  void* cupti = nullptr;
  decltype(&::cuptiSubscribe) subscribe = nullptr;
  decltype(&::cuptiSubscribe_v2) subscribe_v2 = nullptr;  // CUPTI 12.6+
  decltype(&::cuptiUnsubscribe) unsubscribe = nullptr;
  decltype(&::cuptiEnableCallback) enable_callback = nullptr;
  decltype(&::cuptiGetDeviceId) get_device_id = nullptr;
  decltype(&::cuptiGetResultString) result_string = nullptr;
  decltype(&::cuCtxGetCurrent) ctx_get_current = nullptr;
  decltype(&::cuCtxPushCurrent) ctx_push = nullptr;
  decltype(&::cuCtxPopCurrent) ctx_pop = nullptr;
  decltype(&::cuMemGetInfo) mem_get_info = nullptr;
};
Api g_api;

template <class F>
void bind(void* handle, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(handle, name));
}

// libcupti: SNAPCAPTURE_CUPTI when set; else the one the process already
// has (PyTorch loads its own), else the loader's search, else the toolkit's.
void* open_cupti() {
  if (const char* p = std::getenv("SNAPCAPTURE_CUPTI"); p != nullptr && *p != '\0') return dlopen(p, RTLD_NOW);
  static const char* const kNames[] = {"libcupti.so.13", "libcupti.so.12", "libcupti.so"};
  for (const char* n : kNames)
    if (void* h = dlopen(n, RTLD_NOW | RTLD_NOLOAD)) return h;
  for (const char* n : kNames)
    if (void* h = dlopen(n, RTLD_NOW)) return h;
  static const char* const kPaths[] = {"/usr/local/cuda/lib64/libcupti.so", "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so",
                                       "/usr/local/cuda/lib/libcupti.so"};
  for (const char* n : kPaths)
    if (void* h = dlopen(n, RTLD_NOW)) return h;
  return nullptr;
}

bool load_api() {
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (cuda == nullptr) cuda = dlopen("libcuda.so.1", RTLD_NOW);
  g_api.cupti = open_cupti();
  if (cuda == nullptr || g_api.cupti == nullptr) {
    say(std::string(cuda == nullptr ? "libcuda.so.1" : "libcupti") +
        " not found (set SNAPCAPTURE_CUPTI to libcupti's path): recording nothing");
    return false;
  }
  bind(g_api.cupti, "cuptiSubscribe", &g_api.subscribe);
  bind(g_api.cupti, "cuptiSubscribe_v2", &g_api.subscribe_v2);
  bind(g_api.cupti, "cuptiUnsubscribe", &g_api.unsubscribe);
  bind(g_api.cupti, "cuptiEnableCallback", &g_api.enable_callback);
  bind(g_api.cupti, "cuptiGetDeviceId", &g_api.get_device_id);
  bind(g_api.cupti, "cuptiGetResultString", &g_api.result_string);
  bind(cuda, "cuCtxGetCurrent", &g_api.ctx_get_current);
  bind(cuda, "cuCtxPushCurrent_v2", &g_api.ctx_push);
  bind(cuda, "cuCtxPopCurrent_v2", &g_api.ctx_pop);
  bind(cuda, "cuMemGetInfo_v2", &g_api.mem_get_info);
  const bool ok = g_api.subscribe != nullptr && g_api.unsubscribe != nullptr && g_api.enable_callback != nullptr &&
                  g_api.get_device_id != nullptr && g_api.ctx_get_current != nullptr && g_api.ctx_push != nullptr &&
                  g_api.ctx_pop != nullptr && g_api.mem_get_info != nullptr;
  if (!ok) say("libcupti or libcuda lacks a function it needs: recording nothing");
  return ok;
}

// Everything global is made on the heap and never destroyed: the program's
// static destructors may run before (or while) its last CUDA calls do.
LogWriter* g_log = nullptr;
CUpti_SubscriberHandle g_subscriber = nullptr;
std::atomic<bool> g_active{false};
int g_interval_ms = 200;

// Contexts seen, for the samples.
struct Contexts {
  std::mutex mu;
  std::vector<std::pair<CUcontext, int>> live;
};
Contexts* g_contexts = nullptr;

// The sampling thread.
struct Sampler {
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  bool wake = false;
  std::thread* thread = nullptr;
};
Sampler* g_sampler = nullptr;
pid_t g_sampler_pid = 0;  // the process that started it (a forked child has none)

thread_local uint32_t t_tid = 0;
thread_local int t_in_runtime_launch = 0;  // inside a runtime launch: its driver launch is the same kernel
thread_local int t_in_runtime_memory = 0;  // inside a runtime memory call
thread_local int t_in_own_call = 0;        // our own driver calls (samples)
thread_local CUcontext t_last_ctx = nullptr;
thread_local int t_last_device = -1;

uint32_t thread_id() {
  if (t_tid == 0) t_tid = uint32_t(syscall(SYS_gettid));
  return t_tid;
}

int device_of(CUcontext ctx) {
  if (ctx == nullptr && g_api.ctx_get_current(&ctx) != CUDA_SUCCESS) return -1;
  if (ctx == nullptr) return -1;
  if (ctx == t_last_ctx) return t_last_device;
  uint32_t id = 0;
  if (g_api.get_device_id(ctx, &id) != CUPTI_SUCCESS) return -1;
  t_last_ctx = ctx;
  t_last_device = int(id);
  return t_last_device;
}

// The kernel's name id: a per-thread cache by the pointer CUPTI gives,
// checked against the text (a module unloaded and another loaded may reuse
// an address).
using NameCache = std::unordered_map<const char*, std::pair<uint32_t, std::string>>;
thread_local NameCache* t_names = nullptr;  // ids of this process's log: cleared in a forked child

uint32_t kernel_name_id(const char* name) {
  if (name == nullptr || *name == '\0') return 0;
  if (t_names == nullptr) t_names = new NameCache();
  NameCache* cache = t_names;
  auto it = cache->find(name);
  if (it != cache->end() && it->second.second == name) return it->second.first;
  if (cache->size() > 8192) cache->clear();
  const uint32_t id = g_log->intern(name);
  (*cache)[name] = {id, std::string(name)};
  return id;
}

// The command line, from /proc/self/cmdline (arguments separated by spaces).
void command_line() {
  FILE* f = std::fopen("/proc/self/cmdline", "rb");
  if (f == nullptr) return;
  std::string cmd;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0 && cmd.size() < (1u << 16)) cmd.append(buf, n);
  std::fclose(f);
  while (!cmd.empty() && cmd.back() == '\0') cmd.pop_back();
  for (char& c : cmd)
    if (c == '\0') c = ' ';
  snapcapture::log::CommandRecord r{};
  r.text = g_log->intern(cmd);
  g_log->append(RecordType::Command, &r, sizeof r);
}

void note(const char* text) {
  NoteRecord r{};
  r.time_us = LogWriter::now_us();
  r.text = g_log->intern(text);
  g_log->append(RecordType::Note, &r, sizeof r);
}

// ---- kernels ---------------------------------------------------------------

void record_kernel(const CUpti_CallbackData* cb, LaunchApi api, CUpti_CallbackId cbid, uint64_t stream,
                   const unsigned grid[3], const unsigned block[3], uint32_t name) {
  KernelRecord r{};
  r.time_us = LogWriter::now_us();
  r.stream = stream;
  r.thread = thread_id();
  r.device = device_of(cb->context);
  r.name = name;
  r.api = uint16_t(api);
  r.cbid = uint16_t(cbid);
  for (int i = 0; i < 3; ++i) r.grid[i] = grid[i], r.block[i] = block[i];
  g_log->append(RecordType::Kernel, &r, sizeof r);
}

void on_runtime_launch(CUpti_CallbackId cbid, const CUpti_CallbackData* cb) {
  if (cb->callbackSite == CUPTI_API_EXIT) {
    if (t_in_runtime_launch > 0) --t_in_runtime_launch;
    return;
  }
  ++t_in_runtime_launch;
  unsigned grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};
  uint64_t stream = 0;
  LaunchApi api = LaunchApi::RuntimeLaunch;
  uint32_t name = 0;
  switch (cbid) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000: {
      // The cooperative and per-thread variants share this layout.
      auto* p = static_cast<const cudaLaunchKernel_v7000_params*>(cb->functionParams);
      grid[0] = p->gridDim.x, grid[1] = p->gridDim.y, grid[2] = p->gridDim.z;
      block[0] = p->blockDim.x, block[1] = p->blockDim.y, block[2] = p->blockDim.z;
      stream = uint64_t(reinterpret_cast<uintptr_t>(p->stream));
      name = kernel_name_id(cb->symbolName);
      break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060:
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060: {
      auto* p = static_cast<const cudaLaunchKernelExC_v11060_params*>(cb->functionParams);
      if (p->config != nullptr) {
        grid[0] = p->config->gridDim.x, grid[1] = p->config->gridDim.y, grid[2] = p->config->gridDim.z;
        block[0] = p->config->blockDim.x, block[1] = p->config->blockDim.y, block[2] = p->config->blockDim.z;
        stream = uint64_t(reinterpret_cast<uintptr_t>(p->config->stream));
      }
      name = kernel_name_id(cb->symbolName);
      break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000: {
      auto* p = static_cast<const cudaGraphLaunch_v10000_params*>(cb->functionParams);
      stream = uint64_t(reinterpret_cast<uintptr_t>(p->stream));
      api = LaunchApi::RuntimeGraph;
      name = g_log->intern("cudaGraphLaunch");
      break;
    }
    default: return;
  }
  record_kernel(cb, api, cbid, stream, grid, block, name);
}

void on_driver_launch(CUpti_CallbackId cbid, const CUpti_CallbackData* cb) {
  if (cb->callbackSite != CUPTI_API_ENTER || t_in_runtime_launch > 0) return;
  unsigned grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};
  uint64_t stream = 0;
  LaunchApi api = LaunchApi::DriverLaunch;
  uint32_t name = 0;
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz: {
      auto* p = static_cast<const cuLaunchKernel_params*>(cb->functionParams);
      grid[0] = p->gridDimX, grid[1] = p->gridDimY, grid[2] = p->gridDimZ;
      block[0] = p->blockDimX, block[1] = p->blockDimY, block[2] = p->blockDimZ;
      stream = uint64_t(reinterpret_cast<uintptr_t>(p->hStream));
      name = kernel_name_id(cb->symbolName);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz: {
      auto* p = static_cast<const cuLaunchKernelEx_params*>(cb->functionParams);
      if (p->config != nullptr) {
        grid[0] = p->config->gridDimX, grid[1] = p->config->gridDimY, grid[2] = p->config->gridDimZ;
        block[0] = p->config->blockDimX, block[1] = p->config->blockDimY, block[2] = p->config->blockDimZ;
        stream = uint64_t(reinterpret_cast<uintptr_t>(p->config->hStream));
      }
      name = kernel_name_id(cb->symbolName);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz: {
      auto* p = static_cast<const cuGraphLaunch_params*>(cb->functionParams);
      stream = uint64_t(reinterpret_cast<uintptr_t>(p->hStream));
      api = LaunchApi::DriverGraph;
      name = g_log->intern("cuGraphLaunch");
      break;
    }
    default: return;
  }
  record_kernel(cb, api, cbid, stream, grid, block, name);
}

// ---- device memory ---------------------------------------------------------

// Shared objects whose frames are the path from the caller to this callback.
bool infrastructure(const char* base) {
  static const char* const kSkip[] = {"libcuda.so", "libcupti.so", "libsnapcapture_inject.so", "libcudart.so",
                                      "libnvidia-"};
  for (const char* s : kSkip)
    if (std::strncmp(base, s, std::strlen(s)) == 0) return true;
  return false;
}

// The basename of the first shared object on the stack that is not the
// driver, CUPTI, the runtime or this library: who asked for the memory.
std::string caller_library() {
  void* frames[64];
  const int n = backtrace(frames, 64);
  for (int i = 0; i < n; ++i) {
    Dl_info info;
    if (dladdr(frames[i], &info) == 0 || info.dli_fname == nullptr) continue;
    const char* slash = std::strrchr(info.dli_fname, '/');
    const char* base = slash != nullptr ? slash + 1 : info.dli_fname;
    if (*base == '\0' || infrastructure(base)) continue;
    return base;
  }
  return "";
}

void record_memory(const CUpti_CallbackData* cb, MemoryOp op, uint64_t addr, uint64_t size, uint64_t handle,
                   uint64_t stream, int32_t result) {
  MemoryRecord r{};
  r.time_us = LogWriter::now_us();
  r.addr = addr;
  r.size = size;
  r.handle = handle;
  r.stream = stream;
  r.thread = thread_id();
  r.device = device_of(cb->context);
  r.api = g_log->intern(cb->functionName != nullptr ? cb->functionName : "");
  r.library = g_log->intern(caller_library());
  r.op = uint16_t(op);
  r.result = result;
  g_log->append(RecordType::Memory, &r, sizeof r);
}

uint64_t ptr_value(void* const* p) { return p != nullptr ? uint64_t(reinterpret_cast<uintptr_t>(*p)) : 0; }
uint64_t ptr_value(const CUdeviceptr* p) { return p != nullptr ? uint64_t(*p) : 0; }
uint64_t ptr_value(const void* p) { return uint64_t(reinterpret_cast<uintptr_t>(p)); }

void on_runtime_memory(CUpti_CallbackId cbid, const CUpti_CallbackData* cb) {
  if (cb->callbackSite == CUPTI_API_ENTER) {
    ++t_in_runtime_memory;
    return;
  }
  if (t_in_runtime_memory > 0) --t_in_runtime_memory;
  const int32_t result = cb->functionReturnValue != nullptr ? int32_t(*static_cast<const cudaError_t*>(cb->functionReturnValue)) : 0;
  const void* fp = cb->functionParams;
  switch (cbid) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020: {
      auto* p = static_cast<const cudaMalloc_v3020_params*>(fp);
      record_memory(cb, MemoryOp::Alloc, result == 0 ? ptr_value(p->devPtr) : 0, p->size, 0, 0, result);
      break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000: {
      auto* p = static_cast<const cudaMallocManaged_v6000_params*>(fp);
      record_memory(cb, MemoryOp::Alloc, result == 0 ? ptr_value(p->devPtr) : 0, p->size, 0, 0, result);
      break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocPitch_v3020: {
      auto* p = static_cast<const cudaMallocPitch_v3020_params*>(fp);
      const uint64_t pitch = p->pitch != nullptr && result == 0 ? uint64_t(*p->pitch) : uint64_t(p->width);
      record_memory(cb, MemoryOp::Alloc, result == 0 ? ptr_value(p->devPtr) : 0, pitch * p->height, 0, 0, result);
      break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020: {
      auto* p = static_cast<const cudaFree_v3020_params*>(fp);
      if (p->devPtr == nullptr) return;  // cudaFree(0): PyTorch's way of making the context
      record_memory(cb, MemoryOp::Free, ptr_value(static_cast<const void*>(p->devPtr)), 0, 0, 0, result);
      break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020: {
      auto* p = static_cast<const cudaMallocAsync_v11020_params*>(fp);
      record_memory(cb, MemoryOp::AllocAsync, result == 0 ? ptr_value(p->devPtr) : 0, p->size, 0,
                    ptr_value(static_cast<const void*>(p->hStream)), result);
      break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_ptsz_v11020: {
      auto* p = static_cast<const cudaMallocFromPoolAsync_v11020_params*>(fp);
      record_memory(cb, MemoryOp::AllocAsync, result == 0 ? ptr_value(p->ptr) : 0, p->size, 0,
                    ptr_value(static_cast<const void*>(p->stream)), result);
      break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_ptsz_v11020: {
      auto* p = static_cast<const cudaFreeAsync_v11020_params*>(fp);
      record_memory(cb, MemoryOp::FreeAsync, ptr_value(static_cast<const void*>(p->devPtr)), 0, 0,
                    ptr_value(static_cast<const void*>(p->hStream)), result);
      break;
    }
    default: break;
  }
}

void on_driver_memory(CUpti_CallbackId cbid, const CUpti_CallbackData* cb) {
  if (cb->callbackSite != CUPTI_API_EXIT || t_in_runtime_memory > 0 || t_in_own_call > 0) return;
  const int32_t result = cb->functionReturnValue != nullptr ? int32_t(*static_cast<const CUresult*>(cb->functionReturnValue)) : 0;
  const void* fp = cb->functionParams;
  const bool ok = result == 0;
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2: {
      auto* p = static_cast<const cuMemAlloc_v2_params*>(fp);
      record_memory(cb, MemoryOp::Alloc, ok ? ptr_value(p->dptr) : 0, p->bytesize, 0, 0, result);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged: {
      auto* p = static_cast<const cuMemAllocManaged_params*>(fp);
      record_memory(cb, MemoryOp::Alloc, ok ? ptr_value(p->dptr) : 0, p->bytesize, 0, 0, result);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2: {
      auto* p = static_cast<const cuMemAllocPitch_v2_params*>(fp);
      const uint64_t pitch = p->pPitch != nullptr && ok ? uint64_t(*p->pPitch) : uint64_t(p->WidthInBytes);
      record_memory(cb, MemoryOp::Alloc, ok ? ptr_value(p->dptr) : 0, pitch * p->Height, 0, 0, result);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2: {
      auto* p = static_cast<const cuMemFree_v2_params*>(fp);
      if (p->dptr == 0) return;
      record_memory(cb, MemoryOp::Free, uint64_t(p->dptr), 0, 0, 0, result);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz: {
      auto* p = static_cast<const cuMemAllocAsync_params*>(fp);
      record_memory(cb, MemoryOp::AllocAsync, ok ? ptr_value(p->dptr) : 0, p->bytesize, 0,
                    ptr_value(static_cast<const void*>(p->hStream)), result);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz: {
      auto* p = static_cast<const cuMemAllocFromPoolAsync_params*>(fp);
      record_memory(cb, MemoryOp::AllocAsync, ok ? ptr_value(p->dptr) : 0, p->bytesize, 0,
                    ptr_value(static_cast<const void*>(p->hStream)), result);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz: {
      auto* p = static_cast<const cuMemFreeAsync_params*>(fp);
      record_memory(cb, MemoryOp::FreeAsync, uint64_t(p->dptr), 0, 0, ptr_value(static_cast<const void*>(p->hStream)),
                    result);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemCreate: {
      auto* p = static_cast<const cuMemCreate_params*>(fp);
      record_memory(cb, MemoryOp::Create, 0, p->size, ok && p->handle != nullptr ? uint64_t(*p->handle) : 0, 0, result);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemRelease: {
      auto* p = static_cast<const cuMemRelease_params*>(fp);
      record_memory(cb, MemoryOp::Release, 0, 0, uint64_t(p->handle), 0, result);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemMap: {
      auto* p = static_cast<const cuMemMap_params*>(fp);
      record_memory(cb, MemoryOp::Map, uint64_t(p->ptr), p->size, uint64_t(p->handle), 0, result);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemUnmap: {
      auto* p = static_cast<const cuMemUnmap_params*>(fp);
      record_memory(cb, MemoryOp::Unmap, uint64_t(p->ptr), p->size, 0, 0, result);
      break;
    }
    default: break;
  }
}

// ---- samples ---------------------------------------------------------------

// cuMemGetInfo of one context, from whichever thread calls.
void sample(CUcontext ctx, int device, const char* label) {
  if (!g_active.load(std::memory_order_relaxed)) return;
  ++t_in_own_call;
  size_t free_b = 0, total_b = 0;
  bool ok = g_api.ctx_push(ctx) == CUDA_SUCCESS;
  if (ok) {
    ok = g_api.mem_get_info(&free_b, &total_b) == CUDA_SUCCESS;
    CUcontext popped = nullptr;
    g_api.ctx_pop(&popped);
  }
  --t_in_own_call;
  if (!ok) return;
  SampleRecord r{};
  r.time_us = LogWriter::now_us();
  r.free_bytes = free_b;
  r.total_bytes = total_b;
  r.device = device;
  r.label = g_log->intern(label);
  g_log->append(RecordType::Sample, &r, sizeof r);
}

void sample_all(const char* label) {
  std::vector<std::pair<CUcontext, int>> live;
  {
    std::lock_guard<std::mutex> g(g_contexts->mu);
    live = g_contexts->live;
  }
  for (auto& c : live) sample(c.first, c.second, label);
}

void sampler_main() {
  std::unique_lock<std::mutex> lk(g_sampler->mu);
  while (!g_sampler->stop) {
    g_sampler->cv.wait_for(lk, std::chrono::milliseconds(g_interval_ms), [] { return g_sampler->stop || g_sampler->wake; });
    if (g_sampler->stop) break;
    const bool woken = g_sampler->wake;
    g_sampler->wake = false;
    lk.unlock();
    sample_all(woken ? "context created" : "interval");
    lk.lock();
  }
}

void start_sampler() {
  if (g_interval_ms <= 0 || g_sampler->thread != nullptr) return;
  g_sampler_pid = getpid();
  g_sampler->thread = new std::thread(sampler_main);
}

void on_resource(CUpti_CallbackId cbid, const CUpti_ResourceData* rd) {
  if (rd == nullptr || rd->context == nullptr) return;
  ContextRecord r{};
  r.time_us = LogWriter::now_us();
  r.context = uint64_t(reinterpret_cast<uintptr_t>(rd->context));
  uint32_t dev = 0;
  r.device = g_api.get_device_id(rd->context, &dev) == CUPTI_SUCCESS ? int32_t(dev) : -1;
  if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED) {
    r.created = 1;
    g_log->append(RecordType::Context, &r, sizeof r);
    {
      std::lock_guard<std::mutex> g(g_contexts->mu);
      g_contexts->live.emplace_back(rd->context, r.device);
    }
    if (g_interval_ms > 0) {
      std::lock_guard<std::mutex> g(g_sampler->mu);
      if (g_sampler->thread == nullptr) start_sampler();
      g_sampler->wake = true;
      g_sampler->cv.notify_one();
    }
  } else if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) {
    sample(rd->context, r.device, "context destroyed");
    {
      std::lock_guard<std::mutex> g(g_contexts->mu);
      auto& v = g_contexts->live;
      for (size_t i = 0; i < v.size(); ++i)
        if (v[i].first == rd->context) {
          v.erase(v.begin() + long(i));
          break;
        }
    }
    r.created = 0;
    g_log->append(RecordType::Context, &r, sizeof r);
  }
}

void CUPTIAPI on_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  if (!g_active.load(std::memory_order_relaxed) || data == nullptr) return;
  try {
    if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
      on_resource(cbid, static_cast<const CUpti_ResourceData*>(data));
      return;
    }
    auto* cb = static_cast<const CUpti_CallbackData*>(data);
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
      switch (cbid) {
        case CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020:
        case CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000:
        case CUPTI_RUNTIME_TRACE_CBID_cudaMallocPitch_v3020:
        case CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020:
        case CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020:
        case CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020:
        case CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020:
        case CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_ptsz_v11020:
        case CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020:
        case CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_ptsz_v11020: on_runtime_memory(cbid, cb); break;
        default: on_runtime_launch(cbid, cb); break;
      }
    } else if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
      switch (cbid) {
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz:
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
        case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch:
        case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz: on_driver_launch(cbid, cb); break;
        default: on_driver_memory(cbid, cb); break;
      }
    }
  } catch (...) {
    // A record lost (out of memory in the string table): never the program.
  }
}

constexpr CUpti_CallbackId kRuntimeIds[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocPitch_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_ptsz_v11020,
    CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020,
    CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_ptsz_v11020,
};
constexpr CUpti_CallbackId kDriverIds[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemCreate,
    CUPTI_DRIVER_TRACE_CBID_cuMemRelease,
    CUPTI_DRIVER_TRACE_CBID_cuMemMap,
    CUPTI_DRIVER_TRACE_CBID_cuMemUnmap,
};

void at_exit() {
  if (!g_active.load()) return;
  if (g_sampler != nullptr && g_sampler->thread != nullptr && g_sampler_pid == getpid()) {
    {
      std::lock_guard<std::mutex> g(g_sampler->mu);
      g_sampler->stop = true;
      g_sampler->cv.notify_one();
    }
    g_sampler->thread->join();
  }
  try {
    sample_all("exit");
  } catch (...) {
  }
  g_active.store(false);
  g_log->flush();
}

// fork(): the writer's lock is taken across it, so the child never inherits
// it held; the child forgets the parent's log, contexts and sampler.
void before_fork() {
  if (g_log != nullptr) g_log->lock();
}
void after_fork_parent() {
  if (g_log != nullptr) g_log->unlock();
}
void after_fork_child() {
  if (g_log == nullptr) return;
  g_log->reset_after_fork();
  g_log->unlock();
  // The forking thread is the child's only one: its thread id and the
  // string ids it cached belong to the parent.
  t_tid = 0;
  if (t_names != nullptr) t_names->clear();
  // CUDA cannot be used in the child of a process that initialized it; its
  // own samples would be of contexts it does not have.
  if (g_contexts != nullptr) {
    new (&g_contexts->mu) std::mutex();
    g_contexts->live.clear();
  }
  if (g_sampler != nullptr) {
    new (&g_sampler->mu) std::mutex();
    g_sampler->thread = nullptr;  // (the parent's thread object; not ours to join)
    g_sampler->stop = false;
    g_sampler->wake = false;
  }
}

bool fail(const char* what, CUptiResult r) {
  const char* msg = nullptr;
  if (g_api.result_string != nullptr) g_api.result_string(r, &msg);
  say(std::string(what) + " failed (" + (msg != nullptr ? msg : "?") + "): recording nothing");
  return false;
}

bool subscribe() {
  char old_name[256] = {0};
  CUpti_SubscriberParams params{};
  params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
  params.subscriberName = "snapcapture";
  params.oldSubscriberName = old_name;
  params.oldSubscriberSize = sizeof old_name;
  CUptiResult r = g_api.subscribe_v2 != nullptr ? g_api.subscribe_v2(&g_subscriber, on_callback, nullptr, &params)
                                                 : g_api.subscribe(&g_subscriber, on_callback, nullptr);
  if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    old_name[sizeof old_name - 1] = '\0';
    say(std::string("CUPTI already has a subscriber (") + (old_name[0] != '\0' ? old_name : "unnamed") +
        "; a profiler?): recording nothing, so as not to break it");
    if (g_log->ensure_open()) note("CUPTI already had a subscriber: nothing recorded");
    return false;
  }
  if (r != CUPTI_SUCCESS) return fail("cuptiSubscribe", r);
  for (CUpti_CallbackId id : kRuntimeIds)
    if ((r = g_api.enable_callback(1, g_subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, id)) != CUPTI_SUCCESS)
      return fail("cuptiEnableCallback", r);
  for (CUpti_CallbackId id : kDriverIds)
    if ((r = g_api.enable_callback(1, g_subscriber, CUPTI_CB_DOMAIN_DRIVER_API, id)) != CUPTI_SUCCESS)
      return fail("cuptiEnableCallback", r);
  for (CUpti_CallbackId id : {CUpti_CallbackId(CUPTI_CBID_RESOURCE_CONTEXT_CREATED),
                              CUpti_CallbackId(CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING)})
    if ((r = g_api.enable_callback(1, g_subscriber, CUPTI_CB_DOMAIN_RESOURCE, id)) != CUPTI_SUCCESS)
      return fail("cuptiEnableCallback", r);
  return true;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  static std::atomic<bool> once{false};
  if (once.exchange(true)) return 1;
  try {
    const char* dir = std::getenv("SNAPCAPTURE_LOG_DIR");
    if (dir == nullptr || *dir == '\0') {
      say("SNAPCAPTURE_LOG_DIR is not set: recording nothing (use snapcapture run)");
      return 1;
    }
    if (const char* iv = std::getenv("SNAPCAPTURE_INTERVAL_MS")) g_interval_ms = std::atoi(iv);
    g_log = new LogWriter();
    g_log->set_dir(dir);
    if (!g_log->ensure_open()) {
      say(std::string("cannot write a log in ") + dir + ": recording nothing");
      return 1;
    }
    command_line();
    if (!load_api()) return 1;
    g_contexts = new Contexts();
    g_sampler = new Sampler();
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
    if (!subscribe()) return 1;
    g_active.store(true);
    std::atexit(at_exit);
  } catch (...) {
    g_active.store(false);
  }
  return 1;
}

// ---- stepping aside for a profiler ------------------------------------------
// CUPTI takes one subscriber. `snapcapture run` preloads this library, so a
// profiler's cuptiSubscribe (torch.profiler's Kineto, Nsight) comes here
// first: the recording stops (what it holds so far is kept, with a note of
// when), this library unsubscribes, and the profiler's call goes on to CUPTI
// and succeeds. Without the preload (CUDA_INJECTION64_PATH alone) the
// profiler's subscription fails instead: docs/capture.md says so.
namespace {

std::atomic<bool> g_stepped_aside{false};

void step_aside() {
  if (!g_active.exchange(false)) return;
  if (g_stepped_aside.exchange(true)) return;
  if (g_api.unsubscribe != nullptr && g_subscriber != nullptr) g_api.unsubscribe(g_subscriber);
  g_subscriber = nullptr;
  say("a profiler subscribed to CUPTI: recording stops here, so as not to break it");
  try {
    note("a profiler subscribed to CUPTI: nothing recorded after this moment");
    g_log->flush();
  } catch (...) {
  }
}

template <class F>
F next_symbol(F loaded, const char* name) {
  if (loaded != nullptr) return loaded;
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

}  // namespace

extern "C" __attribute__((visibility("default"))) CUptiResult CUPTIAPI
cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback, void* userdata) {
  step_aside();
  auto real = next_symbol(g_api.subscribe, "cuptiSubscribe");
  return real != nullptr ? real(subscriber, callback, userdata) : CUPTI_ERROR_NOT_INITIALIZED;
}

extern "C" __attribute__((visibility("default"))) CUptiResult CUPTIAPI
cuptiSubscribe_v2(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback, void* userdata,
                  CUpti_SubscriberParams* params) {
  step_aside();
  auto real = next_symbol(g_api.subscribe_v2, "cuptiSubscribe_v2");
  return real != nullptr ? real(subscriber, callback, userdata, params) : CUPTI_ERROR_NOT_INITIALIZED;
}
