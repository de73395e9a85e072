// .snap version 3: a header, a JSON META section, and column sections, each
// compressed on its own. docs/snap_format.md is the byte layout; this file
// is its only writer and reader.
//
// Every column is a run of LEB128 varints, one per row; addresses and times
// are written as the difference from the previous row (wrapping, zigzag),
// everything else as it is. The reader checks every count against the bytes
// that hold it before it allocates anything, and every index against the
// table it points into.
#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "input/memory_budget.hpp"
#include "input/snap_parts.hpp"
#include "input/source.hpp"
#include "snapdiff/error.hpp"
#include "snapdiff/input/input.hpp"
#include "util/hugepages.hpp"
#include "util/json_depth.hpp"

namespace snapdiff {

namespace {

using J = nlohmann::json;

constexpr uint32_t kHeaderBytes = 16;
constexpr uint32_t kSectionHeaderBytes = 24;
enum Codec : uint8_t { kStored = 0, kZstd = 1 };
// A zstd block decodes to at most 128 KiB and takes at least 4 bytes (a
// 3-byte header and one byte to repeat), so a frame never decodes to more
// than 32768 times its size: a section claiming more is lying.
constexpr uint64_t kMaxZstdRatio = 32768;
// zstd's default level: measured (docs/snap_format.md, "Choices").
constexpr int kZstdLevel = 3;
// Sections smaller than this are stored as they are.
constexpr size_t kCompressFrom = 64;

uint64_t zigzag(int64_t v) { return (uint64_t(v) << 1) ^ uint64_t(v >> 63); }
int64_t unzigzag(uint64_t u) { return int64_t(u >> 1) ^ -int64_t(u & 1); }

// ---- writing ----------------------------------------------------------------

// Filled through a raw pointer into room for the longest varints (untouched
// room is never resident): a push_back per byte cost twice the time.
class Column {
 public:
  explicit Column(size_t rows) : cap_(rows * 10 + 16), buf_(new char[cap_]), p_(buf_.get()) {}
  void u(uint64_t v) {
    while (v >= 0x80) {
      *p_++ = char(v | 0x80);
      v >>= 7;
    }
    *p_++ = char(v);
  }
  void s(int64_t v) { u(zigzag(v)); }
  // The difference from the previous row's value (wrapping): kNoTime and
  // any other value round-trip exactly.
  void delta(uint64_t v, uint64_t& last) {
    u(zigzag(int64_t(v - last)));
    last = v;
  }
  std::string_view bytes() const { return std::string_view(buf_.get(), size_t(p_ - buf_.get())); }

 private:
  size_t cap_;
  std::unique_ptr<char[]> buf_;
  char* p_;
};

void put_u32(std::string& o, uint32_t v) {
  for (int i = 0; i < 4; ++i) o.push_back(char(v >> (8 * i)));
}
void put_u64(std::string& o, uint64_t v) {
  for (int i = 0; i < 8; ++i) o.push_back(char(v >> (8 * i)));
}
void put_varint(std::string& o, uint64_t v) {
  while (v >= 0x80) {
    o.push_back(char(v | 0x80));
    v >>= 7;
  }
  o.push_back(char(v));
}

// A table's payload: the number of columns, then each column's byte length
// and bytes.
std::vector<Column> columns(size_t n, size_t rows) {
  std::vector<Column> c;
  c.reserve(n);
  for (size_t i = 0; i < n; ++i) c.emplace_back(rows);
  return c;
}

std::string table_payload(const std::vector<Column>& cols) {
  size_t n = 16;
  for (const Column& c : cols) n += c.bytes().size() + 10;
  std::string o;
  o.reserve(n);
  put_varint(o, cols.size());
  for (const Column& c : cols) {
    put_varint(o, c.bytes().size());
    o += c.bytes();
  }
  return o;
}

struct OutSection {
  char tag[4];
  std::string payload;
  uint8_t codec = kStored;
  std::string stored;
};

void compress_section(OutSection& s) {
  if (s.payload.size() < kCompressFrom) {
    s.codec = kStored;
    s.stored = std::move(s.payload);
    return;
  }
  // With the frame's content checksum: a flipped bit is an error, not a
  // different number.
  std::unique_ptr<ZSTD_CCtx, size_t (*)(ZSTD_CCtx*)> cctx(ZSTD_createCCtx(), ZSTD_freeCCtx);
  if (!cctx || ZSTD_isError(ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_compressionLevel, kZstdLevel)) ||
      ZSTD_isError(ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_checksumFlag, 1)))
    throw std::runtime_error("zstd: cannot set up compression");
  s.stored.resize(ZSTD_compressBound(s.payload.size()));
  const size_t n = ZSTD_compress2(cctx.get(), s.stored.data(), s.stored.size(), s.payload.data(), s.payload.size());
  if (ZSTD_isError(n)) throw std::runtime_error(std::string("zstd compression failed: ") + ZSTD_getErrorName(n));
  s.stored.resize(n);
  s.codec = kZstd;
}

size_t stream_index(std::vector<uint64_t>& streams, uint64_t s) {
  size_t i = 0;
  while (i < streams.size() && streams[i] != s) ++i;
  if (i == streams.size()) streams.push_back(s);
  return i;
}

OutSection section(const char* tag, std::string payload) {
  OutSection s;
  std::memcpy(s.tag, tag, 4);
  s.payload = std::move(payload);
  return s;
}

OutSection events_section(const Device& d, std::vector<uint64_t>& streams) {
  const size_t n = d.events.size();
  std::vector<Column> c = columns(9, n);
  uint64_t last_t = 0, last_a = 0;
  for (const Event& e : d.events) {
    c[0].u(uint64_t(e.kind));
    c[1].delta(uint64_t(e.time_us), last_t);
    c[2].delta(e.addr, last_a);
    c[3].u(e.size);
    c[4].u(stream_index(streams, e.stream));
    c[5].u(e.stack);
    c[6].u(e.compile_context);
    c[7].u(e.user_metadata);
    c[8].u(e.kind == EventKind::Other ? e.action : 0);
  }
  return section("EVTS", table_payload(c));
}

OutSection segments_section(const Device& d) {
  std::vector<Column> c = columns(12, d.segments.size());
  for (const Segment& s : d.segments) {
    c[0].u(s.addr);
    c[1].u(s.total_size);
    c[2].u(s.allocated_size);
    c[3].u(s.active_size);
    c[4].u(s.requested_size);
    c[5].u(s.stream);
    c[6].u(s.small_pool ? 1 : 0);
    c[7].u(s.expandable ? 1 : 0);
    c[8].s(s.pool_id[0]);
    c[9].s(s.pool_id[1]);
    c[10].u(s.stack);
    c[11].u(s.block_count);
  }
  return section("SEGS", table_payload(c));
}

OutSection blocks_section(const Device& d) {
  std::vector<Column> c = columns(5, d.blocks.size());
  uint64_t last_a = 0;
  for (const Block& b : d.blocks) {
    c[0].delta(b.addr, last_a);
    c[1].u(b.size);
    c[2].u(b.requested_size);
    c[3].u(b.stack);
    c[4].u(uint64_t(b.state));
  }
  return section("BLKS", table_payload(c));
}

}  // namespace

std::string write_snap_binary(const Trace& t) {
  J meta;
  meta["format"] = "snapdiff.snap";
  meta["version"] = kSnapVersion;
  detail::write_snap_common(t, meta);
  meta["strings"] = t.strings.size();
  meta["frames"] = t.frames.size();
  meta["stacks"] = t.stacks.size() - 1;
  std::vector<OutSection> secs;
  secs.push_back(section("META", ""));  // filled last (the stream tables)
  {
    const size_t n = t.strings.size();
    std::vector<Column> c = columns(1, n);
    std::string bytes;
    for (size_t i = 0; i < n; ++i) {
      const std::string_view s = t.strings.get(StrId(i));
      c[0].u(s.size());
      bytes += s;
    }
    std::string p = table_payload(c);
    put_varint(p, bytes.size());
    p += bytes;
    secs.push_back(section("STRS", std::move(p)));
  }
  {
    std::vector<Column> c = columns(3, t.frames.size());
    for (const Frame& f : t.frames) {
      c[0].u(f.name);
      c[1].u(f.file);
      c[2].s(f.line);
    }
    secs.push_back(section("FRMS", table_payload(c)));
  }
  {
    std::vector<Column> c = columns(2, t.stacks.size());
    for (size_t i = 1; i < t.stacks.size(); ++i) {
      const auto& nd = t.stacks.node(StackId(i));
      c[0].u(i - 1 - nd.parent);  // parents come first: node i's parent is at most i - 1
      c[1].u(nd.frame);
    }
    secs.push_back(section("STKS", table_payload(c)));
  }
  J devs = J::array();
  for (const Device& d : t.devices) {
    std::vector<uint64_t> streams;
    secs.push_back(events_section(d, streams));
    secs.push_back(segments_section(d));
    secs.push_back(blocks_section(d));
    devs.push_back({{"device", d.index},
                    {"has_trace", d.has_trace},
                    {"streams", streams},
                    {"events", d.events.size()},
                    {"segments", d.segments.size()},
                    {"blocks", d.blocks.size()}});
  }
  meta["devices"] = std::move(devs);
  if (!t.kernels.empty()) {
    std::vector<uint64_t> streams;
    std::vector<Column> c = columns(14, t.kernels.size());
    uint64_t last_t = 0;
    for (const KernelLaunch& k : t.kernels) {
      c[0].s(k.device);
      c[1].delta(uint64_t(k.time_us), last_t);
      c[2].u(k.name);
      c[3].u(k.stack);
      c[4].u(stream_index(streams, k.stream));
      c[5].u(k.pid);
      c[6].u(k.thread);
      for (int i = 0; i < 3; ++i) c[7 + i].u(k.grid[i]);
      for (int i = 0; i < 3; ++i) c[10 + i].u(k.block[i]);
      c[13].u(k.graph ? 1 : 0);
    }
    secs.push_back(section("KERN", table_payload(c)));
    meta["kernels"] = {{"count", t.kernels.size()}, {"streams", streams}};
  }
  if (!t.device_memory.empty()) {
    std::vector<Column> c = columns(7, t.device_memory.size());
    uint64_t last_t = 0;
    for (const DeviceMemorySample& m : t.device_memory) {
      c[0].s(m.device);
      c[1].delta(uint64_t(m.time_us), last_t);
      c[2].u(m.free_bytes);
      c[3].u(m.total_bytes);
      c[4].u(m.reserved_bytes);
      c[5].u(m.label);
      c[6].u(m.pid);
    }
    secs.push_back(section("DMEM", table_payload(c)));
    meta["device_memory"] = {{"count", t.device_memory.size()}};
  }
  if (!t.driver_memory.empty()) {
    std::vector<Column> c = columns(12, t.driver_memory.size());
    uint64_t last_t = 0;
    for (const DriverMemoryEvent& e : t.driver_memory) {
      c[0].s(e.device);
      c[1].delta(uint64_t(e.time_us), last_t);
      c[2].u(e.pid);
      c[3].u(e.thread);
      c[4].u(uint64_t(e.kind));
      c[5].u(uint64_t(e.caller));
      c[6].u(e.addr);
      c[7].u(e.size);
      c[8].u(e.handle);
      c[9].u(e.stream);
      c[10].u(e.api);
      c[11].u(e.library);
    }
    secs.push_back(section("DRVM", table_payload(c)));
    meta["driver_memory"] = {{"count", t.driver_memory.size()}};
  }
  // Names that are not UTF-8 are written with U+FFFD in META, as in the JSON
  // form (the string table itself keeps its bytes).
  secs[0].payload = meta.dump(-1, ' ', false, J::error_handler_t::replace);

  for (OutSection& sec : secs) compress_section(sec);

  size_t total = kHeaderBytes;
  for (const OutSection& s : secs) total += kSectionHeaderBytes + s.stored.size();
  std::string out;
  out.reserve(total);
  out.append(detail::kSnapBinaryMagic, 8);
  put_u32(out, uint32_t(kSnapVersion));
  put_u32(out, uint32_t(secs.size()));
  for (OutSection& s : secs) {
    out.append(s.tag, 4);
    out.push_back(char(s.codec));
    out.append(3, '\0');
    put_u64(out, s.stored.size());
    put_u64(out, s.codec == kStored ? s.stored.size() : s.payload.size());
    out += s.stored;
  }
  return out;
}

namespace {

// ---- reading ----------------------------------------------------------------

uint32_t get_u32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

struct InSection {
  std::string tag;
  uint8_t codec = 0;
  uint64_t offset = 0;  // of its header in the file
  const uint8_t* stored = nullptr;
  uint64_t stored_len = 0, decoded_len = 0;
};

// What a section says it is, for errors: "section EVTS (device 0) at offset 1234".
struct Where {
  const InSection* sec;
  std::string what;
  [[noreturn]] void fail(const std::string& msg) const {
    throw InputError(sec->offset, "section " + sec->tag + (what.empty() ? "" : " (" + what + ")") + ": " + msg);
  }
};

// One column of a decoded table: `rows` varints in [p, end).
class ColumnReader {
 public:
  ColumnReader(const uint8_t* p, const uint8_t* end, const Where* w, const char* name)
      : begin_(p), p_(p), end_(end), w_(w), name_(name) {}
  // Most values fit in one byte (indices, kinds, small deltas): that path
  // is inlined, the rest is not.
  [[gnu::always_inline]] uint64_t u() {
    if (p_ != end_ && *p_ < 0x80) return *p_++;
    return u_long();
  }
  [[gnu::noinline]] uint64_t u_long() {
    if (end_ - p_ >= 10) {  // the whole varint is inside: no bounds checks
      uint64_t v = *p_++ & 0x7f;
      for (int shift = 7; shift < 63; shift += 7) {
        const uint64_t b = *p_++;
        v |= (b & 0x7f) << shift;
        if (b < 0x80) return v;
      }
      const uint64_t b = *p_++;  // the tenth byte: one bit left
      if (b > 1) bad("a varint beyond 64 bits or longer than 10 bytes");
      return v | (b << 63);
    }
    uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      if (p_ == end_) bad("the column ends before its last row");
      if (shift == 70) bad("a varint longer than 10 bytes");
      const uint64_t b = *p_++;
      if (shift == 63 && (b & 0x7f) > 1) bad("a varint beyond 64 bits");
      v |= (b & 0x7f) << shift;
      if (b < 0x80) return v;
    }
  }
  int64_t s() { return unzigzag(u()); }
  const uint8_t* pos() const { return p_; }
  uint64_t delta(uint64_t& last) {
    last += uint64_t(s());
    return last;
  }
  uint64_t max(uint64_t limit, const char* what) {
    const uint64_t v = u();
    if (v > limit) bad_row(std::string(what) + " (" + std::to_string(v) + ")");
    return v;
  }
  void done() const {
    if (p_ != end_) w_->fail(std::string("column ") + name_ + ": " + std::to_string(end_ - p_) + " bytes after its last row");
  }
  // The value just read was wrong.
  [[noreturn]] void bad_row(const std::string& msg) const {
    w_->fail(std::string("column ") + name_ + ", row " + std::to_string(rows_before(p_) - 1) + ": " + msg);
  }

 private:
  // The row being read is wrong.
  [[noreturn]] void bad(const std::string& msg) const {
    w_->fail(std::string("column ") + name_ + ", row " + std::to_string(rows_before(p_)) + ": " + msg);
  }
  // Rows that end before q (a varint ends with a byte below 0x80); counted
  // only for an error.
  size_t rows_before(const uint8_t* q) const {
    return size_t(std::count_if(begin_, q, [](uint8_t b) { return b < 0x80; }));
  }
  const uint8_t* begin_;
  const uint8_t* p_;
  const uint8_t* end_;
  const Where* w_;
  const char* name_;
};

class BinaryReader {
 public:
  BinaryReader(std::string_view bytes, Trace& t, uint64_t max_decoded, uint64_t max_memory)
      : data_(reinterpret_cast<const uint8_t*>(bytes.data())), size_(bytes.size()), t_(t), max_decoded_(max_decoded),
        max_memory_(max_memory) {}

  void read() {
    sections();
    const InSection& m = next("META", "");
    std::vector<uint8_t> meta_buf;
    const std::string_view meta_text = as_text(decode(m, meta_buf));
    detail::check_json_depth(meta_text);
    J meta;
    try {
      meta = J::parse(meta_text.begin(), meta_text.end());
    } catch (const nlohmann::json::exception& e) {
      Where{&m, ""}.fail(std::string("invalid JSON: ") + e.what());
    }
    if (!meta.is_object() || !meta.contains("format") || meta["format"] != "snapdiff.snap")
      throw InputError("$.format", "not a .snap META section (expected \"format\": \"snapdiff.snap\")");
    const uint64_t n_strings = count(meta, "strings", "$.strings"), n_frames = count(meta, "frames", "$.frames"),
                   n_stacks = count(meta, "stacks", "$.stacks");
    if (!meta.contains("devices") || !meta["devices"].is_array()) throw InputError("$.devices", "expected an array");
    check_memory(meta);

    strings(next("STRS", ""), n_strings);
    detail::read_snap_common(meta, t_, remap_);
    frames(next("FRMS", ""), n_frames);
    stacks(next("STKS", ""), n_stacks);
    const J& devs = meta["devices"];
    for (size_t i = 0; i < devs.size(); ++i) device(devs[i], "$.devices[" + std::to_string(i) + "]");
    if (meta.contains("kernels")) kernels(meta["kernels"]);
    if (meta.contains("device_memory")) device_memory(meta["device_memory"]);
    if (meta.contains("driver_memory")) driver_memory(meta["driver_memory"]);
    t_.source.format = "snap";
    t_.source.format_detail =
        "version 3" + (t_.source.format_detail.empty() ? std::string() : ", " + t_.source.format_detail);
    std::sort(t_.devices.begin(), t_.devices.end(), [](const Device& a, const Device& b) { return a.index < b.index; });
  }

 private:
  static std::string_view as_text(const std::pair<const uint8_t*, size_t>& b) {
    return std::string_view(reinterpret_cast<const char*>(b.first), b.second);
  }

  // The header and the section headers; every section's bytes lie inside the file.
  void sections() {
    if (size_ < kHeaderBytes) throw InputError(uint64_t(0), "truncated .snap header (" + std::to_string(size_) + " of 16 bytes)");
    const uint32_t version = get_u32(data_ + 8);
    if (version > uint32_t(kSnapVersion))
      throw InputError(uint64_t(8), "written by a newer snapdiff (.snap format version " + std::to_string(version) +
                                        "; this build reads versions 1 to " + std::to_string(kSnapVersion) + ")");
    if (version != 3) throw InputError(uint64_t(8), "invalid binary .snap format version " + std::to_string(version));
    const uint32_t n = get_u32(data_ + 12);
    uint64_t off = kHeaderBytes, decoded = 0;
    for (uint32_t i = 0; i < n; ++i) {
      if (size_ - off < kSectionHeaderBytes)
        throw InputError(off, "the file ends after " + std::to_string(i) + " of its " + std::to_string(n) +
                                  " sections (truncated)");
      InSection s;
      s.tag.assign(reinterpret_cast<const char*>(data_ + off), 4);
      for (char& c : s.tag)
        if (c < 0x20 || c > 0x7e) c = '?';
      s.codec = data_[off + 4];
      s.offset = off;
      s.stored_len = get_u64(data_ + off + 8);
      s.decoded_len = get_u64(data_ + off + 16);
      Where w{&s, ""};
      if (s.stored_len > size_ - off - kSectionHeaderBytes)
        w.fail("its " + std::to_string(s.stored_len) + " bytes run past the end of the file (" +
               std::to_string(size_ - off - kSectionHeaderBytes) + " left: truncated)");
      if (s.codec == kStored && s.decoded_len != s.stored_len) w.fail("a stored section whose two lengths differ");
      if (s.codec > kZstd) w.fail("unknown compression " + std::to_string(s.codec));
      if (s.codec == kZstd && s.decoded_len > s.stored_len * kMaxZstdRatio)
        w.fail("claims " + std::to_string(s.decoded_len) + " bytes from " + std::to_string(s.stored_len) +
               ", more than zstd can give");
      decoded += s.decoded_len;
      if (decoded > max_decoded_)
        throw InputError(off, "decodes to more than the limit of " + std::to_string(max_decoded_) +
                                  " bytes (--max-input-bytes)");
      s.stored = data_ + off + kSectionHeaderBytes;
      off += kSectionHeaderBytes + s.stored_len;
      sections_.push_back(std::move(s));
    }
    if (off != size_) throw InputError(off, std::to_string(size_ - off) + " bytes after the last section");
  }

  // The next section with this tag (sections with tags this reader does not
  // know are skipped; the known ones come in a fixed order).
  const InSection& next(const char* tag, const std::string& what) {
    static constexpr const char* kKnown[] = {"META", "STRS", "FRMS", "STKS", "EVTS", "SEGS", "BLKS", "KERN", "DMEM", "DRVM"};
    while (next_ < sections_.size()) {
      const InSection& s = sections_[next_++];
      if (s.tag == tag) return s;
      if (std::find_if(std::begin(kKnown), std::end(kKnown), [&](const char* k) { return s.tag == k; }) != std::end(kKnown))
        Where{&s, ""}.fail(std::string("expected section ") + tag + (what.empty() ? "" : " (" + what + ")") + " here");
    }
    throw InputError(size_, std::string("missing section ") + tag + (what.empty() ? "" : " (" + what + ")") +
                                " (the file is truncated)");
  }

  // The decoded payload: in place for a stored section, else decompressed
  // into `buf`, which must come out exactly as long as the header says.
  std::pair<const uint8_t*, size_t> decode(const InSection& s, std::vector<uint8_t>& buf) {
    if (s.codec == kStored) return {s.stored, size_t(s.stored_len)};
    buf.resize(size_t(s.decoded_len));
    const size_t n = ZSTD_decompress(buf.data(), buf.size(), s.stored, size_t(s.stored_len));
    if (ZSTD_isError(n)) Where{&s, ""}.fail(std::string("corrupt compressed data (zstd: ") + ZSTD_getErrorName(n) + ")");
    if (n != s.decoded_len)
      Where{&s, ""}.fail("decodes to " + std::to_string(n) + " bytes, not the " + std::to_string(s.decoded_len) + " it says");
    return {buf.data(), buf.size()};
  }

  // A table: its payload split into `cols` columns (more are ignored: a later
  // version may append some); every column then holds `rows` rows.
  struct Table {
    std::vector<uint8_t> buf;
    std::vector<std::pair<const uint8_t*, const uint8_t*>> cols;
    const uint8_t* rest = nullptr;  // after the columns
    const uint8_t* end = nullptr;
  };
  void table(const InSection& s, const Where& w, size_t ncols, uint64_t rows, Table& tb) {
    auto [p, n] = decode(s, tb.buf);
    const uint8_t* end = p + n;
    const uint8_t* at = p;
    const uint64_t have = varint(at, end, w, "(the column count)");
    if (have < ncols) w.fail(std::to_string(have) + " columns, expected " + std::to_string(ncols));
    for (uint64_t c = 0; c < have; ++c) {
      const uint64_t bytes = varint(at, end, w, "(a column length)");
      if (bytes > uint64_t(end - at)) w.fail("column " + std::to_string(c) + " runs past the end of the section");
      if (bytes < rows)
        w.fail("column " + std::to_string(c) + " has " + std::to_string(bytes) + " bytes, too few for " +
               std::to_string(rows) + " rows");
      if (c < ncols) tb.cols.emplace_back(at, at + bytes);
      at += bytes;
    }
    tb.rest = at;
    tb.end = end;
  }
  // One varint at p, which moves past it.
  static uint64_t varint(const uint8_t*& p, const uint8_t* end, const Where& w, const char* what) {
    ColumnReader r(p, end, &w, what);
    const uint64_t v = r.u();
    p = r.pos();
    return v;
  }

  static uint64_t count(const J& j, const char* key, const std::string& path) {
    if (!j.contains(key) || !j[key].is_number_unsigned()) throw InputError(path, "expected a non-negative integer");
    return j[key].get<uint64_t>();
  }

  // What the model will take, from the counts (each also bounded by the
  // bytes that hold it), against --max-memory before anything is built.
  void check_memory(const J& meta) {
    if (!max_memory_) return;
    uint64_t largest = 0, total = 0;
    for (const InSection& s : sections_) {
      largest = std::max(largest, s.decoded_len);
      total += s.decoded_len;
    }
    // Every row takes at least one byte per column: the decoded bytes bound
    // the rows; an event (9 columns) at most sizeof(Event) + its analysis.
    // (A string takes at least one byte of its length column too: a count
    // beyond the bytes is refused by its table, not multiplied here.)
    const uint64_t strings = std::min(count(meta, "strings", "$.strings"), total);
    const uint64_t model = total / 9 * (sizeof(Event) + detail::kAnalysisBytesPerEvent) + strings * 72 + total;
    LoadOptions o;
    o.max_memory_bytes = max_memory_;
    detail::check_memory(detail::kFixedMemoryBytes + largest + model, o);
  }

  void strings(const InSection& s, uint64_t n) {
    Where w{&s, ""};
    Table tb;
    table(s, w, 1, n, tb);
    ColumnReader len(tb.cols[0].first, tb.cols[0].second, &w, "length");
    const uint8_t* bytes = tb.rest;
    const uint64_t total = varint(bytes, tb.end, w, "(the bytes' length)");
    if (total != uint64_t(tb.end - bytes)) w.fail("the strings' bytes do not fill the section");
    remap_.resize(size_t(n));
    uint64_t at = 0;
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t l = len.u();
      if (l > total - at) len.bad_row("a string running past the strings' bytes");
      const std::string_view sv(reinterpret_cast<const char*>(bytes + at), size_t(l));
      if (i == 0 && !sv.empty()) len.bad_row("string 0 must be the empty string");
      remap_[size_t(i)] = t_.strings.intern(sv);
      at += l;
    }
    len.done();
    if (n == 0) w.fail("no strings (string 0 must be the empty string)");
    if (at != total) w.fail("bytes after the last string");
  }

  void frames(const InSection& s, uint64_t n) {
    Where w{&s, ""};
    Table tb;
    table(s, w, 3, n, tb);
    ColumnReader name(tb.cols[0].first, tb.cols[0].second, &w, "name"), file(tb.cols[1].first, tb.cols[1].second, &w, "file"),
        line(tb.cols[2].first, tb.cols[2].second, &w, "line");
    frame_map_.resize(size_t(n));
    for (uint64_t i = 0; i < n; ++i) {
      Frame f;
      f.name = str(name);
      f.file = str(file);
      f.line = line.s();
      if (f.line < 0) f.line = kNoLine;
      frame_map_[size_t(i)] = t_.intern_frame(f);
    }
    name.done(), file.done(), line.done();
  }

  void stacks(const InSection& s, uint64_t n) {
    Where w{&s, ""};
    Table tb;
    table(s, w, 2, n, tb);
    ColumnReader parent(tb.cols[0].first, tb.cols[0].second, &w, "parent"),
        frame(tb.cols[1].first, tb.cols[1].second, &w, "frame");
    stack_map_.assign(size_t(n) + 1, 0);
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t back = parent.max(i, "parent after the node");
      const uint64_t f = frame.u();
      if (f >= frame_map_.size()) frame.bad_row("frame index out of range");
      stack_map_[size_t(i) + 1] = t_.stacks.child(stack_map_[size_t(i - back)], frame_map_[size_t(f)]);
    }
    parent.done(), frame.done();
  }

  StrId str(ColumnReader& c) const {
    const uint64_t id = c.u();
    if (id >= remap_.size()) c.bad_row("string index out of range");
    return remap_[size_t(id)];
  }
  StackId stack(ColumnReader& c) const {
    const uint64_t id = c.u();
    if (id >= stack_map_.size()) c.bad_row("stack index out of range");
    return stack_map_[size_t(id)];
  }
  static int device_index(ColumnReader& c) {
    const int64_t v = c.s();
    if (v < -1 || v > (1 << 20)) c.bad_row("device index out of range");
    return int(v);
  }
  static uint32_t u32(ColumnReader& c) { return uint32_t(c.max(UINT32_MAX, "out of range (more than 32 bits)")); }
  static std::vector<uint64_t> stream_table(const J& j, const std::string& p) {
    if (!j.contains("streams") || !j["streams"].is_array()) throw InputError(p + ".streams", "expected an array");
    std::vector<uint64_t> v;
    for (size_t i = 0; i < j["streams"].size(); ++i) {
      const J& x = j["streams"][i];
      if (!x.is_number_unsigned()) throw InputError(p + ".streams[" + std::to_string(i) + "]", "expected a non-negative integer");
      v.push_back(x.get<uint64_t>());
    }
    return v;
  }

  void device(const J& d, const std::string& p) {
    if (!d.is_object()) throw InputError(p, "expected an object");
    if (!d.contains("device") || !d["device"].is_number_integer()) throw InputError(p + ".device", "expected an integer");
    const int64_t idx = d["device"].get<int64_t>();
    if (idx < -1 || idx > (1 << 20)) throw InputError(p + ".device", "device index out of range");
    const std::string what = "device " + std::to_string(idx);
    const std::vector<uint64_t> sv = stream_table(d, p);
    const uint64_t n_ev = count(d, "events", p + ".events"), n_seg = count(d, "segments", p + ".segments"),
                   n_blk = count(d, "blocks", p + ".blocks");
    const InSection &se = next("EVTS", what), &ss = next("SEGS", what), &sb = next("BLKS", what);
    Device& dev = t_.device(int(idx));
    if (!dev.events.empty() || !dev.segments.empty()) throw InputError(p + ".device", "a device listed twice");
    dev.has_trace = d.contains("has_trace") && d["has_trace"].is_boolean() ? d["has_trace"].get<bool>() : true;
    events(se, Where{&se, what}, n_ev, sv, dev);
    segments(ss, Where{&ss, what}, n_seg, n_blk, dev);
    blocks(sb, Where{&sb, what}, dev);
  }

  void events(const InSection& s, const Where& w, uint64_t n, const std::vector<uint64_t>& sv, Device& dev) {
    Table tb;
    table(s, w, 9, n, tb);
    const auto& c = tb.cols;
    ColumnReader kind(c[0].first, c[0].second, &w, "kind"), time(c[1].first, c[1].second, &w, "time_us"),
        addr(c[2].first, c[2].second, &w, "addr"), size(c[3].first, c[3].second, &w, "size"),
        stream(c[4].first, c[4].second, &w, "stream"), stk(c[5].first, c[5].second, &w, "stack"),
        cc(c[6].first, c[6].second, &w, "compile_context"), um(c[7].first, c[7].second, &w, "user_metadata"),
        action(c[8].first, c[8].second, &w, "action");
    // The action text of each known kind, interned when first seen (as the
    // other readers do: a kind that never occurs adds no string).
    StrId kind_action[size_t(EventKind::Other)];
    std::fill(std::begin(kind_action), std::end(kind_action), UINT32_MAX);
    dev.events.reserve(size_t(n));
    detail::advise_hugepages(dev.events.data(), size_t(n) * sizeof(Event));
    dev.events.resize(size_t(n));
    uint64_t last_t = 0, last_a = 0;
    for (Event& e : dev.events) {
      e.kind = EventKind(kind.max(uint64_t(EventKind::Other), "unknown event kind"));
      e.time_us = int64_t(time.delta(last_t));
      e.addr = addr.delta(last_a);
      e.size = size.max(kMaxDeviceBytes, "implausibly large size: more than any device holds (2^50 bytes)");
      const uint64_t si = stream.u();
      if (si >= sv.size()) stream.bad_row("stream index out of range");
      e.stream = sv[size_t(si)];
      e.stack = stack(stk);
      e.compile_context = str(cc);
      e.user_metadata = str(um);
      e.action = str(action);
      if (e.kind != EventKind::Other) {
        StrId& a = kind_action[size_t(e.kind)];
        if (a == UINT32_MAX) a = t_.strings.intern(event_kind_name(e.kind));
        e.action = a;
      }
    }
    kind.done(), time.done(), addr.done(), size.done(), stream.done(), stk.done(), cc.done(), um.done(), action.done();
  }

  void segments(const InSection& s, const Where& w, uint64_t n, uint64_t n_blocks, Device& dev) {
    Table tb;
    table(s, w, 12, n, tb);
    const auto& c = tb.cols;
    static constexpr const char* kNames[12] = {"addr",   "total_size", "allocated_size", "active_size",
                                               "requested_size", "stream", "small_pool", "expandable",
                                               "pool_id_0", "pool_id_1", "stack", "block_count"};
    std::vector<ColumnReader> r;
    for (size_t i = 0; i < 12; ++i) r.emplace_back(c[i].first, c[i].second, &w, kNames[i]);
    dev.segments.resize(size_t(n));
    uint64_t sum_total = 0, blocks = 0;
    const char* kTooLarge = "implausibly large size: more than any device holds (2^50 bytes)";
    for (Segment& sg : dev.segments) {
      sg.addr = r[0].u();
      sg.total_size = r[1].max(kMaxDeviceBytes, kTooLarge);
      sg.allocated_size = r[2].max(kMaxDeviceBytes, kTooLarge);
      sg.active_size = r[3].max(kMaxDeviceBytes, kTooLarge);
      sg.requested_size = r[4].max(kMaxDeviceBytes, kTooLarge);
      sum_total += sg.total_size;
      if (sum_total > kMaxDeviceBytes)
        r[1].bad_row("the device's dumped sizes sum to more than any device holds (2^50 bytes): the file is corrupt");
      sg.stream = r[5].u();
      sg.small_pool = r[6].max(1, "expected 0 or 1") == 1;
      sg.expandable = r[7].max(1, "expected 0 or 1") == 1;
      sg.pool_id[0] = r[8].s();
      sg.pool_id[1] = r[9].s();
      sg.stack = stack(r[10]);
      const uint64_t bc = r[11].u();
      if (bc > n_blocks - blocks) r[11].bad_row("more blocks than the device's blocks");
      sg.first_block = uint32_t(blocks);
      sg.block_count = uint32_t(bc);
      blocks += bc;
    }
    for (const ColumnReader& x : r) x.done();
    if (blocks != n_blocks) w.fail("blocks not owned by any segment");
    n_blocks_ = n_blocks;
  }

  void blocks(const InSection& s, const Where& w, Device& dev) {
    Table tb;
    table(s, w, 5, n_blocks_, tb);
    const auto& c = tb.cols;
    ColumnReader addr(c[0].first, c[0].second, &w, "addr"), size(c[1].first, c[1].second, &w, "size"),
        req(c[2].first, c[2].second, &w, "requested_size"), stk(c[3].first, c[3].second, &w, "stack"),
        state(c[4].first, c[4].second, &w, "state");
    dev.blocks.resize(size_t(n_blocks_));
    uint64_t last_a = 0, sum = 0;
    const char* kTooLarge = "implausibly large size: more than any device holds (2^50 bytes)";
    for (Block& b : dev.blocks) {
      b.addr = addr.delta(last_a);
      b.size = size.max(kMaxDeviceBytes, kTooLarge);
      b.requested_size = req.max(kMaxDeviceBytes, kTooLarge);
      sum += b.size;
      if (sum > kMaxDeviceBytes)
        size.bad_row("the device's dumped sizes sum to more than any device holds (2^50 bytes): the file is corrupt");
      b.stack = stack(stk);
      b.state = BlockState(state.max(2, "unknown block state"));
    }
    addr.done(), size.done(), req.done(), stk.done(), state.done();
  }

  void kernels(const J& k) {
    if (!k.is_object()) throw InputError("$.kernels", "expected an object");
    const uint64_t n = count(k, "count", "$.kernels.count");
    const std::vector<uint64_t> sv = stream_table(k, "$.kernels");
    const InSection& s = next("KERN", "");
    Where w{&s, ""};
    Table tb;
    table(s, w, 14, n, tb);
    static constexpr const char* kNames[14] = {"device", "time_us", "name",    "stack",   "stream",  "pid",     "thread",
                                               "grid_x", "grid_y",  "grid_z",  "block_x", "block_y", "block_z", "graph"};
    std::vector<ColumnReader> r;
    for (size_t i = 0; i < 14; ++i) r.emplace_back(tb.cols[i].first, tb.cols[i].second, &w, kNames[i]);
    t_.kernels.resize(size_t(n));
    uint64_t last_t = 0;
    for (KernelLaunch& x : t_.kernels) {
      x.device = device_index(r[0]);
      x.time_us = int64_t(r[1].delta(last_t));
      x.name = str(r[2]);
      x.stack = stack(r[3]);
      const uint64_t si = r[4].u();
      if (si >= sv.size()) r[4].bad_row("stream index out of range");
      x.stream = sv[size_t(si)];
      x.pid = u32(r[5]);
      x.thread = u32(r[6]);
      for (int i = 0; i < 3; ++i) x.grid[i] = u32(r[7 + size_t(i)]);
      for (int i = 0; i < 3; ++i) x.block[i] = u32(r[10 + size_t(i)]);
      x.graph = r[13].max(1, "expected 0 or 1") == 1;
    }
    for (const ColumnReader& x : r) x.done();
  }

  void device_memory(const J& m) {
    if (!m.is_object()) throw InputError("$.device_memory", "expected an object");
    const uint64_t n = count(m, "count", "$.device_memory.count");
    const InSection& s = next("DMEM", "");
    Where w{&s, ""};
    Table tb;
    table(s, w, 7, n, tb);
    static constexpr const char* kNames[7] = {"device", "time_us", "free_bytes", "total_bytes", "reserved_bytes", "label", "pid"};
    std::vector<ColumnReader> r;
    for (size_t i = 0; i < 7; ++i) r.emplace_back(tb.cols[i].first, tb.cols[i].second, &w, kNames[i]);
    t_.device_memory.resize(size_t(n));
    uint64_t last_t = 0;
    const char* kTooLarge = "implausibly large size: more than any device holds (2^50 bytes)";
    for (DeviceMemorySample& x : t_.device_memory) {
      x.device = device_index(r[0]);
      x.time_us = int64_t(r[1].delta(last_t));
      x.free_bytes = r[2].u();
      x.total_bytes = r[3].max(kMaxDeviceBytes, kTooLarge);
      x.reserved_bytes = r[4].max(kMaxDeviceBytes, kTooLarge);
      if (x.free_bytes > x.total_bytes) r[2].bad_row("more free bytes than total bytes");
      x.label = str(r[5]);
      x.pid = u32(r[6]);
    }
    for (const ColumnReader& x : r) x.done();
  }

  void driver_memory(const J& m) {
    if (!m.is_object()) throw InputError("$.driver_memory", "expected an object");
    const uint64_t n = count(m, "count", "$.driver_memory.count");
    const InSection& s = next("DRVM", "");
    Where w{&s, ""};
    Table tb;
    table(s, w, 12, n, tb);
    static constexpr const char* kNames[12] = {"device", "time_us", "pid",    "thread", "kind", "caller",
                                               "addr",   "size",    "handle", "stream", "api",  "library"};
    std::vector<ColumnReader> r;
    for (size_t i = 0; i < 12; ++i) r.emplace_back(tb.cols[i].first, tb.cols[i].second, &w, kNames[i]);
    t_.driver_memory.resize(size_t(n));
    uint64_t last_t = 0;
    for (DriverMemoryEvent& x : t_.driver_memory) {
      x.device = device_index(r[0]);
      x.time_us = int64_t(r[1].delta(last_t));
      x.pid = u32(r[2]);
      x.thread = u32(r[3]);
      x.kind = DriverMemoryKind(r[4].max(uint64_t(DriverMemoryKind::Unmap), "unknown driver memory kind"));
      x.caller = MemoryCaller(r[5].max(uint64_t(MemoryCaller::Other), "unknown caller"));
      x.addr = r[6].u();
      x.size = r[7].max(kMaxDeviceBytes, "implausibly large size: more than any device holds (2^50 bytes)");
      x.handle = r[8].u();
      x.stream = r[9].u();
      x.api = str(r[10]);
      x.library = str(r[11]);
    }
    for (const ColumnReader& x : r) x.done();
  }

  const uint8_t* data_;
  uint64_t size_;
  Trace& t_;
  uint64_t max_decoded_, max_memory_;
  std::vector<InSection> sections_;
  size_t next_ = 0;
  uint64_t n_blocks_ = 0;
  std::vector<StrId> remap_;
  std::vector<FrameId> frame_map_;
  std::vector<StackId> stack_map_;
};

}  // namespace

void detail::read_snap_binary(std::string_view bytes, Trace& out, uint64_t max_decoded, uint64_t max_memory) {
  BinaryReader(bytes, out, max_decoded, max_memory).read();
}

}  // namespace snapdiff
