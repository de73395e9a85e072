#include "cli/commands.hpp"
#include "snapdiff/error.hpp"

namespace snapdiff::cli {
int cmd_diff(const std::vector<std::string>&) { throw UsageError("diff: not built yet"); }
}  // namespace snapdiff::cli
