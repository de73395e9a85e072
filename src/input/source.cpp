#include "input/source.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "input/file_source.hpp"
#include "util/input_files.hpp"
#include "input/json_stream.hpp"
#include "snapdiff/error.hpp"

namespace snapdiff::detail {

namespace {

[[noreturn]] void refuse_input_bytes(uint64_t limit, bool at_offset) {
  const std::string msg = "the input holds more than " + std::to_string(limit) +
                          " bytes (the limit; raise it with --max-input-bytes)";
  if (at_offset) throw InputError(limit, msg);
  throw InputError(msg);
}

}  // namespace

Source::Source(const std::string& path, const LoadOptions& opts) {
  // O_NONBLOCK: opening a FIFO without a writer does not wait here.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw InputError(std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    throw InputError(std::string("cannot stat: ") + std::strerror(e));
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    throw InputError("is a directory, not a snapshot file");
  }
  note_input_file(st, path);
  if (S_ISREG(st.st_mode)) {
    fd_ = fd;
    size_ = uint64_t(st.st_size);
    try {
      uint8_t magic[2] = {0, 0};
      ssize_t r;
      do {
        r = ::pread(fd_, magic, sizeof magic, 0);
      } while (r < 0 && errno == EINTR);
      gzip_ = r == 2 && is_gzip(magic, 2);
      // Plain: the stored bytes are the decoded ones (gzip is bounded as it
      // is inflated).
      if (!gzip_ && size_ > opts.max_decoded_bytes) refuse_input_bytes(opts.max_decoded_bytes, false);
      format_ = detect(peek(*file_byte_stream(fd_, size_, gzip_, UINT64_MAX), kDetectBytes));
    } catch (...) {
      ::close(fd_);
      throw;
    }
    return;
  }
  // Pipes and character devices: read to the end now. Clear O_NONBLOCK so a
  // FIFO without a writer waits like any reader would.
  int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  try {
    read_to_end(fd, opts.max_decoded_bytes, opts);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  data_ = buffer_.data();
  size_ = buffer_.size();
  have_bytes_ = true;
  gzip_ = is_gzip(data_, buffer_.size());
  format_ = detect(peek(*memory_byte_stream(data_, buffer_.size(), gzip_, UINT64_MAX), kDetectBytes));
}

Source::Source(std::string_view bytes)
    : size_(bytes.size()), data_(reinterpret_cast<const uint8_t*>(bytes.data())), have_bytes_(true) {
  gzip_ = is_gzip(data_, bytes.size());
  format_ = detect(peek(*memory_byte_stream(data_, bytes.size(), gzip_, UINT64_MAX), kDetectBytes));
}

Source::~Source() {
  if (map_) ::munmap(map_, size_);
  if (fd_ >= 0) ::close(fd_);
}

void Source::read_to_end(int fd, uint64_t max_bytes, const LoadOptions& opts) {
  // The buffer grows by mremap (no copy: resident is what was read). One
  // byte past the limit is read to tell "exactly the limit" from "more".
  const MemoryBudget budget(opts);
  buffer_.clear();
  size_t n = 0;
  for (;;) {
    if (n == buffer_.size()) {
      size_t grow = n < (size_t(1) << 16) ? size_t(1) << 16 : n * 2;
      if (budget.bounded() && grow > budget.room() + 1) grow = size_t(budget.room() + 1);
      if (grow <= n) grow = n + 1;
      buffer_.resize(grow);
    }
    size_t want = buffer_.size() - n;
    if (max_bytes < UINT64_MAX && uint64_t(n) + want > max_bytes + 1) want = size_t(max_bytes + 1 - n);
    // Never more than one byte past the memory bound's room either.
    if (budget.bounded() && uint64_t(n) + want > budget.room() + 1) want = size_t(budget.room() + 1 - n);
    ssize_t r = ::read(fd, buffer_.data() + n, want);
    if (r < 0) {
      if (errno == EINTR) continue;
      throw InputError(n, std::string("read failed: ") + std::strerror(errno));
    }
    if (r == 0) break;
    n += size_t(r);
    if (n > max_bytes) refuse_input_bytes(max_bytes, true);
    budget.check(n, n);
  }
  buffer_.resize(n);
}

std::string_view Source::bytes() {
  if (!have_bytes_) {
    if (size_ > 0) {
      void* m = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd_, 0);
      if (m != MAP_FAILED) {
        map_ = m;
        ::madvise(map_, size_, MADV_SEQUENTIAL);
        data_ = static_cast<const uint8_t*>(map_);
      } else {
        read_to_end(fd_, UINT64_MAX, LoadOptions{});
        data_ = buffer_.data();
        size_ = buffer_.size();
      }
    }
    have_bytes_ = true;
  }
  return std::string_view(reinterpret_cast<const char*>(data_), size_t(size_));
}

void Source::release_before(size_t offset) {
  if (!map_) return;
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  size_t end = offset / page * page;
  if (end <= released_ + (size_t(16) << 20)) return;
  ::madvise(static_cast<uint8_t*>(map_) + released_, end - released_, MADV_DONTNEED);
  released_ = end;
}

std::string_view Source::decoded(const LoadOptions& opts) {
  const std::string_view stored = bytes();
  if (!gzip_) return stored;
  if (!inflated_done_) {
    // The decoded buffer is held while it is parsed: stop inflating where
    // buffer plus analysis would pass the memory bound.
    uint64_t cap = opts.max_decoded_bytes;
    const char* cap_option = "--max-input-bytes";
    if (opts.max_memory_bytes) {
      const uint64_t fixed = predicted_memory_bytes(0, false);
      check_memory(fixed, opts);
      // The stored bytes are held too (a pipe's buffer; a mapping is paged).
      const uint64_t held = map_ ? 0 : stored.size();
      const uint64_t left = opts.max_memory_bytes - fixed > held ? opts.max_memory_bytes - fixed - held : 0;
      const uint64_t by_memory = left / 2;
      if (by_memory < cap) {
        cap = by_memory;
        cap_option = "--max-memory";
      }
    }
    inflated_ = gunzip(data_, stored.size(), cap, cap_option);
    inflated_done_ = true;
  }
  return std::string_view(reinterpret_cast<const char*>(inflated_.data()), inflated_.size());
}

std::string memory_text(uint64_t b) {
  char buf[32];
  if (b >= (uint64_t(1) << 30)) std::snprintf(buf, sizeof buf, "%.1f GiB", double(b) / double(uint64_t(1) << 30));
  else if (b >= (uint64_t(1) << 20)) std::snprintf(buf, sizeof buf, "%.0f MiB", double(b) / double(uint64_t(1) << 20));
  else std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(b));
  return buf;
}

void check_memory(uint64_t predicted, const LoadOptions& opts) {
  if (opts.max_memory_bytes == 0 || predicted <= opts.max_memory_bytes) return;
  throw InputError("reading and analysing this input needs about " + memory_text(predicted) +
                   " of memory, more than the limit of " + memory_text(opts.max_memory_bytes) +
                   " (raise it with --max-memory)");
}

uint64_t analysis_memory_bytes(const Trace& t) {
  uint64_t b = kProgramMemoryBytes + t.memory_bytes();
  for (const Device& d : t.devices)
    b += d.events.size() * kAnalysisBytesPerEvent + d.blocks.size() * kAnalysisBytesPerBlock +
         d.segments.size() * kAnalysisBytesPerSegment;
  return b;
}

MemoryBudget::MemoryBudget(const LoadOptions& opts, uint64_t held, uint64_t fixed) : limit_(opts.max_memory_bytes) {
  if (limit_ == 0) return;
  const uint64_t used = fixed + held;
  room_ = limit_ > used ? limit_ - used : 0;
}

std::string MemoryBudget::message() const {
  return "reading this input needs more than the limit of " + memory_text(limit_) +
         " of memory (raise it with --max-memory)";
}

void MemoryBudget::refuse(uint64_t offset) const { throw InputError(offset, message()); }

void MemoryBudget::refuse_at(const std::string& json_path) const { throw InputError(json_path, message()); }

}  // namespace snapdiff::detail
