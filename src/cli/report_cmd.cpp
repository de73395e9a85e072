// `snapdiff report FILE` (and `snapdiff FILE`): the report of one run, as
// text, JSON or one HTML page.
#include <boost/program_options.hpp>
#include <future>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cli/cli_util.hpp"
#include "cli/commands.hpp"
#include "cli/pair.hpp"
#include "cli/ranks_cmd.hpp"
#include "snapdiff/analysis/attribution.hpp"
#include "snapdiff/analysis/analysis.hpp"
#include "snapdiff/analysis/moment.hpp"
#include "snapdiff/report/chart.hpp"
#include "snapdiff/report/explorer.hpp"
#include "snapdiff/error.hpp"
#include "snapdiff/input/input.hpp"
#include "snapdiff/analysis/trace_join.hpp"
#include "snapdiff/input/profiler.hpp"
#include "snapdiff/report/report.hpp"
#include "cli/alloc_meter.hpp"
#include "input/memory_budget.hpp"

namespace po = boost::program_options;

namespace snapdiff::cli {

po::options_description report_options() {
  po::options_description d(
      "snapdiff report FILE [options]\n"
      "snapdiff report DIR | FILE... | 'PATTERN' [options]   many ranks (docs/ranks.md)\n\nOptions");
  d.add_options()("help,h", "show this help")(
      "format,f", po::value<std::string>()->default_value("text"), "output format: text | json | markdown (for a pull-request comment) | html (one self-contained page with the charts)")(
      "output,o", po::value<std::string>(), "write the report to this file instead of stdout")(
      "top,n", po::value<std::string>()->default_value("10"), "number of allocation sites to list (0 to 10000000)")(
      "depth", po::value<std::string>(), "frames per site row: the user frame and N-1 callers (default 3; 0: the whole stack)")(
      "rules", po::value<std::vector<std::string>>(), "attribution rules file (repeatable; tried before the built-in rules)")(
      "explain", po::value<std::string>(), "why allocations got their category: an ADDRESS (0x... or decimal) or a SITE "
                                           "(function, file:line, or text in \"function (file:line)\")")(
      "trace", po::value<std::string>(), "a torch.profiler Chrome trace of the same run as the snapshot FILE: its "
                                         "allocations gain the ops and kernels that made them")(
      "kernels", po::value<std::string>(), "a kernel recording of the same run (snapcapture run -o FILE): each "
                                           "allocation gains the kernel it was made for (BY KERNEL)")(
      "memory-timeline", po::value<std::string>(), "PyTorch's export_memory_timeline output (.json, .json.gz or "
                                                   "raw.json.gz) of the trace FILE: compare its categories with snapdiff's")(
      "at", po::value<std::string>(), "show the categories, sites and live set at this MOMENT instead of the peak: an "
                                      "event index (1746), +4.7s / +350ms / +12us from the first event, @TIME_US, or "
                                      "'iteration 2 optimizer' (its peak; add start or end for its boundaries)")(
      "window", po::value<std::string>(), "A..B: the peaks and phases within these two moments only (either may be "
                                          "left out: ..'iteration 3'); a phase as A means its start, as B its end");
  add_width_option(d);
  po::options_description ranks("Many ranks (a folder, several files or a pattern)");
  add_rank_options(ranks);
  d.add(ranks);
  po::options_description input("Input options");
  add_input_options(input);
  add_tensors_option(input);
  d.add(input);
  return d;
}

int cmd_report(const std::vector<std::string>& args) {
  const po::options_description d = report_options();
  po::variables_map vm = parse_command(args, d);
  if (vm.count("help")) {
    std::ostringstream help;
    help << d << "\nThe JSON output is described by schemas/report.schema.json.\n";
    write_stdout(help.str());
    return kExitOk;
  }
  if (!vm.count("input")) throw UsageError("report needs an input file (or a folder of ranks)");
  const std::vector<std::string> in = vm["input"].as<std::vector<std::string>>();
  const bool many = is_ranks_input(in);
  std::string fmt = vm["format"].as<std::string>();
  if (!many && fmt != "text" && fmt != "json" && fmt != "html" && fmt != "markdown")
    throw UsageError("unknown --format '" + fmt + "' (text, json, markdown, html)");
  if (!many)
    for (const char* o : {"jobs", "rank", "skip-bad-ranks"})
      if (vm.count(o))
        throw UsageError(std::string("--") + o + " applies to many ranks: give a folder, several files or a pattern");
  const size_t top = size_t(count_arg(vm, "top", "-n/--top", kMaxTopSites));
  const size_t depth = depth_arg(vm, 3);
  const size_t width = text_width(vm);
  std::string path = in[0];
  // Moments are parsed before the load: a bad one fails at once.
  MomentSpec at;
  WindowSpec window;
  if (vm.count("at")) at = parse_moment(vm["at"].as<std::string>(), "--at");
  if (vm.count("window")) window = parse_window(vm["window"].as<std::string>(), "--window");
  // Rules are read first: a bad rules file fails before a long load.
  RuleSet rules = load_rules(rules_files(vm));
  ReportOptions ro;
  ro.top_sites = top;
  ro.site_depth = depth;
  ro.input_name = path;
  ro.rules = &rules;
  if (many) {
    for (const char* o : {"explain", "trace", "kernels", "memory-timeline"})
      if (vm.count(o)) throw UsageError(std::string("--") + o + " reads one run: give one snapshot, not many ranks");
    ro.at = at;
    ro.window = window;
    return report_ranks(vm, in, ro, top, depth_arg(vm, 1));
  }
  const LoadOptions lo = load_options(vm);
  Trace t;
  if (vm.count("explain")) ro.explain = vm["explain"].as<std::string>();
  ro.at = at;
  ro.window = window;
  Joins joins;
  if (vm.count("trace")) {
    // The snapshot and the profiler trace are read at once (-j is for
    // ranks: here, two cores are enough); errors as reading one then the other.
    const std::string tp = vm["trace"].as<std::string>();
    const bool parallel = std::thread::hardware_concurrency() >= 2;
    PairProgress progress(path, tp);
    Trace prof;
    LoadOptions plo = lo;  // a profiler trace has no tensor list
    plo.tensors_path.clear();
    plo.tensors_beside = false;
    run_pair(parallel, [&](int s, PairSide& side) {
      if (!side.step(0)) return;
      if (s == 0) {
        t = parallel ? progress.load(0, path, pair_share(lo)) : load_input(path, lo);
        if (is_profiler_trace(t))
          throw UsageError("--trace joins a snapshot with a profiler trace; " + path + " is itself a profiler trace");
      } else {
        prof = parallel ? progress.load(1, tp, pair_share(plo)) : load_input(tp, plo);
        if (!is_profiler_trace(prof)) throw UsageError("--trace " + tp + ": not a torch.profiler Chrome trace");
      }
    });
    Joined<TraceJoin> j = join_profiler_trace(std::move(t), prof, tp, path);
    t = std::move(j.trace);
    joins.trace = std::move(j.join);
  } else {
    t = load_input(path, lo);
  }
  if (vm.count("kernels")) {
    Joined<KernelJoin> j = join_kernels(std::move(t), path, vm["kernels"].as<std::string>(), lo);
    t = std::move(j.trace);
    joins.kernels = std::move(j.join);
  }
  MemoryTimeline timeline;
  if (vm.count("memory-timeline")) {
    if (!is_profiler_trace(t))
      throw UsageError("--memory-timeline compares PyTorch's categories with a profiler trace's allocations: give the "
                       "Chrome trace of the same run as the input");
    timeline = load_memory_timeline(vm["memory-timeline"].as<std::string>(), lo);
    ro.timeline = &timeline;
  }
  Analysis a = analyze(t, ro, std::move(joins));
  std::string text;
  // The view and its rendering are counted against --max-memory (-n
  // 10000000 on 50,000 sites builds far more than the model).
  with_render_bound(render_room(lo, detail::analysis_memory_bytes(t)), lo.max_memory_bytes, path, [&] {
    if (fmt == "html") {
      // The explorer's data (every device with events) is made on a second
      // thread while the page's sections and charts are drawn: both only
      // read the analysis. The page is drawn around a marker the data then
      // replaces.
      std::future<std::string> data = std::async(std::launch::async, [&] {
        ExplorerOptions eo;
        eo.site_depth = ro.site_depth;
        return explorer_report_data(a, t, path, "snapdiff report: " + path, eo);
      });
      const std::string marker = "SDX-DATA-MARKER";  // base64 never holds '-'
      text = render_html(report_view(a), [&](const ChartOptions& co) { return chart_series(a, t, co); }, marker);
      const std::string d = data.get();
      const size_t at = text.rfind(marker);
      if (at != std::string::npos) text.replace(at, marker.size(), d);
    } else {
      const Report r = report_view(std::move(a));  // the analysis is not read again
      text = fmt == "json" ? render_json(r) : fmt == "markdown" ? render_markdown(r) : render_text(r, width);
    }
  });
  write_output(text, vm.count("output") ? vm["output"].as<std::string>() : "");
  return kExitOk;
}

}  // namespace snapdiff::cli
