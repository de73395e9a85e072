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
  if (it.kind == "history") {
    const PeakFigures& f = it.name == "baseline_history" && r.baseline ? *r.baseline : r.candidate;
    if (f.history == "truncated" && f.truncation == "late_start" && f.format != "chrome-trace") return "late start";
    return f.history;
  }
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

// Where an extent is first reached: "in iteration 1 optimizer", "in init",
// "before the first recorded event"; ", on device 1" when that is not the
// device whose peaks are shown.
std::string where_words(const ExtentPoint& at, int shown_device) {
  std::string s;
  if (at.event_index < 0 && (at.phase == "pre_trace" || at.phase == "pre-trace"))
    s = "before the first recorded event";
  else if (at.iteration <= 0)
    s = "in " + dn(at.phase);
  else
    s = "in iteration " + std::to_string(at.iteration) + " " + dn(at.phase);
  if (at.device != shown_device) s += ", on device " + std::to_string(at.device);
  return s;
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
  if (it.kind == "category_limit" && !it.message.empty()) return it.message;
  std::string s;
  if (it.kind == "max_peak") {
    s = "the " + m + " peak is " + human_bytes(it.measured_bytes) + " (" + with_commas(it.measured_bytes) + " B)";
  } else if (it.has_at) {
    // "optimizer_temporary reaches 10.0 GiB (10,740,563,968 B requested) at
    // its largest over the run, in iteration 1 optimizer"
    s = it.category + " reaches " + human_bytes(it.measured_bytes) + " (" + with_commas(it.measured_bytes) +
        " B requested) at its largest " + (it.phase.empty() ? "over the run" : "in the " + it.phase + " phases") + ", " +
        where_words(it.at, r.candidate.device);
  } else {
    s = it.category + " at the peak is " + human_bytes(it.measured_bytes) + " (" + with_commas(it.measured_bytes) +
        " B requested)";
  }
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
  if (!f.phase.empty() && f.phase != "pre-trace" && f.phase != "pre_trace")
    s += ", iteration " + std::to_string(f.iteration) + " " + dn(f.phase);
  if (f.history != "complete") s += ", history " + dn(f.history);
  return s;
}

// A threshold that did not pass, in a few words: "allocated peak 411.3 MiB >
// 100.0 MiB", "activation 157.1 MiB > 10.0 MiB".
std::string short_item(const CheckItem& it, const CheckResult& r) {
  const std::string m = metric_name(r.metric);
  const char* over = it.status == CheckStatus::Fail ? " > " : " above the warning level ";
  if (it.kind == "history") return "history " + dn(r.candidate.history) + " (its peak cannot be established)";
  if (it.kind == "max_peak") return m + " peak " + human_bytes(it.measured_bytes) + over + human_bytes(it.limit_bytes);
  if (it.kind == "increase") {
    const bool warn = it.status == CheckStatus::Warn && it.warn_bytes >= 0;
    const std::string lim = warn ? it.warn_text : it.limit_text;
    return m + " peak " + human_delta(it.measured_bytes) + " (" + pct_change(it.measured_bytes, it.baseline_bytes) +
           ") over the " + (r.baseline_kind == "budget" ? "budget" : "baseline") + over +
           (is_percent(lim) ? "+" + lim : human_delta(warn ? it.warn_bytes : it.limit_bytes));
  }
  if (it.kind == "max_growth") {
    if (it.status == CheckStatus::Warn) return "growth not measured";
    return "growth " + human_delta(it.measured_bytes) + "/iteration" + over + human_bytes(it.limit_bytes);
  }
  if (it.kind == "category_limit" && it.status == CheckStatus::Warn) return dn(it.message);
  return dn(it.category) + (it.phase.empty() ? "" : " in " + dn(it.phase)) + " " + human_bytes(it.measured_bytes) + over +
         human_bytes(it.limit_bytes);
}

// "activation +1.8 GiB at the peak; its largest site holds 64.0 MiB: train
// (model.py:88) [in scaled_dot_product_attention (functional.py:5601)]"
std::string finding_text(const CheckFinding& f) {
  std::string s = dn(f.category) + " " + (f.change ? human_delta(*f.change) : human_bytes(f.bytes)) + " at the peak";
  if (f.site) {
    s += "; its largest site holds " + human_bytes(f.site->bytes) + ": " +
         (f.site->site.empty() ? "<no stack recorded>" : dn(f.site->site));
    if (!f.site->in.empty()) s += " [in " + dn(f.site->in) + "]";
  }
  return s;
}

}  // namespace

std::string xml_escape(const std::string& s) { return detail::escape(s, detail::Markup::Xml); }

std::string render_check_headline(const CheckResult& r) {
  std::string s;
  for (CheckStatus want : {CheckStatus::Fail, CheckStatus::Warn}) {
    for (const CheckItem& it : r.items)
      if (it.status == want) s += (s.empty() ? "" : "; ") + short_item(it, r);
    if (!s.empty()) break;
  }
  if (s.empty()) s = "within every threshold: " + peak_line(r.candidate, r.metric);
  if (!r.findings.empty()) s += ": " + finding_text(r.findings.front());
  return detail::terminal_safe(s);
}


std::string render_check_text(const CheckResult& r, size_t width) {
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
    // A history that passes without being complete (a late start) says what its peak is.
    const bool late = it.kind == "history" && measured_cell(it, r) != "complete";
    if (it.status == CheckStatus::Pass && !late) continue;
    if (!any) o += "\n";
    any = true;
    o += detail::prose(std::string("  ") + status_cell(it.status) + " ", dn(it.name) + ": " + dn(describe(it, r)));
  }
  if (!r.findings.empty()) {
    o += std::string("\n  ") + (r.baseline && !r.baseline->categories.empty() ? "what rose most at the peak, vs the baseline"
                                                                                : "largest at the peak") + ":\n";
    for (const CheckFinding& f : r.findings) o += detail::prose("    - ", finding_text(f));
  }
  // Each phase kind's peak of the metric, against the baseline's where it
  // has them (budgets written before phase peaks were kept do not).
  if (!r.candidate.phases.empty()) {
    const bool base = r.baseline && !r.baseline->phases.empty();
    std::vector<std::array<std::string, 4>> ph;
    ph.push_back({"PHASE", "PEAK", base ? "BASELINE" : "", base ? "CHANGE" : ""});
    for (const PhasePeak& p : r.candidate.phases) {
      const int64_t v = p.peak(r.metric).bytes;
      std::array<std::string, 4> row{dn(p.phase), human_bytes(v), "", ""};
      if (base) {
        if (const PhasePeak* b = r.baseline->phase_peak(p.phase)) {
          const int64_t bv = b->peak(r.metric).bytes;
          row[2] = human_bytes(bv);
          row[3] = v == bv ? "unchanged" : human_delta(v - bv) + " (" + pct_change(v - bv, bv) + ")";
        } else {
          row[2] = "-";
          row[3] = "new phase";
        }
      }
      ph.push_back(row);
    }
    size_t pw[3] = {0, 0, 0};
    for (const auto& row : ph)
      for (size_t c = 0; c < 3; ++c) pw[c] = std::max(pw[c], row[c].size());
    o += std::string("\n  ") + metric_name(r.metric) + " peak of each phase kind, over all of its spans" +
         (base ? " (vs the baseline)" : "") + ":\n";
    for (const auto& row : ph) {
      std::string line = "  " + pad(row[0], pw[0]) + "  " + lpad(row[1], pw[1]);
      if (base) line += "  " + lpad(row[2], pw[2]) + "  " + row[3];
      o += line + "\n";
    }
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
      std::string line = "largest changes at the peak (requested bytes by category, vs the baseline): ";
      for (size_t i = 0; i < d.size() && i < 4; ++i) line += (i ? ", " : "") + dn(d[i].second) + " " + human_delta(d[i].first);
      o += "\n";
      o += detail::prose("  ", line);
    }
  }
  return detail::finish_text(o, width);
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
    auto at = [](const ExtentPoint& p) {
      ordered_json a;
      a["bytes"] = p.bytes;
      a["phase"] = p.phase;
      a["iteration"] = p.iteration;
      a["event_index"] = p.event_index;
      a["device"] = p.device;
      return a;
    };
    if (!f.category_max.empty()) {
      j["category_max"] = ordered_json::object();
      for (const auto& [k, v] : f.category_max) j["category_max"][k] = at(v);
    }
    if (!f.sites.empty()) {
      j["sites"] = ordered_json::array();
      for (const PeakSite& p : f.sites)
        j["sites"].push_back({{"category", p.category},
                              {"bytes", p.bytes},
                              {"allocations", p.allocations},
                              {"site", p.site.empty() ? ordered_json(nullptr) : ordered_json(p.site)},
                              {"in", p.in.empty() ? ordered_json(nullptr) : ordered_json(p.in)}});
    }
    if (!f.phases.empty()) {
      j["phases"] = ordered_json::object();
      for (const PhasePeak& p : f.phases) {
        ordered_json o;
        o["spans"] = p.spans;
        o["requested"] = at(p.requested);
        o["allocated"] = at(p.allocated);
        o["reserved"] = at(p.reserved);
        o["categories"] = ordered_json::object();
        for (const auto& [k, v] : p.categories) o["categories"][k] = at(v);
        j["phases"][p.phase] = o;
      }
    }
    return j;
  };
  ordered_json j;
  j["schema"] = kCheckSchema;
  j["status"] = status_name(r.status);
  j["metric"] = metric_name(r.metric);
  j["headline"] = render_check_headline(r);
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
    if (it.kind == "category_limit") {
      t["category"] = it.category;
      t["phase"] = it.phase.empty() ? ordered_json(nullptr) : ordered_json(it.phase);
      if (it.has_at)
        t["at"] = {{"phase", it.at.phase}, {"iteration", it.at.iteration}, {"event_index", it.at.event_index},
                   {"device", it.at.device}};
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
  j["findings"] = ordered_json::array();
  for (const CheckFinding& f : r.findings) {
    ordered_json x;
    x["category"] = f.category;
    x["bytes"] = f.bytes;
    x["change_bytes"] = f.change ? ordered_json(*f.change) : ordered_json(nullptr);
    x["site"] = f.site && !f.site->site.empty() ? ordered_json(f.site->site) : ordered_json(nullptr);
    x["in"] = f.site && !f.site->in.empty() ? ordered_json(f.site->in) : ordered_json(nullptr);
    x["site_bytes"] = f.site ? ordered_json(f.site->bytes) : ordered_json(nullptr);
    x["text"] = finding_text(f);
    j["findings"].push_back(std::move(x));
  }
  j["summary"] = {{"thresholds", r.items.size()},
                  {"passed", r.count(CheckStatus::Pass)},
                  {"warned", r.count(CheckStatus::Warn)},
                  {"failed", r.count(CheckStatus::Fail)}};
  // Invalid UTF-8 in a name becomes U+FFFD (docs/reliability.md).
  return detail::json_safe(j.dump(2, ' ', false, ordered_json::error_handler_t::replace)) + "\n";
}

namespace {

// One threshold as a JUnit testcase named `name`: empty when it passed, a
// failure or a warning (as system-out) otherwise.
void junit_testcase(std::string& o, const std::string& name, const CheckItem& it, const CheckResult& r) {
  o += "    <testcase classname=\"snapdiff.check\" name=\"" + xml_escape(name) + "\" time=\"0\"";
  if (it.status == CheckStatus::Pass) {
    o += "/>\n";
    return;
  }
  const std::string text = dn(describe(it, r));
  const std::string detail = "limit: " + dn(limit_cell(it)) + "\nmeasured: " + dn(measured_cell(it, r)) + "\nmargin: " +
                             margin_cell(it) + "\n";
  o += ">\n";
  if (it.status == CheckStatus::Fail)
    o += "      <failure type=\"" + xml_escape(it.kind) + "\" message=\"" + xml_escape(text) + "\">" +
         xml_escape(detail) + "</failure>\n";
  else
    o += "      <system-out>" + xml_escape("warning: " + text + "\n" + detail) + "</system-out>\n";
  o += "    </testcase>\n";
}

}  // namespace

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
  for (const CheckItem& it : r.items) junit_testcase(o, dn(it.name), it, r);
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

namespace {

// The entries of render_check_github_benchmark, appended to `out`.
void benchmark_entries(const CheckResult& r, const std::string& name, nlohmann::ordered_json& out) {
  using nlohmann::ordered_json;
  const PeakFigures& c = r.candidate;
  std::string where;
  if (!c.phase.empty() && c.phase != "pre_trace" && c.phase != "pre-trace")
    where = "iteration " + std::to_string(c.iteration) + " " + dn(c.phase);
  auto entry = [&](const std::string& what, int64_t value, const std::string& range, std::string extra) {
    ordered_json e;
    e["name"] = name + ": " + what;
    e["unit"] = "bytes";
    e["value"] = value;
    if (!range.empty()) e["range"] = range;
    e["extra"] = std::move(extra);
    out.push_back(std::move(e));
  };
  auto threshold_of = [&](const std::string& kind, const std::string& category, const std::string& phase) -> const CheckItem* {
    for (const CheckItem& it : r.items)
      if (it.kind == kind && it.category == category && it.phase == phase) return &it;
    return nullptr;
  };
  auto range_of = [&](const CheckItem* it) {
    if (!it) return std::string();
    if (it->kind == "increase")
      return "<= " + human_bytes(it->baseline_bytes + it->limit_bytes) + " (+" +
             (is_percent(it->limit_text) ? it->limit_text : human_bytes(it->limit_bytes)) + " over the " +
             (r.baseline_kind == "budget" ? "budget" : "baseline") + ")";
    return "<= " + human_bytes(it->limit_bytes);
  };
  const std::string verdict_words = std::string("snapdiff check: ") + status_name(r.status);
  const std::string m = metric_name(r.metric);
  const CheckItem* peak_limit = threshold_of("max_peak", "", "");
  const CheckItem* inc = threshold_of("increase", "", "");
  std::string range = range_of(peak_limit ? peak_limit : inc);
  if (peak_limit && inc) range += ", " + range_of(inc);
  std::string extra = human_bytes(c.peak(r.metric)) + (where.empty() ? "" : " at " + where) + "; " + verdict_words;
  if (!r.findings.empty()) extra += "; " + finding_text(r.findings.front());
  entry(m + " peak", c.peak(r.metric), range, extra);
  if (r.metric != Metric::Reserved)
    entry("reserved peak", c.reserved, "", human_bytes(c.reserved) + " (cached by the allocator)");
  for (const CheckItem& it : r.items) {
    if (it.kind == "category_limit" && (it.has_at || it.phase.empty()))
      entry(it.category + (it.phase.empty() ? "" : " in " + it.phase) + " at its largest", it.measured_bytes,
            range_of(&it),
            human_bytes(it.measured_bytes) + (it.has_at ? " " + where_words(it.at, c.device) : "") + "; " +
                status_name(it.status));
    if (it.kind == "max_growth" && it.status != CheckStatus::Warn)
      entry("growth per iteration", it.measured_bytes, range_of(&it),
            human_delta(it.measured_bytes) + " per iteration; " + status_name(it.status));
  }
}

}  // namespace

std::string render_check_github_benchmark(const CheckResult& r, const std::string& name) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  benchmark_entries(r, name, out);
  return detail::json_safe(out.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace)) + "\n";
}

// ---- Many ranks ------------------------------------------------------------

namespace {

std::string rank_label(const RankCheck& r) { return r.rank >= 0 ? "rank " + std::to_string(r.rank) : "rank ?"; }

// "rank 1, rank 3" for the verdict line.
std::string rank_list(const RanksCheck& c, const std::vector<size_t>& idx) {
  std::string s;
  for (size_t k = 0; k < idx.size(); ++k) {
    if (k == 5) return s + " and " + std::to_string(idx.size() - 5) + " more";
    s += (k ? ", " : "") + rank_label(c.ranks[idx[k]]);
  }
  return s;
}

// The first failed (else warned) threshold of a rank, in a few words.
std::string rank_summary(const RankCheck& r) {
  if (!r.result) return dn(r.error);
  for (CheckStatus want : {CheckStatus::Fail, CheckStatus::Warn})
    for (const CheckItem& it : r.result->items)
      if (it.status == want) return dn(it.name) + ": " + dn(describe(it, *r.result));
  return peak_line(r.result->candidate, r.result->metric);
}

const char* rank_status(const RankCheck& r) {
  if (!r.result) return r.input_error ? "ERROR" : "FAIL";
  return status_cell(r.result->status);
}

}  // namespace

std::string render_ranks_check_text(const RanksCheck& c, size_t width) {
  std::string o = "snapdiff check: ";
  o += verdict(c.status);
  o += "  (" + std::to_string(c.ranks.size()) + (c.ranks.size() == 1 ? " rank" : " ranks");
  if (!c.failing.empty()) o += ", " + std::to_string(c.failing.size()) + " failed: " + rank_list(c, c.failing);
  if (!c.unchecked.empty())
    o += ", " + std::to_string(c.unchecked.size()) + " not checked: " + rank_list(c, c.unchecked);
  if (!c.warning.empty()) o += ", " + std::to_string(c.warning.size()) + " warned: " + rank_list(c, c.warning);
  o += ")\n\n";
  std::vector<std::array<std::string, 4>> rows;
  rows.push_back({"RANK", "STATUS", "FILE", "WHY"});
  for (const RankCheck& r : c.ranks)
    rows.push_back({r.rank >= 0 ? std::to_string(r.rank) : "?", rank_status(r), dn(r.name), rank_summary(r)});
  size_t w[3] = {0, 0, 0};
  for (const auto& row : rows)
    for (size_t k = 0; k < 3; ++k) w[k] = std::max(w[k], row[k].size());
  for (const auto& row : rows)
    o += "  " + lpad(row[0], w[0]) + "  " + pad(row[1], w[1]) + "  " + pad(row[2], w[2]) + "  " + row[3] + "\n";
  // Each rank that failed or warned, in full.
  for (const RankCheck& r : c.ranks) {
    if (!r.result || r.result->status == CheckStatus::Pass) continue;
    o += "\n" + rank_label(r) + ":\n" + render_check_text(*r.result, width);
  }
  return detail::finish_text(o, width);
}

std::string render_ranks_check_json(const RanksCheck& c) {
  using nlohmann::ordered_json;
  ordered_json j;
  j["schema"] = kRanksCheckSchema;
  j["status"] = status_name(c.status);
  {
    // The first failing (else warning, else any) rank's headline.
    std::string h;
    for (const std::vector<size_t>* idx : {&c.failing, &c.unchecked, &c.warning})
      if (h.empty() && !idx->empty()) {
        const RankCheck& r = c.ranks[idx->front()];
        h = rank_label(r) + ": " + (r.result ? render_check_headline(*r.result) : dn(r.error));
      }
    if (h.empty() && !c.ranks.empty() && c.ranks.front().result)
      h = "every rank within its thresholds; " + rank_label(c.ranks.front()) + ": " + render_check_headline(*c.ranks.front().result);
    j["headline"] = h;
  }
  auto ranks_of = [&](const std::vector<size_t>& idx) {
    ordered_json a = ordered_json::array();
    for (size_t i : idx) a.push_back(c.ranks[i].rank >= 0 ? ordered_json(c.ranks[i].rank) : ordered_json(nullptr));
    return a;
  };
  j["failing_ranks"] = ranks_of(c.failing);
  j["unchecked_ranks"] = ranks_of(c.unchecked);
  j["warning_ranks"] = ranks_of(c.warning);
  ordered_json rows = ordered_json::array();
  for (const RankCheck& r : c.ranks) {
    ordered_json x;
    x["rank"] = r.rank >= 0 ? ordered_json(r.rank) : ordered_json(nullptr);
    x["name"] = r.name;
    x["baseline_name"] = r.baseline_name.empty() ? ordered_json(nullptr) : ordered_json(r.baseline_name);
    x["status"] = r.result ? status_name(r.result->status) : "fail";
    x["error"] = r.error.empty() ? ordered_json(nullptr) : ordered_json(r.error);
    x["input_error"] = r.input_error;
    x["check"] = r.result ? ordered_json::parse(render_check_json(*r.result)) : ordered_json(nullptr);
    rows.push_back(std::move(x));
  }
  j["ranks"] = std::move(rows);
  return j.dump(2) + "\n";
}

std::string render_ranks_check_junit(const RanksCheck& c) {
  size_t tests = 0, failures = 0;
  for (const RankCheck& r : c.ranks) {
    if (!r.result) {
      ++tests, ++failures;
      continue;
    }
    tests += r.result->items.size();
    failures += r.result->count(CheckStatus::Fail);
  }
  const std::string n = std::to_string(tests), f = std::to_string(failures);
  std::string o = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  o += "<testsuites name=\"snapdiff check\" tests=\"" + n + "\" failures=\"" + f + "\" errors=\"0\" skipped=\"0\" time=\"0\">\n";
  // One testsuite per rank, one testcase per rank and threshold.
  for (const RankCheck& r : c.ranks) {
    const std::string rn = rank_label(r);
    const size_t rt = r.result ? r.result->items.size() : 1;
    const size_t rf = r.result ? r.result->count(CheckStatus::Fail) : 1;
    o += "  <testsuite name=\"" + xml_escape("snapdiff check: " + rn + ": " + dn(r.name)) + "\" tests=\"" +
         std::to_string(rt) + "\" failures=\"" + std::to_string(rf) + "\" errors=\"0\" skipped=\"0\" time=\"0\">\n";
    if (!r.result) {
      o += "    <testcase classname=\"snapdiff.check\" name=\"" + xml_escape(rn + ": read") + "\" time=\"0\">\n";
      o += "      <failure type=\"" + std::string(r.input_error ? "input" : "baseline") + "\" message=\"" +
           xml_escape(dn(r.error)) + "\"/>\n    </testcase>\n  </testsuite>\n";
      continue;
    }
    for (const CheckItem& it : r.result->items) junit_testcase(o, rn + ": " + dn(it.name), it, *r.result);
    o += "  </testsuite>\n";
  }
  o += "</testsuites>\n";
  return o;
}

std::string render_ranks_check_github(const RanksCheck& c) {
  std::string o;
  for (const RankCheck& r : c.ranks) {
    if (!r.result) {
      o += "::error title=" + detail::github_property("snapdiff check " + rank_label(r)) +
           "::" + detail::github_message(r.error) + "\n";
      continue;
    }
    for (const CheckItem& it : r.result->items) {
      if (it.status == CheckStatus::Pass) continue;
      o += it.status == CheckStatus::Fail ? "::error" : "::warning";
      o += " title=" + detail::github_property("snapdiff check " + rank_label(r) + " " + it.name) +
           "::" + detail::github_message(r.name + ": " + describe(it, *r.result)) + "\n";
    }
  }
  return o;
}

std::string render_ranks_check_github_benchmark(const RanksCheck& c, const std::string& name) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const RankCheck& r : c.ranks)
    if (r.result) benchmark_entries(*r.result, name + " " + rank_label(r), out);
  return detail::json_safe(out.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace)) + "\n";
}

}  // namespace snapdiff
