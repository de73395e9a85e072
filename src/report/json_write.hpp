// Internal to the report layer: the JSON writer of the view's field lists
// (snapdiff/view/fields.hpp). JsonWriter w(obj); fields(w, x) writes x's keys
// into obj in their declared order; to_json(x) gives x as one value.
#pragma once

#include <array>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "report/facts_json.hpp"
#include "report/format.hpp"
#include "report/oom_report.hpp"
#include "snapdiff/analysis/catalogue.hpp"
#include "snapdiff/report/report.hpp"
#include "snapdiff/view/fields.hpp"

namespace snapdiff::detail {

// The words v.words() writes (the report layer's, write only).
std::string no_memory_message(const TraceActivity& a);  // profiler_report.cpp

class JsonWriter {
 public:
  using J = nlohmann::ordered_json;
  explicit JsonWriter(J& into) : cur_(&into) {}

  bool labels = true;                                  // frames with their labels
  const std::vector<std::string>* names = nullptr;     // the category names in scope

  template <class T>
  void operator()(const char* key, const T& m) {
    (*cur_)[key] = value(m);
  }
  template <class T, class L>
  void operator()(const char* key, const T& m, L list) {
    (*cur_)[key] = value(m, list);
  }
  template <class T, class N>
  void null_if(const char* key, const T& m, const N& none) {
    (*cur_)[key] = m == none ? J(nullptr) : value(m);
  }
  void time(const char* key, int64_t t) { null_if(key, t, kNoTime); }
  template <class T>
  void null_below(const char* key, const T& m, const T& min, const T&) {
    (*cur_)[key] = m < min ? J(nullptr) : value(m);
  }
  template <class T>
  void null_unless(const char* key, bool ok, const T& m) {
    (*cur_)[key] = ok ? value(m) : J(nullptr);
  }
  template <class T>
  void flag_null(const char* key, bool flag, const T& m) {
    null_unless(key, flag, m);
  }
  template <class F>
  void group(const char* key, F fn) {
    (*cur_)[key] = inside(fn);
  }
  template <class F>
  void group_or_null(const char* key, bool flag, F fn) {
    (*cur_)[key] = flag ? inside(fn) : J(nullptr);
  }
  template <class F>
  void when(bool flag, const char*, F fn) {
    if (flag) fn();
  }
  template <class T>
  void computed(const char* key, const T& value) {
    (*cur_)[key] = value;
  }
  void words(const char* key, const TraceActivity& a) { (*cur_)[key] = no_memory_message(a); }
  void words(const char* key, const Finding& f) { (*cur_)[key] = finding_text(f); }
  void words(const char* key, const Warning& w) { (*cur_)[key] = warning_text(w); }
  void words(const char* key, const OomView& o) { (*cur_)[key] = oom_sentences(o); }
  void words(const char* key, const OutsideRow& row) { (*cur_)[key] = outside_row_name(row); }
  void words(const char* key, const KernelRef& k) { (*cur_)[key] = kernel_scope(k); }
  void names_ahead(const char*, const std::vector<std::string>& n) { names = &n; }
  template <class F>
  void derived(const char* key, F fn, const char*) {
    (*cur_)[key] = fn();
  }
  template <class F>
  void derived_time(const char* key, F fn, const char*) {
    time(key, fn());
  }
  template <class T>
  void categories(const char* key, const std::vector<T>& v) {
    J o = J::object();
    if (names)
      for (size_t i = 0; i < names->size() && i < v.size(); ++i) o[(*names)[i]] = v[i];
    (*cur_)[key] = std::move(o);
  }
  template <class T>
  void nonzero_categories(const char* key, const std::vector<T>& v) {
    J o = J::object();
    if (names)
      for (size_t i = 0; i < names->size() && i < v.size(); ++i)
        if (v[i] != 0) o[(*names)[i]] = v[i];
    (*cur_)[key] = std::move(o);
  }
  template <class T>
  void first_then(const char* key, const std::vector<T>& list) {
    if (list.empty()) return;
    fields(*this, list.front());
    J rest = J::array();
    for (size_t i = 1; i < list.size(); ++i) rest.push_back(value(list[i]));
    (*cur_)[key] = std::move(rest);
  }
  void category(const char* key, int index, const std::string& name) {
    (*cur_)[key] = index >= 0 ? J(name) : J(nullptr);
  }
  void rule(const char* key, bool has, const std::string& name) { (*cur_)[key] = has ? J(name) : J(nullptr); }

  void special(const char* key, view::Pair, const Growth& g) {
    (*cur_)[key] = g.judged_last >= g.judged_first && g.judged_first > 0 ? J::array({g.judged_first, g.judged_last})
                                                                          : J(nullptr);
  }
  void special(const char* key, view::SizeClass, const FreeSizeClass& c) { (*cur_)[key] = c.label; }
  void special(const char* key, view::Evidence, const ExplainItem& x) { (*cur_)[key] = explain_evidence(x); }
  void special(const char* key, view::FrameName, const FrameRef& f) { (*cur_)[key] = frame_name(f); }
  void special(const char* key, view::FrameLabel, const FrameRef& f) { (*cur_)[key] = frame_label(f); }
  void special(const char* key, view::OutsidePid, uint32_t pid) { (*cur_)[key] = pid == 0 ? J(nullptr) : J(pid); }
  static const char* history(bool has, bool truncated) { return !has ? "none" : truncated ? "truncated" : "complete"; }
  void special(const char* key, view::History, const DeviceView& d) {
    (*cur_)[key] = history(d.has_trace && d.events > 0, d.truncated);
  }
  void special(const char* key, view::History, const Report& r) {
    (*cur_)[key] = history(r.has_history, r.history_truncated);
  }
  void special(const char* key, view::Facts, const Finding& f) { (*cur_)[key] = finding_facts_json(f); }
  void special(const char* key, view::Facts, const Warning& w) { (*cur_)[key] = warning_facts_json(w); }
  void special(const char* key, view::DeviceNumbers, const Report& r) {
    J a = J::array();
    for (const DeviceView& d : r.devices) a.push_back(d.device);
    (*cur_)[key] = std::move(a);
  }
  void special(const char* key, view::TopPeak, const Report& r) {
    if (r.devices.empty()) {
      (*cur_)[key] = {{"requested_bytes", 0}, {"allocated_bytes", 0}, {"reserved_bytes", 0}, {"active_bytes", 0},
                      {"event_index", -1},    {"time_us", nullptr},    {"device", nullptr}};
      return;
    }
    const DeviceView& top = r.devices[r.peak_device];
    J p = value(top, DevicePeak{r.kernel_launches > 0});
    p["device"] = top.device;
    (*cur_)[key] = std::move(p);
  }
  void special(const char* key, view::TopDevice, const Report& r) {
    if (r.devices.empty()) {
      (*cur_)[key] = J::object();
      (*cur_)["phases"] = J::array();
      return;
    }
    const DeviceView& top = r.devices[r.peak_device];
    names = &top.category_names;
    categories(key, top.categories);
    (*this)("phases", top.phases);
    if (top.at) (*this)("at", top.at);
    if (top.window) (*this)("window", top.window);
  }
  void special(const char* key, view::Caller, const OutsideRow& row) {
    (*cur_)[key] = row.context ? std::string("context") : std::string(memory_caller_name(row.caller));
  }
  void special(const char* key, view::PytorchCategories, const std::array<int64_t, kPytorchCategories>& a) {
    J o = J::object();
    for (int i = 0; i < MemoryTimeline::kCategories; ++i) o[MemoryTimeline::kCategoryNames[i]] = a[size_t(i)];
    (*cur_)[key] = std::move(o);
  }
  void special(const char* key, view::Recorded, const AllocatorSettings& s) {
    J raw = J::object();
    for (const auto& kv : s.raw) raw[kv.first] = kv.second;
    (*cur_)[key] = std::move(raw);
  }

  // A value as JSON: by its field list (fields(), or `list`) for a struct.
  template <class T>
  J value(const T& m) {
    if constexpr (std::is_arithmetic_v<T> || std::is_same_v<T, std::string>) {
      return J(m);
    } else if constexpr (std::is_same_v<T, Phase>) {
      return phase_name(m);
    } else if constexpr (std::is_same_v<T, Truncation>) {
      return truncation_name(m);
    } else if constexpr (std::is_same_v<T, Code>) {
      return std::string(code_name(m));
    } else if constexpr (std::is_same_v<T, OomCause>) {
      return oom_cause_name(m);
    } else if constexpr (std::is_same_v<T, EventKind>) {
      return event_kind_name(m);
    } else if constexpr (std::is_same_v<T, int64_t[2]>) {
      return J::array({m[0], m[1]});
    } else if constexpr (view::IsVector<T>::value) {
      using E = typename T::value_type;
      if constexpr (std::is_arithmetic_v<E> || std::is_same_v<E, std::string>) {
        return J(m);
      } else {
        J a = J::array();
        for (const E& e : m) a.push_back(value(e));
        return a;
      }
    } else if constexpr (view::IsOptional<T>::value) {
      return m ? value(*m) : J(nullptr);
    } else {
      return inside([&] { fields(*this, m); });
    }
  }
  template <class T, class L>
  J value(const T& m, L list) {
    if constexpr (view::IsVector<T>::value) {
      J a = J::array();
      for (const auto& e : m) a.push_back(value(e, list));
      return a;
    } else if constexpr (view::IsOptional<T>::value) {
      return m ? value(*m, list) : J(nullptr);
    } else {
      return inside([&] { list(*this, m); });
    }
  }

 private:
  template <class F>
  J inside(F fn) {
    J o = J::object();
    J* was = cur_;
    cur_ = &o;
    fn();
    cur_ = was;
    return o;
  }
  J* cur_;
};

// x's fields as one JSON object.
template <class T>
nlohmann::ordered_json to_json(const T& x) {
  nlohmann::ordered_json j;
  JsonWriter w(j);
  return w.value(x);
}
// x's fields written into j (after the keys it has).
template <class T>
void write_fields(nlohmann::ordered_json& j, const T& x) {
  JsonWriter w(j);
  fields(w, x);
}

}  // namespace snapdiff::detail
