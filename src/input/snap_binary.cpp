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
  [[gnu::always_inline]] void u(uint64_t v) {
    while (v >= 0x80) {
      *p_++ = char(v | 0x80);
      v >>= 7;
    }
    *p_++ = char(v);
  }
  [[gnu::always_inline]] void s(int64_t v) { u(zigzag(v)); }
  // The difference from the previous row's value (wrapping): kNoTime and
  // any other value round-trip exactly.
  [[gnu::always_inline]] void delta(uint64_t v, uint64_t& last) {
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

OutSection section(const char* tag, std::string payload) {
  OutSection s;
  std::memcpy(s.tag, tag, 4);
  s.payload = std::move(payload);
  return s;
}

// One row into the table's columns, through its column list (snap_parts.hpp).
struct RowWriter {
  Column* c;
  uint64_t* last;                 // per column: the previous row's value (delta columns)
  std::vector<uint64_t>* streams; // the table's stream list, filled as streams come
  uint64_t row = 0;               // the row's index
  size_t i = 0;
  [[gnu::always_inline]] void plain(const char*, uint64_t v) { c[i++].u(v); }
  [[gnu::always_inline]] void frame(const char*, uint64_t v) { c[i++].u(v); }
  [[gnu::always_inline]] void parent(const char*, uint64_t v) { c[i++].u(row - v); }
  [[gnu::always_inline]] void size(const char*, uint64_t v) { c[i++].u(v); }
  [[gnu::always_inline]] void addr(const char*, uint64_t v) { delta(v); }
  [[gnu::always_inline]] void time(const char*, int64_t v) { delta(uint64_t(v)); }
  [[gnu::always_inline]] void integer(const char*, int64_t v) { c[i++].s(v); }
  [[gnu::always_inline]] void str(const char*, StrId v) { c[i++].u(v); }
  [[gnu::always_inline]] void stack(const char*, StackId v) { c[i++].u(v); }
  [[gnu::always_inline]] void stream(const char*, uint64_t v) { c[i++].u(detail::stream_index(*streams, v)); }
  [[gnu::always_inline]] void device(const char*, int v) { c[i++].s(v); }
  [[gnu::always_inline]] void u32(const char*, uint32_t v) { c[i++].u(v); }
  [[gnu::always_inline]] void flag(const char*, bool v) { c[i++].u(v ? 1 : 0); }
  template <class E>
  [[gnu::always_inline]] void kind(const char*, E v) {
    c[i++].u(uint64_t(v));
  }
  [[gnu::always_inline]] void triple(const char*, const uint32_t (&v)[3]) {
    for (uint32_t x : v) c[i++].u(x);
  }
  [[gnu::always_inline]] void action(const char*, StrId a, EventKind k) { c[i++].u(k == EventKind::Other ? a : 0); }
  [[gnu::always_inline]] void block_count(const char*, uint32_t, uint32_t n) { c[i++].u(n); }
  [[gnu::always_inline]] void device_total(const char*, uint64_t) {}
  [[gnu::always_inline]] void at_most(const char*, uint64_t, uint64_t, const char*) {}
  [[gnu::always_inline]] void since_json_v2() {}

 private:
  [[gnu::always_inline]] void delta(uint64_t v) {
    c[i].delta(v, last[i]);
    ++i;
  }
};

// A table section of `rows`; `streams` collects the stream values its stream
// column indexes.
template <class Row>
OutSection table_section(const char* tag, const std::vector<Row>& rows, std::vector<uint64_t>* streams = nullptr) {
  const size_t ncols = detail::column_names<Row>(false).names.size();
  std::vector<Column> c = columns(ncols, rows.size());
  std::vector<uint64_t> last(ncols, 0);
  uint64_t row = 0;
  for (const Row& r : rows) {
    RowWriter w{c.data(), last.data(), streams, row++};
    detail::columns(w, r);
  }
  return section(tag, table_payload(c));
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
  secs.push_back(table_section("FRMS", t.frames));
  secs.push_back(table_section("STKS", detail::stack_rows(t)));
  J devs = J::array();
  for (const Device& d : t.devices) {
    std::vector<uint64_t> streams;
    secs.push_back(table_section("EVTS", d.events, &streams));
    secs.push_back(table_section("SEGS", d.segments));
    secs.push_back(table_section("BLKS", d.blocks));
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
    secs.push_back(table_section("KERN", t.kernels, &streams));
    meta["kernels"] = {{"count", t.kernels.size()}, {"streams", streams}};
  }
  if (!t.device_memory.empty()) {
    secs.push_back(table_section("DMEM", t.device_memory));
    meta["device_memory"] = {{"count", t.device_memory.size()}};
  }
  if (!t.driver_memory.empty()) {
    secs.push_back(table_section("DRVM", t.driver_memory));
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
  [[gnu::always_inline]] int64_t s() { return unzigzag(u()); }
  const uint8_t* pos() const { return p_; }
  [[gnu::always_inline]] uint64_t delta(uint64_t& last) {
    last += uint64_t(s());
    return last;
  }
  [[gnu::always_inline]] uint64_t max(uint64_t limit, const char* what) {
    const uint64_t v = u();
    if (v > limit) [[unlikely]] bad_value(what, v);
    return v;
  }
  void done() const {
    if (p_ != end_) w_->fail(std::string("column ") + name_ + ": " + std::to_string(end_ - p_) + " bytes after its last row");
  }
  [[noreturn, gnu::cold, gnu::noinline]] void bad_value(const char* what, uint64_t v) const {
    bad_row(std::string(what) + " (" + std::to_string(v) + ")");
  }
  // The value just read was wrong.
  [[noreturn, gnu::cold, gnu::noinline]] void bad_row(const std::string& msg) const {
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
        max_memory_(max_memory) {
    std::fill(std::begin(kind_action_), std::end(kind_action_), UINT32_MAX);
  }

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
    optional_table(meta, "kernels", "KERN", t_.kernels, true);
    optional_table(meta, "device_memory", "DMEM", t_.device_memory, false);
    optional_table(meta, "driver_memory", "DRVM", t_.driver_memory, false);
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
    std::vector<Frame> frames;
    read_table(s, Where{&s, ""}, n, frames);
    frame_map_.resize(size_t(n));
    for (size_t i = 0; i < frames.size(); ++i) {
      if (frames[i].line < 0) frames[i].line = kNoLine;
      frame_map_[i] = t_.intern_frame(frames[i]);
    }
  }

  void stacks(const InSection& s, uint64_t n) {
    std::vector<detail::StackNodeRow> nodes;
    read_table(s, Where{&s, ""}, n, nodes);
    stack_map_.assign(size_t(n) + 1, 0);
    for (size_t i = 0; i < nodes.size(); ++i)
      stack_map_[i + 1] = t_.stacks.child(stack_map_[size_t(nodes[i].parent)], frame_map_[size_t(nodes[i].frame)]);
  }

  // A table's columns, opened from its section, and the state its rows
  // share (the previous row's values of the delta columns).
  template <class Row>
  class Rows {
   public:
    Rows(BinaryReader& r, const InSection& s, const Where& w, uint64_t n, const std::vector<uint64_t>* sv = nullptr)
        : names_(detail::column_names<Row>(false)), r_(r), sv_(sv) {
      static_assert(kMaxColumns >= 14);  // KERN's
      r.table(s, w, names_.names.size(), n, tb_);
      cols_.reserve(names_.names.size());
      for (size_t i = 0; i < names_.names.size(); ++i)
        cols_.emplace_back(tb_.cols[i].first, tb_.cols[i].second, &w, names_.names[i].c_str());
    }
    // Every row. The delta columns' previous values are this function's
    // locals: the compiler keeps them in registers.
    void read(std::vector<Row>& out) {
      uint64_t last[kMaxColumns] = {};
      uint64_t row = 0;
      for (Row& x : out) {
        Reader v{*this, last, row++};
        detail::columns(v, x);
      }
    }
    void done() const {
      for (const ColumnReader& c : cols_) c.done();
    }

   private:
    // One row, through the table's column list (snap_parts.hpp).
    struct Reader {
      Rows& t;
      uint64_t* last;
      uint64_t row;  // the row's index
      size_t i = 0;
      [[gnu::always_inline]] ColumnReader& next() { return t.cols_[i++]; }
      ColumnReader& col(const char* name) { return t.cols_[t.names_.index(name)]; }
      [[gnu::always_inline]] void plain(const char*, uint64_t& x) { x = next().u(); }
      [[gnu::always_inline]] void parent(const char*, uint64_t& x) { x = row - next().max(row, "parent after the node"); }
      [[gnu::always_inline]] void frame(const char*, uint64_t& x) {
        ColumnReader& c = next();
        x = c.u();
        if (x >= t.r_.frame_map_.size()) c.bad_row("frame index out of range");
      }
      [[gnu::always_inline]] void size(const char*, uint64_t& x) { x = next().max(kMaxDeviceBytes, detail::kTooLarge); }
      [[gnu::always_inline]] void addr(const char*, uint64_t& x) { x = delta(); }
      [[gnu::always_inline]] void time(const char*, int64_t& x) { x = int64_t(delta()); }
      [[gnu::always_inline]] void integer(const char*, int64_t& x) { x = next().s(); }
      [[gnu::always_inline]] void str(const char*, StrId& x) { x = t.r_.str(next()); }
      [[gnu::always_inline]] void stack(const char*, StackId& x) { x = t.r_.stack(next()); }
      [[gnu::always_inline]] void stream(const char*, uint64_t& x) {
        ColumnReader& c = next();
        const uint64_t si = c.u();
        if (si >= t.sv_->size()) c.bad_row("stream index out of range");
        x = (*t.sv_)[size_t(si)];
      }
      [[gnu::always_inline]] void device(const char*, int& x) { x = device_index(next()); }
      [[gnu::always_inline]] void u32(const char*, uint32_t& x) { x = BinaryReader::u32(next()); }
      [[gnu::always_inline]] void flag(const char*, bool& x) { x = next().max(1, "expected 0 or 1") == 1; }
      template <class E>
      [[gnu::always_inline]] void kind(const char*, E& x) {
        x = E(next().max(detail::KindColumn<E>::kMax, detail::KindColumn<E>::kUnknown));
      }
      [[gnu::always_inline]] void triple(const char*, uint32_t (&x)[3]) {
        for (uint32_t& v : x) v = BinaryReader::u32(next());
      }
      // The action text of a known kind is its name, interned when first
      // seen (as the other readers do: a kind that never occurs adds no string).
      [[gnu::always_inline]] void action(const char*, StrId& x, EventKind k) {
        x = t.r_.str(next());
        if (k != EventKind::Other) {
          StrId& a = t.r_.kind_action_[size_t(k)];
          if (a == UINT32_MAX) a = t.r_.t_.strings.intern(event_kind_name(k));
          x = a;
        }
      }
      [[gnu::always_inline]] void block_count(const char*, uint32_t& first, uint32_t& count) {
        ColumnReader& c = next();
        const uint64_t bc = c.u();
        if (bc > t.r_.n_blocks_ - t.r_.blocks_owned_) c.bad_row("more blocks than the device's blocks");
        first = uint32_t(t.r_.blocks_owned_);
        count = uint32_t(bc);
        t.r_.blocks_owned_ += bc;
      }
      [[gnu::always_inline]] void device_total(const char* name, uint64_t x) {
        t.sum_ += x;
        if (t.sum_ > kMaxDeviceBytes) col(name).bad_row(detail::kSumTooLarge);
      }
      [[gnu::always_inline]] void at_most(const char* name, uint64_t x, uint64_t limit, const char* msg) {
        if (x > limit) col(name).bad_row(msg);
      }
      [[gnu::always_inline]] void since_json_v2() {}
      [[gnu::always_inline]] uint64_t delta() {
        const uint64_t v = t.cols_[i].delta(last[i]);
        ++i;
        return v;
      }
    };
    static constexpr size_t kMaxColumns = 16;
    detail::ColumnNames names_;
    BinaryReader& r_;
    const std::vector<uint64_t>* sv_;
    Table tb_;
    std::vector<ColumnReader> cols_;
    uint64_t sum_ = 0;  // of the device_total column
  };

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

  // A table of rows read into `out`, column by column.
  template <class Row>
  void read_table(const InSection& s, const Where& w, uint64_t n, std::vector<Row>& out,
                  const std::vector<uint64_t>* sv = nullptr) {
    Rows<Row> rows(*this, s, w, n, sv);
    out.reserve(size_t(n));
    detail::advise_hugepages(out.data(), size_t(n) * sizeof(Row));
    out.resize(size_t(n));
    rows.read(out);
    rows.done();
  }

  void events(const InSection& s, const Where& w, uint64_t n, const std::vector<uint64_t>& sv, Device& dev) {
    read_table(s, w, n, dev.events, &sv);
  }

  void segments(const InSection& s, const Where& w, uint64_t n, uint64_t n_blocks, Device& dev) {
    n_blocks_ = n_blocks;
    blocks_owned_ = 0;
    read_table(s, w, n, dev.segments);
    if (blocks_owned_ != n_blocks) w.fail("blocks not owned by any segment");
  }

  void blocks(const InSection& s, const Where& w, Device& dev) { read_table(s, w, n_blocks_, dev.blocks); }

  // KERN, DMEM, DRVM: present where META has `key` ({"count": rows}, and
  // the stream list where the table has a stream column).
  template <class Row>
  void optional_table(const J& meta, const char* key, const char* tag, std::vector<Row>& out, bool has_streams) {
    if (!meta.contains(key)) return;
    const J& m = meta[key];
    const std::string p = std::string("$.") + key;
    if (!m.is_object()) throw InputError(p, "expected an object");
    const uint64_t n = count(m, "count", p + ".count");
    const std::vector<uint64_t> sv = has_streams ? stream_table(m, p) : std::vector<uint64_t>();
    const InSection& s = next(tag, "");
    read_table(s, Where{&s, ""}, n, out, &sv);
  }

  const uint8_t* data_;
  uint64_t size_;
  Trace& t_;
  uint64_t max_decoded_, max_memory_;
  std::vector<InSection> sections_;
  size_t next_ = 0;
  uint64_t n_blocks_ = 0, blocks_owned_ = 0;  // the device's blocks; those its segments own so far
  StrId kind_action_[size_t(EventKind::Other)];  // the action text of each known kind, once interned
  std::vector<StrId> remap_;
  std::vector<FrameId> frame_map_;
  std::vector<StackId> stack_map_;
};

}  // namespace

void detail::read_snap_binary(std::string_view bytes, Trace& out, uint64_t max_decoded, uint64_t max_memory) {
  BinaryReader(bytes, out, max_decoded, max_memory).read();
}

}  // namespace snapdiff
