// `snapdiff check`: thresholds evaluated against the peaks of a Analysis, size
// and tolerance parsing, and budget files (schemas/budget.schema.json).
// Data only: nothing here formats for people (src/report/check_report.cpp).
#include "snapdiff/check.hpp"

#include <cctype>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "snapdiff/error.hpp"
#include "util/read_file.hpp"

namespace snapdiff {

namespace {

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A non-negative decimal number ("512", "1.5", ".5"), all of `s`.
std::optional<long double> parse_number(const std::string& s) {
  if (s.empty()) return std::nullopt;
  long double v = 0, scale = 1;
  bool dot = false, digits = false;
  for (char c : s) {
    if (c == '.') {
      if (dot) return std::nullopt;
      dot = true;
    } else if (c >= '0' && c <= '9') {
      digits = true;
      if (dot) {
        scale /= 10;
        v += (c - '0') * scale;
      } else {
        v = v * 10 + (c - '0');
      }
      if (v > 1e30L) return std::nullopt;
    } else {
      return std::nullopt;
    }
  }
  if (!digits) return std::nullopt;
  return v;
}

}  // namespace

const char* metric_name(Metric m) {
  switch (m) {
    case Metric::Requested: return "requested";
    case Metric::Allocated: return "allocated";
    case Metric::Reserved: return "reserved";
  }
  return "allocated";
}

Metric parse_metric(const std::string& text) {
  if (text == "requested") return Metric::Requested;
  if (text == "allocated") return Metric::Allocated;
  if (text == "reserved") return Metric::Reserved;
  throw UsageError("unknown metric '" + text + "' (requested, allocated, reserved)");
}

const char* status_name(CheckStatus s) {
  switch (s) {
    case CheckStatus::Pass: return "pass";
    case CheckStatus::Warn: return "warn";
    case CheckStatus::Fail: return "fail";
  }
  return "fail";
}

std::optional<int64_t> parse_size(const std::string& text) {
  std::string s = trim(text);
  size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  auto num = parse_number(s.substr(0, i));
  if (!num) return std::nullopt;
  std::string unit = lower(trim(s.substr(i)));
  long double mult;
  if (unit.empty() || unit == "b") mult = 1;
  else if (unit == "kib") mult = 1024.0L;
  else if (unit == "mib") mult = 1024.0L * 1024;
  else if (unit == "gib") mult = 1024.0L * 1024 * 1024;
  else if (unit == "tib") mult = 1024.0L * 1024 * 1024 * 1024;
  else if (unit == "kb") mult = 1e3L;
  else if (unit == "mb") mult = 1e6L;
  else if (unit == "gb") mult = 1e9L;
  else if (unit == "tb") mult = 1e12L;
  else return std::nullopt;
  long double v = std::round(*num * mult);
  if (v > static_cast<long double>(std::numeric_limits<int64_t>::max() / 2)) return std::nullopt;
  return static_cast<int64_t>(v);
}

std::optional<Amount> parse_amount(const std::string& text) {
  std::string s = trim(text);
  Amount a;
  a.text = s;
  if (!s.empty() && s.back() == '%') {
    auto num = parse_number(trim(s.substr(0, s.size() - 1)));
    if (!num || *num > 1e9L) return std::nullopt;
    a.percent = true;
    a.pct = static_cast<double>(*num);
    return a;
  }
  auto b = parse_size(s);
  if (!b) return std::nullopt;
  a.bytes = *b;
  return a;
}

int64_t Amount::bytes_of(int64_t base) const {
  if (!percent) return bytes;
  if (base <= 0) return 0;
  return static_cast<int64_t>(std::floor(static_cast<long double>(base) * pct / 100.0L));
}

int64_t PeakFigures::peak(Metric m) const {
  switch (m) {
    case Metric::Requested: return requested;
    case Metric::Allocated: return allocated;
    case Metric::Reserved: return reserved;
  }
  return allocated;
}

int64_t PeakFigures::category(const std::string& n) const {
  for (const auto& [k, v] : categories)
    if (k == n) return v;
  return -1;
}

PeakFigures peak_figures(const Analysis& r) {
  PeakFigures f;
  f.name = r.input_name;
  f.events = r.events;
  f.format = r.source.format;
  if (r.devices.empty()) {
    f.history = "none";
    return f;
  }
  const DeviceAnalysis& d = r.devices[r.peak_device];
  f.device = d.device;
  f.requested = d.replay.peak_requested.bytes;
  f.allocated = d.replay.peak_allocated.bytes;
  f.reserved = d.replay.peak_reserved.bytes;
  for (size_t i = 0; i < d.attr.categories.size(); ++i)
    f.categories.emplace_back(d.attr.categories[i], i < d.categories.size() ? d.categories[i] : 0);
  if (!d.replay.has_trace || d.events == 0) f.history = "none";
  else if (d.replay.truncated || r.history_truncated) f.history = "truncated";
  f.phase = phase_name(d.peak_phase);
  f.iteration = d.peak_iteration;
  return f;
}

size_t CheckResult::count(CheckStatus s) const {
  size_t n = 0;
  for (const CheckItem& i : items) n += i.status == s;
  return n;
}

namespace {

CheckItem history_item(const std::string& name, const std::string& who, const PeakFigures& f, bool allow) {
  CheckItem it;
  it.name = name;
  it.kind = "history";
  it.limit_text = "complete";
  if (f.history == "complete") {
    it.message = who + " history is complete: the peak is established";
    return it;
  }
  it.status = allow ? CheckStatus::Warn : CheckStatus::Fail;
  if (f.history == "truncated" && f.format == "chrome-trace")
    it.message = who + " " + f.name +
                 ": the profiler started with memory already allocated, so the trace's peak is exact for the profiled "
                 "window only: a higher peak before it cannot be seen. Profile from the start of the run";
  else if (f.history == "truncated")
    it.message = who + " " + f.name +
                 ": the history is truncated (the ring buffer wrapped, max_entries was reached), so the peak "
                 "cannot be established: a higher peak before the first recorded event cannot be seen. Record with a "
                 "larger torch.cuda.memory._record_memory_history(max_entries=...)";
  else
    it.message = who + " " + f.name +
                 ": the snapshot has no allocation history (recorded without _record_memory_history, or a bare "
                 "segment list), so the peak cannot be established";
  it.message += allow ? " (allowed by --allow-truncated: the figures are for the recorded window only)"
                      : ", or pass --allow-truncated to check the recorded window anyway";
  return it;
}

}  // namespace

CheckResult evaluate_check(const PeakFigures& candidate, const std::optional<PeakFigures>& baseline,
                           const std::string& baseline_kind, const CheckOptions& opts) {
  CheckResult r;
  r.metric = opts.metric;
  r.candidate = candidate;
  r.baseline = baseline;
  r.baseline_kind = baseline ? baseline_kind : std::string();
  const std::string m = metric_name(opts.metric);
  bool increase = opts.max_increase || opts.warn_increase;
  if (!increase && !opts.max_peak && opts.limits.empty())
    throw UsageError("no thresholds to check: give --max-increase, --warn-increase, --max-peak, --limit or --budget");

  r.items.push_back(history_item("history", "candidate", candidate, opts.allow_truncated));
  if (baseline && baseline_kind == "snapshot" && increase)
    r.items.push_back(history_item("baseline_history", "baseline", *baseline, opts.allow_truncated));

  if (increase) {
    if (!baseline) throw UsageError("--max-increase and --warn-increase need a BASELINE snapshot or a --budget");
    CheckItem it;
    it.name = "increase." + m;
    it.kind = "increase";
    it.baseline_bytes = baseline->peak(opts.metric);
    it.measured_bytes = candidate.peak(opts.metric) - it.baseline_bytes;
    if (opts.warn_increase) {
      it.warn_bytes = opts.warn_increase->bytes_of(it.baseline_bytes);
      it.warn_text = opts.warn_increase->text;
    }
    if (opts.max_increase) {
      it.limit_text = opts.max_increase->text;
      it.limit_bytes = opts.max_increase->bytes_of(it.baseline_bytes);
      if (it.warn_bytes > it.limit_bytes)
        throw UsageError("--warn-increase " + it.warn_text + " is above --max-increase " + it.limit_text +
                         " (the warning level must be below the failure level)");
      if (it.measured_bytes > it.limit_bytes) it.status = CheckStatus::Fail;
      else if (it.warn_bytes >= 0 && it.measured_bytes > it.warn_bytes) it.status = CheckStatus::Warn;
    } else {
      // A warning level alone never fails.
      it.limit_text = it.warn_text;
      it.limit_bytes = it.warn_bytes;
      if (it.measured_bytes > it.warn_bytes) it.status = CheckStatus::Warn;
    }
    it.margin_bytes = it.limit_bytes - it.measured_bytes;
    r.items.push_back(it);
  }
  if (opts.max_peak) {
    CheckItem it;
    it.name = "max_peak." + m;
    it.kind = "max_peak";
    it.limit_text = opts.max_peak_text;
    it.limit_bytes = *opts.max_peak;
    it.measured_bytes = candidate.peak(opts.metric);
    it.margin_bytes = it.limit_bytes - it.measured_bytes;
    if (it.measured_bytes > it.limit_bytes) it.status = CheckStatus::Fail;
    r.items.push_back(it);
  }
  for (const CategoryLimit& l : opts.limits) {
    int64_t v = candidate.category(l.category);
    if (v < 0) {
      std::string names;
      for (const auto& c : candidate.categories) names += (names.empty() ? "" : ", ") + c.first;
      throw UsageError("--limit: unknown category '" + l.category + "' (" + names + ")");
    }
    CheckItem it;
    it.name = "limit." + l.category;
    it.kind = "category_limit";
    it.limit_text = l.text;
    it.limit_bytes = l.bytes;
    it.measured_bytes = v;
    it.margin_bytes = l.bytes - v;
    if (v > l.bytes) it.status = CheckStatus::Fail;
    r.items.push_back(it);
  }
  r.status = r.count(CheckStatus::Fail) ? CheckStatus::Fail
             : r.count(CheckStatus::Warn) ? CheckStatus::Warn
                                          : CheckStatus::Pass;
  return r;
}

// ---------------------------------------------------------------------------
// Budget files.

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
    if (ident) return parent + "." + key;
    return parent + "[" + json(key).dump() + "]";
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
      auto b = parse_size(j.get<std::string>());
      if (!b) fail(path, "not a size: " + j.dump() + " (e.g. \"512MiB\", \"60GiB\", \"1.5GB\", or bytes)");
      return {*b, trim(j.get<std::string>())};
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
  rd.only_keys(j, "$", {"schema", "metric", "peak", "categories", "tolerance", "limits", "source"}, true);
  Budget b;
  if (!j.contains("schema")) rd.fail("$.schema", "missing: a budget file starts with \"schema\": \"" +
                                                     std::string(kBudgetSchema) + "\"");
  std::string schema = rd.str(j["schema"], "$.schema");
  if (schema != kBudgetSchema)
    rd.fail("$.schema", "\"" + schema + "\" is not a snapdiff budget (expected \"" + kBudgetSchema + "\")");
  if (j.contains("metric")) {
    std::string m = rd.str(j["metric"], "$.metric");
    if (m != "requested" && m != "allocated" && m != "reserved")
      rd.fail("$.metric", "unknown metric \"" + m + "\" (requested, allocated, reserved)");
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
  if (j.contains("tolerance")) {
    const json& t = rd.object(j["tolerance"], "$.tolerance");
    rd.only_keys(t, "$.tolerance", {"max_increase", "warn_increase"});
    if (t.contains("max_increase")) b.max_increase = rd.amount(t["max_increase"], "$.tolerance.max_increase");
    if (t.contains("warn_increase")) b.warn_increase = rd.amount(t["warn_increase"], "$.tolerance.warn_increase");
  }
  if (j.contains("limits")) {
    const json& l = rd.object(j["limits"], "$.limits");
    rd.only_keys(l, "$.limits", {"max_peak", "categories"});
    if (l.contains("max_peak")) {
      auto [v, t] = rd.size(l["max_peak"], "$.limits.max_peak");
      b.max_peak = v;
      b.max_peak_text = t;
    }
    if (l.contains("categories")) {
      const json& c = rd.object(l["categories"], "$.limits.categories");
      for (auto it = c.begin(); it != c.end(); ++it) {
        auto [v, t] = rd.size(it.value(), BudgetReader::key_path("$.limits.categories", it.key()));
        b.limits.push_back({it.key(), v, t});
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
  j["tolerance"] = nlohmann::ordered_json::object();
  if (b.max_increase) j["tolerance"]["max_increase"] = b.max_increase->text;
  if (b.warn_increase) j["tolerance"]["warn_increase"] = b.warn_increase->text;
  if (b.max_peak || !b.limits.empty()) {
    j["limits"] = nlohmann::ordered_json::object();
    if (b.max_peak) j["limits"]["max_peak"] = b.max_peak_text.empty() ? std::to_string(*b.max_peak) : b.max_peak_text;
    if (!b.limits.empty()) {
      j["limits"]["categories"] = nlohmann::ordered_json::object();
      for (const CategoryLimit& l : b.limits) j["limits"]["categories"][l.category] = l.text;
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
  return j.dump(2) + "\n";
}

}  // namespace snapdiff
