// Internal: the torch.profiler Chrome trace reader, for load.cpp (which
// chooses it from the format detect() names).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "input/json_stream.hpp"
#include "snapdiff/input/input.hpp"
#include "snapdiff/model/model.hpp"

namespace snapdiff::detail {

// Streams a Chrome trace into `out` (opts: progress, trace_reader_workers,
// and the memory bound, which `held` bytes of the input held in memory
// count against first).
void read_chrome_trace(ByteStream& in, Trace& out, const LoadOptions& opts, uint64_t held = 0);

}  // namespace snapdiff::detail
