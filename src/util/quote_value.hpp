// Internal: a value quoted in a message or a report, bounded (a hostile
// input's megabytes never become a line of megabytes). Header-only: every
// layer may quote what it read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace snapdiff {

// The value as it is when it has at most max_bytes bytes; else its first
// bytes (cut at a UTF-8 boundary, room left for the note) and
// "...(N bytes in all)". Escaping for a terminal or markup stays the
// renderer's job.
inline std::string quote_value(std::string_view v, size_t max_bytes = 400) {
  if (v.size() <= max_bytes) return std::string(v);
  size_t cut = max_bytes > 40 ? max_bytes - 40 : 0;
  while (cut > 0 && (uint8_t(v[cut]) & 0xC0) == 0x80) --cut;
  return std::string(v.substr(0, cut)) + "...(" + std::to_string(v.size()) + " bytes in all)";
}

}  // namespace snapdiff
