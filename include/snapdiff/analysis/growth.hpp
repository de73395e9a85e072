// snapdiff/analysis/growth.hpp — memory that grows from iteration to
// iteration, and what is retained (docs/attribution.md "Growth and leaks").
//
// Per device, from the attribution's iterations:
//   * the memory at each iteration's start: allocated and requested bytes
//     right before the iteration's first event (the replay's counters);
//   * growth per iteration: the median of the changes of allocated bytes
//     between the starts of consecutive iterations from the second on (the
//     first iteration creates gradients and optimizer state: not growth);
//   * retained allocations: made in iteration i (i >= 1) and still alive at
//     the start of iteration i + 2, not parameters, parameter copies,
//     gradients or optimizer state, grouped by stack (site). A site leaks
//     when it retains in every iteration that can be judged (the first may
//     be missing), in two at least, and most of what it retained is still
//     alive at the start of the last iteration (a cache that reaches a
//     steady state frees its old entries). The last two iterations cannot be
//     judged: their allocations at a leaking site count as leaked when they
//     are never freed in the recording.
// Leaked allocations take the category `leaked`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "snapdiff/analysis/attribution.hpp"
#include "snapdiff/model/frames.hpp"
#include "snapdiff/model/model.hpp"
#include "snapdiff/view/growth.hpp"
#include "snapdiff/analysis/replay.hpp"

namespace snapdiff {


namespace detail {
// Measures growth, finds the leaking sites and gives their leaked
// allocations the category `leaked` (when the rule set has it), then
// refreshes the spans' category breakdowns. `peak_event`: the requested peak.
Growth find_growth(const FrameTable& ft, const Device& dev, const DeviceReplay& replay, Attribution& attr,
                   int64_t peak_event);
}  // namespace detail

}  // namespace snapdiff
