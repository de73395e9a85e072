// Text fitted to a width (issue 38, "Readable text"): display columns
// counted per character, cells cut with "…" never inside a UTF-8 character
// or an escape, prose wrapped with a hanging indent.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>

#include "report/format.hpp"
#include "snapdiff/report/report.hpp"

using namespace snapdiff;
using detail::display_columns;
using detail::finish_text;
using detail::fit_columns;
using detail::prose;

namespace {

// Each line of `text` and the most columns any of them takes.
size_t widest(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  size_t w = 0;
  while (std::getline(in, line)) w = std::max(w, display_columns(line));
  return w;
}

}  // namespace

TEST_CASE("display columns: characters, not bytes; escapes as written", "[report]") {
  CHECK(display_columns("abc") == 3);
  CHECK(display_columns("\xe2\x80\xa6") == 1);          // …: 3 bytes, 1 column
  CHECK(display_columns("caf\xc3\xa9") == 4);          // é
  CHECK(display_columns("\xe4\xb8\xad\xe6\x96\x87") == 4);  // two wide CJK characters
  CHECK(display_columns("e\xcc\x81") == 1);             // e + combining acute
  CHECK(display_columns("\\x1b[31m") == 8);
}

TEST_CASE("fit_columns cuts with an ellipsis, never inside a character or an escape", "[report]") {
  CHECK(fit_columns("short", 10) == "short");
  CHECK(fit_columns("abcdefghij", 5) == "abcd\xe2\x80\xa6");
  // "é" is two bytes: a byte count would cut it in half.
  CHECK(fit_columns("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", 3) == "\xc3\xa9\xc3\xa9\xe2\x80\xa6");
  // An escape is kept whole or left out whole.
  CHECK(fit_columns("ab\\x1bcdef", 5) == "ab\xe2\x80\xa6");
  CHECK(fit_columns("ab\\x1bcdef", 7) == "ab\\x1b\xe2\x80\xa6");
  // A wide character that does not fit is left out whole.
  CHECK(fit_columns("a\xe4\xb8\xad\xe6\x96\x87", 3) == "a\xe2\x80\xa6");
  for (size_t w = 1; w < 12; ++w) CHECK(display_columns(fit_columns("x\xc3\xa9\\u202e\xe4\xb8\xadyz", w)) <= w);
}

TEST_CASE("finish_text: prose wrapped with a hanging indent, other lines cut, controls escaped", "[report]") {
  const std::string words = "The peak, 411.3 MiB, is reached in iteration 2, in the backward pass: activation 157.1 MiB, "
                            "optimizer_state 84.1 MiB, temporary 64.0 MiB, workspace 64.0 MiB.";
  const std::string raw = "TITLE\n" + prose("  * ", words) + std::string(100, '-') + "\n" + "bell\x07here\n";
  const std::string out = finish_text(raw, 40);
  CHECK(widest(out) <= 40);
  CHECK(out.find('\x1e') == std::string::npos);
  CHECK(out.find('\x1f') == std::string::npos);
  CHECK(out.find("\n  * The peak,") != std::string::npos);
  CHECK(out.find("\n    ") != std::string::npos);                 // the hanging indent
  CHECK(out.find("411.3 MiB") != std::string::npos);              // a number stays with its unit
  CHECK(out.find(std::string(39, '-') + "\xe2\x80\xa6") != std::string::npos);
  CHECK(out.find("bell\\x07here") != std::string::npos);
  // Every word is still there, in order.
  std::string joined;
  for (char c : out.substr(out.find("* ") + 2, out.find("---") - out.find("* ") - 2)) joined += c == '\n' ? ' ' : c;
  std::string squeezed;
  for (char c : joined)
    if (!(c == ' ' && !squeezed.empty() && squeezed.back() == ' ')) squeezed += c;
  CHECK(squeezed.find(words) == 0);
  // A word longer than the line is cut between characters, not dropped.
  const std::string long_word(150, 'w');
  const std::string cut = finish_text(prose("  ", long_word), 50);
  CHECK(widest(cut) <= 50);
  size_t ws = 0;
  for (char c : cut) ws += c == 'w';
  CHECK(ws == 150);
  // Widths below the minimum count as the minimum.
  CHECK(widest(finish_text(std::string(200, 'x'), 1)) == kMinTextWidth);
}
