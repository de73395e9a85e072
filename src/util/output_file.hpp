// Internal: the one way snapdiff writes a file (reports, verdicts, JUnit XML,
// budgets, charts, converted snapshots). docs/cli.md "Output files" and
// docs/reliability.md "Outputs" say what is promised; output_file_test.cpp
// and bench/hostile/probes_outputs.py check it.
#pragma once

#include <string>
#include <string_view>

namespace snapdiff {

// Writes `bytes` to `path` whole or not at all; OutputError ("cannot write
// PATH: reason") when it cannot. What PATH is decides how:
//
// - nothing there (or a symlink naming nothing): a new file, mode 0666 less
//   the umask, made as below;
// - a regular file (or a symlink to one, followed as `>` would, with the
//   kernel's own permission and protected-symlink checks: the link stays and
//   the file it names is replaced): the bytes go to a new temporary file
//   beside it (".snapdiff-XXXXXX.tmp", a random name created with O_EXCL, so
//   no planted link is ever followed), which gets the old file's mode (and,
//   where permitted, owner and group), is fsync'd, checked to hold every
//   byte, and renamed over it. On any failure the temporary file is removed
//   and the old file is left byte for byte as it was;
// - a character device, a named pipe (/dev/null, /dev/stdout, a FIFO):
//   written in place, never replaced. A named pipe nobody reads is an error
//   at once, not a hang;
// - a directory, a block device, a socket: refused, nothing is touched;
// - /dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N: written to that
//   descriptor as it is (appending to a shell's `>>`), never reopened.
void write_output_file(const std::string& path, std::string_view bytes);

// Writes all of `bytes` to `fd` (retrying EINTR, waiting out EAGAIN on a
// non-blocking descriptor); 0, or the errno of the write that failed.
int write_all_fd(int fd, std::string_view bytes);

}  // namespace snapdiff
