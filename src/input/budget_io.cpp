// Budget files (schemas/budget.schema.json): reading them, with a JSON path
// in every error, and writing them.
#include "snapdiff/input/budget_io.hpp"

#include <algorithm>
#include <cctype>
#include <limits>
#include <nlohmann/json.hpp>

#include "snapdiff/error.hpp"
#include "util/read_file.hpp"
#include "util/json_depth.hpp"
#include "util/quote_value.hpp"

namespace snapdiff {

namespace {

using json = nlohmann::ordered_json;  // keeps the file's order of categories

struct BudgetReader {
  std::string name;

  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    InputError e(path, what);
    e.set_file(name);
    throw e;
  }
  static std::string key_path(const std::string& parent, const std::string& key) {
    bool ident = !key.empty();
    for (char c : key) ident &= std::isalnum(static_cast<unsigned char>(c)) || c == '_';
    if (ident) return parent + "." + capped_value(key);
    return parent + "[" + capped_value(json(key).dump()) + "]";
  }
  const json& object(const json& j, const std::string& path) const {
    if (!j.is_object()) fail(path, std::string("expected an object, found ") + j.type_name());
    return j;
  }
  void only_keys(const json& j, const std::string& path, std::initializer_list<const char*> keys,
                 bool allow_dollar = false) const {
    for (auto it = j.begin(); it != j.end(); ++it) {
      bool ok = allow_dollar && !it.key().empty() && it.key()[0] == '$';
      for (const char* k : keys) ok |= it.key() == k;
      if (!ok) {
        std::string list;
        for (const char* k : keys) list += (list.empty() ? "" : ", ") + std::string(k);
        fail(key_path(path, it.key()), "unknown key (expected one of: " + list + ")");
      }
    }
  }
  int64_t bytes_int(const json& j, const std::string& path) const {
    if (!j.is_number_integer() || (j.is_number_integer() && !j.is_number_unsigned() && j.get<int64_t>() < 0))
      fail(path, std::string("expected a non-negative integer of bytes, found ") +
                     (j.is_number() ? j.dump() : std::string(j.type_name())));
    if (j.is_number_unsigned() && j.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
      fail(path, "value too large");
    return j.get<int64_t>();
  }
  // A size: integer bytes or a string such as "1GiB".
  std::pair<int64_t, std::string> size(const json& j, const std::string& path) const {
    if (j.is_string()) {
      // A tolerance that is not a share is a size, its text trimmed.
      auto a = parse_amount(j.get<std::string>());
      if (!a || a->percent) fail(path, "not a size: " + j.dump() + " (e.g. \"512MiB\", \"60GiB\", \"1.5GB\", or bytes)");
      return {a->bytes, a->text};
    }
    int64_t b = bytes_int(j, path);
    return {b, std::to_string(b)};
  }
  Amount amount(const json& j, const std::string& path) const {
    if (j.is_string()) {
      auto a = parse_amount(j.get<std::string>());
      if (!a) fail(path, "not a tolerance: " + j.dump() + " (e.g. \"2%\" or \"512MiB\")");
      return *a;
    }
    Amount a;
    a.bytes = bytes_int(j, path);
    a.text = std::to_string(a.bytes);
    return a;
  }
  std::string str(const json& j, const std::string& path) const {
    if (!j.is_string()) fail(path, std::string("expected a string, found ") + j.type_name());
    return j.get<std::string>();
  }
};

}  // namespace

Budget parse_budget(const std::string& text, const std::string& name) {
  BudgetReader rd{name};
  json j;
  try {
    detail::check_json_depth(text);
  } catch (InputError& e) {
    e.set_file(name);
    throw;
  }
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    std::string what = e.what();
    size_t p = what.find("parse error");
    InputError err(e.byte > 0 ? uint64_t(e.byte - 1) : 0,
                   "not valid JSON: " + (p == std::string::npos ? what : what.substr(p)));
    err.set_file(name);
    throw err;
  } catch (const json::exception& e) {
    // e.g. out_of_range.406: a number literal beyond what a double holds.
    InputError err("$", std::string("not valid JSON: ") + e.what());
    err.set_file(name);
    throw err;
  }
  rd.object(j, "$");
  rd.only_keys(j, "$", {"schema", "metric", "peak", "categories", "category_max", "phases", "tolerance", "limits", "source"},
               true);
  Budget b;
  if (!j.contains("schema")) rd.fail("$.schema", "missing: a budget file starts with \"schema\": \"" +
                                                     std::string(kBudgetSchema) + "\"");
  std::string schema = rd.str(j["schema"], "$.schema");
  if (schema != kBudgetSchema && schema != kBudgetSchemaV1)
    rd.fail("$.schema", quote_value(schema, kMaxQuotedBytes, '"') + " is not a snapdiff budget (expected \"" + kBudgetSchema + "\" or \"" +
                            kBudgetSchemaV1 + "\")");
  const bool v1 = schema == kBudgetSchemaV1;
  for (const char* k : {"category_max", "phases"})
    if (v1 && j.contains(k))
      rd.fail(std::string("$.") + k, std::string("not in a \"") + kBudgetSchemaV1 + "\" budget (it came with \"" +
                                         kBudgetSchema + "\")");
  if (j.contains("metric")) {
    std::string m = rd.str(j["metric"], "$.metric");
    if (m != "requested" && m != "allocated" && m != "reserved")
      rd.fail("$.metric", "unknown metric " + quote_value(m, kMaxQuotedBytes, '"') + " (requested, allocated, reserved)");
    b.metric = parse_metric(m);
  }
  if (!j.contains("peak")) rd.fail("$.peak", "missing: the peaks of the run the budget was written from");
  const json& pk = rd.object(j["peak"], "$.peak");
  rd.only_keys(pk, "$.peak", {"requested_bytes", "allocated_bytes", "reserved_bytes"});
  for (const char* k : {"requested_bytes", "allocated_bytes", "reserved_bytes"})
    if (!pk.contains(k)) rd.fail(std::string("$.peak.") + k, "missing");
  b.peak.requested = rd.bytes_int(pk["requested_bytes"], "$.peak.requested_bytes");
  b.peak.allocated = rd.bytes_int(pk["allocated_bytes"], "$.peak.allocated_bytes");
  b.peak.reserved = rd.bytes_int(pk["reserved_bytes"], "$.peak.reserved_bytes");
  if (j.contains("categories")) {
    const json& c = rd.object(j["categories"], "$.categories");
    for (auto it = c.begin(); it != c.end(); ++it)
      b.peak.categories.emplace_back(it.key(), rd.bytes_int(it.value(), BudgetReader::key_path("$.categories", it.key())));
  }
  // Bytes per category name; `into` gets them in the file's order.
  auto byte_map = [&](const json& o, const std::string& path, std::vector<std::pair<std::string, ExtentPoint>>& into) {
    rd.object(o, path);
    for (auto it = o.begin(); it != o.end(); ++it) {
      ExtentPoint p;
      p.bytes = rd.bytes_int(it.value(), BudgetReader::key_path(path, it.key()));
      into.emplace_back(it.key(), p);
    }
  };
  const auto& phase_names = limit_phase_names();
  auto known_phase = [&](const std::string& key, const std::string& path) {
    if (std::find(phase_names.begin(), phase_names.end(), key) != phase_names.end()) return;
    std::string list;
    for (const std::string& p : phase_names) list += (list.empty() ? "" : ", ") + p;
    rd.fail(BudgetReader::key_path(path, key), "unknown phase (expected one of: " + list + ")");
  };
  if (j.contains("category_max")) byte_map(j["category_max"], "$.category_max", b.peak.category_max);
  if (j.contains("phases")) {
    const json& ph = rd.object(j["phases"], "$.phases");
    for (auto it = ph.begin(); it != ph.end(); ++it) {
      known_phase(it.key(), "$.phases");
      const std::string path = BudgetReader::key_path("$.phases", it.key());
      const json& o = rd.object(it.value(), path);
      rd.only_keys(o, path, {"spans", "requested_bytes", "allocated_bytes", "reserved_bytes", "categories"});
      PhasePeak p;
      p.phase = it.key();
      for (const char* k : {"requested_bytes", "allocated_bytes", "reserved_bytes"})
        if (!o.contains(k)) rd.fail(path + "." + k, "missing");
      p.requested.bytes = rd.bytes_int(o["requested_bytes"], path + ".requested_bytes");
      p.allocated.bytes = rd.bytes_int(o["allocated_bytes"], path + ".allocated_bytes");
      p.reserved.bytes = rd.bytes_int(o["reserved_bytes"], path + ".reserved_bytes");
      for (ExtentPoint* e : {&p.requested, &p.allocated, &p.reserved}) e->phase = p.phase;
      if (o.contains("spans")) {
        int64_t n = rd.bytes_int(o["spans"], path + ".spans");
        if (n > int64_t(UINT32_MAX)) rd.fail(path + ".spans", "value too large");
        p.spans = uint32_t(n);
      }
      if (o.contains("categories")) byte_map(o["categories"], path + ".categories", p.categories);
      for (auto& kv : p.categories) kv.second.phase = p.phase;
      b.peak.phases.push_back(std::move(p));
    }
  }
  if (j.contains("tolerance")) {
    const json& t = rd.object(j["tolerance"], "$.tolerance");
    rd.only_keys(t, "$.tolerance", {"max_increase", "warn_increase"});
    if (t.contains("max_increase")) b.max_increase = rd.amount(t["max_increase"], "$.tolerance.max_increase");
    if (t.contains("warn_increase")) b.warn_increase = rd.amount(t["warn_increase"], "$.tolerance.warn_increase");
  }
  if (j.contains("limits")) {
    const json& l = rd.object(j["limits"], "$.limits");
    rd.only_keys(l, "$.limits", {"max_peak", "categories", "phases"});
    if (l.contains("max_peak")) {
      auto [v, t] = rd.size(l["max_peak"], "$.limits.max_peak");
      b.max_peak = v;
      b.max_peak_text = t;
    }
    if (l.contains("categories")) {
      const json& c = rd.object(l["categories"], "$.limits.categories");
      for (auto it = c.begin(); it != c.end(); ++it) {
        auto [v, t] = rd.size(it.value(), BudgetReader::key_path("$.limits.categories", it.key()));
        b.limits.push_back({it.key(), v, t, ""});
      }
    }
    if (l.contains("phases")) {
      const json& ph = rd.object(l["phases"], "$.limits.phases");
      for (auto it = ph.begin(); it != ph.end(); ++it) {
        known_phase(it.key(), "$.limits.phases");
        const std::string path = BudgetReader::key_path("$.limits.phases", it.key());
        const json& c = rd.object(it.value(), path);
        for (auto ct = c.begin(); ct != c.end(); ++ct) {
          auto [v, t] = rd.size(ct.value(), BudgetReader::key_path(path, ct.key()));
          b.limits.push_back({ct.key(), v, t, it.key()});
        }
      }
    }
  }
  b.peak.name = name;
  b.peak.history = "complete";
  if (j.contains("source")) {
    const json& s = rd.object(j["source"], "$.source");
    auto opt_str = [&](const char* k, std::string& out) {
      if (s.contains(k)) out = rd.str(s[k], std::string("$.source.") + k);
    };
    std::string file;
    opt_str("file", file);
    opt_str("format", b.peak.format);
    opt_str("history", b.peak.history);
    opt_str("peak_phase", b.peak.phase);
    opt_str("snapdiff_version", b.snapdiff_version);
    if (s.contains("events")) b.peak.events = uint64_t(rd.bytes_int(s["events"], "$.source.events"));
    if (s.contains("device")) b.peak.device = int(rd.bytes_int(s["device"], "$.source.device"));
    if (s.contains("peak_iteration"))
      b.peak.iteration = int(rd.bytes_int(s["peak_iteration"], "$.source.peak_iteration"));
    if (!file.empty()) b.peak.name = name + " (from " + file + ")";
  }
  return b;
}

Budget read_budget_file(const std::string& path) {
  return parse_budget(detail::read_small_file(path, "budget file"), path);
}

std::string write_budget_json(const Budget& b) {
  nlohmann::ordered_json j;
  j["schema"] = kBudgetSchema;
  j["metric"] = metric_name(b.metric);
  j["peak"] = {{"requested_bytes", b.peak.requested},
               {"allocated_bytes", b.peak.allocated},
               {"reserved_bytes", b.peak.reserved}};
  j["categories"] = nlohmann::ordered_json::object();
  for (const auto& [k, v] : b.peak.categories) j["categories"][k] = v;
  if (!b.peak.category_max.empty()) {
    j["category_max"] = nlohmann::ordered_json::object();
    for (const auto& [k, v] : b.peak.category_max) j["category_max"][k] = v.bytes;
  }
  if (!b.peak.phases.empty()) {
    j["phases"] = nlohmann::ordered_json::object();
    for (const PhasePeak& p : b.peak.phases) {
      nlohmann::ordered_json o;
      o["spans"] = p.spans;
      o["requested_bytes"] = p.requested.bytes;
      o["allocated_bytes"] = p.allocated.bytes;
      o["reserved_bytes"] = p.reserved.bytes;
      o["categories"] = nlohmann::ordered_json::object();
      for (const auto& [k, v] : p.categories)  // the ones the phase kind holds (absent: none)
        if (v.bytes != 0) o["categories"][k] = v.bytes;
      j["phases"][p.phase] = o;
    }
  }
  j["tolerance"] = nlohmann::ordered_json::object();
  if (b.max_increase) j["tolerance"]["max_increase"] = b.max_increase->text;
  if (b.warn_increase) j["tolerance"]["warn_increase"] = b.warn_increase->text;
  if (b.max_peak || !b.limits.empty()) {
    j["limits"] = nlohmann::ordered_json::object();
    if (b.max_peak) j["limits"]["max_peak"] = b.max_peak_text.empty() ? std::to_string(*b.max_peak) : b.max_peak_text;
    bool run_wide = false, phased = false;
    for (const CategoryLimit& l : b.limits) (l.phase.empty() ? run_wide : phased) = true;
    if (run_wide) {
      j["limits"]["categories"] = nlohmann::ordered_json::object();
      for (const CategoryLimit& l : b.limits)
        if (l.phase.empty()) j["limits"]["categories"][l.category] = l.text;
    }
    if (phased) {
      j["limits"]["phases"] = nlohmann::ordered_json::object();
      for (const CategoryLimit& l : b.limits)
        if (!l.phase.empty()) j["limits"]["phases"][l.phase][l.category] = l.text;
    }
  }
  nlohmann::ordered_json s;
  s["file"] = b.peak.name;
  if (!b.peak.format.empty()) s["format"] = b.peak.format;
  s["events"] = b.peak.events;
  s["device"] = b.peak.device;
  s["history"] = b.peak.history;
  if (!b.peak.phase.empty()) s["peak_phase"] = b.peak.phase;
  s["peak_iteration"] = b.peak.iteration;
  s["snapdiff_version"] = b.snapdiff_version.empty() ? std::string(SNAPDIFF_VERSION) : b.snapdiff_version;
  j["source"] = s;
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";  // names that are not UTF-8: U+FFFD
}

}  // namespace snapdiff
