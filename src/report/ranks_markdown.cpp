// Markdown of many ranks, for a pull-request comment: the table, the
// imbalance and the worst rank against the median one, compact.
#include <sstream>

#include "report/format.hpp"
#include "report/ranks_parts.hpp"
#include "snapdiff/report/diff_report.hpp"
#include "snapdiff/report/ranks_report.hpp"
#include "snapdiff/report/report.hpp"

namespace snapdiff {

namespace {

using detail::markdown_code;
using detail::markdown_text;
using detail::rank_label;

}  // namespace

std::string render_ranks_markdown(const RanksView& v) {
  std::ostringstream o;
  o << "### snapdiff: " << markdown_text(detail::ranks_counts(v)) << "\n\n";
  o << "| rank | file | requested | allocated | reserved | peak at | top categories | free cached | OOMs | history |\n"
       "|---:|---|---:|---:|---:|---|---|---:|---:|---|\n";
  for (size_t i = 0; i < v.ranks.size(); ++i) {
    const RankEntry& e = v.ranks[i];
    o << "| " << rank_label(e.rank) << " | "
      << markdown_code(detail::short_name(e.name)) << " | ";
    const DeviceView* d = e.report ? detail::rank_device(*e.report) : nullptr;
    if (!e.error.empty() || !d) {
      o << markdown_text(e.error.empty() ? "no device data" : "error: " + e.error) << " | | | | | | | |\n";
      continue;
    }
    o << human_bytes(d->peak_requested.bytes) << " | " << human_bytes(d->peak_allocated.bytes) << " | "
      << human_bytes(d->peak_reserved.bytes) << " | " << markdown_text(detail::peak_when(*d)) << " | "
      << markdown_text(detail::top_categories_text(*d, 2)) << " | " << human_bytes(d->frag.free_cached) << " | "
      << detail::rank_ooms(*e.report) << " | " << markdown_text(detail::history_cell(*e.report)) << " |\n";
  }
  if (v.worst < v.ranks.size())
    o << "\nThe worst rank (the highest requested peak): rank " << rank_label(v.ranks[v.worst].rank) << ".\n";
  bool header = false;
  for (const RankMetric& m : v.metrics) {
    if (!detail::metric_varies(m)) continue;
    if (!header) o << "\n**Imbalance**\n\n";
    header = true;
    o << "- " << markdown_text(detail::metric_sentence(v, m)) << "\n";
  }
  if (!header) o << "\nEvery metric is the same on every rank read.\n";
  if (v.worst_vs_median && v.worst < v.ranks.size() && v.median < v.ranks.size()) {
    const Diff& d = *v.worst_vs_median;
    o << "\n**Worst rank " << rank_label(v.ranks[v.worst].rank) << " against the median rank "
      << rank_label(v.ranks[v.median].rank) << "** (" << human_delta(d.peak_delta[0]) << " requested at the peak)\n\n";
    if (d.findings.empty()) o << "No difference reaches 1% of the peak.\n";
    for (const Finding& f : d.findings) o << "- " << markdown_text(finding_text(f)) << "\n";
  }
  return detail::terminal_safe(o.str());
}

std::string render_ranks_diff_markdown(const RanksDiff& d) {
  std::ostringstream o;
  o << "### snapdiff: " << markdown_text(std::to_string(d.pairs.size()) + (d.pairs.size() == 1 ? " rank" : " ranks")) << " side by side\n\n";
  o << "| rank | A | B | Δ |\n|---:|---:|---:|---:|\n";
  for (const RankPair& p : d.pairs) {
    int64_t a = 0, b = 0;
    o << "| " << rank_label(p.rank) << " | ";
    if (!p.a_error.empty() || !p.b_error.empty() || !detail::pair_peaks(p, a, b)) {
      std::string why = !p.a_error.empty() ? "error in A: " + p.a_error : !p.b_error.empty() ? "error in B: " + p.b_error : "no device data";
      o << markdown_text(why) << " | | |\n";
      continue;
    }
    o << human_bytes(a) << " | " << human_bytes(b) << " | " << human_delta(b - a) << " |\n";
  }
  for (int r : d.only_a) o << "\nRank " << rank_label(r) << " is only in A.\n";
  for (int r : d.only_b) o << "\nRank " << rank_label(r) << " is only in B.\n";
  o << "\n";
  if (d.outliers.empty()) o << "No rank's peak moves unlike the others.\n";
  for (const RankOutlier& x : d.outliers) o << "- " << markdown_text(detail::outlier_sentence(x)) << "\n";
  if (d.shown < d.pairs.size() && d.pairs[d.shown].diff) {
    o << "\n<details><summary>Rank " << rank_label(d.pairs[d.shown].rank) << ": A against B</summary>\n\n"
      << render_diff_markdown(*d.pairs[d.shown].diff) << "\n</details>\n";
  }
  return detail::terminal_safe(o.str());
}

}  // namespace snapdiff
