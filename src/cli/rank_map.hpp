// Internal: the map over ranks — reading many per-rank inputs on several
// threads within one memory bound, each summarized and released before the
// next is read on its thread (docs/ranks.md, "Memory and threads").
#pragma once

#include <boost/program_options.hpp>
#include <functional>
#include <string>
#include <vector>

#include "snapdiff/error.hpp"
#include "snapdiff/input/input.hpp"
#include "snapdiff/model/model.hpp"

namespace snapdiff::cli {

// -j/--jobs N: 1 to 1024; the machine's cores when not given.
unsigned jobs_arg(const boost::program_options::variables_map& vm);

// Calls work(i, trace) for each paths[i] on up to `jobs` threads. The memory
// bound (whole.max_memory_bytes) is shared: each read gets bound / threads;
// a read refused for memory under its share is tried again after the others,
// alone, with the whole bound. An InputError (reading or in work) goes to
// fail(i, error) with the file set; any other exception stops the map and is
// rethrown on the calling thread once every thread has stopped. `work` and
// `fail` run on worker threads: each writes only its own slot i.
void map_ranks(const std::vector<std::string>& paths, unsigned jobs, const LoadOptions& whole,
               const std::function<void(size_t, Trace&)>& work,
               const std::function<void(size_t, const InputError&)>& fail);

// The same shape for work that reads its own input (the reduce step's
// summaries): work(i) on up to `jobs` threads, InputErrors to fail().
void map_indices(size_t n, unsigned jobs, const std::function<void(size_t)>& work,
                 const std::function<void(size_t, const InputError&)>& fail);

}  // namespace snapdiff::cli
