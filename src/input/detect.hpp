// Internal: what an input is, told from its first decoded bytes (never from
// its name). Source (source.hpp) reads those bytes once, inflated when the
// input is gzip; the readers are chosen from the answer (load.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace snapdiff::detail {

enum class InputFormat : uint8_t {
  Empty,              // no bytes
  TorchPickle,        // torch.cuda.memory._dump_snapshot(): 0x80 PROTO, or protocol 0/1 text
  Snap,               // snapdiff's .snap: any JSON document not from torch.profiler
  ChromeTrace,        // prof.export_chrome_trace()
  MemoryTimeline,     // prof.export_memory_timeline() .json/.json.gz: [times, sizes]
  MemoryTimelineRaw,  // its raw.json.gz: [[time_ns, action, bytes, category], ...]
  Unknown,            // none of them
};

// How many decoded bytes detect() is given (fewer when the input is shorter).
constexpr size_t kDetectBytes = size_t(64) << 10;

// The format of an input whose decoded bytes start with `head`. A Chrome
// trace is an object with a Chrome trace's top-level keys (traceEvents,
// schemaVersion, ...) before any "format" key, or an array of event
// objects; a memory timeline is told from its raw form by the shape of its
// first elements.
InputFormat detect(std::string_view head);

}  // namespace snapdiff::detail
