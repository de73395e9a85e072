// Routing inputs to the torch.profiler readers, and PyTorch's memory
// timeline exports.
#include <fcntl.h>
#include <simdjson.h>
#include <sys/stat.h>
#include <unistd.h>

#include "input/file_source.hpp"
#include "input/profiler_input.hpp"
#include "snapdiff/error.hpp"
#include "snapdiff/profiler.hpp"
#include "util/read_file.hpp"

namespace snapdiff {

const char* const MemoryTimeline::kCategoryNames[MemoryTimeline::kCategories] = {
    "parameter", "optimizer_state", "input", "temporary", "activation", "gradient", "autograd_detail", "unknown"};

bool is_profiler_trace(const Trace& t) {
  if (t.source.format == "chrome-trace") return true;
  for (const Device& d : t.devices)
    if (d.from_profiler()) return true;
  return false;
}

namespace detail {

namespace {

constexpr size_t kSniffBytes = size_t(64) << 10;

[[noreturn]] void refuse_timeline() {
  throw InputError(uint64_t(0),
                   "this is a torch.profiler memory timeline (export_memory_timeline): PyTorch's categories over "
                   "time, without the allocations themselves; give it with --memory-timeline beside the Chrome "
                   "trace of the same run (snapdiff report TRACE --memory-timeline FILE)");
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

bool load_profiler_file(const std::string& path, const LoadOptions& opts, Trace& out) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) return false;
  Fd f;
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd < 0) return false;
  if (::fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode)) return false;
  const uint64_t size = uint64_t(st.st_size);
  uint8_t head2[2] = {0, 0};
  if (::pread(f.fd, head2, 2, 0) < 2) return false;
  const bool gz = is_gzip(head2, 2);
  ProfilerJson kind;
  try {
    kind = sniff_profiler_json(peek_decoded(f.fd, size, kSniffBytes));
  } catch (const InputError&) {
    return false;  // the general reader reports it
  }
  if (kind == ProfilerJson::None) return false;
  try {
    if (kind != ProfilerJson::ChromeTrace) refuse_timeline();
    // Memory grows with the events kept, not the text: about 0.4 bytes per
    // byte of JSON on the ResNet-50 trace (docs/performance.md), with
    // headroom; a gzip'd trace is taken as 16 times its size.
    if (opts.max_memory_bytes) {
      const uint64_t text = gz ? size * 16 : size;
      const uint64_t predicted = text / 2 + (uint64_t(64) << 20);
      if (predicted > opts.max_memory_bytes)
        throw InputError("reading this trace needs about " + std::to_string(predicted >> 20) +
                         " MiB of memory, more than the limit of " + std::to_string(opts.max_memory_bytes >> 20) +
                         " MiB (raise it with --max-memory)");
    }
    out.source.file_bytes = size;
    out.source.gzip = gz;
    auto stream = file_byte_stream(f.fd, size, gz, opts.max_decoded_bytes);
    read_chrome_trace(*stream, out, opts);
  } catch (InputError& e) {
    e.set_file(path);
    throw;
  }
  return true;
}

bool load_profiler_memory(const uint8_t* p, size_t n, const LoadOptions& opts, Trace& out) {
  ProfilerJson kind = sniff_profiler_json(peek_decoded_memory(p, n, kSniffBytes));
  if (kind == ProfilerJson::None) return false;
  if (kind != ProfilerJson::ChromeTrace) refuse_timeline();
  const bool gz = is_gzip(p, n);
  if (out.source.file_bytes == 0) out.source.file_bytes = n;
  if (gz) out.source.gzip = true;
  auto stream = memory_byte_stream(p, n, gz, opts.max_decoded_bytes);
  read_chrome_trace(*stream, out, opts);
  return true;
}

}  // namespace detail

namespace {

namespace dom = simdjson::dom;

[[noreturn]] void bad(const std::string& path, const std::string& msg) { throw InputError(path, msg); }

int64_t int_at(dom::element e, const std::string& path) {
  int64_t v;
  if (!e.get_int64().get(v)) return v;
  double d;
  if (!e.get_double().get(d) && d > -9.2e18 && d < 9.2e18 && double(int64_t(d)) == d) return int64_t(d);
  bad(path, "expected an integer");
}

}  // namespace

MemoryTimeline read_memory_timeline(std::string_view bytes, const std::string& name) {
  MemoryTimeline tl;
  tl.name = name;
  try {
    const uint8_t* p = reinterpret_cast<const uint8_t*>(bytes.data());
    std::vector<uint8_t> raw;
    if (detail::is_gzip(p, bytes.size())) {
      raw = detail::gunzip(p, bytes.size(), uint64_t(16) << 30);
      bytes = std::string_view(reinterpret_cast<const char*>(raw.data()), raw.size());
    }
    detail::ProfilerJson kind = detail::sniff_profiler_json(bytes.substr(0, size_t(64) << 10));
    if (kind != detail::ProfilerJson::MemoryTimeline && kind != detail::ProfilerJson::MemoryTimelineRaw)
      throw InputError(uint64_t(0),
                       "not a torch.profiler memory timeline (expected what export_memory_timeline writes: "
                       "[times, sizes] in .json/.json.gz, or [[time_ns, action, bytes, category], ...] in "
                       "raw.json.gz)");
    tl.raw = kind == detail::ProfilerJson::MemoryTimelineRaw;
    simdjson::padded_string ps(bytes);
    dom::parser parser;
    dom::element root;
    auto err = parser.parse(ps).get(root);
    if (err) {
      // simdjson gives no position: name the kind of problem.
      throw InputError(std::string("$"), std::string("malformed JSON: ") + simdjson::error_message(err));
    }
    dom::array top;
    if (root.get_array().get(top)) bad("$", "expected an array");
    if (tl.raw) {
      size_t i = 0;
      tl.rows.reserve(top.size());
      for (dom::element row : top) {
        const std::string path = "$[" + std::to_string(i) + "]";
        dom::array a;
        if (row.get_array().get(a) || a.size() != 4) bad(path, "expected [time_ns, action, bytes, category]");
        MemoryTimeline::Row r;
        size_t k = 0;
        int64_t v[4];
        for (dom::element x : a) {
          v[k] = int_at(x, path + "[" + std::to_string(k) + "]");
          ++k;
        }
        if (v[1] < 1 || v[1] > 4) bad(path + "[1]", "unknown action " + std::to_string(v[1]) + " (1-4)");
        if (v[3] < 0 || v[3] >= MemoryTimeline::kCategories)
          bad(path + "[3]", "unknown category index " + std::to_string(v[3]) + " (0-7)");
        r.time_ns = v[0];
        r.action = uint8_t(v[1]);
        r.bytes = v[2];
        r.category = uint8_t(v[3]);
        tl.rows.push_back(r);
        ++i;
      }
    } else {
      if (top.size() != 2) bad("$", "expected [times, sizes]");
      dom::array times, sizes;
      if (top.at(0).get_array().get(times)) bad("$[0]", "expected an array of times");
      if (top.at(1).get_array().get(sizes)) bad("$[1]", "expected an array of rows");
      if (times.size() != sizes.size())
        bad("$[1]", std::to_string(sizes.size()) + " rows for " + std::to_string(times.size()) + " times");
      size_t i = 0;
      for (dom::element t : times) tl.times_us.push_back(int_at(t, "$[0][" + std::to_string(i++) + "]"));
      i = 0;
      for (dom::element row : sizes) {
        const std::string path = "$[1][" + std::to_string(i) + "]";
        dom::array a;
        if (row.get_array().get(a) || (a.size() != 9 && a.size() != 8))
          bad(path, "expected 9 columns (0, then bytes per category)");
        std::array<int64_t, MemoryTimeline::kCategories> v{};
        size_t k = 0, skip = a.size() == 9 ? 1 : 0;
        for (dom::element x : a) {
          int64_t b = int_at(x, path + "[" + std::to_string(k) + "]");
          if (k >= skip) v[k - skip] = b;
          ++k;
        }
        tl.sizes.push_back(v);
        ++i;
      }
    }
  } catch (InputError& e) {
    e.set_file(name);
    throw;
  }
  return tl;
}

MemoryTimeline load_memory_timeline(const std::string& path, const LoadOptions& opts) {
  (void)opts;
  try {
    detail::FileBytes fb(path);
    return read_memory_timeline(std::string_view(reinterpret_cast<const char*>(fb.data()), fb.size()), path);
  } catch (InputError& e) {
    if (e.file().empty()) e.set_file(path);
    throw;
  }
}

}  // namespace snapdiff
