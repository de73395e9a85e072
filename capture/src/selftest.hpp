#pragma once
#include <ostream>

#include "runtime.hpp"

namespace snapcapture {
// Runs the kernel and training checks; prints one line each; returns the failures.
int run_selftest(Ctx& c, std::ostream& out);
}  // namespace snapcapture
