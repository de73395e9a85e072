// Internal: bounds the nesting of a JSON text before a tree library builds
// it. nlohmann_json parses iteratively but copies and compares trees by
// recursion, so a document nested 200,000 deep overflows the stack; the
// files snapdiff reads as JSON trees (budgets, rules, .snap) are a few levels
// deep, and anything deeper than kMaxJsonDepth is refused as an input error
// at the byte where the limit is crossed.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "snapdiff/error.hpp"

namespace snapdiff::detail {

inline constexpr size_t kMaxJsonDepth = 256;

// One pass over the text: brackets outside strings (a backslash escapes the
// next byte inside a string). Malformed JSON is left for the parser to report.
inline void check_json_depth(std::string_view text, size_t max_depth = kMaxJsonDepth) {
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth)
        throw InputError(uint64_t(i), "JSON nested deeper than " + std::to_string(max_depth) +
                                          " levels (snapdiff's limit for this file)");
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
}

}  // namespace snapdiff::detail
