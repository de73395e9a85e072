// capture/inject/log_writer.cpp — see log_writer.hpp.
//
// Lives inside an injected .so: no iostreams, no static objects with
// constructors, no exceptions out of any method (a failure sets failed_ and
// every later record is dropped). The file grows in zero-filled chunks
// reserved with posix_fallocate (so a full disk is an error here, not a
// SIGBUS in the host program when a page of the mapping is first touched);
// only a page-aligned window at the file's end is mapped. A record is copied
// in with its head's type still 0 and the type is stored last (release), so
// a reader never sees a partial record as a whole one.
#include "log_writer.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace snapcapture::log {

namespace {

constexpr uint64_t kChunk = uint64_t(8) << 20;       // file growth and window size
constexpr uint32_t kMaxString = uint32_t(1) << 20;   // longer strings are cut (a command line, a name)

uint64_t page_size() {
  long p = ::sysconf(_SC_PAGESIZE);
  return p > 0 ? uint64_t(p) : 4096;
}

// Decimal digits of v into buf (no snprintf locale concerns); returns length.
size_t put_u32(char* buf, uint32_t v) {
  char tmp[16];
  size_t n = 0;
  do {
    tmp[n++] = char('0' + v % 10);
    v /= 10;
  } while (v);
  for (size_t i = 0; i < n; ++i) buf[i] = tmp[n - 1 - i];
  return n;
}

}  // namespace

LogWriter::~LogWriter() {
  std::lock_guard<std::mutex> g(mu_);
  if (map_) ::munmap(map_, map_len_);
  if (fd_ >= 0) ::close(fd_);
  map_ = nullptr;
  fd_ = -1;
  failed_ = true;  // a late call (another thread at exit) drops its record
}

void LogWriter::set_dir(std::string dir) {
  std::lock_guard<std::mutex> g(mu_);
  dir_ = std::move(dir);
}

bool LogWriter::ensure_open() {
  std::lock_guard<std::mutex> g(mu_);
  return open_locked();
}

int64_t LogWriter::now_us() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t(ts.tv_sec) * 1000000 + int64_t(ts.tv_nsec) / 1000;
}

bool LogWriter::open_locked() {
  if (fd_ >= 0) return true;
  if (failed_) return false;
  if (dir_.empty()) {
    failed_ = true;
    errno = ENOENT;
    return false;
  }
  // "<dir>/<pid>.sclog", built by hand (no allocation beyond the string).
  std::string path;
  char num[16];
  const size_t n = put_u32(num, uint32_t(::getpid()));
  path.reserve(dir_.size() + 24);
  path.append(dir_);
  path.push_back('/');
  path.append(num, n);
  path.append(kFileSuffix);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    failed_ = true;
    return false;
  }
  fd_ = fd;
  file_len_ = 0;
  used_ = 0;
  if (!grow_locked(sizeof(FileHeader))) return false;
  FileHeader h{};
  std::memcpy(h.magic, kMagic, sizeof h.magic);
  h.version = kVersion;
  h.pid = uint32_t(::getpid());
  h.ppid = uint32_t(::getppid());
  h.header_bytes = sizeof(FileHeader);
  h.start_us = now_us();
  std::memcpy(map_ + (used_ - map_off_), &h, sizeof h);
  used_ = sizeof(FileHeader);
  return true;
}

// Makes [used_, used_ + need) writable through the window: grows the file
// and moves the window when it does not fit. False (failed_ set) on failure.
bool LogWriter::grow_locked(uint64_t need) {
  if (map_ && used_ + need <= map_off_ + map_len_) return true;
  const uint64_t page = page_size();
  const uint64_t off = used_ / page * page;
  uint64_t len = kChunk;
  while (used_ - off + need > len) len += kChunk;
  const uint64_t end = off + len;
  if (end > file_len_) {
    int rc = ::posix_fallocate(fd_, off_t(file_len_), off_t(end - file_len_));
    if (rc == EINVAL || rc == EOPNOTSUPP) rc = ::ftruncate(fd_, off_t(end)) == 0 ? 0 : errno;
    if (rc != 0) {
      fail_locked();
      return false;
    }
    file_len_ = end;
  }
  if (map_) {
    ::munmap(map_, map_len_);
    map_ = nullptr;
  }
  void* p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, off_t(off));
  if (p == MAP_FAILED) {
    fail_locked();
    return false;
  }
  map_ = static_cast<char*>(p);
  map_off_ = off;
  map_len_ = len;
  return true;
}

void LogWriter::fail_locked() {
  failed_ = true;
  if (map_) ::munmap(map_, map_len_);
  map_ = nullptr;
  map_len_ = 0;
  // The file keeps what was written; the reader stops at the zero tail.
}

void LogWriter::write_locked(RecordType type, const void* body, uint32_t body_bytes, const void* extra,
                             uint32_t extra_bytes) {
  const uint32_t total = round8(body_bytes + extra_bytes);
  if (!grow_locked(total)) return;
  char* dst = map_ + (used_ - map_off_);
  // Everything but the head's type first (the window is zero-filled there,
  // so the type reads 0 until the store below).
  std::memcpy(dst + sizeof(uint16_t), static_cast<const char*>(body) + sizeof(uint16_t),
              body_bytes - sizeof(uint16_t));
  if (extra_bytes) std::memcpy(dst + body_bytes, extra, extra_bytes);
  RecordHead* head = reinterpret_cast<RecordHead*>(dst);
  head->bytes = total;
  __atomic_store_n(&head->type, uint16_t(type), __ATOMIC_RELEASE);
  used_ += total;
}

uint32_t LogWriter::intern_locked(std::string_view s) {
  if (s.empty()) return 0;
  if (s.size() > kMaxString) s = s.substr(0, kMaxString);
  auto it = strings_.find(s);
  if (it != strings_.end()) return it->second;
  if (!open_locked()) return 0;
  StringRecord r{};
  r.head.type = uint16_t(RecordType::String);
  r.id = next_id_;
  r.length = uint32_t(s.size());
  write_locked(RecordType::String, &r, sizeof r, s.data(), uint32_t(s.size()));
  if (failed_) return 0;
  strings_.emplace(std::string(s), next_id_);
  return next_id_++;
}

uint32_t LogWriter::intern(std::string_view s) {
  std::lock_guard<std::mutex> g(mu_);
  try {
    return intern_locked(s);
  } catch (...) {  // bad_alloc from the table: drop, never throw into the host
    failed_ = true;
    return 0;
  }
}

uint32_t LogWriter::intern_static(const char* s) {
  if (!s || !*s) return 0;
  std::lock_guard<std::mutex> g(mu_);
  try {
    auto it = static_strings_.find(s);
    if (it != static_strings_.end()) return it->second;
    const uint32_t id = intern_locked(std::string_view(s));
    if (id) static_strings_.emplace(s, id);
    return id;
  } catch (...) {
    failed_ = true;
    return 0;
  }
}

void LogWriter::append_locked(RecordType type, void* record, uint32_t bytes) {
  if (!record || bytes < sizeof(RecordHead) || bytes % 8 != 0 || type == RecordType::End) return;
  if (!open_locked()) return;
  RecordHead* head = static_cast<RecordHead*>(record);
  head->type = uint16_t(type);
  head->reserved = 0;
  head->bytes = bytes;
  write_locked(type, record, bytes, nullptr, 0);
}

void LogWriter::append(RecordType type, void* record, uint32_t bytes) {
  std::lock_guard<std::mutex> g(mu_);
  append_locked(type, record, bytes);
}

void LogWriter::flush() {
  std::lock_guard<std::mutex> g(mu_);
  if (map_ && used_ > map_off_) ::msync(map_, used_ - map_off_, MS_SYNC);
}

void LogWriter::reset_after_fork() {
  // The child is single-threaded: no lock (the caller may hold it, from
  // pthread_atfork's prepare handler). The parent's mapping is shared with
  // the parent's file: unmap it, never write through it.
  if (map_) ::munmap(map_, map_len_);
  if (fd_ >= 0) ::close(fd_);
  map_ = nullptr;
  map_off_ = map_len_ = 0;
  fd_ = -1;
  file_len_ = 0;
  used_ = 0;
  failed_ = false;
  next_id_ = 1;
  try {
    strings_.clear();
    static_strings_.clear();
  } catch (...) {
    failed_ = true;
  }
}

}  // namespace snapcapture::log
