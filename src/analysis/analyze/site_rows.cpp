// Live allocations grouped into site rows (analyze_parts.hpp: SiteRows).
#include <algorithm>

#include "analysis/analyze/analyze_parts.hpp"
#include "analysis/analyze/report_view_build.hpp"

namespace snapdiff::detail {

namespace {

std::vector<std::string_view> dotted(std::string_view s) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == '.') {
      parts.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  return parts;
}

}  // namespace

void SiteRows::add_name(Acc& acc, const std::string& name) {
  if (acc.first_name.empty() && acc.row.row.named_tensors == 0) {
    acc.first_name = name;
    acc.front = acc.back = dotted(name).size();
    return;
  }
  if (name == acc.first_name) return;
  acc.one_name = false;
  const auto a = dotted(acc.first_name), b = dotted(name);
  size_t f = 0, k = 0;
  while (f < std::min({a.size(), b.size(), acc.front}) && a[f] == b[f]) ++f;
  while (k < std::min({a.size(), b.size(), acc.back}) && a[a.size() - 1 - k] == b[b.size() - 1 - k]) ++k;
  acc.front = f;
  acc.back = k;
}

// The row's names as one pattern: shared front parts, "*", shared end parts.
std::string SiteRows::name_pattern(const Acc& acc) {
  if (acc.row.row.named_tensors == 0) return {};
  if (acc.one_name) return acc.first_name;
  const auto parts = dotted(acc.first_name);
  const size_t front = std::min(acc.front, parts.size());
  const size_t back = std::min(acc.back, parts.size() - front);
  std::string out;
  for (size_t i = 0; i < front; ++i) out += std::string(parts[i]) + ".";
  out += "*";
  for (size_t i = parts.size() - back; i < parts.size(); ++i) out += "." + std::string(parts[i]);
  return out;
}

void SiteRows::add(const Attribution& at, const Allocation& al, int64_t block_bytes) {
  Acc& acc = by_key_[uint64_t(al.stack) << 16 | al.category];
  SiteRow& row = acc.row.row;
  acc.row.stack = al.stack;
  row.requested_bytes += int64_t(al.requested);
  row.block_bytes += block_bytes;
  ++row.count;
  if (acc.by_cat.empty()) acc.by_cat.assign(categories_, 0);
  acc.by_cat[al.category] += int64_t(al.requested);
  if (const Attribution::Named* nm = at.named_of(uint32_t(&al - at.allocations.data()))) {
    add_name(acc, at.tensor_names[nm->tensor]);
    row.named_tensors += nm->tensors;
    if (nm->tensors > 1) acc.one_name = false;
  } else if (const std::vector<uint32_t>* of = al.category < at.categories.size() &&
                                                       at.categories[al.category] == "parameter_copy"
                                                   ? at.copied_parameters(al)
                                                   : nullptr) {
    // A copy of one of the parameters of its size times the copy ratio.
    for (uint32_t t : *of) add_name(acc, at.tensor_names[t]);
    if (of->size() > 1) acc.one_name = false;
    ++row.named_tensors;
    row.copies = true;
  }
  if (al.requested < acc.largest) return;
  // The row's rule, phases and lifetime are its largest allocation's.
  acc.largest = al.requested;
  acc.row.rule = al.rule;
  row.alloc_phase = at.phase_at(al.alloc_event);
  row.alloc_iteration = at.iteration_at(al.alloc_event);
  row.freed = al.user_free() != INT64_MAX;
  if (row.freed) {
    row.free_phase = at.phase_at(al.user_free());
    row.free_iteration = at.iteration_at(al.user_free());
  }
}

std::vector<SiteRowIds> SiteRows::rows() {
  std::vector<SiteRowIds> rows;
  rows.reserve(by_key_.size());
  for (auto& kv : by_key_) {
    Acc& acc = kv.second;
    acc.row.row.category = int(std::max_element(acc.by_cat.begin(), acc.by_cat.end()) - acc.by_cat.begin());
    acc.row.row.tensors = name_pattern(acc);
    rows.push_back(acc.row);
  }
  std::sort(rows.begin(), rows.end(), [](const SiteRowIds& a, const SiteRowIds& b) {
    if (a.row.requested_bytes != b.row.requested_bytes) return a.row.requested_bytes > b.row.requested_bytes;
    if (a.stack != b.stack) return a.stack < b.stack;
    return a.row.category < b.row.category;
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

SiteRow site_row(const FrameTable& ft, const Attribution& at, const RuleSet& rules, const SiteRowIds& r, size_t depth) {
  SiteRow row = r.row;
  row.category_name = category_name(at, row.category);
  row.has_rule = r.rule >= 0;
  row.rule_name = r.rule >= 0 ? rules.rules[size_t(r.rule)].name : std::string();
  row.site = site_frames(ft, r.stack, depth);
  return row;
}

void keep_top(const FrameTable& ft, const Attribution& at, const RuleSet& rules, const std::vector<SiteRowIds>& rows,
              size_t top, size_t depth, std::vector<SiteRow>& kept, SiteRow& other) {
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i < top) {
      kept.push_back(site_row(ft, at, rules, rows[i], depth));
    } else {
      other.requested_bytes += rows[i].row.requested_bytes;
      other.block_bytes += rows[i].row.block_bytes;
      other.count += rows[i].row.count;
    }
  }
}

}  // namespace snapdiff::detail
