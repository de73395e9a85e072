// What the renderers of many ranks say alike (report/ranks_parts.hpp).
#include <algorithm>
#include <cstdio>

#include "report/ranks_parts.hpp"
#include "report/text_util.hpp"
#include "snapdiff/report/report.hpp"

namespace snapdiff::detail {

std::string rank_label(int rank) { return rank < 0 ? "?" : std::to_string(rank); }

std::string short_name(std::string_view path, size_t parts) {
  size_t end = path.size();
  while (end > 1 && path[end - 1] == '/') --end;  // "dir/" names dir
  size_t start = end;
  for (size_t seen = 0; start > 0;) {
    const size_t slash = path.rfind('/', start - 1);
    if (slash == std::string_view::npos) {
      start = 0;
      break;
    }
    if (++seen == parts) {
      start = slash + 1;
      break;
    }
    start = slash;
  }
  return std::string(path.substr(start, end - start));
}

const DeviceView* rank_device(const Report& r) {
  return r.peak_device < r.devices.size() ? &r.devices[r.peak_device] : nullptr;
}

std::string peak_when(const DeviceView& d) {
  if (d.peak_requested.event_index < 0) return "before the first event";
  return (d.peak_iteration > 0 ? "iteration " + std::to_string(d.peak_iteration) + ", " : std::string()) +
         phase_name(d.peak_phase);
}

std::vector<std::pair<std::string, int64_t>> top_categories(const DeviceView& d, size_t n) {
  std::vector<std::pair<std::string, int64_t>> out;
  for (size_t i = 0; i < d.categories.size() && i < d.category_names.size(); ++i)
    if (d.categories[i] > 0) out.emplace_back(d.category_names[i], d.categories[i]);
  std::stable_sort(out.begin(), out.end(), [](const auto& x, const auto& y) { return x.second > y.second; });
  if (out.size() > n) out.resize(n);
  return out;
}

std::string top_categories_text(const DeviceView& d, size_t n) {
  std::string s;
  for (const auto& [name, bytes] : top_categories(d, n)) s += (s.empty() ? "" : ", ") + name + " " + human_bytes(bytes);
  return s.empty() ? "none" : s;
}

std::string history_cell(const Report& r) {
  if (!r.has_history) return "none";
  if (!r.history_truncated) return "complete";
  if (r.profiler_trace) return "profiled window";
  switch (r.truncation) {
    case Truncation::LateStart: return "late start";
    case Truncation::Wrapped: return "ring buffer wrapped";
    case Truncation::None:
    case Truncation::Unknown: break;
  }
  return "truncated";
}

uint64_t rank_ooms(const Report& r) {
  uint64_t n = 0;
  for (const DeviceView& d : r.devices) n += d.oom_events;
  return n;
}

std::string metric_value(const RankMetric& m, int64_t v) {
  return m.key.find("growth") != std::string::npos ? human_delta(v) : human_bytes(v);
}

bool metric_varies(const RankMetric& m) { return m.max != m.min; }

std::string on_rank(const RanksView& v, size_t entry) {
  return entry < v.ranks.size() ? "on rank " + rank_label(v.ranks[entry].rank) : "on no rank";
}

std::string ratio_text(double r) {
  if (!(r > 0) || r > 1e9) return "";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2fx", r);
  return buf;
}

std::string metric_sentence(const RanksView& v, const RankMetric& m) {
  std::string s = m.name + ": the most " + metric_value(m, m.max) + " " + on_rank(v, m.max_entry) + ", the least " +
                  metric_value(m, m.min) + " " + on_rank(v, m.min_entry) + ", the median " + metric_value(m, m.median);
  const std::string r = ratio_text(m.max_over_median);
  if (!r.empty() && m.median > 0) s += "; the most is " + r + " the median";
  return s;
}

std::string ranks_counts(const RanksView& v) {
  std::string s = count_of(v.read, "rank") + " read";
  if (v.failed) s += ", " + std::to_string(v.failed) + " failed";
  if (!v.superseded.empty())
    s += "; " + count_of(v.superseded.size(), "file") +
         " superseded (earlier steps of a rank, or its regular dump beside an OOM dump)";
  return s;
}

std::string outlier_sentence(const RankOutlier& o) {
  std::string s = "rank " + rank_label(o.rank) + " ";
  s += o.delta > 0 ? "grows " + human_delta(o.delta) : o.delta < 0 ? "shrinks " + human_delta(o.delta) : "does not change";
  s += ", the other ranks " + (o.others_median == 0 ? std::string("do not change (median)") : human_delta(o.others_median) + " (median)");
  if (!o.category.empty()) s += ": its " + o.category + " " + human_delta(o.category_delta);
  return s;
}

bool pair_peaks(const RankPair& p, int64_t& a, int64_t& b) {
  if (!p.diff) return false;
  const DeviceView* da = rank_device(p.diff->a);
  const DeviceView* db = rank_device(p.diff->b);
  if (!da || !db) return false;
  a = da->peak_requested.bytes;
  b = db->peak_requested.bytes;
  return true;
}

}  // namespace snapdiff::detail
