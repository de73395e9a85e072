// The machine-readable report (schemas/report.schema.json).
#include <nlohmann/json.hpp>
#include <optional>

#include "report/format.hpp"
#include "report/json_write.hpp"
#include "snapdiff/report/report.hpp"

namespace snapdiff {

std::string render_json(const Report& r) {
  using J = nlohmann::ordered_json;
  J j;
  j["schema"] = "snapdiff/report/1";
  j["tool"] = {{"name", "snapdiff"}, {"version", SNAPDIFF_VERSION}};
  detail::write_fields(j, r);  // the rest by the report's field list (snapdiff/view/fields.hpp)
  // Names are bytes: invalid UTF-8 in one becomes U+FFFD, and the controls
  // JSON lets stand raw are written as \u escapes (docs/reliability.md).
  return detail::json_safe(j.dump(2, ' ', false, J::error_handler_t::replace)) + "\n";
}

}  // namespace snapdiff
