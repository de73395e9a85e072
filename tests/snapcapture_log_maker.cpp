// snapcapture_log_maker DIR [bad]: writes one injection-library log into DIR
// through LogWriter, as libsnapcapture_inject.so would in a process that
// launched two kernels and allocated 6 MiB (capture_cli_test.sh converts it).
// With `bad`, the last record gets a type no reader knows.
#include <cstring>
#include <string>

#include "log_test_util.hpp"

using namespace test_log;

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  LogWriter w;
  w.set_dir(argv[1]);
  if (!w.ensure_open()) return 1;
  constexpr uint64_t MiB = uint64_t(1) << 20, GiB = uint64_t(1) << 30;
  const int64_t t0 = LogWriter::now_us();
  command(w, "python train.py");
  sample(w, t0, 139 * GiB, 140 * GiB, "start");
  memory(w, t0 + 10, MemoryOp::Alloc, 0x7f0000000000, 6 * MiB, "libc10_cuda.so");
  kernel(w, t0 + 20, "_ZN2at6native18elementwise_kernelILi128ELi2EEEviT_", 0x55aa);
  memory(w, t0 + 25, MemoryOp::Alloc, 0x7f1000000000, 2 * MiB, "libnccl.so.2");
  kernel(w, t0 + 30, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 0x77);
  sample(w, t0 + 40, 130 * GiB, 140 * GiB, "exit");
  if (argc > 2 && std::strcmp(argv[2], "bad") == 0) {
    NoteRecord r{};
    r.time_us = t0 + 50;
    w.append(RecordType(42), &r, sizeof r);
  }
  w.flush();
  return w.failed() ? 1 : 0;
}
