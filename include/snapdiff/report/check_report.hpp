// snapdiff/report/check_report.hpp — the renderers of `snapdiff check`'s verdict
// (report layer; the verdict itself: snapdiff/analysis/check.hpp).
#pragma once

#include <string>

#include "snapdiff/analysis/check.hpp"

namespace snapdiff {

constexpr const char* kCheckSchema = "snapdiff/check/1";
std::string render_check_text(const CheckResult& r);
std::string render_check_json(const CheckResult& r);
std::string render_check_junit(const CheckResult& r);
// GitHub Actions workflow commands: one ::error:: / ::warning:: line per
// failed / warned threshold.
std::string render_check_github(const CheckResult& r);
std::string xml_escape(const std::string& s);

}  // namespace snapdiff
