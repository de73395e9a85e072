// torch.profiler Chrome traces, reading: the stream split into batches of
// traceEvents elements, each element parsed into a record, the threads'
// records merged (chrome_trace.hpp).
#include <simdjson.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "input/chrome_trace.hpp"
#include "input/profiler_input.hpp"
#include "snapdiff/error.hpp"

namespace snapdiff::detail {
namespace chrome_trace {
namespace {

namespace sj = simdjson::ondemand;

// ---- one event --------------------------------------------------------------

enum class Cat : uint8_t {
  Other,
  CpuOp,
  UserAnnotation,
  PythonFunction,
  CudaRuntime,
  CudaDriver,
  Kernel,
  GpuMemcpy,
  GpuMemset,
  CpuInstant,
  Ac2g,
};

Cat cat_of(std::string_view c) {
  switch (c.size()) {
    case 4:
      if (c == "ac2g") return Cat::Ac2g;
      break;
    case 6:
      if (c == "cpu_op") return Cat::CpuOp;
      if (c == "kernel") return Cat::Kernel;
      break;
    case 10:
      if (c == "gpu_memcpy") return Cat::GpuMemcpy;
      if (c == "gpu_memset") return Cat::GpuMemset;
      break;
    case 11:
      if (c == "cuda_driver") return Cat::CudaDriver;
      break;
    case 12:
      if (c == "cuda_runtime") return Cat::CudaRuntime;
      break;
    case 15:
      if (c == "user_annotation") return Cat::UserAnnotation;
      if (c == "python_function") return Cat::PythonFunction;
      break;
    case 17:
      if (c == "cpu_instant_event") return Cat::CpuInstant;
      break;
    default: break;
  }
  return Cat::Other;
}

// One parsed event: what the reader may need, nothing else.
struct Parsed {
  char ph = 0;
  Cat cat = Cat::Other;
  bool has_cat = false;
  std::string_view name;
  bool has_name = false;
  int64_t pid = 0, tid = 0;
  bool pid_str = false, tid_str = false, has_pid = false, has_tid = false;
  int64_t ts = 0, dur = 0, id = 0;
  bool has_ts = false, has_dur = false, has_id = false;
  // args
  int64_t ext = -1, corr = -1, addr = 0, bytes = 0, total_alloc = 0, total_res = 0;
  int64_t dev_type = -1, dev_id = -1, stream = -1, device = -1;
  bool has_ext = false, has_corr = false, has_addr = false, has_bytes = false, has_alloc = false, has_res = false,
       has_dev_type = false, has_dev_id = false, has_stream = false, has_device = false;
};

// "1234.567" (µs with up to 3 decimals, as Kineto prints them) -> ns,
// exactly; other spellings (exponents, more decimals) through a double.
bool parse_us_to_ns(std::string_view t, int64_t* out) {
  size_t i = 0;
  bool neg = false;
  if (i < t.size() && t[i] == '-') neg = true, ++i;
  int64_t ip = 0;
  size_t digits = 0;
  while (i < t.size() && t[i] >= '0' && t[i] <= '9') {
    if (++digits > 16) break;
    ip = ip * 10 + (t[i] - '0');
    ++i;
  }
  int64_t frac = 0;
  size_t fd = 0;
  // Exact for up to 16 integer digits (absolute epoch microseconds have 16);
  // decimals beyond nanoseconds are dropped.
  bool simple = digits > 0 && digits <= 16 && ip <= INT64_MAX / 1000 - 1;
  if (simple && i < t.size() && t[i] == '.') {
    ++i;
    while (i < t.size() && t[i] >= '0' && t[i] <= '9') {
      if (fd < 3) frac = frac * 10 + (t[i] - '0');
      ++fd;
      ++i;
    }
    if (fd == 0) simple = false;
  }
  if (simple && i == t.size()) {
    for (size_t k = fd; k < 3; ++k) frac *= 10;
    int64_t v = ip * 1000 + frac;
    *out = neg ? -v : v;
    return true;
  }
  std::string s(t);
  char* end = nullptr;
  double d = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || *end != '\0' || !(d > -9.2e15 && d < 9.2e15)) return false;
  double ns = d * 1000.0;
  *out = int64_t(ns < 0 ? ns - 0.5 : ns + 0.5);
  return true;
}

struct FieldError {
  simdjson::error_code code = simdjson::SUCCESS;
  const char* field = nullptr;     // "ts", "args"
  const char* subfield = nullptr;  // "Bytes"
  const char* what = nullptr;      // our own message (type errors)
};

// An integer value (also an integral double, e.g. "Bytes": 512.0).
simdjson::error_code get_int(sj::value v, int64_t* out) {
  int64_t i;
  auto e = v.get_int64().get(i);
  if (!e) {
    *out = i;
    return e;
  }
  if (e != simdjson::INCORRECT_TYPE && e != simdjson::NUMBER_OUT_OF_RANGE) return e;
  uint64_t u;
  if (!v.get_uint64().get(u)) {  // addresses beyond 2^63 wrap
    *out = int64_t(u);
    return simdjson::SUCCESS;
  }
  double d;
  auto e2 = v.get_double().get(d);
  if (e2) return e;
  if (!(d > -9.2e18 && d < 9.2e18)) return simdjson::NUMBER_OUT_OF_RANGE;
  *out = int64_t(d);
  return simdjson::SUCCESS;
}

// Reads the fields of one event. Returns an error code with where it was.
FieldError parse_event(sj::parser& parser, const char* data, size_t len, size_t cap, Parsed& ev) {
  FieldError fe;
  auto doc_r = parser.iterate(data, len, cap);
  if (doc_r.error()) {
    fe.code = doc_r.error();
    return fe;
  }
  sj::document& doc = doc_r.value_unsafe();
  sj::object obj;
  if ((fe.code = doc.get_object().get(obj))) {
    fe.what = "expected an event object";
    return fe;
  }
  bool need_args = true;
  for (auto field_r : obj) {
    fe.field = nullptr;
    sj::field field;
    if ((fe.code = std::move(field_r).get(field))) return fe;
    sj::raw_json_string key = field.key();
    sj::value val = field.value();
    if (key == "ph") {
      fe.field = "ph";
      std::string_view s;
      if ((fe.code = val.get_string().get(s))) return fe;
      ev.ph = s.empty() ? '?' : s[0];
      if (ev.ph == 'f' || ev.ph == 'M' || ev.ph == 'C' || ev.ph == 'e' || ev.ph == 'b') return FieldError{};
    } else if (key == "cat") {
      fe.field = "cat";
      std::string_view s;
      if ((fe.code = val.get_string().get(s))) return fe;
      ev.cat = cat_of(s);
      ev.has_cat = true;
      if (ev.cat == Cat::Other) return FieldError{};  // nothing snapdiff reads
      if (ev.cat == Cat::PythonFunction || ev.cat == Cat::Ac2g) need_args = false;
    } else if (key == "name") {
      fe.field = "name";
      if ((fe.code = val.get_string().get(ev.name))) return fe;
      ev.has_name = true;
    } else if (key == "pid" || key == "tid") {
      const bool is_pid = key == "pid";
      fe.field = is_pid ? "pid" : "tid";
      sj::json_type jt;
      if ((fe.code = val.type().get(jt))) return fe;
      int64_t* slot = is_pid ? &ev.pid : &ev.tid;
      bool* str = is_pid ? &ev.pid_str : &ev.tid_str;
      if (jt == sj::json_type::string) {
        std::string_view s;
        if ((fe.code = val.get_string().get(s))) return fe;
        // Strings ("Spans", "Traces") name pseudo-threads: hash them apart from numbers.
        uint64_t h = 1469598103934665603ull;
        for (char c : s) h = (h ^ uint8_t(c)) * 1099511628211ull;
        *slot = int64_t(h);
        *str = true;
      } else {
        if ((fe.code = get_int(val, slot))) return fe;
      }
      (is_pid ? ev.has_pid : ev.has_tid) = true;
    } else if (key == "ts" || key == "dur") {
      const bool is_ts = key == "ts";
      fe.field = is_ts ? "ts" : "dur";
      std::string_view raw = val.raw_json_token();
      while (!raw.empty() && (raw.back() == ' ' || raw.back() == '\n' || raw.back() == '\r' || raw.back() == '\t'))
        raw.remove_suffix(1);
      int64_t ns;
      if (!parse_us_to_ns(raw, &ns)) {
        fe.code = simdjson::INCORRECT_TYPE;
        fe.what = "expected a number of microseconds";
        return fe;
      }
      if (is_ts) ev.ts = ns, ev.has_ts = true;
      else ev.dur = ns, ev.has_dur = true;
    } else if (key == "id") {
      fe.field = "id";
      sj::json_type jt;
      if ((fe.code = val.type().get(jt))) return fe;
      if (jt == sj::json_type::number) {
        if ((fe.code = get_int(val, &ev.id))) return fe;
        ev.has_id = true;
      }
    } else if (key == "args") {
      if (!need_args || (ev.has_cat && ev.cat == Cat::Other)) continue;
      fe.field = "args";
      sj::object args;
      if ((fe.code = val.get_object().get(args))) {
        fe.what = "expected an object";
        return fe;
      }
      for (auto af_r : args) {
        sj::field af;
        if ((fe.code = std::move(af_r).get(af))) return fe;
        sj::raw_json_string k = af.key();
        int64_t* slot = nullptr;
        bool* flag = nullptr;
        const char* name = nullptr;
        if (k == "External id") slot = &ev.ext, flag = &ev.has_ext, name = "External id";
        else if (k == "correlation") slot = &ev.corr, flag = &ev.has_corr, name = "correlation";
        else if (k == "Addr") slot = &ev.addr, flag = &ev.has_addr, name = "Addr";
        else if (k == "Bytes") slot = &ev.bytes, flag = &ev.has_bytes, name = "Bytes";
        else if (k == "Total Allocated") slot = &ev.total_alloc, flag = &ev.has_alloc, name = "Total Allocated";
        else if (k == "Total Reserved") slot = &ev.total_res, flag = &ev.has_res, name = "Total Reserved";
        else if (k == "Device Type") slot = &ev.dev_type, flag = &ev.has_dev_type, name = "Device Type";
        else if (k == "Device Id") slot = &ev.dev_id, flag = &ev.has_dev_id, name = "Device Id";
        else if (k == "stream") slot = &ev.stream, flag = &ev.has_stream, name = "stream";
        else if (k == "device") slot = &ev.device, flag = &ev.has_device, name = "device";
        if (!slot) continue;
        fe.subfield = name;
        sj::value av = af.value();
        sj::json_type jt;
        if ((fe.code = av.type().get(jt))) return fe;
        if (jt == sj::json_type::null) continue;
        if (jt != sj::json_type::number) {
          fe.code = simdjson::INCORRECT_TYPE;
          fe.what = "expected an integer";
          return fe;
        }
        if ((fe.code = get_int(av, slot))) {
          fe.what = "expected an integer";
          return fe;
        }
        *flag = true;
        // An op needs only its External id, usually the first key: the
        // shapes that follow are skipped unread.
        if (ev.has_cat && (ev.cat == Cat::CpuOp || ev.cat == Cat::UserAnnotation) && ev.has_ext) break;
      }
      fe.subfield = nullptr;
    }
  }
  return FieldError{};
}

// Python functions: "torch/nn/modules/module.py(1779): _call_impl" -> name,
// file, line. Built-ins keep their text without object addresses, which
// change from run to run ("<built-in method rand of type object at 0x7f..>").
Frame python_frame(StringTable& st, std::string_view s) {
  Frame f;
  size_t colon = s.find("): ");
  if (colon != std::string_view::npos) {
    size_t open = s.rfind('(', colon);
    if (open != std::string_view::npos && open + 1 < colon) {
      bool digits = true;
      int64_t line = 0;
      for (size_t i = open + 1; i < colon; ++i) {
        if (s[i] < '0' || s[i] > '9' || line > (int64_t(1) << 40)) {
          digits = false;
          break;
        }
        line = line * 10 + (s[i] - '0');
      }
      if (digits) {
        f.file = st.intern(s.substr(0, open));
        f.name = st.intern(s.substr(colon + 3));
        f.line = line;
        return f;
      }
    }
  }
  std::string clean;
  size_t at = s.find(" at 0x");
  if (at != std::string_view::npos) {
    clean.assign(s.substr(0, at));
    size_t j = at + 6;
    while (j < s.size() && std::isxdigit(uint8_t(s[j]))) ++j;
    clean.append(s.substr(j));
    f.name = st.intern(clean);
  } else {
    f.name = st.intern(s);
  }
  return f;
}

// ---- the parsing threads ----------------------------------------------------

// Threads: (pid, tid, which of them are strings).
struct TKey {
  int64_t pid, tid;
  uint8_t flags;
  bool operator==(const TKey&) const = default;
};
struct TKeyHash {
  size_t operator()(const TKey& k) const {
    return size_t(uint64_t(k.pid) * 0x9E3779B97F4A7C15ull ^ (uint64_t(k.tid) + k.flags) * 0xC2B2AE3D27D4EB4Full);
  }
};

// Complete elements of traceEvents copied out of the stream, parsed by
// whichever thread takes the batch.
struct Batch {
  struct Item {
    uint32_t off, len;
    uint64_t index, offset;  // element index, byte offset in the decoded input
  };
  Buffer buf;
  std::vector<Item> items;
};

// The records one thread made from the batches it parsed. Names and threads
// get local ids here; the merge gives them global ids in order of first
// appearance in the file, so the result does not depend on which thread
// parsed what.
struct Shard {
  HugeVec<RangeRec> ranges;
  HugeVec<MemRec> mem;
  HugeVec<LaunchRec> launches;
  HugeVec<GpuRec> gpu;
  HugeVec<FlowRec> flows;
  StringTable names;                     // local; id 0 is ""
  std::vector<uint64_t> name_first{0};   // element index where each name first appeared
  std::vector<uint8_t> name_python{0};   // a python_function name (becomes a frame)
  std::unordered_map<TKey, uint32_t, TKeyHash> thread_ids;
  std::vector<TKey> threads;
  std::vector<uint64_t> thread_first;
  TKey last_key{0, 0, 0xff};
  uint32_t last_thread = 0;
  uint64_t events = 0;
  // The first error (the earliest element of this shard's batches).
  std::exception_ptr error;
  uint64_t error_index = UINT64_MAX;
  sj::parser parser;
  std::vector<char> scratch;

  uint32_t name(std::string_view s, uint64_t index, bool python) {
    const size_t before = names.size();
    StrId id = names.intern(s);
    if (names.size() != before) {
      name_first.push_back(index);
      name_python.push_back(python ? 1 : 0);
    } else if (python) {
      name_python[id] = 1;
    }
    return id;
  }
  uint32_t thread_of(const Parsed& ev, uint64_t index) {
    TKey k{ev.pid, ev.tid, uint8_t((ev.pid_str ? 1 : 0) | (ev.tid_str ? 2 : 0))};
    if (k == last_key) return last_thread;
    auto it = thread_ids.find(k);
    uint32_t id;
    if (it == thread_ids.end()) {
      id = uint32_t(threads.size());
      thread_ids.emplace(k, id);
      threads.push_back(k);
      thread_first.push_back(index);
    } else {
      id = it->second;
    }
    last_key = k;
    last_thread = id;
    return id;
  }
  // Resident bytes of what this shard built (the memory bound).
  uint64_t bytes() const {
    return uint64_t(ranges.size()) * sizeof(RangeRec) + uint64_t(mem.size()) * sizeof(MemRec) +
           uint64_t(launches.size()) * sizeof(LaunchRec) + uint64_t(gpu.size()) * sizeof(GpuRec) +
           uint64_t(flows.size()) * sizeof(FlowRec) + names.memory_bytes() +
           uint64_t(name_first.size()) * (sizeof(uint64_t) + 1) +
           uint64_t(threads.size()) * (sizeof(TKey) + sizeof(uint64_t) + 64);
  }
  void reserve(uint64_t decoded_bytes, unsigned parts) {
    const uint64_t b = decoded_bytes / (parts ? parts : 1);
    // Upper estimates: Kineto writes no event of these kinds in fewer bytes.
    reserve_huge(ranges, b / 160);
    reserve_huge(mem, b / 200);
    reserve_huge(launches, b / 200);
    reserve_huge(gpu, b / 300);
    reserve_huge(flows, b / 100);
  }
  void on_event(const Parsed& ev, uint64_t index, const std::string& array_path);
  void parse(const Batch& b, const std::string& array_path);
};

// inline: compiled into Shard::parse's loop, which calls it for every event.
inline void Shard::on_event(const Parsed& ev, uint64_t index, const std::string& array_path) {
  ++events;
  auto need_ts = [&](const char* kind) {
    if (!ev.has_ts)
      throw InputError(array_path + "[" + std::to_string(index) + "]", std::string("a ") + kind + " event without \"ts\"");
  };
  if (ev.ph == 'X') {
    switch (ev.cat) {
      case Cat::CpuOp:
      case Cat::UserAnnotation:
      case Cat::PythonFunction: {
        need_ts("complete (\"X\")");
        RangeRec r;
        r.start = ev.ts;
        r.end = sat_add(ev.ts, ev.has_dur && ev.dur > 0 ? ev.dur : 0);
        r.ext = ev.has_ext ? ev.ext : -1;
        r.thread = thread_of(ev, index);
        r.kind = ev.cat == Cat::PythonFunction ? kPython : ev.cat == Cat::CpuOp ? kOp : kAnnotation;
        r.label = name(ev.name, index, r.kind == kPython);
        ranges.push_back(r);
        break;
      }
      case Cat::CudaRuntime:
      case Cat::CudaDriver:
        if (!ev.has_corr || !ev.has_ts) break;
        launches.push_back({ev.ts, ev.corr, ev.has_ext ? ev.ext : -1, thread_of(ev, index)});
        break;
      case Cat::Kernel:
      case Cat::GpuMemcpy:
      case Cat::GpuMemset: {
        need_ts("GPU activity");
        GpuRec g;
        g.ts = ev.ts;
        g.dur = ev.has_dur ? ev.dur : 0;
        g.corr = ev.has_corr ? ev.corr : -1;
        g.ext = ev.has_ext ? ev.ext : -1;
        g.stream = ev.has_stream ? ev.stream : (ev.has_tid && !ev.tid_str ? ev.tid : 0);
        g.name = name(ev.name, index, false);
        g.device = int32_t(ev.has_device ? ev.device : (ev.has_pid && !ev.pid_str ? ev.pid : 0));
        g.order = index;
        gpu.push_back(g);
        break;
      }
      default: break;
    }
    return;
  }
  if ((ev.ph == 'i' || ev.ph == 'I') && ev.has_name && (ev.name == "[memory]" || ev.name == "[OutOfMemory]")) {
    const bool oom = ev.name == "[OutOfMemory]";
    auto path = [&] { return array_path + "[" + std::to_string(index) + "]"; };
    need_ts("[memory]");
    if (!ev.has_bytes)
      throw InputError(path() + ".args", std::string(oom ? "[OutOfMemory]" : "[memory]") + " event without \"Bytes\"");
    if (!oom && !ev.has_addr) throw InputError(path() + ".args", "[memory] event without \"Addr\"");
    // Sizes beyond any device: refused, so that no sum of them can overflow.
    constexpr int64_t kMaxBytes = int64_t(1) << 40, kMaxTotal = int64_t(kMaxDeviceBytes);
    if (ev.bytes > kMaxBytes || ev.bytes < -kMaxBytes)
      throw InputError(path() + ".args.Bytes", "implausible size " + std::to_string(ev.bytes) + " (more than 1 TiB)");
    if (ev.has_alloc && (ev.total_alloc < 0 || ev.total_alloc > kMaxTotal))
      throw InputError(path() + ".args.Total Allocated", "implausible total " + std::to_string(ev.total_alloc));
    if (ev.has_res && (ev.total_res < 0 || ev.total_res > kMaxTotal))
      throw InputError(path() + ".args.Total Reserved", "implausible total " + std::to_string(ev.total_res));
    MemRec m;
    m.ts = ev.ts;
    m.addr = uint64_t(ev.addr);
    m.bytes = ev.bytes;
    m.total_alloc = ev.total_alloc;
    m.total_res = ev.total_res;
    m.has_alloc = ev.has_alloc;
    m.has_res = ev.has_res;
    m.thread = thread_of(ev, index);
    const bool cpu = ev.has_dev_type ? ev.dev_type == 0 : (!ev.has_dev_id || ev.dev_id < 0);
    m.device = cpu ? -1 : int32_t(ev.has_dev_id && ev.dev_id >= 0 ? ev.dev_id : 0);
    if (!cpu && ev.has_dev_id && ev.dev_id > 4096)
      throw InputError(path() + ".args.Device Id", "device index " + std::to_string(ev.dev_id) + " is out of range");
    m.kind = oom ? kMemOom : ev.bytes >= 0 ? kMemAlloc : kMemFree;
    m.order = index;
    if (!oom && ev.bytes == 0) return;  // nothing allocated or freed
    mem.push_back(m);
    return;
  }
  if (ev.ph == 's' && ev.cat == Cat::Ac2g && ev.has_id && ev.has_ts) flows.push_back({ev.id, ev.ts, thread_of(ev, index)});
}

void Shard::parse(const Batch& b, const std::string& array_path) {
  Parsed ev;
  for (const Batch::Item& it : b.items) {
    if (it.index > error_index) return;  // an earlier element already failed
    const char* data = b.buf.data() + it.off;
    const size_t cap = b.buf.size() - it.off;
    ev = Parsed{};
    FieldError fe = parse_event(parser, data, it.len, cap, ev);
    if (fe.code == simdjson::UNESCAPED_CHARS || fe.code == simdjson::UTF8_ERROR) {
      // PyTorch writes raw control characters into some names (pytorch#130622),
      // and names are not always UTF-8: read them as spaces and '?'.
      scratch.assign(data, data + it.len);
      bool in_str = false, esc = false;
      for (char& c : scratch) {
        const uint8_t u = uint8_t(c);
        if (esc) {
          esc = false;
        } else if (in_str) {
          if (c == '\\') esc = true;
          else if (c == '"') in_str = false;
          else if (u < 0x20) c = ' ';
        } else if (c == '"') {
          in_str = true;
        }
        if (u >= 0x80 && fe.code == simdjson::UTF8_ERROR) c = '?';
      }
      scratch.resize(scratch.size() + JsonArrayStreamer::kPadding, ' ');
      ev = Parsed{};
      fe = parse_event(parser, scratch.data(), it.len, scratch.size(), ev);
    }
    if (fe.code) {
      std::string path = array_path + "[" + std::to_string(it.index) + "]";
      if (fe.field) path += std::string(".") + fe.field;
      if (fe.subfield) path += std::string(".") + fe.subfield;
      std::string msg = fe.what ? std::string(fe.what) : std::string("malformed JSON: ") + simdjson::error_message(fe.code);
      throw InputError(path, msg + " (the event starts at byte " + std::to_string(it.offset) + ")");
    }
    on_event(ev, it.index, array_path);
  }
}

// ---- the reader -------------------------------------------------------------

// Reads traceEvents into records: the stream split into batches on the
// calling thread, the batches parsed there and on worker threads (one Shard
// each), then the shards merged.
class EventReader {
 public:
  explicit EventReader(Trace& t) : t_(t) {}

  // forced_workers: parser threads besides the reading one (-1: chosen from
  // the machine and the input's size).
  void read(ByteStream& in, const ProgressFn& progress, int forced_workers, const MemoryBudget& budget);
  Records take();

 private:
  void on_member(const std::string& key, const std::string& value);
  void merge(std::vector<std::unique_ptr<Shard>>& shards);

  Trace& t_;
  Records out_;  // what take() hands over
};

void EventReader::on_member(const std::string& key, const std::string& value) {
  auto text = [&]() {
    std::string v = value;
    if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
    return v;
  };
  if (key == "baseTimeNanoseconds") {
    simdjson::padded_string ps(value);
    simdjson::dom::parser p;
    simdjson::dom::element e;
    int64_t v = 0;
    uint64_t u = 0;
    if (!p.parse(ps).get(e) && !e.get_int64().get(v)) {
      out_.base_ns = v;
    } else if (!p.parse(ps).get(e) && !e.get_uint64().get(u) && u < (uint64_t(1) << 63)) {
      out_.base_ns = int64_t(u);
    } else {
      throw InputError(std::string("$.baseTimeNanoseconds"), "expected an integer number of nanoseconds, found " +
                                                                  printable(value.substr(0, 40)));
    }
    out_.have_base = true;
    out_.meta.push_back({"profiler.baseTimeNanoseconds", std::to_string(out_.base_ns)});
  } else if (key == "deviceProperties") {
    simdjson::padded_string ps(value);
    simdjson::dom::parser p;
    simdjson::dom::element e;
    simdjson::dom::array arr;
    if (p.parse(ps).get(e) || e.get_array().get(arr)) return;  // optional: ignore a shape we do not know
    for (simdjson::dom::element d : arr) {
      int64_t id = -1, mem = -1;
      std::string_view name;
      if (d["id"].get_int64().get(id)) continue;
      if (d["name"].get_string().get(name)) name = {};
      if (d["totalGlobalMem"].get_int64().get(mem)) mem = -1;
      std::string v(name);
      if (mem > 0) v += (v.empty() ? "" : ", ") + std::to_string(mem) + " bytes";
      out_.meta.push_back({"gpu." + std::to_string(id), v});
    }
  } else if (key == "schemaVersion") {
    out_.schema_version = text();
  } else if (key == "cuda_runtime_version" || key == "cuda_driver_version" || key == "with_stack" ||
             key == "profile_memory" || key == "record_shapes" || key == "with_flops" || key == "trace_id") {
    out_.meta.push_back({"profiler." + key, text()});
  }
}

void EventReader::read(ByteStream& in, const ProgressFn& progress, int forced_workers, const MemoryBudget& budget) {
  // Threads: the main thread splits the stream into batches of complete
  // events and parses some of them itself; the others go to workers. Small
  // inputs are parsed on the main thread alone.
  const uint64_t hint = in.decoded_hint();
  unsigned hw = std::thread::hardware_concurrency();
  if (hw == 0) hw = 1;
  // Parsing a plain file on one thread already runs at several hundred
  // MB/s; on a 2-core machine a worker only pays when the reading thread
  // inflates gzip (measured: docs/performance.md). Small inputs: no threads.
  const bool worth = hint >= (uint64_t(16) << 20) && (hw >= 4 || (hw >= 2 && in.compressed()));
  const unsigned workers = forced_workers >= 0 ? unsigned(forced_workers) : worth ? std::min(hw - 1, 3u) : 0;
  std::vector<std::unique_ptr<Shard>> shards;
  for (unsigned i = 0; i <= workers; ++i) {
    shards.push_back(std::make_unique<Shard>());
    shards.back()->reserve(hint, 1);  // virtual room only: untouched pages cost nothing
  }
  Shard& mine = *shards[0];
  std::string array_path;  // "$.traceEvents" or "$" (set once, before any batch goes to a worker)

  std::mutex mu;
  std::condition_variable cv_work, cv_free;
  std::deque<std::unique_ptr<Batch>> queue, spare;
  bool done = false;
  const size_t kMaxQueued = 2 * (workers ? workers : 1);
  // The memory bound: the records the shards hold, times what building the
  // Trace from them and analysing it adds (kRecordCost), summed as batches
  // are parsed. Once over, no more batches are parsed and the reading
  // thread refuses at the element it reached.
  std::atomic<uint64_t> held{0};
  std::atomic<bool> over{false};
  auto run_batch = [&](Shard& sh, const Batch& b) {
    if (over.load(std::memory_order_relaxed)) return;
    const uint64_t before = budget.bounded() ? sh.bytes() : 0;
    try {
      sh.parse(b, array_path);
    } catch (...) {
      if (b.items.empty()) return;
      // Keep the error of the earliest element.
      uint64_t at = b.items.front().index;
      if (at < sh.error_index) {
        sh.error_index = at;
        sh.error = std::current_exception();
      }
    }
    if (budget.bounded()) {
      const uint64_t grown = sh.bytes() - before;
      const uint64_t now = held.fetch_add(grown, std::memory_order_relaxed) + grown;
      if (budget.over(now * kRecordCost)) over.store(true, std::memory_order_relaxed);
    }
  };
  std::vector<std::thread> pool;
  for (unsigned w = 1; w <= workers; ++w)
    pool.emplace_back([&, w] {
      Shard& sh = *shards[w];
      for (;;) {
        std::unique_ptr<Batch> b;
        {
          std::unique_lock<std::mutex> lk(mu);
          cv_work.wait(lk, [&] { return done || !queue.empty(); });
          if (queue.empty()) return;
          b = std::move(queue.front());
          queue.pop_front();
        }
        cv_free.notify_one();
        run_batch(sh, *b);
        std::lock_guard<std::mutex> lk(mu);
        spare.push_back(std::move(b));
      }
    });
  auto stop_workers = [&] {
    {
      std::lock_guard<std::mutex> lk(mu);
      done = true;
    }
    cv_work.notify_all();
    for (auto& th : pool) th.join();
    pool.clear();
  };
  // Hands a batch to a worker, or parses it here when they are busy.
  auto submit = [&](std::unique_ptr<Batch> b) {
    if (workers > 0) {
      std::unique_lock<std::mutex> lk(mu);
      if (queue.size() < kMaxQueued) {
        queue.push_back(std::move(b));
        lk.unlock();
        cv_work.notify_one();
        return;
      }
    }
    run_batch(mine, *b);
    std::lock_guard<std::mutex> lk(mu);
    spare.push_back(std::move(b));
  };

  std::exception_ptr split_error;
  try {
    // Elements stay in the streamer's read buffers; each retired buffer is
    // a batch (about 4 MiB of events), parsed while the next one is read.
    JsonArrayStreamer js(in, "traceEvents", size_t(4) << 20);
    js.set_handoff(true);
    // One value must fit in a buffer that doubles: a quarter of the room.
    if (budget.bounded())
      js.set_max_value(size_t(std::clamp<uint64_t>(budget.room() / 4, uint64_t(8) << 20, uint64_t(1) << 30)));
    auto refuse_if_over = [&] {
      if (over.load(std::memory_order_relaxed))
        budget.refuse_at(js.array_path() + "[" + std::to_string(js.index()) + "]");
    };
    // Batches are reused with their item lists (a fresh list per batch
    // would be a fresh mapping to fault in every time).
    std::vector<std::unique_ptr<Batch>> batch_pool;
    auto fresh_batch = [&] {
      std::unique_ptr<Batch> b;
      if (!batch_pool.empty()) {
        b = std::move(batch_pool.back());
        batch_pool.pop_back();
      } else {
        b = std::make_unique<Batch>();
        b->items.reserve(size_t(1) << 15);
      }
      b->items.clear();
      return b;
    };
    std::unique_ptr<Batch> cur = fresh_batch();
    uint64_t since_progress = 0;
    auto flush_retired = [&] {
      while (js.has_retired()) {
        cur->buf = js.pop_retired();
        submit(std::move(cur));
        cur = fresh_batch();
        std::lock_guard<std::mutex> lk(mu);
        while (!spare.empty()) {
          js.give_spare(std::move(spare.back()->buf));
          batch_pool.push_back(std::move(spare.back()));
          spare.pop_back();
        }
      }
    };
    for (;;) {
      auto item = js.next();
      flush_retired();
      refuse_if_over();
      if (item == JsonArrayStreamer::Item::End) break;
      if (item == JsonArrayStreamer::Item::Member) {
        on_member(js.key(), js.value());
        continue;
      }
      if (js.size() > UINT32_MAX || js.data_offset() > UINT32_MAX)
        throw InputError(js.array_path() + "[" + std::to_string(js.index()) + "]", "an event larger than 4 GiB");
      if (array_path.empty()) array_path = js.array_path();  // before any batch is handed over
      cur->items.push_back({uint32_t(js.data_offset()), uint32_t(js.size()), js.index(), js.offset()});
      if (progress && ++since_progress >= 65536) {
        since_progress = 0;
        progress(in.progress_done(), in.progress_total());
      }
    }
    if (!cur->items.empty()) {
      cur->buf = js.release_buffer();
      submit(std::move(cur));
    }
    refuse_if_over();
    if (!js.saw_array()) throw InputError(std::string("$"), "not a Chrome trace: no \"traceEvents\" array");
    t_.source.decoded_bytes = js.position();
  } catch (...) {
    split_error = std::current_exception();
  }
  stop_workers();
  if (!split_error && over.load()) {
    try {
      budget.refuse_at(array_path.empty() ? std::string("$.traceEvents") : array_path);
    } catch (...) {
      split_error = std::current_exception();
    }
  }
  // A parse error comes from an element before the point the splitter
  // reached: report the earliest one.
  const Shard* first = nullptr;
  for (auto& sh : shards)
    if (sh->error && (!first || sh->error_index < first->error_index)) first = sh.get();
  if (first) std::rethrow_exception(first->error);
  if (split_error) std::rethrow_exception(split_error);
  merge(shards);
}

// Global ids for the shards' names and threads, in order of first
// appearance in the file, then all records in global terms.
void EventReader::merge(std::vector<std::unique_ptr<Shard>>& shards) {
  struct NameRef {
    uint64_t first;
    uint32_t shard, id;
  };
  std::vector<NameRef> refs;
  for (uint32_t k = 0; k < shards.size(); ++k)
    // id 0 is "" and needs a frame only when a python_function has no name.
    for (uint32_t id = shards[k]->name_python[0] ? 0 : 1; id < shards[k]->names.size(); ++id)
      refs.push_back({shards[k]->name_first[id], k, id});
  std::sort(refs.begin(), refs.end(), [](const NameRef& a, const NameRef& b) {
    if (a.first != b.first) return a.first < b.first;
    if (a.shard != b.shard) return a.shard < b.shard;
    return a.id < b.id;
  });
  std::vector<std::vector<uint32_t>> name_map(shards.size()), py_map(shards.size());
  for (uint32_t k = 0; k < shards.size(); ++k) {
    name_map[k].assign(shards[k]->names.size(), 0);
    py_map[k].assign(shards[k]->names.size(), UINT32_MAX);
  }
  std::unordered_map<FrameId, uint32_t> py_index;
  for (const NameRef& r : refs) {
    const Shard& sh = *shards[r.shard];
    std::string_view text = sh.names.get(r.id);
    name_map[r.shard][r.id] = t_.strings.intern(text);
    if (sh.name_python[r.id]) {
      FrameId f = t_.intern_frame(python_frame(t_.strings, text));
      auto [it, fresh] = py_index.emplace(f, uint32_t(out_.py_frames.size()));
      if (fresh) out_.py_frames.push_back(f);
      py_map[r.shard][r.id] = it->second;
    }
  }
  struct ThreadRef {
    uint64_t first;
    uint32_t shard, id;
  };
  std::vector<ThreadRef> trefs;
  for (uint32_t k = 0; k < shards.size(); ++k)
    for (uint32_t id = 0; id < shards[k]->threads.size(); ++id) trefs.push_back({shards[k]->thread_first[id], k, id});
  std::sort(trefs.begin(), trefs.end(), [](const ThreadRef& a, const ThreadRef& b) {
    if (a.first != b.first) return a.first < b.first;
    return a.shard < b.shard;
  });
  std::unordered_map<TKey, uint32_t, TKeyHash> global;
  std::vector<std::vector<uint32_t>> thread_map(shards.size());
  for (uint32_t k = 0; k < shards.size(); ++k) thread_map[k].assign(shards[k]->threads.size(), 0);
  for (const ThreadRef& r : trefs) {
    auto [it, fresh] = global.emplace(shards[r.shard]->threads[r.id], uint32_t(global.size()));
    (void)fresh;
    thread_map[r.shard][r.id] = it->second;
  }
  out_.threads = global.size();
  // Records: renumbered in place, then concatenated onto the largest
  // shard's array (no second copy of the bulk).
  for (uint32_t k = 0; k < shards.size(); ++k) {
    Shard& sh = *shards[k];
    out_.events += sh.events;
    const auto& nmap = name_map[k];
    const auto& pmap = py_map[k];
    const auto& tmap = thread_map[k];
    for (RangeRec& r : sh.ranges) {
      r.thread = tmap[r.thread];
      r.label = r.kind == kPython ? pmap[r.label] : nmap[r.label];
    }
    for (MemRec& m : sh.mem) m.thread = tmap[m.thread];
    for (LaunchRec& l : sh.launches) l.thread = tmap[l.thread];
    for (GpuRec& g : sh.gpu) g.name = nmap[g.name];
    for (FlowRec& f : sh.flows) f.thread = tmap[f.thread];
  }
  auto concat = [&](auto member, auto& out) {
    size_t big = 0, total = 0;
    for (size_t k = 0; k < shards.size(); ++k) {
      total += ((*shards[k]).*member).size();
      if (((*shards[k]).*member).size() > ((*shards[big]).*member).size()) big = k;
    }
    out = std::move((*shards[big]).*member);
    reserve_huge(out, total);
    for (size_t k = 0; k < shards.size(); ++k) {
      if (k == big) continue;
      auto& v = (*shards[k]).*member;
      out.insert(out.end(), v.begin(), v.end());
      std::decay_t<decltype(v)>().swap(v);
    }
  };
  concat(&Shard::ranges, out_.ranges);
  concat(&Shard::mem, out_.mem);
  concat(&Shard::launches, out_.launches);
  concat(&Shard::gpu, out_.gpu);
  concat(&Shard::flows, out_.flows);
}

Records EventReader::take() { return std::move(out_); }

}  // namespace

Records read_events(ByteStream& in, Trace& t, const ProgressFn& progress, int workers, const MemoryBudget& budget) {
  EventReader r(t);
  r.read(in, progress, workers, budget);
  return r.take();
}

}  // namespace chrome_trace

void read_chrome_trace(ByteStream& in, Trace& out, const LoadOptions& opts, uint64_t held) {
  const MemoryBudget budget(opts, held);
  chrome_trace::build_trace(chrome_trace::read_events(in, out, opts.progress, opts.trace_reader_workers, budget), out);
}

}  // namespace snapdiff::detail
