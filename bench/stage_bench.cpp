// Times each stage of `snapdiff report --format json` on one input: the load,
// the analysis, the report view and the JSON text, so a change can be judged
// by the stage it targets (bench/bench_report.sh times the whole command).
// Usage: snapdiff_stage_bench FILE [RUNS] [THREADS]
//   THREADS: the analysis's threads per device (ReportOptions::threads; default 2)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "snapdiff/analysis/analysis.hpp"
#include "snapdiff/error.hpp"
#include "snapdiff/input/input.hpp"
#include "snapdiff/report/report.hpp"

namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE [RUNS] [THREADS]\n", argv[0]);
    return 2;
  }
  const int runs = argc > 2 ? std::max(1, std::atoi(argv[2])) : 5;
  const int threads = argc > 3 ? std::max(1, std::atoi(argv[3])) : 2;
  std::vector<double> load, analysis, view, json, release, total;
  try {
    for (int i = 0; i < runs; ++i) {
      const auto t0 = Clock::now();
      auto held = std::make_unique<snapdiff::Trace>(snapdiff::load_trace(argv[1]));
      snapdiff::Trace& t = *held;
      load.push_back(since(t0));
      auto t1 = Clock::now();
      snapdiff::ReportOptions ro;
      ro.input_name = argv[1];
      ro.threads = threads;
      auto analysed = std::make_unique<snapdiff::Analysis>(snapdiff::analyze(t, ro));
      const snapdiff::Analysis& a = *analysed;
      analysis.push_back(since(t1));
      t1 = Clock::now();
      const snapdiff::Report r = snapdiff::report_view(a);
      view.push_back(since(t1));
      t1 = Clock::now();
      const std::string text = snapdiff::render_json(r);
      json.push_back(since(t1));
      const size_t events = t.event_count();
      // What the process pays at exit: the trace and the analysis released.
      t1 = Clock::now();
      analysed.reset();
      held.reset();
      release.push_back(since(t1));
      total.push_back(since(t0));
      std::printf("run %d: load %.3f  analyze %.3f  view %.3f  json %.3f  release %.3f  total %.3f s (%zu events, %zu bytes)\n",
                  i + 1, load.back(), analysis.back(), view.back(), json.back(), release.back(), total.back(), events,
                  text.size());
    }
  } catch (const snapdiff::InputError& e) {
    std::fprintf(stderr, "error: %s\n", e.describe().c_str());
    return 3;
  }
  std::printf("median: load %.3f  analyze %.3f  view %.3f  json %.3f  release %.3f  total %.3f s\n", median(load),
              median(analysis), median(view), median(json), median(release), median(total));
  return 0;
}
