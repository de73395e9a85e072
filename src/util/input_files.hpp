// Internal: the files this process has read as input (snapshots, ranks,
// rules, budgets, kernel recordings, tensor lists), by device and inode, so
// that no output replaces one of them (`report s.pickle -o s.pickle`, a
// budget written over its candidate, a hard link to an input).
// docs/cli.md "Output files"; bench/hostile/probes_main37.py checks it.
#pragma once

#include <sys/stat.h>

#include <string>

namespace snapdiff {

// Off until a front end turns it on (the snapdiff executable does, for its
// one command): a library user, or a test that writes a file, reads it and
// writes it again, keeps no list.
void keep_input_files(bool on);

// Remembers a regular file that was opened for reading (`st` from fstat of
// the open descriptor, `path` as given). Thread-safe; other kinds are not
// kept (a FIFO or a device is never replaced by an output).
void note_input_file(const struct stat& st, const std::string& path);

// The path an input with this identity was read under, or "" when none.
std::string input_file_named(dev_t dev, ino_t ino);

}  // namespace snapdiff
