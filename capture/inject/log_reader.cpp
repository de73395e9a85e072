// capture/inject/log_reader.cpp — see log_reader.hpp.
#include "log_reader.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <unordered_map>

#include "demangle.hpp"
#include "log_format.hpp"
#include "snapdiff/error.hpp"

namespace snapcapture::log {

using snapdiff::InputError;
using snapdiff::StrId;
using snapdiff::Trace;

namespace {

constexpr int kMaxDevice = 1 << 20;                      // as the .snap reader's bound
constexpr uint32_t kMaxStringBytes = uint32_t(1) << 24;  // the writer cuts strings at 1 MiB

std::string errno_text(int e) { return std::strerror(e); }

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string basename_of(std::string_view path) {
  const size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

struct Live {
  uint64_t size = 0;
  int device = -1;
  bool pytorch = false;
};

class FileReader {
 public:
  FileReader(std::string_view bytes, const std::string& name, Trace& out, const ReadOptions& opts)
      : b_(bytes), name_(name), t_(out), opts_(opts) {}

  // The process's pid.
  uint32_t read() {
    if (b_.size() < sizeof(FileHeader)) fail(0, "not a snapcapture log (shorter than its header)");
    FileHeader h;
    std::memcpy(&h, b_.data(), sizeof h);
    if (std::memcmp(h.magic, kMagic, sizeof h.magic) != 0)
      fail(0, "not a snapcapture log (no SCAPLOG1 magic)");
    if (h.version != kVersion)
      fail(offsetof(FileHeader, version), "snapcapture log version " + std::to_string(h.version) +
                                              ": this build reads version " + std::to_string(kVersion));
    if (h.header_bytes < sizeof(FileHeader) || h.header_bytes % 8 != 0 || h.header_bytes > b_.size())
      fail(offsetof(FileHeader, header_bytes), "header size " + std::to_string(h.header_bytes) + " does not fit");
    pid_ = h.pid;
    const std::string key = "capture.process." + std::to_string(pid_) + ".";
    t_.metadata.emplace_back(key + "ppid", std::to_string(h.ppid));
    t_.metadata.emplace_back(key + "start_us", std::to_string(h.start_us));
    strings_.push_back(t_.strings.intern(""));
    defined_.push_back(true);
    uint64_t off = h.header_bytes;
    bool truncated = false;
    uint64_t records = 0;
    while (off + sizeof(RecordHead) <= b_.size()) {
      RecordHead head;
      std::memcpy(&head, b_.data() + off, sizeof head);
      if (head.type == uint16_t(RecordType::End)) break;
      if (head.bytes < sizeof(RecordHead) || head.bytes % 8 != 0)
        fail(off + 4, "record size " + std::to_string(head.bytes) + " is not a positive multiple of 8");
      if (!record(head, off, &truncated)) break;
      off += head.bytes;
      if (++records % 65536 == 0) check_memory(off);
    }
    check_memory(off);
    if (truncated) notes_.push_back("the log ends inside a record: read up to its last whole record");
    if (!command_.empty()) t_.metadata.emplace_back(key + "command", command_);
    if (!notes_.empty()) {
      std::string all;
      for (const std::string& n : notes_) {
        if (!all.empty()) all += "; ";
        all += n;
      }
      t_.metadata.emplace_back(key + "notes", all);
    }
    return pid_;
  }

 private:
  [[noreturn]] void fail(uint64_t off, const std::string& msg) const {
    InputError e(off, msg);
    e.set_file(name_);
    throw e;
  }

  void check_memory(uint64_t off) const {
    // The model so far and the log's bytes, held while it is read.
    if (opts_.max_memory_bytes && t_.memory_bytes() + b_.size() > opts_.max_memory_bytes)
      fail(off, "reading the logs needs more than the limit of " + std::to_string(opts_.max_memory_bytes >> 20) +
                    " MiB of memory");
  }

  template <class R>
  bool fixed(const RecordHead& head, uint64_t off, bool* truncated, R* r) {
    if (head.bytes != sizeof(R))
      fail(off + 4, "record of type " + std::to_string(head.type) + " has size " + std::to_string(head.bytes) +
                        ", expected " + std::to_string(sizeof(R)));
    if (off + sizeof(R) > b_.size()) {
      *truncated = true;
      return false;
    }
    std::memcpy(r, b_.data() + off, sizeof(R));
    return true;
  }

  StrId str(uint32_t id, uint64_t at) const {
    if (id >= defined_.size() || !defined_[id]) fail(at, "string id " + std::to_string(id) + " is not defined before");
    return strings_[id];
  }
  std::string_view str_view(uint32_t id, uint64_t at) const { return t_.strings.get(str(id, at)); }

  // CLOCK_REALTIME microseconds: from 1970 to 2^53 (the year 2255), so that
  // differences of any two never overflow.
  int64_t time(int64_t t, uint64_t at) const {
    if (t < 0 || t > (int64_t(1) << 53)) fail(at, "time " + std::to_string(t) + " us out of range");
    return t;
  }

  int device(int32_t d, uint64_t at) const {
    if (d < -1 || d > kMaxDevice) fail(at, "device " + std::to_string(d) + " out of range");
    return d;
  }

  // False when the log ends inside this record (the rest is not read).
  bool record(const RecordHead& head, uint64_t off, bool* truncated) {
    switch (RecordType(head.type)) {
      case RecordType::String: {
        StringRecord r;
        if (off + sizeof r > b_.size()) {
          *truncated = true;
          return false;
        }
        std::memcpy(&r, b_.data() + off, sizeof r);
        if (r.length > kMaxStringBytes || head.bytes != round8(uint32_t(sizeof r) + r.length))
          fail(off + 4, "string record of " + std::to_string(r.length) + " bytes has size " +
                            std::to_string(head.bytes));
        if (off + head.bytes > b_.size()) {
          *truncated = true;
          return false;
        }
        if (r.id == 0 || (r.id < defined_.size() && defined_[r.id]))
          fail(off + offsetof(StringRecord, id), "string id " + std::to_string(r.id) + " defined twice");
        if (r.id > defined_.size() + (uint64_t(1) << 24))
          fail(off + offsetof(StringRecord, id), "string id " + std::to_string(r.id) + " out of range");
        if (r.id >= defined_.size()) {
          defined_.resize(size_t(r.id) + 1, false);
          strings_.resize(size_t(r.id) + 1, 0);
        }
        strings_[r.id] = t_.strings.intern(b_.substr(off + sizeof r, r.length));
        defined_[r.id] = true;
        return true;
      }
      case RecordType::Kernel: {
        KernelRecord r;
        if (!fixed(head, off, truncated, &r)) return false;
        snapdiff::KernelLaunch k;
        k.device = device(r.device, off + offsetof(KernelRecord, device));
        k.time_us = time(r.time_us, off + offsetof(KernelRecord, time_us));
        k.stream = r.stream;
        k.pid = pid_;
        k.thread = r.thread;
        for (int i = 0; i < 3; ++i) {
          k.grid[i] = r.grid[i];
          k.block[i] = r.block[i];
        }
        k.graph = r.api == uint16_t(LaunchApi::RuntimeGraph) || r.api == uint16_t(LaunchApi::DriverGraph);
        if (r.api > uint16_t(LaunchApi::DriverGraph))
          fail(off + offsetof(KernelRecord, api), "unknown launch API " + std::to_string(r.api));
        k.name = kernel_name(r.name, off + offsetof(KernelRecord, name));
        t_.kernels.push_back(k);
        return true;
      }
      case RecordType::Memory: {
        MemoryRecord r;
        if (!fixed(head, off, truncated, &r)) return false;
        memory(r, off);
        return true;
      }
      case RecordType::Sample: {
        SampleRecord r;
        if (!fixed(head, off, truncated, &r)) return false;
        snapdiff::DeviceMemorySample s;
        s.device = device(r.device, off + offsetof(SampleRecord, device));
        s.time_us = time(r.time_us, off + offsetof(SampleRecord, time_us));
        if (r.total_bytes > snapdiff::kMaxDeviceBytes)
          fail(off + offsetof(SampleRecord, total_bytes), "implausibly large size: more than any device holds (2^50 bytes)");
        if (r.free_bytes > r.total_bytes) fail(off + offsetof(SampleRecord, free_bytes), "more free bytes than total bytes");
        s.free_bytes = r.free_bytes;
        s.total_bytes = r.total_bytes;
        auto it = reserved_.find(s.device);
        s.reserved_bytes = it == reserved_.end() ? 0 : it->second;
        s.label = str(r.label, off + offsetof(SampleRecord, label));
        s.pid = pid_;
        t_.device_memory.push_back(s);
        return true;
      }
      case RecordType::Context: {
        ContextRecord r;
        if (!fixed(head, off, truncated, &r)) return false;
        device(r.device, off + offsetof(ContextRecord, device));
        time(r.time_us, off + offsetof(ContextRecord, time_us));
        return true;
      }
      case RecordType::Note: {
        NoteRecord r;
        if (!fixed(head, off, truncated, &r)) return false;
        time(r.time_us, off + offsetof(NoteRecord, time_us));
        notes_.emplace_back(str_view(r.text, off + offsetof(NoteRecord, text)));
        return true;
      }
      case RecordType::Command: {
        CommandRecord r;
        if (!fixed(head, off, truncated, &r)) return false;
        command_ = std::string(str_view(r.text, off + offsetof(CommandRecord, text)));
        return true;
      }
      case RecordType::End:
        break;
    }
    fail(off, "unknown record type " + std::to_string(head.type));
  }

  StrId kernel_name(uint32_t id, uint64_t at) {
    const StrId raw = str(id, at);
    auto it = demangled_.find(raw);
    if (it != demangled_.end()) return it->second;
    const StrId d = t_.strings.intern(demangle_kernel_name(t_.strings.get(raw)));
    demangled_.emplace(raw, d);
    return d;
  }

  // PyTorch's allocator takes `size` more bytes on `dev`: at most what a device holds.
  void hold(int dev, uint64_t size, uint64_t off) {
    uint64_t& r = reserved_[dev];
    r += size;  // both at most 2^50: no wrap
    if (r > snapdiff::kMaxDeviceBytes)
      fail(off, "the process holds more device memory than any device has (2^50 bytes): the log is corrupt");
  }

  void memory(const MemoryRecord& r, uint64_t off) {
    if (r.op < uint16_t(MemoryOp::Alloc) || r.op > uint16_t(MemoryOp::Unmap))
      fail(off + offsetof(MemoryRecord, op), "unknown memory operation " + std::to_string(r.op));
    const int dev = device(r.device, off + offsetof(MemoryRecord, device));
    const StrId api = str(r.api, off + offsetof(MemoryRecord, api));
    const StrId lib = str(r.library, off + offsetof(MemoryRecord, library));
    if (r.size > snapdiff::kMaxDeviceBytes)
      fail(off + offsetof(MemoryRecord, size), "implausibly large size: more than any device holds (2^50 bytes)");
    if (r.result != 0) return;  // a failed call took or gave back nothing
    snapdiff::DriverMemoryEvent e;
    e.device = dev;
    e.time_us = time(r.time_us, off + offsetof(MemoryRecord, time_us));
    e.pid = pid_;
    e.thread = r.thread;
    e.kind = snapdiff::DriverMemoryKind(r.op - 1);
    e.library = lib;
    e.api = api;
    e.caller = snapdiff::caller_of_library(basename_of(t_.strings.get(lib)));
    e.addr = r.addr;
    e.size = r.size;
    e.handle = r.handle;
    e.stream = r.stream;
    const bool pytorch = e.caller == snapdiff::MemoryCaller::PyTorch;
    switch (MemoryOp(r.op)) {
      case MemoryOp::Alloc:
      case MemoryOp::AllocAsync:
        allocs_[r.addr] = {r.size, dev, pytorch && MemoryOp(r.op) == MemoryOp::Alloc};
        if (pytorch && MemoryOp(r.op) == MemoryOp::Alloc) hold(dev, r.size, off);
        break;
      case MemoryOp::Free:
      case MemoryOp::FreeAsync: {
        auto it = allocs_.find(r.addr);
        if (it != allocs_.end()) {
          e.size = it->second.size;
          if (e.device < 0) e.device = it->second.device;
          if (it->second.pytorch) reserved_[it->second.device] -= it->second.size;
          allocs_.erase(it);
        }
        break;
      }
      case MemoryOp::Create:
        handles_[r.handle] = {r.size, dev, pytorch};
        break;
      case MemoryOp::Release: {
        auto it = handles_.find(r.handle);
        if (it != handles_.end()) {
          e.size = it->second.size;
          if (e.device < 0) e.device = it->second.device;
          handles_.erase(it);
        }
        break;
      }
      case MemoryOp::Map:
        maps_[r.addr] = {r.size, dev, pytorch};
        if (pytorch) hold(dev, r.size, off);
        break;
      case MemoryOp::Unmap: {
        // cuMemUnmap(ptr, size) may unmap several mappings at once: every
        // mapping that starts inside [addr, addr + size).
        auto it = maps_.lower_bound(r.addr);
        while (it != maps_.end() && it->first < r.addr + r.size) {
          if (e.device < 0) e.device = it->second.device;
          if (it->second.pytorch) reserved_[it->second.device] -= it->second.size;
          it = maps_.erase(it);
        }
        break;
      }
    }
    t_.driver_memory.push_back(e);
  }

  std::string_view b_;
  const std::string& name_;
  Trace& t_;
  const ReadOptions& opts_;
  uint32_t pid_ = 0;
  std::vector<StrId> strings_;  // file's string id -> the trace's
  std::vector<bool> defined_;
  std::unordered_map<StrId, StrId> demangled_;
  std::unordered_map<uint64_t, Live> allocs_, handles_;  // by address / by handle
  std::map<uint64_t, Live> maps_;                         // by address
  std::unordered_map<int, uint64_t> reserved_;            // PyTorch's bytes from the driver, by device
  std::vector<std::string> notes_;
  std::string command_;
};

const char* file_kind(mode_t m) {
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISDIR(m)) return "a folder";
  return "not a regular file";
}

std::string mib(uint64_t b) { return std::to_string(b >> 20) + " MiB"; }

// A log is a regular file (the injection library maps and grows it): it is
// opened without blocking (a FIFO without a writer would wait forever),
// anything else is refused before a byte is read, and the read stops one
// byte past `max_bytes` whatever the file does meanwhile (it may still grow).
std::string read_file(const std::string& path, uint64_t max_bytes, const std::string& too_big) {
  auto error = [&](uint64_t off, const std::string& msg) {
    InputError e(off, msg);
    e.set_file(path);
    return e;
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    InputError e("cannot open: " + errno_text(errno));
    e.set_file(path);
    throw e;
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st{};
  if (::fstat(fd, &st) != 0) {
    InputError e("cannot read: " + errno_text(errno));
    e.set_file(path);
    throw e;
  }
  if (!S_ISREG(st.st_mode)) {
    InputError e(std::string("not a snapcapture log: ") + file_kind(st.st_mode) + ", not a regular file");
    e.set_file(path);
    throw e;
  }
  if (max_bytes && uint64_t(st.st_size) > max_bytes) throw error(0, too_big);
  std::string out;
  out.reserve(size_t(st.st_size));
  char buf[1 << 16];
  for (;;) {
    size_t want = sizeof buf;
    if (max_bytes && uint64_t(out.size()) + want > max_bytes + 1) want = size_t(max_bytes + 1 - out.size());
    const ssize_t n = ::read(fd, buf, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw error(out.size(), "cannot read: " + errno_text(errno));
    if (n == 0) break;
    out.append(buf, size_t(n));
    if (max_bytes && uint64_t(out.size()) > max_bytes) throw error(max_bytes, too_big);
  }
  return out;
}

bool is_dir(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

std::vector<std::string> logs_in_dir(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) {
    InputError e("cannot read the folder: " + errno_text(errno));
    e.set_file(dir);
    throw e;
  }
  std::vector<std::string> out;
  while (dirent* ent = ::readdir(d)) {
    const std::string n = ent->d_name;
    if (n.size() > std::strlen(kFileSuffix) && ends_with(n, kFileSuffix))
      out.push_back(dir + (ends_with(dir, "/") ? "" : "/") + n);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

uint32_t read_log_bytes(std::string_view bytes, const std::string& name, Trace& out, const ReadOptions& opts) {
  return FileReader(bytes, name, out, opts).read();
}

void read_logs(const std::vector<std::string>& paths, Trace& out, const ReadOptions& opts) {
  std::vector<std::string> files;
  for (const std::string& p : paths) {
    if (is_dir(p)) {
      for (std::string& f : logs_in_dir(p)) files.push_back(std::move(f));
    } else {
      files.push_back(p);
    }
  }
  std::string pids;
  uint64_t file_bytes = 0;
  for (const std::string& f : files) {
    // What this log may hold: the input bound less the logs before it, and
    // the memory bound (the log's bytes are held while it is read).
    uint64_t max_bytes = 0;
    std::string limit_what;
    if (opts.max_input_bytes) {
      max_bytes = opts.max_input_bytes > file_bytes ? opts.max_input_bytes - file_bytes : 1;
      limit_what = "the logs hold more than --max-input-bytes " + std::to_string(opts.max_input_bytes) + " bytes";
    }
    if (opts.max_memory_bytes && (!max_bytes || opts.max_memory_bytes < max_bytes)) {
      max_bytes = opts.max_memory_bytes;
      limit_what = "reading the logs needs more than the limit of " + mib(opts.max_memory_bytes) +
                   " of memory (the log alone is larger)";
    }
    const std::string bytes = read_file(f, max_bytes, limit_what);
    file_bytes += bytes.size();
    const uint32_t pid = read_log_bytes(bytes, f, out, opts);
    if (!pids.empty()) pids += ' ';
    pids += std::to_string(pid);
  }
  const auto by_time = [](const auto& a, const auto& b) { return a.time_us < b.time_us; };
  std::stable_sort(out.kernels.begin(), out.kernels.end(), by_time);
  std::stable_sort(out.driver_memory.begin(), out.driver_memory.end(), by_time);
  std::stable_sort(out.device_memory.begin(), out.device_memory.end(), by_time);
  out.metadata.emplace_back("capture.processes", pids);
  out.source.format = "snapcapture-log";
  out.source.format_detail = "log version " + std::to_string(kVersion) + ", " + std::to_string(files.size()) +
                             (files.size() == 1 ? " process" : " processes");
  out.source.file_bytes = file_bytes;
  out.source.decoded_bytes = file_bytes;
}

Trace read_logs(const std::vector<std::string>& paths, const ReadOptions& opts) {
  Trace t;
  read_logs(paths, t, opts);
  return t;
}

}  // namespace snapcapture::log
