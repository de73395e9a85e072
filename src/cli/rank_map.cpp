#include "cli/rank_map.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>

#include "cli/cli_util.hpp"
#include "cli/pair.hpp"

namespace snapdiff::cli {

namespace {

// Runs body(i) for i in [0, n) on `threads` threads; the first exception
// other than an InputError stops the handing out of work and is rethrown.
void run_pool(size_t n, unsigned threads, const std::function<void(size_t)>& body) {
  std::atomic<size_t> next{0};
  std::atomic<bool> stop{false};
  std::exception_ptr failure;
  std::mutex m;
  auto worker = [&] {
    for (;;) {
      if (stop.load()) return;
      const size_t i = next.fetch_add(1);
      if (i >= n) return;
      try {
        body(i);
      } catch (...) {
        std::lock_guard<std::mutex> g(m);
        if (!failure) failure = std::current_exception();
        stop = true;
      }
    }
  };
  threads = unsigned(std::min<size_t>(std::max(threads, 1u), n));
  if (threads <= 1) {
    worker();
  } else {
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t) pool.emplace_back(worker);
    for (std::thread& t : pool) t.join();
  }
  if (failure) std::rethrow_exception(failure);
}

}  // namespace

unsigned jobs_arg(const boost::program_options::variables_map& vm) {
  if (!vm.count("jobs")) return std::max(1u, std::thread::hardware_concurrency());
  const uint64_t j = count_arg(vm, "jobs", "-j/--jobs", 1024);
  if (j == 0) throw UsageError("-j/--jobs must be at least 1");
  return unsigned(j);
}

void map_ranks(const std::vector<std::string>& paths, unsigned jobs, const LoadOptions& whole,
               const std::function<void(size_t, Trace&)>& work,
               const std::function<void(size_t, const InputError&)>& fail) {
  const unsigned threads = unsigned(std::min<size_t>(std::max(jobs, 1u), std::max<size_t>(paths.size(), 1)));
  LoadOptions share = whole;
  share.progress = nullptr;
  if (threads > 1) {
    share.max_memory_bytes = whole.max_memory_bytes / threads;
    share.trace_reader_workers = 0;  // the ranks are the parallelism
  }
  std::vector<char> retry(paths.size(), 0);
  auto attempt = [&](size_t i, const LoadOptions& lo, bool may_retry) {
    try {
      Trace t = load_trace(paths[i], lo);
      work(i, t);
    } catch (InputError& e) {
      if (e.file().empty()) e.set_file(paths[i]);
      if (may_retry && refused_for_memory(e)) {
        retry[i] = 1;
        return;
      }
      fail(i, e);
    }
  };
  run_pool(paths.size(), threads, [&](size_t i) { attempt(i, share, threads > 1 && share.max_memory_bytes != 0); });
  LoadOptions alone = whole;
  alone.progress = nullptr;
  for (size_t i = 0; i < paths.size(); ++i)
    if (retry[i]) attempt(i, alone, false);
}

void map_indices(size_t n, unsigned jobs, const std::function<void(size_t)>& work,
                 const std::function<void(size_t, const InputError&)>& fail) {
  run_pool(n, jobs, [&](size_t i) {
    try {
      work(i);
    } catch (const InputError& e) {
      fail(i, e);
    }
  });
}

}  // namespace snapdiff::cli
