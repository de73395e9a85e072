// snapdiff/report/ranks_report.hpp — the renderers of many ranks: `snapdiff
// report DIR` / `snapdiff ranks SUMMARY...` (a RanksView) and `snapdiff DIR_A
// DIR_B` (a RanksDiff). They read the views and nothing else.
#pragma once

#include <string>
#include <vector>

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

// Files that are not ranks of one job (judge_one_job): one line saying why
// ("these 3 files do not look like ranks of one job (peaks from 5.0 MiB to
// 3.1 GiB (640x)): reporting them as separate runs"), then a table of runs:
// each file's peaks, history and top categories.
std::string not_one_job_words(const NotOneJob& j);
std::string separate_runs_line(const std::vector<RankEntry>& runs, const NotOneJob& j);
std::string render_runs_text(const std::vector<RankEntry>& runs, const NotOneJob& j,
                             size_t width = kDefaultTextWidth);
std::string render_runs_json(const std::vector<RankEntry>& runs, const NotOneJob& j);  // schemas/runs.schema.json
std::string render_runs_markdown(const std::vector<RankEntry>& runs, const NotOneJob& j);
std::string render_runs_html(const std::vector<RankEntry>& runs, const NotOneJob& j);

std::string render_ranks_diff_text(const RanksDiff& d, size_t width = kDefaultTextWidth);
std::string render_ranks_diff_json(const RanksDiff& d);      // schemas/ranks_diff.schema.json
std::string render_ranks_diff_markdown(const RanksDiff& d);

}  // namespace snapdiff
