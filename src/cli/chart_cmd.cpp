// `snapdiff chart FILE [B] --kind KIND -o OUT`: flame, lifetime and timeline
// charts, drawn by Graphviz; the format comes from OUT's extension.
#include <boost/program_options.hpp>
#include <sstream>
#include <string>
#include <utility>

#include "cli/cli_util.hpp"
#include "cli/commands.hpp"
#include "snapdiff/analysis/analysis.hpp"
#include "snapdiff/analysis/moment.hpp"
#include "snapdiff/report/chart.hpp"
#include "snapdiff/error.hpp"

namespace po = boost::program_options;

namespace snapdiff::cli {

int cmd_chart(const std::vector<std::string>& args) {
  po::options_description d("snapdiff chart FILE --kind KIND -o OUT [options]\n"
                            "snapdiff chart A B --kind KIND -o OUT [options]   (two runs)\n\nOptions");
  d.add_options()("help,h", "show this help")(
      "kind,k", po::value<std::string>(),
      "flame (bytes live at the peak by call stack; two runs: growth and shrinkage), lifetime (allocations as bars "
      "from allocation to free), timeline (memory over time by category)")(
      "output,o", po::value<std::string>(), "the file to write; its extension picks the format: .svg .png .pdf .dot")(
      "top,n", po::value<std::string>()->default_value("600"),
      "lifetime: allocations drawn one by one (at most 5000); the rest are summed")(
      "group", po::value<std::string>()->default_value("category"), "lifetime: one band per category | site")(
      "x", po::value<std::string>()->default_value("auto"),
      "lifetime, timeline: x axis: time | events | auto (time when every event has one)")(
      "device", po::value<std::string>(), "CUDA device index (default: the device with the highest peak)")(
      "width", po::value<double>()->default_value(1200), "width in points (PNG: pixels x 3/4)")(
      "title", po::value<std::string>(), "title (default: the input's file name and what the chart shows)")(
      "rules", po::value<std::vector<std::string>>(), "attribution rules file (repeatable)")(
      "kernels", po::value<std::string>(), "a kernel recording of the input's run (snapcapture run -o FILE), joined "
                                           "before the chart; two runs: --kernels-a and --kernels-b")(
      "kernels-a", po::value<std::string>(), "two runs: the kernel recording of A's run")(
      "kernels-b", po::value<std::string>(), "two runs: the kernel recording of B's run")(
      "at", po::value<std::string>(), "timeline: mark this MOMENT (as report --at: 1746, +4.7s, 'iteration 2 optimizer')")(
      "window", po::value<std::string>(), "A..B: the peaks and phases within these two moments; timeline: only this "
                                          "range on the x axis (as report --window)");
  add_input_options(d);
  add_tensors_option(d);
  po::variables_map vm = parse_command(args, d);
  if (vm.count("help")) {
    std::ostringstream help;
    help << d
              << "\nThe charts are drawn with Graphviz's libraries in-process. A .dot file keeps the graph with every\n"
                 "element pinned: `neato -n2 -Tsvg chart.dot` renders it as snapdiff does.\n";
    write_stdout(help.str());
    return kExitOk;
  }
  const std::vector<std::string> in = inputs(vm);
  if (in.empty() || in.size() > 2) throw UsageError("chart needs one input (or two to compare)");
  if (!vm.count("kind")) throw UsageError("chart needs --kind flame|lifetime|timeline");
  ChartOptions opt;
  if (!parse_chart_kind(vm["kind"].as<std::string>(), &opt.kind))
    throw UsageError("unknown --kind '" + vm["kind"].as<std::string>() + "' (flame, lifetime, timeline)");
  if (!vm.count("output")) throw UsageError("chart needs -o OUT (.svg, .png, .pdf or .dot)");
  const std::string out = vm["output"].as<std::string>();
  ChartFormat fmt;
  if (!chart_format_from_path(out, &fmt))
    throw UsageError("chart: cannot tell the format from '" + out + "': name it OUT.svg, OUT.png, OUT.pdf or OUT.dot");
  opt.top = size_t(count_arg(vm, "top", "-n/--top", kMaxLifetimeBars));
  const std::string group = vm["group"].as<std::string>();
  if (group == "category") opt.group = LifetimeGroup::Category;
  else if (group == "site") opt.group = LifetimeGroup::Site;
  else throw UsageError("unknown --group '" + group + "' (category, site)");
  const std::string x = vm["x"].as<std::string>();
  if (x == "auto") opt.axis = ChartAxis::Auto;
  else if (x == "time") opt.axis = ChartAxis::Time;
  else if (x == "events") opt.axis = ChartAxis::Events;
  else throw UsageError("unknown --x '" + x + "' (time, events, auto)");
  opt.width = vm["width"].as<double>();
  if (!(opt.width >= 400 && opt.width <= 20000)) throw UsageError("--width must be between 400 and 20000 points");
  if (vm.count("title")) opt.title = vm["title"].as<std::string>();
  if (vm.count("device")) opt.device = int(count_arg(vm, "device", "--device", 1 << 20));

  MomentSpec at;
  WindowSpec window;
  if (vm.count("at")) at = parse_moment(vm["at"].as<std::string>(), "--at");
  if (vm.count("window")) window = parse_window(vm["window"].as<std::string>(), "--window");
  RuleSet rules = load_rules(rules_files(vm));
  // Two runs are held at once, like a diff's: each gets half of the memory bound.
  const LoadOptions lo = load_options(vm, unsigned(in.size()));
  const std::vector<std::string> kernels = kernels_args(vm, in.size());
  std::vector<Trace> traces;
  std::vector<Analysis> reports;
  traces.reserve(in.size());
  reports.reserve(in.size());
  for (const std::string& path : in) {
    traces.push_back(load_input(path, lo));
    const size_t i = traces.size() - 1;
    Joins joins;
    if (!kernels[i].empty()) {
      Joined<KernelJoin> j = join_kernels(std::move(traces.back()), path, kernels[i], lo);
      traces.back() = std::move(j.trace);
      joins.kernels = std::move(j.join);
    }
    ReportOptions ro;
    ro.rules = &rules;
    ro.input_name = path;
    ro.at = at;
    ro.window = window;
    reports.push_back(analyze(traces.back(), ro, std::move(joins)));
    const Analysis& r = reports.back();
    if (opt.device >= 0) {
      bool found = false;
      for (const DeviceAnalysis& dr : r.devices) found = found || dr.device == opt.device;
      if (!found) throw UsageError(path + " has no device " + std::to_string(opt.device));
    }
  }
  const std::string dot = in.size() == 1 ? chart_dot(chart_series(reports[0], traces[0], opt), opt)
                                         : chart_dot_diff(chart_series_diff(reports[0], traces[0], reports[1], traces[1], opt), opt);
  write_output(render_chart(dot, fmt), out);
  return kExitOk;
}

}  // namespace snapdiff::cli
