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
// A site row with the ids it is written out from (the view's SiteRow
// holds none).
struct SiteRowIds {
  SiteRow row;
  StackId stack = 0;
  int rule = -1;  // the rule that decided the largest allocation (-1: none)
};
class SiteRows {
 public:
  explicit SiteRows(size_t categories) : categories_(categories) {}
  // `block_bytes`: the allocator's block for it (its requested bytes when not known).
  void add(const Attribution& at, const Allocation& al, int64_t block_bytes);
  // Rows with the most requested bytes first (ties: stack, then category);
  // each row's category is the one holding most of its bytes.
  std::vector<SiteRowIds> rows();
  // Per category: the rows holding some of its bytes.
  std::vector<uint64_t> sites_per_category() const;

 private:
  struct Acc {
    SiteRowIds row;
    std::vector<int64_t> by_cat;
    uint64_t largest = 0;
    // Names the tensor list gives its allocations: the first name, and the
    // dotted parts every name shares with it at the front and at the end.
    std::string first_name;
    size_t front = 0, back = 0;
    bool one_name = true;
  };
  static void add_name(Acc& acc, const std::string& name);
  static std::string name_pattern(const Acc& acc);
  size_t categories_;
  std::unordered_map<uint64_t, Acc> by_key_;
};
// A row written out: its category's and rule's names, its stack's frames
// (site_frames() at `depth`).
SiteRow site_row(const FrameTable& ft, const Attribution& at, const RuleSet& rules, const SiteRowIds& r, size_t depth);
// The first `top` rows into `kept`, written out at `depth`, the rest summed
// into `other`.
void keep_top(const FrameTable& ft, const Attribution& at, const RuleSet& rules, const std::vector<SiteRowIds>& rows,
              size_t top, size_t depth, std::vector<SiteRow>& kept, SiteRow& other);

}  // namespace snapdiff::detail
