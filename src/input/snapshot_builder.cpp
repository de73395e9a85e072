// Walks the document the unpickler built (everything but the streamed trace
// entries) and fills the event model: segments and blocks, device traces,
// allocator settings, annotations. Accepts the legacy shapes: a bare list of
// segments, and blocks with `history` (PyTorch <= 2.0).
#include <algorithm>
#include <string>

#include "input/pickle_doc.hpp"
#include "snapdiff/error.hpp"
#include "util/quote_value.hpp"

namespace snapdiff::detail {

const char* vt_name(VT t) {
  switch (t) {
    case VT::None: return "None";
    case VT::Bool: return "bool";
    case VT::Int: case VT::UInt64: case VT::BigInt: return "int";
    case VT::Float: return "float";
    case VT::Str: return "str";
    case VT::Bytes: return "bytes";
    case VT::List: return "list";
    case VT::Tuple: return "tuple";
    case VT::Dict: return "dict";
  }
  return "?";
}

Converter::Converter(PickleDoc& doc, Trace& trace) : doc_(doc), trace_(trace) {
  StringTable& s = trace.strings;
  k_action = s.intern("action");
  k_addr = s.intern("addr");
  k_size = s.intern("size");
  k_stream = s.intern("stream");
  k_time_us = s.intern("time_us");
  k_frames = s.intern("frames");
  k_compile_context = s.intern("compile_context");
  k_user_metadata = s.intern("user_metadata");
  k_device_free = s.intern("device_free");
  k_name = s.intern("name");
  k_filename = s.intern("filename");
  k_line = s.intern("line");
  s_na = s.intern("N/A");
  k_real_size = s.intern("real_size");
  k_history = s.intern("history");
  const std::pair<StrId, EntryKey> keys[] = {
      {k_action, EntryKey::Action},   {k_addr, EntryKey::Addr},
      {k_device_free, EntryKey::Addr}, {k_size, EntryKey::Size},
      {k_stream, EntryKey::Stream},   {k_time_us, EntryKey::TimeUs},
      {k_frames, EntryKey::Frames},   {k_compile_context, EntryKey::CompileContext},
      {k_user_metadata, EntryKey::UserMetadata}};
  for (const auto& [id, key] : keys) {
    if (entry_key_.size() <= id) entry_key_.resize(id + 1, EntryKey::None);
    entry_key_[id] = key;
  }
}

const Value* Converter::get(const Container& d, StrId k) const {
  const Value* it = doc_.dict_pool.data() + d.off;
  for (uint32_t i = 0; i < d.size; ++i)
    if (it[2 * i].t == VT::Str && it[2 * i].v == k) return &it[2 * i + 1];
  return nullptr;
}

namespace {
constexpr const char* kMaxDeviceText = "2^50 bytes";
// Out of line: apply_entry_items runs once per trace entry.
[[noreturn, gnu::cold, gnu::noinline]] void size_error(uint64_t src_off, uint64_t size) {
  throw InputError(src_off, "field 'size' is negative or implausibly large (" + std::to_string(int64_t(size)) +
                                "): more than any device holds (" + kMaxDeviceText + ")");
}
[[noreturn]] void type_error(uint64_t src_off, std::string_view key, const Value& v, const char* want) {
  throw InputError(src_off, "field " + quote_value(key) + " is a " + vt_name(v.t) + ", expected " + want);
}
}  // namespace

bool Converter::get_u64(const Container& d, StrId k, uint64_t* out) const {
  const Value* v = get(d, k);
  if (!v) return false;
  if (v->t == VT::Int || v->t == VT::UInt64) {
    *out = v->v;
    return true;
  }
  if (v->t == VT::Bool) {
    *out = v->v;
    return true;
  }
  if (v->t == VT::None) return false;
  type_error(d.src_off(), trace_.strings.get(k), *v, "int");
}

bool Converter::get_i64(const Container& d, StrId k, int64_t* out) const {
  const Value* v = get(d, k);
  if (!v) return false;
  if (v->t == VT::Int || v->t == VT::Bool) {
    *out = v->i();
    return true;
  }
  if (v->t == VT::None) return false;
  if (v->t == VT::UInt64 || v->t == VT::BigInt)
    throw InputError(d.src_off(), "field " + quote_value(trace_.strings.get(k)) + " is out of range");
  type_error(d.src_off(), trace_.strings.get(k), *v, "int");
}

bool Converter::has_action(const Value* kv, size_t pairs) const {
  for (size_t i = 0; i < pairs; ++i)
    if (kv[2 * i].t == VT::Str && kv[2 * i].v == k_action && kv[2 * i + 1].t == VT::Str) return true;
  return false;
}

FrameId Converter::frame_of(const Value& fv) {
  if (fv.t != VT::Dict) throw InputError(uint64_t(0), std::string("stack frame is a ") + vt_name(fv.t) + ", expected dict");
  Container& d = doc_.conts[fv.v];
  if (d.has(Container::kFrameCached)) return d.cached;
  Frame f;
  if (const Value* v = get(d, k_name); v && v->t == VT::Str) f.name = StrId(v->v);
  if (const Value* v = get(d, k_filename); v && v->t == VT::Str) f.file = StrId(v->v);
  if (const Value* v = get(d, k_line)) {
    if (v->t == VT::Int && v->i() >= 0) f.line = v->i();
  }
  FrameId id = trace_.intern_frame(f);
  // Cached until the dict is modified (VM::dict_set clears the flag).
  d.cached = id;
  d.set(Container::kFrameCached);
  return id;
}

StackId Converter::stack_of(const Value& lv) {
  if (lv.t == VT::None) return 0;
  if (lv.x == kDirectStack && lv.t == VT::List) return StackId(lv.v);
  if (lv.t != VT::List && lv.t != VT::Tuple)
    throw InputError(uint64_t(0), std::string("'frames' is a ") + vt_name(lv.t) + ", expected list");
  Container& l = doc_.conts[lv.v];
  // Tuples never change, and a list is frozen below: the id stays valid.
  if (l.has(Container::kStackCached)) return l.cached;
  // Interning a long stack builds up to a node per frame at once.
  if (l.size > 4096) doc_.check_memory(trace_, l.src_off(), uint64_t(l.size) * 64);
  const uint32_t n = l.size;
  if (scratch_.size() < n) scratch_.resize(n);
  const Value* items = doc_.list_pool.data() + l.off;
  FrameId* out = scratch_.data();
  const Container* conts = doc_.conts.data();
  // Frames seen before (nearly all of them) in a loop without calls; from
  // the first new one on, frame_of() makes each.
  uint32_t i = 0;
  for (; i < n; ++i) {
    const Value& it = items[i];
    if (it.t != VT::Dict || !conts[it.v].has(Container::kFrameCached)) break;
    out[i] = conts[it.v].cached;
  }
  for (; i < n; ++i) {
    const Value& it = items[i];
    if (it.t != VT::Dict)
      throw InputError(l.src_off(), std::string("stack frame is a ") + vt_name(it.t) + ", expected dict");
    const Container& d = conts[it.v];
    out[i] = d.has(Container::kFrameCached) ? d.cached : frame_of(it);
  }
  StackId node = trace_.stacks.intern(scratch_.data(), n);
  l.cached = node;
  l.set(Container::kStackCached);
  // The list is now only needed as a key: freeze it, and release its items
  // when they sit at the end of the pool (the usual case while parsing).
  if (l.kind() == VT::List) {
    l.set(Container::kFrozen);
    if (l.cap && size_t(l.off) + l.cap == doc_.list_pool.size()) {
      doc_.list_pool.resize(l.off);
      l.off = 0;
      l.size = 0;
      l.cap = 0;
    }
  }
  return node;
}

void Converter::apply_entry_items(const Value* it, size_t pairs, uint64_t src_off, Event& ev) {
  for (size_t i = 0; i < pairs; ++i) {
    const Value& k = it[2 * i];
    const Value& v = it[2 * i + 1];
    if (k.t != VT::Str) continue;
    StrId key = StrId(k.v);
    auto as_u64 = [&](uint64_t* out) __attribute__((always_inline)) {
      if (v.t == VT::Int || v.t == VT::UInt64) *out = v.v;
      else if (v.t == VT::BigInt)
        throw InputError(src_off, "field " + quote_value(trace_.strings.get(key)) + " does not fit in 64 bits");
      else if (v.t != VT::None) type_error(src_off, trace_.strings.get(key), v, "int");
    };
    // The well-known keys by a table indexed by StrId (they are interned
    // first, so their ids are small); any other key is ignored.
    switch (key < entry_key_.size() ? entry_key_[key] : EntryKey::None) {
      case EntryKey::None: break;
      case EntryKey::Action: {
        if (v.t != VT::Str) type_error(src_off, "action", v, "str");
        StrId aid = StrId(v.v);
        if (kind_cache_.size() <= aid) kind_cache_.resize(trace_.strings.size() + 16, -2);
        if (kind_cache_[aid] == -2) {
          EventKind kk;
          kind_cache_[aid] = parse_event_kind(trace_.strings.get(aid), &kk) ? int8_t(kk) : int8_t(-1);
        }
        ev.kind = kind_cache_[aid] < 0 ? EventKind::Other : EventKind(kind_cache_[aid]);
        ev.action = aid;
        break;
      }
      case EntryKey::Addr: as_u64(&ev.addr); break;
      case EntryKey::Size:
        as_u64(&ev.size);
        // Sizes are summed: beyond what any device holds is corrupt (and could
        // wrap a 64-bit sum).
        if (ev.size > kMaxDeviceBytes) [[unlikely]]
          size_error(src_off, ev.size);
        break;
      case EntryKey::Stream: as_u64(&ev.stream); break;
      case EntryKey::TimeUs:
        if (v.t == VT::Int) ev.time_us = v.i();
        else if (v.t != VT::None) type_error(src_off, "time_us", v, "int");
        break;
      case EntryKey::Frames: ev.stack = stack_of(v); break;
      case EntryKey::CompileContext:
        if (v.t == VT::Str && v.v != s_na) ev.compile_context = StrId(v.v);
        break;
      case EntryKey::UserMetadata:
        if (v.t == VT::Str) ev.user_metadata = StrId(v.v);
        break;
    }
  }
}

namespace {

class Builder {
 public:
  Builder(PickleDoc& doc, Converter& conv, Trace& out) : doc_(doc), conv_(conv), out_(out) {}

  void build() {
    const Value& root = doc_.root;
    if (root.t == VT::List) {
      out_.source.shape = "segment-list";
      segments(root);
    } else if (root.t == VT::Dict) {
      out_.source.shape = "dict";
      const Container& d = doc_.conts[root.v];
      const Value* segs = conv_.get(d, s("segments"));
      const Value* traces = conv_.get(d, s("device_traces"));
      if (!traces) traces = conv_.get(d, s("traces"));
      if (!segs && !traces)
        throw InputError(d.src_off(), "not a PyTorch memory snapshot: the top-level dict has neither 'segments' nor 'device_traces'");
      if (segs) segments(*segs);
      if (traces) device_traces(*traces);
      if (const Value* st = conv_.get(d, s("allocator_settings")); st && st->t == VT::Dict) settings(*st);
      if (const Value* an = conv_.get(d, s("external_annotations")); an && an->t == VT::List) annotations(*an);
    } else {
      throw InputError(uint64_t(0), std::string("not a PyTorch memory snapshot: the pickle holds a ") + vt_name(root.t) +
                                        ", expected a dict or a list of segments");
    }
    std::sort(out_.devices.begin(), out_.devices.end(), [](const Device& a, const Device& b) { return a.index < b.index; });
    if (legacy_history_) out_.source.shape += "+legacy-history";
  }

 private:
  StrId s(std::string_view k) { return out_.strings.intern(k); }
  const Container& list(const Value& v, const char* what, uint64_t off) {
    if (v.t != VT::List && v.t != VT::Tuple)
      throw InputError(off, std::string("'") + what + "' is a " + vt_name(v.t) + ", expected list");
    return doc_.conts[v.v];
  }
  const Container& dict(const Value& v, const char* what, uint64_t off) {
    if (v.t != VT::Dict) throw InputError(off, std::string(what) + " is a " + vt_name(v.t) + ", expected dict");
    return doc_.conts[v.v];
  }
  uint64_t req_u64(const Container& d, const char* key) {
    uint64_t x = 0;
    if (!conv_.get_u64(d, s(key), &x)) throw InputError(d.src_off(), std::string("missing field '") + key + "'");
    return x;
  }
  uint64_t opt_u64(const Container& d, const char* key, uint64_t dflt = 0) {
    uint64_t x = dflt;
    conv_.get_u64(d, s(key), &x);
    return x;
  }

  void segments(const Value& v) {
    const Container& l = list(v, "segments", 0);
    reserve_segments(l);
    for (uint32_t i = 0; i < l.size; ++i) {
      const Value item = doc_.items(l)[i];
      segment(dict(item, "segment", l.src_off()));
    }
  }

  // The segments and blocks the list names, counted per device before any
  // is built: a memo can list one segment, or one block, any number of
  // times for two bytes each. Refused when they pass the memory bound;
  // otherwise their arrays are made at their final size (no doubling).
  void reserve_segments(const Container& l) {
    struct Count {
      int device;
      uint64_t segments, blocks;
    };
    std::vector<Count> counts;
    std::unordered_map<int, size_t> index;
    uint64_t total = 0;
    const StrId k_device = s("device"), k_blocks = s("blocks");
    for (uint32_t i = 0; i < l.size; ++i) {
      const Value item = doc_.items(l)[i];
      if (item.t != VT::Dict) continue;  // refused below, where it is read
      const Container& d = doc_.conts[item.v];
      int64_t dev = 0;
      if (const Value* x = conv_.get(d, k_device); x && x->t == VT::Int) dev = x->i();
      uint64_t blocks = 0;
      if (const Value* b = conv_.get(d, k_blocks); b && (b->t == VT::List || b->t == VT::Tuple))
        blocks = doc_.conts[b->v].size;
      // Indexed by device: a crafted dump can give every segment its own.
      auto [pos, fresh] = index.try_emplace(int(dev), counts.size());
      if (fresh) counts.push_back({int(dev), 0, 0});
      const size_t k = pos->second;
      ++counts[k].segments;
      counts[k].blocks += blocks;
      total += sizeof(Segment) + blocks * sizeof(Block);
      if (doc_.budget.over(total)) doc_.check_memory(out_, d.src_off(), total);
    }
    doc_.check_memory(out_, l.src_off(), total);
    for (const Count& c : counts) {
      if (c.device < -1 || c.device > 1 << 20) continue;  // refused in segment()
      Device& dv = out_.device(c.device);
      dv.segments.reserve(dv.segments.size() + c.segments);
      dv.blocks.reserve(dv.blocks.size() + c.blocks);
    }
  }

  // Sizes at dump time, summed per device where they are read.
  struct DumpSums {
    int device;
    uint64_t total = 0, allocated = 0, active = 0, requested = 0, blocks = 0, block_requested = 0;
  };
  DumpSums& sums_of(int device) {
    // Indexed: a crafted dump can put every segment on its own device.
    auto [it, fresh] = sums_index_.try_emplace(device, sums_.size());
    if (fresh) sums_.push_back({device});
    return sums_[it->second];
  }
  static void add_checked(uint64_t& sum, uint64_t v, uint64_t off, int device, const char* what) {
    sum += v;  // both at most 2^50: no wrap
    if (sum > kMaxDeviceBytes)
      throw InputError(off, std::string("the ") + what + " of device " + std::to_string(device) +
                                " sum to more than any device holds (" + kMaxDeviceText + "): the snapshot is corrupt");
  }
  static void size_checked(uint64_t v, uint64_t off, const char* what) {
    if (v > kMaxDeviceBytes)
      throw InputError(off, std::string(what) + " is negative or implausibly large (" + std::to_string(int64_t(v)) +
                                "): more than any device holds (" + kMaxDeviceText + ")");
  }

  void segment(const Container& d) {
    Segment seg;
    int64_t dev = 0;
    conv_.get_i64(d, s("device"), &dev);
    if (dev < -1 || dev > 1 << 20) throw InputError(d.src_off(), "segment device index out of range");
    seg.addr = opt_u64(d, "address");
    seg.total_size = req_u64(d, "total_size");
    seg.allocated_size = opt_u64(d, "allocated_size");
    seg.active_size = opt_u64(d, "active_size");
    seg.requested_size = opt_u64(d, "requested_size");
    seg.stream = opt_u64(d, "stream");
    if (const Value* t = conv_.get(d, s("segment_type")); t && t->t == VT::Str)
      seg.small_pool = out_.strings.get(StrId(t->v)) == "small";
    if (const Value* e = conv_.get(d, s("is_expandable")); e && e->t == VT::Bool) seg.expandable = e->v != 0;
    if (const Value* p = conv_.get(d, s("segment_pool_id")); p && (p->t == VT::Tuple || p->t == VT::List)) {
      const Container& pc = doc_.conts[p->v];
      for (uint32_t j = 0; j < pc.size && j < 2; ++j)
        if (doc_.items(pc)[j].t == VT::Int) seg.pool_id[j] = doc_.items(pc)[j].i();
    }
    if (const Value* f = conv_.get(d, conv_.k_frames)) seg.stack = conv_.stack_of(*f);
    Device& devr = out_.device(int(dev));
    seg.first_block = uint32_t(devr.blocks.size());
    if (const Value* bl = conv_.get(d, s("blocks"))) {
      const Container& bc = list(*bl, "blocks", d.src_off());
      uint64_t cursor = seg.addr;
      for (uint32_t j = 0; j < bc.size; ++j) {
        const Container& bd = dict(doc_.items(bc)[j], "block", bc.src_off());
        Block b;
        b.size = req_u64(bd, "size");
        b.addr = opt_u64(bd, "address", cursor);
        cursor = b.addr + b.size;
        b.requested_size = opt_u64(bd, "requested_size", 0);
        bool has_req = conv_.get(bd, s("requested_size")) != nullptr;
        b.state = BlockState::Inactive;
        if (const Value* st = conv_.get(bd, s("state")); st && st->t == VT::Str) {
          std::string_view sv = out_.strings.get(StrId(st->v));
          if (sv == "active_allocated") b.state = BlockState::ActiveAllocated;
          else if (sv == "active_pending_free" || sv == "active_awaiting_free") b.state = BlockState::ActivePendingFree;
        }
        if (const Value* f = conv_.get(bd, conv_.k_frames)) b.stack = conv_.stack_of(*f);
        if (const Value* h = conv_.get(bd, conv_.k_history); h && (h->t == VT::List)) {
          // PyTorch <= 2.0: per-block history of (addr, real_size, frames).
          legacy_history_ = true;
          const Container& hc = doc_.conts[h->v];
          if (hc.size > 0 && doc_.items(hc)[0].t == VT::Dict) {
            const Container& h0 = doc_.conts[doc_.items(hc)[0].v];
            if (!has_req) b.requested_size = opt_u64(h0, "real_size", b.size);
            if (b.stack == 0)
              if (const Value* f = conv_.get(h0, conv_.k_frames)) b.stack = conv_.stack_of(*f);
          }
        }
        if (!has_req && b.requested_size == 0 && b.state != BlockState::Inactive) b.requested_size = b.size;
        devr.blocks.push_back(b);
      }
    }
    seg.block_count = uint32_t(devr.blocks.size() - seg.first_block);
    // Sizes are summed (dump totals, the replay's counters): each, and each
    // device's sums, at most what a device holds, so that no sum wraps.
    size_checked(seg.total_size, d.src_off(), "segment 'total_size'");
    size_checked(seg.allocated_size, d.src_off(), "segment 'allocated_size'");
    size_checked(seg.active_size, d.src_off(), "segment 'active_size'");
    size_checked(seg.requested_size, d.src_off(), "segment 'requested_size'");
    DumpSums& sum = sums_of(int(dev));
    add_checked(sum.total, seg.total_size, d.src_off(), int(dev), "segments' total_size");
    add_checked(sum.allocated, seg.allocated_size, d.src_off(), int(dev), "segments' allocated_size");
    add_checked(sum.active, seg.active_size, d.src_off(), int(dev), "segments' active_size");
    add_checked(sum.requested, seg.requested_size, d.src_off(), int(dev), "segments' requested_size");
    for (uint32_t j = seg.first_block; j < devr.blocks.size(); ++j) {
      size_checked(devr.blocks[j].size, d.src_off(), "block 'size'");
      size_checked(devr.blocks[j].requested_size, d.src_off(), "block 'requested_size'");
      add_checked(sum.blocks, devr.blocks[j].size, d.src_off(), int(dev), "blocks' sizes");
      add_checked(sum.block_requested, devr.blocks[j].requested_size, d.src_off(), int(dev), "blocks' requested sizes");
    }
    devr.segments.push_back(seg);
  }

  void device_traces(const Value& v) {
    const Container& l = list(v, "device_traces", 0);
    uint64_t held = doc_.budget.bounded() ? doc_.doc_bytes() + out_.memory_bytes() : 0;
    for (uint32_t i = 0; i < l.size; ++i) {
      const Value item = doc_.items(l)[i];
      const Container& tl = list(item, "device_traces[i]", l.src_off());
      Device& dev = out_.device(int(i));
      dev.has_trace = true;
      const Value* items = doc_.items(tl);
      // Fast path: a single list holding every entry in creation order takes
      // the event array as it is.
      bool whole = tl.size == doc_.events.size() && tl.size > 0;
      for (uint32_t j = 0; j < tl.size && whole; ++j)
        whole = items[j].t == VT::Dict && doc_.conts[items[j].v].event_backed() && doc_.conts[items[j].v].off == j;
      if (whole) {
        dev.events = std::move(doc_.events);
        doc_.events.clear();
        continue;
      }
      // A memo can list one entry any number of times: counted before the
      // copies are made (a running sum: summing the whole model again per
      // device made a million empty traces quadratic).
      held += sizeof(Device) + uint64_t(tl.size) * sizeof(Event);
      if (doc_.budget.over(held)) doc_.check_memory(out_, tl.src_off(), uint64_t(tl.size) * sizeof(Event));
      dev.events.reserve(tl.size);
      for (uint32_t j = 0; j < tl.size; ++j) {
        const Container& ed = dict(items[j], "trace entry", tl.src_off());
        if (!ed.event_backed() || ed.off >= doc_.events.size())
          throw InputError(ed.src_off(), "trace entry has no 'action' string");
        dev.events.push_back(doc_.events[ed.off]);
      }
    }
  }

  void settings(const Value& v) {
    AllocatorSettings& st = out_.settings;
    st.present = true;
    const Container& d = doc_.conts[v.v];
    for (uint32_t i = 0; i < d.size; ++i) {
      const Value& k = doc_.items(d)[2 * i];
      const Value& val = doc_.items(d)[2 * i + 1];
      if (k.t != VT::Str) continue;
      std::string key(out_.strings.get(StrId(k.v)));
      std::string text;
      switch (val.t) {
        case VT::Bool: text = val.v ? "true" : "false"; break;
        case VT::Int: text = std::to_string(val.i()); break;
        case VT::UInt64: text = std::to_string(val.v); break;
        case VT::Float: text = std::to_string(val.f()); break;
        case VT::Str: text = std::string(out_.strings.get(StrId(val.v))); break;
        case VT::None: text = "None"; break;
        default: text = std::string("<") + vt_name(val.t) + ">"; break;
      }
      if (key == "expandable_segments" && val.t == VT::Bool) st.expandable_segments = val.v != 0;
      if (key == "max_split_size" && val.t == VT::Int) st.max_split_size = val.i();
      // Not written by PyTorch 2.11; a newer or a patched writer may record
      // the ring buffer's size, which tells a wrapped history from a late start.
      if ((key == "trace_alloc_max_entries" || key == "max_entries") && val.t == VT::Int && val.i() >= 0)
        st.max_entries = val.i();
      if (key == "roundup_power2_divisions" && val.t == VT::Dict) {
        const Container& rd = doc_.conts[val.v];
        std::string parts;
        for (uint32_t j = 0; j < rd.size; ++j) {
          const Value& rk = doc_.items(rd)[2 * j];
          const Value& rv = doc_.items(rd)[2 * j + 1];
          if (rk.t != VT::Str || rv.t != VT::Int) continue;
          std::string ks(out_.strings.get(StrId(rk.v)));
          uint64_t mb = std::strtoull(ks.c_str(), nullptr, 10);
          if (mb == 0 || (mb & (mb - 1)) != 0 || mb > (uint64_t(1) << 40)) continue;
          size_t idx = size_t(std::countr_zero(mb));
          if (st.roundup_power2_divisions.size() <= idx) st.roundup_power2_divisions.resize(idx + 1, 0);
          st.roundup_power2_divisions[idx] = uint64_t(rv.i() < 0 ? 0 : rv.i());
          if (rv.i() != 0) parts += (parts.empty() ? "" : ",") + ks + ":" + std::to_string(rv.i());
        }
        text = parts.empty() ? "0" : parts;
      }
      st.raw.emplace_back(std::move(key), std::move(text));
    }
  }

  void annotations(const Value& v) {
    const Container& l = doc_.conts[v.v];
    doc_.check_memory(out_, l.src_off(), uint64_t(l.size) * sizeof(Annotation));
    out_.annotations.reserve(out_.annotations.size() + l.size);
    for (uint32_t i = 0; i < l.size; ++i) {
      const Value item = doc_.items(l)[i];
      if (item.t != VT::Dict) continue;
      const Container& d = doc_.conts[item.v];
      Annotation a;
      int64_t dev = -1, t = kNoTime;
      conv_.get_i64(d, s("device"), &dev);
      conv_.get_i64(d, s("time_us"), &t);
      a.device = int(dev);
      a.time_us = t;
      if (const Value* n = conv_.get(d, conv_.k_name); n && n->t == VT::Str) a.name = StrId(n->v);
      if (const Value* st = conv_.get(d, s("stage")); st && st->t == VT::Str)
        a.start = out_.strings.get(StrId(st->v)) != "END";
      out_.annotations.push_back(a);
    }
  }

  PickleDoc& doc_;
  Converter& conv_;
  Trace& out_;
  bool legacy_history_ = false;
  std::vector<DumpSums> sums_;
  std::unordered_map<int, size_t> sums_index_;
};

}  // namespace

void build_trace_from_doc(PickleDoc& doc, Converter& conv, Trace& out) {
  Builder(doc, conv, out).build();
}

}  // namespace snapdiff::detail
