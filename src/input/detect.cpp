// Format detection: what an input is, from its first decoded bytes.
#include "input/detect.hpp"

#include <string_view>

#include "input/snap_parts.hpp"

namespace snapdiff::detail {

namespace {

size_t skip_ws(std::string_view s, size_t i) {
  while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t')) ++i;
  return i;
}

// End of the JSON string starting at s[i] == '"' (one past its quote), or npos.
size_t string_end(std::string_view s, size_t i) {
  for (size_t j = i + 1; j < s.size(); ++j) {
    if (s[j] == '\\') ++j;
    else if (s[j] == '"') return j + 1;
  }
  return std::string_view::npos;
}

// End of the value starting at s[i] (containers by depth), or npos when the
// head ends first.
size_t value_end(std::string_view s, size_t i) {
  if (i >= s.size()) return std::string_view::npos;
  if (s[i] == '"') return string_end(s, i);
  if (s[i] == '{' || s[i] == '[') {
    int depth = 0;
    for (size_t j = i; j < s.size(); ++j) {
      char c = s[j];
      if (c == '"') {
        size_t e = string_end(s, j);
        if (e == std::string_view::npos) return e;
        j = e - 1;
      } else if (c == '{' || c == '[') {
        ++depth;
      } else if ((c == '}' || c == ']') && --depth == 0) {
        return j + 1;
      }
    }
    return std::string_view::npos;
  }
  size_t j = i;
  while (j < s.size() && s[j] != ',' && s[j] != '}' && s[j] != ']' && s[j] != ' ' && s[j] != '\n') ++j;
  return j < s.size() ? j : std::string_view::npos;
}

bool is_chrome_key(std::string_view k) {
  return k == "traceEvents" || k == "schemaVersion" || k == "deviceProperties" || k == "baseTimeNanoseconds" ||
         k == "displayTimeUnit" || k == "traceName" || k == "distributedInfo" || k == "trace_id";
}

// A JSON document whose head `s` has its top-level object or array at s[i]:
// a torch.profiler export, else .snap.
InputFormat json_format(std::string_view s, size_t i) {
  if (s[i] == '{') {
    // The top-level keys visible in the head decide.
    i = skip_ws(s, i + 1);
    while (i < s.size() && s[i] == '"') {
      size_t e = string_end(s, i);
      if (e == std::string_view::npos) break;
      std::string_view key = s.substr(i + 1, e - i - 2);
      if (key == "format") return InputFormat::Snap;  // .snap
      if (is_chrome_key(key)) return InputFormat::ChromeTrace;
      i = skip_ws(s, e);
      if (i >= s.size() || s[i] != ':') break;
      i = skip_ws(s, i + 1);
      size_t v = value_end(s, i);
      if (v == std::string_view::npos) break;
      i = skip_ws(s, v);
      if (i < s.size() && s[i] == ',') i = skip_ws(s, i + 1);
      else break;
    }
    return InputFormat::Snap;
  }
  if (s[i] != '[') return InputFormat::Snap;
  i = skip_ws(s, i + 1);
  if (i >= s.size()) return InputFormat::Snap;
  if (s[i] == '{') return InputFormat::ChromeTrace;  // the JSON Array Format of Chrome traces
  if (s[i] == ']') return InputFormat::MemoryTimelineRaw;  // an empty raw export
  if (s[i] != '[') return InputFormat::Snap;
  // A memory timeline: [times, sizes] or raw rows [[t, action, bytes, cat], ...].
  size_t first = i;
  size_t numbers = 0;
  size_t j = skip_ws(s, first + 1);
  while (j < s.size() && s[j] != ']') {
    if (s[j] == '[' || s[j] == '{' || s[j] == '"') return InputFormat::Snap;
    size_t v = value_end(s, j);
    if (v == std::string_view::npos) break;
    if (v == j) return InputFormat::Snap;  // not a number (a stray '}'): not a timeline
    ++numbers;
    j = skip_ws(s, v);
    if (j < s.size() && s[j] == ',') j = skip_ws(s, j + 1);
  }
  if (numbers > 4 || (j < s.size() && s[j] == ']' && numbers == 0)) return InputFormat::MemoryTimeline;
  if (j >= s.size()) return numbers > 4 ? InputFormat::MemoryTimeline : InputFormat::Snap;
  // The first element is closed with at most 4 numbers: the second element
  // tells (an array of arrays: the sizes of [times, sizes]).
  size_t k = skip_ws(s, j + 1);
  if (k < s.size() && s[k] == ',') k = skip_ws(s, k + 1);
  if (k >= s.size()) return numbers == 4 ? InputFormat::MemoryTimelineRaw : InputFormat::Snap;
  if (s[k] == ']') return numbers == 4 ? InputFormat::MemoryTimelineRaw : InputFormat::Snap;
  if (s[k] != '[') return InputFormat::Snap;
  size_t m = skip_ws(s, k + 1);
  if (m < s.size() && (s[m] == '[' || s[m] == ']')) return InputFormat::MemoryTimeline;
  return numbers == 4 ? InputFormat::MemoryTimelineRaw : InputFormat::Snap;
}

}  // namespace

InputFormat detect(std::string_view head) {
  if (head.empty()) return InputFormat::Empty;
  // PROTO (protocol 2+), or what protocol 0/1 pickles of a dict/list start with.
  const uint8_t c = uint8_t(head[0]);
  if (c == 0x80 || c == '(' || c == '}' || c == ']') return InputFormat::TorchPickle;
  if (is_snap_binary(head)) return InputFormat::Snap;  // .snap version 3 (docs/snap_format.md)
  size_t i = 0;
  if (head.size() >= 3 && c == 0xEF && uint8_t(head[1]) == 0xBB && uint8_t(head[2]) == 0xBF) i = 3;
  i = skip_ws(head, i);
  if (i >= head.size() || (head[i] != '{' && head[i] != '[')) return InputFormat::Unknown;
  return json_format(head, i);
}

}  // namespace snapdiff::detail
