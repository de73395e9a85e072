// fuzz_whatif's input, shared with the contract test that replays its
// findings (tests/data/fuzz_regressions/whatif_*): the first line is the
// PYTORCH_CUDA_ALLOC_CONF text; the bytes after it are a small program of
// requests, 3 bytes each (alloc of (arg+1) x 512 B | 1 MiB | 64 MiB | 1 GiB,
// free, a segment released as empty_cache() leaves it, a memory limit), on
// one of two streams.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "snapdiff/analysis/whatif.hpp"
#include "snapdiff/model/model.hpp"

namespace snapdiff::fuzz {

struct WhatIfCase {
  std::string_view conf;
  Trace trace;
  WhatIfOptions opts;
};

inline WhatIfCase whatif_case(std::string_view in) {
  WhatIfCase c;
  const size_t nl = in.find('\n');
  c.conf = in.substr(0, nl == std::string_view::npos ? in.size() : nl);
  const std::string_view prog = nl == std::string_view::npos ? std::string_view() : in.substr(nl + 1);
  Device& d = c.trace.device(0);
  d.has_trace = true;
  static const uint64_t kGranule[4] = {512, uint64_t(1) << 20, uint64_t(64) << 20, uint64_t(1) << 30};
  std::vector<uint64_t> live;
  uint64_t next_addr = uint64_t(1) << 44;
  int64_t time = 1;
  c.opts.threads = 1;
  for (size_t i = 0; i + 3 <= prog.size() && d.events.size() < 4096; i += 3) {
    const uint8_t op = uint8_t(prog[i]);
    const uint64_t arg = (uint64_t(uint8_t(prog[i + 1])) << 8) | uint8_t(prog[i + 2]);
    Event e;
    e.time_us = time++;
    e.stream = (op >> 6) & 1;
    switch (op & 7) {
      case 0:
      case 1:
      case 2:
        e.kind = EventKind::Alloc;
        e.size = (arg + 1) * kGranule[(op >> 3) & 3];
        e.addr = next_addr;
        next_addr += (e.size + 4095) / 4096 * 4096 + 4096;
        live.push_back(e.addr);
        break;
      case 3:
      case 4: {
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
      case 5:
        e.kind = EventKind::SegmentFree;
        e.addr = next_addr;
        e.size = (arg + 1) << 20;
        break;
      case 6:
        c.opts.memory_limit = int64_t(arg + 1) << 24;
        c.opts.limit_is_fraction = op & 8;
        continue;
      default:
        continue;
    }
    d.events.push_back(e);
  }
  return c;
}

// What no allocator can do, or "" when the figures are possible.
inline std::string whatif_impossible(const WhatIfResult& r) {
  for (const WhatIfScenario& s : r.scenarios) {
    const char* what = nullptr;
    if (s.requested < 0 || s.allocated < 0 || s.active < 0 || s.reserved < 0) what = "negative";
    else if (s.reserved < s.allocated) what = "reserved below allocated";
    else if (s.allocated < s.requested) what = "allocated below requested";
    else if (s.cached_at_peak < 0) what = "negative cached bytes";
    if (what)
      return std::string(what) + ": conf '" + s.alloc_conf + "' requested " + std::to_string(s.requested) +
             " allocated " + std::to_string(s.allocated) + " active " + std::to_string(s.active) + " reserved " +
             std::to_string(s.reserved) + " cached_at_peak " + std::to_string(s.cached_at_peak);
  }
  return "";
}

}  // namespace snapdiff::fuzz
