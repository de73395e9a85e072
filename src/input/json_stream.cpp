#include "input/json_stream.hpp"

#include <unistd.h>
#include <zlib.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "input/file_source.hpp"
#include "snapdiff/error.hpp"

namespace snapdiff::detail {

namespace {

// ---- byte streams ---------------------------------------------------------

size_t pread_full(int fd, char* dst, size_t n, uint64_t off) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::pread(fd, dst + got, n - got, off_t(off + got));
    if (r < 0) {
      if (errno == EINTR) continue;
      throw InputError(off + got, std::string("read failed: ") + std::strerror(errno));
    }
    if (r == 0) break;
    got += size_t(r);
  }
  return got;
}

class PlainFileStream final : public ByteStream {
 public:
  PlainFileStream(int fd, uint64_t size) : fd_(fd), size_(size) {}
  size_t read(char* dst, size_t n) override {
    if (off_ >= size_) return 0;
    if (n > size_ - off_) n = size_t(size_ - off_);
    size_t got = pread_full(fd_, dst, n, off_);
    off_ += got;
    if (got == 0) off_ = size_;  // the file shrank: stop here
    return got;
  }
  uint64_t progress_done() const override { return off_; }
  uint64_t progress_total() const override { return size_; }

 private:
  int fd_;
  uint64_t size_, off_ = 0;
};

class MemoryStream final : public ByteStream {
 public:
  MemoryStream(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  size_t read(char* dst, size_t n) override {
    if (n > n_ - off_) n = n_ - off_;
    if (n == 0) return 0;  // an empty input may have no bytes at all (p_ null): memcpy must not see it
    std::memcpy(dst, p_ + off_, n);
    off_ += n;
    return n;
  }
  uint64_t progress_done() const override { return off_; }
  uint64_t progress_total() const override { return n_; }

 private:
  const uint8_t* p_;
  size_t n_, off_ = 0;
};

bool gzip_magic(const uint8_t* p, size_t n) { return n >= 2 && p[0] == 0x1f && p[1] == 0x8b; }

// Inflates compressed bytes that come from `src` (a file or memory).
class GzipStream final : public ByteStream {
 public:
  GzipStream(std::unique_ptr<ByteStream> src, uint64_t max_decoded) : src_(std::move(src)), max_(max_decoded) {
    in_.resize(size_t(1) << 20);
    if (inflateInit2(&zs_, 15 + 32) != Z_OK) throw InputError(uint64_t(0), "zlib initialisation failed");
  }
  ~GzipStream() override { inflateEnd(&zs_); }
  size_t read(char* dst, size_t n) override {
    if (done_ || n == 0) return 0;
    zs_.next_out = reinterpret_cast<Bytef*>(dst);
    zs_.avail_out = uInt(n > (size_t(1) << 30) ? (size_t(1) << 30) : n);
    const uInt want = zs_.avail_out;
    while (zs_.avail_out == want) {
      if (zs_.avail_in == 0) {
        size_t got = src_->read(reinterpret_cast<char*>(in_.data()), in_.size());
        in_total_ += got;
        zs_.next_in = in_.data();
        zs_.avail_in = uInt(got);
        if (got == 0) {
          if (!started_member_) {  // nothing after a complete member: the end
            done_ = true;
            return 0;
          }
          throw InputError(in_total_, "gzip data is truncated");
        }
      }
      if (!started_member_) {
        // A new member must start with the gzip magic; anything else after a
        // complete member is refused (gzip(1) warns about "trailing
        // garbage"; here it means a damaged file).
        if (member_count_ > 0 && !(zs_.avail_in >= 2 ? gzip_magic(zs_.next_in, zs_.avail_in) : zs_.next_in[0] == 0x1f)) {
          const uint64_t at = in_total_ - zs_.avail_in;
          const uint64_t total = src_->progress_total();
          throw InputError(at, gzip_trailing_message(total > at ? total - at : zs_.avail_in));
        }
        started_member_ = true;
      }
      int rc = inflate(&zs_, Z_NO_FLUSH);
      if (rc == Z_STREAM_END) {
        ++member_count_;
        started_member_ = false;
        inflateReset(&zs_);
        continue;
      }
      if (rc == Z_BUF_ERROR) continue;  // needs more input
      if (rc != Z_OK)
        throw InputError(in_total_ - zs_.avail_in,
                         std::string("corrupt gzip data: ") + (zs_.msg ? zs_.msg : "inflate failed"));
    }
    size_t produced = want - zs_.avail_out;
    out_total_ += produced;
    if (out_total_ > max_)
      throw InputError(in_total_ - zs_.avail_in, "gzip data decompresses to more than " + std::to_string(max_) +
                                                     " bytes (the limit; raise it with --max-input-bytes)");
    return produced;
  }
  uint64_t progress_done() const override { return src_->progress_done(); }
  uint64_t progress_total() const override { return src_->progress_total(); }
  uint64_t decoded_hint() const override { return src_->progress_total() * 10; }  // JSON traces compress ~10-25x
  bool compressed() const override { return true; }

 private:
  std::unique_ptr<ByteStream> src_;
  uint64_t max_;
  z_stream zs_{};
  std::vector<Bytef> in_;
  uint64_t in_total_ = 0, out_total_ = 0;
  bool done_ = false, started_member_ = false;
  uint64_t member_count_ = 0;
};

// ---- the block scanner ----------------------------------------------------

struct BlockMasks {
  uint64_t quote = 0, backslash = 0, open = 0, close = 0;
};

inline BlockMasks block_masks(const char* p) {
  BlockMasks m;
#if defined(__SSE2__)
  const __m128i q = _mm_set1_epi8('"'), bs = _mm_set1_epi8('\\'), o1 = _mm_set1_epi8('{'), o2 = _mm_set1_epi8('['),
                c1 = _mm_set1_epi8('}'), c2 = _mm_set1_epi8(']');
  for (int k = 0; k < 4; ++k) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * k));
    const int sh = 16 * k;
    m.quote |= uint64_t(uint32_t(_mm_movemask_epi8(_mm_cmpeq_epi8(v, q)))) << sh;
    m.backslash |= uint64_t(uint32_t(_mm_movemask_epi8(_mm_cmpeq_epi8(v, bs)))) << sh;
    m.open |= uint64_t(uint32_t(_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, o1), _mm_cmpeq_epi8(v, o2))))) << sh;
    m.close |= uint64_t(uint32_t(_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, c1), _mm_cmpeq_epi8(v, c2))))) << sh;
  }
#else
  for (int i = 0; i < 64; ++i) {
    const char c = p[i];
    const uint64_t bit = uint64_t(1) << i;
    if (c == '"') m.quote |= bit;
    else if (c == '\\') m.backslash |= bit;
    else if (c == '{' || c == '[') m.open |= bit;
    else if (c == '}' || c == ']') m.close |= bit;
  }
#endif
  return m;
}

// Bit i set when byte i lies after an odd number of the quotes in `q` at or
// before it (a running parity, computed for all 64 bytes at once).
inline uint64_t quote_parity(uint64_t q) {
  q ^= q << 1;
  q ^= q << 2;
  q ^= q << 4;
  q ^= q << 8;
  q ^= q << 16;
  q ^= q << 32;
  return q;
}

}  // namespace

std::unique_ptr<ByteStream> file_byte_stream(int fd, uint64_t file_size, bool gzip, uint64_t max_decoded) {
  auto plain = std::make_unique<PlainFileStream>(fd, file_size);
  if (!gzip) return plain;
  return std::make_unique<GzipStream>(std::move(plain), max_decoded);
}

std::unique_ptr<ByteStream> memory_byte_stream(const uint8_t* p, size_t n, bool gzip, uint64_t max_decoded) {
  auto plain = std::make_unique<MemoryStream>(p, n);
  if (!gzip) return plain;
  return std::make_unique<GzipStream>(std::move(plain), max_decoded);
}

uint64_t json_token_bound(std::string_view text) {
  static const auto table = [] {
    std::array<uint8_t, 256> t{};
    for (unsigned char c : std::string_view(",[]{}:\"")) t[c] = 1;
    return t;
  }();
  uint64_t n = 0;
  for (unsigned char c : text) n += table[c];
  return n;
}

std::string peek(ByteStream& in, size_t n) {
  std::string out(n, '\0');
  size_t got = 0;
  try {
    while (got < n) {
      size_t r = in.read(out.data() + got, n - got);
      if (r == 0) break;
      got += r;
    }
  } catch (const InputError&) {
    // A damaged or short file: detection works on what could be read; the
    // real reader reports the error.
  }
  out.resize(got);
  return out;
}

// ---- JsonArrayStreamer ------------------------------------------------------

JsonArrayStreamer::JsonArrayStreamer(ByteStream& in, std::string array_key, size_t chunk)
    : in_(in), array_key_(std::move(array_key)) {
  buf_.resize(chunk + kPadding);
}

// Text from the input inside an error message: one line, no control
// characters, not too long.
std::string printable(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (out.size() >= 200) {
      out += "...";
      break;
    }
    const uint8_t u = uint8_t(c);
    if (u < 0x20 || u == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", u);
      out += b;
    } else {
      out += c;
    }
  }
  return out;
}

void JsonArrayStreamer::fail(const std::string& path, const std::string& msg) const {
  throw InputError(printable(path), printable(msg));
}

void JsonArrayStreamer::fail_at(uint64_t offset, const std::string& msg) const { throw InputError(offset, printable(msg)); }

void JsonArrayStreamer::compact() {
  if (pos_ == 0) return;
  std::memmove(buf_.data(), buf_.data() + pos_, end_ - pos_);
  base_ += pos_;
  end_ -= pos_;
  pos_ = 0;
}

Buffer JsonArrayStreamer::pop_retired() {
  Buffer b = std::move(retired_.front());
  retired_.erase(retired_.begin());
  return b;
}

Buffer JsonArrayStreamer::release_buffer() {
  Buffer b = std::move(buf_);
  buf_.assign(kPadding, ' ');
  base_ += end_;
  pos_ = end_ = 0;
  return b;
}

bool JsonArrayStreamer::fill() {
  if (eof_) return false;
  const size_t cap = buf_.size() - kPadding;
  if (handoff_ && handed_ && pos_ > 0 && end_ + (cap >> 2) > cap) {
    // Retire the buffer (its elements stay where they are) and carry the
    // unread tail over to a new one. Only a buffer an element was handed
    // out from is retired: one that held only whitespace or members is
    // compacted below, so that megabytes of spaces between two elements
    // never pile up retired buffers (they are taken only between elements).
    Buffer nb;
    if (!spare_.empty()) {
      nb = std::move(spare_.back());
      spare_.pop_back();
    }
    if (nb.size() < buf_.size()) nb.resize(buf_.size());
    std::memcpy(nb.data(), buf_.data() + pos_, end_ - pos_);
    std::swap(nb, buf_);
    retired_.push_back(std::move(nb));
    ++generation_;
    base_ += pos_;
    end_ -= pos_;
    pos_ = 0;
    handed_ = false;
  } else if (pos_ > 0 && end_ + (cap >> 2) > cap) {
    compact();
  }
  if (end_ == cap) {  // one value larger than the buffer: grow it
    // Only traceEvents is streamed: any one value (an event, another
    // top-level member) must fit in memory; 1 GiB is beyond any real one,
    // and the memory bound may allow less (set_max_value).
    if (cap >= max_value_)
      fail_at(base_ + pos_, "a single JSON value larger than " + std::to_string(max_value_ >> 20) + " MiB" +
                                (max_value_ < (size_t(1) << 30) ? " (the memory limit; raise it with --max-memory)" : ""));
    buf_.resize(cap * 2 + kPadding);
  }
  const size_t room = buf_.size() - kPadding - end_;
  size_t got = in_.read(buf_.data() + end_, room);
  if (got == 0) {
    eof_ = true;
    return false;
  }
  end_ += got;
  return true;
}

bool JsonArrayStreamer::ensure(size_t n) {
  while (end_ - pos_ < n)
    if (!fill()) return false;
  return true;
}

char JsonArrayStreamer::peek_nonspace() {
  for (;;) {
    while (pos_ < end_) {
      char c = buf_[pos_];
      if (c == ' ' || c == '\n' || c == '\r' || c == '\t') {
        ++pos_;
        continue;
      }
      return c;
    }
    if (!fill()) return '\0';
  }
}

// The end of the object or array starting at pos_. Strings are tracked so
// brackets inside them do not count; a block without backslashes (almost
// all of them) is handled with bit masks, one with backslashes byte by byte.
size_t JsonArrayStreamer::scan_container() {
  for (;;) {
    const char* b = buf_.data();
    size_t i = pos_;
    int64_t depth = 0;
    bool in_string = false, escape_next = false;
    while (i < end_) {
      const size_t avail = end_ - i;
      const uint64_t valid = avail >= 64 ? ~uint64_t(0) : (uint64_t(1) << avail) - 1;
      BlockMasks m = block_masks(b + i);
      m.quote &= valid;
      m.backslash &= valid;
      m.open &= valid;
      m.close &= valid;
      if (m.backslash == 0 && !escape_next) {
        uint64_t inside = quote_parity(m.quote);
        if (in_string) inside = ~inside;
        uint64_t structural = (m.open | m.close) & ~inside;
        while (structural) {
          const int bit = __builtin_ctzll(structural);
          structural &= structural - 1;
          if ((m.open >> bit) & 1) {
            ++depth;
          } else if (--depth == 0) {
            return i + size_t(bit) + 1;
          }
        }
        in_string = (inside >> 63) & 1;
        if (avail < 64) {
          i = end_;
          break;
        }
        i += 64;
        continue;
      }
      const size_t stop = avail >= 64 ? i + 64 : end_;
      for (; i < stop; ++i) {
        const char c = b[i];
        if (escape_next) {
          escape_next = false;
        } else if (in_string) {
          if (c == '\\') escape_next = true;
          else if (c == '"') in_string = false;
        } else if (c == '"') {
          in_string = true;
        } else if (c == '{' || c == '[') {
          ++depth;
        } else if ((c == '}' || c == ']') && --depth == 0) {
          return i + 1;
        }
      }
    }
    // The input ended inside the value: read more and scan it again.
    if (!fill()) return 0;
  }
}

size_t JsonArrayStreamer::scan_string() {
  for (;;) {
    bool esc = false;
    for (size_t i = pos_ + 1; i < end_; ++i) {
      char c = buf_[i];
      if (esc) esc = false;
      else if (c == '\\') esc = true;
      else if (c == '"') return i + 1;
    }
    if (!fill()) return 0;
  }
}

size_t JsonArrayStreamer::scan_scalar() {
  for (;;) {
    for (size_t i = pos_; i < end_; ++i) {
      char c = buf_[i];
      if (c == ',' || c == '}' || c == ']' || c == ' ' || c == '\n' || c == '\r' || c == '\t') return i;
    }
    if (!fill()) return end_;
  }
}

std::string JsonArrayStreamer::read_key() {
  const uint64_t at = base_ + pos_;
  size_t e = scan_string();
  if (e == 0) fail_at(at, "truncated input: a key string is not closed");
  std::string raw(buf_.data() + pos_ + 1, e - pos_ - 2);
  pos_ = e;
  // Keys with escapes are kept as written: none of the keys read has one.
  (void)at;
  return raw;
}

JsonArrayStreamer::Item JsonArrayStreamer::next() {
  for (;;) {
    switch (state_) {
      case State::Start: {
        if (ensure(3) && uint8_t(buf_[pos_]) == 0xEF && uint8_t(buf_[pos_ + 1]) == 0xBB &&
            uint8_t(buf_[pos_ + 2]) == 0xBF)
          pos_ += 3;  // UTF-8 byte order mark
        char c = peek_nonspace();
        if (c == '{') {
          ++pos_;
          state_ = State::Members;
          char d = peek_nonspace();
          if (d == '}') {
            ++pos_;
            state_ = State::Done;
          }
          continue;
        }
        if (c == '[') {
          ++pos_;
          doc_is_array_ = true;
          saw_array_ = true;
          array_path_ = "$";
          state_ = State::Array;
          continue;
        }
        if (c == '\0') fail_at(base_ + pos_, "empty input: expected a JSON document");
        fail_at(base_ + pos_, "expected a JSON object or array");
      }
      case State::Members: {
        char c = peek_nonspace();
        if (c == '\0') fail_at(base_ + pos_, "truncated input: the top-level object is not closed");
        if (c != '"') fail_at(base_ + pos_, std::string("expected a key string in the top-level object, found '") + c + "'");
        key_ = read_key();
        c = peek_nonspace();
        if (c != ':') fail("$." + key_, c == '\0' ? "truncated input after the key" : "expected ':' after the key");
        ++pos_;
        c = peek_nonspace();
        if (c == '\0') fail("$." + key_, "truncated input: the value is missing");
        if (c == '[' && key_ == array_key_ && !saw_array_) {
          ++pos_;
          saw_array_ = true;
          array_path_ = "$." + key_;
          state_ = State::Array;
          continue;
        }
        size_t e;
        const uint64_t at = base_ + pos_;
        if (c == '{' || c == '[') e = scan_container();
        else if (c == '"') e = scan_string();
        else e = scan_scalar();
        if (e == 0) fail("$." + key_, "truncated input: the value is not complete (starts at byte " + std::to_string(at) + ")");
        value_.assign(buf_.data() + pos_, e - pos_);
        pos_ = e;
        state_ = State::AfterMember;
        return Item::Member;
      }
      case State::AfterMember: {
        char c = peek_nonspace();
        if (c == ',') {
          ++pos_;
          state_ = State::Members;
          continue;
        }
        if (c == '}') {
          ++pos_;
          state_ = State::Done;
          continue;
        }
        if (c == '\0') fail_at(base_ + pos_, "truncated input: the top-level object is not closed");
        fail_at(base_ + pos_, std::string("expected ',' or '}' in the top-level object, found '") + c + "'");
      }
      case State::Array: {
        char c = peek_nonspace();
        if (c == ']' && next_index_ == 0) {
          ++pos_;
          state_ = doc_is_array_ ? State::Done : State::AfterMember;
          continue;
        }
        auto path = [&] { return array_path_ + "[" + std::to_string(next_index_) + "]"; };
        if (c == '\0')
          fail(path(), "truncated input: the array ends before its closing ']' (" + std::to_string(next_index_) +
                           " elements read, " + std::to_string(base_ + pos_) + " bytes)");
        if (c != '{' && c != '[')
          fail(path(), std::string("expected an object, found '") + c + "' at byte " + std::to_string(base_ + pos_));
        const uint64_t at = base_ + pos_;
        size_t e = scan_container();
        if (e == 0)
          fail(path(), "truncated input: the element starting at byte " + std::to_string(at) +
                           " is not closed (the file ends inside it)");
        data_ = buf_.data() + pos_;
        size_ = e - pos_;
        offset_ = base_ + pos_;
        index_ = next_index_++;
        handed_ = true;
        pos_ = e;
        state_ = State::AfterElement;
        return Item::Element;
      }
      case State::AfterElement: {
        char c = peek_nonspace();
        if (c == ',') {
          ++pos_;
          char d = peek_nonspace();
          if (d == ']') {  // a trailing comma: tolerated
            ++pos_;
            state_ = doc_is_array_ ? State::Done : State::AfterMember;
            continue;
          }
          state_ = State::Array;
          continue;
        }
        if (c == ']') {
          ++pos_;
          state_ = doc_is_array_ ? State::Done : State::AfterMember;
          continue;
        }
        const std::string path = array_path_ + "[" + std::to_string(next_index_) + "]";  // only on errors
        if (c == '\0')
          fail(path, "truncated input: the array ends before its closing ']' (" + std::to_string(next_index_) +
                         " elements read, " + std::to_string(base_ + pos_) + " bytes)");
        fail(path, std::string("expected ',' or ']' after element ") + std::to_string(next_index_ - 1) + ", found '" +
                       c + "' at byte " + std::to_string(base_ + pos_));
      }
      case State::Done: {
        char c = peek_nonspace();
        if (c != '\0') fail_at(base_ + pos_, std::string("unexpected data after the JSON document: '") + c + "'");
        return Item::End;
      }
    }
  }
}

}  // namespace snapdiff::detail
