// The injection library's log reader (capture/inject/log_reader.cpp): a
// result or an InputError; what reads also writes as a .snap that reads back.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "fuzz_common.hpp"
#include "log_reader.hpp"
#include "snapdiff/input/input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace snapdiff;
  fuzz::expect_result_or_input_error([&] {
    Trace t;
    snapcapture::log::read_log_bytes(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.sclog", t);
    Trace back;
    try {
      read_snap(write_snap_json(t), back);
    } catch (const InputError& e) {
      std::fprintf(stderr, "a log that reads wrote a .snap that does not: %s\n", e.describe().c_str());
      std::abort();
    }
  });
  return 0;
}
