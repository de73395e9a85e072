// The restricted unpickler.
//
// A pickle is a program for a small stack machine. This VM implements only
// the opcodes that build plain data (dict, list, tuple, str, bytes, int,
// float, bool, None) and refuses, with the opcode's name and byte offset,
// every opcode that would import a name or call an object. Nothing in a file
// can make snapdiff run code.
//
// Speed: values are 16-byte tagged words; containers live in two flat pools;
// strings are interned on sight. Trace-entry dicts (those with an "action"
// key) are turned into Events the moment they are appended to a list, so a
// million-entry trace never exists as a tree.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <condition_variable>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <unordered_map>

#include "input/file_source.hpp"
#include "input/pickle_doc.hpp"
#include "snapdiff/error.hpp"
#include "snapdiff/input/input.hpp"

namespace snapdiff {
namespace detail {
namespace {

// Text/marker for diagnostics.
const char* opcode_name(uint8_t op) {
  switch (op) {
    case 'c': return "GLOBAL";
    case 0x93: return "STACK_GLOBAL";
    case 'R': return "REDUCE";
    case 'b': return "BUILD";
    case 'i': return "INST";
    case 'o': return "OBJ";
    case 0x81: return "NEWOBJ";
    case 0x92: return "NEWOBJ_EX";
    case 'P': return "PERSID";
    case 'Q': return "BINPERSID";
    case 0x82: return "EXT1";
    case 0x83: return "EXT2";
    case 0x84: return "EXT4";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    case 0x8f: return "EMPTY_SET";
    case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";
    default: return nullptr;
  }
}

// Reads a file ahead of the VM on a thread of its own, into a few chunk
// buffers the VM parses in place: the kernel's copy of the bytes (about a
// seventh of a plain pickle's load) leaves the parsing thread. Each buffer
// has room before its chunk for the bytes of an opcode cut by the chunk's
// start (kBridge), copied there by the VM, so the bytes in view stay one
// run. It reads exactly `size` bytes, or up to the end of a file that shrank,
// in order; an error ends the chunks with its errno and offset.
class ReadAhead {
 public:
  static constexpr size_t kChunk = size_t(256) << 10;
  static constexpr size_t kBridge = size_t(4) << 10;
  static constexpr size_t kSlots = 4;
  struct Chunk {
    uint8_t* data = nullptr;  // kBridge writable bytes before it
    size_t len = 0;           // 0: the end (or `err`)
    int err = 0;
    uint64_t off = 0;         // file offset of data[0]
  };
  ReadAhead(int fd, uint64_t size) : fd_(fd), size_(size) {
    for (auto& b : buf_) b.resize(kBridge + kChunk);
    thread_ = std::thread([this] { produce(); });
  }
  ~ReadAhead() {
    {
      std::lock_guard<std::mutex> l(m_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  ReadAhead(const ReadAhead&) = delete;
  ReadAhead& operator=(const ReadAhead&) = delete;
  static constexpr uint64_t bytes() { return kSlots * (kBridge + kChunk); }
  // The next chunk, in order (waits for it). Chunks handed out stay the
  // VM's until release_before_last() or release_all().
  Chunk next() {
    std::unique_lock<std::mutex> l(m_);
    cv_.wait(l, [&] { return filled_ > handed_; });
    const size_t i = size_t(handed_ % kSlots);
    ++handed_;
    Chunk c = meta_[i];
    c.data = buf_[i].data() + kBridge;
    return c;
  }
  // Gives back every chunk handed out but the last.
  void release_before_last() { release(handed_ ? handed_ - 1 : 0); }
  void release_all() { release(handed_); }

 private:
  void release(uint64_t upto) {
    {
      std::lock_guard<std::mutex> l(m_);
      if (upto <= released_) return;
      released_ = upto;
    }
    cv_.notify_all();
  }
  void produce() {
    uint64_t off = 0;
    for (;;) {
      size_t i;
      {
        std::unique_lock<std::mutex> l(m_);
        cv_.wait(l, [&] { return stop_ || filled_ - released_ < kSlots; });
        if (stop_) return;
        i = size_t(filled_ % kSlots);
      }
      const size_t want = size_t(std::min<uint64_t>(kChunk, size_ - off));
      size_t len = 0;
      int err = 0;
      while (len < want) {
        const ssize_t r = ::read(fd_, buf_[i].data() + kBridge + len, want - len);
        if (r < 0) {
          if (errno == EINTR) continue;
          err = errno;
          break;
        }
        if (r == 0) break;  // the file shrank since it was sized
        len += size_t(r);
      }
      {
        std::lock_guard<std::mutex> l(m_);
        meta_[i].len = len;
        meta_[i].err = err;
        meta_[i].off = off;
        ++filled_;
      }
      cv_.notify_all();
      off += len;
      if (err || len == 0) return;  // the VM meets the end or the error
    }
  }

  const int fd_;
  const uint64_t size_;
  std::array<PodVec<uint8_t>, kSlots> buf_;
  std::array<Chunk, kSlots> meta_;
  std::mutex m_;
  std::condition_variable cv_;
  uint64_t filled_ = 0, handed_ = 0, released_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

class VM {
 public:
  VM(const uint8_t* data, size_t size, PickleDoc& doc, Converter& conv, const ProgressFn& progress)
      : p_(data), n_(size), total_(size), doc_(doc), conv_(conv), progress_(progress) {}
  // Reads `size` bytes from `fd` (from its current position) in chunks
  // through a small reused buffer: the input is never mapped or held whole.
  VM(int fd, uint64_t size, PickleDoc& doc, Converter& conv, const ProgressFn& progress)
      : p_(nullptr), n_(0), total_(size), fd_(fd), doc_(doc), conv_(conv), progress_(progress) {}
  // The file read ahead on a thread of its own (ReadAhead) rather than on
  // the parsing one.
  // No thread to be had (std::system_error): read on this one.
  void read_ahead() {
    if (fd_ < 0 || ahead_) return;
    try {
      ahead_ = std::make_unique<ReadAhead>(fd_, total_);
    } catch (const std::system_error&) {
    }
  }

  Value run();
  void general_only() { entry_fast_ = false; }
  uint64_t fast_entries() const { return fast_entries_; }
  void reserve_for_input() {
    // Real snapshots: ~1 container per 100 bytes, ~1 memo entry per 64
    // bytes, ~1 event per 170 bytes. Reserving address space is free; only
    // what is used gets touched.
    doc_.conts.reserve(total_ / 64 + 16);
    memo_.reserve(total_ / 32 + 16);
    doc_.events.reserve(total_ / 40 + 16);  // an entry takes >= ~45 bytes even with every key memoized
    advise_hugepages(doc_.events.data(), doc_.events.capacity() * sizeof(Event));
    stack_.reserve(kStackReserve);
  }

 private:
  [[noreturn]] void fail(uint64_t off, const std::string& msg) { throw InputError(off, msg); }
  [[noreturn, gnu::noinline]] void fail_truncated(size_t k) {
    fail(op_off_, "truncated input: opcode needs " + std::to_string(k) + " more bytes, " +
                      std::to_string(left()) + " left");
  }
  void need(size_t k) {
    if (n_ - pos_ < k && !fill(k)) fail_truncated(k);
  }
  // Bytes of the input after the current position (window or not).
  uint64_t left() const { return total_ - (base_ + pos_); }
  // Chunked input: makes at least k bytes available at p_ + pos_ if the
  // input holds them. False for in-memory input (all of it is in view).
  [[gnu::noinline]] bool fill(size_t k) {
    if (fd_ < 0 || k > left()) return false;
    if (ahead_) return fill_ahead(k);
    size_t have = n_ - pos_;
    size_t need_cap = std::max(k, kChunk);
    if (buf_.size() < need_cap) {
      // k is at most what the input holds (checked above). A buffer beyond
      // the usual chunk holds one long string: count it before it exists.
      if (need_cap > kChunk) {
        account();
        doc_.check_memory(conv_.trace(), op_off_, std::max(need_cap, 2 * buf_.size()));
      }
      PodVec<uint8_t> nb;
      nb.resize(std::max(need_cap, 2 * buf_.size()));
      if (have) std::memcpy(nb.data(), p_ + pos_, have);
      buf_.swap(nb);
    } else if (have) {
      std::memmove(buf_.data(), p_ + pos_, have);
    }
    base_ += pos_;
    pos_ = 0;
    n_ = have;
    p_ = buf_.data();
    uint64_t unread = total_ - (base_ + n_);
    while (n_ < buf_.size() && unread > 0) {
      size_t want = buf_.size() - n_;
      if (want > unread) want = size_t(unread);
      ssize_t r = ::read(fd_, buf_.data() + n_, want);
      if (r < 0) {
        if (errno == EINTR) continue;
        throw InputError(base_ + n_, std::string("read failed: ") + std::strerror(errno));
      }
      if (r == 0) {  // the file shrank since it was sized
        total_ = base_ + n_;
        break;
      }
      n_ += size_t(r);
      unread -= uint64_t(r);
    }
    set_run_end();
    return n_ - pos_ >= k;
  }
  // fill() from the chunks read ahead. The bytes in view are parsed where
  // they lie in a chunk; the few left of one (an opcode cut by its end) are
  // copied before the next chunk, into its bridge. More than the bridge
  // holds (a long string across chunks) is assembled in buf_ as fill() does.
  bool fill_ahead(size_t k) {
    for (;;) {
      const size_t have = n_ - pos_;
      if (have >= k || ahead_end_) break;
      ReadAhead::Chunk c = ahead_->next();
      if (c.err) throw InputError(c.off + c.len, std::string("read failed: ") + std::strerror(c.err));
      if (c.len == 0) {  // the end: the file shrank since it was sized
        total_ = base_ + n_;
        ahead_->release_before_last();
        ahead_end_ = true;
        break;
      }
      base_ += pos_;
      if (have <= ReadAhead::kBridge && k - have <= c.len) {
        if (have) std::memcpy(c.data - have, p_ + pos_, have);
        p_ = c.data - have;
        n_ = have + c.len;
        pos_ = 0;
        ahead_->release_before_last();
        continue;
      }
      // Assembled in buf_: what is in view, then this chunk (and the next
      // ones, by the loop) appended.
      const size_t need_cap = have + c.len;
      if (buf_.size() < need_cap) {
        if (need_cap > kChunk) {
          account();
          doc_.check_memory(conv_.trace(), op_off_, std::max(need_cap, 2 * buf_.size()));
        }
        PodVec<uint8_t> nb;
        nb.resize(std::max(need_cap, 2 * buf_.size()));
        if (have) std::memcpy(nb.data(), p_ + pos_, have);
        buf_.swap(nb);
      } else if (have) {
        std::memmove(buf_.data(), p_ + pos_, have);
      }
      std::memcpy(buf_.data() + have, c.data, c.len);
      p_ = buf_.data();
      n_ = have + c.len;
      pos_ = 0;
      ahead_->release_all();
    }
    set_run_end();
    return n_ - pos_ >= k;
  }
  template <size_t K>
  uint64_t read_le() {
    need(K);
    const uint8_t* q = p_ + pos_;
    pos_ += K;
    if constexpr (std::endian::native == std::endian::little) {
      if constexpr (K == 1) {
        return q[0];
      } else if constexpr (K == 2) {
        uint16_t v;
        std::memcpy(&v, q, 2);
        return v;
      } else if constexpr (K == 4) {
        uint32_t v;
        std::memcpy(&v, q, 4);
        return v;
      } else {
        uint64_t v;
        std::memcpy(&v, q, 8);
        return v;
      }
    } else {
      uint64_t v = 0;
      for (size_t i = 0; i < K; ++i) v |= uint64_t(q[i]) << (8 * i);
      return v;
    }
  }
  std::string_view read_bytes(uint64_t len) {
    if (len > left())
      fail(op_off_, "declared length " + std::to_string(len) + " exceeds the " + std::to_string(left()) +
                        " bytes left in the input");
    if (n_ - pos_ < len && !fill(size_t(len))) fail_truncated(size_t(len));
    std::string_view s(reinterpret_cast<const char*>(p_ + pos_), size_t(len));
    pos_ += size_t(len);
    return s;
  }
  std::string_view read_line() {
    const void* nl = std::memchr(p_ + pos_, '\n', n_ - pos_);
    while (!nl) {
      size_t have = n_ - pos_;
      if (!fill(have + 1)) fail(op_off_, "truncated input: missing end of line");
      nl = std::memchr(p_ + pos_ + have, '\n', n_ - pos_ - have);
    }
    size_t e = size_t(static_cast<const uint8_t*>(nl) - p_);
    std::string_view s(reinterpret_cast<const char*>(p_ + pos_), e - pos_);
    pos_ = e + 1;
    return s;
  }

  // Every opcode pushes at most one value: run() makes room for one before
  // each, so push() needs no check.
  void push(const Value& v) { stack_.push_back_unchecked(v); }
  Value pop() {
    if (stack_.size() <= mark_base()) fail(op_off_, "stack underflow");
    Value v = stack_.back();
    stack_.pop_back();
    return v;
  }
  Value& top() {
    if (stack_.size() <= mark_base()) fail(op_off_, "stack underflow");
    return stack_.back();
  }
  size_t mark_base() const { return marks_.empty() ? 0 : marks_.back(); }
  size_t pop_mark() {
    if (marks_.empty()) fail(op_off_, "no MARK on the stack");
    size_t m = marks_.back();
    marks_.pop_back();
    return m;
  }

  Value new_container(VT kind) {
    if (doc_.conts.size() >= UINT32_MAX - 1) fail(op_off_, "too many containers");
    doc_.conts.push_back(Container::make(kind, op_off_));
    Value v;
    v.t = kind;
    v.v = doc_.conts.size() - 1;
    return v;
  }
  Container& cont_of(const Value& v, VT want, const char* what) {
    if (v.t != want) fail(op_off_, std::string(what) + " applied to a " + vt_name(v.t));
    return doc_.conts[v.v];
  }
  // Reserve room for `k` more items in container c (relocating to the pool end).
  void grow(Container& c, PodVec<Value>& pool, size_t per_item, size_t k) {
    size_t want = size_t(c.size) + k;
    if (want > UINT32_MAX) fail(op_off_, "container too large");
    if (want <= c.cap) return;
    size_t ncap = want < 2 * size_t(c.cap) ? 2 * size_t(c.cap) : want;
    if (ncap > UINT32_MAX) ncap = UINT32_MAX;
    if (size_t(c.off) + size_t(c.cap) * per_item == pool.size()) {  // at the end: extend in place
      if (size_t(c.off) + ncap * per_item > UINT32_MAX) fail(op_off_, "too many items in containers");
      pool.resize(size_t(c.off) + ncap * per_item);
      c.cap = uint32_t(ncap);
      return;
    }
    // A container's first items get exactly their room (a frame dict's three
    // pairs, a tuple: most never grow); one that grows again, at least 4.
    if (ncap < 4 && c.cap != 0) ncap = 4;
    size_t noff = pool.size();
    if (noff + ncap * per_item > UINT32_MAX) fail(op_off_, "too many items in containers");
    pool.resize(noff + ncap * per_item);
    if (c.size) std::memcpy(pool.data() + noff, pool.data() + c.off, size_t(c.size) * per_item * sizeof(Value));
    c.off = uint32_t(noff);
    c.cap = uint32_t(ncap);
  }

  void list_extend(const Value& lst, const Value* items, size_t k) {
    Container& c = cont_of(lst, VT::List, "APPEND");
    if (c.frozen()) fail(op_off_, "a stack-frame list was modified after use (unsupported)");
    grow(c, doc_.list_pool, 1, k);
    if (k) std::memcpy(doc_.list_pool.data() + c.off + c.size, items, k * sizeof(Value));
    c.size += uint32_t(k);
  }

  // Items for a dict. A dict whose items include a string "action" key is a
  // trace entry: it becomes an Event at once and its items are not stored, so
  // a million-entry trace never exists as a tree.
  void dict_set(const Value& dv, const Value* kv, size_t pairs) {
    Container& c = cont_of(dv, VT::Dict, "SETITEM");
    c.clear(Container::kFrameCached);
    if (c.event_backed()) {
      conv_.apply_entry_items(kv, pairs, c.src_off(), doc_.events[c.off]);
      return;
    }
    if (conv_.has_action(kv, pairs)) {
      Event ev;
      const Value* old = doc_.dict_pool.data() + c.off;
      if (c.size) conv_.apply_entry_items(old, c.size, c.src_off(), ev);
      conv_.apply_entry_items(kv, pairs, c.src_off(), ev);
      if (c.cap && size_t(c.off) + size_t(c.cap) * 2 == doc_.dict_pool.size()) doc_.dict_pool.resize(c.off);
      c.set(Container::kEventBacked);
      c.off = uint32_t(doc_.events.size());
      c.size = 0;
      c.cap = 0;
      if (doc_.events.size() == doc_.events.capacity()) grow_events();
      doc_.events.push_back(ev);
      return;
    }
    grow(c, doc_.dict_pool, 2, pairs);
    Value* dst = doc_.dict_pool.data() + c.off + size_t(c.size) * 2;
    // Python semantics: a repeated key overwrites. Keys are interned, so a
    // linear check is cheap for the few keys snapshot dicts have.
    for (size_t i = 0; i < pairs; ++i) {
      const Value& k = kv[2 * i];
      const Value& v = kv[2 * i + 1];
      bool replaced = false;
      if (k.t == VT::Str && c.size < 64) {
        Value* base = doc_.dict_pool.data() + c.off;
        for (uint32_t j = 0; j < c.size; ++j)
          if (base[2 * j].t == VT::Str && base[2 * j].v == k.v) {
            base[2 * j + 1] = v;
            replaced = true;
            break;
          }
      }
      if (!replaced) {
        *dst++ = k;
        *dst++ = v;
        ++c.size;
      }
    }
  }

  // The events array outgrew its reservation: growing it copies every
  // event once, old and new arrays resident together for a moment.
  [[gnu::noinline]] void grow_events() {
    const size_t n = doc_.events.size();
    doc_.check_memory(conv_.trace(), op_off_, uint64_t(n) * sizeof(Event));
    doc_.events.reserve(n < 1024 ? 1024 : 2 * n);
  }

  Value make_tuple(const Value* items, size_t k) {
    Value t = new_container(VT::Tuple);
    Container& c = doc_.conts[t.v];
    grow(c, doc_.list_pool, 1, k);
    if (k) std::memcpy(doc_.list_pool.data() + c.off, items, k * sizeof(Value));
    c.size = uint32_t(k);
    return t;
  }

  Value make_str(std::string_view s, VT t = VT::Str) {
    if (s.size() >= kLongString) [[unlikely]]
      doc_.check_memory(conv_.trace(), op_off_, s.size());
    Value v;
    v.t = t;
    v.v = s.size() <= 8 ? intern_short(s) : conv_.trace().strings.intern(s);
    return v;
  }
  // Strings of at most 8 bytes (a trace entry's "N/A", "alloc", keys not
  // memoized) through a small direct-mapped cache: the string itself, as a
  // word and its length, is the key, so a hit needs no comparison of bytes.
  StrId intern_short(std::string_view s) {
    uint64_t w = 0;
    std::memcpy(&w, s.data(), s.size());
    const uint64_t key = w ^ (uint64_t(s.size()) << 59) ^ (uint64_t(s.size()) * 0x9E3779B97F4A7C15ull);
    ShortString& e = short_[size_t((key * 0x9E3779B97F4A7C15ull) >> 56)];
    if (e.set && e.word == w && e.len == s.size()) return e.id;
    e.word = w;
    e.len = uint8_t(s.size());
    e.set = true;
    e.id = conv_.trace().strings.intern(s);
    return e.id;
  }
  struct ShortString {
    uint64_t word = 0;
    StrId id = 0;
    uint8_t len = 0;
    bool set = false;
  };
  ShortString short_[256];
  Value make_int(int64_t i) {
    Value v;
    v.t = VT::Int;
    v.v = uint64_t(i);
    return v;
  }
  // An integer beyond 64 bits: its sign only (1 positive, 2 negative).
  static Value make_big(bool neg) {
    Value v;
    v.t = VT::BigInt;
    v.x = neg ? 2 : 1;
    return v;
  }
  // A non-negative integer: int64 where it fits, else uint64.
  Value make_unsigned(uint64_t x) {
    if (!(x >> 63)) return make_int(int64_t(x));
    Value v;
    v.t = VT::UInt64;
    v.v = x;
    return v;
  }
  Value make_long(std::string_view bytes);
  Value parse_decimal(std::string_view s, bool is_long);

  // The trace-entry fast path (try_entry()): what one entry's bytes hold,
  // gathered before anything is committed.
  bool try_entry();
  bool entry_fast_ = true;
  uint64_t fast_entries_ = 0;
  PodVec<Value> entry_kv_;
  // The frames list's items: a frame dict's container (by memo), or
  // kInlineFrame for the next of entry_inline_ (one written out).
  static constexpr uint32_t kInlineFrame = UINT32_MAX;
  PodVec<uint32_t> entry_frames_;
  std::vector<Frame> entry_inline_;
  std::vector<FrameId> entry_ids_;

  // The memo holds 8-byte words: the type in the top byte, the payload in the
  // low 56 bits (ids, small ints); other values spill to memo_spill_.
  static constexpr uint64_t kPayload = (uint64_t(1) << 56) - 1;
  static constexpr uint64_t kAbsentWord = uint64_t(0xff) << 56;
  static constexpr uint8_t kSpillTag = 0xfe;
  uint64_t memo_word(const Value& v) {
    uint64_t tag = uint64_t(v.t) << 56;
    if (uint8_t(v.t) >= uint8_t(VT::Str)) return tag | v.v;  // strings and containers: the id
    switch (v.t) {
      case VT::BigInt: return tag | v.x;
      case VT::Int:
        if (v.i() >= -(int64_t(1) << 55) && v.i() < (int64_t(1) << 55)) return tag | (v.v & kPayload);
        break;
      case VT::UInt64: case VT::Float: break;
      default: return tag | v.v;  // None, Bool, string ids, container indices
    }
    memo_spill_.push_back(v);
    return (uint64_t(kSpillTag) << 56) | (memo_spill_.size() - 1);
  }
  Value memo_value(uint64_t w) const {
    uint8_t tag = uint8_t(w >> 56);
    if (tag == kSpillTag) return memo_spill_[w & kPayload];
    Value v;
    v.t = VT(tag);
    uint64_t p = w & kPayload;
    if (v.t == VT::Int) v.v = uint64_t(int64_t(p << 8) >> 8);
    else if (v.t == VT::BigInt) v.x = uint32_t(p);
    else v.v = p;
    return v;
  }
  // Python's pickler numbers memo slots 0, 1, 2, ...: the dense array.
  // Indices past its end (pickletools.optimize leaves gaps; a crafted file
  // names 2^32 - 1) fill a short gap or go to a map, never to an array
  // resized to the index; either way they are counted at once.
  void memo_put(uint64_t idx, const Value& v) {
    size_t n = memo_.size();
    if (idx == n) {
      memo_.push_back(memo_word(v));
    } else if (idx < n) {
      memo_[size_t(idx)] = memo_word(v);
    } else {
      memo_put_beyond(idx, v);
    }
  }
  [[gnu::noinline]] void memo_put_beyond(uint64_t idx, const Value& v) {
    size_t n = memo_.size();
    if (idx - n <= kMaxMemoGap) {
      memo_.resize(size_t(idx) + 1);
      for (size_t i = n; i < size_t(idx); ++i) memo_[i] = kAbsentWord;
      memo_[size_t(idx)] = memo_word(v);
    } else {
      sparse_memo_[idx] = v;
    }
    account();
  }
  Value memo_get(uint64_t idx) {
    if (idx < memo_.size()) {
      uint64_t w = memo_[size_t(idx)];
      if (w != kAbsentWord) return memo_value(w);
    }
    return memo_get_sparse(idx);
  }
  [[gnu::noinline]] Value memo_get_sparse(uint64_t idx) {
    auto it = sparse_memo_.find(idx);
    if (it == sparse_memo_.end()) fail(op_off_, "memo index " + std::to_string(idx) + " was never stored");
    return it->second;
  }
  size_t memo_count() const { return memo_.size() + sparse_memo_.size(); }

  // A run of BINGET / LONG_BINGET, its first opcode (at pos_ - 1) just
  // dispatched, taken without a check per opcode while each lies whole in
  // view before run_end_, names a dense memo slot that is set, and the stack
  // has room. True when it stopped at another opcode, at the end of what it
  // may take, or with the stack full: pos_ is there and the main loop goes
  // on. False when the opcode at pos_ (not yet taken; pos_ - 1 when it was
  // the first) needs the general path: a sparse or unset memo index, or
  // bytes to read in.
  bool binget_run() {
    const size_t start = pos_ - 1;
    const size_t fast_end = n_ >= 5 ? std::min(run_end_, n_ - 4) : 0;
    const uint64_t* memo = memo_.data();
    const size_t nmemo = memo_.size();
    const uint8_t* p = p_;
    Value* sp = stack_.end();
    Value* const lim = stack_.data() + stack_.capacity();
    size_t at = start;
    bool general = false;
    while (at < fast_end && sp != lim) {
      const uint8_t o = p[at];
      uint64_t idx;
      size_t len;
      if (o == 'h') {
        idx = p[at + 1];
        len = 2;
      } else if (o == 'j') {
        uint32_t w;
        std::memcpy(&w, p + at + 1, 4);
        idx = w;
        len = 5;
      } else {
        break;
      }
      if (idx >= nmemo) [[unlikely]] {
        general = true;
        break;
      }
      const uint64_t w = memo[idx];
      const uint8_t tag = uint8_t(w >> 56);
      if (unsigned(tag) - unsigned(VT::Str) <= unsigned(VT::Dict) - unsigned(VT::Str)) {
        // A string or a container (the frames of a stack): its id as stored.
        sp->t = VT(tag);
        sp->x = 0;
        sp->v = w & kPayload;
      } else if (w == kAbsentWord) [[unlikely]] {
        general = true;
        break;
      } else {
        *sp = memo_value(w);
      }
      ++sp;
      at += len;
    }
    stack_.resize(size_t(sp - stack_.data()));
    pos_ = at;
    return !general && at != start;
  }

  // The memory bound: the VM's own structures into doc_.vm_bytes, then the
  // check of everything held (PickleDoc::check_memory). Called every
  // kBudgetStride bytes of input (no opcode builds more than about 40 bytes
  // per byte of input, so at most a few MiB pass between two checks), and
  // at once where one opcode can build more (a long string, a memo gap, a
  // large stack interned).
  void account() {
    if (!doc_.budget.bounded()) return;
    // The read buffer's usual chunk and the stack's first reservation are
    // part of the fixed share (kFixedMemoryBytes): only growth beyond counts.
    auto beyond = [](uint64_t bytes, uint64_t fixed) { return bytes > fixed ? bytes - fixed : 0; };
    doc_.vm_bytes = uint64_t(memo_.size()) * sizeof(uint64_t) + uint64_t(memo_spill_.capacity()) * sizeof(Value) +
                    uint64_t(sparse_memo_.size()) * kSparseMemoNodeBytes +
                    uint64_t(sparse_memo_.bucket_count()) * sizeof(void*) +
                    beyond(uint64_t(stack_.capacity()) * sizeof(Value), kStackReserve * sizeof(Value)) +
                    uint64_t(marks_.capacity()) * sizeof(size_t) + beyond(buf_.size(), kChunk) +
                    (ahead_ ? ReadAhead::bytes() : 0);
    doc_.check_memory(conv_.trace(), op_off_);
  }
  // Progress and the memory check, due when the input position reaches
  // next_check_ (one comparison per opcode, as progress alone had).
  [[gnu::noinline]] void checkpoint() {
    const uint64_t at = base_ + pos_;
    if (at >= next_progress_) {
      next_progress_ = at + (uint64_t(16) << 20);
      if (progress_) progress_(at, total_);
    }
    if (doc_.budget.bounded()) {
      op_off_ = at;
      account();
      next_budget_ = at + kBudgetStride;
    }
    next_check_ = std::min(next_progress_, next_budget_);
    set_run_end();
  }
  // Where a run of BINGETs stops: the end of the bytes in view, or the next
  // check. Set whenever either moves.
  void set_run_end() {
    run_end_ = next_check_ - base_ < n_ ? size_t(next_check_ - base_) : n_;
  }
  size_t run_end_ = 0;
  static constexpr uint64_t kBudgetStride = uint64_t(64) << 10;
  static constexpr size_t kStackReserve = 4096;
  static constexpr size_t kLongString = size_t(1) << 20;
  static constexpr uint64_t kMaxMemoGap = 4096;
  static constexpr uint64_t kSparseMemoNodeBytes = 64;  // unordered_map node (key, Value, next, malloc)
  uint64_t next_progress_ = uint64_t(16) << 20;
  uint64_t next_budget_ = 0;
  uint64_t next_check_ = 0;

  // The bytes in view: p_[0, n_) is input [base_, base_ + n_); pos_ is
  // relative to p_, op_off_ absolute.
  static constexpr size_t kChunk = size_t(256) << 10;
  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0;
  uint64_t base_ = 0;
  uint64_t total_;
  int fd_ = -1;
  PodVec<uint8_t> buf_;
  std::unique_ptr<ReadAhead> ahead_;
  bool ahead_end_ = false;  // ReadAhead gave its last chunk
  uint64_t op_off_ = 0;
  PickleDoc& doc_;
  Converter& conv_;
  const ProgressFn& progress_;
  PodVec<Value> stack_;
  std::vector<size_t> marks_;
  PodVec<uint64_t> memo_;
  std::vector<Value> memo_spill_;
  std::unordered_map<uint64_t, Value> sparse_memo_;
};

Value VM::make_long(std::string_view b) {
  size_t k = b.size();
  if (k == 0) return make_int(0);
  const uint8_t* u = reinterpret_cast<const uint8_t*>(b.data());
  if (k <= 8) {
    // Addresses and times: two's complement in at most 8 bytes always fits
    // an int64 (sign-extended from the top byte written).
    uint64_t x = 0;
    for (size_t i = 0; i < k; ++i) x |= uint64_t(u[i]) << (8 * i);
    const unsigned sh = unsigned(64 - 8 * k);
    return make_int(sh ? int64_t(x << sh) >> sh : int64_t(x));
  }
  bool neg = (u[k - 1] & 0x80) != 0;
  // Strip redundant sign-extension bytes.
  size_t sig = k;
  while (sig > 1 && u[sig - 1] == (neg ? 0xff : 0x00)) {
    --sig;
  }
  if (sig <= 8) {
    uint64_t x = 0;
    for (size_t i = 0; i < sig; ++i) x |= uint64_t(u[i]) << (8 * i);
    if (!neg) return make_unsigned(x);
    if (sig < 8) x |= ~uint64_t(0) << (8 * sig);
    // Representable as int64 only if the top bit is set after extension.
    return int64_t(x) < 0 ? make_int(int64_t(x)) : make_big(true);
  }
  return make_big(neg);
}

Value VM::parse_decimal(std::string_view s, bool is_long) {
  if (is_long && !s.empty() && s.back() == 'L') s.remove_suffix(1);
  if (!is_long && (s == "00" || s == "01")) {
    Value v;
    v.t = VT::Bool;
    v.v = s == "01";
    return v;
  }
  bool neg = false;
  size_t i = 0;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) neg = s[i++] == '-';
  if (i == s.size()) fail(op_off_, "malformed integer literal");
  __extension__ typedef unsigned __int128 u128;
  u128 acc = 0;
  bool big = false;
  for (; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') fail(op_off_, "malformed integer literal");
    if (!big) {
      acc = acc * 10 + unsigned(s[i] - '0');
      if (acc > u128(~uint64_t(0))) big = true;
    }
  }
  if (big) return make_big(neg);
  const uint64_t x = uint64_t(acc);
  if (!neg) return make_unsigned(x);
  return x <= (uint64_t(1) << 63) ? make_int(int64_t(0 - x)) : make_big(true);
}

// The trace-entry fast path. Most of a snapshot is trace entries of one
// shape: EMPTY_DICT, maybe a memo put, MARK, key/value pairs, SETITEMS, one
// value being the entry's frames: EMPTY_LIST, maybe a memo put, then frame
// dicts by memo (BINGET) or written out (EMPTY_DICT MARK pairs SETITEMS)
// in APPENDS batches. Called just after an EMPTY_DICT (at op_off_), it reads
// that shape ahead without a stack, a container per frame dict or a pool
// item, and then leaves exactly the state the general path would have
// left: the entry's dict as an event-backed container on the stack, the
// memo slots the bytes put (same values), strings, frames and the stack
// interned in the same order, the frames list (when memoized) frozen with
// its stack. Containers nobody can name again are not made: a frames list
// or a frame dict without a memo put.
//
// Anything else (another opcode, a memo index out of order, a memoized frame
// dict written out, a value that is a new container, bytes beyond run_end_,
// a full events array) and it returns false having changed nothing the
// general path can see (it may have interned strings the general path then
// interns again, in the same order): the general path takes the bytes from
// the EMPTY_DICT on, with its own checks and messages.
bool VM::try_entry() {
  const uint8_t* const p = p_;
  const size_t lim = run_end_;
  size_t q = pos_;
  const uint64_t dict_off = op_off_;
  const size_t memo0 = memo_.size();
  const uint64_t c0 = doc_.conts.size();  // the entry's dict, when committed
  uint64_t next_c = c0 + 1;
  bool list_memoized = false;
  uint64_t list_off = 0;
  size_t frames_at = SIZE_MAX;  // index in entry_kv_ of the frames value
  entry_kv_.clear();
  entry_frames_.clear();
  entry_inline_.clear();
  auto bail = [&] {
    memo_.resize(memo0);
    return false;
  };
  // A memo put at q, if one is there, of `v`: only puts that append to the
  // dense memo and need no spill are taken. 1 taken, 0 none there, -1 not
  // one this path takes.
  auto put = [&](const Value& v) -> int {
    if (q >= lim) return 0;
    const uint8_t o = p[q];
    uint64_t idx;
    size_t len;
    if (o == 0x94) {
      idx = memo_.size();
      len = 1;
    } else if (o == 'q') {
      if (q + 2 > lim) return -1;
      idx = p[q + 1];
      len = 2;
    } else if (o == 'r') {
      if (q + 5 > lim) return -1;
      uint32_t w;
      std::memcpy(&w, p + q + 1, 4);
      idx = w;
      len = 5;
    } else {
      return 0;
    }
    if (idx != memo_.size() || sparse_memo_.size()) return -1;
    if (uint8_t(v.t) < uint8_t(VT::Str) && v.t != VT::None && v.t != VT::Bool &&
        !(v.t == VT::Int && v.i() >= -(int64_t(1) << 55) && v.i() < (int64_t(1) << 55)))
      return -1;  // would spill
    memo_.push_back(memo_word(v));
    q += len;
    return 1;
  };
  // The readers below return their value in registers (an out-parameter
  // written field by field and read back whole stalled on store
  // forwarding); kNo's type says the bytes are not what this path takes.
  constexpr VT kNo = VT(0xff);
  auto no = [] {
    Value v;
    v.t = kNo;
    return v;
  };
  // A BINGET/LONG_BINGET at q: the slot's value. Containers made in this
  // entry (ids from c0 on) do not exist yet: not taken.
  auto get = [&]() -> Value {
    const uint8_t o = p[q];
    uint64_t idx;
    if (o == 'h') {
      if (q + 2 > lim) return no();
      idx = p[q + 1];
      q += 2;
    } else {
      if (q + 5 > lim) return no();
      uint32_t w;
      std::memcpy(&w, p + q + 1, 4);
      idx = w;
      q += 5;
    }
    if (idx >= memo_.size()) return no();
    const uint64_t w = memo_[size_t(idx)];
    if (w == kAbsentWord) return no();
    const Value v = memo_value(w);
    if (uint8_t(v.t) >= uint8_t(VT::List) && v.v >= c0) return no();
    return v;
  };
  // A string at q (SHORT_BINUNICODE, BINUNICODE).
  auto str = [&]() -> Value {
    const uint8_t o = p[q];
    uint64_t len;
    if (o == 0x8c) {
      if (q + 2 > lim) return no();
      len = p[q + 1];
      q += 2;
    } else {
      if (q + 5 > lim) return no();
      uint32_t w;
      std::memcpy(&w, p + q + 1, 4);
      len = w;
      q += 5;
    }
    if (len >= kLongString || len > lim - q) return no();
    const Value v = make_str(std::string_view(reinterpret_cast<const char*>(p + q), size_t(len)));
    q += size_t(len);
    return v;
  };
  // A scalar value at q (a string, an int, None, a bool, or one by memo),
  // with its memo put.
  auto scalar = [&]() -> Value {
    if (q >= lim) return no();
    Value v;
    switch (p[q]) {
      case 'h': case 'j': v = get(); break;
      case 0x8c: case 'X': v = str(); break;
      case 'K':
        if (q + 2 > lim) return no();
        v = make_int(p[q + 1]);
        q += 2;
        break;
      case 'M': {
        if (q + 3 > lim) return no();
        uint16_t w;
        std::memcpy(&w, p + q + 1, 2);
        v = make_int(w);
        q += 3;
        break;
      }
      case 'J': {
        if (q + 5 > lim) return no();
        uint32_t w;
        std::memcpy(&w, p + q + 1, 4);
        v = make_int(int32_t(w));
        q += 5;
        break;
      }
      case 0x8a: {
        if (q + 2 > lim) return no();
        const size_t len = p[q + 1];
        if (len > 8 || q + 2 + len > lim) return no();
        v = make_long(std::string_view(reinterpret_cast<const char*>(p + q + 2), len));
        q += 2 + len;
        break;
      }
      case 'N': q += 1; break;
      case 0x88: case 0x89:
        v.t = VT::Bool;
        v.v = p[q] == 0x88;
        q += 1;
        break;
      default: return no();
    }
    if (v.t == kNo || put(v) < 0) return no();
    return v;
  };
  // A string key (written, or by memo) with its memo put.
  auto key = [&]() -> Value {
    if (q >= lim) return no();
    const uint8_t o = p[q];
    Value k;
    if (o == 'h' || o == 'j') {
      k = get();
      if (k.t != VT::Str) return no();
    } else if (o == 0x8c || o == 'X') {
      k = str();
    } else {
      return no();
    }
    if (k.t == kNo || put(k) < 0) return no();
    return k;
  };
  // A frame dict written out, at q just after its EMPTY_DICT: MARK, pairs
  // with string keys, SETITEMS. Not memoized (else false): nothing can
  // name it again, so it is only its frame. Read as frame_of() reads it: a
  // repeated key's last value counts.
  auto frame_dict = [&](Frame* f) -> bool {
    if (q >= lim || p[q] != '(') return false;
    ++q;
    Value name, file, line;
    for (int pairs = 0;; ++pairs) {
      if (q >= lim || pairs > 16) return false;
      if (p[q] == 'u') {
        ++q;
        break;
      }
      const Value k = key();
      if (k.t == kNo) return false;
      const Value v = scalar();
      if (v.t == kNo) return false;
      if (k.v == conv_.k_name) name = v;
      else if (k.v == conv_.k_filename) file = v;
      else if (k.v == conv_.k_line) line = v;
    }
    if (name.t == VT::Str) f->name = StrId(name.v);
    if (file.t == VT::Str) f->file = StrId(file.v);
    if (line.t == VT::Int && line.i() >= 0) f->line = line.i();
    return true;
  };
  // One item of a frames list at q.
  auto frame_item = [&]() -> bool {
    if (q >= lim || entry_frames_.size() >= 4096) return false;
    const uint8_t o = p[q];
    if (o == 'h' || o == 'j') {
      const Value ref = get();
      if (ref.t != VT::Dict) return false;
      entry_frames_.push_back(uint32_t(ref.v));
    } else if (o == '}') {
      ++q;
      if (q < lim && (p[q] == 0x94 || p[q] == 'q' || p[q] == 'r')) return false;
      Frame f;
      if (!frame_dict(&f)) return false;
      entry_inline_.push_back(f);
      entry_frames_.push_back(kInlineFrame);
    } else {
      return false;
    }
    return true;
  };
  // A run of frame dicts by memo at q (most of a snapshot's bytes), in a
  // loop of its own: each a set dense slot holding a dict made before this
  // entry. Stops at anything else (frame_item() then takes it) and where an
  // opcode might not lie whole before lim.
  auto frame_refs = [&]() -> bool {
    const uint64_t* memo = memo_.data();
    const uint64_t nmemo = memo_.size();
    size_t n = entry_frames_.size();
    entry_frames_.resize(4096);
    uint32_t* out = entry_frames_.data();
    bool ok = true;
    // BINGET ('h', 1-byte index) and LONG_BINGET ('j', 4 bytes) mix in no
    // order a branch predicts: the index and length are picked without one.
    while (q + 5 <= lim && n < 4096) {
      const uint8_t o = p[q];
      const bool h = o == 'h';
      if (!h && o != 'j') break;
      uint32_t w4;
      std::memcpy(&w4, p + q + 1, 4);
      const uint64_t idx = h ? (w4 & 0xffu) : w4;
      q += h ? 2 : 5;
      if (idx >= nmemo) {
        ok = false;
        break;
      }
      const uint64_t w = memo[idx];
      // The tag byte is the dict's (not absent, not spilled) and the id
      // one made before.
      if ((w >> 56) != uint64_t(VT::Dict) || (w & kPayload) >= c0) {
        ok = false;
        break;
      }
      out[n++] = uint32_t(w & kPayload);
    }
    entry_frames_.resize(n);
    return ok;
  };
  // The frames list, at q just after its EMPTY_LIST (at list_off).
  auto frames_list = [&]() -> bool {
    Value lv;
    lv.t = VT::List;
    lv.v = next_c;
    const int r = put(lv);
    if (r < 0) return false;
    if (r == 1) list_memoized = true, ++next_c;
    for (;;) {
      if (q >= lim) return false;
      const uint8_t o = p[q];
      if (o == '(') {
        ++q;
        for (;;) {
          if (q >= lim) return false;
          if (!frame_refs()) return false;
          if (q >= lim) return false;
          if (p[q] == 'e') {
            ++q;
            break;
          }
          if (!frame_item()) return false;
        }
      } else if (o == '}' || ((o == 'h' || o == 'j') && q + (o == 'h' ? 2 : 5) < lim && p[q + (o == 'h' ? 2 : 5)] == 'a')) {
        // One item and APPEND (a list of one, or the last of a batch).
        // A BINGET not followed by APPEND is the entry's next key.
        if (!frame_item() || q >= lim || p[q] != 'a') return false;
        ++q;
      } else {
        return true;  // the next key, or the dict's SETITEMS
      }
    }
  };

  // The entry's dict: its memo put, MARK, pairs, SETITEMS.
  {
    Value dv;
    dv.t = VT::Dict;
    dv.v = c0;
    if (put(dv) < 0) return bail();
  }
  if (q >= lim || p[q] != '(') return bail();
  ++q;
  for (;;) {
    if (q >= lim) return bail();
    if (p[q] == 'u') {
      ++q;
      break;
    }
    const Value k = key();
    if (k.t == kNo) return bail();
    Value v;
    // A list written out is taken only as the entry's one 'frames' value
    // (a list under another key is never interned by the general path).
    if (q < lim && p[q] == ']' && k.v == conv_.k_frames && frames_at == SIZE_MAX) {
      list_off = base_ + q;
      ++q;
      if (!frames_list()) return bail();
      frames_at = entry_kv_.size() + 1;
      v.t = VT::List;
    } else {
      v = scalar();
      if (v.t == kNo) return bail();
    }
    entry_kv_.push_back(k);
    entry_kv_.push_back(v);
  }
  const size_t pairs = entry_kv_.size() / 2;
  if (!conv_.has_action(entry_kv_.data(), pairs)) return bail();
  if (doc_.events.size() == doc_.events.capacity() || next_c >= UINT32_MAX - 1) return bail();

  // Commit: as the general path leaves it.
  Container e = Container::make(VT::Dict, dict_off);
  e.set(Container::kEventBacked);
  e.off = uint32_t(doc_.events.size());
  doc_.conts.push_back(e);
  if (frames_at != SIZE_MAX) {
    // Frames as stack_of() makes them: in list order, frame_of() for one
    // by memo (cached after its first use), then the stack.
    const size_t n = entry_frames_.size();
    entry_ids_.resize(n);
    const Container* conts = doc_.conts.data();
    size_t next_inline = 0;
    for (size_t i = 0; i < n; ++i) {
      const uint32_t id = entry_frames_[i];
      if (id == kInlineFrame) {
        entry_ids_[i] = conv_.trace().intern_frame(entry_inline_[next_inline++]);
      } else if (conts[id].has(Container::kFrameCached)) {
        entry_ids_[i] = conts[id].cached;
      } else {
        Value fv;
        fv.t = VT::Dict;
        fv.v = id;
        entry_ids_[i] = conv_.frame_of(fv);
        conts = doc_.conts.data();
      }
    }
    const StackId sid = conv_.trace().stacks.intern(entry_ids_.data(), entry_ids_.size());
    if (list_memoized) {
      Container l = Container::make(VT::List, list_off);
      l.cached = sid;
      l.set(Container::kStackCached);
      l.set(Container::kFrozen);
      doc_.conts.push_back(l);
    }
    Value& fv = entry_kv_[frames_at];
    fv.x = Converter::kDirectStack;
    fv.v = sid;
  }
  conv_.apply_entry_items(entry_kv_.data(), pairs, dict_off, doc_.events.emplace_back());
  Value dv;
  dv.t = VT::Dict;
  dv.v = c0;
  push(dv);
  pos_ = q;
  ++fast_entries_;
  return true;
}

Value VM::run() {
  if (total_ == 0) fail(0, "empty input");
  next_budget_ = doc_.budget.bounded() ? 0 : UINT64_MAX;
  next_check_ = std::min(next_progress_, next_budget_);
  set_run_end();
  for (;;) {
    if (pos_ >= n_ && !fill(1)) fail(base_ + pos_, "truncated input: no STOP opcode before the end");
    if (base_ + pos_ >= next_check_) checkpoint();
    if (stack_.size() == stack_.capacity()) [[unlikely]] {
      // The stack grows only here (every opcode pushes at most one value).
      if (stack_.size() > (size_t(1) << 32)) fail(base_ + pos_, "stack too deep");
      stack_.reserve(stack_.size() + 1);
    }
    op_off_ = base_ + pos_;
    uint8_t op = p_[pos_++];
    switch (op) {
      case 0x80: {  // PROTO
        uint64_t v = read_le<1>();
        if (v > 5) fail(op_off_, "unsupported pickle protocol " + std::to_string(v));
        doc_.protocol = int(v);
        break;
      }
      case 0x95: read_le<8>(); break;  // FRAME: a hint only
      case '.': {                      // STOP
        // Like Python: the value on top is the result; bytes after STOP are ignored.
        if (stack_.size() <= mark_base()) fail(op_off_, "STOP with an empty stack");
        return stack_.back();
      }
      case '(': marks_.push_back(stack_.size()); break;
      case '}':
        // A trace entry in one go where its bytes have the usual shape.
        if (entry_fast_ && try_entry()) break;
        push(new_container(VT::Dict));
        break;
      case ']': push(new_container(VT::List)); break;
      case ')': push(make_tuple(nullptr, 0)); break;
      case 'd': {  // DICT
        size_t m = pop_mark();
        size_t k = stack_.size() - m;
        if (k % 2) fail(op_off_, "DICT with an odd number of items");
        Value d = new_container(VT::Dict);
        dict_set(d, stack_.data() + m, k / 2);
        stack_.resize(m);
        push(d);
        break;
      }
      case 'l': {  // LIST
        size_t m = pop_mark();
        Value l = new_container(VT::List);
        list_extend(l, stack_.data() + m, stack_.size() - m);
        stack_.resize(m);
        push(l);
        break;
      }
      case 't': {  // TUPLE
        size_t m = pop_mark();
        Value t = make_tuple(stack_.data() + m, stack_.size() - m);
        stack_.resize(m);
        push(t);
        break;
      }
      case 0x85: case 0x86: case 0x87: {  // TUPLE1/2/3
        size_t k = size_t(op - 0x84);
        if (stack_.size() < mark_base() + k) fail(op_off_, "stack underflow");
        Value t = make_tuple(stack_.data() + stack_.size() - k, k);
        stack_.resize(stack_.size() - k);
        push(t);
        break;
      }
      case 's': {  // SETITEM
        if (stack_.size() < mark_base() + 3) fail(op_off_, "stack underflow");
        size_t b = stack_.size() - 2;
        dict_set(stack_[b - 1], stack_.data() + b, 1);
        stack_.resize(b);
        break;
      }
      case 'u': {  // SETITEMS
        size_t m = pop_mark();
        if (m == 0 || m <= mark_base()) fail(op_off_, "SETITEMS without a dict below the MARK");
        size_t k = stack_.size() - m;
        if (k % 2) fail(op_off_, "SETITEMS with an odd number of items");
        dict_set(stack_[m - 1], stack_.data() + m, k / 2);
        stack_.resize(m);
        break;
      }
      case 'a': {  // APPEND
        if (stack_.size() < mark_base() + 2) fail(op_off_, "stack underflow");
        list_extend(stack_[stack_.size() - 2], &stack_.back(), 1);
        stack_.pop_back();
        break;
      }
      case 'e': {  // APPENDS
        size_t m = pop_mark();
        if (m == 0 || m <= mark_base()) fail(op_off_, "APPENDS without a list below the MARK");
        list_extend(stack_[m - 1], stack_.data() + m, stack_.size() - m);
        stack_.resize(m);
        break;
      }
      case 0x8c: { uint64_t l = read_le<1>(); push(make_str(read_bytes(l))); break; }  // SHORT_BINUNICODE
      case 'X': { uint64_t l = read_le<4>(); push(make_str(read_bytes(l))); break; }   // BINUNICODE
      case 0x8d: { uint64_t l = read_le<8>(); push(make_str(read_bytes(l))); break; }  // BINUNICODE8
      case 'U': { uint64_t l = read_le<1>(); push(make_str(read_bytes(l))); break; }   // SHORT_BINSTRING
      case 'T': {                                                                    // BINSTRING
        uint64_t l = read_le<4>();
        if (l >> 31) fail(op_off_, "BINSTRING with a negative length");
        push(make_str(read_bytes(l)));
        break;
      }
      case 'C': { uint64_t l = read_le<1>(); push(make_str(read_bytes(l), VT::Bytes)); break; }   // SHORT_BINBYTES
      case 'B': { uint64_t l = read_le<4>(); push(make_str(read_bytes(l), VT::Bytes)); break; }   // BINBYTES
      case 0x8e: case 0x96: { uint64_t l = read_le<8>(); push(make_str(read_bytes(l), VT::Bytes)); break; }  // BINBYTES8, BYTEARRAY8
      case 'V': {  // UNICODE (raw-unicode-escape text); kept as written
        push(make_str(read_line()));
        break;
      }
      case 'S': {  // STRING (quoted repr); strip the quotes
        std::string_view s = read_line();
        if (s.size() >= 2 && (s.front() == '\'' || s.front() == '"') && s.back() == s.front())
          s = s.substr(1, s.size() - 2);
        push(make_str(s));
        break;
      }
      case 'K': push(make_int(int64_t(read_le<1>()))); break;
      case 'M': push(make_int(int64_t(read_le<2>()))); break;
      case 'J': push(make_int(int64_t(int32_t(uint32_t(read_le<4>()))))); break;
      case 0x8a: { uint64_t l = read_le<1>(); push(make_long(read_bytes(l))); break; }  // LONG1
      case 0x8b: {                                                                    // LONG4
        uint64_t l = read_le<4>();
        if (l >> 31) fail(op_off_, "LONG4 with a negative length");
        push(make_long(read_bytes(l)));
        break;
      }
      case 'I': push(parse_decimal(read_line(), false)); break;
      case 'L': push(parse_decimal(read_line(), true)); break;
      case 'G': {  // BINFLOAT, big-endian
        need(8);
        uint64_t b = 0;
        for (int i = 0; i < 8; ++i) b = (b << 8) | p_[pos_ + size_t(i)];
        pos_ += 8;
        Value v;
        v.t = VT::Float;
        v.v = b;
        push(v);
        break;
      }
      case 'F': {
        std::string s(read_line());
        char* end = nullptr;
        double d = std::strtod(s.c_str(), &end);
        if (s.empty() || end != s.c_str() + s.size()) fail(op_off_, "malformed float literal");
        Value v;
        v.t = VT::Float;
        v.v = std::bit_cast<uint64_t>(d);
        push(v);
        break;
      }
      case 0x88: case 0x89: { Value v; v.t = VT::Bool; v.v = op == 0x88; push(v); break; }
      case 'N': push(Value{}); break;
      case 0x94: memo_put(memo_count(), top()); break;  // MEMOIZE
      case 'q': { uint64_t i = read_le<1>(); memo_put(i, top()); break; }
      case 'r': { uint64_t i = read_le<4>(); memo_put(i, top()); break; }
      case 'p': {
        std::string_view s = read_line();
        Value v = parse_decimal(s, false);
        if (v.t != VT::Int || v.i() < 0) fail(op_off_, "malformed PUT index");
        memo_put(uint64_t(v.i()), top());
        break;
      }
      case 'h': case 'j': {  // BINGET, LONG_BINGET
        // Runs of these (the frames of a stack) are most of a snapshot: take
        // a whole run here rather than one opcode per dispatch.
        // The run stops at the next check too (it may push millions).
        // After the first, the run's part that needs no check per opcode
        // (bytes in view, room on the stack, the index a dense memo slot)
        // goes through binget_run(); from where that stops, this loop again.
        for (;;) {
          push(memo_get(op == 'h' ? read_le<1>() : read_le<4>()));
          if (pos_ >= run_end_) break;
          uint8_t nx = p_[pos_];
          if (nx != 'h' && nx != 'j') break;
          if (stack_.size() == stack_.capacity()) break;
          op_off_ = base_ + pos_++;
          if (binget_run()) break;
          op = p_[pos_];
          op_off_ = base_ + pos_++;
        }
        break;
      }
      case 'g': {
        std::string_view s = read_line();
        Value v = parse_decimal(s, false);
        if (v.t != VT::Int || v.i() < 0) fail(op_off_, "malformed GET index");
        push(memo_get(uint64_t(v.i())));
        break;
      }
      case '0': pop(); break;  // POP
      case '1': stack_.resize(pop_mark()); break;  // POP_MARK
      case '2': push(top()); break;               // DUP
      default: {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", op);
        if (const char* nm = opcode_name(op))
          fail(op_off_, std::string("refused pickle opcode ") + nm + " (" + hex +
                            "): it imports or calls objects, which a memory snapshot never needs");
        fail(op_off_, std::string("unknown pickle opcode ") + hex + " (not a PyTorch memory snapshot?)");
      }
    }
  }
}

}  // namespace
}  // namespace detail

namespace detail {
namespace {
// `source`: the VM's input (a file descriptor and size, or bytes and size).
template <class... Source>
uint64_t read_torch_pickle(bool fast, bool ahead, Trace& out, const ProgressFn& progress, const MemoryBudget& budget,
                           Source... source) {
  PickleDoc doc;
  doc.budget = budget;
  Converter conv(doc, out);
  VM vm(source..., doc, conv, progress);
  if (!fast) vm.general_only();
  if (ahead) vm.read_ahead();
  vm.reserve_for_input();
  doc.root = vm.run();
  out.source.format = "torch-pickle";
  out.source.format_detail = "pickle protocol " + std::to_string(doc.protocol);
  build_trace_from_doc(doc, conv, out);
  return vm.fast_entries();
}
}  // namespace

void read_torch_pickle_fd(int fd, uint64_t size, Trace& out, const ProgressFn& progress, const MemoryBudget& budget,
                          bool read_ahead) {
  read_torch_pickle(true, read_ahead, out, progress, budget, fd, size);
}

void read_torch_pickle_bounded(const uint8_t* data, size_t size, Trace& out, const ProgressFn& progress,
                               const MemoryBudget& budget) {
  read_torch_pickle(true, false, out, progress, budget, data, size);
}

uint64_t read_torch_pickle_path(const uint8_t* data, size_t size, Trace& out, bool fast) {
  return read_torch_pickle(fast, false, out, ProgressFn(), MemoryBudget(), data, size);
}
}  // namespace detail

void read_torch_pickle(const uint8_t* data, size_t size, Trace& out, const ProgressFn& progress) {
  detail::read_torch_pickle_bounded(data, size, out, progress, detail::MemoryBudget());
}

}  // namespace snapdiff
