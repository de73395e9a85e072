// snapdiff — the command-line front end. Parses options, calls the core
// library, prints what it returns, and maps errors to exit codes
// (src/cli/commands.hpp, docs/cli.md "Exit codes").
#include <unistd.h>

#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "cli/cli_util.hpp"
#include "cli/commands.hpp"
#include "snapdiff/attribution.hpp"
#include "snapdiff/chart.hpp"
#include "snapdiff/error.hpp"
#include "snapdiff/input.hpp"
#include "snapdiff/profiler.hpp"
#include "snapdiff/report.hpp"

namespace po = boost::program_options;
using namespace snapdiff;
using snapdiff::cli::load_input;
using snapdiff::cli::load_rules;
using snapdiff::cli::write_output;
using snapdiff::cli::parse_command;
using snapdiff::cli::rules_files;
using namespace snapdiff::cli;  // the exit codes

namespace {

const char* kTopHelp =
    "snapdiff " SNAPDIFF_VERSION " - offline analyzer for PyTorch GPU memory snapshots\n"
    "\n"
    "Usage:\n"
    "  snapdiff FILE                      same as `snapdiff report FILE`\n"
    "  snapdiff report FILE [options]     peak memory, what every byte at the peak is, phases,\n"
    "                                     fragmentation (--format html: one page with the charts)\n"
    "  snapdiff A B                       same as `snapdiff diff A B`\n"
    "  snapdiff diff A B [options]        why B peaks where it does compared with A\n"
    "  snapdiff check [BASELINE] CANDIDATE [thresholds]\n"
    "                                     CI gate on peak memory (exit 1 when a threshold fails)\n"
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
    "  2  usage error (bad option or argument), or an output file cannot be written\n"
    "     (nothing is left behind: the file is as it was)\n"
    "  3  input error: unreadable, truncated, corrupt, hostile or not a snapshot;\n"
    "     one line on stderr: snapdiff: error: FILE: offset N: what is wrong\n"
    "  4  internal error (a bug in snapdiff; please report it)\n"
    "  5  Graphviz could not draw a chart (chart, or an HTML report's charts)\n";

int cmd_report(const std::vector<std::string>& args) {
  po::options_description d("snapdiff report FILE [options]\n\nOptions");
  d.add_options()("help,h", "show this help")(
      "format,f", po::value<std::string>()->default_value("text"), "output format: text | json | html (one self-contained page with the charts)")(
      "output,o", po::value<std::string>(), "write the report to this file instead of stdout")(
      "top,n", po::value<size_t>()->default_value(10), "number of allocation sites to list")(
      "rules", po::value<std::vector<std::string>>(), "attribution rules file (repeatable; tried before the built-in rules)")(
      "explain", po::value<std::string>(), "why allocations got their category: an ADDRESS (0x... or decimal) or a SITE "
                                           "(function, file:line, or text in \"function (file:line)\")")(
      "trace", po::value<std::string>(), "a torch.profiler Chrome trace of the same run as the snapshot FILE: its "
                                         "allocations gain the ops and kernels that made them")(
      "memory-timeline", po::value<std::string>(), "PyTorch's export_memory_timeline output (.json, .json.gz or "
                                                   "raw.json.gz) of the trace FILE: compare its categories with snapdiff's");
  po::options_description input("Input options");
  add_input_options(input);
  d.add(input);
  po::variables_map vm = parse_command(args, d);
  if (vm.count("help")) {
    std::cout << d << "\nThe JSON output is described by schemas/report.schema.json.\n";
    return kExitOk;
  }
  if (!vm.count("input") || vm["input"].as<std::vector<std::string>>().size() != 1)
    throw UsageError("report needs exactly one input file");
  std::string fmt = vm["format"].as<std::string>();
  if (fmt != "text" && fmt != "json" && fmt != "html") throw UsageError("unknown --format '" + fmt + "' (text, json, html)");
  std::string path = vm["input"].as<std::vector<std::string>>()[0];
  // Rules are read first: a bad rules file fails before a long load.
  RuleSet rules = load_rules(rules_files(vm));
  const LoadOptions lo = load_options(vm);
  Trace t = load_input(path, lo);
  ReportOptions ro;
  ro.top_sites = vm["top"].as<size_t>();
  ro.input_name = path;
  ro.rules = &rules;
  if (vm.count("explain")) ro.explain = vm["explain"].as<std::string>();
  TraceJoin join;
  if (vm.count("trace")) {
    if (is_profiler_trace(t))
      throw UsageError("--trace joins a snapshot with a profiler trace; " + path + " is itself a profiler trace");
    const std::string tp = vm["trace"].as<std::string>();
    Trace prof = load_input(tp, lo);
    if (!is_profiler_trace(prof)) throw UsageError("--trace " + tp + ": not a torch.profiler Chrome trace");
    join = join_profiler_trace(t, prof, tp);
    ro.join = &join;
  }
  MemoryTimeline timeline;
  if (vm.count("memory-timeline")) {
    if (!is_profiler_trace(t))
      throw UsageError("--memory-timeline compares PyTorch's categories with a profiler trace's allocations: give the "
                       "Chrome trace of the same run as the input");
    timeline = load_memory_timeline(vm["memory-timeline"].as<std::string>());
    ro.timeline = &timeline;
  }
  Report r = analyze_report(t, ro);
  std::string text = fmt == "json" ? render_json(r, t) : fmt == "html" ? render_html(r, t) : render_text(r, t);
  write_output(text, vm.count("output") ? vm["output"].as<std::string>() : "");
  return kExitOk;
}

int run(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::cerr << kTopHelp;
    return kExitUsage;
  }
  const std::string& a0 = args[0];
  if (a0 == "--help" || a0 == "-h" || a0 == "help") {
    std::cout << kTopHelp;
    return kExitOk;
  }
  if (a0 == "--version" || a0 == "-V") {
    std::cout << "snapdiff " SNAPDIFF_VERSION "\n";
    return kExitOk;
  }
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (a0 == "report") return cmd_report(rest);
  if (a0 == "convert") return snapdiff::cli::cmd_convert(rest);
  if (a0 == "chart") return snapdiff::cli::cmd_chart(rest);
  if (a0 == "check") return snapdiff::cli::cmd_check(rest);
  if (a0 == "diff") return snapdiff::cli::cmd_diff(rest);
  // `snapdiff A B` is a diff, `snapdiff FILE` a report (options may come first).
  static const char* with_value[] = {"-n", "--top", "-f", "--format", "-o", "--output", "--rules", "--explain",
                                     "--max-input-bytes", "--max-memory", "--top-sites", "--trace",
                                     "--memory-timeline"};
  size_t positional = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.empty() || a[0] != '-') {
      ++positional;
      continue;
    }
    for (const char* w : with_value)
      if (a == w) ++i;  // skip the option's value
  }
  if (positional == 2) return snapdiff::cli::cmd_diff(args);
  return cmd_report(args);
}

}  // namespace

int main(int argc, char** argv) {
  snapdiff::cli::install_input_fault_handler();
  try {
    return run(argc, argv);
  } catch (const InputError& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "snapdiff: error: %s\n", e.describe().c_str());
    return kExitInput;
  } catch (const OutputError& e) {
    std::fprintf(stderr, "snapdiff: error: %s\n", e.what());
    return kExitOutput;
  } catch (const RenderError& e) {
    std::fprintf(stderr, "snapdiff: error: cannot draw the chart: %s\n", e.what());
    return kExitRender;
  } catch (const UsageError& e) {
    std::fprintf(stderr, "snapdiff: error: %s (see snapdiff --help)\n", e.what());
    return kExitUsage;
  } catch (const po::error& e) {
    std::fprintf(stderr, "snapdiff: error: %s (see snapdiff --help)\n", e.what());
    return kExitUsage;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "snapdiff: error: out of memory\n");
    return kExitInternal;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "snapdiff: internal error: %s\n", e.what());
    return kExitInternal;
  }
}
