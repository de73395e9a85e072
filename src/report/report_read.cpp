// The report view read back from the JSON render_json() writes: the inverse
// of json_report.cpp (and of the JSON parts of oom_report.cpp,
// profiler_report.cpp and facts_json.cpp), one reader per writer. Ids that
// point into a Trace (StackId, FrameId, rule indices) are not in the JSON and
// stay unset; what the renderers show comes back whole.
#include "snapdiff/report/report_read.hpp"

#include <cstring>
#include <functional>
#include <type_traits>
#include <limits>
#include <nlohmann/json.hpp>
#include <simdjson.h>
#include <vector>

#include "report/format.hpp"
#include "snapdiff/error.hpp"
#include "snapdiff/report/report.hpp"
#include "snapdiff/view/fields.hpp"
#include "util/json_depth.hpp"

namespace snapdiff {

namespace {

// simdjson's DOM holds the document (parsed in one pass, keys in their
// order); nlohmann only tells where malformed JSON goes wrong.
using E = simdjson::dom::element;
using simdjson::dom::element_type;

// A JSON value and its path ("$.devices[0].peak"): every read checks the
// type and names the path when it is wrong.
class In {
 public:
  In(E v, std::string path) : v_(v), path_(std::move(path)) {}

  [[noreturn]] void fail(const std::string& what) const { throw InputError(path_, what); }
  const std::string& path() const { return path_; }
  bool null() const { return v_.is_null(); }

  // A member that must be there.
  In operator[](const char* key) const {
    E x;
    if (object().at_key(key).get(x) != simdjson::SUCCESS) throw InputError(path_ + "." + key, "missing");
    return In(x, path_ + "." + key);
  }
  bool has(const char* key) const {
    E x;
    return object().at_key(key).get(x) == simdjson::SUCCESS;
  }
  size_t size() const { return array().size(); }
  // An array's elements in order, with their paths.
  template <class F>
  void each(F f) const {
    size_t i = 0;
    for (E x : array()) f(In(x, path_ + "[" + std::to_string(i++) + "]"));
  }
  // The elements of an array of exactly n.
  std::vector<In> elements(size_t n) const {
    std::vector<In> v;
    each([&](const In& x) { v.push_back(x); });
    if (v.size() != n) fail("expected " + std::to_string(n) + " elements");
    return v;
  }
  // An object's members in their order.
  template <class F>
  void items(F f) const {
    for (simdjson::dom::key_value_pair kv : object()) {
      const std::string key(kv.key);
      f(key, In(kv.value, path_ + "." + key));
    }
  }

  int64_t i64() const {
    if (v_.type() == element_type::INT64) return int64_t(v_.get_int64());
    if (v_.type() == element_type::UINT64) fail("integer out of range");
    fail("expected an integer");
  }
  uint64_t u64() const {
    if (v_.type() == element_type::UINT64) return uint64_t(v_.get_uint64());
    if (v_.type() == element_type::INT64) {
      const int64_t x = int64_t(v_.get_int64());
      if (x < 0) fail("expected an integer of 0 or more");
      return uint64_t(x);
    }
    fail("expected an integer");
  }
  int i32() const {
    const int64_t v = i64();
    if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) fail("integer out of range");
    return int(v);
  }
  size_t size_value() const { return size_t(u64()); }
  double f64() const {
    double d;
    if (!v_.is_number() || v_.get_double().get(d) != simdjson::SUCCESS) fail("expected a number");
    return d;
  }
  bool b() const {
    if (v_.type() != element_type::BOOL) fail("expected true or false");
    return bool(v_.get_bool());
  }
  std::string s() const {
    if (v_.type() != element_type::STRING) fail("expected a string");
    return std::string(std::string_view(v_.get_string()));
  }
  // Nullable: null gives `none`.
  int64_t i64_or(int64_t none) const { return null() ? none : i64(); }
  std::string s_or_empty() const { return null() ? std::string() : s(); }

  Phase phase() const {
    Phase p;
    if (!phase_from_name(s(), &p)) fail("unknown phase '" + s() + "'");
    return p;
  }
  Truncation truncation() const {
    Truncation t;
    if (!truncation_from_name(s(), &t)) fail("unknown truncation '" + s() + "'");
    return t;
  }
  Code code() const {
    Code c;
    if (!code_from_name(s(), &c)) fail("unknown code '" + s() + "'");
    return c;
  }

 private:
  simdjson::dom::object object() const {
    simdjson::dom::object o;
    if (v_.get_object().get(o) != simdjson::SUCCESS) fail("expected an object");
    return o;
  }
  simdjson::dom::array array() const {
    simdjson::dom::array a;
    if (v_.get_array().get(a) != simdjson::SUCCESS) fail("expected an array");
    return a;
  }
  E v_;
  std::string path_;
};

// ---- The field lists' reader (snapdiff/view/fields.hpp) -------------------

// The index of a category by its name (-1 for null).
int category_index(const In& j, const std::vector<std::string>& names) {
  if (j.null()) return -1;
  const std::string n = j.s();
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == n) return int(i);
  j.fail("unknown category '" + n + "'");
}

// A category -> bytes object, in the device's category order (the writer
// stops at the shorter of the names and the figures: a prefix of the names).
std::vector<int64_t> read_categories(const In& j, const std::vector<std::string>& names) {
  std::vector<int64_t> v;
  j.items([&](const std::string& key, const In& x) {
    if (v.size() >= names.size() || names[v.size()] != key) x.fail("unexpected category '" + key + "'");
    v.push_back(x.i64());
  });
  return v;
}

// The size classes analyze() counts free blocks in (src/analysis/analyze.cpp):
// FreeSizeClass::label points at a name, so the names read back are these.
constexpr struct {
  const char* label;
  uint64_t max_bytes;
} kFreeSizeClasses[] = {{"< 1 MiB", uint64_t(1) << 20},
                        {"1-20 MiB", uint64_t(20) << 20},
                        {"20-200 MiB", uint64_t(200) << 20},
                        {">= 200 MiB", UINT64_MAX}};

// The sections still read by hand (below).
class JsonReader;
void read_facts(const In& j, Finding& f);
void read_facts(const In& j, Warning& w);
void read_ops(const In& j, DeviceView& d);
OomView read_oom(const In& j);
OutsideDevice read_outside(const In& x);
TimelineComparison read_timeline(const In& j, const Report& r);

class JsonReader {
 public:
  explicit JsonReader(const In& in) : in_(in) {}

  bool labels = true;
  const std::vector<std::string>* names = nullptr;

  template <class T>
  void operator()(const char* key, T& m) {
    read(in_[key], m);
  }
  template <class T, class L>
  void operator()(const char* key, T& m, L list) {
    read(in_[key], m, list);
  }
  template <class T, class N>
  void null_if(const char* key, T& m, const N& none) {
    const In x = in_[key];
    if (x.null()) m = none;
    else read(x, m);
  }
  void time(const char* key, int64_t& t) { null_if(key, t, kNoTime); }
  template <class T>
  void null_unless(const char* key, bool ok, T& m) {
    const In x = in_[key];
    if (x.null()) return;
    if (!ok) x.fail("expected null");
    read(x, m);
  }
  template <class T>
  void flag_null(const char* key, bool& flag, T& m) {
    const In x = in_[key];
    flag = !x.null();
    if (flag) read(x, m);
  }
  template <class F>
  void group(const char* key, F fn) {
    inside(in_[key], fn);
  }
  template <class F>
  void group_or_null(const char* key, bool& flag, F fn) {
    const In x = in_[key];
    flag = !x.null();
    if (flag) inside(x, fn);
  }
  template <class B, class F>
  void when(B& flag, const char* key, F fn) {
    const bool has = in_.has(key);
    if constexpr (!std::is_const_v<B>) flag = has;
    if (has) fn();
  }
  template <class T>
  void computed(const char*, const T&) {}
  // Words are written, not read back: a string.
  template <class T>
  void words(const char* key, const T&) {
    (void)in_[key].s();
  }
  // Checked once the object is read: the fields it is derived from come later.
  template <class F>
  void derived(const char* key, F fn, const char* msg) {
    checks_.push_back([x = in_[key], fn, msg] {
      using T = decltype(fn());
      bool same;
      if constexpr (std::is_same_v<T, bool>) same = x.b() == fn();
      else if constexpr (std::is_same_v<T, std::string>) same = x.s() == fn();
      else same = x.i64() == int64_t(fn());
      if (!same) x.fail(msg);
    });
  }
  template <class F>
  void derived_time(const char* key, F fn, const char* msg) {
    checks_.push_back([x = in_[key], fn, msg] {
      if (x.i64_or(kNoTime) != fn()) x.fail(msg);
    });
  }
  template <class T>
  void categories(const char* key, std::vector<T>& v) {
    static const std::vector<std::string> kNone;
    const std::vector<std::string>& n = names ? *names : kNone;
    v.clear();
    in_[key].items([&](const std::string& name, const In& x) {
      if (v.size() >= n.size() || n[v.size()] != name) x.fail("unexpected category '" + name + "'");
      read(x, v.emplace_back());
    });
  }
  void names_ahead(const char* key, std::vector<std::string>& n) {
    n.clear();
    in_[key].items([&](const std::string& name, const In&) { n.push_back(name); });
    names = &n;
  }
  void category(const char* key, int& index, std::string& name) {
    static const std::vector<std::string> kNone;
    const std::vector<std::string>& n = names ? *names : kNone;
    index = category_index(in_[key], n);
    if (index >= 0) name = n[size_t(index)];
  }
  void rule(const char* key, bool& has, std::string& name) {
    const In x = in_[key];
    if (!x.null()) has = true, name = x.s();
  }

  void special(const char* key, view::Pair, Growth& g) {
    const In judged = in_[key];
    if (judged.null()) return;
    const std::vector<In> fl = judged.elements(2);
    g.judged_first = fl[0].i32();
    g.judged_last = fl[1].i32();
  }
  void special(const char* key, view::SizeClass, FreeSizeClass& fc) {
    const In name = in_[key];
    const std::string label = name.s();
    fc.label = nullptr;
    for (const auto& k : kFreeSizeClasses)
      if (label == k.label) fc.label = k.label, fc.max_bytes = k.max_bytes;
    if (!fc.label) name.fail("unknown size class '" + label + "'");
  }
  // "<1234 frames elided>" is the frames a deep stack leaves out (their
  // label the same words, not kept).
  void special(const char* key, view::FrameName, FrameRef& f) {
    std::string name = in_[key].s();
    f.elided = detail::elided_count(name);
    if (f.elided == 0) f.name = std::move(name);
  }
  void special(const char* key, view::FrameLabel, FrameRef& f) {
    std::string label = in_[key].s();
    if (f.elided == 0) f.label = std::move(label);
  }
  void special(const char* key, view::Evidence, ExplainItem& x) {
    x.evidence = in_[key].s();
    x.inferred.clear();
  }
  void special(const char* key, view::OutsidePid, uint32_t& pid) {
    const In x = in_[key];
    if (x.null()) return;
    const uint64_t p = x.u64();
    if (p == 0 || p > UINT32_MAX) x.fail("expected a process id");
    pid = uint32_t(p);
  }
  static void history(const In& x, bool& has, bool& truncated) {
    const std::string h = x.s();
    if (h != "none" && h != "truncated" && h != "complete") x.fail("unknown history '" + h + "'");
    has = h != "none";
    truncated = h == "truncated";
  }
  void special(const char* key, view::History, DeviceView& d) { history(in_[key], d.has_trace, d.truncated); }
  void special(const char* key, view::History, Report& r) { history(in_[key], r.has_history, r.history_truncated); }
  template <class S>
  void special(const char*, view::Facts, S& x) {
    read_facts(in_, x);
  }
  void special(const char*, view::Ops, DeviceView& d) {
    if (in_.has("by_op") || in_.has("kernel_coverage")) read_ops(in_, d);
  }
  // Checked against $.devices once they are read (read_report).
  void special(const char* key, view::DeviceNumbers, Report&) { listed.emplace(in_[key]); }
  void special(const char* key, view::TopPeak, Report&) { top_device.emplace(in_[key]["device"]); }
  void special(const char*, view::TopDevice, Report&) {}
  void special(const char* key, view::Profiler, Report& r) {
    const In p = in_[key];
    r.ops = p["ops"].u64();
    r.host_memory_events = p["cpu_memory_events"].u64();
    r.host_peak_bytes = p["cpu_memory_peak_bytes"].i64();
    r.profiler_trace = p["trace"].b();
  }
  void special(const char* key, view::Oom, Report& r) {
    const In o = in_[key];
    r.ooms.push_back(read_oom(o));
    o["other_devices"].each([&](const In& x) { r.ooms.push_back(read_oom(x)); });
  }
  void special(const char* key, view::Outside, Report& r) {
    in_[key].each([&](const In& x) { r.outside.push_back(read_outside(x)); });
  }
  void special(const char* key, view::Timeline, Report& r) { r.timeline = read_timeline(in_[key], r); }
  void special(const char* key, view::Recorded, AllocatorSettings& s) {
    in_[key].items([&](const std::string& k, const In& v) { s.raw.emplace_back(k, v.s()); });
  }
  std::optional<In> listed, top_device;

  template <class T>
  void read(const In& x, T& m) {
    if constexpr (std::is_same_v<T, bool>) {
      m = x.b();
    } else if constexpr (std::is_same_v<T, int>) {
      m = x.i32();
    } else if constexpr (std::is_same_v<T, int64_t>) {
      m = x.i64();
    } else if constexpr (std::is_same_v<T, uint32_t>) {
      const uint64_t v = x.u64();
      if (v > UINT32_MAX) x.fail("integer out of range");
      m = uint32_t(v);
    } else if constexpr (std::is_same_v<T, uint64_t>) {
      m = x.u64();
    } else if constexpr (std::is_same_v<T, double>) {
      m = x.f64();
    } else if constexpr (std::is_same_v<T, std::string>) {
      m = x.s();
    } else if constexpr (std::is_same_v<T, Phase>) {
      m = x.phase();
    } else if constexpr (std::is_same_v<T, Truncation>) {
      m = x.truncation();
    } else if constexpr (std::is_same_v<T, Code>) {
      m = x.code();
    } else if constexpr (std::is_same_v<T, OomCause>) {
      if (!oom_cause_from_name(x.s(), &m)) x.fail("unknown cause '" + x.s() + "'");
    } else if constexpr (std::is_same_v<T, EventKind>) {
      if (!parse_event_kind(x.s(), &m)) x.fail("unknown action '" + x.s() + "'");
    } else if constexpr (std::is_same_v<T, int64_t[2]>) {
      const std::vector<In> e = x.elements(2);
      m[0] = e[0].i64();
      m[1] = e[1].i64();
    } else if constexpr (view::IsVector<T>::value) {
      m.clear();
      m.reserve(x.size());
      x.each([&](const In& e) { read(e, m.emplace_back()); });
    } else if constexpr (view::IsOptional<T>::value) {
      if (x.null()) m.reset();
      else read(x, m.emplace());
    } else {
      inside(x, [&] { fields(*this, m); });
    }
  }
  template <class T, class L>
  void read(const In& x, T& m, L list) {
    if constexpr (view::IsVector<T>::value) {
      m.clear();
      x.each([&](const In& e) { read(e, m.emplace_back(), list); });
    } else if constexpr (view::IsOptional<T>::value) {
      if (x.null()) m.reset();
      else read(x, m.emplace(), list);
    } else {
      inside(x, [&] { list(*this, m); });
    }
  }

 private:
  template <class F>
  void inside(const In& x, F fn) {
    In was = in_;
    std::vector<std::function<void()>> checks;
    checks.swap(checks_);
    in_ = x;
    fn();
    for (const auto& c : checks_) c();
    checks_.swap(checks);
    in_ = was;
  }
  In in_;
  std::vector<std::function<void()>> checks_;
};

// A value of the view read by its field list.
template <class T>
T read_value(const In& x, const std::vector<std::string>* names = nullptr) {
  T v{};
  JsonReader r(x);
  r.names = names;
  r.read(x, v);
  return v;
}

// ---- Shared records -------------------------------------------------------

std::optional<FrameRef> read_opt_frame(const In& j) { return read_value<std::optional<FrameRef>>(j); }
std::vector<FrameRef> read_stack(const In& j) { return read_value<std::vector<FrameRef>>(j); }
void read_site_path(const In& j, SiteFrames& s) {
  JsonReader r(j);
  site_path_fields(r, s);
}

template <class T, class Get>
std::vector<T> read_by_category(const In& j, const std::vector<std::string>& names, Get get) {
  std::vector<T> v(names.size(), T{});
  j.items([&](const std::string& key, const In& x) {
    size_t i = 0;
    while (i < names.size() && names[i] != key) ++i;
    if (i == names.size()) x.fail("unknown category '" + key + "'");
    v[i] = get(x);
  });
  return v;
}

// ---- Findings and warnings (facts_json.cpp) -------------------------------

// A finding's facts by its code (j: the finding, its kind read).
void read_facts(const In& j, Finding& f) {
  const In kind = j["kind"];
  const In facts = j["facts"];
  switch (f.code) {
    case Code::Peak: f.facts = read_value<PeakFacts>(facts); break;
    case Code::OptimizerTransient: f.facts = read_value<OptimizerStepFacts>(facts); break;
    case Code::Unknown: f.facts = read_value<UnknownFacts>(facts); break;
    case Code::Growth: f.facts = read_value<GrowthFacts>(facts); break;
    case Code::DiffPeak: f.facts = read_value<DiffPeakFacts>(facts); break;
    case Code::DiffCategory: f.facts = read_value<DiffCategoryFacts>(facts); break;
    case Code::DiffOptimizerTransient: f.facts = read_value<DiffStepFacts>(facts); break;
    case Code::DiffReserved: f.facts = read_value<DiffReservedFacts>(facts); break;
    default: kind.fail("'" + kind.s() + "' is a warning, not a finding");
  }
}

// A warning's facts by its code (j: the warning, its code read).
void read_facts(const In& j, Warning& w) {
  const In code = j["code"];
  const In x = j["facts"];
  switch (w.code) {
    case Code::ProfilerWindow: w.facts = read_value<ProfilerWindowFacts>(x); break;
    case Code::HistoryTruncated: w.facts = read_value<HistoryTruncatedFacts>(x); break;
    case Code::EndStateMismatch: w.facts = read_value<EndStateFacts>(x); break;
    case Code::ReplayInconsistent: w.facts = read_value<InconsistentFacts>(x); break;
    case Code::Oom: w.facts = read_value<OomFacts>(x); break;
    case Code::OutsideAllocator: w.facts = read_value<OutsideFacts>(x); break;
    case Code::NoHistory:
    case Code::NoTimestamps:
      if (!x.null()) x.fail("expected null");
      break;
    default: code.fail("'" + code.s() + "' is a finding, not a warning");
  }
}

// ---- Device sections (json_report.cpp) ------------------------------------




SiteRow read_other_sites(const In& j) {
  SiteRow s;
  JsonReader(j).read(j, s, OtherSites{});
  return s;
}







// An op row (profiler_report.cpp row_j); by kernel, "op" is the op holding most of its bytes.
OpRow read_op_row(const In& j, const std::vector<std::string>& names, bool by_kernel) {
  OpRow r;
  (by_kernel ? r.other : r.op) = j["op"].s_or_empty();
  r.kernel = j["kernel"].s_or_empty();
  r.bytes = j["requested_bytes"].i64();
  r.count = j["count"].u64();
  r.category = category_index(j["category"], names);
  if (r.category >= 0) r.category_name = names[size_t(r.category)];
  r.python_frame = read_opt_frame(j["python_frame"]);
  r.caller = j["caller"].s_or_empty();
  r.stack_frames = read_stack(j["stack"]);
  return r;
}

void read_ops(const In& j, DeviceView& d) {
  if (j.has("kernel_coverage")) {
    // An input with launches and no ops: by_kernel alone.
    d.kernels_only = true;
    const In& c = j["kernel_coverage"];
    d.kernel_coverage.present = true;
    d.kernel_coverage.allocations = c["allocations"].u64();
    d.kernel_coverage.with_kernel = c["allocations_with_kernel"].u64();
    d.kernel_coverage.bytes = c["requested_bytes"].i64();
    d.kernel_coverage.bytes_with_kernel = c["requested_bytes_with_kernel"].i64();
    j["by_kernel"].each([&](const In& r) {
      OpRow o = read_op_row(r, d.category_names, true);
      o.other = r["site"].s_or_empty();
      d.by_kernel.push_back(std::move(o));
    });
    d.other_kernels.bytes = j["by_kernel_other"]["requested_bytes"].i64();
    d.other_kernels.count = j["by_kernel_other"]["count"].u64();
    d.kernel_rows = j["by_kernel_rows"].u64();
    return;
  }
  d.has_ops = true;
  j["by_op"].each([&](const In& r) { d.by_op.push_back(read_op_row(r, d.category_names, false)); });
  j["by_kernel"].each([&](const In& r) { d.by_kernel.push_back(read_op_row(r, d.category_names, true)); });
  d.other_ops.bytes = j["by_op_other"]["requested_bytes"].i64();
  d.other_ops.count = j["by_op_other"]["count"].u64();
  d.other_kernels.bytes = j["by_kernel_other"]["requested_bytes"].i64();
  d.other_kernels.count = j["by_kernel_other"]["count"].u64();
  d.ops_rows = j["by_op_rows"].u64();
  d.kernel_rows = j["by_kernel_rows"].u64();
}


// ---- Report sections ------------------------------------------------------



OomView read_oom(const In& j) {
  OomView v;
  v.device = j["device"].i32();
  v.errors = j["errors"].u64();
  v.event_index = j["event_index"].i64();
  v.time_us = j["time_us"].i64_or(kNoTime);
  v.since_first_event_us = j["time_since_first_event_us"].i64_or(kNoTime);
  v.phase = j["phase"].phase();
  v.iteration = j["iteration"].i32();
  v.stream = j["stream"].u64();
  v.user_frame = read_opt_frame(j["user_frame"]);
  if (v.user_frame) v.site.user = v.user_frame;
  v.site.stack = read_stack(j["stack"]);
  v.request = j["requested_bytes"].u64();
  v.segment_size = j["segment_bytes"].u64();
  v.expandable = j["expandable_segments"].b();
  v.device_free = j["device_free_bytes"].u64();
  v.device_total = j["device_total_bytes"].null() ? 0 : j["device_total_bytes"].u64();
  v.free_sample = j["device_free_sample"].s_or_empty();
  const In a = j["allocator"];
  v.held.reserved = a["reserved_bytes"].i64();
  v.held.allocated = a["allocated_bytes"].i64();
  v.held.active = a["active_bytes"].i64();
  v.held.requested = a["requested_bytes"].i64();
  v.max_reserved = a["max_reserved_bytes"].i64();
  v.free_cached = a["free_cached_bytes"].i64();
  v.free_blocks = a["free_blocks"].u64();
  v.largest_free_block = a["largest_free_block_bytes"].u64();
  v.stream_free = a["usable_free_bytes"].i64();
  v.stream_free_blocks = a["usable_free_blocks"].u64();
  v.stream_largest_free = a["usable_largest_free_block_bytes"].u64();
  v.pending_free = a["pending_free_bytes"].i64();
  const In cause = j["cause"];
  if (!oom_cause_from_name(cause.s(), &v.cause)) cause.fail("unknown cause '" + cause.s() + "'");
  const In cap = j["cap"];
  v.capped = !cap.null();
  if (v.capped) {
    v.cap_at_least = cap["at_least_bytes"].i64_or(0);
    v.cap_below = cap["below_bytes"].i64();
  }
  v.others = j["outside_allocator_bytes"].i64_or(-1);
  const In e = j["expandable"];
  v.expandable_need = e["need_bytes"].i64();
  v.expandable_room = e["room_bytes"].i64();
  v.expandable_fits = e["fits"].b();
  if (j.has("whatif") && !j["whatif"].null()) {
    const In w = j["whatif"];
    v.whatif_run = true;
    v.whatif_reproduced = w["reproduced"].b();
    w["tried"].each([&](const In& x) { v.whatif_tried.push_back(x.s()); });
    w["fit"].each([&](const In& x) { v.whatif_fit.push_back(x.s()); });
  }
  const In live = j["live"];
  v.live_allocations = live["allocations"].u64();
  v.live_requested = live["requested_bytes"].i64();
  live["categories"].items([&](const std::string& name, const In& x) {
    v.category_names.push_back(name);
    v.categories.push_back(x.i64());
  });
  v.category_allocations =
      read_by_category<uint64_t>(live["category_allocations"], v.category_names, [](const In& x) { return x.u64(); });
  live["sites"].each([&](const In& s) {
    SiteRow row;
    row.requested_bytes = s["requested_bytes"].i64();
    row.block_bytes = s["block_bytes"].i64();
    row.count = s["count"].u64();
    row.category = category_index(s["category"], v.category_names);
    if (row.category >= 0) row.category_name = v.category_names[size_t(row.category)];
    const In rule = s["rule"];
    if (!rule.null()) row.has_rule = true, row.rule_name = rule.s();
    row.site.user = read_opt_frame(s["user_frame"]);
    row.site.stack = read_stack(s["stack"]);
    read_site_path(s, row.site);
    v.sites.push_back(std::move(row));
  });
  v.other_sites = read_other_sites(live["other"]);
  return v;
}

TimelineComparison read_timeline(const In& j, const Report& r) {
  TimelineComparison c;
  c.present = true;
  c.name = j["name"].s();
  c.raw = j["raw"].b();
  c.device = j["device"].i32();
  c.pytorch_peak = j["pytorch_peak_bytes"].i64();
  c.pytorch_peak_time_us = j["pytorch_peak_time_us"].i64_or(kNoTime);
  c.method = j["method"].s();
  const DeviceView* d = nullptr;
  for (const DeviceView& x : r.devices)
    if (x.device == c.device) d = &x;
  static const std::vector<std::string> kNone;
  const std::vector<std::string>& names = d ? d->category_names : kNone;
  auto pytorch = [](const In& o) {
    std::array<int64_t, MemoryTimeline::kCategories> a{};
    for (int i = 0; i < MemoryTimeline::kCategories; ++i) a[size_t(i)] = o[MemoryTimeline::kCategoryNames[i]].i64();
    return a;
  };
  j["moments"].each([&](const In& x) {
    TimelineMoment m;
    m.label = x["label"].s();
    m.time_us = x["time_us"].i64_or(kNoTime);
    m.event_index = x["event_index"].i64();
    m.phase = x["phase"].phase();
    m.iteration = x["iteration"].i32();
    m.pytorch = pytorch(x["pytorch_categories"]);
    m.pytorch_total = x["pytorch_total_bytes"].i64();
    if (d) m.snapdiff = read_categories(x["snapdiff_categories"], names);
    m.snapdiff_total = x["snapdiff_total_bytes"].i64();
    m.unknown = x["unknown_bytes"].i64();
    m.placed = x["placed_bytes"].i64();
    m.before_profiler = x["before_profiler_bytes"].i64();
    if (c.raw) {
      m.pre_trace_live = x["pre_trace_live_bytes"].i64();
      m.pre_trace_tensors = pytorch(x["pre_trace_tensors"]);
    }
    m.unknown_by_category = read_by_category<int64_t>(x["unknown_by_category"], names, [](const In& v) { return v.i64(); });
    x["placements"].each([&](const In& p) { m.placements.push_back(read_op_row(p, names, false)); });
    m.allocations_matched = x["allocations_matched"].u64();
    m.allocations = x["allocations"].u64();
    c.moments.push_back(std::move(m));
  });
  return c;
}





// One device of `outside_allocator` (json_report.cpp, outside_report.cpp).
OutsideDevice read_outside(const In& x) {
  OutsideDevice d;
  d.device = x["device"].i32();
  x["processes"].each([&](const In& p) {
    const uint64_t v = p.u64();
    if (v > UINT32_MAX) p.fail("integer out of range");
    d.pids.push_back(uint32_t(v));
  });
  auto pid_of = [](const In& p) {
    if (p.null()) return uint32_t(0);
    const uint64_t v = p.u64();
    if (v > UINT32_MAX) p.fail("integer out of range");
    return uint32_t(v);
  };
  d.snapshot_pid = pid_of(x["snapshot_pid"]);
  d.driver_events = x["driver_events"].u64();
  d.unmatched_frees = x["unmatched_frees"].u64();
  d.samples = x["samples"].u64();
  d.total_bytes = x["total_bytes"].u64();
  d.first_time_us = x["first_time_us"].i64_or(kNoTime);
  d.peak_time_us = x["peak_time_us"].i64_or(kNoTime);
  d.peak_sample_time_us = x["peak_sample_time_us"].i64_or(kNoTime);
  d.exit_time_us = x["exit_time_us"].i64_or(kNoTime);
  d.exit_from_sample = x["exit_from_sample"].b();
  x["rows"].each([&](const In& y) {
    OutsideRow row;
    const std::string caller = y["caller"].s();
    row.context = caller == "context";
    if (!row.context) {
      bool found = false;
      for (MemoryCaller c : {MemoryCaller::Unknown, MemoryCaller::PyTorch, MemoryCaller::Nccl, MemoryCaller::Cublas,
                             MemoryCaller::Cudnn, MemoryCaller::Other})
        if (caller == memory_caller_name(c)) row.caller = c, found = true;
      if (!found) y["caller"].fail("unknown caller '" + caller + "'");
    }
    row.library = y["library"].s();
    row.pid = pid_of(y["pid"]);
    row.at_peak_known = !y["at_peak_bytes"].null();
    row.at_peak = y["at_peak_bytes"].i64_or(0);
    row.at_exit = y["at_exit_bytes"].i64();
    row.max_bytes = y["max_bytes"].i64();
    row.max_time_us = y["max_time_us"].i64_or(kNoTime);
    d.rows.push_back(std::move(row));
  });
  x["over_time"].each([&](const In& y) {
    OutsideSample s;
    s.time_us = y["time_us"].i64_or(kNoTime);
    s.label = y["label"].s();
    s.used = y["used_bytes"].i64();
    y["bytes"].each([&](const In& v) { s.bytes.push_back(v.i64()); });
    if (s.bytes.size() != d.rows.size()) y["bytes"].fail("expected " + std::to_string(d.rows.size()) + " elements, one per row");
    d.over_time.push_back(std::move(s));
  });
  d.outside_at_peak_known = !x["outside_at_peak_bytes"].null();
  d.outside_at_peak = x["outside_at_peak_bytes"].i64_or(0);
  d.outside_at_exit = x["outside_at_exit_bytes"].i64();
  if (!x["device_peak"].null()) {
    const In p = x["device_peak"];
    d.device_peak_known = true;
    d.device_peak = {p["bytes"].i64(), p["time_us"].i64_or(kNoTime), p["reserved_bytes"].i64(), p["outside_bytes"].i64()};
  }
  d.peak_allocated = x["pytorch_peak_allocated_bytes"].i64();
  d.peak_reserved = x["pytorch_peak_reserved_bytes"].i64();
  const In c = x["reserved_check"];
  d.checked_samples = c["samples"].u64();
  d.mismatched_samples = c["mismatched"].u64();
  d.largest_mismatch = c["largest_difference_bytes"].i64();
  d.first_mismatch_time_us = c["first_mismatch_time_us"].i64_or(kNoTime);
  return d;
}

Report read_report(const In& j) {
  const In schema = j["schema"];
  if (schema.s() != "snapdiff/report/1")
    schema.fail("a snapdiff report of schema \"" + schema.s() + "\", which this build does not read (it reads \"snapdiff/report/1\")");
  Report r;
  JsonReader reader(j);
  reader.read(j, r);  // by the report's field list (snapdiff/view/fields.hpp)
  // The input's device list and the top peak's device name the same devices.
  const std::vector<In> listed = reader.listed->elements(r.devices.size());
  for (size_t i = 0; i < r.devices.size(); ++i)
    if (listed[i].i32() != r.devices[i].device) listed[i].fail("disagrees with $.devices");
  if (!r.devices.empty()) {
    const In& top = *reader.top_device;
    const int dev = top.i32();
    r.peak_device = r.devices.size();
    for (size_t i = 0; i < r.devices.size(); ++i)
      if (r.devices[i].device == dev) r.peak_device = i;
    if (r.peak_device == r.devices.size()) top.fail("no such device in $.devices");
  }
  // A peak reached by an event is at the requested peak's event.
  for (size_t i = 0; i < r.devices.size(); ++i) {
    DeviceView& d = r.devices[i];
    if (!d.has_peak_event) continue;
    d.peak_index = d.peak_requested.event_index;
    if (d.peak_index < 0) j["devices"].elements(r.devices.size())[i]["peak"]["reached_by"].fail("a peak reached by an event has an event index");
  }
  if (r.kernel_join.joined() != j.has("kernel_join")) j["kernel_join"]["recording"].fail("expected the recording's name");
  if (j.has("explain") && r.explain_query.empty()) j["explain"]["query"].fail("expected the query given");
  return r;
}

}  // namespace

Report read_report_json(std::string_view text, const std::string& name) {
  try {
    detail::check_json_depth(text);
    // One parser per thread, reused: a reduce step reads thousands of summaries.
    thread_local simdjson::dom::parser parser;
    E doc;
    if (const auto error = parser.parse(text.data(), text.size()).get(doc); error != simdjson::SUCCESS) {
      // Where it goes wrong, from a parser that says.
      try {
        const nlohmann::json checked = nlohmann::json::parse(text.begin(), text.end());
        (void)checked;
      } catch (const nlohmann::json::parse_error& e) {
        throw InputError(uint64_t(e.byte > 0 ? e.byte - 1 : 0), std::string("malformed JSON: ") + e.what());
      } catch (const nlohmann::json::exception& e) {  // a number too large for a double (out_of_range.406)
        throw InputError(std::string("$"), std::string("unreadable JSON: ") + e.what());
      }
      throw InputError(std::string("$"), std::string("unreadable JSON: ") + simdjson::error_message(error));
    }
    const In root(doc, "$");
    E schema;
    if (!doc.is_object() || doc.at_key("schema").get(schema) != simdjson::SUCCESS)
      root.fail(std::string("not a snapdiff report: ") +
                (doc.is_object() ? "a JSON object without a \"schema\" key" : "not a JSON object"));
    if (!schema.is_string() || std::string_view(schema.get_string()).rfind("snapdiff/report/", 0) != 0)
      In(schema, "$.schema").fail("not a snapdiff report: its schema is " + simdjson::minify(schema));
    return read_report(root);
  } catch (InputError& e) {
    e.set_file(name);
    throw;
  }
}

}  // namespace snapdiff
