// Internal: whole-file access (memory-mapped when possible) and gzip.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/hugepages.hpp"

namespace snapdiff::detail {

// A read-only view of a file's bytes: mmap'd for regular files, read into a
// buffer otherwise (pipes). Throws InputError on failure.
class FileBytes {
 public:
  explicit FileBytes(const std::string& path);
  ~FileBytes();
  FileBytes(const FileBytes&) = delete;
  FileBytes& operator=(const FileBytes&) = delete;
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  bool mapped() const { return map_ != nullptr; }
  // Tells the OS the bytes before `offset` will not be read again, so the
  // resident size stays small while a large file is parsed.
  void release_before(size_t offset);

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  void* map_ = nullptr;
  size_t released_ = 0;
  std::vector<uint8_t> buffer_;
};

// Asks for transparent huge pages over [p, p+bytes) (the whole pages inside
// it) before the memory is first touched: on some virtual machines each 4 KiB
// page fault costs microseconds. Harmless where unsupported.

bool is_gzip(const uint8_t* p, size_t n);
// Inflates a (possibly multi-member) gzip stream; refuses output beyond
// max_out. Errors carry the compressed byte offset.
std::vector<uint8_t> gunzip(const uint8_t* p, size_t n, uint64_t max_out,
                            const char* limit_option = "--max-input-bytes");
std::vector<uint8_t> gzip_compress(std::string_view data, int level = 6);

}  // namespace snapdiff::detail
