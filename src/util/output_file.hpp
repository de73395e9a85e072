// Internal: the one way snapdiff writes a file (reports, verdicts, JUnit XML,
// budgets, charts, converted snapshots).
#pragma once

#include <string>
#include <string_view>

namespace snapdiff {

// Writes `bytes` to `path` whole or not at all. The bytes go to a new
// temporary file in the same directory (".snapdiff-PID-N.tmp", created
// exclusively), are flushed to disk, and the file is renamed over `path`.
// On any failure (cannot create, short write, fsync or close error, rename)
// the temporary file is removed, `path` is left as it was, and OutputError
// ("cannot write PATH: reason") is thrown. A target that is neither a
// regular file nor a directory (/dev/null, a named pipe) is written
// directly: a rename would replace the device itself.
void write_output_file(const std::string& path, std::string_view bytes);

}  // namespace snapdiff
