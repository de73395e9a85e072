// Format detection and the top-level readers. Formats are told apart by
// their first bytes, never by the file name.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "input/file_source.hpp"
#include "input/pickle_doc.hpp"
#include "input/profiler_input.hpp"
#include "snapdiff/error.hpp"
#include "snapdiff/input.hpp"

namespace snapdiff {
namespace {

bool looks_like_json(const uint8_t* p, size_t n) {
  size_t i = 0;
  if (n >= 3 && p[0] == 0xEF && p[1] == 0xBB && p[2] == 0xBF) i = 3;
  while (i < n && (p[i] == ' ' || p[i] == '\n' || p[i] == '\r' || p[i] == '\t')) ++i;
  return i < n && (p[i] == '{' || p[i] == '[');
}

bool looks_like_pickle(const uint8_t* p, size_t n) {
  if (n == 0) return false;
  // PROTO (protocol 2+), or what protocol 0/1 pickles of a dict/list start with.
  return p[0] == 0x80 || p[0] == '(' || p[0] == '}' || p[0] == ']';
}

void read_any(const uint8_t* p, size_t n, Trace& t, const LoadOptions& opts) {
  if (n == 0) throw InputError(uint64_t(0), "empty file");
  if (looks_like_pickle(p, n)) {
    read_torch_pickle(p, n, t, opts.progress);
    return;
  }
  if (looks_like_json(p, n)) {
    // A torch.profiler Chrome trace (or memory timeline), else .snap.
    if (detail::load_profiler_memory(p, n, opts, t)) return;
    read_snap(std::string_view(reinterpret_cast<const char*>(p), n), t);
    return;
  }
  char hex[8];
  std::snprintf(hex, sizeof hex, "0x%02x", p[0]);
  throw InputError(uint64_t(0), std::string("unrecognised input (first byte ") + hex +
                                    "): expected a PyTorch memory snapshot pickle, a .snap file, a torch.profiler Chrome trace, or any of them gzip-compressed");
}

}  // namespace

uint64_t predicted_memory_bytes(uint64_t decoded_bytes, bool json) {
  // Peak RSS of `snapdiff report` over input size, measured on the
  // 1,000,000-event snapshot and its 2x and 4x repeats (0.83, 0.71, 0.65 for
  // PyTorch's pickles; 1.16 for a pickle whose entries share no frames,
  // bench/make_big_snapshot.py; 7.4 for .snap JSON text, which goes through
  // a JSON DOM), with headroom, plus the fixed cost of the program.
  const double factor = json ? 9.0 : 1.5;
  return uint64_t(double(decoded_bytes) * factor) + (uint64_t(64) << 20);
}

namespace {

std::string gib_text(uint64_t b) {
  char buf[32];
  if (b >= (uint64_t(1) << 30)) std::snprintf(buf, sizeof buf, "%.1f GiB", double(b) / double(uint64_t(1) << 30));
  else std::snprintf(buf, sizeof buf, "%.0f MiB", double(b) / double(uint64_t(1) << 20));
  return buf;
}

// Refuses an input predicted to need more memory than the bound.
void check_memory(uint64_t predicted, const LoadOptions& opts) {
  if (opts.max_memory_bytes == 0 || predicted <= opts.max_memory_bytes) return;
  throw InputError("reading and analysing this input needs about " + gib_text(predicted) +
                                    " of memory, more than the limit of " + gib_text(opts.max_memory_bytes) +
                                    " (raise it with --max-memory)");
}

}  // namespace

Trace load_trace_from_memory(std::string_view bytes, const std::string& name, const LoadOptions& opts) {
  Trace t;
  try {
    const uint8_t* p = reinterpret_cast<const uint8_t*>(bytes.data());
    t.source.file_bytes = bytes.size();
    if (detail::is_gzip(p, bytes.size())) {
      // The decoded buffer is held while it is parsed: stop inflating where
      // buffer plus analysis would pass the memory bound.
      uint64_t cap = opts.max_decoded_bytes;
      const char* cap_option = "--max-input-bytes";
      if (opts.max_memory_bytes) {
        uint64_t fixed = predicted_memory_bytes(0, false);
        check_memory(fixed, opts);
        uint64_t by_memory = opts.max_memory_bytes > fixed ? (opts.max_memory_bytes - fixed) / 2 : 0;
        if (by_memory < cap) {
          cap = by_memory;
          cap_option = "--max-memory";
        }
      }
      std::vector<uint8_t> raw = detail::gunzip(p, bytes.size(), cap, cap_option);
      t.source.gzip = true;
      t.source.decoded_bytes = raw.size();
      check_memory(raw.size() + predicted_memory_bytes(raw.size(), looks_like_json(raw.data(), raw.size())), opts);
      read_any(raw.data(), raw.size(), t, opts);
    } else {
      t.source.decoded_bytes = bytes.size();
      check_memory(predicted_memory_bytes(bytes.size(), looks_like_json(p, bytes.size())), opts);
      read_any(p, bytes.size(), t, opts);
    }
  } catch (InputError& e) {
    e.set_file(name);
    throw;
  }
  return t;
}

namespace {

// A plain (not gzip) pickle in a regular file is parsed as it is read, in
// chunks through a small buffer: no mapping of the whole file, whose page
// faults and TLB misses cost more than the copy. Returns false, having read
// nothing that matters, when the file is anything else.
bool load_plain_pickle(const std::string& path, const LoadOptions& opts, Trace& t) {
  struct stat st {};
  // Only regular files are opened here (opening a FIFO has side effects).
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;  // the general path reports the error
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) return false;
  uint8_t head[2];
  ssize_t r;
  do {
    r = ::pread(fd, head, sizeof head, 0);
  } while (r < 0 && errno == EINTR);
  if (r <= 0) return false;
  if (detail::is_gzip(head, size_t(r)) || !looks_like_pickle(head, size_t(r))) return false;
  uint64_t size = uint64_t(st.st_size);
  t.source.file_bytes = size;
  t.source.decoded_bytes = size;
  try {
    check_memory(predicted_memory_bytes(size, false), opts);
    detail::read_torch_pickle_fd(fd, size, t, opts.progress);
  } catch (InputError& e) {
    e.set_file(path);
    throw;
  }
  return true;
}

}  // namespace

Trace load_trace(const std::string& path, const LoadOptions& opts) {
  try {
    {
      // Chrome traces (plain or gzip) are streamed, never held whole.
      Trace t;
      if (detail::load_profiler_file(path, opts, t)) return t;
    }
    {
      Trace t;
      if (load_plain_pickle(path, opts, t)) return t;
    }
    detail::FileBytes fb(path);
    if (!fb.mapped() || detail::is_gzip(fb.data(), fb.size())) {
      return load_trace_from_memory(
          std::string_view(reinterpret_cast<const char*>(fb.data()), fb.size()), path, opts);
    }
    // Plain file, memory-mapped: parse in place and drop pages behind the
    // reader so resident memory does not grow with the file.
    LoadOptions o = opts;
    detail::FileBytes* fbp = &fb;
    o.progress = [fbp, &opts](uint64_t done, uint64_t total) {
      fbp->release_before(size_t(done) > (size_t(1) << 20) ? size_t(done) - (size_t(1) << 20) : 0);
      if (opts.progress) opts.progress(done, total);
    };
    return load_trace_from_memory(std::string_view(reinterpret_cast<const char*>(fb.data()), fb.size()), path, o);
  } catch (InputError& e) {
    if (e.file().empty()) e.set_file(path);
    throw;
  }
}

}  // namespace snapdiff
