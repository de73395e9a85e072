// Renderings of a CheckResult: the one-screen text verdict, JSON
// ("snapdiff/check/1"), JUnit XML (one testcase per threshold) and GitHub
// Actions workflow commands.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "report/format.hpp"
#include "snapdiff/report/check_report.hpp"
#include "snapdiff/report/report.hpp"

namespace snapdiff {

namespace {



std::string with_commas(int64_t v) { return detail::with_commas_signed(v); }
// Names as text (report/format.hpp).
std::string dn(std::string_view s) { return detail::display_name(s); }
std::string pct_change(int64_t delta, int64_t base) { return detail::change_percent(delta, base, 2, "+0.00%", "n/a"); }

bool is_percent(const std::string& t) { return !t.empty() && t.back() == '%'; }

std::string limit_cell(const CheckItem& it) {
  if (it.kind == "history") return "complete";
  if (it.kind == "increase") {
    if (is_percent(it.limit_text)) return "+" + it.limit_text + " (" + human_bytes(it.limit_bytes) + ")";
    return human_delta(it.limit_bytes);
  }
  return human_bytes(it.limit_bytes);
}

std::string measured_cell(const CheckItem& it, const CheckResult& r) {
  if (it.kind == "history")
    return it.name == "baseline_history" && r.baseline ? r.baseline->history : r.candidate.history;
  if (it.kind == "increase") return human_delta(it.measured_bytes) + " (" + pct_change(it.measured_bytes, it.baseline_bytes) + ")";
  if (it.kind == "max_growth") return it.status == CheckStatus::Warn ? "not measured" : human_delta(it.measured_bytes) + "/iteration";
  return human_bytes(it.measured_bytes);
}

std::string margin_cell(const CheckItem& it) {
  if (it.kind == "history") return "-";
  return human_bytes(it.margin_bytes);
}

const char* status_cell(CheckStatus s) {
  switch (s) {
    case CheckStatus::Pass: return "pass";
    case CheckStatus::Warn: return "WARN";
    case CheckStatus::Fail: return "FAIL";
  }
  return "FAIL";
}

std::string limit_words(const CheckItem& it) {
  std::string s = it.limit_text;
  if (it.kind == "increase" && is_percent(s)) {
    std::string o(1, '+');
    o.append(s).append(" of the baseline (").append(human_bytes(it.limit_bytes)).append(")");
    return o;
  }
  if (it.kind == "increase") return human_delta(it.limit_bytes);
  return human_bytes(it.limit_bytes) + " (" + s + ")";
}

// One sentence on a threshold: what was measured against what.
std::string describe(const CheckItem& it, const CheckResult& r) {
  const std::string m = metric_name(r.metric);
  if (it.kind == "history") return it.message;
  if (it.kind == "max_growth") {
    if (it.status == CheckStatus::Warn) return it.message;  // not measured: why
    std::string s = "memory grows " + human_delta(it.measured_bytes) +
                    " per iteration (the median change of allocated bytes between the starts of iterations 2 to " +
                    it.message + ")";
    const std::string lim = human_bytes(it.limit_bytes) + " per iteration (" + it.limit_text + ")";
    if (it.status == CheckStatus::Fail) return s + ", over the limit " + lim + " by " + human_bytes(-it.margin_bytes);
    return s + ", within the limit " + lim;
  }
  if (it.kind == "increase") {
    int64_t cand = it.baseline_bytes + it.measured_bytes;
    std::string s = "the " + m + " peak " + (it.measured_bytes > 0 ? "rose by " : it.measured_bytes < 0 ? "fell by " : "changed by ") +
                    human_bytes(std::llabs(it.measured_bytes)) + " (" + pct_change(it.measured_bytes, it.baseline_bytes) +
                    ": " + with_commas(it.baseline_bytes) + " B -> " + with_commas(cand) + " B, " +
                    human_bytes(it.baseline_bytes) + " -> " + human_bytes(cand) + ")";
    bool warn_only = it.warn_bytes >= 0 && it.limit_bytes == it.warn_bytes && it.limit_text == it.warn_text;
    if (it.status == CheckStatus::Fail) return s + ", over the allowed " + limit_words(it) + " by " + human_bytes(-it.margin_bytes);
    if (it.status == CheckStatus::Warn) {
      CheckItem w = it;
      w.limit_text = it.warn_text;
      w.limit_bytes = it.warn_bytes;
      return s + ", over the warning level " + limit_words(w) +
             (warn_only ? std::string() : ", within the allowed " + limit_words(it));
    }
    return s + ", within the allowed " + limit_words(it);
  }
  std::string what = it.kind == "max_peak" ? "the " + m + " peak"
                                           : it.name.substr(6) + " at the peak (requested bytes)";
  std::string s = what + " is " + human_bytes(it.measured_bytes) + " (" + with_commas(it.measured_bytes) + " B)";
  if (it.status == CheckStatus::Fail) return s + ", over the limit " + limit_words(it) + " by " + human_bytes(-it.margin_bytes);
  return s + ", within the limit " + limit_words(it);
}

std::string pad(const std::string& s, size_t w) { return s.size() >= w ? s : s + std::string(w - s.size(), ' '); }
std::string lpad(const std::string& s, size_t w) { return s.size() >= w ? s : std::string(w - s.size(), ' ') + s; }

const char* verdict(CheckStatus s) {
  switch (s) {
    case CheckStatus::Pass: return "PASS";
    case CheckStatus::Warn: return "PASS (with warnings)";
    case CheckStatus::Fail: return "FAIL";
  }
  return "FAIL";
}

std::string peak_line(const PeakFigures& f, Metric m) {
  std::string s = std::string(metric_name(m)) + " peak " + human_bytes(f.peak(m)) + " (" + with_commas(f.peak(m)) + " B)";
  // A budget file's phase and history are free text (the reader checks their values, not their bytes).
  if (!f.phase.empty() && f.phase != "pre-trace") s += ", iteration " + std::to_string(f.iteration) + " " + dn(f.phase);
  if (f.history != "complete") s += ", history " + dn(f.history);
  return s;
}

}  // namespace

std::string xml_escape(const std::string& s) { return detail::escape(s, detail::Markup::Xml); }


std::string render_check_text(const CheckResult& r) {
  std::string o;
  size_t n = r.items.size(), failed = r.count(CheckStatus::Fail), warned = r.count(CheckStatus::Warn);
  o += "snapdiff check: ";
  o += verdict(r.status);
  o += "  (" + std::to_string(n) + " threshold" + (n == 1 ? "" : "s");
  if (failed) o += ", " + std::to_string(failed) + " failed";
  if (warned) o += ", " + std::to_string(warned) + " warned";
  o += ")\n";
  o += "  candidate  " + dn(r.candidate.name) + "\n             " + peak_line(r.candidate, r.metric) + "\n";
  if (r.baseline)
    o += "  baseline   " + dn(r.baseline->name) + (r.baseline_kind == "budget" ? "  [budget]" : "") + "\n             " +
         peak_line(*r.baseline, r.metric) + "\n";
  o += "\n";
  std::vector<std::array<std::string, 5>> rows;
  rows.push_back({"THRESHOLD", "LIMIT", "MEASURED", "MARGIN", "STATUS"});
  for (const CheckItem& it : r.items)
    rows.push_back({dn(it.name), dn(limit_cell(it)), dn(measured_cell(it, r)), margin_cell(it), status_cell(it.status)});
  size_t w[4] = {0, 0, 0, 0};
  for (const auto& row : rows)
    for (size_t c = 0; c < 4; ++c) w[c] = std::max(w[c], row[c].size());
  for (const auto& row : rows)
    o += "  " + pad(row[0], w[0]) + "  " + pad(row[1], w[1]) + "  " + pad(row[2], w[2]) + "  " + lpad(row[3], w[3]) +
         "  " + row[4] + "\n";
  bool any = false;
  for (const CheckItem& it : r.items) {
    if (it.status == CheckStatus::Pass) continue;
    if (!any) o += "\n";
    any = true;
    o += std::string("  ") + status_cell(it.status) + " " + dn(it.name) + ": " + dn(describe(it, r)) + "\n";
  }
  // What moved most at the peak, when there is something to compare with.
  if (r.baseline && !r.baseline->categories.empty()) {
    std::vector<std::pair<int64_t, std::string>> d;
    for (const auto& [name, v] : r.candidate.categories) {
      int64_t b = r.baseline->category(name);
      int64_t delta = v - std::max<int64_t>(b, 0);
      if (delta != 0) d.push_back({delta, name});
    }
    for (const auto& [name, v] : r.baseline->categories)
      if (r.candidate.category(name) < 0 && v != 0) d.push_back({-v, name});
    std::sort(d.begin(), d.end(), [](const auto& a, const auto& b) {
      return std::llabs(a.first) != std::llabs(b.first) ? std::llabs(a.first) > std::llabs(b.first) : a.second < b.second;
    });
    if (!d.empty()) {
      o += "\n  largest changes at the peak (requested bytes by category, vs the baseline): ";
      for (size_t i = 0; i < d.size() && i < 4; ++i) o += (i ? ", " : "") + dn(d[i].second) + " " + human_delta(d[i].first);
      o += "\n";
    }
  }
  return detail::terminal_safe(o);
}

std::string render_check_json(const CheckResult& r) {
  using nlohmann::ordered_json;
  auto figures = [](const PeakFigures& f) {
    ordered_json j;
    j["name"] = f.name;
    j["device"] = f.device;
    j["history"] = f.history;
    j["truncation"] = f.truncation;
    j["peak"] = {{"requested_bytes", f.requested}, {"allocated_bytes", f.allocated}, {"reserved_bytes", f.reserved}};
    if (!f.phase.empty()) {
      j["peak"]["phase"] = f.phase;
      j["peak"]["iteration"] = f.iteration;
    }
    j["categories"] = ordered_json::object();
    for (const auto& [k, v] : f.categories) j["categories"][k] = v;
    return j;
  };
  ordered_json j;
  j["schema"] = kCheckSchema;
  j["status"] = status_name(r.status);
  j["metric"] = metric_name(r.metric);
  j["candidate"] = figures(r.candidate);
  if (r.baseline) {
    j["baseline"] = figures(*r.baseline);
    j["baseline"]["kind"] = r.baseline_kind;
  } else {
    j["baseline"] = nullptr;
  }
  j["thresholds"] = ordered_json::array();
  for (const CheckItem& it : r.items) {
    ordered_json t;
    t["name"] = it.name;
    t["kind"] = it.kind;
    t["status"] = status_name(it.status);
    t["limit"] = it.limit_text;
    if (it.kind != "history") {
      t["limit_bytes"] = it.limit_bytes;
      t["measured_bytes"] = it.measured_bytes;
      t["margin_bytes"] = it.margin_bytes;
    }
    if (it.kind == "increase") {
      t["baseline_bytes"] = it.baseline_bytes;
      if (it.warn_bytes >= 0) {
        t["warn"] = it.warn_text;
        t["warn_bytes"] = it.warn_bytes;
      }
    }
    t["message"] = describe(it, r);
    j["thresholds"].push_back(t);
  }
  j["summary"] = {{"thresholds", r.items.size()},
                  {"passed", r.count(CheckStatus::Pass)},
                  {"warned", r.count(CheckStatus::Warn)},
                  {"failed", r.count(CheckStatus::Fail)}};
  // Invalid UTF-8 in a name becomes U+FFFD (docs/reliability.md).
  return detail::json_safe(j.dump(2, ' ', false, ordered_json::error_handler_t::replace)) + "\n";
}

std::string render_check_junit(const CheckResult& r) {
  std::string n = std::to_string(r.items.size()), f = std::to_string(r.count(CheckStatus::Fail));
  std::string o = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  o += "<testsuites name=\"snapdiff check\" tests=\"" + n + "\" failures=\"" + f + "\" errors=\"0\" skipped=\"0\" time=\"0\">\n";
  // Names shown as display_name shows them (a newline as \n, not a space
  // in an attribute), then escaped for XML.
  o += "  <testsuite name=\"" + xml_escape("snapdiff check: " + dn(r.candidate.name)) + "\" tests=\"" + n +
       "\" failures=\"" + f + "\" errors=\"0\" skipped=\"0\" time=\"0\">\n";
  o += "    <properties>\n";
  auto prop = [&](const std::string& k, const std::string& v) {
    o += "      <property name=\"" + xml_escape(k) + "\" value=\"" + xml_escape(v) + "\"/>\n";
  };
  prop("metric", metric_name(r.metric));
  prop("candidate", dn(r.candidate.name));
  if (r.baseline) prop("baseline", dn(r.baseline->name));
  o += "    </properties>\n";
  for (const CheckItem& it : r.items) {
    o += "    <testcase classname=\"snapdiff.check\" name=\"" + xml_escape(dn(it.name)) + "\" time=\"0\"";
    std::string text = dn(describe(it, r));
    std::string detail = "limit: " + dn(limit_cell(it)) + "\nmeasured: " + dn(measured_cell(it, r)) + "\nmargin: " +
                         margin_cell(it) + "\n";
    if (it.status == CheckStatus::Pass) {
      o += "/>\n";
      continue;
    }
    o += ">\n";
    if (it.status == CheckStatus::Fail)
      o += "      <failure type=\"" + xml_escape(it.kind) + "\" message=\"" + xml_escape(text) + "\">" +
           xml_escape(detail) + "</failure>\n";
    else
      o += "      <system-out>" + xml_escape("warning: " + text + "\n" + detail) + "</system-out>\n";
    o += "    </testcase>\n";
  }
  o += "  </testsuite>\n</testsuites>\n";
  return o;
}

// One line per annotation whatever the names hold: display_name, then
// GitHub's escapes (report/format.hpp).
std::string render_check_github(const CheckResult& r) {
  const auto esc_data = detail::github_message;
  const auto esc_prop = detail::github_property;
  std::string o;
  for (const CheckItem& it : r.items) {
    if (it.status == CheckStatus::Pass) continue;
    o += it.status == CheckStatus::Fail ? "::error" : "::warning";
    o += " title=" + esc_prop("snapdiff check " + it.name) + "::" + esc_data(r.candidate.name + ": " + describe(it, r)) + "\n";
  }
  return o;
}

}  // namespace snapdiff
