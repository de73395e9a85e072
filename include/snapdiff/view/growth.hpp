// snapdiff/view/growth.hpp — memory at each iteration's start, growth per iteration, leaking sites
// (measured by the analysis, snapdiff/analysis/growth.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "snapdiff/model/model.hpp"
#include "snapdiff/view/basics.hpp"

namespace snapdiff {

struct IterationStart {
  int iteration = 0;
  int64_t event_index = -1;  // the last event before the iteration's first (-1: before the history)
  int64_t time_us = kNoTime; // that event's time
  int64_t allocated = 0, requested = 0;  // right after it
};

struct RetainedSite {
  int64_t bytes_per_iteration = 0;   // median over the judged iterations that retain
  uint64_t count_per_iteration = 0;  // allocations retained per iteration (median)
  int iterations = 0;                // judged iterations that retain
  Phase phase = Phase::Other;        // the phase its retained allocations are made in (the largest's)
  int64_t leaked_at_peak = 0;        // requested bytes of it live at the peak
  uint64_t leaked_allocations = 0;   // allocations it leaks (judged and, at its end, never freed)
  // Resolved: the site's innermost user frame (a notebook cell called from the
  // user's model code: that model frame, then "  [in cell …]"), and the innermost Python frame
  // inside the user's call that is not PyTorch's own (the model's line).
  std::string site, model_frame;
};

struct Growth {
  std::vector<IterationStart> starts;  // iterations 1..N
  // Growth per iteration: the median change of allocated bytes between the
  // starts of iterations 2..N (deltas = N - 2; measured when 1 or more).
  bool measured = false;
  int64_t per_iteration = 0;
  int deltas = 0;
  // Iterations whose allocations can be judged: 1..N-2 (none when N < 3).
  int judged_first = 0, judged_last = 0;
  int unjudged = 0;  // the last iterations that cannot be judged yet (min(N, 2))
  std::vector<RetainedSite> sites;     // leaking sites, by bytes per iteration
  int64_t retained_per_iteration = 0;  // sum over the sites
  uint64_t retained_count = 0;         // sum over the sites
  int64_t leaked_at_peak = 0;          // = the `leaked` category at the peak
  bool leaks() const { return !sites.empty(); }
};

}  // namespace snapdiff
