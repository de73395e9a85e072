// Shared by the libFuzzer targets: the contract is "a result or an
// InputError", so any other exception is a finding and aborts.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>

#include "snapdiff/error.hpp"
#include "snapdiff/analysis/analysis.hpp"
#include "snapdiff/report/report.hpp"

namespace snapdiff::fuzz {

template <typename F>
void expect_result_or_input_error(F&& f) {
  try {
    f();
  } catch (const InputError&) {
    // the promised outcome for bad input
  } catch (const std::exception& e) {
    std::fprintf(stderr, "not an InputError: %s\n", e.what());
    std::abort();
  }
}

// A trace that reads must also analyze (replay, attribution, report data):
// hostile but well-formed inputs reach the analysis too.
inline void analyze(const Trace& t) {
  ReportOptions o;
  (void)analyze(t, o);
}

}  // namespace snapdiff::fuzz
