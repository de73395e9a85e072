// The report view read back from the JSON render_json() writes, by the same
// field lists (snapdiff/view/fields.hpp) as the writer (json_write.hpp); by
// hand only the schema's version, the facts by their code and the checks
// across sections. Ids that point into a Trace (StackId, FrameId, rule
// indices) are not in the JSON and stay unset; what the renderers show comes
// back whole.
#include "snapdiff/report/report_read.hpp"

#include <cstring>
#include <algorithm>
#include <functional>
#include <optional>
#include <type_traits>
#include <limits>
#include <nlohmann/json.hpp>
#include <simdjson.h>
#include <vector>

#include "report/format.hpp"
#include "snapdiff/error.hpp"
#include "snapdiff/input/small_document.hpp"
#include "snapdiff/report/report.hpp"
#include "snapdiff/view/fields.hpp"
#include "util/json_depth.hpp"
#include "util/quote_value.hpp"

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
      f(key, In(kv.value, path_ + "." + capped_value(key)));
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
    if (!phase_from_name(s(), &p)) fail("unknown phase " + quote_value(s()));
    return p;
  }
  Truncation truncation() const {
    Truncation t;
    if (!truncation_from_name(s(), &t)) fail("unknown truncation " + quote_value(s()));
    return t;
  }
  Code code() const {
    Code c;
    if (!code_from_name(s(), &c)) fail("unknown code " + quote_value(s()));
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
  j.fail("unknown category " + quote_value(n));
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

// The facts, by their code (below).
void read_facts(const In& j, Finding& f);
void read_facts(const In& j, Warning& w);

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
  void null_below(const char* key, T& m, const T&, const T& none) {
    null_if(key, m, none);
  }
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
  // Words are written, not read back: a string (an OOM's explanation: strings).
  template <class T>
  void words(const char* key, const T&) {
    if constexpr (std::is_same_v<T, OomView>) in_[key].each([](const In& x) { (void)x.s(); });
    else (void)in_[key].s();
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
      if (v.size() >= n.size() || n[v.size()] != name) x.fail("unexpected category " + quote_value(name));
      read(x, v.emplace_back());
    });
  }
  // Absent categories are 0.
  template <class T>
  void nonzero_categories(const char* key, std::vector<T>& v) {
    static const std::vector<std::string> kNone;
    const std::vector<std::string>& n = names ? *names : kNone;
    v.assign(n.size(), T{});
    in_[key].items([&](const std::string& name, const In& x) {
      size_t i = 0;
      while (i < n.size() && n[i] != name) ++i;
      if (i == n.size()) x.fail("unknown category " + quote_value(name));
      read(x, v[i]);
    });
  }
  template <class T>
  void first_then(const char* key, std::vector<T>& list) {
    list.clear();
    fields(*this, list.emplace_back());
    in_[key].each([&](const In& x) { read(x, list.emplace_back()); });
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
    if (!fc.label) name.fail("unknown size class " + quote_value(label));
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
    if (h != "none" && h != "truncated" && h != "complete") x.fail("unknown history " + quote_value(h));
    has = h != "none";
    truncated = h == "truncated";
  }
  void special(const char* key, view::History, DeviceView& d) { history(in_[key], d.has_trace, d.truncated); }
  void special(const char* key, view::History, Report& r) { history(in_[key], r.has_history, r.history_truncated); }
  template <class S>
  void special(const char*, view::Facts, S& x) {
    read_facts(in_, x);
  }
  // Checked against $.devices once they are read (read_report).
  void special(const char* key, view::DeviceNumbers, Report&) { listed.emplace(in_[key]); }
  void special(const char* key, view::TopPeak, Report&) { top_device.emplace(in_[key]["device"]); }
  void special(const char*, view::TopDevice, Report&) {}
  void special(const char* key, view::Caller, OutsideRow& row) {
    const In x = in_[key];
    const std::string caller = x.s();
    row.context = caller == "context";
    if (row.context) return;
    for (MemoryCaller c : {MemoryCaller::Unknown, MemoryCaller::PyTorch, MemoryCaller::Nccl, MemoryCaller::Cublas,
                           MemoryCaller::Cudnn, MemoryCaller::Other})
      if (caller == memory_caller_name(c)) return void(row.caller = c);
    x.fail("unknown caller " + quote_value(caller));
  }
  void special(const char* key, view::PytorchCategories, std::array<int64_t, kPytorchCategories>& a) {
    const In x = in_[key];
    for (int i = 0; i < MemoryTimeline::kCategories; ++i) a[size_t(i)] = x[MemoryTimeline::kCategoryNames[i]].i64();
  }
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
      if (!oom_cause_from_name(x.s(), &m)) x.fail("unknown cause " + quote_value(x.s()));
    } else if constexpr (std::is_same_v<T, EventKind>) {
      if (!parse_event_kind(x.s(), &m)) x.fail("unknown action " + quote_value(x.s()));
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
    case Code::DiffPhase: f.facts = read_value<DiffPhaseFacts>(facts); break;
    default: kind.fail(quote_value(kind.s()) + " is a warning, not a finding");
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
    default: code.fail(quote_value(code.s()) + " is a finding, not a warning");
  }
}

Report read_report(const In& j) {
  const In schema = j["schema"];
  if (schema.s() != "snapdiff/report/1")
    schema.fail("a snapdiff report of schema " + quote_value(schema.s()) + ", which this build does not read (it reads \"snapdiff/report/1\")");
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
  // An outside device's samples change rows it has, in ascending order.
  for (size_t i = 0; i < r.outside.size(); ++i) {
    const OutsideDevice& d = r.outside[i];
    for (size_t k = 0; k < d.over_time.size(); ++k) {
      const std::vector<OutsideChange>& c = d.over_time[k].changes;
      for (size_t m = 0; m < c.size(); ++m)
        if (c[m].row >= d.rows.size() || (m > 0 && c[m].row <= c[m - 1].row))
          j["outside_allocator"].elements(r.outside.size())[i]["over_time"].elements(d.over_time.size())[k]["changes"]
              .elements(c.size())[m]["row"]
              .fail("expected a row index below " + std::to_string(d.rows.size()) + ", each row once, ascending");
    }
  }
  if (r.kernel_join.joined() != j.has("kernel_join")) j["kernel_join"]["recording"].fail("expected the recording's name");
  if (j.has("explain") && r.explain_query.empty()) j["explain"]["query"].fail("expected the query given");
  return r;
}

// Summaries up to this size share their thread's parser.
constexpr size_t kReusedParserBytes = size_t(1) << 20;

}  // namespace

Report read_report_json(std::string_view text, const std::string& name) {
  try {
    detail::check_json_depth(text);
    // One parser per thread, reused: a reduce step reads thousands of
    // summaries. A large summary gets its own, freed with it: a parser keeps
    // the capacity of the largest document it read (about ten bytes a byte),
    // which each of -j threads would otherwise hold to the end.
    thread_local simdjson::dom::parser reused;
    std::optional<simdjson::dom::parser> own;
    simdjson::dom::parser& parser = text.size() <= kReusedParserBytes ? reused : own.emplace();
    E doc;
    if (const auto error = parser.parse(text.data(), text.size()).get(doc); error != simdjson::SUCCESS) {
      // Where it goes wrong, from a parser that says.
      try {
        const nlohmann::json checked = nlohmann::json::parse(text.begin(), text.end());
        (void)checked;
      } catch (const nlohmann::json::parse_error& e) {
        throw InputError(uint64_t(e.byte > 0 ? e.byte - 1 : 0), "malformed JSON: " + capped_value(e.what()));
      } catch (const nlohmann::json::exception& e) {  // a number too large for a double (out_of_range.406)
        throw InputError(std::string("$"), "unreadable JSON: " + capped_value(e.what()));
      }
      throw InputError(std::string("$"), std::string("unreadable JSON: ") + simdjson::error_message(error));
    }
    const In root(doc, "$");
    E schema;
    if (!doc.is_object() || doc.at_key("schema").get(schema) != simdjson::SUCCESS)
      root.fail(std::string("not a snapdiff report: ") +
                (doc.is_object() ? "a JSON object without a \"schema\" key" : "not a JSON object"));
    if (!schema.is_string() || std::string_view(schema.get_string()).rfind("snapdiff/report/", 0) != 0)
      In(schema, "$.schema").fail("not a snapdiff report: its schema is " + capped_value(simdjson::minify(schema)));
    return read_report(root);
  } catch (InputError& e) {
    e.set_file(name);
    throw;
  }
}

Report read_summary(std::string_view bytes, const std::string& name, uint64_t max_decoded_bytes,
                    uint64_t max_memory_bytes) {
  // What reading it holds: the text, the parser's padded copy, its tape and
  // strings, the view (kSummaryMemoryPerByte a byte of text): the memory
  // bound caps the text where that is lower than max_decoded_bytes.
  const uint64_t by_memory = max_memory_bytes == 0 ? UINT64_MAX : max_memory_bytes / kSummaryMemoryPerByte;
  const bool memory_binds = by_memory < max_decoded_bytes;
  const uint64_t limit = std::min(max_decoded_bytes, by_memory);
  std::string text;
  try {
    if (bytes.size() > limit && !is_gzip_bytes(bytes))
      throw InputError("the summary holds " + std::to_string(bytes.size()) + " bytes, more than " +
                       std::to_string(limit) + " (the limit; raise it with " +
                       (memory_binds ? "--max-memory" : "--max-input-bytes") + ")");
    text = decode_small_document(bytes, limit, memory_binds ? "--max-memory" : "--max-input-bytes");
  } catch (InputError& e) {
    if (e.file().empty()) e.set_file(name);
    throw;
  }
  Report r = read_report_json(text, name);
  if (r.input_name.size() > kMaxSummaryNameBytes) {
    InputError e(std::string("$.input.name"), "the snapshot's name is " + std::to_string(r.input_name.size()) +
                                                  " bytes, longer than any path (at most " +
                                                  std::to_string(kMaxSummaryNameBytes) + ")");
    e.set_file(name);
    throw e;
  }
  return r;
}

}  // namespace snapdiff
