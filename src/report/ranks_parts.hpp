// Internal: what the renderers of many ranks (ranks_text.cpp, ranks_json.cpp,
// ranks_markdown.cpp, ranks_html.cpp) say alike of a rank, a metric and an
// outlier (ranks_common.cpp). Names come back raw: each renderer escapes
// them for its own medium.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "snapdiff/analysis/ranks.hpp"

namespace snapdiff::detail {

// "3", or "?" for a rank not told.
std::string rank_label(int rank);
// A path shortened to its last `parts` components: "iteration_2/rank0_memory_snapshot.pickle".
std::string short_name(std::string_view path, size_t parts = 2);
// The report's top device (its requested peak), or none.
const DeviceView* rank_device(const Report& r);
// When the requested peak is: "iteration 2, backward", "optimizer" (no
// iterations told), "before the first event".
std::string peak_when(const DeviceView& d);
// The largest categories at the requested peak, largest first (bytes > 0).
std::vector<std::pair<std::string, int64_t>> top_categories(const DeviceView& d, size_t n);
// "activation 1.2 GiB, parameter 300.0 MiB"; "none" when nothing is live.
std::string top_categories_text(const DeviceView& d, size_t n);
// The history in a table cell: "complete", "late start", "ring buffer
// wrapped", "truncated", "profiled window", "none".
std::string history_cell(const Report& r);
// Out-of-memory errors over the rank's devices.
uint64_t rank_ooms(const Report& r);
// A metric's value in words: bytes (human_bytes), a signed change for
// growth (human_delta).
std::string metric_value(const RankMetric& m, int64_t v);
// The metric differs between the ranks read.
bool metric_varies(const RankMetric& m);
// "on rank 3" (entry's rank, "?" when not told).
std::string on_rank(const RanksView& v, size_t entry);
// "1.31x" (two decimals); "" when the ratio is not known (the median is 0).
std::string ratio_text(double r);
// A metric as a sentence: "peak requested: the most 1.3 GiB on rank 3, the
// least 1.0 GiB on rank 0, the median 1.1 GiB; the most is 1.31x the median".
std::string metric_sentence(const RanksView& v, const RankMetric& m);
// "4 ranks read, 1 failed; 1 file superseded (earlier steps of a rank, or
// its regular dump beside an OOM dump)". Files of other kinds in the folders
// are the front end's to mention (ranks.hpp).
std::string ranks_counts(const RanksView& v);
// "rank 3 grows +2.1 GiB, the other ranks +412.0 MiB (median): its activation +1.7 GiB".
std::string outlier_sentence(const RankOutlier& o);
// The pair's requested peaks (A, B) of its top devices; false when either is missing.
bool pair_peaks(const RankPair& p, int64_t& a, int64_t& b);

}  // namespace snapdiff::detail
