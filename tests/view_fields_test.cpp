// The view's field lists (snapdiff/view/fields.hpp) held to the schema and to
// the read-back view:
// - every declared key is in schemas/report.schema.json where its struct sits,
//   with the JSON type its coding writes, and in `required` when always written;
// - the Report read_report_json() reads back from render_json() equals the
//   freshly analysed one over every declared field.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "report/format.hpp"
#include "snapdiff/analysis/analysis.hpp"
#include "snapdiff/input/input.hpp"
#include "snapdiff/report/report.hpp"
#include "snapdiff/report/report_read.hpp"
#include "snapdiff/view/fields.hpp"
#include "test_util.hpp"

using namespace snapdiff;
using nlohmann::json;

namespace {

// ---- The schema visitor ---------------------------------------------------

// Walks a field list against the schema node its struct sits at: each key
// must be a property there, allow the JSON types the coding writes, and be
// required unless it is written only sometimes (v.when).
class SchemaVisitor {
 public:
  SchemaVisitor(const json& root, std::string path) : root_(root), path_(std::move(path)) {}

  bool labels = true;
  const std::vector<std::string>* names = nullptr;
  std::vector<std::string> errors;
  size_t keys = 0;  // keys checked

  // Walks x's list (or `list`) at the node `pointer` ("/$defs/frame").
  template <class T>
  void walk(const std::string& pointer) {
    walk<T>(pointer, [](auto& v, auto& x) { fields(v, x); });
  }
  template <class T, class L>
  void walk(const std::string& pointer, L list) {
    path_ = "#" + pointer;
    walk_at<T>(root_.at(json::json_pointer(pointer)), list);
  }

  template <class T>
  void operator()(const char* key, T&) {
    member<T>(key, false, [](auto& v, auto& x) { fields(v, x); });
  }
  template <class T, class L>
  void operator()(const char* key, T&, L list) {
    member<T>(key, false, list);
  }
  template <class T, class N>
  void null_if(const char* key, T&, const N&) {
    member<T>(key, true, [](auto& v, auto& x) { fields(v, x); });
  }
  void time(const char* key, int64_t& t) { null_if(key, t, kNoTime); }
  template <class T>
  void null_below(const char* key, T& m, const T&, const T&) {
    null_if(key, m, m);
  }
  template <class T>
  void null_unless(const char* key, bool, T& m) {
    null_if(key, m, m);
  }
  template <class T>
  void flag_null(const char* key, bool, T& m) {
    null_if(key, m, m);
  }
  template <class F>
  void group(const char* key, F fn) {
    if (const json* n = property(key, {"object"}))
      if (const json* o = alternative(*n, "object")) inside(*o, key, fn);
  }
  template <class F>
  void group_or_null(const char* key, bool, F fn) {
    if (const json* n = property(key, {"object", "null"}))
      if (const json* o = alternative(*n, "object")) inside(*o, key, fn);
  }
  template <class B, class F>
  void when(B&, const char* key, F fn) {
    const bool was = sometimes_;
    const char* was_key = when_key_;
    sometimes_ = true;
    when_key_ = key;
    fn();
    sometimes_ = was;
    when_key_ = was_key;
  }
  template <class T>
  void computed(const char* key, const T&) {
    property(key, {json_type<std::decay_t<T>>()});
  }
  template <class F>
  void derived(const char* key, F fn, const char*) {
    property(key, {json_type<decltype(fn())>()});
  }
  template <class F>
  void derived_time(const char* key, F, const char*) {
    property(key, {"integer", "null"});
  }
  template <class N>
  void names_ahead(const char*, N&) {}
  template <class T>
  void words(const char* key, T&) {
    if constexpr (std::is_same_v<T, OomView>) member<std::vector<std::string>>(key, false, [](auto&, auto&) {});
    else property(key, {"string"});
  }
  template <class T>
  void categories(const char* key, T&) {
    property(key, {"object"});
  }
  template <class T>
  void nonzero_categories(const char* key, T&) {
    property(key, {"object"});
  }
  // The first element's keys here, the others' in an array at key.
  template <class T>
  void first_then(const char* key, std::vector<T>&) {
    T x{};
    fields(*this, x);
    member<std::vector<T>>(key, false, [](auto& v, auto& y) { fields(v, y); });
  }
  void category(const char* key, int&, std::string&) { property(key, {"string", "null"}); }
  void rule(const char* key, bool&, std::string&) { property(key, {"string", "null"}); }
  template <class S>
  void special(const char* key, view::Pair, S&) {
    property(key, {"array", "null"});
  }
  template <class S>
  void special(const char* key, view::SizeClass, S&) {
    property(key, {"string"});
  }
  template <class S>
  void special(const char* key, view::OutsidePid, S&) {
    property(key, {"integer", "null"});
  }
  template <class S>
  void special(const char* key, view::History, S&) {
    property(key, {"string"});
  }
  template <class S>
  void special(const char* key, view::Caller, S&) {
    property(key, {"string"});
  }
  template <class S>
  void special(const char* key, view::PytorchCategories, S&) {
    property(key, {"object"});
  }
  // The top peak: the peak device's peak, with its device (the schema's
  // first alternative; an input without devices has zeros and a null device).
  template <class S>
  void special(const char* key, view::TopPeak, S&) {
    if (const json* n = property(key, {"object"}))
      if (const json* o = alternative(*n, "object"))
        inside(*o, key, [&] {
          DeviceView d{};
          DevicePeak{true}(*this, d);
          property("device", {"integer"});
        });
  }
  // The peak device's categories, phases, --at and --window, at the top.
  template <class S>
  void special(const char* key, view::TopDevice, S&) {
    property(key, {"object"});
    DeviceView d{};
    (*this)("phases", d.phases);
    bool at = false, window = false;
    when(at, "at", [&] { (*this)("at", d.at); });
    when(window, "window", [&] { (*this)("window", d.window); });
  }
  template <class S>
  void special(const char* key, view::DeviceNumbers, S&) {
    member<std::vector<int>>(key, false, [](auto&, auto&) {});
  }
  template <class S>
  void special(const char* key, view::Recorded, S&) {
    property(key, {"object"});
  }
  template <class S>
  void special(const char* key, view::FrameName, S&) {
    property(key, {"string"});
  }
  template <class S>
  void special(const char* key, view::FrameLabel, S&) {
    property(key, {"string"});
  }
  template <class S>
  void special(const char* key, view::Evidence, S&) {
    property(key, {"string"});
  }
  // The facts by their code: an object (null for a warning without facts).
  template <class Tag, class S>
  void special(const char* key, Tag, S&) {
    property(key, {});
  }

 private:
  template <class T>
  static const char* json_type() {
    if constexpr (std::is_same_v<T, bool>) return "boolean";
    else if constexpr (std::is_null_pointer_v<T>) return "null";
    else if constexpr (std::is_integral_v<T>) return "integer";
    else if constexpr (std::is_floating_point_v<T>) return "number";
    else if constexpr (std::is_same_v<T, std::string> || std::is_same_v<T, const char*> ||
                       std::is_same_v<T, char*> || std::is_enum_v<T>)
      return "string";
    else if constexpr (std::is_array_v<T> || view::IsVector<T>::value) return "array";
    else return "object";
  }

  // Follows $ref.
  const json& resolve(const json& n) const {
    if (n.contains("$ref")) {
      const std::string ref = n["$ref"];
      return resolve(root_.at(json::json_pointer(ref.substr(1))));
    }
    return n;
  }
  // The JSON types a node allows.
  void types_of(const json& node, std::set<std::string>& out) const {
    const json& n = resolve(node);
    if (n.contains("type")) {
      if (n["type"].is_string()) out.insert(n["type"].get<std::string>());
      else
        for (const auto& t : n["type"]) out.insert(t.get<std::string>());
    }
    auto of_value = [&](const json& v) {
      out.insert(v.is_string()             ? "string"
                 : v.is_boolean()          ? "boolean"
                 : v.is_null()             ? "null"
                 : v.is_number_integer()   ? "integer"
                 : v.is_number()           ? "number"
                 : v.is_array()            ? "array"
                                           : "object");
    };
    if (n.contains("const")) of_value(n["const"]);
    if (n.contains("enum"))
      for (const auto& v : n["enum"]) of_value(v);
    for (const char* k : {"oneOf", "anyOf", "allOf"})
      if (n.contains(k))
        for (const auto& a : n[k]) types_of(a, out);
    if (out.count("number")) out.insert("integer");  // an integer is a number
  }
  // The node's alternative that is an object (or array), for nullable ones.
  const json* alternative(const json& node, const char* type) const {
    const json& n = resolve(node);
    std::set<std::string> t;
    types_of(n, t);
    if (!t.count(type)) return nullptr;
    for (const char* k : {"oneOf", "anyOf"})
      if (n.contains(k))
        for (const auto& a : n[k]) {
          std::set<std::string> at;
          types_of(a, at);
          if (at.count(type)) return &resolve(a);
        }
    return &n;
  }
  // A property of the current object node, through allOf.
  const json* find(const json& node, const char* key) const {
    const json& n = resolve(node);
    if (n.contains("properties") && n["properties"].contains(key)) return &n["properties"][key];
    if (n.contains("allOf"))
      for (const auto& a : n["allOf"])
        if (const json* p = find(a, key)) return p;
    return nullptr;
  }
  bool required(const json& node, const char* key) const {
    const json& n = resolve(node);
    if (n.contains("required"))
      for (const auto& k : n["required"])
        if (k == key) return true;
    if (n.contains("allOf"))
      for (const auto& a : n["allOf"])
        if (required(a, key)) return true;
    return false;
  }

  // Checks key at the current node; its schema node when there.
  const json* property(const char* key, std::set<std::string> want) {
    ++keys;
    const std::string at = path_ + "." + key;
    const json* p = find(*node_, key);
    if (!p) {
      errors.push_back(at + ": not in the schema");
      return nullptr;
    }
    std::set<std::string> have;
    types_of(*p, have);
    for (const std::string& t : want)
      if (!have.count(t)) errors.push_back(at + ": written as " + t + ", the schema does not allow it");
    if (!sometimes_ && !required(*node_, key)) errors.push_back(at + ": always written, not in `required`");
    return p;
  }

  template <class T, class L>
  void member(const char* key, bool nullable, L list) {
    std::set<std::string> want{json_type<T>()};
    // An optional is null when empty, unless written only when it holds a value.
    const bool present = when_key_ && std::string(when_key_) == key;
    if (nullable || (view::IsOptional<T>::value && !present)) want.insert("null");
    if constexpr (view::IsOptional<T>::value) want.erase("object"), want.insert(json_type<typename T::value_type>());
    const json* p = property(key, want);
    if (p) value<T>(*p, key, list);
  }
  // Into a struct member (or the elements of a list) by its field list.
  template <class T, class L>
  void value(const json& p, const std::string& key, L list) {
    if constexpr (view::IsOptional<T>::value) {
      value<typename T::value_type>(p, key, list);
    } else if constexpr (view::IsVector<T>::value) {
      using E = typename T::value_type;
      const json* a = alternative(p, "array");
      if (!a || !a->contains("items")) {
        errors.push_back(path_ + "." + key + ": an array without `items`");
        return;
      }
      const json& items = (*a)["items"];
      if constexpr (std::is_arithmetic_v<E> || std::is_same_v<E, std::string>) {
        std::set<std::string> have;
        types_of(items, have);
        if (!have.count(json_type<E>())) errors.push_back(path_ + "." + key + "[]: not " + std::string(json_type<E>()));
      } else {
        value<E>(items, key + "[]", list);
      }
    } else if constexpr (std::is_class_v<T> && !std::is_same_v<T, std::string>) {
      if (const json* o = alternative(p, "object"))
        inside(*o, key, [&] {
          T x{};
          list(*this, x);
        });
    }
  }
  template <class T, class L>
  void walk_at(const json& node, L list) {
    const json* was = node_;
    node_ = &node;
    T x{};
    list(*this, x);
    node_ = was;
  }
  template <class F>
  void inside(const json& node, const std::string& key, F fn) {
    const json* was = node_;
    const std::string path = path_;
    const bool sometimes = sometimes_;
    const char* when_key = when_key_;
    node_ = &node;
    path_ += "." + key;
    sometimes_ = false;
    when_key_ = nullptr;
    fn();
    node_ = was;
    path_ = path;
    sometimes_ = sometimes;
    when_key_ = when_key;
  }

  const json& root_;
  const json* node_ = nullptr;
  std::string path_;
  bool sometimes_ = false;
  const char* when_key_ = nullptr;  // the key of the v.when() we are in
};

json report_schema() { return json::parse(test::read_file(std::string(SNAPDIFF_SOURCE_DIR) + "/schemas/report.schema.json")); }

// Every field list at the place its struct sits in the schema.
std::vector<std::string> schema_errors(const json& schema, size_t* keys = nullptr) {
  SchemaVisitor v(schema, "$");
  const std::string device = "/$defs/device/properties";
  v.walk<Counters>("/$defs/counters");
  v.walk<PeakPoint>("/$defs/peakPoint");
  v.walk<FrameRef>("/$defs/frame");
  v.walk<KernelRef>("/$defs/kernelLaunch");
  v.walk<PhaseSpan>("/$defs/phaseSpan");
  v.walk<MomentView>("/$defs/moment");
  v.walk<WindowView>("/$defs/window");
  v.walk<TruncationEvidence>(device + "/truncation_evidence");
  v.walk<Growth>(device + "/growth");
  v.walk<SiteRow>(device + "/live_at_peak/properties/sites/items");
  v.walk<SiteRow>(device + "/unknown_at_peak/items");
  v.walk<SiteRow>(device + "/live_at_peak/properties/other", OtherSites{});
  v.walk<Fragmentation>(device + "/fragmentation_at_peak");
  v.walk<EndStateCheck>(device + "/end_state");
  v.walk<PoolUsage>(device + "/pools/items");
  v.walk<OomView>("/properties/oom");
  v.walk<DeviceView>("/$defs/device", DeviceOps{});
  v.walk<TimelineComparison>("/properties/memory_timeline", TimelineFields{});
  v.walk<DeviceMemoryRow>("/properties/device_memory/properties/samples/items");
  v.walk<TraceJoin>("/properties/trace_join");
  v.walk<KernelJoin>("/properties/kernel_join");
  v.walk<ExplainItem>("/properties/explain/properties/items/items");
  v.walk<TraceActivity>("/properties/profiler_activity");
  v.walk<OutsideDevice>("/properties/outside_allocator/items");
  v.walk<Report>("");  // and from the root, every list nested in it
  if (keys) *keys = v.keys;
  return v.errors;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += x + "\n";
  return s;
}

}  // namespace

TEST_CASE("view fields: every declared key is in the report schema, typed and required", "[report]") {
  size_t keys = 0;
  const std::vector<std::string> errors = schema_errors(report_schema(), &keys);
  INFO(joined(errors));
  CHECK(errors.empty());
  CHECK(keys > 1000);  // every list nested in the Report, from the root
}

TEST_CASE("view fields: the schema check finds a key missing, mistyped or not required", "[report]") {
  const json good = report_schema();
  {
    json s = good;
    s["$defs"]["peakPoint"]["properties"].erase("time_us");
    const std::string e = joined(schema_errors(s));
    CHECK(e.find("#/$defs/peakPoint.time_us: not in the schema") != std::string::npos);
  }
  {
    json s = good;
    s["$defs"]["device"]["properties"]["growth"]["properties"]["sites"]["items"]["properties"]["phase"]["type"] =
        "integer";
    const std::string e = joined(schema_errors(s));
    CHECK(e.find("/growth.sites[].phase: written as string") != std::string::npos);
  }
  {
    json s = good;
    s["$defs"]["window"]["properties"]["first_time_us"]["type"] = "integer";  // not null
    CHECK(joined(schema_errors(s)).find("#/$defs/window.first_time_us: written as null") != std::string::npos);
  }
  {
    json s = good;
    auto& req = s["$defs"]["counters"]["required"];
    req.erase(std::remove(req.begin(), req.end(), json("active_bytes")), req.end());
    CHECK(joined(schema_errors(s)).find("#/$defs/counters.active_bytes: always written, not in `required`") != std::string::npos);
  }
  {  // the walk from the root reaches the lists nested in the devices and the report
    json s = good;
    auto& req = s["$defs"]["device"]["required"];
    req.erase(std::remove(req.begin(), req.end(), json("oom_events")), req.end());
    s["properties"]["memory_timeline"]["properties"]["moments"]["items"]["properties"]["placements"]["items"] = {
        {"type", "object"}};
    const std::string e = joined(schema_errors(s));
    CHECK(e.find("#.devices[].oom_events: always written, not in `required`") != std::string::npos);
    CHECK(e.find("#.memory_timeline.moments[].placements[].kernel: not in the schema") != std::string::npos);
  }
}

namespace {

// ---- The equality visitor -------------------------------------------------

// Flattens a struct by its field list into "path = value" lines: two views
// are equal over the declared fields when their lines are. Members are taken
// as they are (not as the JSON writes them: a field written null is compared
// all the same), members no list declares are not looked at.
class Flat {
 public:
  bool labels = true;
  const std::vector<std::string>* names = nullptr;
  std::vector<std::string> lines;

  template <class T>
  void operator()(const char* key, const T& m) {
    put(key, m, [](auto& v, auto& x) { fields(v, x); });
  }
  template <class T, class L>
  void operator()(const char* key, const T& m, L list) {
    put(key, m, list);
  }
  template <class T, class N>
  void null_if(const char* key, const T& m, const N&) {
    (*this)(key, m);
  }
  void time(const char* key, int64_t t) { (*this)(key, t); }
  template <class T>
  void null_below(const char* key, const T& m, const T&, const T&) {
    (*this)(key, m);
  }
  template <class T>
  void null_unless(const char* key, bool, const T& m) {
    (*this)(key, m);
  }
  template <class T>
  void flag_null(const char* key, bool flag, const T& m) {
    line(std::string(key) + "?", flag ? "yes" : "no");
    (*this)(key, m);
  }
  template <class F>
  void group(const char* key, F fn) {
    inside(key, fn);
  }
  template <class F>
  void group_or_null(const char* key, bool flag, F fn) {
    line(std::string(key) + "?", flag ? "yes" : "no");
    if (flag) inside(key, fn);
  }
  template <class F>
  void when(bool flag, const char* key, F fn) {
    line(std::string(key) + "?", flag ? "yes" : "no");
    if (flag) fn();
  }
  template <class T>
  void computed(const char*, const T&) {}
  template <class F>
  void derived(const char*, F, const char*) {}
  template <class T>
  void words(const char*, const T&) {}
  template <class T>
  void categories(const char* key, const std::vector<T>& v) {
    (*this)(key, v);
  }
  template <class T>
  void nonzero_categories(const char* key, const std::vector<T>& v) {
    (*this)(key, v);
  }
  template <class T>
  void first_then(const char* key, const std::vector<T>& list) {
    (*this)(key, list);
  }
  void category(const char* key, int index, const std::string& name) {
    line(key, std::to_string(index) + " " + name);
  }
  void rule(const char* key, bool has, const std::string& name) { line(key, has ? name : "null"); }
  void special(const char* key, view::Pair, const Growth& g) {
    line(key, std::to_string(g.judged_first) + ".." + std::to_string(g.judged_last));
  }
  void special(const char* key, view::SizeClass, const FreeSizeClass& c) {
    line(key, std::string(c.label ? c.label : "(none)") + " < " + std::to_string(c.max_bytes));
  }
  void special(const char* key, view::OutsidePid, uint32_t pid) { line(key, std::to_string(pid)); }
  void special(const char* key, view::FrameName, const FrameRef& f) {
    line(key, f.name + (f.elided ? " elided " + std::to_string(f.elided) : ""));
  }
  void special(const char* key, view::FrameLabel, const FrameRef& f) { line(key, f.label); }
  // As the report layer words it (a view read back holds the words only).
  void special(const char* key, view::Evidence, const ExplainItem& x) { line(key, detail::explain_evidence(x)); }
  template <class F>
  void derived_time(const char*, F, const char*) {}
  void names_ahead(const char*, const std::vector<std::string>& n) { names = &n; }
  void special(const char* key, view::History, const DeviceView& d) {
    line(key, std::to_string(d.has_trace && d.events > 0) + std::to_string(d.truncated));
  }
  void special(const char* key, view::History, const Report& r) {
    line(key, std::to_string(r.has_history) + std::to_string(r.history_truncated));
  }
  template <class S>
  void special(const char*, view::Facts, const S& x) {
    std::visit(
        [&](const auto& facts) {
          if constexpr (!std::is_same_v<std::decay_t<decltype(facts)>, std::monostate>) add("facts", facts);
        },
        x.facts);
  }
  void special(const char*, view::TopPeak, const Report& r) { add("peak_device", r.peak_device); }
  void special(const char*, view::TopDevice, const Report&) {}
  void special(const char*, view::DeviceNumbers, const Report&) {}
  void special(const char* key, view::Caller, const OutsideRow& row) {
    line(key, row.context ? "context" : std::to_string(int(row.caller)));
  }
  void special(const char* key, view::PytorchCategories, const std::array<int64_t, kPytorchCategories>& a) {
    std::string x;
    for (int64_t b : a) x += std::to_string(b) + " ";
    line(key, x);
  }
  void special(const char*, view::Recorded, const AllocatorSettings& s) {
    for (const auto& kv : s.raw) add("recorded." + kv.first, kv.second);
  }

  // A value by hand (the parts of the view without a field list).
  template <class T>
  Flat& add(const std::string& key, const T& m) {
    (*this)(key.c_str(), m);
    return *this;
  }
  template <class T, class L>
  Flat& add(const std::string& key, const T& m, L list) {
    (*this)(key.c_str(), m, list);
    return *this;
  }
  template <class F>
  void at(const std::string& key, F fn) {
    inside(key, fn);
  }

 private:
  void line(const std::string& key, const std::string& value) { lines.push_back(path_ + "." + key + " = " + value); }
  template <class T, class L>
  void put(const std::string& key, const T& m, L list) {
    if constexpr (std::is_same_v<T, bool>) {
      line(key, m ? "true" : "false");
    } else if constexpr (std::is_enum_v<T>) {
      line(key, std::to_string(int64_t(m)));
    } else if constexpr (std::is_integral_v<T>) {
      line(key, std::to_string(m));
    } else if constexpr (std::is_floating_point_v<T>) {
      char b[40];
      std::snprintf(b, sizeof b, "%.17g", m);
      line(key, b);
    } else if constexpr (std::is_same_v<T, std::string>) {
      line(key, "\"" + m + "\"");
    } else if constexpr (std::is_array_v<T>) {
      line(key, std::to_string(m[0]) + "," + std::to_string(m[1]));
    } else if constexpr (view::IsVector<T>::value) {
      line(key, "[" + std::to_string(m.size()) + "]");
      for (size_t i = 0; i < m.size(); ++i) put(key + "[" + std::to_string(i) + "]", m[i], list);
    } else if constexpr (view::IsOptional<T>::value) {
      if (!m) line(key, "null");
      else put(key, *m, list);
    } else {
      inside(key, [&] { list(*this, m); });
    }
  }
  template <class F>
  void inside(const std::string& key, F fn) {
    const std::string was = path_;
    path_ += "." + key;
    fn();
    path_ = was;
  }
  std::string path_ = "$";
};

// The report view, flattened by its field list.
std::vector<std::string> flatten(const Report& r) {
  Flat f;
  fields(f, r);
  return f.lines;
}

// "" when a and b flatten to the same lines, else the first that differs.
std::string first_difference(const Report& a, const Report& b) {
  const std::vector<std::string> x = flatten(a), y = flatten(b);
  for (size_t i = 0; i < x.size() && i < y.size(); ++i)
    if (x[i] != y[i]) return "fresh:     " + x[i] + "\nread back: " + y[i];
  if (x.size() != y.size()) return "fresh " + std::to_string(x.size()) + " lines, read back " + std::to_string(y.size());
  return "";
}

// The inputs of the data folders: snapshots, .snap files and traces, not the folders
// beside them nor files over 20 MB (the test stays quick).
std::vector<std::string> inputs_of(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(std::string(SNAPDIFF_SOURCE_DIR) + "/" + dir)) {
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file() || e.file_size() > (uint64_t(20) << 20) || name.find(".memtl.") != std::string::npos)
      continue;
    if (name.ends_with(".pickle") || name.ends_with(".pickle.gz") || name.ends_with(".snap") ||
        name.ends_with(".trace.json.gz"))
      out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

Report analysed(const std::string& path) {
  ReportOptions o;
  o.input_name = std::filesystem::path(path).filename().string();
  return analyze_report(load_trace(path), o);
}

}  // namespace

TEST_CASE("view fields: the report read back from its JSON equals the analysed one", "[report]") {
  size_t files = 0, lines = 0;
  for (const char* dir : {"tests/data/real", "sample_snapshots"})
    for (const std::string& path : inputs_of(dir)) {
      INFO(path);
      const Report fresh = analysed(path);
      const Report back = read_report_json(render_json(fresh), path + ".json");
      CHECK(first_difference(fresh, back) == "");
      lines += flatten(fresh).size();
      ++files;
    }
  CHECK(files >= 40);
  CHECK(lines > 10000);
}

TEST_CASE("view fields: the equality visitor sees a changed field", "[report]") {
  const Report fresh = analysed(test::real_data("small_oom.pickle"));
  REQUIRE(first_difference(fresh, fresh) == "");
  REQUIRE(!fresh.devices.empty());
  REQUIRE(!fresh.devices[0].sites.empty());
  Report changed = fresh;
  changed.devices[0].sites[0].count += 1;
  CHECK(first_difference(fresh, changed).find(".sites[0].count") != std::string::npos);
  changed = fresh;
  changed.devices[0].frag.free_blocks += 1;
  CHECK(first_difference(fresh, changed).find(".fragmentation_at_peak.free_blocks") != std::string::npos);
}

TEST_CASE("view fields: a deep stack's left-out frames are a count; the report layer writes their words", "[report]") {
  // One 3,000-frame stack (f0 outermost, f2999 innermost): the view keeps 500
  // frames at each end and, between them, one frame that counts the 2,000
  // left out. A kernel launched from it at the peak has that scope stack.
  Trace t;
  StackId s = 0;
  for (size_t i = 0; i < 3000; ++i) {
    Frame f;
    f.name = t.strings.intern(std::string("f").append(std::to_string(i)));
    f.file = t.strings.intern("/home/u/model.py");
    f.line = int64_t(i);
    s = t.stacks.child(s, t.intern_frame(f));
  }
  test::push_alloc(t, 1 << 20, 1 << 20, s, 1);
  KernelLaunch k;
  k.time_us = 1;
  k.name = t.strings.intern("gemm");
  k.stack = s;
  t.kernels.push_back(k);
  ReportOptions o;
  o.input_name = "deep";
  const Report fresh = analyze_report(t, o);
  REQUIRE(fresh.devices.size() == 1);
  const DeviceView& d = fresh.devices[0];
  REQUIRE(d.sites.size() == 1);
  const std::vector<FrameRef>& st = d.sites[0].site.stack;
  REQUIRE(st.size() == kShownFrames + 1);
  CHECK(st[kShownInner].elided == 2000);
  CHECK(st[kShownInner].name.empty());
  CHECK(st[kShownInner].label.empty());
  CHECK(st[kShownInner - 1].elided == 0);
  REQUIRE(d.kernel_before);
  CHECK(d.kernel_before->stack.size() == kShownFrames + 1);

  const std::string text = render_json(fresh);
  CHECK(text.find("\"name\": \"<2000 frames elided>\"") != std::string::npos);
  CHECK(text.find("\"label\": \"<2,000 frames elided>\"") != std::string::npos);
  CHECK(text.find("f498 / f499 / <2,000 scopes elided> / f2500 / f2501") != std::string::npos);
  CHECK(render_text(fresh, kMaxTextWidth).find("f499 / <2,000 scopes elided> / f2500") != std::string::npos);

  const Report back = read_report_json(text, "deep.json");
  CHECK(first_difference(fresh, back) == "");
  REQUIRE(back.devices.size() == 1);
  REQUIRE(back.devices[0].sites.size() == 1);
  CHECK(back.devices[0].sites[0].site.stack[kShownInner].elided == 2000);
  CHECK(back.devices[0].sites[0].site.stack[kShownInner].name.empty());
  CHECK(render_json(back) == text);
}
