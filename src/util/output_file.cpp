#include "util/output_file.hpp"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "snapdiff/error.hpp"
#include "util/input_files.hpp"

namespace snapdiff {

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& why) {
  throw OutputError(path, "cannot write " + path + ": " + why);
}

[[noreturn]] void fail(const std::string& path, int err) {
  fail(path, err ? std::string(std::strerror(err)) : std::string("unknown error"));
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

// The directory part of `path` with its trailing slash ("" for a bare name).
std::string dir_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
}

mode_t current_umask() {
  const mode_t m = ::umask(0);
  ::umask(m);
  return m;
}

// The temporary file beside the target: a random name created exclusively
// (mkostemps: O_CREAT|O_EXCL, so a symlink planted at the name fails the
// creation instead of being followed), removed when it goes out of scope
// unless it was renamed into place.
class TempFile {
 public:
  TempFile(const std::string& display, const std::string& target) {
    path_ = dir_of(target) + ".snapdiff-XXXXXX.tmp";
    fd_ = ::mkostemps(path_.data(), 4, O_CLOEXEC);
    if (fd_ < 0) fail(display, errno);
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

// fs.protected_symlinks (Linux; on unless it reads 0): links in sticky
// world-writable directories are followed only when the follower or the
// directory's owner owns them.
bool protected_symlinks() {
  Fd f(::open("/proc/sys/fs/protected_symlinks", O_RDONLY | O_CLOEXEC));
  char c = '1';
  if (f.get() >= 0 && ::read(f.get(), &c, 1) != 1) c = '1';
  return c != '0';
}

// The name a chain of symlinks starting at `path` ends at, when it names
// nothing (a dangling link: `>` would create that file). A link the kernel
// would not follow under fs.protected_symlinks — in a sticky world-writable
// directory such as /tmp, owned neither by us nor by the directory's owner
// — is refused (EACCES), as open() would refuse it. (A link to a file that
// exists is followed by stat() and realpath(), under the kernel's own check.)
std::string resolve_dangling(const std::string& path) {
  const bool guarded = protected_symlinks();
  std::string p = path;
  for (int hops = 0; hops < 40; ++hops) {
    struct stat lst {};
    if (::lstat(p.c_str(), &lst) != 0) {
      if (errno == ENOENT) return p;
      fail(path, errno);
    }
    if (!S_ISLNK(lst.st_mode)) return p;
    const std::string dir = dir_of(p);
    struct stat dst {};
    if (::stat(dir.empty() ? "." : dir.c_str(), &dst) != 0) fail(path, errno);
    if (guarded && (dst.st_mode & S_ISVTX) && (dst.st_mode & S_IWOTH) && lst.st_uid != ::geteuid() &&
        lst.st_uid != dst.st_uid)
      fail(path, std::string(std::strerror(EACCES)) + " (a symlink in a sticky world-writable directory, owned by "
                                                      "someone else, is not followed)");
    std::string target(PATH_MAX, '\0');
    const ssize_t n = ::readlink(p.c_str(), target.data(), target.size());
    if (n < 0) fail(path, errno);
    if (size_t(n) >= target.size()) fail(path, ENAMETOOLONG);
    target.resize(size_t(n));
    p = !target.empty() && target[0] == '/' ? target : dir + target;
  }
  fail(path, ELOOP);
}

// Writes `bytes` to a new temporary file beside `target` and renames it over
// `target`. `old`: the file being replaced (its mode, owner and group are
// kept), or null for a new file (0666 less the umask, as open() gives).
void replace_file(const std::string& display, const std::string& target, const struct stat* old,
                  std::string_view bytes) {
  TempFile tmp(display, target);
  if (old) {
    // The owner and group where permitted (root; a group one belongs to),
    // then the permission bits (set-id bits dropped, as a write drops them).
    if (old->st_gid != ::getegid()) (void)!::fchown(tmp.fd(), uid_t(-1), old->st_gid);
    if (old->st_uid != ::geteuid()) (void)!::fchown(tmp.fd(), old->st_uid, gid_t(-1));
    (void)::fchmod(tmp.fd(), old->st_mode & 01777);
  } else {
    (void)::fchmod(tmp.fd(), 0666 & ~current_umask());
  }
  if (const int err = write_all_fd(tmp.fd(), bytes)) fail(display, err);
  if (::fsync(tmp.fd()) != 0 && errno != EINVAL) fail(display, errno);
  // Never rename a short file over a good one: the file holds every byte.
  struct stat st {};
  if (::fstat(tmp.fd(), &st) != 0) fail(display, errno);
  if (uint64_t(st.st_size) != bytes.size())
    fail(display, "wrote " + std::to_string(st.st_size) + " of " + std::to_string(bytes.size()) + " bytes");
  if (!tmp.close()) fail(display, errno);
  if (!tmp.rename_to(target)) fail(display, errno);
  // The rename itself to disk (best effort: not every filesystem can).
  const std::string dir = dir_of(target);
  Fd d(::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (d.get() >= 0) (void)::fsync(d.get());
}

// A character device or a named pipe: written in place (a rename would
// replace the device itself), opened without O_CREAT. Non-blocking open, so
// a named pipe with no reader fails at once (ENXIO) instead of hanging;
// blocking writes after that.
void write_in_place(const std::string& path, std::string_view bytes) {
  Fd f(::open(path.c_str(), O_WRONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC));
  if (f.get() < 0) {
    if (errno == ENXIO) {
      struct stat st {};
      if (::stat(path.c_str(), &st) == 0 && S_ISFIFO(st.st_mode)) fail(path, "no process is reading the named pipe");
    }
    fail(path, errno);
  }
  struct stat st {};
  if (::fstat(f.get(), &st) != 0) fail(path, errno);
  if (!S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode)) fail(path, "it was replaced while being written");
  const int fl = ::fcntl(f.get(), F_GETFL);
  if (fl >= 0) (void)::fcntl(f.get(), F_SETFL, fl & ~O_NONBLOCK);
  if (const int err = write_all_fd(f.get(), bytes)) fail(path, err);
  if (!f.close()) fail(path, errno);
}

// The descriptor a path names by number — /dev/stdout, /dev/stderr,
// /dev/fd/N, /proc/self/fd/N — or -1. Such a path is written to the
// descriptor itself, as a shell's `>&N` would: never reopened and renamed
// over (through /proc/self/fd the rename would replace the /dev/stdout link
// itself, or the file a shell redirected to, instead of appending to it).
int descriptor_named(const std::string& path) {
  if (path == "/dev/stdin") return 0;
  if (path == "/dev/stdout") return 1;
  if (path == "/dev/stderr") return 2;
  for (const char* prefix : {"/dev/fd/", "/proc/self/fd/"}) {
    const std::string p(prefix);
    if (path.size() <= p.size() || path.size() > p.size() + 9 || path.compare(0, p.size(), p) != 0) continue;
    int n = 0;
    for (size_t i = p.size(); i < path.size(); ++i) {
      if (path[i] < '0' || path[i] > '9') return -1;
      n = n * 10 + (path[i] - '0');
    }
    return n;
  }
  return -1;
}

}  // namespace

int write_all_fd(int fd, std::string_view bytes) {
  constexpr size_t kChunk = size_t(1) << 30;  // below every platform's single-write limit
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), std::min(bytes.size(), kChunk));
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        struct pollfd p {};
        p.fd = fd;
        p.events = POLLOUT;
        (void)::poll(&p, 1, -1);
        continue;
      }
      return errno;
    }
    if (n == 0) return EIO;
    bytes.remove_prefix(size_t(n));
  }
  return 0;
}

void write_output_file(const std::string& path, std::string_view bytes) {
  if (path.empty()) fail(path, "an empty file name");
  if (const int fd = descriptor_named(path); fd >= 0) {
    if (::fcntl(fd, F_GETFD) < 0) fail(path, errno);
    if (const int err = write_all_fd(fd, bytes)) fail(path, err);
    return;
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    // Nothing there (a new file), or a symlink naming nothing.
    if (errno != ENOENT) fail(path, errno);
    struct stat lst {};
    const bool link = ::lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode);
    replace_file(path, link ? resolve_dangling(path) : path, nullptr, bytes);
    return;
  }
  if (S_ISREG(st.st_mode)) {
    // Never over a file this run read (the same file under any name: a
    // symlink, a hard link, ./s.pickle for s.pickle).
    if (const std::string in = input_file_named(st.st_dev, st.st_ino); !in.empty())
      fail(path, in == path ? std::string("it is an input of this run") : "it is the input " + in + " of this run");
    // Writable as open(O_WRONLY) would need (a read-only file stays).
    if (::faccessat(AT_FDCWD, path.c_str(), W_OK, AT_EACCESS) != 0) fail(path, errno);
    std::string target = path;
    struct stat lst {};
    if (::lstat(path.c_str(), &lst) != 0) fail(path, errno);
    if (S_ISLNK(lst.st_mode)) {
      // Followed as `>` would: the file the link names is replaced, the link stays.
      std::unique_ptr<char, void (*)(void*)> real(::realpath(path.c_str(), nullptr), ::free);
      if (!real) fail(path, errno);
      target = real.get();
      if (::lstat(target.c_str(), &lst) != 0) fail(path, errno);
    }
    if (lst.st_dev != st.st_dev || lst.st_ino != st.st_ino) fail(path, "it was replaced while being written");
    replace_file(path, target, &st, bytes);
    return;
  }
  if (S_ISDIR(st.st_mode)) fail(path, EISDIR);
  if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) {
    write_in_place(path, bytes);
    return;
  }
  if (S_ISBLK(st.st_mode)) fail(path, "it is a block device (refused: snapdiff does not write onto disks)");
  if (S_ISSOCK(st.st_mode)) fail(path, "it is a socket");
  fail(path, "not a regular file, character device or named pipe");
}

}  // namespace snapdiff
