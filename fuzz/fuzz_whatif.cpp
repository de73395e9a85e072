// `snapdiff whatif`: the allocator settings parser (PYTORCH_CUDA_ALLOC_CONF,
// --alloc-conf) and the model of the caching allocator under the settings
// it accepts. The input's first line is the settings text; the bytes after
// it are a small program of requests (alloc of a size picked from 512 B to
// 2 TiB, free, free completed, a segment free as empty_cache() leaves it)
// and a memory limit. Whatever is modelled must be possible: reserved never
// below allocated, nothing negative, an OOM only under a limit.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_common.hpp"
#include "snapdiff/analysis/whatif.hpp"
#include "snapdiff/input/input.hpp"

namespace {

[[noreturn]] void impossible(const char* what, const snapdiff::WhatIfScenario& s) {
  std::fprintf(stderr, "impossible whatif figures (%s): conf '%s' requested %lld allocated %lld active %lld "
               "reserved %lld cached_at_peak %lld\n",
               what, s.alloc_conf.c_str(), (long long)s.requested, (long long)s.allocated, (long long)s.active,
               (long long)s.reserved, (long long)s.cached_at_peak);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace snapdiff;
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t nl = in.find('\n');
  const std::string_view conf_text = in.substr(0, nl == std::string_view::npos ? in.size() : nl);
  const std::string_view prog = nl == std::string_view::npos ? std::string_view() : in.substr(nl + 1);
  AllocConf conf;
  try {
    conf = parse_alloc_conf(conf_text);
  } catch (const UsageError&) {
    return 0;  // refused with its line: the promised outcome
  } catch (const InputError&) {
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "parse_alloc_conf threw neither UsageError nor InputError: %s\n", e.what());
    std::abort();
  }
  Trace t;
  Device& d = t.device(0);
  d.has_trace = true;
  static const uint64_t kGranule[4] = {512, uint64_t(1) << 20, uint64_t(64) << 20, uint64_t(1) << 30};
  std::vector<uint64_t> live;  // addresses of live allocations
  uint64_t next_addr = uint64_t(1) << 44;
  int64_t time = 1;
  WhatIfOptions opts;
  opts.threads = 1;
  for (size_t i = 0; i + 3 <= prog.size() && d.events.size() < 4096; i += 3) {
    const uint8_t op = uint8_t(prog[i]);
    const uint64_t arg = (uint64_t(uint8_t(prog[i + 1])) << 8) | uint8_t(prog[i + 2]);
    Event e;
    e.time_us = time++;
    e.stream = (op >> 6) & 1;
    switch (op & 7) {
      case 0:
      case 1:
      case 2: {  // alloc
        e.kind = EventKind::Alloc;
        e.size = (arg + 1) * kGranule[(op >> 3) & 3];
        e.addr = next_addr;
        next_addr += (e.size + 4095) / 4096 * 4096 + 4096;
        live.push_back(e.addr);
        break;
      }
      case 3:
      case 4: {  // free requested and completed
        if (live.empty()) continue;
        const size_t k = arg % live.size();
        e.kind = EventKind::FreeRequested;
        e.addr = live[k];
        d.events.push_back(e);
        e.kind = EventKind::FreeCompleted;
        e.time_us = time++;
        live[k] = live.back();
        live.pop_back();
        break;
      }
      case 5: {  // a segment released (empty_cache)
        e.kind = EventKind::SegmentFree;
        e.addr = next_addr;
        e.size = (arg + 1) << 20;
        break;
      }
      case 6: {  // a memory limit
        opts.memory_limit = int64_t(arg + 1) << 24;
        opts.limit_is_fraction = op & 8;
        continue;
      }
      default:
        continue;
    }
    d.events.push_back(e);
  }
  fuzz::expect_result_or_input_error([&] {
    WhatIfResult r;
    try {
      r = what_if(t, {conf}, opts);
    } catch (const UsageError&) {
      return;  // a setting the model refuses for this run, said in one line
    }
    for (const WhatIfScenario& s : r.scenarios) {
      if (s.requested < 0 || s.allocated < 0 || s.active < 0 || s.reserved < 0) impossible("negative", s);
      if (s.reserved < s.allocated) impossible("reserved below allocated", s);
      if (s.allocated < s.requested) impossible("allocated below requested", s);
      if (s.cached_at_peak < 0) impossible("negative cached bytes", s);
    }
  });
  return 0;
}
