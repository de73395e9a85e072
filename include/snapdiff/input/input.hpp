// snapdiff/input/input.hpp — reading inputs into the event model.
//
// load_trace() detects the format from the first bytes (never the file
// name): gzip is unwrapped, then a pickle (0x80 PROTO, or protocol 0/1 text),
// a .snap document or a torch.profiler Chrome trace is read. Every failure is an InputError naming the
// file and the offset (or JSON path) of the problem.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "snapdiff/model/model.hpp"

namespace snapdiff {

// Called now and then with (bytes consumed, bytes total) while reading.
using ProgressFn = std::function<void(uint64_t done, uint64_t total)>;

struct LoadOptions {
  // Refuse inputs that decompress to more than this (gzip bombs).
  uint64_t max_decoded_bytes = uint64_t(16) << 30;
  // Refuse, before reading, inputs whose analysis is predicted to need more
  // memory than this (0: no bound). The prediction is measured per format
  // (predicted_memory_bytes); the CLI sets 75% of physical memory unless
  // --max-memory says otherwise.
  uint64_t max_memory_bytes = 0;
  ProgressFn progress;
  // Parser threads besides the reading one for a Chrome trace: -1 chooses
  // from the machine and the input's size; 0 parses on the reading thread
  // only (tests and benchmarks set it).
  int trace_reader_workers = -1;
  // A plain pickle file read ahead on a thread of its own while it is
  // parsed: -1 when the machine has two cores or more and the file is at
  // least 4 MiB; 0 never (the CLI sets it when it reads several inputs at
  // once: they are the parallelism); 1 always (tests).
  int pickle_read_ahead = -1;
  // The max_entries the history was recorded with
  // (_record_memory_history(max_entries=N)), for files that do not record
  // it (-1: unknown). A truncated history with fewer entries per device
  // then started late; with N or more, its ring buffer wrapped. A value the
  // file records itself wins.
  int64_t recorded_max_entries = -1;
  // The run's tensor list (docs/tensors.md) read into Trace::tensors:
  // `tensors_path` names it; else, with `tensors_beside`, load_trace() reads
  // PATH.tensors.json (or .json.gz, or the name without the snapshot's .gz)
  // when it is there.
  std::string tensors_path;
  bool tensors_beside = true;
};

// Upper estimate of the peak memory of reading and analysing `decoded_bytes`
// of a pickle (or of .snap JSON text when `json`), measured on real
// snapshots (docs/reliability.md); add the decoded buffer itself for gzip.
uint64_t predicted_memory_bytes(uint64_t decoded_bytes, bool json);

// Reads any supported file. Throws InputError (with file() set).
Trace load_trace(const std::string& path, const LoadOptions& opts = {});
// Same, from bytes already in memory; `name` is used in errors.
Trace load_trace_from_memory(std::string_view bytes, const std::string& name,
                             const LoadOptions& opts = {});

// A small document read whole — a map step's summary (JSON), at most
// `max_bytes` once gzip is unwrapped (detected from the bytes): its text.
// InputError naming the file (`what` says what it was meant to be).
// A tensor list's text, read and checked whole (InputError with its JSON
// path or byte offset; `name` is the file named in errors and kept as
// TensorList::source).
TensorList read_tensor_list(std::string_view text, const std::string& name);
// The tensor list beside a snapshot, "" when there is none.
std::string tensor_list_beside(const std::string& snapshot_path);

std::string read_small_document(const std::string& path, const std::string& what,
                                uint64_t max_bytes = uint64_t(64) << 20);

// The restricted unpickler: reads a PyTorch memory snapshot pickle straight
// into `out`. Builds only dict/list/tuple/str/bytes/int/float/bool/None and
// refuses every opcode that imports or calls.
void read_torch_pickle(const uint8_t* data, size_t size, Trace& out,
                       const ProgressFn& progress = {});

// The native .snap format (docs/snap_format.md). Version 3, what snapdiff
// writes by default, is binary: a header, a JSON META section
// (schemas/snap.schema.json) and compressed column sections. Versions 1 and
// 2 are one JSON document (schemas/snap.schema.json too), still read, and
// written on request (SnapEncoding::Json*); a JSON document is written as
// version 1 unless it holds what version 2 added (driver_memory, the
// kernels' pid, thread, grid, block and graph columns, device_memory's pid
// column), so that what an older snapdiff wrote is written the same way.
constexpr int kSnapVersion = 3;      // the newest version read and written
constexpr int kSnapJsonVersion = 2;  // the newest JSON version
// Either encoding, told from the first bytes.
void read_snap(std::string_view bytes, Trace& out);
std::string write_snap_json(const Trace& trace);
// Version 3, the bytes of a whole file.
std::string write_snap_binary(const Trace& trace);
enum class SnapEncoding { Binary, Json, JsonGzip };
// Writes .snap to `path`, all or nothing: OutputError when it cannot.
void write_snap_file(const Trace& trace, const std::string& path, SnapEncoding encoding = SnapEncoding::Binary);
// The JSON document, gzip-compressed unless gzip == false.
void write_snap_file(const Trace& trace, const std::string& path, bool gzip);

// The pickle torch.cuda.memory._dump_snapshot() writes (PyTorch 2.11 field
// names, value types and key order; pickle protocol 4 with plain-data
// opcodes only; strings, frames and stacks shared through the memo). Loads
// with Python's pickle (no torch needed), torch.cuda._memory_viz and
// MemoryViz.js; read back by snapdiff it gives the same model. What the
// format has no field for is not written (run metadata, the source info,
// kernel launches, device-memory samples); a device without a trace that
// lies below the highest traced device index gets an empty trace list.
std::string write_torch_pickle(const Trace& trace);
// Writes it to `path` (gzip-compressed when gzip is true) through a
// temporary file renamed into place. Throws OutputError when the file cannot
// be written.
void write_torch_pickle_file(const Trace& trace, const std::string& path, bool gzip);

}  // namespace snapdiff
