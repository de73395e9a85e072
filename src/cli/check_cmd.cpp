#include "cli/commands.hpp"
#include "snapdiff/error.hpp"

namespace snapdiff::cli {
int cmd_check(const std::vector<std::string>&) { throw UsageError("check: not built yet"); }
}  // namespace snapdiff::cli
