// snapdiff/input.hpp — reading inputs into the event model.
//
// load_trace() detects the format from the first bytes (never the file
// name): gzip is unwrapped, then a pickle (0x80 PROTO, or protocol 0/1 text)
// or a .snap document is read. Every failure is an InputError naming the
// file and the offset (or JSON path) of the problem.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "snapdiff/model.hpp"

namespace snapdiff {

// Called now and then with (bytes consumed, bytes total) while reading.
using ProgressFn = std::function<void(uint64_t done, uint64_t total)>;

struct LoadOptions {
  // Refuse inputs that decompress to more than this (gzip bombs).
  uint64_t max_decoded_bytes = uint64_t(16) << 30;
  ProgressFn progress;
};

// Reads any supported file. Throws InputError (with file() set).
Trace load_trace(const std::string& path, const LoadOptions& opts = {});
// Same, from bytes already in memory; `name` is used in errors.
Trace load_trace_from_memory(std::string_view bytes, const std::string& name,
                             const LoadOptions& opts = {});

// The restricted unpickler: reads a PyTorch memory snapshot pickle straight
// into `out`. Builds only dict/list/tuple/str/bytes/int/float/bool/None and
// refuses every opcode that imports or calls.
void read_torch_pickle(const uint8_t* data, size_t size, Trace& out,
                       const ProgressFn& progress = {});

// The native .snap format (schemas/snap.schema.json).
constexpr int kSnapVersion = 1;
void read_snap(std::string_view json_text, Trace& out);
std::string write_snap_json(const Trace& trace);
// Writes .snap to `path` (gzip-compressed unless gzip == false).
void write_snap_file(const Trace& trace, const std::string& path, bool gzip = true);

}  // namespace snapdiff
