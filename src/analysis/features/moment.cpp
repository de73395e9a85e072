// Moments and windows (`report --at`, `--window`): parsing a spec and
// resolving it to an event of one device.
#include "snapdiff/analysis/moment.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <sstream>
#include <vector>

#include "snapdiff/error.hpp"
#include "util/quote_value.hpp"

namespace snapdiff {

const char* const kMomentSyntax =
    "an event index (1746), a time from the first event (+4.7s, +350ms, +12us), an absolute time in the "
    "recording's clock (@1746000000123456 in microseconds, or @1746000000.5s), peak, or a phase: 'iteration 2', "
    "'iteration 2 optimizer', each optionally followed by start, end or peak";

namespace {

std::string lower_trim(const std::string& s) {
  size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  std::string out;
  for (size_t i = a; i < b; ++i) out += char(std::tolower(static_cast<unsigned char>(s[i])));
  return out;
}

[[noreturn]] void bad(const std::string& option, const std::string& text, const std::string& why) {
  throw UsageError(option + " " + quote_value(text) + ": " + why + "; a moment is " + kMomentSyntax);
}

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "4.7s" -> 4700000 (µs), exactly: the digits, not a double. `unit_required`:
// a bare number is refused; otherwise it is microseconds.
bool parse_duration(const std::string& s, bool unit_required, int64_t* us) {
  size_t i = 0;
  std::string whole, frac;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) whole += s[i++];
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) frac += s[i++];
  }
  if (whole.empty() && frac.empty()) return false;
  std::string unit = s.substr(i);
  int scale_digits;  // log10 of µs per unit
  if (unit == "s") scale_digits = 6;
  else if (unit == "ms") scale_digits = 3;
  else if (unit == "us" || unit == "\xc2\xb5s") scale_digits = 0;
  else if (unit.empty() && !unit_required) scale_digits = 0;
  else return false;
  if (frac.size() > size_t(scale_digits)) {
    // Finer than a microsecond: only zeros may follow.
    if (frac.find_first_not_of('0', size_t(scale_digits)) != std::string::npos) return false;
    frac.resize(size_t(scale_digits));
  }
  frac.append(size_t(scale_digits) - frac.size(), '0');
  const std::string digits = (whole.empty() ? "0" : whole) + frac;
  int64_t v = 0;
  for (char c : digits) {
    if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, c - '0', &v)) return false;
  }
  *us = v;
  return true;
}

bool parse_phase_word(const std::string& w, Phase* p) {
  for (Phase q : {Phase::Init, Phase::Forward, Phase::Backward, Phase::Optimizer, Phase::Other})
    if (w == phase_name(q)) {
      *p = q;
      return true;
    }
  return false;
}

std::string device_name(const Device& dev) { return "cuda:" + std::to_string(dev.index); }

// `to` relative to `from` in seconds, signed ("+0", "+4.000000 s",
// "-0.250000 s"): exact for any two times, the magnitude taken in uint64
// (a clock that runs backwards, or times at int64's ends, once printed
// "+-9223372036854.775807 s").
std::string offset_from(int64_t from, int64_t to) {
  if (to == from) return "+0";
  const bool neg = to < from;
  const uint64_t mag = neg ? uint64_t(from) - uint64_t(to) : uint64_t(to) - uint64_t(from);
  char frac[8];
  std::snprintf(frac, sizeof frac, "%06u", unsigned(mag % 1000000));
  return std::string(neg ? "-" : "+") + std::to_string(mag / 1000000) + "." + frac + " s";
}

}  // namespace

MomentSpec parse_moment(const std::string& text, const std::string& option) {
  MomentSpec m;
  m.text = text;
  const std::string s = lower_trim(text);
  if (s.empty()) bad(option, text, "empty");
  if (s == "peak") {
    m.kind = MomentSpec::Kind::Peak;
    return m;
  }
  if (all_digits(s)) {
    if (s.size() > 18) bad(option, text, "no recording has that many events");
    m.kind = MomentSpec::Kind::Event;
    m.event = std::stoll(s);
    return m;
  }
  if (s[0] == '+') {
    if (!parse_duration(s.substr(1), true, &m.time_us))
      bad(option, text, "a time from the first event is a number and a unit: s, ms or us");
    m.kind = MomentSpec::Kind::Relative;
    return m;
  }
  if (s[0] == '@') {
    if (!parse_duration(s.substr(1), false, &m.time_us))
      bad(option, text, "an absolute time is microseconds of the recording's clock, or a number and a unit: s, ms or us");
    m.kind = MomentSpec::Kind::Absolute;
    return m;
  }
  std::istringstream in(s);
  std::vector<std::string> w;
  for (std::string x; in >> x;) w.push_back(x);
  if (w[0] == "iteration" || w[0] == "iter" || w[0] == "it") {
    if (w.size() < 2 || !all_digits(w[1]) || w[1].size() > 9)
      bad(option, text, "an iteration is named by its number: 'iteration 2'");
    m.kind = MomentSpec::Kind::Span;
    m.iteration = std::stoi(w[1]);
    size_t i = 2;
    if (i < w.size() && parse_phase_word(w[i], &m.phase)) {
      m.whole_iteration = false;
      ++i;
    }
    if (i < w.size()) {
      if (w[i] == "start") m.edge = MomentSpec::Edge::Start;
      else if (w[i] == "end") m.edge = MomentSpec::Edge::End;
      else if (w[i] == "peak") m.edge = MomentSpec::Edge::Peak;
      else bad(option, text, quote_value(w[i]) + " is not a phase (init, forward, backward, optimizer, other) nor start, end or peak");
      ++i;
    }
    if (i < w.size()) bad(option, text, "unexpected " + quote_value(w[i]));
    return m;
  }
  bad(option, text, "not a moment");
}

WindowSpec parse_window(const std::string& text, const std::string& option) {
  WindowSpec w;
  w.text = text;
  const size_t dots = text.find("..");
  if (dots == std::string::npos || text.find("..", dots + 2) != std::string::npos)
    throw UsageError(option + " " + quote_value(text) + ": a window is A..B, two moments (either may be left out: ..B, A..); a moment is " +
                     kMomentSyntax);
  const std::string a = text.substr(0, dots), b = text.substr(dots + 2);
  if (!lower_trim(a).empty()) w.from = parse_moment(a, option);
  if (!lower_trim(b).empty()) w.to = parse_moment(b, option);
  if (w.empty()) throw UsageError(option + " " + quote_value(text) + ": give at least one end of the window (A..B, ..B or A..)");
  return w;
}

PeakPoint peak_between(const Device& dev, const std::vector<int64_t>& counter, int64_t baseline, int64_t lo, int64_t hi) {
  PeakPoint p;
  const int64_t n = int64_t(counter.size());
  lo = std::max<int64_t>(lo, -1);
  hi = std::min<int64_t>(hi, n - 1);
  p.event_index = lo;
  p.bytes = lo >= 0 && lo < n ? counter[size_t(lo)] : baseline;
  for (int64_t i = lo + 1; i <= hi; ++i)
    if (counter[size_t(i)] > p.bytes) p.bytes = counter[size_t(i)], p.event_index = i;
  if (p.event_index > hi) p.event_index = hi, p.bytes = hi >= 0 ? counter[size_t(hi)] : baseline;
  p.time_us = p.event_index >= 0 && size_t(p.event_index) < dev.events.size() ? dev.events[size_t(p.event_index)].time_us
                                                                               : kNoTime;
  return p;
}

ResolvedMoment resolve_moment(const MomentSpec& m, const Device& dev, const DeviceReplay& rp, const Attribution& at,
                              MomentSpec::Edge edge_default, int64_t lo, int64_t hi, const std::string& option) {
  const int64_t n = int64_t(dev.events.size());
  const std::string head = option + " " + quote_value(m.text) + ": ";
  ResolvedMoment r;
  r.what = m.text;
  auto range_error = [&](const std::string& why) { throw UsageError(head + why); };
  switch (m.kind) {
    case MomentSpec::Kind::None:
    case MomentSpec::Kind::Peak: {
      r.event = peak_between(dev, rp.requested, rp.baseline.requested, lo, hi).event_index;
      return r;
    }
    case MomentSpec::Kind::Event:
      if (n == 0) range_error(device_name(dev) + " has no events");
      if (m.event >= n)
        range_error(device_name(dev) + " has events 0 to " + std::to_string(n - 1));
      r.event = m.event;
      return r;
    case MomentSpec::Kind::Relative:
    case MomentSpec::Kind::Absolute: {
      // Relative times count from the first event's; the range is the
      // earliest to the latest time (a clock may run backwards).
      int64_t first = kNoTime, t_lo = kNoTime, t_hi = kNoTime;
      for (const Event& e : dev.events)
        if (e.time_us != kNoTime) {
          if (first == kNoTime) first = t_lo = t_hi = e.time_us;
          t_lo = std::min(t_lo, e.time_us);
          t_hi = std::max(t_hi, e.time_us);
        }
      if (first == kNoTime) range_error("the events of " + device_name(dev) + " carry no times");
      const std::string range = device_name(dev) + "'s events run from @" + std::to_string(t_lo) + " to @" +
                                std::to_string(t_hi) + " (" + offset_from(first, t_lo) + " to " + offset_from(first, t_hi) +
                                (t_lo < first ? " from the first event's time: its clock runs backwards" : "") + ")";
      int64_t t = m.time_us;
      if (m.kind == MomentSpec::Kind::Relative && __builtin_add_overflow(first, m.time_us, &t))
        range_error("beyond the recording; " + range);
      if (t < t_lo) range_error("before the first event; " + range);
      if (t > t_hi) range_error("after the last event; " + range);
      // The last event at or before t, before the first one after it.
      int64_t idx = -1;
      for (int64_t i = 0; i < n; ++i) {
        const int64_t ti = dev.events[size_t(i)].time_us;
        if (ti == kNoTime) continue;
        if (ti > t) break;
        idx = i;
      }
      r.event = idx;
      return r;
    }
    case MomentSpec::Kind::Span: {
      int64_t start = INT64_MAX, end = -1;
      const PhaseSpan* best = nullptr;
      int max_it = 0;
      std::vector<std::string> phases;
      for (const PhaseSpan& s : at.spans) {
        max_it = std::max(max_it, s.iteration);
        if (s.iteration != m.iteration) continue;
        if (std::find(phases.begin(), phases.end(), phase_name(s.phase)) == phases.end()) phases.push_back(phase_name(s.phase));
        if (!m.whole_iteration && s.phase != m.phase) continue;
        start = std::min(start, s.start_event);
        end = std::max(end, s.end_event);
        if (!best || s.peak_requested > best->peak_requested) best = &s;
      }
      if (!best) {
        if (phases.empty()) {
          if (max_it == 0) range_error(device_name(dev) + " has no iterations snapdiff could find");
          range_error(device_name(dev) + " has iterations 1 to " + std::to_string(max_it));
        }
        std::string list;
        for (size_t i = 0; i < phases.size(); ++i) list += (i ? (i + 1 == phases.size() ? " and " : ", ") : "") + phases[i];
        range_error("iteration " + std::to_string(m.iteration) + " of " + device_name(dev) + " has no " +
                    phase_name(m.phase) + " phase (it has " + list + ")");
      }
      MomentSpec::Edge e = m.edge == MomentSpec::Edge::Default ? edge_default : m.edge;
      if (e == MomentSpec::Edge::Start) r.event = start - 1;
      else if (e == MomentSpec::Edge::End) r.event = end;
      else r.event = best->peak_event;
      return r;
    }
  }
  return r;
}

}  // namespace snapdiff
