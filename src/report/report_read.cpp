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
  void categories(const char* key, std::vector<int64_t>& v) {
    static const std::vector<std::string> kNone;
    v = read_categories(in_[key], names ? *names : kNone);
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
  void special(const char* key, view::OutsidePid, uint32_t& pid) {
    const In x = in_[key];
    if (x.null()) return;
    const uint64_t p = x.u64();
    if (p == 0 || p > UINT32_MAX) x.fail("expected a process id");
    pid = uint32_t(p);
  }

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
PeakPoint read_peak_point(const In& j) { return read_value<PeakPoint>(j); }
Counters read_counters(const In& j) { return read_value<Counters>(j); }
TruncationEvidence read_truncation_evidence(const In& j) { return read_value<TruncationEvidence>(j); }

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

Finding read_finding(const In& j) {
  Finding f;
  const In kind = j["kind"];
  f.code = kind.code();
  f.bytes = j["bytes"].i64();
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
  return f;
}

Warning read_warning(const In& j) {
  Warning w;
  const In code = j["code"];
  w.code = code.code();
  w.device = j["device"].i32();
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
  return w;
}

// ---- Device sections (json_report.cpp) ------------------------------------

std::optional<KernelRef> read_kernel(const In& j) { return read_value<std::optional<KernelRef>>(j); }

void read_device_peak(const In& p, DeviceView& d) {
  d.peak_requested = read_peak_point(p["requested"]);
  d.peak_allocated = read_peak_point(p["allocated"]);
  d.peak_reserved = read_peak_point(p["reserved"]);
  d.peak_active = read_peak_point(p["active"]);
  // The flat figures repeat the points': they must agree.
  auto same = [&](const char* key, int64_t v) {
    const In x = p[key];
    if (key[0] == 't' ? x.i64_or(kNoTime) != v : x.i64() != v) x.fail("disagrees with the peak points below it");
  };
  same("requested_bytes", d.peak_requested.bytes);
  same("allocated_bytes", d.peak_allocated.bytes);
  same("reserved_bytes", d.peak_reserved.bytes);
  same("active_bytes", d.peak_active.bytes);
  same("event_index", d.peak_requested.event_index);
  same("time_us", d.peak_requested.time_us);
  d.peak_phase = p["phase"].phase();
  d.peak_iteration = p["iteration"].i32();
  d.allocated_at_peak = p["allocated_bytes_at_peak"].i64();
  d.active_at_peak = p["active_bytes_at_peak"].i64();
  const In e = p["reached_by"];
  if (!e.null()) {
    d.peak_index = d.peak_requested.event_index;
    if (d.peak_index < 0) e.fail("a peak reached by an event has an event index");
    d.has_peak_event = true;
    const In action = e["action"];
    if (!parse_event_kind(action.s(), &d.reached_by.kind)) action.fail("unknown action '" + action.s() + "'");
    d.reached_by.size = e["size"].u64();
    d.reached_by.addr = e["addr"].u64();
    d.reached_by.stream = e["stream"].u64();
    d.peak_user_frame = read_opt_frame(e["user_frame"]);
  }
  if (p.has("kernel_before")) d.kernel_before = read_kernel(p["kernel_before"]);
  if (p.has("kernel_after")) d.kernel_after = read_kernel(p["kernel_after"]);
}

SiteRow read_site(const In& j, const std::vector<std::string>& names) { return read_value<SiteRow>(j, &names); }

SiteRow read_other_sites(const In& j) {
  SiteRow s;
  JsonReader(j).read(j, s, OtherSites{});
  return s;
}

std::vector<PhaseSpan> read_phases(const In& j, const std::vector<std::string>& names) { return read_value<std::vector<PhaseSpan>>(j, &names); }

Growth read_growth(const In& j) { return read_value<Growth>(j); }

MomentView read_at(const In& j) { return read_value<MomentView>(j); }
WindowView read_window(const In& j) { return read_value<WindowView>(j); }

Fragmentation read_fragmentation(const In& j) { return read_value<Fragmentation>(j); }

EndStateCheck read_end_state(const In& j) { return read_value<EndStateCheck>(j); }

std::vector<PoolUsage> read_pools(const In& j) { return read_value<std::vector<PoolUsage>>(j); }

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

DeviceView read_device(const In& j) {
  DeviceView d;
  d.device = j["device"].i32();
  d.events = j["events"].u64();
  d.streams = j["streams"].u64();
  const In history = j["history"];
  const std::string h = history.s();
  if (h != "none" && h != "truncated" && h != "complete") history.fail("unknown history '" + h + "'");
  d.has_trace = h != "none";
  d.truncated = h == "truncated";
  d.truncation = j["truncation"].truncation();
  d.truncation_evidence = read_truncation_evidence(j["truncation_evidence"]);
  d.first_time_us = j["first_time_us"].i64_or(kNoTime);
  d.last_time_us = j["last_time_us"].i64_or(kNoTime);
  read_device_peak(j["peak"], d);
  const In before = j["before_first_event"];
  d.baseline = read_counters(before);
  d.pre_trace_allocations = before["allocations"].u64();
  d.allocated_estimated = before["allocated_estimated"].b();
  // The categories first: rows name them.
  j["categories"].items([&](const std::string& name, const In& v) {
    d.category_names.push_back(name);
    d.categories.push_back(v.i64());
  });
  d.category_allocations =
      read_by_category<uint64_t>(j["category_allocations"], d.category_names, [](const In& x) { return x.u64(); });
  d.category_sites = read_by_category<uint64_t>(j["category_sites"], d.category_names, [](const In& x) { return x.u64(); });
  const In live = j["live_at_peak"];
  d.peak_live_allocations = live["allocations"].u64();
  d.peak_live_requested = live["requested_bytes"].i64();
  live["sites"].each([&](const In& s) { d.sites.push_back(read_site(s, d.category_names)); });
  d.other_sites = read_other_sites(live["other"]);
  d.phase_evidence = j["phase_evidence"].s();
  d.iterations = j["iterations"].i32();
  d.phases = read_phases(j["phases"], d.category_names);
  d.growth = read_growth(j["growth"]);
  if (j.has("at")) d.at = read_at(j["at"]);
  if (j.has("window")) d.window = read_window(j["window"]);
  j["unknown_at_peak"].each([&](const In& s) { d.unknown_sites.push_back(read_site(s, d.category_names)); });
  j["findings"].each([&](const In& f) { d.findings.push_back(read_finding(f)); });
  d.frag = read_fragmentation(j["fragmentation_at_peak"]);
  d.end_check = read_end_state(j["end_state"]);
  d.pools = read_pools(j["pools"]);
  d.inconsistencies = j["replay_inconsistencies"].u64();
  d.oom_events = j["oom_events"].u64();
  if (j.has("counters")) {
    const In c = j["counters"];
    if (c.s() != "reported") c.fail("expected \"reported\"");
    d.reported_totals = true;
  }
  if (j.has("by_op") || j.has("kernel_coverage")) read_ops(j, d);
  return d;
}

// ---- Report sections ------------------------------------------------------

void read_input(const In& in, Report& r) {
  r.input_name = in["name"].s();
  r.source.format = in["format"].s();
  r.source.format_detail = in["format_detail"].s();
  r.source.gzip = in["gzip"].b();
  r.source.file_bytes = in["file_bytes"].u64();
  r.source.shape = in["shape"].s();
  r.events = in["events"].u64();
  const In history = in["history"];
  const std::string h = history.s();
  if (h != "none" && h != "truncated" && h != "complete") history.fail("unknown history '" + h + "'");
  r.has_history = h != "none";
  r.history_truncated = h == "truncated";
  r.truncation = in["truncation"].truncation();
  if (in.has("kernel_launches")) r.kernel_launches = in["kernel_launches"].u64();
  if (in.has("profiler")) {
    const In p = in["profiler"];
    r.ops = p["ops"].u64();
    r.host_memory_events = p["cpu_memory_events"].u64();
    r.host_peak_bytes = p["cpu_memory_peak_bytes"].i64();
    r.profiler_trace = p["trace"].b();
  }
}

void read_allocator_settings(const In& j, AllocatorSettings& s) {
  s.present = j["present"].b();
  s.expandable_segments = j["expandable_segments"].b();
  s.max_split_size = j["max_split_size"].i64_or(-1);
  j["recorded"].items([&](const std::string& k, const In& v) { s.raw.emplace_back(k, v.s()); });
}

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

TraceActivity read_activity(const In& j) {
  TraceActivity a = read_value<TraceActivity>(j);
  a.present = true;
  return a;
}

TraceJoin read_join(const In& j) { return read_value<TraceJoin>(j); }

KernelJoin read_kernel_join(const In& j) {
  KernelJoin k = read_value<KernelJoin>(j);
  if (k.recording_name.empty()) j["recording"].fail("expected the recording's name");
  return k;
}

void read_explain(const In& j, Report& r) {
  r.explain_query = j["query"].s();
  if (r.explain_query.empty()) j["query"].fail("expected the query given");
  r.explain_total = j["matches"].u64();
  r.explain = read_value<std::vector<ExplainItem>>(j["items"]);
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
  r.site_depth = j["site_depth"].size_value();
  read_input(j["input"], r);
  read_allocator_settings(j["allocator_settings"], r.allocator_settings);
  j["devices"].each([&](const In& d) { r.devices.push_back(read_device(d)); });
  // The input's device list and the top peak's device name the same devices.
  const std::vector<In> listed = j["input"]["devices"].elements(r.devices.size());
  for (size_t i = 0; i < r.devices.size(); ++i)
    if (listed[i].i32() != r.devices[i].device) listed[i].fail("disagrees with $.devices");
  if (!r.devices.empty()) {
    const In top = j["peak"]["device"];
    const int dev = top.i32();
    r.peak_device = r.devices.size();
    for (size_t i = 0; i < r.devices.size(); ++i)
      if (r.devices[i].device == dev) r.peak_device = i;
    if (r.peak_device == r.devices.size()) top.fail("no such device in $.devices");
  }
  if (j.has("oom")) {
    const In o = j["oom"];
    r.ooms.push_back(read_oom(o));
    o["other_devices"].each([&](const In& x) { r.ooms.push_back(read_oom(x)); });
  }
  if (j.has("device_memory")) {
    const In m = j["device_memory"];
    r.device_memory = read_value<std::vector<DeviceMemoryRow>>(m["samples"]);
    r.outside_min_bytes = m["outside_min_bytes"].i64();
    r.outside_max_bytes = m["outside_max_bytes"].i64();
  }
  if (j.has("outside_allocator")) j["outside_allocator"].each([&](const In& x) { r.outside.push_back(read_outside(x)); });
  if (j.has("memory_timeline")) r.timeline = read_timeline(j["memory_timeline"], r);
  if (j.has("profiler_activity")) r.activity = read_activity(j["profiler_activity"]);
  if (j.has("trace_join")) r.join = read_join(j["trace_join"]);
  if (j.has("kernel_join")) r.kernel_join = read_kernel_join(j["kernel_join"]);
  if (j.has("explain")) read_explain(j["explain"], r);
  j["warnings"].each([&](const In& w) { r.warnings.push_back(read_warning(w)); });
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
