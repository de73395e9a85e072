// snapdiff/input/budget_io.hpp — budget files (schemas/budget.schema.json), the
// committed baseline of `snapdiff check --budget`: reading and writing them.
// The Budget itself is in snapdiff/model/budget.hpp; what it means for a
// run, in snapdiff/analysis/check.hpp.
#pragma once

#include <string>

#include "snapdiff/model/budget.hpp"

namespace snapdiff {

// Written: version 2 (phase peaks and category maxima). Read: 2, and 1 (the
// files written before; they have neither).
constexpr const char* kBudgetSchema = "snapdiff/budget/2";
constexpr const char* kBudgetSchemaV1 = "snapdiff/budget/1";
// Throws InputError (file set, JSON path such as "$.tolerance.max_increase").
Budget read_budget_file(const std::string& path);
Budget parse_budget(const std::string& json_text, const std::string& name);
// The file's text (JSON, ending in a newline).
std::string write_budget_json(const Budget& b);

}  // namespace snapdiff
