// snapdiff/analysis/explorer_data.hpp — what the HTML explorer shows, as plain
// data (analysis layer): per device, the timeline's levels of detail, the
// allocations with their stacks, sites, evidence and kernels, the phases and
// the allocator's state at a few moments. The report layer
// (src/report/explorer_page.cpp) writes it into the page in the container
// docs/explorer.md describes; the page's script reads only that.
// Nothing here prints.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "snapdiff/model/frames.hpp"
#include "snapdiff/model/model.hpp"
#include "snapdiff/view/report.hpp"

namespace snapdiff {

struct Analysis;
struct DeviceAnalysis;

// What keeps a page within its budget (docs/explorer.md, "Budgets").
struct ExplorerOptions {
  size_t max_allocations = 700000;  // beyond: the live-at-peak ones, the peak iteration's, then the largest
  size_t max_states = 24;           // allocator states: the peak, the OOMs, then each iteration's peak
  size_t site_depth = 3;            // frames found for a site (the report's --depth)
  size_t site_shown = 3;            // of them in a site's text: as the page's site tables write it
                                    // (a report: 3; a diff: its --depth, 1 by default)
};

struct ExplorerLevel {
  uint32_t buckets = 0;
  std::vector<int32_t> event;        // per bucket: the event shown (-1: an empty bucket)
  std::vector<int64_t> by_category;  // buckets x categories, row-major: requested bytes after that event
  std::vector<int64_t> requested, allocated, reserved;  // per bucket: maxima over its events
};

struct ExplorerPhase {
  int64_t start = 0, end = 0;  // events [start, end)
  Phase phase = Phase::Other;
  int iteration = 0;
};

struct ExplorerState {
  std::string label;
  int64_t event = -1;
  std::vector<uint64_t> seg_addr, seg_size, seg_stream;
  std::vector<int32_t> seg_pool;
  std::vector<int32_t> block_segment;
  std::vector<uint64_t> block_addr, block_size;
  std::vector<int32_t> block_alloc;  // index into the page's allocations; -1 free; -2 live, not in the page
};

struct ExplorerEvidence {
  uint16_t category = 0;
  std::string rule;  // the rule's name ("" when no rule matched)
  std::string text;  // why, in --explain's words
};

struct ExplorerRun {
  int device = 0;
  int64_t events = 0;
  bool has_times = false;
  std::vector<double> column_time_us;  // per finest-level column: its event's time from the first event
  std::vector<std::string> categories;
  std::vector<ExplorerPhase> phases;
  std::vector<ExplorerPhase> iterations;  // phase unused
  int64_t peak_event = -1, peak_requested = 0, peak_allocated = 0, peak_reserved = 0;
  std::vector<int64_t> peak_by_category;
  struct Oom {
    int64_t event = 0;
    uint64_t requested = 0;
  };
  std::vector<Oom> ooms;
  std::vector<ExplorerLevel> levels;  // coarsest first
  // The allocations in the page, by allocation event.
  uint64_t total_allocations = 0;
  std::string allocations_note;  // "" when every allocation is in the page
  std::vector<int32_t> alloc_event, free_event;  // free: INT32_MAX alive at the end
  std::vector<uint64_t> size, addr;
  std::vector<uint16_t> category;
  std::vector<int32_t> stack;     // node of the stack tree below
  std::vector<uint16_t> evidence;  // index into evidences
  std::vector<int32_t> kernel;    // index into kernels (-1: none); empty without a kernel recording
  // Frames and the stack tree (node 0: the empty stack; parent < node).
  std::vector<std::string> frame_labels;
  std::vector<FrameKind> frame_kinds;
  std::vector<int32_t> stack_parent, stack_frame, stack_site;
  std::vector<SiteFrames> sites;
  size_t site_shown = 3;  // ExplorerOptions::site_shown
  std::vector<ExplorerEvidence> evidences;
  std::vector<std::string> kernels;
  std::vector<ExplorerState> states;
};

// The explorer's data for one device of an analysis (the device's index in
// a.devices). `t` is the trace the analysis was made of.
ExplorerRun explorer_run(const Analysis& a, const Trace& t, size_t device, const ExplorerOptions& o = {});

}  // namespace snapdiff
