#include "snapdiff/analysis/pattern.hpp"

#include <re2/re2.h>
#include <re2/set.h>

#include <algorithm>
#include <mutex>
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

// The source, and its RE2 once compiled (at construction, or at first use
// for a deferred pattern).
struct Pattern::Compiled {
  std::string source;
  mutable std::once_flag once;
  mutable std::unique_ptr<const RE2> re;
  const RE2* get() const {
    std::call_once(once, [this] {
      auto p = std::make_unique<const RE2>(source, options(int64_t(8) << 20));
      if (p->ok()) re = std::move(p);
    });
    return re.get();
  }
};

Pattern::Pattern(const std::string& re) {
  auto c = std::make_shared<Compiled>();
  c->source = re;
  auto p = std::make_unique<const RE2>(re, options(int64_t(8) << 20));
  if (!p->ok()) throw std::invalid_argument(p->error());
  c->re = std::move(p);
  std::call_once(c->once, [] {});  // compiled already: get() does not compile again
  re_ = std::move(c);
}

Pattern Pattern::deferred(const std::string& re) {
  Pattern p;
  p.re_ = std::make_shared<Compiled>();
  p.re_->source = re;
  return p;
}

const RE2* Pattern::compiled() const { return re_ ? re_->get() : nullptr; }

bool Pattern::search(std::string_view s) const {
  const RE2* r = compiled();
  return r && RE2::PartialMatch(re2::StringPiece(s.data(), s.size()), *r);
}

const std::string& Pattern::source() const {
  static const std::string none;
  return re_ ? re_->source : none;
}

int Pattern::program_size() const {
  const RE2* r = compiled();
  return r ? r->ProgramSize() : 0;
}

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
