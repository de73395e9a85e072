#include "snapdiff/analysis/pattern.hpp"

#include <re2/re2.h>

#include <stdexcept>

namespace snapdiff {

Pattern::Pattern(const std::string& re) {
  RE2::Options o;
  o.set_log_errors(false);  // the library never prints; the error goes into the exception
  o.set_never_capture(true);
  o.set_max_mem(int64_t(8) << 20);
  auto p = std::make_shared<const RE2>(re, o);
  if (!p->ok()) throw std::invalid_argument(p->error());
  re_ = std::move(p);
}

bool Pattern::search(std::string_view s) const {
  return re_ && RE2::PartialMatch(re2::StringPiece(s.data(), s.size()), *re_);
}

}  // namespace snapdiff
