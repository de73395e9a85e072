// snapdiff/analysis/ranks_check.hpp — `snapdiff check` over many ranks: every
// threshold applies to every rank (against the same rank of a baseline run,
// or one budget for all), and the verdict names the ranks that fail.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "snapdiff/analysis/check.hpp"

namespace snapdiff {

struct RankCheck {
  int rank = -1;                   // -1: not told by the name
  std::string name;                // the candidate's file
  std::string baseline_name;       // the baseline rank's file ("" = a budget, or none)
  std::string error;               // why this rank could not be checked ("" = checked): unreadable, no baseline rank
  bool input_error = false;        // the error is an unreadable input (exit 3), not a missing baseline rank (a failure)
  std::optional<CheckResult> result;
};

struct RanksCheck {
  CheckStatus status = CheckStatus::Pass;  // fail when any rank fails or could not be checked
  std::vector<RankCheck> ranks;            // by rank, untold last by name
  std::vector<size_t> failing, warning, unchecked;  // indices into ranks
};

// skip_unreadable (--skip-bad-ranks): ranks whose input could not be read
// are listed (unchecked) but do not fail the verdict.
RanksCheck combine_rank_checks(std::vector<RankCheck> ranks, bool skip_unreadable = false);

}  // namespace snapdiff
