// snapdiff — the command-line front end. Dispatches to the subcommands (one
// file each, src/cli/*_cmd.cpp) and maps errors to exit codes
// (src/cli/commands.hpp, docs/cli.md "Exit codes").
#include <boost/program_options.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "cli/cli_util.hpp"
#include "cli/commands.hpp"
#include "snapdiff/error.hpp"
#include "util/input_files.hpp"

namespace po = boost::program_options;
using namespace snapdiff;
using namespace snapdiff::cli;

namespace {

const char* kTopHelp =
    "snapdiff " SNAPDIFF_VERSION " - offline analyzer for PyTorch GPU memory snapshots\n"
    "\n"
    "Usage:\n"
    "  snapdiff FILE                      same as `snapdiff report FILE`\n"
    "  snapdiff report FILE [options]     peak memory, what every byte at the peak is, phases,\n"
    "                                     fragmentation (--format html: one page with the charts;\n"
    "                                     --format markdown: for a pull-request comment)\n"
    "  snapdiff A B                       same as `snapdiff diff A B`\n"
    "  snapdiff view FILE [B]             the HTML explorer of a report (or of a diff), written\n"
    "                                     to a temporary folder, opened with $BROWSER if set\n"
    "  snapdiff diff A B [options]        why B peaks where it does compared with A\n"
    "  snapdiff DIR                       many ranks: a folder of per-rank snapshots (also\n"
    "                                     several files or a pattern): a row per rank, the\n"
    "                                     imbalance, the worst rank against the median one\n"
    "                                     (files with no rank id that are not one job's:\n"
    "                                     a table of separate runs)\n"
    "  snapdiff DIR_A DIR_B               rank r of A against rank r of B\n"
    "  snapdiff ranks SUMMARY...          the same report from each rank's\n"
    "                                     `report --format json` (the reduce step)\n"
    "  snapdiff check [BASELINE] CANDIDATE [thresholds]\n"
    "                                     CI gate on peak memory (exit 1 when a threshold fails)\n"
    "  snapdiff whatif RUN --alloc-conf CONF | --sweep\n"
    "                                     the run's peaks and OOMs predicted under other\n"
    "                                     PYTORCH_CUDA_ALLOC_CONF settings\n"
    "  snapdiff convert IN -o OUT         write any input as OUT.snap, OUT.pickle (the pickle\n"
    "                                     PyTorch's _dump_snapshot writes) or OUT.pickle.gz\n"
    "  snapdiff chart FILE [B] --kind flame|lifetime|timeline -o OUT.svg|.png|.pdf|.dot\n"
    "                                     pictures drawn with Graphviz (two runs: what changed)\n"
    "  snapdiff COMMAND --help            options of a command\n"
    "  snapdiff --version\n"
    "\n"
    "Inputs: torch.cuda.memory._dump_snapshot pickles (protocols 0-5, also the C++\n"
    "_memory_snapshot_pickled output and legacy segment lists), .snap files, and\n"
    "torch.profiler Chrome traces (export_chrome_trace with profile_memory=True);\n"
    "any may be gzip-compressed. Formats are detected from the bytes, not the name.\n"
    "\n"
    "Exit codes:\n"
    "  0  success\n"
    "  1  `snapdiff check`: a threshold failed\n"
    "  2  usage error (bad option or argument), or an output cannot be written: a file\n"
    "     (nothing is left behind: the file is as it was) or standard output\n"
    "     (a closed pipe ends snapdiff quietly by SIGPIPE, status 141 in a shell)\n"
    "  3  input error: unreadable, truncated, corrupt, hostile or not a snapshot;\n"
    "     one line on stderr: snapdiff: error: FILE: offset N: what is wrong\n"
    "  4  internal error (a bug in snapdiff; please report it)\n"
    "  5  Graphviz could not draw a chart (chart, or an HTML report's charts)\n";

// How many inputs `snapdiff ARGS...` names: its arguments parsed as report
// and diff parse them (their option tables: which options take a value,
// --opt=VALUE, -fVALUE, abbreviations), other options ignored. A command
// line that does not parse counts as a report, whose parse then says why.
size_t guess_inputs(const std::vector<std::string>& args) {
  po::options_description all;
  all.add(report_options());
  const po::options_description diff = diff_options();
  for (const auto& o : diff.options())
    if (!all.find_nothrow(o->long_name(), false)) all.add(o);
  all.add_options()("input", po::value<std::vector<std::string>>());
  po::positional_options_description pos;
  pos.add("input", -1);
  try {
    const po::parsed_options parsed = po::command_line_parser(args).options(all).positional(pos).allow_unregistered().run();
    size_t n = 0;
    for (const po::option& o : parsed.options)
      if (o.string_key == "input") n += o.value.size();
    return n;
  } catch (const po::error&) {
    return 1;
  }
}

// The commands a first word may name.
const char* const kCommands[] = {"report", "diff", "view", "check", "ranks", "whatif", "convert", "chart", "help"};

// Levenshtein distance, for "did you mean" (short words only).
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// A first word that is neither a file or folder nor a command, but close to
// a command ("repotr", "dif", "rep"): the commands it may mean, "" when it
// looks like a path (a / or a dot-extension: a missing file keeps its
// input error), a pattern, an option, or is far from every command.
std::string command_suggestion(const std::string& w) {
  if (w.empty() || w.size() > 32 || w[0] == '-') return "";
  if (w.find_first_of("/.*?[") != std::string::npos) return "";
  std::error_code ec;
  if (std::filesystem::exists(std::filesystem::symlink_status(w, ec))) return "";
  std::vector<std::string> near;
  for (const char* c : kCommands) {
    const std::string cmd = c;
    const bool prefix = w.size() >= 2 && cmd.compare(0, w.size(), w) == 0;
    if (prefix || edit_distance(w, cmd) <= 2) near.push_back("'" + cmd + "'");
  }
  std::string s;
  for (size_t i = 0; i < near.size(); ++i) s += (i == 0 ? "" : i + 1 == near.size() ? " or " : ", ") + near[i];
  return s;
}

int run(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  keep_input_files(true);  // no output of this command replaces one of its inputs
  if (args.empty()) {
    std::cerr << kTopHelp;
    return kExitUsage;
  }
  const std::string& a0 = args[0];
  if (a0 == "--help" || a0 == "-h" || a0 == "help") {
    write_stdout(kTopHelp);
    return kExitOk;
  }
  if (a0 == "--version" || a0 == "-V") {
    write_stdout("snapdiff " SNAPDIFF_VERSION "\n");
    return kExitOk;
  }
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (a0 == "report") return cmd_report(rest);
  if (a0 == "convert") return cmd_convert(rest);
  if (a0 == "chart") return cmd_chart(rest);
  if (a0 == "check") return cmd_check(rest);
  if (a0 == "diff") return cmd_diff(rest);
  if (a0 == "ranks") return cmd_ranks(rest);
  if (a0 == "whatif") return cmd_whatif(rest);
  if (a0 == "view")
    return cmd_view(rest, [](const std::vector<std::string>& a) { return guess_inputs(a) == 2 ? cmd_diff(a) : cmd_report(a); });
  // A mistyped command: one usage line, not "cannot open".
  if (const std::string near = command_suggestion(a0); !near.empty()) {
    print_error("'" + a0 + "' is neither a file nor a command; did you mean " + near + "?");
    return kExitUsage;
  }
  // `snapdiff A B` is a diff, `snapdiff FILE` a report (options may come first).
  if (guess_inputs(args) == 2) return cmd_diff(args);
  return cmd_report(args);
}

// Every message is one line on stderr, its control bytes and invalid UTF-8
// made visible (print_error); stdout is checked at the end (finish_stdout).
int run_and_report(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const InputError& e) {
    std::fflush(stdout);
    print_error(e.describe());
    return kExitInput;
  } catch (const OutputError& e) {
    print_error(e.what());
    return kExitOutput;
  } catch (const RenderError& e) {
    print_error(std::string("cannot draw the chart: ") + e.what());
    return kExitRender;
  } catch (const UsageError& e) {
    print_error(e.what(), " (see snapdiff --help)");
    return kExitUsage;
  } catch (const po::error& e) {
    print_error(e.what(), " (see snapdiff --help)");
    return kExitUsage;
  } catch (const std::bad_alloc&) {
    print_error("out of memory");
    return kExitInternal;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "snapdiff: internal error: %s\n", escape_for_terminal(e.what()).c_str());
    return kExitInternal;
  }
}

}  // namespace

int main(int argc, char** argv) {
  prepare_standard_streams();
  install_input_fault_handler();
  return finish_stdout(run_and_report(argc, argv));
}
