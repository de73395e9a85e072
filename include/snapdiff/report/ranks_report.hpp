// snapdiff/report/ranks_report.hpp — the renderers of many ranks: `snapdiff
// report DIR` / `snapdiff ranks SUMMARY...` (a RanksView) and `snapdiff DIR_A
// DIR_B` (a RanksDiff). They read the views and nothing else.
#pragma once

#include <string>

#include "snapdiff/report/report.hpp"  // kDefaultTextWidth
#include "snapdiff/analysis/ranks.hpp"

namespace snapdiff {

// The table of ranks, the imbalance, the worst rank against the median one,
// then the shown rank's full report (render_text).
std::string render_ranks_text(const RanksView& v, size_t width = kDefaultTextWidth);
std::string render_ranks_json(const RanksView& v);      // schemas/ranks.schema.json
std::string render_ranks_markdown(const RanksView& v);  // for a pull-request comment
// One self-contained page: the table, the imbalance, a small-multiples
// timeline of every rank on one axis (iterations aligned), the diff.
std::string render_ranks_html(const RanksView& v);

std::string render_ranks_diff_text(const RanksDiff& d, size_t width = kDefaultTextWidth);
std::string render_ranks_diff_json(const RanksDiff& d);      // schemas/ranks_diff.schema.json
std::string render_ranks_diff_markdown(const RanksDiff& d);

}  // namespace snapdiff
