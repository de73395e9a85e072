// capture/inject/log_writer.hpp — appends the records of log_format.hpp to
// `<dir>/<pid>.sclog` through a shared mapping of the file (so a process
// that ends without its exit handlers keeps every finished record). Plain
// C++ and POSIX, no CUDA: libsnapcapture_inject.so uses it, and the tests
// use it to make logs on machines without a GPU.
//
// Thread-safe: one mutex around each append and each string lookup; no
// allocation under it except the string table's growth. Fork-safe: the
// child of a fork gets a log of its own the first time it records
// (reset_after_fork() from a pthread_atfork child handler).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "log_format.hpp"

namespace snapcapture::log {

class LogWriter {
 public:
  LogWriter() = default;
  LogWriter(const LogWriter&) = delete;
  LogWriter& operator=(const LogWriter&) = delete;
  ~LogWriter();

  // The folder the logs go to; nothing is created until the first record.
  void set_dir(std::string dir);
  const std::string& dir() const { return dir_; }
  // Opens the file now (false, with errno, when it cannot be made).
  bool ensure_open();

  // The id of a string (interning it, and writing its StringRecord, the
  // first time). 0 for the empty string; 0 too when the log cannot be opened.
  uint32_t intern(std::string_view s);
  // The same for strings the caller knows to be immortal (a kernel's
  // symbol name as CUPTI gives it): looked up by pointer first.
  uint32_t intern_static(const char* s);

  // Appends one record: `bytes` is the struct's size, a multiple of 8; the
  // head's type and size are filled in here.
  void append(RecordType type, void* record, uint32_t bytes);

  // Makes pending writes durable in the page cache's view of the file (it
  // is a shared mapping: they already are, for other processes; msync for
  // the disk). Called at exit.
  void flush();

  // In a forked child: forget the parent's file (the child must not write
  // into it) and the interned strings; the next record opens `<pid>.sclog`.
  // Takes no lock (the child has one thread; the atfork prepare handler may
  // still hold it).
  void reset_after_fork();
  void lock() { mu_.lock(); }      // pthread_atfork's prepare ...
  void unlock() { mu_.unlock(); }  // ... parent and child

  static int64_t now_us();  // CLOCK_REALTIME microseconds

  // True once a failure (no folder, a full disk, no memory) stopped
  // recording; every later record is dropped.
  bool failed() {
    std::lock_guard<std::mutex> g(mu_);
    return failed_;
  }

 private:
  // String keys looked up by string_view without a copy.
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  bool open_locked();
  bool grow_locked(uint64_t need);
  void fail_locked();
  // Copies body (its head included) and `extra` bytes after it, the head's
  // type stored last.
  void write_locked(RecordType type, const void* body, uint32_t body_bytes, const void* extra, uint32_t extra_bytes);
  uint32_t intern_locked(std::string_view s);
  void append_locked(RecordType type, void* record, uint32_t bytes);

  std::mutex mu_;
  std::string dir_;
  int fd_ = -1;
  bool failed_ = false;         // could not open: record nothing, say so once
  char* map_ = nullptr;         // the mapped window [map_off_, map_off_ + map_len_)
  uint64_t map_off_ = 0, map_len_ = 0;
  uint64_t file_len_ = 0;       // bytes of the file reserved (zero-filled past used_)
  uint64_t used_ = 0;           // bytes of the file written
  uint32_t next_id_ = 1;
  std::unordered_map<std::string, uint32_t, StringHash, std::equal_to<>> strings_;
  std::unordered_map<const char*, uint32_t> static_strings_;
};

}  // namespace snapcapture::log
