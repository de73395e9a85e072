// The facts of findings and warnings as JSON ("facts" in schemas/report.schema.json):
// what finding_text() and warning_text() say their words from, so that a
// report read back (report_read.cpp) says them again.
#include "report/facts_json.hpp"

#include "report/json_write.hpp"

namespace snapdiff::detail {

using J = nlohmann::ordered_json;

namespace {

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

}  // namespace

J counters_json(const Counters& c) { return to_json(c); }

J truncation_evidence_json(const TruncationEvidence& e) { return to_json(e); }

J frame_json(const FrameRef& f, bool label) {
  J j;
  JsonWriter w(j);
  w.labels = label;
  return w.value(f);
}

void site_path_json(J& j, const SiteFrames& s) {
  JsonWriter w(j);
  site_path_fields(w, s);
}

J finding_facts_json(const Finding& f) {
  return std::visit([](const auto& x) { return to_json(x); }, f.facts);
}

J warning_facts_json(const Warning& w) {
  return std::visit(Overloaded{[](const std::monostate&) { return J(nullptr); }, [](const auto& x) { return to_json(x); }},
                    w.facts);
}

}  // namespace snapdiff::detail
