#include "cli/rank_map.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>

#include "cli/cli_util.hpp"
#include "cli/pair.hpp"
#include "input/memory_budget.hpp"

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

InputError unreadable_error(const RankFile& f) {
  InputError e("cannot read this rank: " + f.unreadable);
  e.set_file(f.path);
  return e;
}

uint64_t KeptViews::share(unsigned threads) const {
  if (bound_ == 0) return 0;
  const uint64_t taken = held_.load() + reserve();
  const uint64_t room = bound_ > taken ? bound_ - taken : 1;
  return std::max<uint64_t>(1, room / std::max(threads, 1u));
}

void KeptViews::keep(uint64_t bytes) {
  uint64_t held = held_.load();
  do {
    const uint64_t render = uint64_t(render_factor_) * std::max(largest_.load(), bytes);
    if (bound_ != 0 && held + bytes + render + detail::kFixedMemoryBytes > bound_)
      throw InputError("its report (about " + detail::memory_text(bytes) + "), those of the " +
                       std::to_string(views_.load()) + " ranks kept before it (" + detail::memory_text(held) +
                       ") and writing the report of the ranks (about " + detail::memory_text(render) +
                       ") need more than the limit of " + detail::memory_text(bound_) +
                       " of memory (raise the limit: --max-memory; fewer rows: -n)");
  } while (!held_.compare_exchange_weak(held, held + bytes));
  uint64_t largest = largest_.load();
  while (bytes > largest && !largest_.compare_exchange_weak(largest, bytes)) {
  }
  ++views_;
}

unsigned render_factor_of(const std::string& format) {
  return format == "json" ? 6 : format == "html" ? 4 : 2;
}

namespace {

uint64_t str_bytes(const std::string& s) { return s.capacity() > 15 ? s.capacity() + 1 : 0; }
uint64_t frame_bytes(const FrameRef& f) {
  return sizeof(FrameRef) + str_bytes(f.name) + str_bytes(f.file) + str_bytes(f.label);
}
uint64_t frames_bytes(const std::vector<FrameRef>& v) {
  uint64_t n = (v.capacity() - v.size()) * sizeof(FrameRef);
  for (const FrameRef& f : v) n += frame_bytes(f);
  return n;
}
uint64_t site_bytes(const SiteRow& r) {
  uint64_t n = sizeof(SiteRow) + str_bytes(r.category_name) + str_bytes(r.rule_name) + str_bytes(r.tensors) +
               str_bytes(r.site.callee) + frames_bytes(r.site.stack) + r.site.path.capacity() * sizeof(std::string);
  for (const std::string& p : r.site.path) n += str_bytes(p);
  if (r.site.user) n += frame_bytes(*r.site.user);
  return n;
}
uint64_t sites_bytes(const std::vector<SiteRow>& v) {
  uint64_t n = (v.capacity() - v.size()) * sizeof(SiteRow);
  for (const SiteRow& r : v) n += site_bytes(r);
  return n;
}
uint64_t ops_bytes(const std::vector<OpRow>& v) {
  uint64_t n = (v.capacity() - v.size()) * sizeof(OpRow);
  for (const OpRow& r : v)
    n += sizeof(OpRow) + str_bytes(r.op) + str_bytes(r.kernel) + str_bytes(r.other) + str_bytes(r.caller) +
         str_bytes(r.category_name) + frames_bytes(r.stack_frames) + (r.python_frame ? frame_bytes(*r.python_frame) : 0);
  return n;
}

}  // namespace

uint64_t view_memory_bytes(const Report& r) {
  // Rows and their strings; the rest of a view (findings, warnings, phases,
  // pools, the OOMs) counted per element at a generous size.
  constexpr uint64_t kElement = 512;
  uint64_t n = sizeof(Report) + (uint64_t(64) << 10) + str_bytes(r.input_name) +
               (r.warnings.size() + r.explain.size() + r.device_memory.size() + r.ooms.size()) * kElement;
  for (const OutsideDevice& o : r.outside) n += sizeof(o) + o.rows.size() * kElement + o.over_time.size() * (kElement + o.rows.size() * sizeof(int64_t));
  for (const DeviceView& d : r.devices) {
    n += sizeof(DeviceView) + sites_bytes(d.sites) + sites_bytes(d.unknown_sites) + ops_bytes(d.by_op) +
         ops_bytes(d.by_kernel) +
         (d.findings.size() + d.phases.size() + d.pools.size() + d.gradient_sizes.size() + d.categories.size() +
          d.growth.sites.size() + d.growth.starts.size()) *
             kElement;
  }
  return n + n / 4;  // the allocator's own overhead
}

void map_ranks(const std::vector<RankFile>& files, unsigned jobs, const LoadOptions& whole,
               const std::function<uint64_t(size_t, Trace&)>& work,
               const std::function<void(size_t, const InputError&)>& fail, unsigned render_factor) {
  const size_t n = files.size();
  const unsigned threads = unsigned(std::min<size_t>(std::max(jobs, 1u), std::max<size_t>(n, 1)));
  KeptViews kept(whole.max_memory_bytes, render_factor);
  std::vector<char> retry(n, 0);
  auto attempt = [&](size_t i, unsigned sharing, bool may_retry) {
    if (!files[i].unreadable.empty()) {
      fail(i, unreadable_error(files[i]));
      return;
    }
    LoadOptions lo = whole;
    lo.progress = nullptr;
    if (whole.max_memory_bytes != 0) lo.max_memory_bytes = kept.share(sharing);
    if (sharing > 1) lo.trace_reader_workers = 0, lo.pickle_read_ahead = 0;  // the ranks are the parallelism
    uint64_t bytes = 0;
    try {
      Trace t = load_trace(files[i].path, lo);
      bytes = work(i, t);
    } catch (InputError& e) {
      if (e.file().empty()) e.set_file(files[i].path);
      if (may_retry && refused_for_memory(e)) {
        retry[i] = 1;
        return;
      }
      fail(i, e);
      return;
    }
    try {
      kept.keep(bytes);
    } catch (InputError& e) {
      e.set_file(files[i].path);
      fail(i, e);
    }
  };
  run_pool(n, threads, [&](size_t i) { attempt(i, threads, threads > 1 && whole.max_memory_bytes != 0); });
  for (size_t i = 0; i < n; ++i)
    if (retry[i]) attempt(i, 1, false);
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
