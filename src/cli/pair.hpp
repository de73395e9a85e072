// Internal: two inputs read and analysed at once — `diff A B` and `check
// BASELINE CANDIDATE` — one on each of two threads, with the outcome of
// reading them one after the other: the same output, and when both fail,
// the error the one-after-the-other order meets first.
#pragma once

#include <boost/program_options.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "snapdiff/error.hpp"
#include "snapdiff/input/input.hpp"

namespace snapdiff::cli {

// Whether the two inputs are read on two threads: -j/--jobs when given (1:
// one after the other, as before; 2 or more: at once), otherwise whether
// the machine has two cores or more.
bool pair_in_parallel(const boost::program_options::variables_map& vm);

// The steps of one side (0: A, 1: B). A side calls step(k) before its step
// k (0, 1, ...): it returns false when the other side has already failed at
// a point the one-after-the-other order reaches first, and then the side
// stops (what it would do can no longer be reported).
class PairSide {
 public:
  virtual bool step(int k) = 0;

 protected:
  ~PairSide() = default;
};

// Runs side(0, s) and side(1, s), on two threads when `parallel` (side 1 on
// a new one), else one after the other. The order the result stands for is
// A's step 0, B's step 0, A's step 1, B's step 1, ...: when a side throws,
// the exception rethrown is the one that order meets first (A's, when both
// fail at the same step), after both sides have stopped. Nothing of a side
// runs past that point, so no output is half made.
void run_pair(bool parallel, const std::function<void(int side, PairSide& s)>& side);

// A read refused because it would need more memory than its share of the
// bound (its message says how to raise it, --max-memory).
bool refused_for_memory(const InputError& e);

// LoadOptions for one of two reads at once: no progress callback of its own
// (the pair shows one line for both), and no parser threads besides its own
// (the two reads are the parallelism).
LoadOptions pair_share(const LoadOptions& whole);

// load_input() for two reads at once: one line on stderr for both,
// "reading A and B: N%", when it is a terminal and the reads take more than
// a second (erased when both are done).
class PairProgress {
 public:
  PairProgress(const std::string& a, const std::string& b);
  ~PairProgress();
  PairProgress(const PairProgress&) = delete;
  PairProgress& operator=(const PairProgress&) = delete;
  // Reads input `side` (0: A, 1: B) with `opts` (its progress replaced).
  Trace load(int side, const std::string& path, LoadOptions opts);

 private:
  void update(int side, uint64_t done, uint64_t total);

  std::string line_;  // "snapdiff: reading A and B", escaped
  bool tty_;
  std::chrono::steady_clock::time_point start_;
  std::mutex m_;
  uint64_t done_[2] = {0, 0}, total_[2] = {0, 0};
  bool shown_ = false;
};

}  // namespace snapdiff::cli
