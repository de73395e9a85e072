#include "input/source.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "input/file_source.hpp"
#include "input/json_stream.hpp"
#include "snapdiff/error.hpp"

namespace snapdiff::detail {

Source::Source(const std::string& path) {
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
    read_to_end(fd);
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

void Source::read_to_end(int fd) {
  buffer_.clear();
  uint8_t tmp[1 << 16];
  for (;;) {
    ssize_t r = ::read(fd, tmp, sizeof tmp);
    if (r < 0) {
      if (errno == EINTR) continue;
      throw InputError(buffer_.size(), std::string("read failed: ") + std::strerror(errno));
    }
    if (r == 0) break;
    buffer_.insert(buffer_.end(), tmp, tmp + r);
  }
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
        read_to_end(fd_);
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
      const uint64_t by_memory = opts.max_memory_bytes > fixed ? (opts.max_memory_bytes - fixed) / 2 : 0;
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

namespace {

std::string gib_text(uint64_t b) {
  char buf[32];
  if (b >= (uint64_t(1) << 30)) std::snprintf(buf, sizeof buf, "%.1f GiB", double(b) / double(uint64_t(1) << 30));
  else std::snprintf(buf, sizeof buf, "%.0f MiB", double(b) / double(uint64_t(1) << 20));
  return buf;
}

}  // namespace

void check_memory(uint64_t predicted, const LoadOptions& opts) {
  if (opts.max_memory_bytes == 0 || predicted <= opts.max_memory_bytes) return;
  throw InputError("reading and analysing this input needs about " + gib_text(predicted) +
                   " of memory, more than the limit of " + gib_text(opts.max_memory_bytes) +
                   " (raise it with --max-memory)");
}

}  // namespace snapdiff::detail
