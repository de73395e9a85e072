// `snapdiff diff A B` (and `snapdiff A B`).
#include <boost/program_options.hpp>
#include <future>
#include <sstream>
#include <utility>

#include "cli/cli_util.hpp"
#include "cli/commands.hpp"
#include "cli/pair.hpp"
#include "cli/ranks_cmd.hpp"
#include "snapdiff/analysis/analysis.hpp"
#include "snapdiff/analysis/diff.hpp"
#include "snapdiff/report/chart.hpp"
#include "snapdiff/report/explorer.hpp"
#include "snapdiff/report/diff_report.hpp"
#include "snapdiff/error.hpp"
#include "snapdiff/input/input.hpp"
#include "cli/alloc_meter.hpp"
#include "input/memory_budget.hpp"

namespace po = boost::program_options;

namespace snapdiff::cli {

po::options_description diff_options() {
  po::options_description d("snapdiff diff A B [options]   (or: snapdiff A B)\n\nOptions");
  d.add_options()("help,h", "show this help")(
      "format,f", po::value<std::string>()->default_value("text"), "output format: text | json | markdown | html")(
      "output,o", po::value<std::string>(), "write the diff to this file instead of stdout")(
      "top,n", po::value<std::string>()->default_value("20"), "number of sites to list, 0 to 10000000 (the rest are summed)")(
      "depth", po::value<std::string>(), "frames per site row: the user frame and N-1 callers (default 1; 0: the whole stack)")(
      "rules", po::value<std::vector<std::string>>(), "attribution rules file (repeatable)")(
      "tensors-a", po::value<std::string>(), "A's tensor list (docs/tensors.md), if not beside it as A.tensors.json")(
      "tensors-b", po::value<std::string>(), "B's tensor list, if not beside it as B.tensors.json")(
      "kernels-a", po::value<std::string>(), "a kernel recording of A's run (snapcapture run -o FILE), joined into A")(
      "kernels-b", po::value<std::string>(), "a kernel recording of B's run, joined into B");
  add_width_option(d);
  po::options_description ranks("Two runs' ranks (A and B folders or patterns: rank r against rank r)");
  add_rank_options(ranks);
  d.add(ranks);
  add_input_options(d);
  return d;
}

int cmd_diff(const std::vector<std::string>& args) {
  const po::options_description d = diff_options();
  po::variables_map vm = parse_command(args, d);
  if (vm.count("help")) {
    std::ostringstream help;
    help << d << "\nA and B are any inputs snapdiff reads. The JSON output is described by schemas/diff.schema.json.\n";
    write_stdout(help.str());
    return kExitOk;
  }
  if (!vm.count("input") || vm["input"].as<std::vector<std::string>>().size() != 2)
    throw UsageError("diff needs exactly two inputs: A B");
  const auto& in = vm["input"].as<std::vector<std::string>>();
  const bool many_a = is_ranks_input({in[0]}), many_b = is_ranks_input({in[1]});
  if (many_a != many_b)
    throw UsageError(std::string("diff compares like with like: ") + (many_a ? "A" : "B") +
                     " is a folder (or pattern) of ranks and " + (many_a ? "B" : "A") + " is one file");
  if (!many_a)
    for (const char* o : {"rank", "skip-bad-ranks"})
      if (vm.count(o)) throw UsageError(std::string("--") + o + " applies to two runs' ranks: give two folders");
  std::string fmt = vm["format"].as<std::string>();
  if (fmt != "text" && fmt != "json" && fmt != "markdown" && fmt != "html")
    throw UsageError("unknown --format '" + fmt + "' (text, json, markdown, html)");
  const size_t top = size_t(count_arg(vm, "top", "-n/--top", kMaxTopSites));
  const size_t depth = depth_arg(vm, 1);
  const size_t width = text_width(vm);
  RuleSet rules = load_rules(rules_files(vm));
  const std::vector<std::string> kernels = kernels_args(vm, 2);
  if (many_a && (!kernels[0].empty() || !kernels[1].empty()))
    throw UsageError("--kernels-a and --kernels-b read one run each: give two snapshots, not folders of ranks");
  if (many_a && (vm.count("tensors-a") || vm.count("tensors-b")))
    throw UsageError("--tensors-a and --tensors-b name one run's list each: a folder of ranks reads each rank's from beside it");
  if (many_a) return diff_ranks(vm, {in[0]}, {in[1]}, rules, top, depth);
  // Both inputs are held at once: each gets half of the memory bound. A and
  // B are read and analysed on two threads (-j 1: one after the other).
  const LoadOptions lo = load_options(vm, 2);
  const bool parallel = pair_in_parallel(vm);
  Trace t[2];
  Analysis an[2];
  PairProgress progress(in[0], in[1]);
  run_pair(parallel, [&](int s, PairSide& side) {
    if (!side.step(0)) return;
    LoadOptions side_lo = lo;
    if (const char* o = s == 0 ? "tensors-a" : "tensors-b"; vm.count(o)) {
      if (!lo.tensors_beside) throw UsageError(std::string("--") + o + " and --no-tensors contradict each other");
      side_lo.tensors_path = vm[o].as<std::string>();
    }
    t[s] = parallel ? progress.load(s, in[s], pair_share(side_lo)) : load_input(in[s], side_lo);
    if (!side.step(1)) return;
    Joins joins;
    if (!kernels[s].empty()) {
      Joined<KernelJoin> j = join_kernels(std::move(t[s]), in[s], kernels[s], parallel ? pair_share(lo) : lo);
      t[s] = std::move(j.trace);
      joins.kernels = std::move(j.join);
    }
    if (!side.step(2)) return;
    ReportOptions ro;
    ro.rules = &rules;
    ro.input_name = in[s];
    ro.threads = parallel ? 1 : 2;  // the two runs are the parallelism
    an[s] = analyze(t[s], ro, std::move(joins));
  });
  const Trace &ta = t[0], &tb = t[1];
  const Analysis &ra = an[0], &rb = an[1];
  DiffOptions dopt;
  dopt.top_sites = top;
  dopt.depth = depth;
  dopt.a_name = in[0];
  dopt.b_name = in[1];
  // The diff's view and its rendering are counted against --max-memory
  // (the whole bound: both runs' predicted share is resident by now).
  LoadOptions whole = lo;
  whole.max_memory_bytes = parse_max_memory(vm["max-memory"].as<std::string>());
  std::string text;
  with_render_bound(render_room(whole, detail::analysis_memory_bytes(ta) + detail::analysis_memory_bytes(tb)),
                    whole.max_memory_bytes, in[1], [&] {
                      // The explorer (each run's peak device, A above B) is made
                      // on a second thread while the diff and its page are; the
                      // page is drawn around a marker the data then replaces.
                      const Device* dva = ra.devices.empty() ? nullptr : ta.find_device(ra.devices[ra.peak_device].device);
                      const Device* dvb = rb.devices.empty() ? nullptr : tb.find_device(rb.devices[rb.peak_device].device);
                      const bool explorer = fmt == "html" && dva && dvb && !dva->events.empty() && !dvb->events.empty();
                      std::future<std::string> data;
                      if (explorer)
                        data = std::async(std::launch::async, [&] {
                          ExplorerOptions eo;
                          eo.site_depth = depth;
                          eo.site_shown = depth == 0 ? SIZE_MAX : depth;  // as the diff's site rows
                          const ExplorerRun a = explorer_run(ra, ta, ra.peak_device, eo);
                          const ExplorerRun b = explorer_run(rb, tb, rb.peak_device, eo);
                          return explorer_data("diff", "snapdiff diff: " + in[0] + " vs " + in[1],
                                               {{"A", in[0], &a}, {"B", in[1], &b}});
                        });
                      const std::string marker = explorer ? "SDX-DATA-MARKER" : "";  // base64 never holds '-'
                      Diff df = diff_reports(ra, rb, dopt);
                      text = fmt == "json"       ? render_diff_json(df)
                             : fmt == "markdown" ? render_diff_markdown(df)
                             : fmt == "html"     ? render_diff_html(df, [&](const ChartOptions& co) {
                                                     return chart_series_diff(ra, ta, rb, tb, co);
                                                   }, marker)
                                                 : render_diff_text(df, width);
                      if (explorer) {
                        const std::string d = data.get();
                        const size_t at = text.rfind(marker);
                        if (at != std::string::npos) text.replace(at, marker.size(), d);
                      }
                    });
  write_output(text, vm.count("output") ? vm["output"].as<std::string>() : "");
  return kExitOk;
}

}  // namespace snapdiff::cli
