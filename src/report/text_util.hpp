// Internal: small text-layout helpers shared by the text renderers, and the
// words they share beyond findings and warnings (words.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "report/format.hpp"
#include "snapdiff/view/report.hpp"

namespace snapdiff {
struct Diff;
}

namespace snapdiff::detail {

// "1 allocation", "3 allocations" (with the count's thousands separated).
inline std::string count_of(uint64_t n, std::string_view singular, std::string_view plural = {}) {
  const std::string digits = std::to_string(n);
  std::string c;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) c += ',';
    c += digits[i];
  }
  return c + " " + std::string(n == 1 ? singular : plural.empty() ? std::string(singular) + "s" : plural);
}

inline std::string pad_left(const std::string& s, size_t w) {
  return s.size() >= w ? s : std::string(w - s.size(), ' ') + s;
}
inline std::string pad_right(const std::string& s, size_t w) {
  return s.size() >= w ? s : s + std::string(w - s.size(), ' ');
}

// A unit human_bytes() or a duration puts after its number ("12.5 MiB",
// "0.470 s"), optionally followed by punctuation.
inline bool is_unit_word(std::string_view w) {
  while (!w.empty() && (w.back() == ',' || w.back() == '.' || w.back() == ';' || w.back() == ':' || w.back() == ')'))
    w.remove_suffix(1);
  for (std::string_view u : {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "s", "ms", "us"})
    if (w == u) return true;
  return false;
}

// A paragraph: `lead` then `text`, word-wrapped to the output's width by
// finish_text() (report/format.hpp) with the lead's width as the hanging
// indent; a number stays on the line of its unit.
inline std::string wrap(const std::string& lead, const std::string& text) { return prose(lead, text); }

// A site in one line: its first `n` frames joined by `separator`, then
// "  [in CALLEE]" when the user frame called into a library function.
inline std::string site_line(const SiteFrames& s, size_t n, std::string_view separator) {
  std::string out;
  for (size_t i = 0; i < s.path.size() && i < n; ++i) {
    if (i) out += separator;
    out += s.path[i];
  }
  if (!s.callee.empty()) out += "  [in " + s.callee + "]";
  return out;
}

// The tensors a site row's allocations hold by the run's own names
// (docs/tensors.md): "  {model.lm_head.weight}", "  {95 tensors:
// model.layers.*.weight}", or "" without a tensor list.
inline std::string tensors_words(const SiteRow& s) {
  if (s.named_tensors == 0 || s.tensors.empty()) return {};
  if (s.copies)
    return "  {" + (s.named_tensors == 1 ? std::string("a copy") : std::to_string(s.named_tensors) + " copies") +
           " of " + s.tensors + "}";
  if (s.named_tensors == 1) return "  {" + s.tensors + "}";
  return "  {" + std::to_string(s.named_tensors) + " tensors: " + s.tensors + "}";
}

// The allocator settings a file recorded, in its order: "key value" pairs
// ("expandable_segments true, max_split_size unlimited, ..."); "not recorded"
// when the file has none. settings_rows gives the pairs, values as words.
std::vector<std::pair<std::string, std::string>> settings_rows(const AllocatorSettings& s);
std::string settings_text(const AllocatorSettings& s);

// A diff's PEAK rows (diff_report.cpp): requested, allocated, active (left
// out when either run is a profiler trace, which does not record when frees
// complete) and reserved, of each run's top device, with B - A. Empty when
// either run has no device.
struct DiffPeakRow {
  const char* name;
  int64_t a = 0, b = 0, delta = 0;
};
std::vector<DiffPeakRow> diff_peak_rows(const Diff& d);

// The INPUT section's history: "complete", "none (dump-time state only)",
// "truncated (recording started late)", "truncated (ring buffer wrapped)",
// "truncated (cannot tell whether ...)", per device when the devices
// disagree, or a profiler trace's "the profiled window (...)" (words.cpp).
std::string history_words(const Report& r);

}  // namespace snapdiff::detail
