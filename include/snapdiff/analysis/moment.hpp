// snapdiff/analysis/moment.hpp — a moment of a recording (`report --at`,
// `--window A..B`): an event index, a time, or a phase of an iteration, and
// its resolution against one device's replay and phases.
//
// A moment is the allocator state right after one event (-1: before the
// first event), as the replay's counters are.
#pragma once

#include <cstdint>
#include <string>

#include "snapdiff/analysis/attribution.hpp"
#include "snapdiff/analysis/replay.hpp"
#include "snapdiff/model/model.hpp"

namespace snapdiff {

struct MomentSpec {
  enum class Kind : uint8_t {
    None,      // not given
    Peak,      // "peak": the requested peak (of the window, when one is given)
    Event,     // "1746": right after that event (0-based, as the report numbers them)
    Relative,  // "+4.7s", "+350ms", "+12us": from the device's first event
    Absolute,  // "@1746000000123456" (µs, the recording's clock), "@1746000000.5s"
    Span,      // "iteration 2 optimizer [start|end]", "iteration 2 [start|end]"
  };
  enum class Edge : uint8_t { Default, Peak, Start, End };
  Kind kind = Kind::None;
  int64_t event = -1;    // Event
  int64_t time_us = 0;   // Relative: offset; Absolute: the time
  int iteration = 0;     // Span
  bool whole_iteration = true;  // Span: every phase of the iteration
  Phase phase = Phase::Other;   // Span, when !whole_iteration
  Edge edge = Edge::Default;    // Span: its peak (default for --at), start or end
  std::string text;             // as given
  bool empty() const { return kind == Kind::None; }
};

struct WindowSpec {
  MomentSpec from, to;  // either may be empty: from the first event, to the last
  std::string text;
  bool empty() const { return from.empty() && to.empty(); }
};

// What every spec may be, for usage errors and --help.
extern const char* const kMomentSyntax;

// Throw UsageError (naming `option`, saying what is accepted) on a bad spec.
MomentSpec parse_moment(const std::string& text, const std::string& option = "--at");
WindowSpec parse_window(const std::string& text, const std::string& option = "--window");

// The event a moment resolves to on one device (-1: before the first event).
// `what` is the moment's own words ("iteration 2, optimizer, start").
// Out of range (an event the device does not have, a time after its last
// event, an iteration or phase it has not): UsageError saying the range.
// `edge_default` is the edge a Span without one takes (Peak for --at; Start
// and End for a window's two ends). `lo`..`hi` bound a Peak's search.
struct ResolvedMoment {
  int64_t event = -1;
  std::string what;
};
ResolvedMoment resolve_moment(const MomentSpec& m, const Device& dev, const DeviceReplay& rp, const Attribution& at,
                              MomentSpec::Edge edge_default, int64_t lo = -1, int64_t hi = INT64_MAX,
                              const std::string& option = "--at");

// The first state at or after `lo` (-1 allowed) up to `hi` with the highest
// value of `counter` (the first maximum, as the replay's peaks).
PeakPoint peak_between(const Device& dev, const std::vector<int64_t>& counter, int64_t baseline, int64_t lo, int64_t hi);

}  // namespace snapdiff
