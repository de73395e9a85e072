// Internal: the torch.profiler readers (Chrome traces, memory timelines) and
// the format sniffing load.cpp uses to route inputs to them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "input/json_stream.hpp"
#include "snapdiff/input.hpp"
#include "snapdiff/model.hpp"

namespace snapdiff::detail {

enum class ProfilerJson { None, ChromeTrace, MemoryTimeline, MemoryTimelineRaw };

// Decides from the first decoded bytes of a JSON input (a few KiB) whether it
// is a Chrome trace (an object with traceEvents/schemaVersion/... keys, or an
// array of event objects), a memory timeline export, or neither (.snap).
ProfilerJson sniff_profiler_json(std::string_view head);

// Streams a Chrome trace into `out` (opts: progress, trace_reader_workers).
void read_chrome_trace(ByteStream& in, Trace& out, const LoadOptions& opts);

// Opens `path`; when it is a Chrome trace (plain or gzip), reads it into
// `out` and returns true; a memory-timeline export is refused with an
// InputError that says how to use it; anything else returns false having
// read only its first bytes.
bool load_profiler_file(const std::string& path, const LoadOptions& opts, Trace& out);
// The same for bytes in memory (already decompressed or not).
bool load_profiler_memory(const uint8_t* p, size_t n, const LoadOptions& opts, Trace& out);

}  // namespace snapdiff::detail
