// `snapdiff check` over many ranks (include/snapdiff/analysis/ranks_check.hpp).
#include "snapdiff/analysis/ranks_check.hpp"

#include <algorithm>

namespace snapdiff {

RanksCheck combine_rank_checks(std::vector<RankCheck> ranks, bool skip_unreadable) {
  RanksCheck c;
  std::stable_sort(ranks.begin(), ranks.end(), [](const RankCheck& x, const RankCheck& y) {
    if ((x.rank < 0) != (y.rank < 0)) return x.rank >= 0;
    if (x.rank != y.rank) return x.rank < y.rank;
    return x.name < y.name;
  });
  c.ranks = std::move(ranks);
  for (size_t i = 0; i < c.ranks.size(); ++i) {
    const RankCheck& r = c.ranks[i];
    if (!r.result) c.unchecked.push_back(i);
    else if (r.result->status == CheckStatus::Fail) c.failing.push_back(i);
    else if (r.result->status == CheckStatus::Warn) c.warning.push_back(i);
  }
  // A rank that could not be checked is not within budget (unless it could
  // not be read and the caller skips those).
  bool unchecked_fail = false;
  for (size_t i : c.unchecked) unchecked_fail = unchecked_fail || !(skip_unreadable && c.ranks[i].input_error);
  c.status = !c.failing.empty() || unchecked_fail ? CheckStatus::Fail
             : !c.warning.empty()                       ? CheckStatus::Warn
                                                        : CheckStatus::Pass;
  return c;
}

}  // namespace snapdiff
