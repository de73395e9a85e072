// Budget files (snapdiff check --budget).
#include <cstdint>
#include <string>

#include "fuzz_common.hpp"
#include "snapdiff/input/budget_io.hpp"
#include "snapdiff/analysis/check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace snapdiff;
  fuzz::expect_result_or_input_error([&] {
    (void)parse_budget(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
  });
  return 0;
}
