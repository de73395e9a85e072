// src/util/terminal_text.cpp: see terminal_text.hpp.
#include "util/terminal_text.hpp"

#include <cstdint>
#include <cstdio>

namespace snapdiff {

namespace {

// The length of the UTF-8 sequence at s[i] (2-4), or 0 when it is not one
// (a stray continuation byte, an overlong form, a surrogate, past U+10FFFF,
// cut short); `cp` gets its code point.
size_t utf8_sequence(std::string_view s, size_t i, uint32_t& cp) {
  const auto b = [&](size_t k) { return i + k < s.size() ? uint8_t(s[i + k]) : uint8_t(0); };
  const uint8_t c = b(0);
  size_t len;
  uint8_t lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
    cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    cp = c & 0x0F;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    cp = c & 0x07;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  for (size_t k = 1; k < len; ++k) {
    const uint8_t d = b(k);
    if (d < (k == 1 ? lo : 0x80) || d > (k == 1 ? hi : 0xBF)) return 0;
    cp = (cp << 6) | (d & 0x3F);
  }
  return len;
}

}  // namespace

std::string escape_for_terminal(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  char b[12];
  for (size_t i = 0; i < text.size();) {
    const uint8_t c = uint8_t(text[i]);
    if (c < 0x80) {
      if (c == '\n') out += "\\n";
      else if (c == '\t') out += "\\t";
      else if (c == '\r') out += "\\r";
      else if (c < 0x20 || c == 0x7F) {
        std::snprintf(b, sizeof b, "\\x%02x", c);
        out += b;
      } else {
        out += char(c);
      }
      ++i;
      continue;
    }
    uint32_t cp = 0;
    const size_t len = utf8_sequence(text, i, cp);
    if (len == 0) {
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
      ++i;
      continue;
    }
    const bool control = (cp >= 0x80 && cp <= 0x9F) || cp == 0x2028 || cp == 0x2029 ||
                         (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
    if (control) {
      std::snprintf(b, sizeof b, "\\u%04x", unsigned(cp));
      out += b;
    } else {
      out.append(text.data() + i, len);
    }
    i += len;
  }
  return out;
}

}  // namespace snapdiff
