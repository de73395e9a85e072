// Internal: the parts of analyze() (src/analysis/analyze.cpp) that live in
// their own files.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "snapdiff/analysis/analysis.hpp"

namespace snapdiff::detail {

// findings.cpp: the explanation of one device's peak, largest first.
void state_findings(const FrameTable& ft, DeviceAnalysis& d);
// findings.cpp: the warnings of every device (and the history flags).
void add_warnings(const Trace& trace, Analysis& r);
// explain_query.cpp: --explain ADDRESS|SITE.
void explain_query(const Trace& t, Analysis& r, const std::string& q);
// oom.cpp: the first OOM of each device that had one, explained (Analysis::ooms).
void explain_ooms(const Trace& trace, Analysis& r, size_t top_sites);


// site_rows.cpp: live allocations grouped into site rows, one per stack and
// category (allocations with no stack, from before the recording, or one
// stack that made several kinds show apart), for LIVE AT THE PEAK and the
// live set at an OOM.
class SiteRows {
 public:
  explicit SiteRows(size_t categories) : categories_(categories) {}
  // `block_bytes`: the allocator's block for it (its requested bytes when not known).
  void add(const Attribution& at, const Allocation& al, int64_t block_bytes);
  // Rows with the most requested bytes first (ties: stack, then category);
  // each row's category is the one holding most of its bytes.
  std::vector<SiteRow> rows();
  // Per category: the rows holding some of its bytes.
  std::vector<uint64_t> sites_per_category() const;

 private:
  struct Acc {
    SiteRow row;
    std::vector<int64_t> by_cat;
    uint64_t largest = 0;
  };
  size_t categories_;
  std::unordered_map<uint64_t, Acc> by_key_;
};
// The first `top` rows into `kept`, the rest summed into `other`.
void keep_top(const std::vector<SiteRow>& rows, size_t top, std::vector<SiteRow>& kept, SiteRow& other);

}  // namespace snapdiff::detail
