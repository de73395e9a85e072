// The facts of findings and warnings as JSON ("facts" in schemas/report.schema.json):
// what finding_text() and warning_text() say their words from, so that a
// report read back (report_read.cpp) says them again.
#include "report/facts_json.hpp"

namespace snapdiff::detail {

namespace {

using J = nlohmann::ordered_json;

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

J peak_facts(const PeakFacts& x) {
  J parts = J::array();
  for (const PeakFacts::Part& p : x.parts) {
    parts.push_back({{"category", p.category}, {"bytes", p.bytes}, {"kept_from_iteration", p.kept_from_iteration}});
    if (!p.kernel.empty()) parts.back()["kernel"] = p.kernel, parts.back()["kernel_bytes"] = p.kernel_bytes;
  }
  return {{"peak_bytes", x.peak}, {"phase", phase_name(x.phase)}, {"iteration", x.iteration},
          {"truncated", x.truncated}, {"parts", std::move(parts)}};
}

J step_facts(const OptimizerStepFacts& x) {
  return {{"iteration", x.iteration},          {"rise_bytes", x.rise},         {"new_state_bytes", x.new_state},
          {"similar_steps", x.similar},        {"steps", x.steps},             {"temporaries_bytes", x.temporaries},
          {"gradients_bytes", x.gradients},    {"site", x.site},               {"site_callee", x.site_callee}};
}

J unknown_facts(const UnknownFacts& x) {
  J j = {{"unknown_bytes", x.unknown},
         {"before_profiler_bytes", x.before_profiler},
         {"timeline_placed_bytes", x.timeline_placed}};
  if (!x.kernel.empty()) j["kernel"] = x.kernel, j["kernel_bytes"] = x.kernel_bytes;
  return j;
}

J growth_facts(const GrowthFacts& x) {
  J sites = J::array();
  for (const GrowthFacts::Site& s : x.sites)
    sites.push_back({{"site", s.site},
                     {"model_frame", s.model_frame},
                     {"phase", phase_name(s.phase)},
                     {"bytes_per_iteration", s.bytes_per_iteration},
                     {"count_per_iteration", s.count_per_iteration},
                     {"iterations", s.iterations}});
  return {{"measured", x.measured},
          {"per_iteration_bytes", x.per_iteration},
          {"first_iteration", x.first_iteration},
          {"last_iteration", x.last_iteration},
          {"judged_first", x.judged_first},
          {"judged_last", x.judged_last},
          {"unjudged", x.unjudged},
          {"sites", std::move(sites)},
          {"more_sites", x.more_sites},
          {"retained_per_iteration_bytes", x.retained_per_iteration},
          {"leaked_at_peak_bytes", x.leaked_at_peak}};
}

J diff_peak_facts(const DiffPeakFacts& x) {
  return {{"a_bytes", x.a},
          {"b_bytes", x.b},
          {"a_iteration", x.a_iteration},
          {"b_iteration", x.b_iteration},
          {"a_phase", phase_name(x.a_phase)},
          {"b_phase", phase_name(x.b_phase)}};
}

J groups_json(const std::vector<DiffCategoryFacts::Group>& gs) {
  J a = J::array();
  for (const DiffCategoryFacts::Group& g : gs)
    a.push_back({{"name", g.name}, {"delta_bytes", g.delta}, {"sites", g.sites}, {"all_new", g.all_new},
                 {"all_gone", g.all_gone}});
  return a;
}

J diff_category_facts(const DiffCategoryFacts& x) {
  return {{"category", x.category},       {"a_bytes", x.a},
          {"b_bytes", x.b},               {"parameters", x.parameters},
          {"parameter_ratio", x.parameter_ratio}, {"a_tensors", x.a_tensors},
          {"b_tensors", x.b_tensors},     {"mostly", groups_json(x.mostly)},
          {"offset", groups_json(x.offset)}, {"has_top_site", x.has_top_site},
          {"top_delta_bytes", x.top_delta}, {"top_site", x.top_site},
          {"top_new", x.top_new},         {"top_gone", x.top_gone},
          {"gradients_kept", x.gradients_kept}};
}

J diff_step_facts(const DiffStepFacts& x) {
  return {{"a_temporaries_bytes", x.a_temporaries},
          {"b_temporaries_bytes", x.b_temporaries},
          {"a_gradients_bytes", x.a_gradients},
          {"b_gradients_bytes", x.b_gradients}};
}

J diff_reserved_facts(const DiffReservedFacts& x) {
  return {{"a_reserved_bytes", x.a_reserved},     {"b_reserved_bytes", x.b_reserved},
          {"a_allocated_bytes", x.a_allocated},   {"b_allocated_bytes", x.b_allocated},
          {"a_free_cached_bytes", x.a_free_cached}, {"b_free_cached_bytes", x.b_free_cached},
          {"a_largest_free_block_bytes", x.a_largest_free}, {"b_largest_free_block_bytes", x.b_largest_free}};
}

}  // namespace

J counters_json(const Counters& c) {
  J j;
  j["requested_bytes"] = c.requested;
  j["allocated_bytes"] = c.allocated;
  j["reserved_bytes"] = c.reserved;
  j["active_bytes"] = c.active;
  return j;
}

J truncation_evidence_json(const TruncationEvidence& e) {
  J j;
  j["entries"] = e.entries;
  j["max_entries"] = e.max_entries >= 0 ? J(e.max_entries) : J(nullptr);
  j["entries_round"] = e.entries_round;
  j["head_orphan_free"] = e.head_orphan_free;
  j["framed_early_blocks"] = e.framed_early_blocks;
  j["dropped_mid_history"] = e.dropped_mid_history;
  return j;
}

J frame_json(const FrameRef& f, bool label) {
  J j;
  j["name"] = f.name;
  j["file"] = f.file;
  j["line"] = f.line >= 0 ? J(f.line) : J(nullptr);
  if (label) j["label"] = f.label;
  return j;
}

void site_path_json(J& j, const SiteFrames& s) {
  j["path"] = s.path;
  j["callee"] = s.callee.empty() ? J(nullptr) : J(s.callee);
}

J finding_facts_json(const Finding& f) {
  return std::visit(Overloaded{[](const PeakFacts& x) { return peak_facts(x); },
                               [](const OptimizerStepFacts& x) { return step_facts(x); },
                               [](const UnknownFacts& x) { return unknown_facts(x); },
                               [](const GrowthFacts& x) { return growth_facts(x); },
                               [](const DiffPeakFacts& x) { return diff_peak_facts(x); },
                               [](const DiffCategoryFacts& x) { return diff_category_facts(x); },
                               [](const DiffStepFacts& x) { return diff_step_facts(x); },
                               [](const DiffReservedFacts& x) { return diff_reserved_facts(x); }},
                    f.facts);
}

J warning_facts_json(const Warning& w) {
  return std::visit(
      Overloaded{[](const std::monostate&) { return J(nullptr); },
                 [](const ProfilerWindowFacts& x) { return J{{"allocated_before_bytes", x.allocated_before}}; },
                 [](const HistoryTruncatedFacts& x) {
                   return J{{"requested_bytes", x.requested},
                            {"reserved_bytes", x.reserved},
                            {"allocations", x.allocations},
                            {"allocated_estimated", x.allocated_estimated},
                            {"truncation", truncation_name(x.kind)},
                            {"evidence", truncation_evidence_json(x.evidence)}};
                 },
                 [](const EndStateFacts& x) {
                   return J{{"truncated", x.truncated}, {"replay", counters_json(x.replay)}, {"dump", counters_json(x.dump)}};
                 },
                 [](const InconsistentFacts& x) {
                   return J{{"events", x.events}, {"reported_totals", x.reported_totals}, {"first", x.first}};
                 },
                 [](const OomFacts& x) {
                   return J{{"errors", x.errors},
                            {"has_first", x.has_first},
                            {"first_size_bytes", x.first_size},
                            {"first_free_bytes", x.first_free}};
                 },
                 [](const OutsideFacts& x) {
                   return J{{"holder", x.holder},
                            {"pid", x.pid == 0 ? J(nullptr) : J(x.pid)},
                            {"bytes", x.bytes},
                            {"device_peak_bytes", x.device_peak}};
                 }},
      w.facts);
}

}  // namespace snapdiff::detail
