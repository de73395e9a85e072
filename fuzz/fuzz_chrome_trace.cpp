// torch.profiler Chrome traces through the loader (detection, gzip, the
// streaming JSON splitter and event parser, the replay of [memory] events,
// the op/kernel join), then analysis.
#include <cstdint>
#include <string_view>

#include "fuzz_common.hpp"
#include "snapdiff/input/input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace snapdiff;
  fuzz::expect_result_or_input_error([&] {
    LoadOptions opts;
    opts.max_decoded_bytes = uint64_t(64) << 20;
    Trace t = load_trace_from_memory(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.json", opts);
    fuzz::analyze(t);
  });
  return 0;
}
