// Live allocations grouped into site rows (analyze_parts.hpp: SiteRows).
#include <algorithm>

#include "analysis/analyze_parts.hpp"

namespace snapdiff::detail {

void SiteRows::add(const Attribution& at, const Allocation& al, int64_t block_bytes) {
  Acc& acc = by_key_[uint64_t(al.stack) << 16 | al.category];
  acc.row.stack = al.stack;
  acc.row.requested_bytes += int64_t(al.requested);
  acc.row.block_bytes += block_bytes;
  ++acc.row.count;
  if (acc.by_cat.empty()) acc.by_cat.assign(categories_, 0);
  acc.by_cat[al.category] += int64_t(al.requested);
  if (al.requested < acc.largest) return;
  // The row's rule, phases and lifetime are its largest allocation's.
  acc.largest = al.requested;
  acc.row.rule = al.rule;
  acc.row.alloc_phase = at.phase_at(al.alloc_event);
  acc.row.alloc_iteration = at.iteration_at(al.alloc_event);
  acc.row.freed = al.user_free() != INT64_MAX;
  if (acc.row.freed) {
    acc.row.free_phase = at.phase_at(al.user_free());
    acc.row.free_iteration = at.iteration_at(al.user_free());
  }
}

std::vector<SiteRow> SiteRows::rows() {
  std::vector<SiteRow> rows;
  rows.reserve(by_key_.size());
  for (auto& kv : by_key_) {
    Acc& acc = kv.second;
    acc.row.category = int(std::max_element(acc.by_cat.begin(), acc.by_cat.end()) - acc.by_cat.begin());
    rows.push_back(acc.row);
  }
  std::sort(rows.begin(), rows.end(), [](const SiteRow& a, const SiteRow& b) {
    if (a.requested_bytes != b.requested_bytes) return a.requested_bytes > b.requested_bytes;
    if (a.stack != b.stack) return a.stack < b.stack;
    return a.category < b.category;
  });
  return rows;
}

std::vector<uint64_t> SiteRows::sites_per_category() const {
  std::vector<uint64_t> out(categories_, 0);
  for (const auto& kv : by_key_)
    for (size_t c = 0; c < kv.second.by_cat.size(); ++c)
      if (kv.second.by_cat[c] != 0) ++out[c];
  return out;
}

void keep_top(const std::vector<SiteRow>& rows, size_t top, std::vector<SiteRow>& kept, SiteRow& other) {
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i < top) {
      kept.push_back(rows[i]);
    } else {
      other.requested_bytes += rows[i].requested_bytes;
      other.block_bytes += rows[i].block_bytes;
      other.count += rows[i].count;
    }
  }
}

}  // namespace snapdiff::detail
