// snapdiff/analysis/ranks.hpp — many ranks of one run side by side: a row per
// rank, the imbalance of each metric, the worst rank against the median one.
//
// Built from each rank's report view alone (Report): the view of a snapshot
// read here, or one read back from the JSON `snapdiff report --format json`
// wrote for it elsewhere (the map step; `snapdiff ranks`). Both give the same
// RanksView, and so the same report (docs/ranks.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "snapdiff/analysis/diff.hpp"
#include "snapdiff/view/report.hpp"

namespace snapdiff {

// One rank: its file and what was read of it.
struct RankEntry {
  std::string name;          // the file, as found
  int rank = -1;             // -1: not told (neither its name nor its devices)
  std::string rank_from;     // how it was told: "name (torchtitan)", "device 3"; "" when not
  int64_t step = -1;         // the step or iteration its path names (-1: none)
  bool oom_file = false;     // its path marks it an OOM dump
  std::string error;         // the one-line input error when it could not be read ("" = read)
  int exit_code = 0;         // that error's exit code (3)
  std::optional<Report> report;  // the view (none when error)
  std::string explorer_page;     // HTML: the rank's explorer page, relative to the ranks page ("" = none)
};

// A metric over the ranks that were read.
struct RankMetric {
  std::string name;      // "peak requested", "peak allocated", "peak reserved", "free cached at the peak",
                         // "growth per iteration", or a category at the peak ("activation")
  std::string key;       // its JSON key: "peak_requested_bytes", ..., "category:activation"
  std::vector<int64_t> values;  // per entry (index into RanksView::ranks); 0 for unread ranks
  int64_t max = 0, min = 0, median = 0;
  size_t max_entry = 0, min_entry = 0;  // the first entry holding max / min
  double max_over_median = 0;           // 0 when the median is 0
};

// A finding over ranks (diffs of two runs' ranks): one rank moves unlike the others.
struct RankOutlier {
  int rank = -1;
  size_t entry = 0;
  int64_t delta = 0;          // its requested-peak change (B - A)
  int64_t others_median = 0;  // the other ranks' median change
  // Its category at the peak that changed most in the direction it departs
  // from the others ("" = none material), and by how much (B - A).
  std::string category;
  int64_t category_delta = 0;
};

struct RanksOptions {
  int shown_rank = -1;     // --rank: whose full report is shown (-1: the worst)
  DiffOptions diff;        // for the worst rank against the median one
};

struct RanksView {
  std::vector<RankEntry> ranks;         // by rank; ranks not told last, by name
  std::vector<std::string> superseded;  // earlier steps (and regular dumps beside an OOM dump) of a rank
  size_t read = 0, failed = 0;          // entries read, entries with an error
  std::vector<RankMetric> metrics;      // peaks, free cached, growth, then the largest categories
  // Index into ranks (SIZE_MAX: none): the highest requested peak (the first
  // such rank), and the median rank by requested peak (the lower median).
  size_t worst = SIZE_MAX, median = SIZE_MAX;
  std::optional<Diff> worst_vs_median;  // when worst != median
  size_t shown = SIZE_MAX;              // the rank whose full report follows (worst, or --rank's)
};

// Entries in any order; sorted, ranks told from devices where names told
// none (every such entry with one device, all devices distinct), metrics and
// the worst-against-median diff computed. Throws UsageError-free: a --rank
// that is not among the entries leaves `shown` at SIZE_MAX (the CLI refuses it).
// Files the folders held that are not inputs (logs, truth files) are the
// front end's to mention: the map step's summaries cannot know them, and
// both paths must give the same view.
RanksView build_ranks_view(std::vector<RankEntry> entries, std::vector<std::string> superseded,
                           const RanksOptions& opts);

// ---- Files that are not ranks of one job ----------------------------------
// A folder of unrelated runs (different models, machines, days) is not a
// multi-GPU job: its "imbalance" means nothing. When no entry's rank is told
// (neither by its name nor by its device, as build_ranks_view tells them),
// the recordings themselves are compared; any one of these says they are not
// ranks of one job (the names are never looked at):
//   - the devices' total memory differs, where the recordings tell it
//     (device-memory samples, an OOM's cudaMemGetInfo): ranks of one job run
//     on one kind of GPU;
//   - the parameter bytes at the peak differ by more than kRunsParameterRatio
//     (where both hold some): data- and fully-sharded ranks hold the same or
//     near the same parameters;
//   - the recorded windows are more than kRunsTimeGapUs apart (wall-clock
//     times only, microseconds after 2001): ranks of one job record together;
//   - the largest requested peak is more than kRunsPeakRatio times the
//     smallest: far beyond an imbalance between ranks of one job.
inline constexpr double kRunsParameterRatio = 1.5;
inline constexpr int64_t kRunsTimeGapUs = 10LL * 60 * 1000 * 1000;  // 10 minutes
inline constexpr double kRunsPeakRatio = 20.0;

struct NotOneJob {
  bool not_one_job = false;  // any of the reasons below
  std::vector<uint64_t> device_totals;  // the distinct totals, when they differ (ascending)
  bool parameters_differ = false;
  int64_t parameters_min = 0, parameters_max = 0;
  bool far_apart = false;
  int64_t gap_us = 0;                    // the largest gap between two recordings' windows
  bool peaks_differ = false;
  int64_t peak_min = 0, peak_max = 0;    // requested peaks over the entries read
};

// Tells ranks from devices where the names told none (as build_ranks_view
// does, so the view built after is the same), then judges the entries: a
// verdict only when no entry's rank is told and at least two were read;
// otherwise not_one_job is false.
NotOneJob judge_one_job(std::vector<RankEntry>& entries);

// ---- Two runs' ranks: rank r of A against rank r of B ---------------------
struct RankPair {
  int rank = -1;
  std::string a_name, b_name;  // "" when that side lacks the rank
  std::string a_error, b_error;
  std::optional<Diff> diff;    // when both were read
};
struct RanksDiff {
  std::vector<RankPair> pairs;     // by rank (pairs without a told rank matched by position, listed last)
  std::vector<int> only_a, only_b; // ranks present on one side alone
  std::vector<RankOutlier> outliers;  // ranks whose peak change differs most from the others' (largest first)
  size_t shown = SIZE_MAX;         // the pair whose full diff follows: the largest |peak change|, or --rank's
};

// Pairs in any order (each with its diff when both sides were read); sorted,
// outliers found, the shown pair chosen (opts.shown_rank, else the largest
// |requested-peak change|).
RanksDiff build_ranks_diff(std::vector<RankPair> pairs, std::vector<int> only_a, std::vector<int> only_b,
                           const RanksOptions& opts);

}  // namespace snapdiff
