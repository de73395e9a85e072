// The top-level readers. An input is opened once (Source), its format told
// from its first decoded bytes, never from its name (detect), and read by the
// reader of that format (kReaders).
#include <algorithm>
#include <cstdio>
#include <iterator>
#include <thread>

#include "input/detect.hpp"
#include "input/json_stream.hpp"
#include "input/pickle_doc.hpp"
#include "input/profiler_input.hpp"
#include "input/snap_parts.hpp"
#include "input/source.hpp"
#include "snapdiff/error.hpp"
#include "snapdiff/input/input.hpp"

namespace snapdiff {

uint64_t predicted_memory_bytes(uint64_t decoded_bytes, bool json) {
  // Peak RSS of `snapdiff report` over input size, measured on the
  // 1,000,000-event snapshot and its 2x and 4x repeats (0.83, 0.71, 0.65 for
  // PyTorch's pickles; 0.92, 1.16 before issue 20, for a pickle whose
  // entries share no frames, bench/make_big_snapshot.py; 7.4 for .snap JSON
  // text, which goes through a JSON DOM), with headroom, plus the fixed cost
  // of the program.
  const double factor = json ? 9.0 : 1.5;
  return uint64_t(double(decoded_bytes) * factor) + (uint64_t(64) << 20);
}

namespace {

using detail::InputFormat;
using detail::Source;

const uint8_t* bytes_of(std::string_view s) { return reinterpret_cast<const uint8_t*>(s.data()); }

// ---- the readers ------------------------------------------------------------
//
// Each reads either the whole decoded input held in memory (`text`), or a
// regular file as it is stored, through its descriptor.

// `held`: bytes of the input held in memory besides the text being parsed
// in place (a decoded gzip buffer, a pipe's buffer), counted against the
// memory bound as the reader counts what it builds.
void read_pickle_text(std::string_view text, const LoadOptions& opts, uint64_t held, Trace& out) {
  detail::read_torch_pickle_bounded(bytes_of(text), text.size(), out, opts.progress,
                                    detail::MemoryBudget(opts, held, detail::kProgramMemoryBytes));
}

// A plain pickle in a regular file is parsed as it is read, in chunks through
// a small buffer: no mapping of the whole file, whose page faults and TLB
// misses cost more than the copy.
void read_pickle_file(Source& src, const LoadOptions& opts, Trace& out) {
  out.source.file_bytes = src.size();
  out.source.decoded_bytes = src.size();
  detail::check_memory(predicted_memory_bytes(src.size(), false), opts);
  const bool ahead = opts.pickle_read_ahead > 0 ||
                     (opts.pickle_read_ahead < 0 && src.size() >= (uint64_t(4) << 20) &&
                      std::thread::hardware_concurrency() >= 2);
  detail::read_torch_pickle_fd(src.fd(), src.size(), out, opts.progress,
                               detail::MemoryBudget(opts, 0, detail::kProgramMemoryBytes), ahead);
}

// A .snap is parsed into a JSON DOM: refused first when the DOM would pass
// the memory bound. A DOM takes at most about 32 bytes a token (an empty
// object: its value, its map, the comma), plus the strings' bytes; a real
// .snap about 5 bytes a byte of text, which the prediction (9) covers.
// A version 3 (binary) .snap holds its own counts: its reader checks them
// against the bounds before it builds anything.
constexpr uint64_t kSnapDomBytesPerToken = 32;
void read_snap_text(std::string_view text, const LoadOptions& opts, uint64_t held, Trace& out) {
  if (detail::is_snap_binary(text)) {
    detail::read_snap_binary(text, out, opts.max_decoded_bytes,
                             opts.max_memory_bytes ? opts.max_memory_bytes - std::min(opts.max_memory_bytes, held) : 0);
    return;
  }
  if (opts.max_memory_bytes)
    detail::check_memory(detail::kFixedMemoryBytes + std::max<uint64_t>(held, text.size()) +  // a mapping is resident too
                             detail::json_token_bound(text) * kSnapDomBytesPerToken,
                         opts);
  detail::read_snap_json(text, out);
}

void read_chrome_trace_text(std::string_view text, const LoadOptions& opts, uint64_t held, Trace& out) {
  auto in = detail::memory_byte_stream(bytes_of(text), text.size(), false, opts.max_decoded_bytes);
  detail::read_chrome_trace(*in, out, opts, held);
}

// A Chrome trace in a regular file (plain or gzip) is streamed, never held
// whole. Memory grows with the events kept, not the text: about 0.4 bytes per
// byte of JSON on the ResNet-50 trace (docs/performance.md), with headroom;
// a gzip'd trace is taken as 16 times its size.
void read_chrome_trace_file(Source& src, const LoadOptions& opts, Trace& out) {
  if (opts.max_memory_bytes) {
    const uint64_t text = src.gzip() ? src.size() * 16 : src.size();
    const uint64_t predicted = text / 2 + (uint64_t(64) << 20);
    if (predicted > opts.max_memory_bytes)
      throw InputError("reading this trace needs about " + std::to_string(predicted >> 20) +
                       " MiB of memory, more than the limit of " + std::to_string(opts.max_memory_bytes >> 20) +
                       " MiB (raise it with --max-memory)");
  }
  out.source.file_bytes = src.size();
  out.source.gzip = src.gzip();
  auto in = detail::file_byte_stream(src.fd(), src.size(), src.gzip(), opts.max_decoded_bytes);
  detail::read_chrome_trace(*in, out, opts);
}

[[noreturn]] void refuse_timeline() {
  throw InputError(uint64_t(0),
                   "this is a torch.profiler memory timeline (export_memory_timeline): PyTorch's categories over "
                   "time, without the allocations themselves; give it with --memory-timeline beside the Chrome "
                   "trace of the same run (snapdiff report TRACE --memory-timeline FILE)");
}
[[noreturn]] void refuse_timeline_text(std::string_view, const LoadOptions&, uint64_t, Trace&) { refuse_timeline(); }
[[noreturn]] void refuse_timeline_file(Source&, const LoadOptions&, Trace&) { refuse_timeline(); }

// Empty and Unknown.
[[noreturn]] void refuse_text(std::string_view text, const LoadOptions&, uint64_t, Trace&) {
  if (text.empty()) throw InputError(uint64_t(0), "empty file");
  char hex[8];
  std::snprintf(hex, sizeof hex, "0x%02x", unsigned(uint8_t(text[0])));
  throw InputError(uint64_t(0), std::string("unrecognised input (first byte ") + hex +
                                    "): expected a PyTorch memory snapshot pickle, a .snap file, a torch.profiler "
                                    "Chrome trace, or any of them gzip-compressed");
}

struct FormatReader {
  InputFormat format;
  // Held whole: reading and analysing is predicted to need
  // predicted_memory_bytes(decoded bytes, json), plus the decoded buffer when
  // the input is gzip; refused beyond --max-memory before it is read.
  bool json;
  void (*read_text)(std::string_view text, const LoadOptions& opts, uint64_t held, Trace& out);
  // A regular file stored plain (from_plain_file) or gzip (from_gzip_file) is
  // read straight from its descriptor instead; read_file checks its own
  // prediction first.
  bool from_plain_file;
  bool from_gzip_file;
  void (*read_file)(Source& src, const LoadOptions& opts, Trace& out);
};

constexpr FormatReader kReaders[] = {
    // format                       json   held whole              plain  gzip   from the file
    {InputFormat::Empty,             false, refuse_text,            false, false, nullptr},
    {InputFormat::TorchPickle,       false, read_pickle_text,       true,  false, read_pickle_file},
    {InputFormat::Snap,              true,  read_snap_text,         false, false, nullptr},
    {InputFormat::ChromeTrace,       true,  read_chrome_trace_text, true,  true,  read_chrome_trace_file},
    {InputFormat::MemoryTimeline,    true,  refuse_timeline_text,   true,  true,  refuse_timeline_file},
    {InputFormat::MemoryTimelineRaw, true,  refuse_timeline_text,   true,  true,  refuse_timeline_file},
    {InputFormat::Unknown,           false, refuse_text,            false, false, nullptr},
};

constexpr bool readers_in_format_order() {
  for (size_t i = 0; i < std::size(kReaders); ++i)
    if (size_t(kReaders[i].format) != i) return false;
  return std::size(kReaders) == size_t(InputFormat::Unknown) + 1;
}
static_assert(readers_in_format_order(), "kReaders has one entry per InputFormat, in its order");

Trace read_format(Source& src, const LoadOptions& opts) {
  const FormatReader& reader = kReaders[size_t(src.format())];
  Trace t;
  if (src.regular_file() && (src.gzip() ? reader.from_gzip_file : reader.from_plain_file)) {
    reader.read_file(src, opts, t);
    return t;
  }
  t.source.file_bytes = src.bytes().size();
  const std::string_view text = src.decoded(opts);
  t.source.gzip = src.gzip();
  t.source.decoded_bytes = text.size();
  detail::check_memory((src.gzip() ? text.size() : 0) + predicted_memory_bytes(text.size(), reader.json), opts);
  // Held while the text is read: the decoded buffer and the stored bytes
  // (mapped or not, they are resident) for gzip; a pipe's buffer. A mapped
  // plain file is released behind the reader (below).
  const uint64_t held = src.gzip() ? t.source.file_bytes + text.size() : (src.mapped() ? 0 : text.size());
  if (!src.mapped() || src.gzip()) {
    reader.read_text(text, opts, held, t);
    return t;
  }
  // Plain file, memory-mapped: parsed in place, dropping pages behind the
  // reader so resident memory does not grow with the file.
  LoadOptions o = opts;
  o.progress = [&src, &opts](uint64_t done, uint64_t total) {
    src.release_before(size_t(done) > (size_t(1) << 20) ? size_t(done) - (size_t(1) << 20) : 0);
    if (opts.progress) opts.progress(done, total);
  };
  reader.read_text(text, o, 0, t);
  return t;
}

// Read, the model is held to the bound once more with what analysing it
// takes (the reader counted only what it built).
Trace read_source(Source& src, const LoadOptions& opts) {
  Trace t = read_format(src, opts);
  if (opts.recorded_max_entries >= 0 && t.settings.max_entries < 0) t.settings.max_entries = opts.recorded_max_entries;
  detail::check_memory(detail::analysis_memory_bytes(t), opts);
  return t;
}

}  // namespace

Trace load_trace_from_memory(std::string_view bytes, const std::string& name, const LoadOptions& opts) {
  try {
    Source src = Source::of_bytes(bytes);
    return read_source(src, opts);
  } catch (InputError& e) {
    e.set_file(name);
    throw;
  }
}

Trace load_trace(const std::string& path, const LoadOptions& opts) {
  Trace t;
  try {
    Source src = Source::open(path, opts);
    t = read_source(src, opts);
  } catch (InputError& e) {
    e.set_file(path);
    throw;
  }
  const std::string list = !opts.tensors_path.empty() ? opts.tensors_path
                           : opts.tensors_beside      ? tensor_list_beside(path)
                                                      : std::string();
  if (!list.empty()) {
    // A JSON tree of a tensor list takes about 7.5 times its text (measured:
    // 40 MiB of notes, 300 MB resident while parsed): the text is bounded by
    // a ninth of what --max-memory leaves, and by 256 MiB, before it is read.
    constexpr uint64_t kTreeFactor = 9;
    uint64_t limit = uint64_t(256) << 20;
    if (opts.max_memory_bytes != 0) {
      const uint64_t held = t.memory_bytes();
      const uint64_t left = opts.max_memory_bytes > held ? opts.max_memory_bytes - held : 0;
      limit = std::min(limit, std::max<uint64_t>(left / kTreeFactor, 1));
    }
    t.tensors = read_tensor_list(read_small_document(list, "tensor list", limit), list);
    if (opts.max_memory_bytes != 0 && t.memory_bytes() > opts.max_memory_bytes) {
      InputError e("the tensor list would need more memory than --max-memory allows");
      e.set_file(list);
      throw e;
    }
  }
  return t;
}

}  // namespace snapdiff
