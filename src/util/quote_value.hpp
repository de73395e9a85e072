// Internal: a value from an input or the command line, as a message quotes
// it. Names and values can be megabytes (a summary's 60 MB `schema`, a
// recorded 4 MB PYTORCH_CUDA_ALLOC_CONF); a message holds at most
// kMaxQuotedBytes of one, cut at a UTF-8 boundary, with how many bytes were
// left out. docs/reliability.md, "Names".
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace snapdiff {

constexpr size_t kMaxQuotedBytes = 400;

// `s` whole when it fits max_bytes; else its head and "...(N more bytes)",
// max_bytes in all.
inline std::string capped_value(std::string_view s, size_t max_bytes = kMaxQuotedBytes) {
  if (s.size() <= max_bytes) return std::string(s);
  size_t cut = max_bytes > 40 ? max_bytes - 40 : 0;  // room for the note
  while (cut > 0 && (uint8_t(s[cut]) & 0xC0) == 0x80) --cut;
  return std::string(s.substr(0, cut)) + "...(" + std::to_string(s.size() - cut) + " more bytes)";
}

// capped_value() in single quotes: the form messages quote values in
// (double quotes, q = '"', for values of JSON files).
inline std::string quote_value(std::string_view s, size_t max_bytes = kMaxQuotedBytes, char q = '\'') {
  std::string out;
  out.reserve(std::min(s.size(), max_bytes) + 2);
  out += q;
  out += capped_value(s, max_bytes);
  out += q;
  return out;
}

}  // namespace snapdiff
