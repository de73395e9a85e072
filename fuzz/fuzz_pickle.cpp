// The restricted unpickler alone, then analysis of what it built; and the
// reader's trace-entry fast path against its general path (differential):
// the same model, or the same error at the same offset.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "fuzz_common.hpp"
#include "input/pickle_doc.hpp"
#include "snapdiff/error.hpp"
#include "snapdiff/input/input.hpp"

namespace {
// The model as .snap JSON, or "error OFFSET: MESSAGE".
std::string outcome(const uint8_t* data, size_t size, bool fast) {
  using namespace snapdiff;
  try {
    Trace t;
    detail::read_torch_pickle_path(data, size, t, fast);
    return write_snap_json(t);
  } catch (const InputError& e) {
    return "error " + std::to_string(e.offset()) + ": " + e.what();
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace snapdiff;
  fuzz::expect_result_or_input_error([&] {
    Trace t;
    read_torch_pickle(data, size, t);
    fuzz::analyze(t);
  });
  if (outcome(data, size, true) != outcome(data, size, false)) std::abort();
  return 0;
}
