// export_memory_timeline outputs (.json and raw .json.gz).
#include <cstdint>
#include <string_view>

#include "fuzz_common.hpp"
#include "snapdiff/input/profiler.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace snapdiff;
  fuzz::expect_result_or_input_error([&] {
    LoadOptions opts;
    opts.max_decoded_bytes = uint64_t(64) << 20;
    (void)read_memory_timeline(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.json", opts);
  });
  return 0;
}
