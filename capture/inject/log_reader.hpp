// capture/inject/log_reader.hpp — reads the raw logs of
// libsnapcapture_inject.so (log_format.hpp, one file per process) into one
// snapdiff::Trace: kernel launches, driver memory calls, device-memory
// samples and per-process metadata. `snapcapture run` and `snapcapture
// convert` write the result as .snap. Plain C++, no CUDA.
//
// What it makes of the records (docs/capture.md, "The injection library"):
// - kernels: the name demangled when it is a mangled C++ name whose
//   demangled text is bounded by 16 KiB (demangle.hpp; else it stays
//   mangled); a graph
//   launch (cudaGraphLaunch, cuGraphLaunch) is one entry with graph = true;
// - driver memory: calls that failed (result != 0) are left out; a free
//   gets the size (and, when the record has none, the device) of the
//   allocation it frees, matched by address within the process; a
//   cuMemRelease the size of the cuMemCreate of its handle; the caller from
//   the library's basename (snapdiff::caller_of_library);
// - samples: reserved_bytes is what PyTorch's allocator held from the
//   driver in that process and on that device when the sample was taken
//   (its cuMemAlloc bytes not yet freed, plus its cuMemMap'd bytes not yet
//   unmapped: expandable segments);
// - metadata per process "capture.process.<pid>.<key>" (ppid, command,
//   start_us, notes, truncated) and "capture.processes" (the pids).
// Everything is sorted by time (stable: a file's order breaks ties).
//
// A log that ends inside a record, or in its zero-filled tail, is read up
// to its last whole record (a process that ended without its exit
// handlers). A file that is not a log, and a record that contradicts
// itself (a size that does not fit its type, an unknown type, a string id
// not defined before, a device or a time out of range), is a snapdiff::InputError
// naming the file and the byte offset.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "snapdiff/model/model.hpp"

namespace snapcapture::log {

struct ReadOptions {
  // Refuse (InputError) when the model would pass this many bytes (0: no bound).
  uint64_t max_memory_bytes = 0;
  // Refuse (InputError) logs of more bytes than this, all files together
  // (0: no bound); snapcapture's --max-input-bytes, 16 GiB by default.
  uint64_t max_input_bytes = 0;
};

// The logs of a folder: its *.sclog files, sorted by name. InputError when
// the folder cannot be read.
std::vector<std::string> logs_in_dir(const std::string& dir);

// Reads the files (each a log; a folder stands for its logs) into `out`.
// A log is a regular file: a FIFO, a device (a link to /dev/zero) or a
// socket is an InputError naming it, before a byte is read (opened without
// blocking: a FIFO without a writer never hangs); a file is read up to the
// bounds and no further, even while it grows.
void read_logs(const std::vector<std::string>& paths, snapdiff::Trace& out, const ReadOptions& opts = {});
snapdiff::Trace read_logs(const std::vector<std::string>& paths, const ReadOptions& opts = {});

// One log already in memory, appended to `out`'s records (not sorted:
// read_logs sorts once all are in); `name` goes into errors. Returns the
// process's pid.
uint32_t read_log_bytes(std::string_view bytes, const std::string& name, snapdiff::Trace& out,
                    const ReadOptions& opts = {});

}  // namespace snapcapture::log
