#include "report/format.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include "report/text_util.hpp"

#include "snapdiff/model/model.hpp"
#include "snapdiff/report/report.hpp"

namespace snapdiff {

std::string human_bytes(int64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  bool neg = bytes < 0;
  double v = neg ? -double(bytes) : double(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 6) {
    v /= 1024.0;
    ++u;
  }
  char buf[48];
  if (u == 0) std::snprintf(buf, sizeof buf, "%s%lld B", neg ? "-" : "", (long long)(neg ? -bytes : bytes));
  else std::snprintf(buf, sizeof buf, "%s%.1f %s", neg ? "-" : "", v, units[u]);
  return buf;
}

std::string human_delta(int64_t bytes) {
  // Appended rather than `"+" + human_bytes(...)`: GCC 12 warns (-Wrestrict,
  // a false positive) on operator+(const char*, std::string&&).
  std::string s(bytes >= 0 ? "+" : "");
  s += human_bytes(bytes);
  return s;
}

namespace detail {

std::string with_commas(uint64_t v) {
  const std::string digits = std::to_string(v);
  std::string s;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) s.push_back(',');
    s.push_back(digits[i]);
  }
  return s;
}

std::string with_commas_signed(int64_t v) {
  const bool neg = v < 0;
  std::string s(neg ? "-" : "");
  s += with_commas(neg ? uint64_t(0) - uint64_t(v) : uint64_t(v));
  return s;
}

std::string share_percent(int64_t part, int64_t whole) {
  char b[16];
  std::snprintf(b, sizeof b, "%5.1f%%", whole > 0 ? 100.0 * double(part) / double(whole) : 0.0);
  return b;
}

std::string change_percent(int64_t delta, int64_t base, int decimals, std::string_view unchanged,
                           std::string_view fresh) {
  if (base == 0) return std::string(delta == 0 ? unchanged : fresh);
  char b[32];
  std::snprintf(b, sizeof b, "%+.*f%%", decimals, 100.0 * double(delta) / double(base));
  return b;
}

std::string compact_percent(double share) {
  char b[32];
  std::snprintf(b, sizeof b, share >= 0.0995 || share == 0 ? "%.0f%%" : "%.1f%%", share * 100);
  return b;
}

std::string seconds(int64_t us) {
  char b[48];
  std::snprintf(b, sizeof b, "%.3f s", double(us) / 1e6);
  return b;
}

namespace {

// |to - from| without overflow (it can be up to 2^64 - 1), and its sign.
uint64_t distance(int64_t from_us, int64_t to_us, bool* negative) {
  *negative = to_us < from_us;
  return *negative ? uint64_t(from_us) - uint64_t(to_us) : uint64_t(to_us) - uint64_t(from_us);
}

}  // namespace

std::string seconds_between(int64_t from_us, int64_t to_us) {
  bool neg = false;
  const double d = double(distance(from_us, to_us, &neg));
  char b[64];
  std::snprintf(b, sizeof b, "%.3f s", (neg ? -d : d) / 1e6);
  return b;
}

std::string signed_seconds_between(int64_t from_us, int64_t to_us) {
  std::string s = seconds_between(from_us, to_us);
  return s[0] == '-' ? s : "+" + s;
}

std::string time_span(int64_t first_us, int64_t last_us, bool milliseconds) {
  std::string s = utc_time(first_us, milliseconds);
  if (first_us == kNoTime || last_us == kNoTime) return s;
  if (last_us >= first_us) return s + " + " + seconds_between(first_us, last_us);
  return s + " - " + seconds_between(last_us, first_us) + " (the times go backwards)";
}

std::string moment_words(int64_t event, int64_t time_us, int64_t first_time_us, std::string_view phase, int iteration) {
  if (event < 0) return "before the first event";
  const std::string s = std::to_string(event);
  std::string commas;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i > 0 && (s.size() - i) % 3 == 0) commas += ',';
    commas += s[i];
  }
  std::string parts;
  auto add = [&](const std::string& p) { parts += (parts.empty() ? "" : ", ") + p; };
  if (iteration > 0) add("iteration " + std::to_string(iteration));
  if (!phase.empty()) add(std::string(phase));
  if (time_us != kNoTime && first_time_us != kNoTime) add(signed_seconds_between(first_time_us, time_us));
  return "event " + commas + (parts.empty() ? "" : " (" + parts + ")");
}

int64_t clamped_difference(int64_t from_us, int64_t to_us) {
  bool neg = false;
  const uint64_t d = distance(from_us, to_us, &neg);
  if (!neg) return d > uint64_t(INT64_MAX) ? INT64_MAX : int64_t(d);
  return d >= uint64_t(1) << 63 ? INT64_MIN : -int64_t(d);
}

namespace {
// "<1,234 frames elided>" (appended piece by piece: `"<" + std::string`
// draws a GCC 12 -Wrestrict false positive).
std::string elided_words(const std::string& count, const char* what) {
  std::string s(1, '<');
  s += count;
  s += ' ';
  s += what;
  s += " elided>";
  return s;
}
}  // namespace

std::string frame_name(const FrameRef& f) {
  return f.elided > 0 ? elided_words(std::to_string(f.elided), "frames") : f.name;
}

std::string frame_label(const FrameRef& f) { return f.elided > 0 ? elided_words(with_commas(f.elided), "frames") : f.label; }

uint64_t elided_count(std::string_view name) {
  constexpr std::string_view tail = " frames elided>";
  if (name.size() < tail.size() + 2 || name.front() != '<' || name.substr(name.size() - tail.size()) != tail) return 0;
  const std::string_view digits = name.substr(1, name.size() - tail.size() - 1);
  if (digits.size() > 19 || digits.front() == '0') return 0;
  uint64_t n = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return 0;
    n = n * 10 + uint64_t(c - '0');
  }
  return n;
}

std::string kernel_scope(const KernelRef& k) {
  if (k.stack.empty()) return "(outside every scope)";
  std::string out;
  for (size_t i = k.stack.size(); i-- > 0;) {
    if (!out.empty()) out += " / ";
    const FrameRef& f = k.stack[i];
    out += f.elided > 0 ? elided_words(with_commas(f.elided), "scopes") : f.name;
  }
  return out;
}

// ---------------------------------------------------------------------------
// Names.

namespace {

// The length (1-4) of the well-formed UTF-8 sequence at s[i] and its code
// point, or 0 when the byte there starts none (Unicode's Table 3-7: no
// overlong forms, no surrogates, nothing above U+10FFFF).
size_t utf8_at(std::string_view s, size_t i, uint32_t* cp) {
  const auto b = [&](size_t k) { return uint8_t(s[i + k]); };
  const uint8_t c = b(0);
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  const size_t left = s.size() - i;
  const auto cont = [&](size_t k, uint8_t lo = 0x80, uint8_t hi = 0xBF) { return k < left && b(k) >= lo && b(k) <= hi; };
  if (c >= 0xC2 && c <= 0xDF) {
    if (!cont(1)) return 0;
    *cp = uint32_t(c & 0x1F) << 6 | (b(1) & 0x3F);
    return 2;
  }
  if (c >= 0xE0 && c <= 0xEF) {
    const uint8_t lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    if (!cont(1, lo, hi) || !cont(2)) return 0;
    *cp = uint32_t(c & 0x0F) << 12 | uint32_t(b(1) & 0x3F) << 6 | (b(2) & 0x3F);
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    const uint8_t lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    if (!cont(1, lo, hi) || !cont(2) || !cont(3)) return 0;
    *cp = uint32_t(c & 0x07) << 18 | uint32_t(b(1) & 0x3F) << 12 | uint32_t(b(2) & 0x3F) << 6 | (b(3) & 0x3F);
    return 4;
  }
  return 0;
}

// Characters that act on a terminal, break a line or reorder what is shown:
// C0, DEL, C1, the line and paragraph separators, the bidirectional marks,
// embeddings, overrides and isolates.
bool acts(uint32_t cp) {
  return cp < 0x20 || (cp >= 0x7F && cp <= 0x9F) || cp == 0x061C || cp == 0x200E || cp == 0x200F ||
         (cp >= 0x2028 && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

void hex_byte(std::string& o, uint8_t c) {
  static const char* digits = "0123456789abcdef";
  o += "\\x";
  o += digits[c >> 4];
  o += digits[c & 15];
}

// "\\u202e": only ever a code point of the BMP here.
void u_escape(std::string& o, uint32_t cp) {
  static const char* digits = "0123456789abcdef";
  o += "\\u";
  for (int shift = 12; shift >= 0; shift -= 4) o += digits[(cp >> shift) & 15];
}

// display_name's escape of one character that acts (or of a byte outside UTF-8).
void escape_acting(std::string& o, uint32_t cp) {
  switch (cp) {
    case '\n': o += "\\n"; return;
    case '\r': o += "\\r"; return;
    case '\t': o += "\\t"; return;
    default: break;
  }
  if (cp < 0x20 || cp == 0x7F) hex_byte(o, uint8_t(cp));
  else u_escape(o, cp);
}

// Whether s needs no escaping at all: printable ASCII (and '\n' when kept).
bool plain_ascii(std::string_view s, bool keep_newlines) {
  for (char ch : s) {
    const uint8_t c = uint8_t(ch);
    if (c >= 0x20 && c < 0x7F) continue;
    if (c == '\n' && keep_newlines) continue;
    return false;
  }
  return true;
}

// Calls emit(code point, bytes) for each well-formed character and
// bad(byte) for each byte that is not part of one.
template <class Emit, class Bad>
void each_char(std::string_view s, Emit emit, Bad bad) {
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = 0;
    const size_t n = utf8_at(s, i, &cp);
    if (n == 0) {
      bad(uint8_t(s[i]));
      ++i;
      continue;
    }
    emit(cp, s.substr(i, n));
    i += n;
  }
}

std::string escape_text(std::string_view s, bool keep_newlines) {
  if (plain_ascii(s, keep_newlines)) return std::string(s);
  std::string o;
  o.reserve(s.size() + 16);
  each_char(
      s,
      [&](uint32_t cp, std::string_view bytes) {
        if (cp == '\n' && keep_newlines) o += '\n';
        else if (acts(cp)) escape_acting(o, cp);
        else o.append(bytes);
      },
      [&](uint8_t c) { hex_byte(o, c); });
  return o;
}

}  // namespace

std::string display_name(std::string_view s) { return escape_text(s, false); }
std::string terminal_safe(std::string_view s) { return escape_text(s, true); }

// ---------------------------------------------------------------------------
// Fitting text to a width (display columns).

namespace {

// Columns a character takes: 0 for combining marks and zero-width
// characters, 2 for East Asian wide and fullwidth characters and most emoji,
// 1 otherwise.
size_t char_columns(uint32_t cp) {
  if ((cp >= 0x0300 && cp <= 0x036F) || (cp >= 0x200B && cp <= 0x200D) || (cp >= 0xFE00 && cp <= 0xFE0F) ||
      cp == 0xFEFF)
    return 0;
  if ((cp >= 0x1100 && cp <= 0x115F) || (cp >= 0x2E80 && cp <= 0x303E) || (cp >= 0x3041 && cp <= 0xA4CF) ||
      (cp >= 0xAC00 && cp <= 0xD7A3) || (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0xFE30 && cp <= 0xFE4F) ||
      (cp >= 0xFF00 && cp <= 0xFF60) || (cp >= 0xFFE0 && cp <= 0xFFE6) || (cp >= 0x1F300 && cp <= 0x1F64F) ||
      (cp >= 0x1F900 && cp <= 0x1F9FF) || (cp >= 0x20000 && cp <= 0x3FFFD))
    return 2;
  return 1;
}

bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// The bytes of the unit of text at s[i] that is never cut: an escape that
// display_name writes (\n \r \t \xNN \uNNNN), one UTF-8 character, or a
// single byte (what terminal_safe leaves is valid UTF-8; a stray byte counts
// as one column).
size_t unit_at(std::string_view s, size_t i, size_t* columns) {
  *columns = 1;
  if (s[i] == '\\' && i + 1 < s.size()) {
    const char c = s[i + 1];
    if (c == 'n' || c == 'r' || c == 't') {
      *columns = 2;
      return 2;
    }
    if (c == 'x' && i + 3 < s.size() && is_hex(s[i + 2]) && is_hex(s[i + 3])) {
      *columns = 4;
      return 4;
    }
    if (c == 'u' && i + 5 < s.size() && is_hex(s[i + 2]) && is_hex(s[i + 3]) && is_hex(s[i + 4]) && is_hex(s[i + 5])) {
      *columns = 6;
      return 6;
    }
    return 1;
  }
  uint32_t cp = 0;
  const size_t n = utf8_at(s, i, &cp);
  if (n == 0) return 1;
  *columns = char_columns(cp);
  return n;
}

constexpr std::string_view kEllipsis = "\xe2\x80\xa6";  // "…": one column

// A word's pieces of at most `room` columns each (room >= 1), cut between units.
std::vector<std::string_view> split_columns(std::string_view w, size_t room) {
  std::vector<std::string_view> out;
  size_t start = 0, cols = 0;
  for (size_t i = 0; i < w.size();) {
    size_t c = 0;
    const size_t n = unit_at(w, i, &c);
    if (cols + c > room && i > start) {
      out.push_back(w.substr(start, i - start));
      start = i;
      cols = 0;
    }
    cols += c;
    i += n;
  }
  out.push_back(w.substr(start));
  return out;
}

// A paragraph `text` after `lead`, word-wrapped at `width` with the lead's
// width as the hanging indent; a number stays with its unit; a word wider
// than the room left is cut between characters.
void wrap_paragraph(std::string& out, std::string_view lead, std::string_view text, size_t width) {
  const size_t indent = std::min(display_columns(lead), width > 20 ? width - 20 : size_t(0));
  const size_t room = width - indent;
  std::string line(lead);
  size_t cols = display_columns(lead);
  bool empty = true;  // nothing after the lead yet
  auto flush = [&]() {
    out += line;
    out += '\n';
    line.assign(indent, ' ');
    cols = indent;
    empty = true;
  };
  size_t i = 0;
  while (i <= text.size()) {
    size_t j = text.find(' ', i);
    if (j == std::string_view::npos) j = text.size();
    if (j > i && j < text.size() && text[j - 1] >= '0' && text[j - 1] <= '9') {
      size_t k = text.find(' ', j + 1);
      if (k == std::string_view::npos) k = text.size();
      if (is_unit_word(text.substr(j + 1, k - j - 1))) j = k;
    }
    const std::string_view word = text.substr(i, j - i);
    const size_t wc = display_columns(word);
    if (!empty && cols + 1 + wc > width) flush();
    if (empty && cols >= width) flush();  // a lead as wide as the line
    if (!empty) {
      line += ' ';
      ++cols;
    }
    if (cols + wc <= width) {
      line += word;
      cols += wc;
    } else {
      // Longer than a line: cut between characters.
      const auto pieces = split_columns(word, cols < width ? width - cols : room);
      for (size_t p = 0; p < pieces.size(); ++p) {
        if (p) flush();
        line += pieces[p];
        cols += display_columns(pieces[p]);
      }
    }
    empty = false;
    if (j >= text.size()) break;
    i = j + 1;
  }
  out += line;
  out += '\n';
}

}  // namespace

size_t display_columns(std::string_view s) {
  size_t cols = 0;
  for (size_t i = 0; i < s.size();) {
    size_t c = 0;
    i += unit_at(s, i, &c);
    cols += c;
  }
  return cols;
}

std::string fit_columns(std::string_view s, size_t columns) {
  if (display_columns(s) <= columns) return std::string(s);
  if (columns == 0) return {};
  size_t cols = 0, i = 0;
  while (i < s.size()) {
    size_t c = 0;
    const size_t n = unit_at(s, i, &c);
    if (cols + c > columns - 1) break;
    cols += c;
    i += n;
  }
  std::string out(s.substr(0, i));
  while (!out.empty() && out.back() == ' ') out.pop_back();
  out += kEllipsis;
  return out;
}

std::string prose(std::string_view lead, std::string_view text) {
  std::string out;
  out.reserve(lead.size() + text.size() + 3);
  out += kProseStart;
  out += lead;
  out += kProseText;
  for (char c : text) out += c == '\n' ? ' ' : c;
  out += '\n';
  return out;
}

std::string finish_text(std::string_view raw, size_t width) {
  width = std::clamp(width, kMinTextWidth, kMaxTextWidth);
  std::string out;
  out.reserve(raw.size() + raw.size() / 16);
  size_t i = 0;
  while (i < raw.size()) {
    size_t e = raw.find('\n', i);
    const bool last = e == std::string_view::npos;
    if (last) e = raw.size();
    const std::string_view line = raw.substr(i, e - i);
    const size_t mark = line.find(kProseText);
    if (!line.empty() && line[0] == kProseStart && mark != std::string_view::npos) {
      // Prose: escaped, then wrapped.
      wrap_paragraph(out, terminal_safe(line.substr(1, mark - 1)), terminal_safe(line.substr(mark + 1)), width);
    } else {
      // Anything else (a table row, a title): escaped, then cut to the width.
      out += fit_columns(terminal_safe(line), width);
      if (!last) out += '\n';
    }
    i = e + 1;
  }
  return out;
}

std::string json_safe(std::string json) {
  bool any = false;
  for (char ch : json)
    if (uint8_t(ch) >= 0x7F) {
      any = true;
      break;
    }
  if (!any) return json;
  std::string o;
  o.reserve(json.size() + 16);
  // Runs of ASCII are copied whole (C0 characters never appear raw inside a
  // dumped string: nlohmann escapes them; the raw '\n' and spaces are the
  // indentation); each other character is looked at alone.
  const std::string_view s = json;
  for (size_t i = 0; i < s.size();) {
    size_t j = i;
    while (j < s.size() && uint8_t(s[j]) < 0x7F) ++j;
    o.append(s.substr(i, j - i));
    if (j == s.size()) break;
    uint32_t cp = 0;
    const size_t n = utf8_at(s, j, &cp);
    if (n == 0) {
      o += "\\ufffd";  // not reached: the dump replaced them
      i = j + 1;
      continue;
    }
    if (acts(cp)) u_escape(o, cp);
    else o.append(s.substr(j, n));
    i = j + n;
  }
  return o;
}

std::string markdown_text(std::string_view s) {
  const std::string t = display_name(s);
  std::string o;
  o.reserve(t.size());
  for (char ch : t) {
    switch (ch) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '|': o += "\\|"; break;
      case '\\': o += "\\\\"; break;
      case '`': o += "\\`"; break;
      default: o += ch;
    }
  }
  return o;
}

std::string markdown_code(std::string_view s) {
  std::string t = display_name(s);
  std::string body;
  body.reserve(t.size());
  size_t run = 0, longest = 0;
  for (char ch : t) {
    run = ch == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
    if (ch == '|') body += "\\|";
    else body += ch;
  }
  const std::string fence(longest + 1, '`');
  // A span that starts or ends with a backtick needs a space inside its
  // fence (CommonMark strips one from each side).
  const bool pad = !body.empty() && (body.front() == '`' || body.back() == '`');
  if (body.empty()) return "` `";
  return fence + (pad ? " " : "") + body + (pad ? " " : "") + fence;
}

std::string github_message(std::string_view s) {
  std::string o;
  for (char c : display_name(s)) {
    if (c == '%') o += "%25";
    else if (c == '\r') o += "%0D";
    else if (c == '\n') o += "%0A";
    else o += c;
  }
  return o;
}

std::string github_property(std::string_view s) {
  std::string o;
  for (char c : github_message(s)) {
    if (c == ':') o += "%3A";
    else if (c == ',') o += "%2C";
    else o += c;
  }
  return o;
}

std::string escape(std::string_view s, Markup m) {
  std::string o;
  o.reserve(s.size());
  each_char(
      s,
      [&](uint32_t cp, std::string_view bytes) {
        switch (cp) {
          case '&': o += "&amp;"; return;
          case '<': o += "&lt;"; return;
          case '>': o += "&gt;"; return;
          case '"': o += "&quot;"; return;
          case '\'':
            if (m == Markup::Html) o += "&#39;";
            else if (m == Markup::Xml) o += "&apos;";
            else o += '\'';
            return;
          case '\n':
          case '\t':
          case '\r':
            // XML keeps them (the text of a JUnit failure has lines); a
            // label draws them as spaces; HTML shows them as display_name does.
            if (m == Markup::Xml) o += char(cp);
            else if (m == Markup::DotLabel) o += ' ';
            else escape_acting(o, cp);
            return;
          default: break;
        }
        // XML 1.0 also forbids U+FFFE and U+FFFF.
        if (acts(cp) || (m == Markup::Xml && (cp == 0xFFFE || cp == 0xFFFF))) escape_acting(o, cp);
        else o.append(bytes);
      },
      [&](uint8_t c) { hex_byte(o, c); });
  return o;
}

std::vector<std::pair<int64_t, size_t>> categories_by_size(const std::vector<int64_t>& bytes, int64_t& total) {
  std::vector<std::pair<int64_t, size_t>> rows;
  total = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    total += bytes[i];
    if (bytes[i] != 0) rows.push_back({bytes[i], i});
  }
  std::sort(rows.begin(), rows.end(),
            [](const auto& x, const auto& y) { return x.first != y.first ? x.first > y.first : x.second < y.second; });
  return rows;
}

}  // namespace detail

}  // namespace snapdiff
