// torch.profiler Chrome traces (prof.export_chrome_trace, written by Kineto)
// into the event model.
//
// Reading: json_stream.hpp hands out each element of traceEvents; each is
// parsed with simdjson's On-Demand API and reduced to a small record (a
// range, a memory event, a launch, a GPU activity, a flow start). Nothing
// else of the text is kept. Then:
//   1. per thread, ranges (cpu_op, user_annotation, python_function) are
//      sorted and nested by time: each gets its enclosing range;
//   2. each memory event and each launch is placed in the innermost range of
//      its thread that contains its time;
//   3. a range's stack is its own frame, then its enclosing ranges' frames
//      (ops, record_function ranges, Python calls) outward;
//   4. GPU activities (kernels, memcpy, memset) find their launch through the
//      CUPTI correlation id (cuda_runtime/cuda_driver), else the External id
//      of their op, else an ac2g flow start;
//   5. per device, [memory] events sorted by time become alloc / free
//      events with the totals the trace reported after each.
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
#include <map>
#include <unordered_map>

#include "input/profiler_input.hpp"
#include "snapdiff/error.hpp"
#include "util/huge_alloc.hpp"
#include "util/hugepages.hpp"

namespace snapdiff::detail {

namespace sj = simdjson::ondemand;

namespace {

// ---- sniffing ---------------------------------------------------------------

size_t skip_ws(std::string_view s, size_t i) {
  while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t')) ++i;
  return i;
}

// End of the JSON string starting at s[i] == '"' (one past its quote), or npos.
size_t string_end(std::string_view s, size_t i) {
  for (size_t j = i + 1; j < s.size(); ++j) {
    if (s[j] == '\\') ++j;
    else if (s[j] == '"') return j + 1;
  }
  return std::string_view::npos;
}

// End of the value starting at s[i] (containers by depth), or npos when the
// head ends first.
size_t value_end(std::string_view s, size_t i) {
  if (i >= s.size()) return std::string_view::npos;
  if (s[i] == '"') return string_end(s, i);
  if (s[i] == '{' || s[i] == '[') {
    int depth = 0;
    for (size_t j = i; j < s.size(); ++j) {
      char c = s[j];
      if (c == '"') {
        size_t e = string_end(s, j);
        if (e == std::string_view::npos) return e;
        j = e - 1;
      } else if (c == '{' || c == '[') {
        ++depth;
      } else if ((c == '}' || c == ']') && --depth == 0) {
        return j + 1;
      }
    }
    return std::string_view::npos;
  }
  size_t j = i;
  while (j < s.size() && s[j] != ',' && s[j] != '}' && s[j] != ']' && s[j] != ' ' && s[j] != '\n') ++j;
  return j < s.size() ? j : std::string_view::npos;
}

bool is_chrome_key(std::string_view k) {
  return k == "traceEvents" || k == "schemaVersion" || k == "deviceProperties" || k == "baseTimeNanoseconds" ||
         k == "displayTimeUnit" || k == "traceName" || k == "distributedInfo" || k == "trace_id";
}

}  // namespace

ProfilerJson sniff_profiler_json(std::string_view s) {
  size_t i = 0;
  if (s.size() >= 3 && uint8_t(s[0]) == 0xEF && uint8_t(s[1]) == 0xBB && uint8_t(s[2]) == 0xBF) i = 3;
  i = skip_ws(s, i);
  if (i >= s.size()) return ProfilerJson::None;
  if (s[i] == '{') {
    // The top-level keys visible in the head decide.
    i = skip_ws(s, i + 1);
    while (i < s.size() && s[i] == '"') {
      size_t e = string_end(s, i);
      if (e == std::string_view::npos) break;
      std::string_view key = s.substr(i + 1, e - i - 2);
      if (key == "format") return ProfilerJson::None;  // .snap
      if (is_chrome_key(key)) return ProfilerJson::ChromeTrace;
      i = skip_ws(s, e);
      if (i >= s.size() || s[i] != ':') break;
      i = skip_ws(s, i + 1);
      size_t v = value_end(s, i);
      if (v == std::string_view::npos) break;
      i = skip_ws(s, v);
      if (i < s.size() && s[i] == ',') i = skip_ws(s, i + 1);
      else break;
    }
    return ProfilerJson::None;
  }
  if (s[i] != '[') return ProfilerJson::None;
  i = skip_ws(s, i + 1);
  if (i >= s.size()) return ProfilerJson::None;
  if (s[i] == '{') return ProfilerJson::ChromeTrace;  // the JSON Array Format of Chrome traces
  if (s[i] == ']') return ProfilerJson::MemoryTimelineRaw;  // an empty raw export
  if (s[i] != '[') return ProfilerJson::None;
  // A memory timeline: [times, sizes] or raw rows [[t, action, bytes, cat], ...].
  size_t first = i;
  size_t numbers = 0;
  size_t j = skip_ws(s, first + 1);
  while (j < s.size() && s[j] != ']') {
    if (s[j] == '[' || s[j] == '{' || s[j] == '"') return ProfilerJson::None;
    size_t v = value_end(s, j);
    if (v == std::string_view::npos) break;
    if (v == j) return ProfilerJson::None;  // not a number (a stray '}'): not a timeline
    ++numbers;
    j = skip_ws(s, v);
    if (j < s.size() && s[j] == ',') j = skip_ws(s, j + 1);
  }
  if (numbers > 4 || (j < s.size() && s[j] == ']' && numbers == 0)) return ProfilerJson::MemoryTimeline;
  if (j >= s.size()) return numbers > 4 ? ProfilerJson::MemoryTimeline : ProfilerJson::None;
  // The first element is closed with at most 4 numbers: the second element
  // tells (an array of arrays: the sizes of [times, sizes]).
  size_t k = skip_ws(s, j + 1);
  if (k < s.size() && s[k] == ',') k = skip_ws(s, k + 1);
  if (k >= s.size()) return numbers == 4 ? ProfilerJson::MemoryTimelineRaw : ProfilerJson::None;
  if (s[k] == ']') return numbers == 4 ? ProfilerJson::MemoryTimelineRaw : ProfilerJson::None;
  if (s[k] != '[') return ProfilerJson::None;
  size_t m = skip_ws(s, k + 1);
  if (m < s.size() && (s[m] == '[' || s[m] == ']')) return ProfilerJson::MemoryTimeline;
  return numbers == 4 ? ProfilerJson::MemoryTimelineRaw : ProfilerJson::None;
}

namespace {

// ---- records ----------------------------------------------------------------

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

enum RangeKind : uint8_t { kAnnotation = 0, kPython = 1, kOp = 2 };  // also the nesting order on ties

struct RangeRec {
  int64_t start, end;  // relative ns
  int64_t ext;         // External id (-1: none)
  uint32_t thread;
  uint32_t label;      // StrId of the name (annotation, op) or the Python frame's index
  uint8_t kind;
};

enum MemKind : uint8_t { kMemAlloc, kMemFree, kMemOom };

struct MemRec {
  int64_t ts;
  uint64_t addr;
  int64_t bytes;
  int64_t total_alloc, total_res;
  uint32_t thread;
  int32_t device;  // -1: the CPU allocator
  uint8_t kind;
  uint8_t has_alloc, has_res;
  uint64_t order;  // position in the file, to keep ties stable
};

struct LaunchRec {
  int64_t ts;
  int64_t corr;
  int64_t ext;
  uint32_t thread;
};

struct GpuRec {
  int64_t ts, dur;
  int64_t corr, ext, stream;
  uint64_t order;  // element index
  uint32_t name;
  int32_t device;
};

struct FlowRec {
  int64_t id, ts;
  uint32_t thread;
};

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

int64_t floor_div_1000(int64_t ns) { return ns / 1000 - (ns % 1000 < 0 ? 1 : 0); }

// Sums of values from the input saturate instead of overflowing, and never
// reach kNoTime (which means "no time").
int64_t sat_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) r = a > 0 ? INT64_MAX : INT64_MIN + 1;
  return r == INT64_MIN ? INT64_MIN + 1 : r;
}
int64_t wrap_sub(int64_t a, int64_t b) { return int64_t(uint64_t(a) - uint64_t(b)); }
int64_t wrap_add(int64_t a, int64_t b) { return int64_t(uint64_t(a) + uint64_t(b)); }

// Unix-epoch microseconds of a trace time.
int64_t abs_us(int64_t base_ns, int64_t ts_ns) { return floor_div_1000(sat_add(base_ns, ts_ns)); }

// Room for n elements up front, with huge pages asked for before the memory
// is touched: growing record arrays by doubling costs more in page faults
// and copies than the parsing itself (untouched reserved pages cost nothing).
template <class V>
void reserve_huge(V& v, uint64_t n) {
  using T = typename V::value_type;
  const uint64_t cap = (uint64_t(1) << 30) / sizeof(T);
  if (n > cap) n = cap;
  if (n <= v.capacity()) return;
  v.reserve(size_t(n));
  advise_hugepages(v.data(), size_t(n) * sizeof(T));
}

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

void Shard::on_event(const Parsed& ev, uint64_t index, const std::string& array_path) {
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
    constexpr int64_t kMaxBytes = int64_t(1) << 40, kMaxTotal = int64_t(1) << 50;
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

std::atomic<int> g_workers{-1};

class ChromeTraceReader {
 public:
  ChromeTraceReader(Trace& t) : t_(t) {}

  void read(ByteStream& in, const ProgressFn& progress);

 private:
  void on_member(const std::string& key, const std::string& value);
  void merge(std::vector<std::unique_ptr<Shard>>& shards);
  void build();
  StackId stack_of(uint32_t r);
  FrameId range_frame(const RangeRec& r);

  Trace& t_;
  int64_t base_ns_ = 0;
  bool have_base_ = false;
  HugeVec<RangeRec> ranges_;
  HugeVec<MemRec> mem_;
  HugeVec<LaunchRec> launches_;
  HugeVec<GpuRec> gpu_;
  HugeVec<FlowRec> flows_;
  size_t threads_ = 0;
  std::vector<FrameId> name_frame_;  // by StrId: op / annotation frames
  std::vector<FrameId> py_frames_;   // python ranges' labels are indices into this
  uint64_t events_ = 0;
  // built
  HugeVec<uint32_t> parent_;   // per sorted range
  HugeVec<StackId> stack_;     // per sorted range (UINT32_MAX: not yet)
  HugeVec<uint32_t> near_op_;  // per sorted range: the innermost op at or above it
  std::vector<std::pair<std::string, std::string>> meta_;
  std::string schema_version_;
};

void ChromeTraceReader::on_member(const std::string& key, const std::string& value) {
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
      base_ns_ = v;
    } else if (!p.parse(ps).get(e) && !e.get_uint64().get(u) && u < (uint64_t(1) << 63)) {
      base_ns_ = int64_t(u);
    } else {
      throw InputError(std::string("$.baseTimeNanoseconds"), "expected an integer number of nanoseconds, found " +
                                                                  printable(value.substr(0, 40)));
    }
    have_base_ = true;
    meta_.push_back({"profiler.baseTimeNanoseconds", std::to_string(base_ns_)});
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
      meta_.push_back({"gpu." + std::to_string(id), v});
    }
  } else if (key == "schemaVersion") {
    schema_version_ = text();
  } else if (key == "cuda_runtime_version" || key == "cuda_driver_version" || key == "with_stack" ||
             key == "profile_memory" || key == "record_shapes" || key == "with_flops" || key == "trace_id") {
    meta_.push_back({"profiler." + key, text()});
  }
}

void ChromeTraceReader::read(ByteStream& in, const ProgressFn& progress) {
  // Threads: the main thread splits the stream into batches of complete
  // events and parses some of them itself; the others go to workers. Small
  // inputs are parsed on the main thread alone.
  const uint64_t hint = in.decoded_hint();
  unsigned hw = std::thread::hardware_concurrency();
  if (hw == 0) hw = 1;
  // Parsing a plain file on one thread already runs at several hundred
  // MB/s; on a 2-core machine a worker only pays when the reading thread
  // inflates gzip (measured: docs/performance.md). Small inputs: no threads.
  const int forced = g_workers.load();
  const bool worth = hint >= (uint64_t(16) << 20) && (hw >= 4 || (hw >= 2 && in.compressed()));
  const unsigned workers = forced >= 0 ? unsigned(forced) : worth ? std::min(hw - 1, 3u) : 0;
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
  auto run_batch = [&](Shard& sh, const Batch& b) {
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
    if (!js.saw_array()) throw InputError(std::string("$"), "not a Chrome trace: no \"traceEvents\" array");
    t_.source.decoded_bytes = js.position();
  } catch (...) {
    split_error = std::current_exception();
  }
  stop_workers();
  // A parse error comes from an element before the point the splitter
  // reached: report the earliest one.
  const Shard* first = nullptr;
  for (auto& sh : shards)
    if (sh->error && (!first || sh->error_index < first->error_index)) first = sh.get();
  if (first) std::rethrow_exception(first->error);
  if (split_error) std::rethrow_exception(split_error);
  merge(shards);
  shards.clear();
  build();
}

// Global ids for the shards' names and threads, in order of first
// appearance in the file, then all records in global terms.
void ChromeTraceReader::merge(std::vector<std::unique_ptr<Shard>>& shards) {
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
      auto [it, fresh] = py_index.emplace(f, uint32_t(py_frames_.size()));
      if (fresh) py_frames_.push_back(f);
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
  threads_ = global.size();
  // Records: renumbered in place, then concatenated onto the largest
  // shard's array (no second copy of the bulk).
  for (uint32_t k = 0; k < shards.size(); ++k) {
    Shard& sh = *shards[k];
    events_ += sh.events;
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
  concat(&Shard::ranges, ranges_);
  concat(&Shard::mem, mem_);
  concat(&Shard::launches, launches_);
  concat(&Shard::gpu, gpu_);
  concat(&Shard::flows, flows_);
}

FrameId ChromeTraceReader::range_frame(const RangeRec& r) {
  if (r.kind == kPython) return py_frames_[r.label];
  if (name_frame_.size() <= r.label) name_frame_.resize(size_t(r.label) + 1, UINT32_MAX);
  FrameId& f = name_frame_[r.label];
  if (f == UINT32_MAX) {
    Frame fr;
    fr.name = r.label;
    f = t_.intern_frame(fr);
  }
  return f;
}

StackId ChromeTraceReader::stack_of(uint32_t r) {
  if (stack_[r] != UINT32_MAX) return stack_[r];
  // Walk up to the first range with a stack, then come back down.
  std::vector<uint32_t> chain;
  uint32_t x = r;
  while (x != UINT32_MAX && stack_[x] == UINT32_MAX) {
    chain.push_back(x);
    x = parent_[x];
  }
  StackId s = x == UINT32_MAX ? 0 : stack_[x];
  for (size_t i = chain.size(); i-- > 0;) {
    s = t_.stacks.child(s, range_frame(ranges_[chain[i]]));
    stack_[chain[i]] = s;
  }
  return s;
}

void ChromeTraceReader::build() {
  // GPU activities in file order, launches in a fixed one (shards hand
  // them over in any order).
  std::sort(gpu_.begin(), gpu_.end(), [](const GpuRec& a, const GpuRec& b) { return a.order < b.order; });
  std::sort(launches_.begin(), launches_.end(), [](const LaunchRec& a, const LaunchRec& b) {
    if (a.corr != b.corr) return a.corr < b.corr;
    if (a.ts != b.ts) return a.ts < b.ts;
    return a.thread < b.thread;
  });
  // Flow starts in a fixed order (the first of equal ids wins below).
  std::sort(flows_.begin(), flows_.end(), [](const FlowRec& a, const FlowRec& b) {
    return a.id != b.id ? a.id < b.id : a.ts < b.ts;
  });
  // 1. Nesting per thread.
  std::sort(ranges_.begin(), ranges_.end(), [](const RangeRec& a, const RangeRec& b) {
    if (a.thread != b.thread) return a.thread < b.thread;
    if (a.start != b.start) return a.start < b.start;
    if (a.end != b.end) return a.end > b.end;
    if (a.kind != b.kind) return a.kind < b.kind;
    if (a.label != b.label) return a.label < b.label;
    return a.ext < b.ext;
  });
  const size_t nr = ranges_.size();
  parent_.assign(nr, UINT32_MAX);
  stack_.assign(nr, StackId(UINT32_MAX));
  near_op_.assign(nr, kNoOp);
  {
    std::vector<uint32_t> open;
    for (uint32_t i = 0; i < nr; ++i) {
      const RangeRec& r = ranges_[i];
      if (i == 0 || ranges_[i - 1].thread != r.thread) open.clear();
      while (!open.empty() && ranges_[open.back()].end < r.end) open.pop_back();
      parent_[i] = open.empty() ? UINT32_MAX : open.back();
      open.push_back(i);
    }
  }
  // 2. Ops in pre-order (the sorted order), with their op parents.
  HugeVec<uint32_t> op_of_range(nr, kNoOp);
  t_.ops.clear();
  {
    size_t nops = 0;
    for (const RangeRec& r : ranges_) nops += r.kind == kOp;
    reserve_huge(t_.ops, nops);
  }
  for (uint32_t i = 0; i < nr; ++i) {
    const RangeRec& r = ranges_[i];
    const uint32_t up = parent_[i] == UINT32_MAX ? kNoOp : near_op_[parent_[i]];
    if (r.kind == kOp) {
      TraceOp op;
      op.name = r.label;
      op.time_us = abs_us(base_ns_, r.start);
      op.duration_ns = wrap_sub(r.end, r.start);
      op.thread = r.thread;
      op.parent = up;
      op_of_range[i] = uint32_t(t_.ops.size());
      near_op_[i] = op_of_range[i];
      t_.ops.push_back(op);
    } else {
      near_op_[i] = up;
    }
  }
  {
    const size_t n = t_.ops.size();
    for (size_t i = 0; i < n; ++i) t_.ops[i].subtree_end = uint32_t(i + 1);
    for (size_t i = n; i-- > 0;) {
      uint32_t p = t_.ops[i].parent;
      if (p != kNoOp) t_.ops[p].subtree_end = std::max(t_.ops[p].subtree_end, t_.ops[i].subtree_end);
    }
  }
  // 3. Points (memory events, launches, flow starts) into their innermost
  // range. Memory events are put in time order first (ties: file order).
  std::sort(mem_.begin(), mem_.end(), [](const MemRec& a, const MemRec& b) {
    if (a.ts != b.ts) return a.ts < b.ts;
    return a.order < b.order;
  });
  struct Point {
    uint32_t thread;
    int64_t ts;
    uint32_t which;  // 0 mem, 1 launch, 2 flow
    uint32_t idx;
  };
  HugeVec<Point> pts;
  reserve_huge(pts, mem_.size() + launches_.size() + flows_.size());
  for (uint32_t i = 0; i < mem_.size(); ++i) pts.push_back({mem_[i].thread, mem_[i].ts, 0, i});
  for (uint32_t i = 0; i < launches_.size(); ++i) pts.push_back({launches_[i].thread, launches_[i].ts, 1, i});
  for (uint32_t i = 0; i < flows_.size(); ++i) pts.push_back({flows_[i].thread, flows_[i].ts, 2, i});
  std::sort(pts.begin(), pts.end(), [](const Point& a, const Point& b) {
    if (a.thread != b.thread) return a.thread < b.thread;
    if (a.ts != b.ts) return a.ts < b.ts;
    if (a.which != b.which) return a.which < b.which;
    return a.idx < b.idx;
  });
  HugeVec<uint32_t> mem_range(mem_.size(), UINT32_MAX), launch_range(launches_.size(), UINT32_MAX),
      flow_range(flows_.size(), UINT32_MAX);
  {
    size_t ri = 0;
    std::vector<uint32_t> open;
    uint32_t cur_thread = UINT32_MAX;
    for (const Point& p : pts) {
      if (p.thread != cur_thread) {
        cur_thread = p.thread;
        open.clear();
        while (ri < nr && ranges_[ri].thread < cur_thread) ++ri;
      }
      while (ri < nr && ranges_[ri].thread == cur_thread && ranges_[ri].start <= p.ts) {
        while (!open.empty() && ranges_[open.back()].end < ranges_[ri].start) open.pop_back();
        open.push_back(uint32_t(ri));
        ++ri;
      }
      while (!open.empty() && ranges_[open.back()].end < p.ts) open.pop_back();
      uint32_t r = open.empty() ? UINT32_MAX : open.back();
      (p.which == 0 ? mem_range : p.which == 1 ? launch_range : flow_range)[p.idx] = r;
    }
  }

  // 4. GPU activities and their launches.
  // Launches by correlation id: a sorted index (ids are unique per launch).
  HugeVec<std::pair<int64_t, uint32_t>> by_corr;
  reserve_huge(by_corr, launches_.size());
  for (uint32_t i = 0; i < launches_.size(); ++i) by_corr.push_back({launches_[i].corr, i});
  std::sort(by_corr.begin(), by_corr.end());
  auto find_launch = [&](int64_t corr) -> uint32_t {
    auto it = std::lower_bound(by_corr.begin(), by_corr.end(), std::make_pair(corr, uint32_t(0)));
    return it != by_corr.end() && it->first == corr ? it->second : UINT32_MAX;
  };
  // The fallbacks, built only when a GPU activity has no launch record.
  std::unordered_map<int64_t, uint32_t> op_by_ext, flow_by_id;
  bool fallbacks = false;
  struct K {
    KernelLaunch k;
    uint64_t order;
  };
  HugeVec<K> ks;
  ks.reserve(gpu_.size());
  for (uint32_t i = 0; i < gpu_.size(); ++i) {
    const GpuRec& g = gpu_[i];
    KernelLaunch k;
    k.device = g.device;
    k.name = g.name;
    k.stream = uint64_t(g.stream);
    int64_t when = g.ts;
    uint32_t range = UINT32_MAX;
    const uint32_t li = g.corr >= 0 ? find_launch(g.corr) : UINT32_MAX;
    if (li == UINT32_MAX && !fallbacks) {
      fallbacks = true;
      for (uint32_t r = 0; r < nr; ++r)
        if (ranges_[r].kind == kOp && ranges_[r].ext >= 0) op_by_ext.emplace(ranges_[r].ext, r);
      for (uint32_t f = 0; f < flows_.size(); ++f) flow_by_id.emplace(flows_[f].id, f);
    }
    if (li != UINT32_MAX) {
      when = launches_[li].ts;
      range = launch_range[li];
    } else if (auto oit = g.ext >= 0 ? op_by_ext.find(g.ext) : op_by_ext.end(); oit != op_by_ext.end()) {
      range = oit->second;
    } else if (auto fit = g.corr >= 0 ? flow_by_id.find(g.corr) : flow_by_id.end(); fit != flow_by_id.end()) {
      when = flows_[fit->second].ts;
      range = flow_range[fit->second];
    }
    k.time_us = abs_us(base_ns_, when);
    if (range != UINT32_MAX) {
      k.stack = stack_of(range);
      k.op = near_op_[range];
    }
    ks.push_back({k, g.order});
  }
  std::sort(ks.begin(), ks.end(), [](const K& a, const K& b) {
    return a.k.time_us != b.k.time_us ? a.k.time_us < b.k.time_us : a.order < b.order;
  });
  t_.kernels.clear();
  t_.kernels.reserve(ks.size());
  for (const K& k : ks) t_.kernels.push_back(k.k);
  // Each op's own launches, grouped in op order, chronological within an op.
  {
    std::vector<uint32_t> count(t_.ops.size() + 1, 0);
    for (const KernelLaunch& k : t_.kernels)
      if (k.op != kNoOp) ++count[k.op];
    uint32_t off = 0;
    for (size_t i = 0; i < t_.ops.size(); ++i) {
      t_.ops[i].first_kernel = off;
      t_.ops[i].kernel_count = count[i];
      off += count[i];
    }
    t_.op_kernels.assign(off, 0);
    std::vector<uint32_t> fill(t_.ops.size(), 0);
    for (uint32_t i = 0; i < t_.kernels.size(); ++i) {
      uint32_t op = t_.kernels[i].op;
      if (op == kNoOp) continue;
      t_.op_kernels[t_.ops[op].first_kernel + fill[op]++] = i;
    }
  }

  // 5. Memory events per device (sorted by time before step 3).
  StackId before_stack = 0;
  {
    Frame f;
    f.name = t_.strings.intern("<allocated before the profiler started>");
    before_stack = t_.stacks.child(0, t_.intern_frame(f));
  }
  {
    std::map<int32_t, size_t> per_device;
    for (const MemRec& m : mem_)
      if (m.device >= 0) ++per_device[m.device];
    for (auto& kv : per_device) {
      Device& d = t_.device(kv.first);
      reserve_huge(d.events, kv.second);
      reserve_huge(d.reported_allocated, kv.second);
      reserve_huge(d.reported_reserved, kv.second);
      reserve_huge(d.event_op, kv.second);
    }
  }
  for (size_t i = 0; i < mem_.size(); ++i) {
    const MemRec& m = mem_[i];
    const int64_t t_us = abs_us(base_ns_, m.ts);
    const uint32_t r = mem_range[i];
    if (m.device < 0) {
      HostMemoryEvent h;
      h.time_us = t_us;
      h.addr = m.addr;
      h.bytes = m.bytes;
      h.total_allocated = m.total_alloc;
      t_.host_memory.push_back(h);
      continue;
    }
    Device& d = t_.device(m.device);
    if (!d.has_trace) {
      d.has_trace = true;
      d.before_stack = before_stack;
      d.allocated_before = m.has_alloc ? wrap_sub(m.total_alloc, m.kind == kMemOom ? 0 : m.bytes) : 0;
    }
    Event e;
    e.kind = m.kind == kMemOom ? EventKind::Oom : m.kind == kMemAlloc ? EventKind::Alloc : EventKind::FreeRequested;
    e.addr = m.kind == kMemOom ? 0 : m.addr;
    e.size = m.bytes < 0 ? uint64_t(0) - uint64_t(m.bytes) : uint64_t(m.bytes);
    e.time_us = t_us;
    if (r != UINT32_MAX) e.stack = stack_of(r);
    d.events.push_back(e);
    const int64_t prev_alloc = d.reported_allocated.empty() ? d.allocated_before : d.reported_allocated.back();
    const int64_t delta = m.kind == kMemOom ? 0 : m.bytes;
    d.reported_allocated.push_back(m.has_alloc ? m.total_alloc : wrap_add(prev_alloc, delta));
    const int64_t prev_res = d.reported_reserved.empty() ? 0 : d.reported_reserved.back();
    d.reported_reserved.push_back(m.has_res ? m.total_res : prev_res);
    d.event_op.push_back(r == UINT32_MAX ? kNoOp : near_op_[r]);
  }

  // Stacks of the ops that launched a kernel or enclose an event, and of
  // their enclosing ops (the rest are never looked at).
  {
    std::vector<uint32_t> range_of_op(t_.ops.size(), UINT32_MAX);
    for (uint32_t i = 0; i < nr; ++i)
      if (op_of_range[i] != kNoOp) range_of_op[op_of_range[i]] = i;
    std::vector<char> need(t_.ops.size(), 0);
    auto mark = [&](uint32_t op) {
      for (; op != kNoOp && !need[op]; op = t_.ops[op].parent) need[op] = 1;
    };
    for (const KernelLaunch& k : t_.kernels) mark(k.op);
    for (const Device& d : t_.devices)
      for (uint32_t op : d.event_op) mark(op);
    for (uint32_t i = 0; i < t_.ops.size(); ++i)
      if (need[i]) t_.ops[i].stack = stack_of(range_of_op[i]);
  }

  // 6. record_function ranges as annotations (the attribution reads
  // Optimizer.step#... spans from them).
  {
    std::vector<Annotation> an;
    for (const RangeRec& r : ranges_) {
      if (r.kind != kAnnotation) continue;
      an.push_back({-1, abs_us(base_ns_, r.start), r.label, true});
      an.push_back({-1, abs_us(base_ns_, r.end), r.label, false});
    }
    std::stable_sort(an.begin(), an.end(), [](const Annotation& a, const Annotation& b) {
      if (a.time_us != b.time_us) return a.time_us < b.time_us;
      return !a.start && b.start;  // an end before a start at the same time
    });
    t_.annotations = std::move(an);
  }

  // 7. What the report shows about the input.
  t_.source.format = "chrome-trace";
  t_.source.format_detail = "torch.profiler / Kineto" + (schema_version_.empty() ? std::string() : ", schemaVersion " + schema_version_);
  t_.source.shape = have_base_ ? "traceEvents, baseTimeNanoseconds" : "traceEvents, absolute timestamps";
  for (auto& kv : meta_) t_.metadata.push_back(kv);
  t_.metadata.push_back({"profiler.trace_events", std::to_string(events_)});
  t_.metadata.push_back({"profiler.threads", std::to_string(threads_)});
  std::sort(t_.devices.begin(), t_.devices.end(), [](const Device& a, const Device& b) { return a.index < b.index; });

  // The records are no longer needed.
  HugeVec<RangeRec>().swap(ranges_);
  HugeVec<MemRec>().swap(mem_);
  HugeVec<LaunchRec>().swap(launches_);
  HugeVec<GpuRec>().swap(gpu_);
  HugeVec<FlowRec>().swap(flows_);
}

}  // namespace

void set_trace_reader_workers(int n) { g_workers.store(n); }

void read_chrome_trace(ByteStream& in, Trace& out, const ProgressFn& progress) {
  ChromeTraceReader r(out);
  r.read(in, progress);
}

}  // namespace snapdiff::detail
