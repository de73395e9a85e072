// The restricted unpickler alone, then analysis of what it built.
#include <cstdint>

#include "fuzz_common.hpp"
#include "snapdiff/input/input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace snapdiff;
  fuzz::expect_result_or_input_error([&] {
    Trace t;
    read_torch_pickle(data, size, t);
    fuzz::analyze(t);
  });
  return 0;
}
