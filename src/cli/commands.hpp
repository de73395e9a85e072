// Internal: the CLI's subcommands, one file each; main.cpp dispatches.
#pragma once

#include <boost/program_options/options_description.hpp>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace snapdiff::cli {

// Exit codes (docs/cli.md "Exit codes"). An output that cannot be written
// (OutputError) shares the usage error's code: the caller named a place
// that cannot be written. Graphviz failures (RenderError) have their own.
constexpr int kExitOk = 0, kExitCheckFailed = 1, kExitUsage = 2, kExitInput = 3, kExitInternal = 4, kExitRender = 5;
constexpr int kExitOutput = kExitUsage;
// -n/--top of report and diff: at most this many sites (more than any
// snapshot holds; -1 or 2^64 are usage errors, not "all").
constexpr uint64_t kMaxTopSites = 10000000;

// `snapdiff report FILE` / `snapdiff FILE` (src/cli/report_cmd.cpp).
int cmd_report(const std::vector<std::string>& args);
// The options report takes (its --help; main() reads which take a value).
boost::program_options::options_description report_options();

// `snapdiff check ...` (src/cli/check_cmd.cpp). Returns the exit code;
// throws snapdiff::InputError / UsageError like the other commands.
int cmd_check(const std::vector<std::string>& args);
// `snapdiff diff A B` / `snapdiff A B` (src/cli/diff_cmd.cpp).
int cmd_diff(const std::vector<std::string>& args);
// The options diff takes.
boost::program_options::options_description diff_options();
// `snapdiff ranks SUMMARY...`: the reduce step (src/cli/ranks_cmd.cpp).
int cmd_ranks(const std::vector<std::string>& args);
// `snapdiff convert IN -o OUT` (src/cli/convert_cmd.cpp).
int cmd_convert(const std::vector<std::string>& args);
// `snapdiff chart FILE [B] --kind KIND -o OUT` (src/cli/chart_cmd.cpp).
int cmd_chart(const std::vector<std::string>& args);
// `snapdiff view FILE [B]` (src/cli/view_cmd.cpp): `dispatch` runs the
// report or diff it writes (main.cpp's choice between them).
int cmd_view(const std::vector<std::string>& args, const std::function<int(const std::vector<std::string>&)>& dispatch);
// `snapdiff whatif RUN --alloc-conf CONF ...` (src/cli/whatif_cmd.cpp).
int cmd_whatif(const std::vector<std::string>& args);

}  // namespace snapdiff::cli
