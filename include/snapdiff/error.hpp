// snapdiff/error.hpp — the error types the core library throws.
//
// The library never prints. Readers throw InputError with a location inside
// the input (a byte offset, or a JSON path); the front end adds the file name
// and maps the error to an exit code (see README "Exit codes").
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

namespace snapdiff {

// A problem with an input file: unreadable, truncated, corrupt, hostile, or
// simply not something snapdiff reads. Always carries where it was found.
class InputError : public std::runtime_error {
 public:
  // Location is a byte offset into the (decompressed) input.
  InputError(uint64_t offset, const std::string& what)
      : std::runtime_error(what), offset_(offset), has_offset_(true) {}
  // Location is a JSON path (e.g. "$.devices[0].events.addr[17]").
  InputError(std::string json_path, const std::string& what)
      : std::runtime_error(what), path_(std::move(json_path)) {}
  // No location (e.g. the file cannot be opened).
  explicit InputError(const std::string& what) : std::runtime_error(what) {}

  bool has_offset() const { return has_offset_; }
  uint64_t offset() const { return offset_; }
  const std::string& json_path() const { return path_; }
  const std::string& file() const { return file_; }
  void set_file(std::string f) { file_ = std::move(f); }
  // "FILE: offset N: message" / "FILE: $.path: message" / "FILE: message".
  std::string describe() const;

 private:
  uint64_t offset_ = 0;
  bool has_offset_ = false;
  std::string path_;
  std::string file_;
};

// The caller asked for something inconsistent (exit code 2).
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An output file cannot be written: a missing or read-only directory, a
// directory in the way, a full disk. Whoever throws it leaves the file as it
// was (src/util/output_file.hpp). what(): "cannot write PATH: reason".
class OutputError : public std::runtime_error {
 public:
  OutputError(std::string path, const std::string& what) : std::runtime_error(what), path_(std::move(path)) {}
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Graphviz could not draw a chart (a plugin missing, a layout or render
// failure). what() says which step failed and what Graphviz reported.
class RenderError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace snapdiff
