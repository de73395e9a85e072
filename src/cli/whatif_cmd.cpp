// `snapdiff whatif RUN --alloc-conf CONF ...`: the run's requests under other
// allocator settings (docs/whatif.md).
#include <algorithm>
#include <boost/program_options.hpp>
#include <optional>
#include <sstream>

#include "cli/cli_util.hpp"
#include "cli/commands.hpp"
#include "snapdiff/analysis/whatif.hpp"
#include "snapdiff/error.hpp"
#include "snapdiff/model/budget.hpp"
#include "snapdiff/report/whatif_report.hpp"

namespace snapdiff::cli {

namespace po = boost::program_options;

namespace {

const char* kWhatIfHelpTail =
    "\nEach CONF is a PYTORCH_CUDA_ALLOC_CONF value: max_split_size_mb:N, roundup_power2_divisions:N or\n"
    "[256:1,512:2,>:8], garbage_collection_threshold:F (acts under --memory-limit, as under a memory\n"
    "fraction), expandable_segments:True, release_lock_on_cudamalloc (no memory effect), backend:native;\n"
    "\"\" is PyTorch's default. Other settings are refused (exit 2).\n"
    "\nExamples:\n"
    "  snapdiff whatif run.pickle --alloc-conf expandable_segments:True --alloc-conf max_split_size_mb:128\n"
    "  snapdiff whatif run.pickle --sweep --memory-limit 20GiB\n"
    "  snapdiff whatif run.pickle --sweep --format markdown -o whatif.md\n"
    "\nThe first lines say how far the model is from the recorded run under its own settings: its error on\n"
    "this run. JSON: snapdiff/whatif/1 (schemas/whatif.schema.json); how it works: docs/whatif.md.\n";

}  // namespace

int cmd_whatif(const std::vector<std::string>& args) {
  po::options_description d("snapdiff whatif RUN --alloc-conf CONF [--alloc-conf CONF ...] [options]\n\nOptions");
  d.add_options()("help,h", "show this help")(
      "alloc-conf,a", po::value<std::vector<std::string>>(), "a PYTORCH_CUDA_ALLOC_CONF to predict (repeatable; \"\" is the default)")(
      "sweep", "also try the common settings, and rank every setting by its predicted reserved peak")(
      "memory-limit", po::value<std::string>(), "bytes the process may reserve, as set_per_process_memory_fraction "
                                               "would cap it (default: the device's memory where the run's own "
                                               "out-of-memory error tells it, else no limit)")(
      "format,f", po::value<std::string>()->default_value("text"), "text | json | markdown")(
      "output,o", po::value<std::string>(), "write to this file instead of stdout")(
      "jobs,j", po::value<std::string>(), "settings modelled at once (default 2)");
  add_width_option(d);
  add_input_options(d);
  add_tensors_option(d);
  po::variables_map vm = parse_command(args, d);
  if (vm.count("help")) {
    std::ostringstream help;
    help << d << kWhatIfHelpTail;
    write_stdout(help.str());
    return kExitOk;
  }
  const std::string fmt = vm["format"].as<std::string>();
  if (fmt != "text" && fmt != "json" && fmt != "markdown")
    throw UsageError("unknown --format '" + fmt + "' (text, json, markdown)");
  std::vector<std::string> inputs;
  if (vm.count("input")) inputs = vm["input"].as<std::vector<std::string>>();
  if (inputs.size() != 1) throw UsageError("whatif needs one RUN (a memory snapshot)");
  const bool sweep = vm.count("sweep") > 0;
  const size_t width = text_width(vm);
  std::vector<std::string> texts;
  if (vm.count("alloc-conf")) texts = vm["alloc-conf"].as<std::vector<std::string>>();
  if (sweep)
    for (const std::string& s : sweep_alloc_confs())
      if (std::find(texts.begin(), texts.end(), s) == texts.end()) texts.push_back(s);
  if (texts.empty()) throw UsageError("nothing to predict: give --alloc-conf CONF (repeatable) or --sweep");
  std::vector<AllocConf> confs;
  for (const std::string& t : texts) confs.push_back(parse_alloc_conf(t));
  WhatIfOptions o;
  if (vm.count("memory-limit")) {
    const std::string v = vm["memory-limit"].as<std::string>();
    const std::optional<int64_t> b = parse_size(v);
    if (!b || *b <= 0) throw UsageError("--memory-limit: '" + v + "' is not a size (e.g. 20GiB)");
    o.memory_limit = *b;
    o.limit_is_fraction = true;
  }
  if (vm.count("jobs")) o.threads = unsigned(std::max<uint64_t>(1, count_arg(vm, "jobs", "--jobs", 256)));
  const LoadOptions lo = load_options(vm);
  const Trace t = load_input(inputs[0], lo);
  const WhatIfResult r = what_if(t, confs, o);
  const std::string out = vm.count("output") ? vm["output"].as<std::string>() : "";
  write_output(fmt == "json"       ? render_whatif_json(r, inputs[0])
               : fmt == "markdown" ? render_whatif_markdown(r, inputs[0], sweep)
                                   : render_whatif_text(r, inputs[0], sweep, width),
               out);
  return kExitOk;
}

}  // namespace snapdiff::cli
