#include "util/output_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "snapdiff/error.hpp"

namespace snapdiff {

namespace {

[[noreturn]] void fail(const std::string& path, int err) {
  throw OutputError(path, "cannot write " + path + (err ? ": " + std::string(std::strerror(err)) : std::string()));
}

// Writes all of `bytes` to `fd`; false (errno set) on an error or a write
// that makes no progress.
bool write_all(int fd, std::string_view bytes) {
  constexpr size_t kChunk = size_t(1) << 30;  // below every platform's single-write limit
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), std::min(bytes.size(), kChunk));
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (n == 0) {
      errno = EIO;
      return false;
    }
    bytes.remove_prefix(size_t(n));
  }
  return true;
}

// A file descriptor that is closed when it goes out of scope.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  // Closes now; false (errno set) when close reports an error.
  bool close() {
    const int fd = fd_;
    fd_ = -1;
    return ::close(fd) == 0;
  }

 private:
  int fd_;
};

// The temporary file beside the target: removed when it goes out of scope
// unless it was renamed into place.
class TempFile {
 public:
  // Creates it (mode 0666 less the umask, as for any new file); fails with
  // the error of the last attempt.
  explicit TempFile(const std::string& target) {
    static std::atomic<unsigned> counter{0};
    const size_t slash = target.rfind('/');
    const std::string dir = slash == std::string::npos ? std::string() : target.substr(0, slash + 1);
    for (int attempt = 0; attempt < 100; ++attempt) {
      path_ = dir + ".snapdiff-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".tmp";
      fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (fd_ >= 0) return;
      if (errno != EEXIST) break;
    }
    fail(target, errno);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!renamed_) ::unlink(path_.c_str());
  }

  int fd() const { return fd_; }
  bool close() {
    const int fd = fd_;
    fd_ = -1;
    return ::close(fd) == 0;
  }
  bool rename_to(const std::string& target) {
    renamed_ = ::rename(path_.c_str(), target.c_str()) == 0;
    return renamed_;
  }

 private:
  std::string path_;
  int fd_ = -1;
  bool renamed_ = false;
};

// A target that exists and is neither a regular file nor a directory (a
// character device such as /dev/null, a named pipe, a socket): written in
// place, since a rename would replace the device itself.
bool is_stream(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

}  // namespace

void write_output_file(const std::string& path, std::string_view bytes) {
  if (is_stream(path)) {
    Fd f(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
    if (f.get() < 0 || !write_all(f.get(), bytes) || !f.close()) fail(path, errno);
    return;
  }
  TempFile tmp(path);
  if (!write_all(tmp.fd(), bytes) || ::fsync(tmp.fd()) != 0 || !tmp.close() || !tmp.rename_to(path))
    fail(path, errno);
}

}  // namespace snapdiff
