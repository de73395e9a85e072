// snapdiff/analysis/catalogue.hpp — every finding and warning code, once, with its
// severity and a one-line description (analysis layer).
//
// The analysis emits a code and its numbers (snapdiff/view/report.hpp:
// Finding, Warning); the report layer writes the words (finding_text(),
// warning_text()). schemas/report.schema.json, schemas/diff.schema.json and
// docs/cli.md list the codes; a test checks they agree with this table.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "snapdiff/view/basics.hpp"  // Code

namespace snapdiff {

enum class Severity : uint8_t { Info, Warning, Error };
const char* severity_name(Severity s);

enum class CodeKind : uint8_t { ReportFinding, DiffFinding, Warning };

struct CatalogueEntry {
  Code code;
  std::string_view name;  // as JSON writes it ("kind" of a finding, "code" of a warning)
  CodeKind kind;
  Severity severity;
  std::string_view description;
};

// Every code, in the order of the enum.
const std::vector<CatalogueEntry>& catalogue();
const CatalogueEntry& catalogue_entry(Code c);
inline std::string_view code_name(Code c) { return catalogue_entry(c).name; }
// The inverse of code_name(); false for a name the catalogue does not hold.
bool code_from_name(std::string_view name, Code* out);

}  // namespace snapdiff
