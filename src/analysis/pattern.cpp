#include "snapdiff/analysis/pattern.hpp"

#include <re2/re2.h>
#include <re2/set.h>

#include <algorithm>
#include <stdexcept>

namespace snapdiff {

namespace {
RE2::Options options(int64_t max_mem) {
  RE2::Options o;
  o.set_log_errors(false);  // the library never prints; the error goes into the exception
  o.set_never_capture(true);
  o.set_max_mem(max_mem);
  return o;
}
}  // namespace

Pattern::Pattern(const std::string& re) {
  auto p = std::make_shared<const RE2>(re, options(int64_t(8) << 20));
  if (!p->ok()) throw std::invalid_argument(p->error());
  re_ = std::move(p);
}

bool Pattern::search(std::string_view s) const {
  return re_ && RE2::PartialMatch(re2::StringPiece(s.data(), s.size()), *re_);
}

const std::string& Pattern::source() const {
  static const std::string none;
  return re_ ? re_->pattern() : none;
}

int Pattern::program_size() const { return re_ ? re_->ProgramSize() : 0; }

struct PatternSet::Impl {
  // The set's automaton: 64 MiB at most (RE2 discards and rebuilds its
  // states when they fill it).
  RE2::Set set{options(int64_t(64) << 20), RE2::UNANCHORED};
  bool ok = false;
};

PatternSet::PatternSet() = default;
PatternSet::~PatternSet() = default;
PatternSet::PatternSet(PatternSet&&) noexcept = default;
PatternSet& PatternSet::operator=(PatternSet&&) noexcept = default;

PatternSet::PatternSet(std::vector<Pattern> patterns) : patterns_(std::move(patterns)), impl_(std::make_unique<Impl>()) {
  for (size_t i = 0; i < patterns_.size(); ++i) {
    if (patterns_[i].empty()) continue;
    std::string err;
    if (impl_->set.Add(patterns_[i].source(), &err) < 0) {
      // Cannot happen for a pattern that compiled alone; match it alone then.
      impl_.reset();
      return;
    }
    set_index_.push_back(int(i));
  }
  impl_->ok = !set_index_.empty() && impl_->set.Compile();
  if (!impl_->ok) impl_.reset();
}

void PatternSet::match(std::string_view s, std::vector<int>* out) const {
  out->clear();
  if (impl_) {
    RE2::Set::ErrorInfo info;
    if (impl_->set.Match(re2::StringPiece(s.data(), s.size()), out, &info)) {
      for (int& k : *out) k = set_index_[size_t(k)];
      std::sort(out->begin(), out->end());
      return;
    }
    if (info.kind == RE2::Set::kNoError) return;  // nothing matched
    out->clear();  // the automaton ran out of memory on this subject: one pattern at a time
  }
  for (size_t i = 0; i < patterns_.size(); ++i)
    if (patterns_[i].search(s)) out->push_back(int(i));
}

}  // namespace snapdiff
