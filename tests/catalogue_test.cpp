// The finding and warning catalogue against the places that list its codes:
// the JSON schemas and docs/cli.md must not drift from the code.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "snapdiff/analysis/catalogue.hpp"
#include "snapdiff/analysis/analysis.hpp"
#include "snapdiff/report/report.hpp"
#include "test_util.hpp"

using namespace snapdiff;

namespace {

std::set<std::string> names_of(CodeKind kind) {
  std::set<std::string> out;
  for (const CatalogueEntry& e : catalogue())
    if (e.kind == kind) out.insert(std::string(e.name));
  return out;
}

std::set<std::string> enum_at(const nlohmann::json& schema, const nlohmann::json::json_pointer& p) {
  std::set<std::string> out;
  for (const auto& v : schema.at(p)) out.insert(v.get<std::string>());
  return out;
}

nlohmann::json schema(const std::string& name) {
  return nlohmann::json::parse(test::read_file(test::required(std::string(SNAPDIFF_SOURCE_DIR) + "/schemas/" + name)));
}

}  // namespace

TEST_CASE("catalogue: one entry per code, in the enum's order, each described", "[report][catalogue]") {
  const auto& c = catalogue();
  REQUIRE(c.size() == size_t(Code::OutsideAllocator) + 1);
  std::set<std::pair<int, std::string>> seen;
  for (size_t i = 0; i < c.size(); ++i) {
    INFO(c[i].name);
    CHECK(size_t(c[i].code) == i);
    CHECK(!c[i].description.empty());
    CHECK(seen.insert({int(c[i].kind), std::string(c[i].name)}).second);  // unique within its kind
  }
}

TEST_CASE("catalogue: the schemas list exactly its codes", "[report][catalogue]") {
  const auto report = schema("report.schema.json");
  CHECK(enum_at(report, "/properties/warnings/items/properties/code/enum"_json_pointer) == names_of(CodeKind::Warning));
  CHECK(enum_at(report, "/$defs/device/properties/findings/items/properties/kind/enum"_json_pointer) ==
        names_of(CodeKind::ReportFinding));
  const auto diff = schema("diff.schema.json");
  CHECK(enum_at(diff, "/properties/findings/items/properties/kind/enum"_json_pointer) ==
        names_of(CodeKind::DiffFinding));
}

TEST_CASE("catalogue: docs/cli.md has its table, row for row", "[report][catalogue]") {
  const std::string doc = test::read_file(test::required(std::string(SNAPDIFF_SOURCE_DIR) + "/docs/cli.md"));
  for (const CatalogueEntry& e : catalogue()) {
    const char* where = e.kind == CodeKind::ReportFinding ? "report finding"
                        : e.kind == CodeKind::DiffFinding ? "diff finding"
                                                          : "warning";
    const std::string row = "| `" + std::string(e.name) + "` | " + where + " | " + severity_name(e.severity) + " | " +
                            std::string(e.description) + " |";
    INFO(row);
    CHECK(doc.find(row) != std::string::npos);
  }
}

TEST_CASE("catalogue: every warning has words and names its device", "[report][catalogue]") {
  for (const CatalogueEntry& e : catalogue()) {
    if (e.kind != CodeKind::Warning) continue;
    Warning w;
    w.code = e.code;
    w.device = 3;
    switch (e.code) {
      case Code::ProfilerWindow: w.facts = ProfilerWindowFacts{1 << 20}; break;
      case Code::HistoryTruncated: w.facts = HistoryTruncatedFacts{1 << 20, 2 << 20, 7, true, Truncation::Wrapped, {}}; break;
      case Code::EndStateMismatch: w.facts = EndStateFacts{}; break;
      case Code::ReplayInconsistent: w.facts = InconsistentFacts{2, false, "x"}; break;
      case Code::Oom: w.facts = OomFacts{1, true, 1 << 20, 0}; break;
      case Code::OutsideAllocator: w.facts = OutsideFacts{"NCCL", 0, 1 << 30, int64_t(12) << 30}; break;
      default: break;
    }
    const std::string text = warning_text(w);
    INFO(text);
    CHECK(text.rfind("device 3: ", 0) == 0);
    CHECK(text.size() > std::string("device 3: ").size() + 10);
  }
}
