// Internal: how the report layer writes numbers, times and markup — once,
// for every renderer (human_bytes and human_delta are public, in
// snapdiff/report/report.hpp).
#pragma once

#include "util/utc_time.hpp"  // utc_time

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace snapdiff {
struct FrameRef;
struct KernelRef;
struct ExplainItem;
}  // namespace snapdiff

namespace snapdiff::detail {

// "1,234,567": a count with its thousands grouped.
std::string with_commas(uint64_t v);
// "1,234,567", "-12,000".
std::string with_commas_signed(int64_t v);
// A share as a report column: " 12.5%" (%5.1f; 0.0% when whole is 0).
std::string share_percent(int64_t part, int64_t whole);
// A change as a share of its base: "+6.3%" (`decimals` digits). A zero base
// gives `unchanged` when delta is 0, else `fresh`.
std::string change_percent(int64_t delta, int64_t base, int decimals, std::string_view unchanged,
                           std::string_view fresh);
// A share for tables and tooltips: "12%", "8.5%" (one decimal below 10%).
std::string compact_percent(double share);
// "1.234 s".
std::string seconds(int64_t us);
// The time from `from_us` to `to_us` in seconds, "1.234 s" (negative when
// `to_us` is earlier), computed without overflow for any two int64 times.
std::string seconds_between(int64_t from_us, int64_t to_us);
// The same with its sign always: "+1.234 s", "-0.500 s".
std::string signed_seconds_between(int64_t from_us, int64_t to_us);
// A recording's time span: "2026-11-30 11:03:54.542 UTC + 12.345 s" (utc_time,
// then the time to the last event); "... - 1.000 s (the times go backwards)"
// when the last event is earlier; just the first time when the last is kNoTime.
std::string time_span(int64_t first_us, int64_t last_us, bool milliseconds);
// A moment of a device (--at, --window): "event 1,746 (iteration 2,
// optimizer, +4.700 s)", "before the first event"; the time from the
// device's first event when both are known.
std::string moment_words(int64_t event, int64_t time_us, int64_t first_time_us, std::string_view phase, int iteration);
// to_us - from_us in microseconds, clamped to the int64 range.
int64_t clamped_difference(int64_t from_us, int64_t to_us);

// A frame of a written-out stack: its name and label, or for the frames a
// deep stack leaves out (FrameRef::elided) "<1234 frames elided>" as its name
// and "<1,234 frames elided>" as its label.
std::string frame_name(const FrameRef& f);
std::string frame_label(const FrameRef& f);
// The inverse of frame_name() for those frames: the count in
// "<1234 frames elided>", 0 for every other name.
uint64_t elided_count(std::string_view name);
// A kernel's scope stack, outermost first, from its frames: "iter 2 /
// backward / attn", "<1,234 scopes elided>" where the stack leaves frames
// out, "(outside every scope)" for none.
std::string kernel_scope(const KernelRef& k);
// An explained allocation's evidence (--explain): the rule's, then each
// inference it relied on, "; inferred (pre_trace_parameter): 12 blocks
// (96 MiB) size-matched to ..." (words.cpp).
std::string explain_evidence(const ExplainItem& it);

// ---------------------------------------------------------------------------
// Names are bytes: a frame, file, op or category name, user metadata, a rule,
// the input's file name. Every renderer passes them through one of these
// (docs/reliability.md, "Names, messages and terminals").
//
// Text for a terminal or a CI log: every byte that could act on a terminal
// or start a line is shown as an escape: \n \r \t; \xNN for the other C0
// bytes, DEL and each byte that is not part of valid UTF-8; \u0080-\u009f
// for the C1 controls (when they are valid UTF-8); \u2028 \u2029 and the
// bidirectional controls (\u202a-\u202e, \u2066-\u2069) likewise. Valid
// UTF-8 otherwise passes unchanged, so ordinary names print as they are.
std::string display_name(std::string_view s);
// The same for a whole rendered text, keeping its own line breaks ('\n'):
// the last step of every text renderer, so that no control byte reaches a
// terminal even from a name a renderer forgot (line breaks in names are
// display_name's job).
std::string terminal_safe(std::string_view s);
// ---------------------------------------------------------------------------
// Text fitted to a width (docs/cli.md, "Width"). The caller chooses the
// width (the CLI: the terminal's, 80 when not a terminal, --width); the
// library never asks the terminal.
//
// Display columns of an escaped text: one per character (two for East Asian
// wide characters, none for combining marks), an escape (\x1b) as many as
// it has characters.
size_t display_columns(std::string_view s);
// `s` cut to `columns` display columns with "…" as its last one (never inside
// a UTF-8 character or an escape); `s` itself when it fits.
std::string fit_columns(std::string_view s, size_t columns);
// A paragraph of prose, marked for finish_text() to word-wrap: `lead` starts
// its first line ("  * ") and its width indents the others. One line of the
// raw text (a line break in `text` becomes a space).
constexpr char kProseStart = '\x1e', kProseText = '\x1f';
std::string prose(std::string_view lead, std::string_view text);
// The last step of every text renderer: each line escaped (terminal_safe),
// then fitted to `width` columns: prose() paragraphs word-wrapped, every
// other line (a table row, a title) cut with "…". A width below
// kMinTextWidth counts as kMinTextWidth.
std::string finish_text(std::string_view raw, size_t width);

// nlohmann's dump with invalid UTF-8 replaced by U+FFFD (error_handler_t::replace)
// gives valid UTF-8; this writes the DEL, C1, line-separator and bidi
// characters left in it as \u escapes (JSON strings only hold them, so the
// document means the same), leaving the JSON free of control characters.
std::string json_safe(std::string json);
// Markdown (GitHub Flavored): plain text in a paragraph, list item or table
// cell: display_name, then & < > as entities, | \ ` as backslash escapes.
std::string markdown_text(std::string_view s);
// A code span: display_name, | as \| (GFM unescapes it inside tables too),
// fenced with a run of backticks longer than any in the name.
std::string markdown_code(std::string_view s);
// GitHub Actions workflow commands: a message (display_name, then % \r \n
// as %25 %0D %0A) and a property value (also : and , as %3A %2C).
std::string github_message(std::string_view s);
std::string github_property(std::string_view s);

// Text for markup: HTML (& < > " ' as entities), XML (the same with &apos;),
// or a Graphviz HTML-like label (no apostrophe entity). Every character
// display_name escapes is written as it writes it (\x1b, \n, \u0085, \xff
// for a byte outside UTF-8): XML 1.0 forbids most control characters even
// as character references and the JUnit file declares UTF-8, and Graphviz
// reads a NUL as the end of its input. Except: XML keeps tab, newline and
// carriage return (the text of a JUnit failure has lines; names reach it
// through display_name already), a label draws them as spaces; XML also
// escapes U+FFFE and U+FFFF, which it forbids (\ufffe).
enum class Markup : uint8_t { Html, Xml, DotLabel };
std::string escape(std::string_view s, Markup m);

// The categories of a device's bytes (one entry per category index), largest
// first (ties: by index), those holding nothing left out; `total` their sum.
// The text and Markdown reports' category tables.
std::vector<std::pair<int64_t, size_t>> categories_by_size(const std::vector<int64_t>& bytes, int64_t& total);

}  // namespace snapdiff::detail
