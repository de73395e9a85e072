// Internal: an input opened once, and its format.
//
// A regular file stays open: the readers that stream (plain pickles, Chrome
// traces) read it with pread(), the others map it whole. Anything else (a
// pipe, a character device) is read to its end when opened, at most
// --max-input-bytes of it and no more than --max-memory leaves room for (an
// endless /dev/zero or `yes |` is refused, not read until memory runs out).
// A plain regular file larger than --max-input-bytes is refused. Bytes already
// in memory are used in place. The first decoded bytes (inflated when the
// input is gzip) are read once, when the source is made, and detect() names
// the format from them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "input/detect.hpp"
#include "input/memory_budget.hpp"
#include "snapdiff/input/input.hpp"
#include "util/pod_vec.hpp"

namespace snapdiff::detail {

class Source {
 public:
  // Opens `path`. Throws InputError (no file name set) when the file cannot
  // be opened, is a directory, or cannot be read, or holds more than
  // opts.max_decoded_bytes (a plain file or anything not a regular file), or
  // (not a regular file) more than opts.max_memory_bytes leaves room for.
  static Source open(const std::string& path, const LoadOptions& opts = {}) { return Source(path, opts); }
  // Bytes in memory, not copied: they must outlive the source.
  static Source of_bytes(std::string_view bytes) { return Source(bytes); }
  ~Source();
  Source(const Source&) = delete;
  Source& operator=(const Source&) = delete;

  InputFormat format() const { return format_; }
  bool gzip() const { return gzip_; }
  // Stored bytes (on disk, or in memory).
  uint64_t size() const { return size_; }
  // A regular file, open for pread() at fd().
  bool regular_file() const { return fd_ >= 0; }
  int fd() const { return fd_; }

  // All stored bytes. A regular file is mapped on the first call (read into
  // a buffer where it cannot be).
  std::string_view bytes();
  bool mapped() const { return map_ != nullptr; }
  // Tells the OS the mapped bytes before `offset` will not be read again, so
  // the resident size stays small while a large file is parsed.
  void release_before(size_t offset);

  // All decoded bytes: bytes(), or for gzip, inflated into a buffer the
  // source keeps. Refuses output beyond opts.max_decoded_bytes
  // (--max-input-bytes) and, under a memory bound, beyond what the buffer
  // and the analysis could hold (--max-memory).
  std::string_view decoded(const LoadOptions& opts);

 private:
  Source(const std::string& path, const LoadOptions& opts);
  explicit Source(std::string_view bytes);
  // Into buffer_: pipes, or a file that cannot be mapped; refuses more than
  // max_bytes (--max-input-bytes) and what passes the memory bound.
  void read_to_end(int fd, uint64_t max_bytes, const LoadOptions& opts);

  int fd_ = -1;
  uint64_t size_ = 0;
  bool gzip_ = false;
  InputFormat format_ = InputFormat::Empty;
  const uint8_t* data_ = nullptr;  // bytes(), once there
  bool have_bytes_ = false;
  void* map_ = nullptr;
  size_t released_ = 0;
  PodVec<uint8_t> buffer_;
  std::vector<uint8_t> inflated_;
  bool inflated_done_ = false;
};

// Throws the InputError that refuses an input predicted to need more memory
// than opts.max_memory_bytes (0: no bound).
void check_memory(uint64_t predicted, const LoadOptions& opts);

}  // namespace snapdiff::detail
