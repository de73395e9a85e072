// Renderings of a Diff: text (bloaty's diff style), JSON
// (schemas/diff.schema.json), Markdown for a pull-request comment.
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "report/diff_parts.hpp"
#include "report/format.hpp"
#include "report/text_util.hpp"
#include "snapdiff/analysis/diff.hpp"
#include "snapdiff/report/diff_report.hpp"
#include "snapdiff/report/report.hpp"

namespace snapdiff {

namespace {

using detail::pad_left;
using detail::pad_right;
using detail::wrap;

using J = nlohmann::ordered_json;

// Names as text (report/format.hpp): escaped for a terminal, or for Markdown.
std::string dn(std::string_view s) { return detail::display_name(s); }
using detail::markdown_code;
using detail::markdown_text;




const DeviceView* top(const Report& r) { return !r.devices.empty() ? &r.devices[r.peak_device] : nullptr; }

std::string pct(int64_t delta, int64_t base) { return detail::change_percent(delta, base, 1, "", "new"); }

std::string marker(const SiteDelta& s) {
  return s.a_count == 0 ? "[NEW] " : s.b_count == 0 ? "[GONE] " : s.moved ? "[MOVED] " : "";
}

// A row's site as words: gradients by their tensors' size; a moved site with
// A's form of it when that reads differently.
std::string site_words(const SiteDelta& s) {
  if (s.tensor_bytes) return "gradients of " + human_bytes(int64_t(s.tensor_bytes)) + " tensors (any stack)";
  if (s.moved && s.a_display != s.display) return s.display + "  (in A: " + s.a_display + ")";
  return s.display;
}

// The allocator settings side by side: every key either run recorded, in
// A's order then B's; `differs` when the values (or presence) differ.
struct SettingRow {
  std::string key, a, b;
  bool differs = false;
};
std::vector<SettingRow> setting_rows(const Diff& d) {
  const auto ra = detail::settings_rows(d.a.allocator_settings), rb = detail::settings_rows(d.b.allocator_settings);
  std::vector<SettingRow> out;
  auto find = [](const std::vector<std::pair<std::string, std::string>>& v, const std::string& k) -> const std::string* {
    for (const auto& kv : v)
      if (kv.first == k) return &kv.second;
    return nullptr;
  };
  for (const auto& kv : ra) {
    const std::string* b = find(rb, kv.first);
    out.push_back({kv.first, kv.second, b ? *b : "-", !b || *b != kv.second});
  }
  for (const auto& kv : rb)
    if (!find(ra, kv.first)) out.push_back({kv.first, "-", kv.second, true});
  return out;
}

std::string status(const SiteDelta& s) { return s.a_count == 0 ? "new" : s.b_count == 0 ? "gone" : "changed"; }

}  // namespace

std::vector<detail::DiffPeakRow> detail::diff_peak_rows(const Diff& d) {
  const DeviceView* da = top(d.a);
  const DeviceView* db = top(d.b);
  if (!da || !db) return {};
  std::vector<DiffPeakRow> rows = {
      {"requested", da->peak_requested.bytes, db->peak_requested.bytes, d.peak_delta[0]},
      {"allocated", da->peak_allocated.bytes, db->peak_allocated.bytes, d.peak_delta[1]},
      {"active", da->peak_active.bytes, db->peak_active.bytes, d.peak_delta[3]},
      {"reserved", da->peak_reserved.bytes, db->peak_reserved.bytes, d.peak_delta[2]}};
  if (da->reported_totals || db->reported_totals) rows.erase(rows.begin() + 2);
  return rows;
}

std::string detail::diff_findings_text(const Diff& d) {
  std::ostringstream o;
  o << "FINDINGS\n";
  if (d.findings.empty()) o << "  none: no difference reaches 1% of the peak\n";
  for (const Finding& f : d.findings) o << wrap("  * ", dn(finding_text(f)));
  return o.str();
}

std::string detail::diff_categories_text(const Diff& d, size_t max_rows) {
  std::ostringstream o;
  o << "CATEGORIES AT EACH PEAK          A            B        DELTA\n";
  int64_t ta = 0, tb = 0;
  size_t rows = 0;
  for (const CategoryDelta& c : d.categories) {
    ta += c.a;
    tb += c.b;
    if (c.a == 0 && c.b == 0) continue;
    if (max_rows && (rows >= max_rows || c.delta() == 0)) continue;
    ++rows;
    o << "  " << pad_right(dn(c.name), 22) << pad_left(human_bytes(c.a), 12) << " " << pad_left(human_bytes(c.b), 12) << " "
      << pad_left(human_delta(c.delta()), 12) << "\n";
  }
  o << "  " << pad_right("TOTAL", 22) << pad_left(human_bytes(ta), 12) << " " << pad_left(human_bytes(tb), 12) << " "
    << pad_left(human_delta(tb - ta), 12) << "\n";
  return o.str();
}

std::string detail::diff_sites_text(const Diff& d, size_t max_rows) {
  std::ostringstream o;
  o << "SITES AT EACH PEAK\n"
    << wrap("  ", "(by |delta|, matched by function, file and line; [MOVED]: by function and file)");
  // The category column as wide as its longest name (at most 19).
  size_t cw = 8;
  for (size_t i = 0; i < d.sites.size() && (!max_rows || i < max_rows); ++i)
    cw = std::max(cw, std::min<size_t>(19, detail::display_columns(dn(d.sites[i].category))));
  o << "         DELTA            A            B  " << pad_right("CATEGORY", cw) << "  SITE\n";
  SiteDelta rest = d.other_sites;
  for (size_t i = 0; i < d.sites.size(); ++i) {
    const SiteDelta& s = d.sites[i];
    if (max_rows && i >= max_rows) {
      rest.a += s.a;
      rest.b += s.b;
      continue;
    }
    o << "  " << pad_left(human_delta(s.delta()), 12) << " " << pad_left(human_bytes(s.a), 12) << " "
      << pad_left(human_bytes(s.b), 12) << "  " << pad_right(dn(s.category), cw) << "  " << marker(s) << dn(site_words(s))
      << "\n";
  }
  if (rest.a || rest.b)
    o << "  " << pad_left(human_delta(rest.delta()), 12) << " " << pad_left(human_bytes(rest.a), 12) << " "
      << pad_left(human_bytes(rest.b), 12) << "  " << pad_right("", cw) << "  [other sites]\n";
  return o.str();
}

std::string render_diff_text(const Diff& d, size_t width) {
  std::ostringstream o;
  const DeviceView* da = top(d.a);
  const DeviceView* db = top(d.b);
  o << "snapdiff diff\n  A: " << dn(d.a_name) << "\n  B: " << dn(d.b_name) << "\n";
  if (!da || !db) {
    o << "\n(one of the inputs has no device data)\n";
    return detail::finish_text(o.str(), width);
  }
  o << "\nPEAK                      A            B        DELTA\n";
  for (const detail::DiffPeakRow& p : detail::diff_peak_rows(d))
    o << "  " << pad_right(p.name, 9) << "  " << pad_left(human_bytes(p.a), 12) << " " << pad_left(human_bytes(p.b), 12)
      << " " << pad_left(human_delta(p.delta), 12) << "  " << pct(p.delta, p.a) << "\n";
  o << "  the peak   iteration " << da->peak_iteration << ", " << phase_name(da->peak_phase) << "  |  iteration "
    << db->peak_iteration << ", " << phase_name(db->peak_phase) << "\n";

  o << "\nALLOCATOR SETTINGS\n";
  {
    const auto rows = setting_rows(d);
    if (rows.empty()) {
      o << "  A: " << detail::settings_text(d.a.allocator_settings) << "  |  B: " << detail::settings_text(d.b.allocator_settings) << "\n";
    } else {
      o << "  " << pad_right("SETTING", 34) << "  " << pad_right("A", 24) << "  B\n";
      for (const SettingRow& s : rows)
        o << "  " << pad_right(dn(s.key), 34) << "  " << pad_right(dn(s.a), 24) << "  " << dn(s.b)
          << (s.differs ? "   <- differs" : "") << "\n";
    }
  }

  o << "\n" << detail::diff_findings_text(d);
  o << "\n" << detail::diff_categories_text(d, 0);

  o << "\nPHASES (requested bytes at each phase's peak)\n";
  o << "  ITER  PHASE                  A            B        DELTA   OPTIMIZER TEMPS A->B\n";
  for (const PhaseDelta& p : d.phases) {
    o << "  " << pad_left(std::to_string(p.iteration), 4) << "  " << pad_right(phase_name(p.phase), 10)
      << pad_left(p.in_a ? human_bytes(p.a_peak) : "-", 12) << " " << pad_left(p.in_b ? human_bytes(p.b_peak) : "-", 12)
      << " " << pad_left(p.in_a && p.in_b ? human_delta(p.b_peak - p.a_peak) : "", 12);
    if (p.phase == Phase::Optimizer) o << "   " << human_bytes(p.a_opt_temp) << " -> " << human_bytes(p.b_opt_temp);
    o << "\n";
  }

  o << "\n" << detail::diff_sites_text(d, 0);
  return detail::finish_text(o.str(), width);
}

J detail::diff_json(const Diff& d) {
  J j;
  j["schema"] = "snapdiff/diff/1";
  j["a"] = J::parse(render_json(d.a));
  j["b"] = J::parse(render_json(d.b));
  J delta;
  delta["peak"] = {{"requested_bytes", d.peak_delta[0]},
                   {"allocated_bytes", d.peak_delta[1]},
                   {"reserved_bytes", d.peak_delta[2]},
                   {"active_bytes", d.peak_delta[3]}};
  J cats = J::object();
  for (const CategoryDelta& c : d.categories) cats[c.name] = c.delta();
  delta["categories"] = cats;
  j["delta"] = delta;
  j["categories"] = J::array();
  for (const CategoryDelta& c : d.categories)
    j["categories"].push_back({{"category", c.name}, {"a_bytes", c.a}, {"b_bytes", c.b}, {"delta_bytes", c.delta()}});
  j["phases"] = J::array();
  for (const PhaseDelta& p : d.phases)
    j["phases"].push_back({{"iteration", p.iteration},
                           {"phase", phase_name(p.phase)},
                           {"occurrence", p.occurrence},
                           {"a_peak_requested_bytes", p.in_a ? J(p.a_peak) : J(nullptr)},
                           {"b_peak_requested_bytes", p.in_b ? J(p.b_peak) : J(nullptr)},
                           {"a_start_requested_bytes", p.in_a ? J(p.a_start) : J(nullptr)},
                           {"b_start_requested_bytes", p.in_b ? J(p.b_start) : J(nullptr)},
                           {"a_optimizer_temporary_bytes", p.a_opt_temp},
                           {"b_optimizer_temporary_bytes", p.b_opt_temp}});
  j["sites"] = J::array();
  for (const SiteDelta& s : d.sites)
    j["sites"].push_back({{"site", s.tensor_bytes ? site_words(s) : s.display},
                          {"matched_by", s.moved ? "function_and_file" : s.tensor_bytes ? "tensor_size" : "line"},
                          {"a_site", s.moved ? J(s.a_display) : J(nullptr)},
                          {"key", s.key},
                          {"category", s.category},
                          {"a_bytes", s.a},
                          {"b_bytes", s.b},
                          {"delta_bytes", s.delta()},
                          {"a_count", s.a_count},
                          {"b_count", s.b_count},
                          {"status", status(s)}});
  j["allocator_settings"] = J::array();
  for (const SettingRow& s : setting_rows(d))
    j["allocator_settings"].push_back({{"setting", s.key}, {"a", s.a}, {"b", s.b}, {"differs", s.differs}});
  j["other_sites"] = {{"a_bytes", d.other_sites.a}, {"b_bytes", d.other_sites.b}, {"delta_bytes", d.other_sites.delta()}};
  j["findings"] = J::array();
  for (const Finding& f : d.findings) j["findings"].push_back({{"kind", std::string(code_name(f.code))}, {"message", finding_text(f)}, {"bytes", f.bytes}});
  return j;
}

std::string render_diff_json(const Diff& d) {
  const J j = detail::diff_json(d);
  // Invalid UTF-8 in a name becomes U+FFFD (docs/reliability.md).
  return detail::json_safe(j.dump(2, ' ', false, J::error_handler_t::replace)) + "\n";
}

std::string render_diff_markdown(const Diff& d) {
  std::ostringstream o;
  const DeviceView* da = top(d.a);
  const DeviceView* db = top(d.b);
  o << "### snapdiff: " << markdown_code(d.a_name) << " → " << markdown_code(d.b_name) << "\n\n";
  if (!da || !db) return detail::terminal_safe(o.str() + "One of the inputs has no device data.\n");
  o << "| peak | A | B | Δ | % |\n|---|---:|---:|---:|---:|\n";
  for (const detail::DiffPeakRow& p : detail::diff_peak_rows(d))
    o << "| " << p.name << " | " << human_bytes(p.a) << " | " << human_bytes(p.b) << " | " << human_delta(p.delta)
      << " | " << pct(p.delta, p.a) << " |\n";
  o << "\n";
  if (d.findings.empty()) o << "No difference reaches 1% of the peak.\n";
  {
    const auto rows = setting_rows(d);
    bool any = false;
    for (const SettingRow& s : rows) any |= s.differs;
    if (any) {
      o << "\nAllocator settings that differ:\n\n| setting | A | B |\n|---|---|---|\n";
      for (const SettingRow& s : rows)
        if (s.differs) o << "| " << markdown_code(s.key) << " | " << markdown_code(s.a) << " | " << markdown_code(s.b) << " |\n";
    }
  }
  for (const Finding& f : d.findings) o << "- " << markdown_text(finding_text(f)) << "\n";
  o << "\n<details><summary>Categories at each peak</summary>\n\n| category | A | B | Δ |\n|---|---:|---:|---:|\n";
  for (const CategoryDelta& c : d.categories)
    if (c.a || c.b) o << "| " << markdown_text(c.name) << " | " << human_bytes(c.a) << " | " << human_bytes(c.b) << " | " << human_delta(c.delta()) << " |\n";
  o << "\n</details>\n\n<details><summary>Phases</summary>\n\n| iteration | phase | A | B | Δ |\n|---:|---|---:|---:|---:|\n";
  for (const PhaseDelta& p : d.phases)
    o << "| " << p.iteration << " | " << phase_name(p.phase) << " | " << (p.in_a ? human_bytes(p.a_peak) : "–") << " | "
      << (p.in_b ? human_bytes(p.b_peak) : "–") << " | " << (p.in_a && p.in_b ? human_delta(p.b_peak - p.a_peak) : "") << " |\n";
  o << "\n</details>\n\n<details><summary>Sites</summary>\n\n| Δ | A | B | category | site |\n|---:|---:|---:|---|---|\n";
  for (const SiteDelta& s : d.sites)
    o << "| " << human_delta(s.delta()) << " | " << human_bytes(s.a) << " | " << human_bytes(s.b) << " | "
      << markdown_text(s.category) << " | " << marker(s) << markdown_code(site_words(s)) << " |\n";
  o << "\n</details>\n";
  return detail::terminal_safe(o.str());
}

}  // namespace snapdiff
