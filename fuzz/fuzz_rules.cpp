// Attribution rules files (--rules): parsed on top of the built-in rules.
#include <cstdint>
#include <string>

#include "fuzz_common.hpp"
#include "snapdiff/analysis/attribution.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace snapdiff;
  static const RuleSet base = RuleSet::builtin();
  fuzz::expect_result_or_input_error([&] {
    RuleSet r = base;
    r.add_json(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
  });
  return 0;
}
