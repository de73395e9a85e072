// Times load_trace() alone on one input: the reader's throughput without the
// analysis and output of `snapdiff report` (bench/bench_trace.sh runs both).
// Usage: snapdiff_read_bench FILE [RUNS] [WORKERS]
//   WORKERS: parser threads besides the reading one (default: chosen from
//   the machine and the input; 0: read and parse on one thread).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "snapdiff/error.hpp"
#include "snapdiff/input/input.hpp"

namespace {
double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE [RUNS] [WORKERS]\n", argv[0]);
    return 2;
  }
  const int runs = argc > 2 ? std::atoi(argv[2]) : 5;
  snapdiff::LoadOptions opts;
  if (argc > 3) opts.trace_reader_workers = std::atoi(argv[3]);
  std::vector<double> walls;
  try {
    for (int r = 0; r < runs; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      const double c0 = cpu_seconds();
      snapdiff::Trace t = snapdiff::load_trace(argv[1], opts);
      const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const double cpu = cpu_seconds() - c0;
      const double mb = double(t.source.decoded_bytes) / 1e6;
      walls.push_back(wall);
      std::printf("  read %d: %.3f s wall, %.3f s cpu, %.0f MB/s of JSON (%.0f MB, %zu events, %zu ops, %zu kernels)\n",
                  r + 1, wall, cpu, mb / wall, mb, t.event_count(), t.ops.size(), t.kernels.size());
      if (r + 1 == runs) {
        std::sort(walls.begin(), walls.end());
        std::printf("  read median: %.3f s wall, %.0f MB/s of JSON\n", walls[walls.size() / 2], mb / walls[walls.size() / 2]);
      }
    }
  } catch (const snapdiff::InputError& e) {
    std::fprintf(stderr, "error: %s\n", e.describe().c_str());
    return 3;
  }
  return 0;
}
