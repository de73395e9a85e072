// The JSON of many ranks: schemas/ranks.schema.json (a RanksView) and
// schemas/ranks_diff.schema.json (a RanksDiff).
#include <nlohmann/json.hpp>

#include "report/diff_parts.hpp"
#include "report/format.hpp"
#include "report/ranks_parts.hpp"
#include "snapdiff/report/ranks_report.hpp"
#include "snapdiff/report/report.hpp"

namespace snapdiff {

namespace {

using J = nlohmann::ordered_json;

J opt_int(int64_t v, int64_t none = -1) { return v == none ? J(nullptr) : J(v); }
J opt_str(const std::string& s) { return s.empty() ? J(nullptr) : J(s); }

// A rank's numbers at its requested peak (its top device).
J summary(const Report& r) {
  const DeviceView* d = detail::rank_device(r);
  J s;
  s["device"] = d ? J(d->device) : J(nullptr);
  J peak = J::object();
  peak["requested_bytes"] = d ? d->peak_requested.bytes : 0;
  peak["allocated_bytes"] = d ? d->peak_allocated.bytes : 0;
  peak["reserved_bytes"] = d ? d->peak_reserved.bytes : 0;
  peak["event_index"] = d ? J(d->peak_requested.event_index) : J(nullptr);
  peak["iteration"] = d ? d->peak_iteration : 0;
  peak["phase"] = d ? phase_name(d->peak_phase) : phase_name(Phase::PreTrace);
  s["peak"] = peak;
  J cats = J::object();
  if (d)
    for (size_t i = 0; i < d->categories.size() && i < d->category_names.size(); ++i) cats[d->category_names[i]] = d->categories[i];
  s["categories_at_peak"] = cats;
  s["free_cached_bytes"] = d ? d->frag.free_cached : 0;
  s["largest_free_block_bytes"] = d ? d->frag.largest_free_block : 0;
  s["ooms"] = detail::rank_ooms(r);
  s["history"] = !r.has_history ? "none" : r.history_truncated ? "truncated" : "complete";
  s["truncation"] = truncation_name(r.truncation);
  s["iterations"] = d ? d->iterations : 0;
  return s;
}

// An entry: its index into "ranks" (null: none).
J entry_ref(const RanksView& v, size_t i) { return i < v.ranks.size() ? J(i) : J(nullptr); }
J rank_of(const RanksView& v, size_t i) { return i < v.ranks.size() ? opt_int(v.ranks[i].rank) : J(nullptr); }

std::string dump(const J& j) {
  // Invalid UTF-8 in a name becomes U+FFFD (docs/reliability.md).
  return detail::json_safe(j.dump(2, ' ', false, J::error_handler_t::replace)) + "\n";
}

}  // namespace

std::string render_ranks_json(const RanksView& v) {
  J j;
  j["schema"] = "snapdiff/ranks/1";
  j["read"] = v.read;
  j["failed"] = v.failed;
  j["superseded"] = v.superseded;
  j["ranks"] = J::array();
  for (const RankEntry& e : v.ranks) {
    J r;
    r["rank"] = opt_int(e.rank);
    r["rank_from"] = opt_str(e.rank_from);
    r["step"] = opt_int(e.step);
    r["oom_file"] = e.oom_file;
    r["name"] = e.name;
    r["error"] = e.error.empty() && e.report ? J(nullptr) : J(e.error.empty() ? std::string("not read") : e.error);
    r["exit_code"] = e.error.empty() ? J(nullptr) : J(e.exit_code);
    r["summary"] = e.report && e.error.empty() ? summary(*e.report) : J(nullptr);
    j["ranks"].push_back(r);
  }
  j["metrics"] = J::array();
  for (const RankMetric& m : v.metrics) {
    J x;
    x["name"] = m.name;
    x["key"] = m.key;
    x["values"] = m.values;
    x["max"] = m.max;
    x["min"] = m.min;
    x["median"] = m.median;
    x["max_entry"] = entry_ref(v, m.max_entry);
    x["max_rank"] = rank_of(v, m.max_entry);
    x["min_entry"] = entry_ref(v, m.min_entry);
    x["min_rank"] = rank_of(v, m.min_entry);
    x["max_over_median"] = m.median > 0 && m.max_over_median > 0 ? J(m.max_over_median) : J(nullptr);
    x["varies"] = detail::metric_varies(m);
    j["metrics"].push_back(x);
  }
  j["worst"] = entry_ref(v, v.worst);
  j["worst_rank"] = rank_of(v, v.worst);
  j["median"] = entry_ref(v, v.median);
  j["median_rank"] = rank_of(v, v.median);
  j["worst_vs_median"] = v.worst_vs_median ? detail::diff_json(*v.worst_vs_median) : J(nullptr);
  j["shown"] = entry_ref(v, v.shown);
  j["shown_rank"] = rank_of(v, v.shown);
  j["shown_report"] = v.shown < v.ranks.size() && v.ranks[v.shown].report ? J::parse(render_json(*v.ranks[v.shown].report))
                                                                         : J(nullptr);
  return dump(j);
}

std::string render_ranks_diff_json(const RanksDiff& d) {
  J j;
  j["schema"] = "snapdiff/ranks_diff/1";
  j["pairs"] = J::array();
  for (const RankPair& p : d.pairs) {
    J x;
    x["rank"] = opt_int(p.rank);
    x["a_name"] = opt_str(p.a_name);
    x["b_name"] = opt_str(p.b_name);
    x["a_error"] = opt_str(p.a_error);
    x["b_error"] = opt_str(p.b_error);
    int64_t a = 0, b = 0;
    const bool both = detail::pair_peaks(p, a, b);
    x["a_peak_requested_bytes"] = both ? J(a) : J(nullptr);
    x["b_peak_requested_bytes"] = both ? J(b) : J(nullptr);
    x["delta_peak_requested_bytes"] = both ? J(b - a) : J(nullptr);
    if (p.diff) {
      J cats = J::object();
      for (const CategoryDelta& c : p.diff->categories)
        if (c.delta() != 0) cats[c.name] = c.delta();
      x["delta_categories"] = cats;
    } else {
      x["delta_categories"] = nullptr;
    }
    j["pairs"].push_back(x);
  }
  j["only_a"] = d.only_a;
  j["only_b"] = d.only_b;
  j["outliers"] = J::array();
  for (const RankOutlier& o : d.outliers)
    j["outliers"].push_back({{"rank", opt_int(o.rank)},
                             {"entry", o.entry},
                             {"delta_bytes", o.delta},
                             {"others_median_delta_bytes", o.others_median},
                             {"category", opt_str(o.category)},
                             {"category_delta_bytes", o.category.empty() ? J(nullptr) : J(o.category_delta)},
                             {"message", detail::outlier_sentence(o)}});
  const bool shown = d.shown < d.pairs.size() && d.pairs[d.shown].diff;
  j["shown"] = shown ? J(d.shown) : J(nullptr);
  j["shown_rank"] = shown ? opt_int(d.pairs[d.shown].rank) : J(nullptr);
  j["shown_diff"] = shown ? detail::diff_json(*d.pairs[d.shown].diff) : J(nullptr);
  return dump(j);
}

}  // namespace snapdiff
