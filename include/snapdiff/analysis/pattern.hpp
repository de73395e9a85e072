// snapdiff/analysis/pattern.hpp — the regular expressions of rules files.
//
// RE2 syntax (https://github.com/google/re2/wiki/Syntax): what ECMAScript
// has except back-references and look-around. Matching runs in time linear
// in the subject and without recursion, so a frame name of megabytes from a
// hostile input cannot exhaust the stack, and a pattern's own size is
// bounded (repetition counts at most 1000, compiled program at most 8 MiB;
// rules files are held to smaller limits still, RuleSet in attribution.hpp).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace re2 {
class RE2;
}

namespace snapdiff {

class Pattern {
 public:
  Pattern() = default;
  // Throws std::invalid_argument with RE2's reason on a bad pattern.
  explicit Pattern(const std::string& re);
  // A pattern known to compile (the built-in rules': a test compiles every
  // one), compiled when it is first matched or measured, once, whichever
  // thread asks: a report whose frames a PatternSet matches never compiles
  // it alone. One that does not compile after all never matches.
  static Pattern deferred(const std::string& re);
  // True when the pattern matches somewhere in s (an unset pattern: never).
  bool search(std::string_view s) const;
  bool empty() const { return !re_; }
  // The pattern as written ("" when unset).
  const std::string& source() const;
  // The size of its compiled program (RE2's instruction count; 0 when unset):
  // what matching one byte of a subject can cost at worst.
  int program_size() const;

 private:
  struct Compiled;
  const re2::RE2* compiled() const;  // nullptr: unset, or a deferred one that does not compile
  std::shared_ptr<Compiled> re_;
};

// Many patterns matched at once: one pass over a subject says which of them
// match somewhere in it (RE2::Set; its automaton is bounded in memory and
// shared by every subject). A frame is matched against every rule in one
// pass instead of once per rule.
class PatternSet {
 public:
  PatternSet();
  ~PatternSet();
  PatternSet(PatternSet&&) noexcept;
  PatternSet& operator=(PatternSet&&) noexcept;
  // The patterns, by index (each kept alive by the set). Unset ones never match.
  explicit PatternSet(std::vector<Pattern> patterns);
  size_t size() const { return patterns_.size(); }
  // Indices of the patterns that match somewhere in s, ascending, into *out
  // (cleared first).
  void match(std::string_view s, std::vector<int>* out) const;

 private:
  std::vector<Pattern> patterns_;
  std::vector<int> set_index_;  // set's pattern number -> index into patterns_
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace snapdiff
