// Internal: many ranks in `report`, `diff` and `check` (src/cli/ranks_cmd.cpp).
#pragma once

#include <boost/program_options.hpp>
#include <string>
#include <vector>

#include "snapdiff/analysis/analysis.hpp"

namespace snapdiff::cli {

// -j/--jobs, --rank, --skip-bad-ranks.
void add_rank_options(boost::program_options::options_description& d);
// Several inputs, a folder, or a pattern (* ? [...]) that is not itself a file.
bool is_ranks_input(const std::vector<std::string>& inputs);
// `snapdiff report DIR`: every rank's report (`base` gives the options each
// rank's analysis runs with), their table, imbalance and worst rank.
int report_ranks(const boost::program_options::variables_map& vm, const std::vector<std::string>& inputs,
                 const ReportOptions& base, size_t top, size_t depth);
// `snapdiff DIR_A DIR_B`: rank r of A against rank r of B.
int diff_ranks(const boost::program_options::variables_map& vm, const std::vector<std::string>& a,
               const std::vector<std::string>& b, const RuleSet& rules, size_t top, size_t depth);

}  // namespace snapdiff::cli
