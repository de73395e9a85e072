// snapdiff/analysis/pattern.hpp — the regular expressions of rules files.
//
// RE2 syntax (https://github.com/google/re2/wiki/Syntax): what ECMAScript
// has except back-references and look-around. Matching runs in time linear
// in the subject and without recursion, so a frame name of megabytes from a
// hostile input cannot exhaust the stack, and a pattern's own size is
// bounded (repetition counts at most 1000, compiled program at most 8 MiB).
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace re2 {
class RE2;
}

namespace snapdiff {

class Pattern {
 public:
  Pattern() = default;
  // Throws std::invalid_argument with RE2's reason on a bad pattern.
  explicit Pattern(const std::string& re);
  // True when the pattern matches somewhere in s (an unset pattern: never).
  bool search(std::string_view s) const;
  bool empty() const { return !re_; }

 private:
  std::shared_ptr<const re2::RE2> re_;
};

}  // namespace snapdiff
