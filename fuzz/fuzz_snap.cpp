// The .snap reader, both encodings (JSON text; version 3, binary: the seed
// fuzz/seeds/snap_v3_small_oom.snap), then analysis.
#include <cstdint>
#include <string_view>

#include "fuzz_common.hpp"
#include "snapdiff/input/input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace snapdiff;
  fuzz::expect_result_or_input_error([&] {
    Trace t;
    read_snap(std::string_view(reinterpret_cast<const char*>(data), size), t);
    fuzz::analyze(t);
  });
  return 0;
}
