// Writes a Trace as the pickle torch.cuda.memory._dump_snapshot() writes:
// the same dict (keys, value types, key order of PyTorch 2.11's Python path)
// in pickle protocol 4, framed like Python's pickler, with only the opcodes
// that build plain data. Strings, frame dicts and frame lists go through the
// memo (BINPUT/BINGET): each distinct one is written once and referenced
// after that, so a stack shared by a thousand events costs a thousand 2-5
// byte references, and the reader shares the objects as Python's does.
// The output loads with Python's stdlib pickle (no torch needed), with
// torch.cuda._memory_viz and MemoryViz.js, and with snapdiff's own reader.
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "input/file_source.hpp"
#include "snapdiff/error.hpp"
#include "snapdiff/input/input.hpp"
#include "util/output_file.hpp"

namespace snapdiff {

namespace {

// Pickle opcodes used (and no others).
constexpr char kProto = char(0x80), kFrame = char(0x95), kStop = '.', kMark = '(', kEmptyDict = '}',
               kEmptyList = ']', kSetItem = 's', kSetItems = 'u', kAppend = 'a', kAppends = 'e',
               kTuple2 = char(0x86), kBinPut = 'q', kLongBinPut = 'r', kBinGet = 'h', kLongBinGet = 'j',
               kBinInt1 = 'K', kBinInt2 = 'M', kBinInt = 'J', kLong1 = char(0x8a), kShortBinUnicode = char(0x8c),
               kBinUnicode = 'X', kBinUnicode8 = char(0x8d), kBinFloat = 'G', kNewTrue = char(0x88),
               kNewFalse = char(0x89), kNone = 'N';

constexpr uint64_t kNoMemo = UINT64_MAX;
// Python's pickler: frames of about 64 KiB, items in batches of 1000.
constexpr size_t kFrameTarget = 64 * 1024;
constexpr size_t kFrameHeader = 9;
constexpr size_t kFrameMin = 4;
constexpr size_t kBatch = 1000;

// Fixed strings (keys and enum-like values); each owns the memo index equal
// to its enum value.
enum Lit : uint8_t {
  L_segments, L_device_traces, L_allocator_settings, L_external_annotations,
  L_device, L_address, L_total_size, L_allocated_size, L_active_size, L_requested_size, L_stream,
  L_segment_type, L_segment_pool_id, L_is_expandable, L_blocks, L_frames, L_size, L_state,
  L_action, L_addr, L_device_free, L_time_us, L_compile_context, L_user_metadata,
  L_name, L_filename, L_line, L_stage, L_START, L_END, L_NA, L_empty, L_small, L_large,
  L_active_allocated, L_active_pending_free, L_inactive,
  L_alloc, L_free_requested, L_free_completed, L_segment_alloc, L_segment_free, L_segment_map,
  L_segment_unmap, L_oom, L_snapshot, L_annotate, L_user_defined,
  kLitCount
};
constexpr const char* kLitText[kLitCount] = {
    "segments", "device_traces", "allocator_settings", "external_annotations",
    "device", "address", "total_size", "allocated_size", "active_size", "requested_size", "stream",
    "segment_type", "segment_pool_id", "is_expandable", "blocks", "frames", "size", "state",
    "action", "addr", "device_free", "time_us", "compile_context", "user_metadata",
    "name", "filename", "line", "stage", "START", "END", "N/A", "", "small", "large",
    "active_allocated", "active_pending_free", "inactive",
    "alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "segment_map",
    "segment_unmap", "oom", "snapshot", "annotate", "user_defined",
};

Lit action_lit(EventKind k) {
  switch (k) {
    case EventKind::Alloc: return L_alloc;
    case EventKind::FreeRequested: return L_free_requested;
    case EventKind::FreeCompleted: return L_free_completed;
    case EventKind::SegmentAlloc: return L_segment_alloc;
    case EventKind::SegmentFree: return L_segment_free;
    case EventKind::SegmentMap: return L_segment_map;
    case EventKind::SegmentUnmap: return L_segment_unmap;
    case EventKind::Oom: return L_oom;
    case EventKind::Snapshot: return L_snapshot;
    case EventKind::Annotate: return L_annotate;
    case EventKind::UserDefined: return L_user_defined;
    case EventKind::Other: break;
  }
  return kLitCount;
}

Lit state_lit(BlockState s) {
  switch (s) {
    case BlockState::ActiveAllocated: return L_active_allocated;
    case BlockState::ActivePendingFree: return L_active_pending_free;
    case BlockState::Inactive: return L_inactive;
  }
  return L_inactive;
}

// An allocator_settings value rebuilt from the model's text form.
struct SettingValue {
  enum Kind { Str, Int, UInt, Float, Bool, None, Roundup } kind = Str;
  std::string text;
  int64_t i = 0;
  uint64_t u = 0;
  double f = 0;
  bool b = false;
};

bool parse_int(const std::string& s, SettingValue* v) {
  if (s.empty()) return false;
  const char* p = s.c_str();
  char* end = nullptr;
  errno = 0;
  if (s[0] == '-') {
    long long x = std::strtoll(p, &end, 10);
    if (errno || *end) return false;
    v->kind = SettingValue::Int;
    v->i = x;
    return true;
  }
  if (s[0] < '0' || s[0] > '9') return false;
  unsigned long long x = std::strtoull(p, &end, 10);
  if (errno || *end) return false;
  if (x <= uint64_t(INT64_MAX)) {
    v->kind = SettingValue::Int;
    v->i = int64_t(x);
  } else {
    v->kind = SettingValue::UInt;
    v->u = x;
  }
  return true;
}

bool parse_float(const std::string& s, SettingValue* v) {
  if (s.empty() || s.find_first_of("0123456789") == std::string::npos) return false;
  char* end = nullptr;
  double x = std::strtod(s.c_str(), &end);
  if (*end) return false;
  v->kind = SettingValue::Float;
  v->f = x;
  return true;
}

// PyTorch 2.11 writes these keys with these types; others are typed from
// their text (the model keeps settings as text: snapshot_builder.cpp).
SettingValue setting_value(const std::string& key, const std::string& text) {
  SettingValue v;
  v.text = text;
  if (key == "PYTORCH_CUDA_ALLOC_CONF") return v;
  if (key == "garbage_collection_threshold" && parse_float(text, &v)) return v;
  if (text == "true" || text == "false") {
    v.kind = SettingValue::Bool;
    v.b = text == "true";
    return v;
  }
  if (text == "None") {
    v.kind = SettingValue::None;
    return v;
  }
  if (parse_int(text, &v)) return v;
  if (text.find_first_of(".eE") != std::string::npos && parse_float(text, &v)) return v;
  return v;
}

// The output: a plain growable byte buffer (realloc moves large blocks by
// remapping them, and the hot push_back stays a compare and a store).
class ByteBuf {
 public:
  ByteBuf() = default;
  ~ByteBuf() { std::free(p_); }
  ByteBuf(const ByteBuf&) = delete;
  ByteBuf& operator=(const ByteBuf&) = delete;
  void push_back(char c) {
    if (n_ == cap_) grow(1);
    p_[n_++] = c;
  }
  void append(const char* s, size_t k) {
    if (cap_ - n_ < k) grow(k);
    if (k) std::memcpy(p_ + n_, s, k);
    n_ += k;
  }
  void append(size_t k, char c) {
    if (cap_ - n_ < k) grow(k);
    std::memset(p_ + n_, c, k);
    n_ += k;
  }
  void erase(size_t at, size_t k) {
    std::memmove(p_ + at, p_ + at + k, n_ - at - k);
    n_ -= k;
  }
  void reserve(size_t k) {
    if (k > cap_) grow(k - n_);
  }
  char& operator[](size_t i) { return p_[i]; }
  size_t size() const { return n_; }
  const char* data() const { return p_; }

 private:
  [[gnu::noinline]] void grow(size_t k) {
    size_t want = n_ + k;
    size_t nc = cap_ * 2 > want ? cap_ * 2 : want;
    if (nc < 4096) nc = 4096;
    void* q = std::realloc(p_, nc);
    if (!q) throw std::bad_alloc();
    p_ = static_cast<char*>(q);
    cap_ = nc;
  }
  char* p_ = nullptr;
  size_t n_ = 0, cap_ = 0;
};

class Pickler {
 public:
  explicit Pickler(const Trace& t)
      : t_(t), str_memo_(t.strings.size(), kNoMemo), frame_memo_(t.frames.size(), kNoMemo),
        stack_memo_(t.stacks.size(), kNoMemo) {
    for (bool& d : lit_done_) d = false;
  }

  const ByteBuf& run() {
    size_t blocks = 0;
    for (const Device& d : t_.devices) blocks += d.blocks.size() + d.segments.size();
    out_.reserve((t_.event_count() + blocks) * 56 + (size_t(64) << 10));
    op(kProto);
    op(char(4));
    start_frame();
    snapshot_dict();
    op(kStop);
    end_frame();
    return out_;
  }

 private:
  // ---- bytes and framing --------------------------------------------------
  void op(char c) { out_.push_back(c); }
  void le(uint64_t v, int n) {
    char b[8];
    for (int i = 0; i < n; ++i) b[i] = char(uint8_t(v >> (8 * i)));
    out_.append(b, size_t(n));
  }
  void start_frame() {
    frame_at_ = out_.size();
    out_.append(kFrameHeader, '\0');
  }
  void close_frame() {
    size_t len = out_.size() - frame_at_ - kFrameHeader;
    if (len < kFrameMin) {
      out_.erase(frame_at_, kFrameHeader);  // Python writes no FRAME for a tiny tail
      return;
    }
    out_[frame_at_] = kFrame;
    for (size_t i = 0; i < 8; ++i) out_[frame_at_ + 1 + i] = char(uint8_t(uint64_t(len) >> (8 * i)));
  }
  // Called before each value, i.e. between opcodes, as Python's save() does.
  void maybe_commit() {
    if (out_.size() - frame_at_ - kFrameHeader >= kFrameTarget) {
      close_frame();
      start_frame();
    }
  }
  void end_frame() { close_frame(); }

  // ---- memo ---------------------------------------------------------------
  // BINPUT/LONG_BINPUT with indices chosen here: the fixed strings own
  // indices 0..kLitCount-1 (so the keys every event repeats are always a
  // 2-byte BINGET), everything else counts up from kLitCount. Returns the
  // index, or kNoMemo once the 32-bit index space is used up (the object is
  // then simply not shared).
  uint64_t put() {
    if (next_memo_ > UINT32_MAX) return kNoMemo;
    put_at(next_memo_);
    return next_memo_++;
  }
  void put_at(uint64_t idx) {
    if (idx < 256) {
      op(kBinPut);
      op(char(uint8_t(idx)));
    } else {
      op(kLongBinPut);
      le(idx, 4);
    }
  }
  void get(uint64_t idx) {
    maybe_commit();
    if (idx < 256) {
      op(kBinGet);
      op(char(uint8_t(idx)));
    } else {
      op(kLongBinGet);
      le(idx, 4);
    }
  }

  // ---- scalars ------------------------------------------------------------
  void i64(int64_t v) {
    maybe_commit();
    if (v >= 0 && v < 256) {
      op(kBinInt1);
      op(char(uint8_t(v)));
    } else if (v >= 0 && v < 65536) {
      op(kBinInt2);
      le(uint64_t(v), 2);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
      op(kBinInt);
      le(uint32_t(int32_t(v)), 4);
    } else {
      // LONG1: minimal little-endian two's complement, as Python writes it.
      uint8_t b[8];
      for (int i = 0; i < 8; ++i) b[i] = uint8_t(uint64_t(v) >> (8 * i));
      int n = 8;
      while (n > 1 && ((b[n - 1] == 0x00 && !(b[n - 2] & 0x80)) || (b[n - 1] == 0xff && (b[n - 2] & 0x80)))) --n;
      op(kLong1);
      op(char(n));
      out_.append(reinterpret_cast<const char*>(b), size_t(n));
    }
  }
  void u64(uint64_t v) {
    if (v <= uint64_t(INT64_MAX)) return i64(int64_t(v));
    maybe_commit();
    op(kLong1);  // 2^63 <= v < 2^64: 8 bytes and a zero sign byte
    op(char(9));
    le(v, 8);
    op('\0');
  }
  void f64(double d) {
    maybe_commit();
    uint64_t bits;
    std::memcpy(&bits, &d, 8);
    op(kBinFloat);
    for (int i = 7; i >= 0; --i) op(char(uint8_t(bits >> (8 * i))));
  }
  void boolean(bool b) {
    maybe_commit();
    op(b ? kNewTrue : kNewFalse);
  }
  void none() {
    maybe_commit();
    op(kNone);
  }
  void str_raw(std::string_view s) {
    maybe_commit();
    if (s.size() < 256) {
      op(kShortBinUnicode);
      op(char(uint8_t(s.size())));
    } else if (s.size() <= UINT32_MAX) {
      op(kBinUnicode);
      le(s.size(), 4);
    } else {
      op(kBinUnicode8);
      le(s.size(), 8);
    }
    out_.append(s.data(), s.size());
  }
  void str_memo(std::string_view s, uint64_t& slot) {
    if (slot != kNoMemo) return get(slot);
    str_raw(s);
    slot = put();
  }
  void lit(Lit l) {
    if (lit_done_[l]) return get(l);
    str_raw(kLitText[l]);
    put_at(l);
    lit_done_[l] = true;
  }
  void tstr(StrId id) { str_memo(t_.strings.get(id), str_memo_[id]); }
  // Strings that are not in the trace's table (settings keys and texts).
  void ostr(const std::string& s) {
    StrId id = t_.strings.find(s);
    if (id != UINT32_MAX) return tstr(id);
    str_raw(s);
    put();
  }

  // ---- containers ---------------------------------------------------------
  // Items in batches as Python writes them: one item with APPEND/SETITEM,
  // more between MARK and APPENDS/SETITEMS.
  template <class F>
  void list_items(size_t n, F&& item) {
    for (size_t b = 0; b < n; b += kBatch) {
      size_t m = n - b < kBatch ? n - b : kBatch;
      if (m > 1) op(kMark);
      for (size_t i = b; i < b + m; ++i) item(i);
      op(m > 1 ? kAppends : kAppend);
    }
  }
  void begin_dict() {
    maybe_commit();
    op(kEmptyDict);
  }
  void begin_list() {
    maybe_commit();
    op(kEmptyList);
  }

  // {'name': str, 'filename': str, 'line': int}
  void frame_dict(FrameId id) {
    if (frame_memo_[id] != kNoMemo) return get(frame_memo_[id]);
    const Frame& f = t_.frames[id];
    begin_dict();
    frame_memo_[id] = put();
    op(kMark);
    lit(L_name);
    tstr(f.name);
    lit(L_filename);
    tstr(f.file);
    lit(L_line);
    i64(f.line < 0 ? -1 : f.line);  // unknown: -1, as the C++ path writes it
    op(kSetItems);
  }

  // The frames of a stack, innermost first; one list object per stack.
  void frames_list(StackId id) {
    if (id == 0) return begin_list();  // a fresh [] (one byte)
    if (stack_memo_[id] != kNoMemo) return get(stack_memo_[id]);
    begin_list();
    stack_memo_[id] = put();
    // frame_dict() never comes back here, so the scratch vector is free to use.
    frames_scratch_.clear();
    for (StackId s = id; s != 0; s = t_.stacks.node(s).parent) frames_scratch_.push_back(t_.stacks.node(s).frame);
    list_items(frames_scratch_.size(), [&](size_t i) { frame_dict(frames_scratch_[i]); });
  }

  // ---- the snapshot -------------------------------------------------------
  void snapshot_dict() {
    begin_dict();
    op(kMark);
    lit(L_segments);
    segments();
    lit(L_device_traces);
    device_traces();
    if (t_.settings.present) {
      lit(L_allocator_settings);
      settings();
    }
    lit(L_external_annotations);
    annotations();
    op(kSetItems);
  }

  void segments() {
    size_t n = 0;
    for (const Device& d : t_.devices) n += d.segments.size();
    std::vector<std::pair<const Device*, const Segment*>> all;
    all.reserve(n);
    for (const Device& d : t_.devices)
      for (const Segment& s : d.segments) all.emplace_back(&d, &s);
    begin_list();
    list_items(all.size(), [&](size_t i) { segment(*all[i].first, *all[i].second); });
  }

  void segment(const Device& d, const Segment& s) {
    begin_dict();
    op(kMark);
    lit(L_device);
    i64(d.index);
    lit(L_address);
    u64(s.addr);
    lit(L_total_size);
    u64(s.total_size);
    lit(L_allocated_size);
    u64(s.allocated_size);
    lit(L_active_size);
    u64(s.active_size);
    lit(L_requested_size);
    u64(s.requested_size);
    lit(L_stream);
    i64(int64_t(s.stream));
    lit(L_segment_type);
    lit(s.small_pool ? L_small : L_large);
    lit(L_segment_pool_id);
    i64(s.pool_id[0]);
    i64(s.pool_id[1]);
    op(kTuple2);
    lit(L_is_expandable);
    boolean(s.expandable);
    lit(L_blocks);
    begin_list();
    size_t first = s.first_block;
    size_t count = s.block_count;
    if (first > d.blocks.size()) count = 0;
    else if (count > d.blocks.size() - first) count = d.blocks.size() - first;
    list_items(count, [&](size_t i) { block(d.blocks[first + i]); });
    lit(L_frames);
    frames_list(s.stack);
    op(kSetItems);
  }

  void block(const Block& b) {
    begin_dict();
    op(kMark);
    lit(L_address);
    u64(b.addr);
    lit(L_size);
    u64(b.size);
    lit(L_requested_size);
    u64(b.requested_size);
    lit(L_state);
    lit(state_lit(b.state));
    lit(L_frames);
    frames_list(b.stack);
    op(kSetItems);
  }

  // One list per device index 0..max over the devices that had a trace;
  // a device without one in that range gets an empty list (as PyTorch
  // writes it for a device it has no entries for).
  void device_traces() {
    int max_index = -1;
    for (const Device& d : t_.devices)
      if (d.has_trace && d.index > max_index) max_index = d.index;
    begin_list();
    list_items(size_t(max_index + 1), [&](size_t i) {
      const Device* d = t_.find_device(int(i));
      begin_list();
      if (!d) return;
      list_items(d->events.size(), [&](size_t j) { event(d->events[j]); });
    });
  }

  // Keys in the order of PyTorch 2.11's Python path: action,
  // addr|device_free, size, stream, time_us, compile_context, user_metadata,
  // frames.
  void event(const Event& e) {
    begin_dict();
    op(kMark);
    lit(L_action);
    Lit a = action_lit(e.kind);
    if (a != kLitCount) lit(a);
    else tstr(e.action);
    lit(e.kind == EventKind::Oom ? L_device_free : L_addr);
    u64(e.addr);
    lit(L_size);
    u64(e.size);
    lit(L_stream);
    i64(int64_t(e.stream));
    if (e.time_us != kNoTime) {
      lit(L_time_us);
      i64(e.time_us);
    }
    lit(L_compile_context);
    if (e.compile_context == 0) lit(L_NA);
    else tstr(e.compile_context);
    lit(L_user_metadata);
    if (e.user_metadata == 0) lit(L_empty);
    else tstr(e.user_metadata);
    lit(L_frames);
    frames_list(e.stack);
    op(kSetItems);
  }

  void settings() {
    const AllocatorSettings& s = t_.settings;
    // The model keeps every key as text; the parsed fields (what the replay
    // uses) are authoritative for their keys and are added when missing.
    std::vector<std::pair<std::string, SettingValue>> items;
    bool have_exp = false, have_split = false, have_round = false;
    for (const auto& kv : s.raw) {
      SettingValue v = setting_value(kv.first, kv.second);
      if (kv.first == "expandable_segments") {
        have_exp = true;
        v.kind = SettingValue::Bool;
        v.b = s.expandable_segments;
      } else if (kv.first == "max_split_size") {
        have_split = true;
        v.kind = SettingValue::Int;
        v.i = s.max_split_size;
      } else if (kv.first == "roundup_power2_divisions") {
        have_round = true;
        v.kind = SettingValue::Roundup;
      }
      items.emplace_back(kv.first, std::move(v));
    }
    if (!have_split) {
      SettingValue v;
      v.kind = SettingValue::Int;
      v.i = s.max_split_size;
      items.emplace_back("max_split_size", v);
    }
    if (!have_exp) {
      SettingValue v;
      v.kind = SettingValue::Bool;
      v.b = s.expandable_segments;
      items.emplace_back("expandable_segments", v);
    }
    if (!have_round && !s.roundup_power2_divisions.empty()) {
      SettingValue v;
      v.kind = SettingValue::Roundup;
      items.emplace_back("roundup_power2_divisions", v);
    }
    begin_dict();
    dict_items(items.size(), [&](size_t i) {
      ostr(items[i].first);
      setting(items[i].second);
    });
  }

  template <class F>
  void dict_items(size_t n, F&& item) {
    for (size_t b = 0; b < n; b += kBatch) {
      size_t m = n - b < kBatch ? n - b : kBatch;
      if (m > 1) op(kMark);
      for (size_t i = b; i < b + m; ++i) item(i);
      op(m > 1 ? kSetItems : kSetItem);
    }
  }

  void setting(const SettingValue& v) {
    switch (v.kind) {
      case SettingValue::Str: return ostr(v.text);
      case SettingValue::Int: return i64(v.i);
      case SettingValue::UInt: return u64(v.u);
      case SettingValue::Float: return f64(v.f);
      case SettingValue::Bool: return boolean(v.b);
      case SettingValue::None: return none();
      case SettingValue::Roundup: return roundup(v.text);
    }
  }

  // {'1': n, '2': n, '4': n, ..., '32768': n}: keys are the power-of-two MiB
  // buckets as strings.
  void roundup(const std::string& text) {
    std::vector<std::pair<uint64_t, uint64_t>> kv;
    const auto& div = t_.settings.roundup_power2_divisions;
    if (!div.empty()) {
      for (size_t i = 0; i < div.size() && i < 64; ++i) kv.emplace_back(uint64_t(1) << i, div[i]);
    } else {
      // Only the text is known: "0" (all zero) or "1:4,2:8,...".
      size_t p = 0;
      while (p < text.size()) {
        size_t e = text.find(',', p);
        if (e == std::string::npos) e = text.size();
        std::string part = text.substr(p, e - p);
        size_t c = part.find(':');
        if (c != std::string::npos)
          kv.emplace_back(std::strtoull(part.substr(0, c).c_str(), nullptr, 10),
                          std::strtoull(part.substr(c + 1).c_str(), nullptr, 10));
        p = e + 1;
      }
    }
    begin_dict();
    dict_items(kv.size(), [&](size_t i) {
      ostr(std::to_string(kv[i].first));
      u64(kv[i].second);
    });
  }

  // {'stage': 'START'|'END', 'name': str, 'device': int, 'time_us': int}
  void annotations() {
    begin_list();
    list_items(t_.annotations.size(), [&](size_t i) {
      const Annotation& a = t_.annotations[i];
      begin_dict();
      op(kMark);
      lit(L_stage);
      lit(a.start ? L_START : L_END);
      lit(L_name);
      tstr(a.name);
      lit(L_device);
      i64(a.device);
      if (a.time_us != kNoTime) {
        lit(L_time_us);
        i64(a.time_us);
      }
      op(kSetItems);
    });
  }

  const Trace& t_;
  ByteBuf out_;
  size_t frame_at_ = 0;
  uint64_t next_memo_ = kLitCount;
  bool lit_done_[kLitCount];
  std::vector<uint64_t> str_memo_;
  std::vector<uint64_t> frame_memo_;
  std::vector<uint64_t> stack_memo_;
  std::vector<FrameId> frames_scratch_;
};

// PyTorch's format lists every stack's frames in full (one list per distinct
// stack, its frames shared through the memo): a trace whose distinct stacks
// are deep (100,000 stacks of a chain 100,000 deep) would take hundreds of
// gigabytes. Refused before writing beyond this many frame references.
constexpr uint64_t kMaxPickleFrames = 100'000'000;

void check_pickle_size(const Trace& t, const std::string& path) {
  std::vector<uint32_t> depth(t.stacks.size(), 0);
  for (size_t i = 1; i < depth.size(); ++i) depth[i] = depth[t.stacks.node(StackId(i)).parent] + 1;  // parents first
  std::vector<char> seen(depth.size(), 0);
  uint64_t frames = 0;
  auto add = [&](StackId s) {
    if (!seen[s]) seen[s] = 1, frames += depth[s];
  };
  for (const Device& d : t.devices) {
    for (const Event& e : d.events) add(e.stack);
    for (const Block& b : d.blocks) add(b.stack);
    for (const Segment& sg : d.segments) add(sg.stack);
  }
  if (frames > kMaxPickleFrames)
    throw OutputError(path, "cannot write " + path + ": a PyTorch pickle lists every stack's frames, " +
                                std::to_string(frames) + " here (at most " + std::to_string(kMaxPickleFrames) +
                                "); convert to .snap, which shares them");
}

}  // namespace

std::string write_torch_pickle(const Trace& trace) {
  check_pickle_size(trace, "<pickle>");
  Pickler p(trace);
  const ByteBuf& b = p.run();
  return std::string(b.data(), b.size());
}

void write_torch_pickle_file(const Trace& trace, const std::string& path, bool gzip) {
  check_pickle_size(trace, path);
  auto pickler = std::make_unique<Pickler>(trace);
  const ByteBuf& bytes = pickler->run();
  std::vector<uint8_t> z;
  std::string_view data(bytes.data(), bytes.size());
  if (gzip) {
    z = detail::gzip_compress(data);
    pickler.reset();  // the uncompressed bytes are not needed any more
    data = std::string_view(reinterpret_cast<const char*>(z.data()), z.size());
  }
  write_output_file(path, data);
}

}  // namespace snapdiff
