// Renderings of a WhatIfResult: a table in text, JSON ("snapdiff/whatif/1",
// schemas/whatif.schema.json) and Markdown for a pull-request comment.
#include "snapdiff/report/whatif_report.hpp"

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>
#include <numeric>
#include <vector>

#include "report/format.hpp"
#include "snapdiff/report/report.hpp"
#include "util/quote_value.hpp"

namespace snapdiff {

namespace {

std::string dn(std::string_view s) { return detail::display_name(s); }
// A setting as shown: a recorded one may be megabytes (cut, its length said).
std::string conf_label(const std::string& c) { return c.empty() ? "(default)" : capped_value(c); }
std::string pct(int64_t v, int64_t base) { return detail::change_percent(v - base, base, 2, "+0.00%", "n/a"); }

// Scenario indices in the order shown.
std::vector<size_t> order(const WhatIfResult& r, bool ranked) {
  std::vector<size_t> idx(r.scenarios.size());
  std::iota(idx.begin(), idx.end(), 0);
  if (ranked)
    std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
      const WhatIfScenario &x = r.scenarios[a], &y = r.scenarios[b];
      if (bool(x.oom) != bool(y.oom)) return !x.oom;
      return x.reserved < y.reserved;
    });
  return idx;
}

std::string oom_words(const WhatIfScenario& s) {
  if (!s.oom) return "-";
  if (s.oom->event_index < 0) return "before the window (" + human_bytes(int64_t(s.oom->requested_bytes)) + ")";
  return "at event " + detail::with_commas_signed(s.oom->event_index) + " (" + human_bytes(int64_t(s.oom->requested_bytes)) +
         ")";
}

std::string limit_words(const WhatIfResult& r) {
  if (r.memory_limit <= 0) return "none (no out-of-memory predicted)";
  return human_bytes(r.memory_limit) + " (" + detail::with_commas_signed(r.memory_limit) + " B; " + r.limit_source + ")";
}

std::string window_words(const WhatIfResult& r) {
  if (!r.partial) return "";
  return std::string("the history is partial (") + truncation_name(r.truncation) +
         "): the prediction covers the recorded window, the blocks alive at its start requested first";
}

}  // namespace

std::string render_whatif_text(const WhatIfResult& r, const std::string& input, bool ranked, size_t width) {
  std::string o = "snapdiff whatif: " + dn(input) + "  (cuda:" + std::to_string(r.device) + ", " +
                  detail::with_commas_signed(int64_t(r.events)) + " events, " +
                  detail::with_commas_signed(int64_t(r.allocs)) + " allocations)\n";
  o += detail::prose("  recorded   ", "PYTORCH_CUDA_ALLOC_CONF " + dn(conf_label(r.recorded_conf)) + ": allocated peak " +
                                           human_bytes(r.recorded_allocated) + ", reserved peak " +
                                           human_bytes(r.recorded_reserved) + " (PyTorch's counters, replayed exactly)");
  const WhatIfScenario& c = r.calibration;
  o += detail::prose("  the model  ", "under the recorded settings: allocated " + pct(c.allocated, r.recorded_allocated) +
                                           ", reserved " + pct(c.reserved, r.recorded_reserved) +
                                           (c.oom ? ", out of memory " + oom_words(c) : "") +
                                           " against them (its error on this run)");
  o += detail::prose("  limit      ", limit_words(r));
  if (r.partial) o += detail::prose("  window     ", window_words(r));
  o += "\n";
  std::vector<std::array<std::string, 7>> rows;
  rows.push_back({"SETTING", "ALLOCATED", "RESERVED", "VS RECORDED", "SEGMENTS", "CACHED AT PEAK", "OUT OF MEMORY"});
  for (size_t i : order(r, ranked)) {
    const WhatIfScenario& s = r.scenarios[i];
    rows.push_back({dn(conf_label(s.alloc_conf)), human_bytes(s.allocated), human_bytes(s.reserved),
                    s.oom ? "-" : pct(s.reserved, r.recorded_reserved), std::to_string(s.segments),
                    human_bytes(s.cached_at_peak), oom_words(s)});
  }
  std::array<size_t, 7> w{};
  for (const auto& row : rows)
    for (size_t k = 0; k < 7; ++k) w[k] = std::max(w[k], row[k].size());
  // Too wide for the width: each setting on a line of its own, its numbers
  // on the next.
  size_t rest = 2 + 2 + std::min<size_t>(w[6], 24);
  for (size_t k = 1; k < 6; ++k) rest += 2 + w[k];
  const bool own_line = rest + w[0] > width;
  if (own_line) w[0] = 0;
  for (auto& row : rows) {
    if (own_line) {
      o += "  " + row[0] + "\n";
      row[0].clear();
    }
    std::string line = "  " + row[0] + std::string(w[0] - row[0].size(), ' ');
    for (size_t k = 1; k < 6; ++k) line += "  " + std::string(w[k] - row[k].size(), ' ') + row[k];
    line += "  " + row[6];
    o += line + "\n";
  }
  o += "\n";
  o += detail::prose("  ", "RESERVED is the predicted reserved peak; VS RECORDED against the recorded run's; "
                                  "CACHED AT PEAK is reserved minus allocated at the allocated peak. Out of memory: the "
                                  "first request that would fail under the limit.");
  bool any = false;
  for (const WhatIfScenario& s : r.scenarios)
    for (const std::string& n : s.notes) {
      if (!any) o += "\n";
      any = true;
      o += detail::prose("  note: ", dn(conf_label(s.alloc_conf)) + ": " + dn(n));
    }
  if (r.unknown_frees)
    o += detail::prose("  note: ", detail::with_commas_signed(int64_t(r.unknown_frees)) +
                                       " frees of blocks allocated before the window were not modelled");
  return detail::finish_text(o, width);
}

std::string render_whatif_json(const WhatIfResult& r, const std::string& input) {
  using J = nlohmann::ordered_json;
  auto scenario = [&](const WhatIfScenario& s) {
    J j;
    j["alloc_conf"] = s.alloc_conf;
    j["peak"] = {{"requested_bytes", s.requested}, {"allocated_bytes", s.allocated}, {"active_bytes", s.active},
                 {"reserved_bytes", s.reserved}};
    j["reserved_peak_event"] = s.reserved_peak_event;
    j["segments"] = s.segments;
    j["segments_peak"] = s.segments_peak;
    j["cached_at_peak_bytes"] = s.cached_at_peak;
    j["cuda_mallocs"] = s.cuda_mallocs;
    j["cuda_frees"] = s.cuda_frees;
    j["oom"] = s.oom ? J{{"event_index", s.oom->event_index},
                         {"requested_bytes", s.oom->requested_bytes},
                         {"reserved_bytes", s.oom->reserved_bytes}}
                     : J(nullptr);
    j["change_vs_recorded"] = {{"allocated_bytes", s.allocated - r.recorded_allocated},
                               {"reserved_bytes", s.reserved - r.recorded_reserved}};
    j["notes"] = s.notes;
    return j;
  };
  J j;
  j["schema"] = kWhatIfSchema;
  j["input"] = input;
  j["device"] = r.device;
  j["events"] = r.events;
  j["allocations"] = r.allocs;
  j["history"] = {{"partial", r.partial}, {"truncation", truncation_name(r.truncation)}, {"unknown_frees", r.unknown_frees}};
  j["memory_limit"] = {{"bytes", r.memory_limit > 0 ? J(r.memory_limit) : J(nullptr)}, {"source", r.limit_source}};
  j["recorded"] = {{"alloc_conf", r.recorded_conf},
                   {"peak",
                    {{"requested_bytes", r.recorded_requested},
                     {"allocated_bytes", r.recorded_allocated},
                     {"active_bytes", r.recorded_active},
                     {"reserved_bytes", r.recorded_reserved}}},
                   {"oom", r.recorded_oom}};
  j["calibration"] = scenario(r.calibration);
  j["scenarios"] = J::array();
  for (const WhatIfScenario& s : r.scenarios) j["scenarios"].push_back(scenario(s));
  j["ranking"] = J::array();
  for (size_t i : order(r, true)) j["ranking"].push_back(i);
  return detail::json_safe(j.dump(2, ' ', false, J::error_handler_t::replace)) + "\n";
}

std::string render_whatif_markdown(const WhatIfResult& r, const std::string& input, bool ranked) {
  std::string o = "### snapdiff whatif: " + detail::markdown_code(input) + "\n\n";
  o += "Recorded with `PYTORCH_CUDA_ALLOC_CONF` " + detail::markdown_code(conf_label(r.recorded_conf)) +
       ": allocated peak **" + human_bytes(r.recorded_allocated) + "**, reserved peak **" +
       human_bytes(r.recorded_reserved) + "**. The model under the same settings: allocated " +
       pct(r.calibration.allocated, r.recorded_allocated) + ", reserved " + pct(r.calibration.reserved, r.recorded_reserved) +
       ". Memory limit: " + detail::markdown_text(limit_words(r)) + ".";
  if (r.partial) o += " " + detail::markdown_text(window_words(r)) + ".";
  o += "\n\n| setting | allocated peak | reserved peak | vs recorded | segments | out of memory |\n|---|---:|---:|---:|---:|---|\n";
  for (size_t i : order(r, ranked)) {
    const WhatIfScenario& s = r.scenarios[i];
    o += "| " + detail::markdown_code(conf_label(s.alloc_conf)) + " | " + human_bytes(s.allocated) + " | " +
         human_bytes(s.reserved) + " | " + (s.oom ? "-" : pct(s.reserved, r.recorded_reserved)) + " | " +
         std::to_string(s.segments) + " | " + detail::markdown_text(oom_words(s)) + " |\n";
  }
  return o;
}

}  // namespace snapdiff
