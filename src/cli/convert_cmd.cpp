// `snapdiff convert IN -o OUT`: any input to .snap or to a PyTorch snapshot
// pickle, the format chosen by OUT's name.
#include <boost/program_options.hpp>
#include <sstream>
#include <string>

#include "cli/cli_util.hpp"
#include "cli/commands.hpp"
#include "snapdiff/error.hpp"
#include "snapdiff/input/input.hpp"
#include "snapdiff/input/profiler.hpp"

namespace po = boost::program_options;

namespace snapdiff::cli {

namespace {

enum class OutFormat { Snap, Pickle, PickleGz };

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() > suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

OutFormat output_format(const std::string& path) {
  std::string lower = path;
  for (char& c : lower)
    if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
  if (ends_with(lower, ".snap")) return OutFormat::Snap;
  if (ends_with(lower, ".pickle")) return OutFormat::Pickle;
  if (ends_with(lower, ".pickle.gz")) return OutFormat::PickleGz;
  throw UsageError("convert: cannot tell the output format from '" + path +
                   "': name it OUT.snap, OUT.pickle or OUT.pickle.gz");
}

}  // namespace

int cmd_convert(const std::vector<std::string>& args) {
  po::options_description d("snapdiff convert IN -o OUT [options]\n\nOptions");
  d.add_options()("help,h", "show this help")(
      "output,o", po::value<std::string>(),
      "the file to write; its name picks the format: OUT.snap (snapdiff's format, binary version 3), "
      "OUT.pickle (the pickle torch.cuda.memory._dump_snapshot writes), OUT.pickle.gz (the same, gzip'd)")(
      "json", "OUT.snap: write the JSON form (version 1 or 2, gzip-compressed) instead of the binary version 3")(
      "no-gzip", "OUT.snap: write the JSON form as plain text (implies --json)");
  add_input_options(d);
  add_tensors_option(d);
  po::variables_map vm = parse_command(args, d);
  if (vm.count("help")) {
    std::ostringstream help;
    help << d
              << "\nThe .snap format is described by docs/snap_format.md and schemas/snap.schema.json. The pickle\n"
                 "loads with Python's pickle.load (no torch needed), torch.cuda._memory_viz and\n"
                 "pytorch.org/memory_viz, and snapdiff reads it back with the same results.\n";
    write_stdout(help.str());
    return kExitOk;
  }
  const auto in = inputs(vm);
  if (in.size() != 1) throw UsageError("convert needs exactly one input file");
  if (!vm.count("output")) throw UsageError("convert needs -o OUT (.snap, .pickle or .pickle.gz)");
  const std::string out = vm["output"].as<std::string>();
  // Decided before the (possibly long) read.
  const OutFormat fmt = output_format(out);
  const bool no_gzip = vm.count("no-gzip") != 0;
  if (vm.count("json") && fmt != OutFormat::Snap)
    throw UsageError("convert: --json is for OUT.snap, not '" + out + "'");
  if (no_gzip && fmt == OutFormat::PickleGz)
    throw UsageError("convert: --no-gzip contradicts '" + out + "' (name it OUT.pickle for a plain pickle)");
  Trace t = load_input(in[0], load_options(vm));
  if (is_profiler_trace(t))
    throw UsageError("convert: " + in[0] + " is a torch.profiler trace: it has no segments or blocks, which both output "
                     "formats need (report, diff and check read the trace directly)");
  switch (fmt) {
    case OutFormat::Snap:
      write_snap_file(t, out, no_gzip ? SnapEncoding::Json : vm.count("json") ? SnapEncoding::JsonGzip : SnapEncoding::Binary);
      break;
    case OutFormat::Pickle: write_torch_pickle_file(t, out, false); break;
    case OutFormat::PickleGz: write_torch_pickle_file(t, out, true); break;
  }
  return kExitOk;
}

}  // namespace snapdiff::cli
