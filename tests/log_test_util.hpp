// Hand-made injection-library logs for the tests (capture_log_test.cpp and
// the snapcapture_log_maker helper of capture_cli_test.sh): records filled
// as libsnapcapture_inject.so fills them, appended through LogWriter.
#pragma once

#include <cstdint>
#include <string>

#include "log_format.hpp"
#include "log_writer.hpp"

namespace test_log {

using namespace snapcapture::log;

inline void kernel(LogWriter& w, int64_t t, const char* name, uint64_t stream = 0, int device = 0,
                   LaunchApi api = LaunchApi::RuntimeLaunch, uint32_t thread = 7) {
  KernelRecord r{};
  r.time_us = t;
  r.stream = stream;
  r.thread = thread;
  r.device = device;
  r.name = w.intern_static(name);
  r.api = uint16_t(api);
  r.cbid = 211;
  r.grid[0] = 128;
  r.grid[1] = 2;
  r.grid[2] = 1;
  r.block[0] = 256;
  r.block[1] = 1;
  r.block[2] = 1;
  w.append(RecordType::Kernel, &r, sizeof r);
}

inline void memory(LogWriter& w, int64_t t, MemoryOp op, uint64_t addr, uint64_t size, const char* library,
                   int device = 0, uint64_t handle = 0, int32_t result = 0, const char* api = nullptr) {
  MemoryRecord r{};
  r.time_us = t;
  r.addr = addr;
  r.size = size;
  r.handle = handle;
  r.thread = 7;
  r.device = device;
  const char* default_api = op == MemoryOp::Alloc     ? "cuMemAlloc_v2"
                            : op == MemoryOp::Free    ? "cuMemFree_v2"
                            : op == MemoryOp::Create  ? "cuMemCreate"
                            : op == MemoryOp::Release ? "cuMemRelease"
                            : op == MemoryOp::Map     ? "cuMemMap"
                            : op == MemoryOp::Unmap   ? "cuMemUnmap"
                                                      : "cuMemAllocAsync";
  r.api = w.intern(api ? api : default_api);
  r.library = w.intern(library);
  r.op = uint16_t(op);
  r.result = result;
  w.append(RecordType::Memory, &r, sizeof r);
}

inline void sample(LogWriter& w, int64_t t, uint64_t free_bytes, uint64_t total_bytes, const char* label,
                   int device = 0) {
  SampleRecord r{};
  r.time_us = t;
  r.free_bytes = free_bytes;
  r.total_bytes = total_bytes;
  r.device = device;
  r.label = w.intern(label);
  w.append(RecordType::Sample, &r, sizeof r);
}

inline void note(LogWriter& w, int64_t t, const std::string& text) {
  NoteRecord r{};
  r.time_us = t;
  r.text = w.intern(text);
  w.append(RecordType::Note, &r, sizeof r);
}

inline void command(LogWriter& w, const std::string& text) {
  CommandRecord r{};
  r.text = w.intern(text);
  w.append(RecordType::Command, &r, sizeof r);
}

}  // namespace test_log
