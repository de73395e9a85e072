// snapdiff/analysis/diff.hpp — why run B peaks where it does compared with run A.
//
// Built on two Reports (replay + attribution of each run): peaks side by
// side, categories at each run's peak, phases aligned by (iteration, phase),
// sites matched by symbolic stack (function, file and line, never addresses;
// a stack on one side alone falls back to function and file, marked as moved;
// native frames left out of both when either run has none; gradients matched
// by tensor size), and plain-language findings computed from those numbers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "snapdiff/analysis/analysis.hpp"
#include "snapdiff/view/report.hpp"

namespace snapdiff {

struct DiffOptions {
  size_t top_sites = 20;
  // --depth: frames a site row shows; 1 (the default) is the user frame and
  // the Python function it calls, 0 the whole path (FrameTable::site_text).
  size_t depth = 1;
  std::string a_name, b_name;
};

struct CategoryDelta {
  std::string name;
  int64_t a = 0, b = 0;
  int64_t delta() const { return b - a; }
};

struct PhaseDelta {
  int iteration = 0;
  Phase phase = Phase::Other;
  int occurrence = 0;  // the n-th span of this (iteration, phase)
  bool in_a = false, in_b = false;
  int64_t a_peak = 0, b_peak = 0;    // requested bytes at the span's peak
  int64_t a_start = 0, b_start = 0;  // requested bytes when it began
  int64_t a_opt_temp = 0, b_opt_temp = 0;
};

// The diff's phase findings (Code::DiffPhase): a kind of phase whose peak
// moves, at one aligned (iteration, phase) pair and beyond the overall
// peak's move, by kPhaseMoveFraction of the larger of its two peaks and
// kPhaseMoveMin or more; at most
// kPhaseFindings of them, each naming up to kPhaseCategories categories
// whose bytes at that phase's peak change by kPhaseCategoryMin or more.
inline constexpr double kPhaseMoveFraction = 0.05;
inline constexpr int64_t kPhaseMoveMin = int64_t(64) << 20;
inline constexpr size_t kPhaseFindings = 3;
inline constexpr size_t kPhaseCategories = 3;
inline constexpr int64_t kPhaseCategoryMin = int64_t(1) << 20;

struct SiteDelta {
  std::string key;      // function@file:line;... innermost first (moved rows: no lines; gradients: "<gradient of N bytes>"), then "|category"; a stack deeper than
                        // 1,000 frames cut as FrameTable::shown() (sites are matched on the whole stack)
  std::string display;  // user frame <- callers
  std::string category; // the category holding most of its bytes (B's when present)
  int64_t a = 0, b = 0;
  uint64_t a_count = 0, b_count = 0;
  // Matched by function and file alone: no stack with these lines exists in
  // both runs, but this one's frames (lines left out) do (code moved between
  // versions). a_display is A's form of it (the largest A stack).
  bool moved = false;
  std::string a_display;
  // Gradients: one row per tensor size, whatever stack allocated it (the
  // autograd engine's thread records none, or a backward one); 0 for others.
  uint64_t tensor_bytes = 0;
  int64_t delta() const { return b - a; }
};

struct Diff {
  std::string a_name, b_name;
  Report a, b;  // each run's report view
  int64_t peak_delta[4] = {0, 0, 0, 0};  // requested, allocated, reserved, active (B - A)
  std::vector<CategoryDelta> categories;  // sorted by |delta|, largest first
  std::vector<PhaseDelta> phases;         // time order (A's, then B-only spans)
  std::vector<SiteDelta> sites;           // top N by |delta|
  SiteDelta other_sites;                  // the rest, summed
  std::vector<Finding> findings;          // largest first
};

// Both analyses keep their traces' frame tables (Analysis::frames): the traces must
// still be alive.
Diff diff_reports(const Analysis& a, const Analysis& b, const DiffOptions& opts);

// The same diff from two report views alone (no traces; the views of
// snapshots read elsewhere, read back from their JSON), each taken at its
// peak (no --at): peaks, categories and phases from each view's peak device;
// sites from the rows each view kept (its -n), keyed from their written-out
// frames (SiteRow::site.stack: name, file, line) as diff_reports() keys them
// from the trace's — function@file-basename:line, innermost first; native
// frames left out when either view shows none; a row on one side alone
// matched without lines, marked moved; a stack the view cut
// (FrameTable::shown()) matched on what it kept. Gradients are matched by
// tensor size from each view's gradient_sizes, as diff_reports() matches
// them (it reads its views' gradient_sizes too). What lies beyond each
// view's rows, gradients aside, is its other_sites, summed into the diff's:
// a site kept by one view and summed by the other shows as new or gone. The
// findings are computed by the code diff_reports() uses, from the same
// numbers (with every site kept, they are diff_reports()' findings); the
// site rows' displays are written from the views' paths (a
// --depth deeper than the views' shows what they kept).
Diff diff_views(const Report& a, const Report& b, const DiffOptions& opts);

}  // namespace snapdiff
