#include "cli/pair.hpp"

#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdio>
#include <exception>
#include <string_view>
#include <thread>

#include "cli/cli_util.hpp"
#include "cli/rank_map.hpp"

namespace snapdiff::cli {

bool pair_in_parallel(const boost::program_options::variables_map& vm) {
  if (vm.count("jobs")) return jobs_arg(vm) >= 2;
  return std::thread::hardware_concurrency() >= 2;
}

namespace {

// Where a side failed, in the one-after-the-other order: A's step k is 2k,
// B's 2k + 1.
int order_of(int side, int k) { return 2 * k + side; }

class Side final : public PairSide {
 public:
  Side(int side, std::atomic<int>& first_failure) : side_(side), first_failure_(first_failure) {}
  bool step(int k) override {
    at_ = order_of(side_, k);
    return at_ < first_failure_.load();
  }
  void run(const std::function<void(int, PairSide&)>& body) {
    try {
      body(side_, *this);
    } catch (...) {
      error_ = std::current_exception();
      // Lower the shared mark to this failure's place, unless one earlier is there.
      int seen = first_failure_.load();
      while (at_ < seen && !first_failure_.compare_exchange_weak(seen, at_)) {
      }
    }
  }
  int at() const { return at_; }
  const std::exception_ptr& error() const { return error_; }

 private:
  int side_;
  int at_ = -1;  // the place of the step running (before the first step(): nothing to fail in)
  std::atomic<int>& first_failure_;
  std::exception_ptr error_;
};

}  // namespace

void run_pair(bool parallel, const std::function<void(int side, PairSide& s)>& body) {
  std::atomic<int> first_failure{INT_MAX};
  Side a(0, first_failure), b(1, first_failure);
  if (parallel) {
    std::thread other([&] { b.run(body); });
    a.run(body);
    other.join();
  } else {
    a.run(body);
    b.run(body);
  }
  // The failure met first; a side that stopped at step() did not fail.
  const Side* failed = nullptr;
  for (const Side* s : {&a, &b})
    if (s->error() && (!failed || s->at() < failed->at())) failed = s;
  if (failed) std::rethrow_exception(failed->error());
}

bool refused_for_memory(const InputError& e) {
  // Every refusal for memory says how to raise the bound (source.cpp,
  // load.cpp, memory_budget.cpp): the one phrase they share.
  return std::string_view(e.what()).find("--max-memory") != std::string_view::npos;
}

LoadOptions pair_share(const LoadOptions& whole) {
  LoadOptions o = whole;
  o.progress = nullptr;
  o.trace_reader_workers = 0;
  o.pickle_read_ahead = 0;  // measured: two reads at once and their readers on two cores are slower
  return o;
}

PairProgress::PairProgress(const std::string& a, const std::string& b)
    : line_("snapdiff: reading " + escape_for_terminal(a) + " and " + escape_for_terminal(b)),
      tty_(::isatty(2) != 0),
      start_(std::chrono::steady_clock::now()) {}

PairProgress::~PairProgress() {
  if (shown_) std::fprintf(stderr, "\r\033[K");
}

void PairProgress::update(int side, uint64_t done, uint64_t total) {
  if (!tty_) return;
  std::lock_guard<std::mutex> g(m_);
  done_[side] = done;
  total_[side] = total;
  if (std::chrono::steady_clock::now() - start_ < std::chrono::seconds(1)) return;
  // Each read's share, averaged: a read whose size is not known yet counts as not begun.
  double part = 0;
  for (int s = 0; s < 2; ++s)
    if (total_[s]) part += double(done_[s]) / double(total_[s]) / 2;
  std::fprintf(stderr, "\r%s: %3d%%", line_.c_str(), int(100 * part));
  shown_ = true;
}

Trace PairProgress::load(int side, const std::string& path, LoadOptions opts) {
  opts.progress = [this, side](uint64_t d, uint64_t t) { update(side, d, t); };
  mark_reading(path);
  Trace t = load_trace(path, opts);
  std::lock_guard<std::mutex> g(m_);
  done_[side] = total_[side] = 1;
  return t;
}

}  // namespace snapdiff::cli
