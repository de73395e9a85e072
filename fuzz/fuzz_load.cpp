// The whole loader: format detection, gzip, pickle or .snap, then analysis.
#include <cstdint>
#include <string_view>

#include "fuzz_common.hpp"
#include "snapdiff/input/input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace snapdiff;
  fuzz::expect_result_or_input_error([&] {
    LoadOptions opts;
    opts.max_decoded_bytes = uint64_t(64) << 20;
    Trace t = load_trace_from_memory(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz", opts);
    fuzz::analyze(t);
  });
  return 0;
}
