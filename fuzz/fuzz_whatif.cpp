// `snapdiff whatif`: the allocator settings parser (PYTORCH_CUDA_ALLOC_CONF,
// --alloc-conf) and the model of the caching allocator under the settings
// it accepts, driven by a small program of requests (whatif_program.hpp).
// The parser refuses with a UsageError or accepts; whatever is then modelled
// must be possible: reserved never below allocated, nothing negative.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fuzz_common.hpp"
#include "whatif_program.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace snapdiff;
  fuzz::WhatIfCase c = fuzz::whatif_case(std::string_view(reinterpret_cast<const char*>(data), size));
  AllocConf conf;
  try {
    conf = parse_alloc_conf(c.conf);
  } catch (const UsageError&) {
    return 0;  // refused with its line: the promised outcome
  } catch (const std::exception& e) {
    std::fprintf(stderr, "parse_alloc_conf threw neither UsageError nor InputError: %s\n", e.what());
    std::abort();
  }
  fuzz::expect_result_or_input_error([&] {
    WhatIfResult r;
    try {
      r = what_if(c.trace, {conf}, c.opts);
    } catch (const UsageError&) {
      return;  // a setting the model refuses for this run, said in one line
    }
    const std::string bad = fuzz::whatif_impossible(r);
    if (!bad.empty()) {
      std::fprintf(stderr, "impossible whatif figures: %s\n", bad.c_str());
      std::abort();
    }
  });
  return 0;
}
