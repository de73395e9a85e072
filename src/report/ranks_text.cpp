// The text reports of many ranks: `snapdiff report DIR` (a RanksView) and
// `snapdiff DIR_A DIR_B` (a RanksDiff).
#include <sstream>

#include "report/diff_parts.hpp"
#include "report/format.hpp"
#include "report/ranks_parts.hpp"
#include "report/text_util.hpp"
#include "snapdiff/report/diff_report.hpp"
#include "snapdiff/report/ranks_report.hpp"
#include "snapdiff/report/report.hpp"

namespace snapdiff {

namespace {

using detail::pad_left;
using detail::pad_right;
using detail::rank_label;
using detail::wrap;

std::string dn(std::string_view s) { return detail::display_name(s); }

// The diff's top rows in the many-ranks report: the findings, then the
// categories and sites that changed most.
constexpr size_t kDiffRows = 5;

void rank_table(std::ostringstream& o, const RanksView& v) {
  o << "RANKS (each rank's requested peak: what was live then)\n";
  o << "  RANK  " << pad_right("FILE", 40) << "   REQUESTED   ALLOCATED    RESERVED  " << pad_right("PEAK AT", 22)
    << "  FREE CACHED  OOMS  " << pad_right("HISTORY", 13) << "  TOP CATEGORIES AT THE PEAK\n";
  for (size_t i = 0; i < v.ranks.size(); ++i) {
    const RankEntry& e = v.ranks[i];
    const std::string lead =
        (i == v.worst ? "* " : "  ") + pad_left(rank_label(e.rank), 4) + "  " + pad_right(dn(detail::short_name(e.name)), 40);
    const DeviceView* d = e.report ? detail::rank_device(*e.report) : nullptr;
    if (!e.error.empty() || !e.report) {
      // The error whole, wrapped under the file's column.
      o << wrap(lead + "  ", "error: " + dn(e.error.empty() ? "not read" : e.error));
      continue;
    }
    o << lead;
    if (!d) {
      o << "  no device data\n";
      continue;
    }
    o << pad_left(human_bytes(d->peak_requested.bytes), 12) << pad_left(human_bytes(d->peak_allocated.bytes), 12)
      << pad_left(human_bytes(d->peak_reserved.bytes), 12) << "  " << pad_right(detail::peak_when(*d), 22)
      << pad_left(human_bytes(d->frag.free_cached), 13) << pad_left(std::to_string(detail::rank_ooms(*e.report)), 6) << "  "
      << pad_right(detail::history_cell(*e.report), 13) << "  " << dn(detail::top_categories_text(*d, 2)) << "\n";
  }
  if (v.worst < v.ranks.size()) o << "  (* the worst rank: the highest requested peak)\n";
}

void imbalance(std::ostringstream& o, const RanksView& v) {
  o << "\nIMBALANCE (max, min and median over the ranks read; metrics that differ between ranks)\n";
  bool any = false;
  for (const RankMetric& m : v.metrics) {
    if (!detail::metric_varies(m)) continue;
    any = true;
    const std::string r = detail::ratio_text(m.max_over_median);
    o << "  " << pad_right(dn(m.name), 26) << "  max " << pad_left(detail::metric_value(m, m.max), 10) << " "
      << pad_right(detail::on_rank(v, m.max_entry), 9) << "  min " << pad_left(detail::metric_value(m, m.min), 10) << " "
      << pad_right(detail::on_rank(v, m.min_entry), 9) << "  median " << pad_left(detail::metric_value(m, m.median), 10);
    if (!r.empty() && m.median > 0) o << "  max/median " << r;
    o << "\n";
  }
  if (!any) o << "  none: every metric is the same on every rank read\n";
}

}  // namespace

std::string render_ranks_text(const RanksView& v, size_t width) {
  std::ostringstream o;
  o << "snapdiff report: " << detail::ranks_counts(v) << "\n\n";
  rank_table(o, v);
  imbalance(o, v);
  if (v.worst < v.ranks.size() && v.median < v.ranks.size()) {
    const int w = v.ranks[v.worst].rank, m = v.ranks[v.median].rank;
    o << "\nWORST RANK " << rank_label(w) << " AGAINST THE MEDIAN RANK " << rank_label(m) << "\n";
    if (!v.worst_vs_median) {
      o << "  the worst rank is the median rank: nothing to compare\n";
    } else {
      const Diff& d = *v.worst_vs_median;
      o << "  requested peak " << human_bytes(detail::rank_device(d.b) ? detail::rank_device(d.b)->peak_requested.bytes : 0)
        << " against " << human_bytes(detail::rank_device(d.a) ? detail::rank_device(d.a)->peak_requested.bytes : 0) << " ("
        << human_delta(d.peak_delta[0]) << ")\n";
      o << "  A is the median rank " << rank_label(m) << " (" << dn(v.ranks[v.median].name) << "), B the worst rank "
        << rank_label(w) << " (" << dn(v.ranks[v.worst].name) << ")\n\n";
      o << detail::diff_findings_text(d) << "\n"
        << detail::diff_categories_text(d, kDiffRows) << "\n"
        << detail::diff_sites_text(d, kDiffRows);
    }
  }
  if (v.shown < v.ranks.size() && v.ranks[v.shown].report) {
    const RankEntry& e = v.ranks[v.shown];
    o << "\n\nRANK " << rank_label(e.rank) << " (" << dn(e.name) << ")\n\n";
    o << render_text(*e.report, width);
  }
  return detail::finish_text(o.str(), width);
}

std::string render_ranks_diff_text(const RanksDiff& d, size_t width) {
  std::ostringstream o;
  o << "snapdiff diff: " << detail::count_of(d.pairs.size(), "rank") << " side by side (rank r of A against rank r of B)\n\n";
  o << "PEAK REQUESTED BY RANK\n";
  o << "  RANK             A            B       CHANGE  FILES\n";
  for (const RankPair& p : d.pairs) {
    o << "  " << pad_left(rank_label(p.rank), 4) << "  ";
    int64_t a = 0, b = 0;
    if (!p.a_error.empty() || !p.b_error.empty() || !detail::pair_peaks(p, a, b)) {
      if (!p.a_error.empty()) o << "error in A: " << dn(p.a_error);
      if (!p.a_error.empty() && !p.b_error.empty()) o << "; ";
      if (!p.b_error.empty()) o << "error in B: " << dn(p.b_error);
      if (p.a_error.empty() && p.b_error.empty()) o << "no device data";
      o << "\n";
      continue;
    }
    o << pad_left(human_bytes(a), 12) << " " << pad_left(human_bytes(b), 12) << " " << pad_left(human_delta(b - a), 12) << "  "
      << dn(detail::short_name(p.a_name)) << " -> " << dn(detail::short_name(p.b_name)) << "\n";
  }
  if (!d.only_a.empty() || !d.only_b.empty()) {
    o << "\nRANKS ON ONE SIDE ONLY\n";
    for (int r : d.only_a) o << "  rank " << rank_label(r) << ": only in A\n";
    for (int r : d.only_b) o << "  rank " << rank_label(r) << ": only in B\n";
  }
  o << "\nFINDINGS\n";
  if (d.outliers.empty()) o << "  none: no rank's peak moves unlike the others\n";
  for (const RankOutlier& x : d.outliers) o << wrap("  * ", dn(detail::outlier_sentence(x)));
  if (d.shown < d.pairs.size() && d.pairs[d.shown].diff) {
    o << "\n\nRANK " << rank_label(d.pairs[d.shown].rank) << ": A AGAINST B\n\n";
    o << render_diff_text(*d.pairs[d.shown].diff, width);
  }
  return detail::finish_text(o.str(), width);
}

}  // namespace snapdiff
