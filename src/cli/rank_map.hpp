// Internal: the map over ranks — reading many per-rank inputs on several
// threads within one memory bound, each summarized and released before the
// next is read on its thread (docs/ranks.md, "Memory and threads").
#pragma once

#include <atomic>
#include <boost/program_options.hpp>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "snapdiff/error.hpp"
#include "snapdiff/input/input.hpp"
#include "snapdiff/input/ranks.hpp"
#include "snapdiff/model/model.hpp"
#include "snapdiff/view/report.hpp"

namespace snapdiff::cli {

// -j/--jobs N: 1 to 1024; the machine's cores when not given.
unsigned jobs_arg(const boost::program_options::variables_map& vm);

// The views a map keeps (one per rank) count against the memory bound: the
// room each read has is the bound less what the views kept so far hold.
// Writing the report at the end takes memory too: the worst rank against
// the median one and the shown rank's full report, about `render_factor`
// times the largest view (render_factor_of() per format), held back from
// the start.
class KeptViews {
 public:
  explicit KeptViews(uint64_t bound, unsigned render_factor = 0) : bound_(bound), render_factor_(render_factor) {}
  // The memory a read may use now, shared by `threads` (0: unbounded).
  uint64_t share(unsigned threads) const;
  // Counts a view of `bytes` kept; an InputError when the views would pass
  // the bound (the rank is then listed with it, its view dropped).
  void keep(uint64_t bytes);
  uint64_t held() const { return held_.load(); }

 private:
  uint64_t reserve() const { return uint64_t(render_factor_) * largest_.load(); }
  uint64_t bound_;
  unsigned render_factor_;
  std::atomic<uint64_t> held_{0};
  std::atomic<uint64_t> largest_{0};
  std::atomic<uint64_t> views_{0};
};

// What writing a report of many ranks takes, in views of the largest rank:
// the diff of the worst rank against the median one, and the shown rank's
// report as text or Markdown (2), HTML (4) or JSON, built as a document
// first (6).
unsigned render_factor_of(const std::string& format);

// What a report view holds in memory, estimated from its rows and strings
// (an upper estimate: what a rank's kept view counts).
uint64_t view_memory_bytes(const Report& r);

// Calls work(i, trace) for each files[i] on up to `jobs` threads (a file
// found unreadable, RankFile::unreadable, goes to fail() unopened); work
// returns the bytes of what it keeps (view_memory_bytes), counted against
// the bound. The memory bound (whole.max_memory_bytes) is shared: each read
// gets (bound - views kept) / threads; a read refused for memory under its
// share is tried again after the others, alone, with what the views leave.
// An InputError (reading, in work, or keeping the view) goes to fail(i,
// error) with the file set (fail then drops what work kept); any other
// exception stops the map and is rethrown on the calling thread once every
// thread has stopped. `work` and `fail` run on worker threads: each writes
// only its own slot i. Threads: a pool of up to `jobs`, each taking the next
// rank when done with one (a folder of 100,000 ranks starts `jobs` threads).
void map_ranks(const std::vector<RankFile>& files, unsigned jobs, const LoadOptions& whole,
               const std::function<uint64_t(size_t, Trace&)>& work,
               const std::function<void(size_t, const InputError&)>& fail, unsigned render_factor = 0);

// The same shape for work that reads its own input (the reduce step's
// summaries): work(i) on up to `jobs` threads, InputErrors to fail().
// unreadable_error(f) is the InputError of a file found unreadable.
InputError unreadable_error(const RankFile& f);
void map_indices(size_t n, unsigned jobs, const std::function<void(size_t)>& work,
                 const std::function<void(size_t, const InputError&)>& fail);

}  // namespace snapdiff::cli
