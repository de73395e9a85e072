// The q-quantile of sorted values, interpolated linearly between the two
// nearest ranks (numpy's default): the joins' clock-offset estimates.
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

namespace snapdiff::joins {

inline double quantile_of_sorted(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double pos = q * double(sorted.size() - 1);
  const size_t lo = size_t(std::floor(pos)), hi = size_t(std::ceil(pos));
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - double(lo));
}

}  // namespace snapdiff::joins
