// Internal: reads a small text file (rules, budgets) whole; an InputError
// naming the file when it cannot be opened or read, or holds more than
// max_bytes (kMaxSmallFileBytes unless told).
//
// Whatever the path names: a regular file is refused at once when larger
// than the bound; anything else (a pipe, /dev/zero, /dev/stdin) is read up
// to one byte past the bound and refused there, never read until memory
// runs out. A FIFO without a writer reads as empty (it is opened
// O_NONBLOCK, which is cleared before reading), as the main input does:
// open() would otherwise wait for a writer forever.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "snapdiff/error.hpp"
#include "util/input_files.hpp"

namespace snapdiff::detail {

// Rules and budget files are kilobytes; 16 MiB is far beyond any real one
// and keeps what parsing them takes (a JSON DOM, about ten times the text)
// small. docs/reliability.md, "Bounds".
constexpr uint64_t kMaxSmallFileBytes = uint64_t(16) << 20;

inline std::string read_small_file(const std::string& path, const std::string& what,
                                   uint64_t max_bytes = kMaxSmallFileBytes) {
  auto fail = [&](const std::string& msg) {
    InputError e(msg);
    e.set_file(path);
    return e;
  };
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw fail("cannot open the " + what + ": " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw fail("cannot read the " + what + ": " + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) throw fail("cannot read the " + what + ": is a directory");
  note_input_file(st, path);
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  const std::string too_big = "the " + what + " holds more than " + std::to_string(max_bytes) + " bytes (the limit for " +
                              what + "s)";
  if (S_ISREG(st.st_mode) && uint64_t(st.st_size) > max_bytes) throw fail(too_big);
  std::string out;
  if (S_ISREG(st.st_mode)) out.reserve(size_t(st.st_size));
  char buf[1 << 16];
  for (;;) {
    size_t want = sizeof buf;
    if (uint64_t(out.size()) + want > max_bytes + 1) want = size_t(max_bytes + 1 - out.size());
    ssize_t r = ::read(fd, buf, want);
    if (r < 0) {
      if (errno == EINTR) continue;
      throw fail("cannot read the " + what + ": " + std::strerror(errno));
    }
    if (r == 0) break;
    out.append(buf, size_t(r));
    if (uint64_t(out.size()) > max_bytes) throw fail(too_big);
  }
  return out;
}

}  // namespace snapdiff::detail
