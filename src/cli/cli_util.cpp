#include "cli/cli_util.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>

#include "snapdiff/error.hpp"
#include "snapdiff/input.hpp"

namespace snapdiff::cli {

namespace {
struct Progress {
  std::string name;
  bool tty = ::isatty(2) != 0;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  bool shown = false;
  void operator()(uint64_t done, uint64_t total) {
    if (!tty) return;
    if (std::chrono::steady_clock::now() - start < std::chrono::seconds(1)) return;
    std::fprintf(stderr, "\rsnapdiff: reading %s: %3d%%", name.c_str(), total ? int(100 * done / total) : 0);
    shown = true;
  }
  void clear() {
    if (shown) std::fprintf(stderr, "\r\033[K");
    shown = false;
  }
};
}  // namespace

Trace load_input(const std::string& path, uint64_t max_decoded_bytes) {
  Progress prog{path};
  LoadOptions o;
  o.max_decoded_bytes = max_decoded_bytes;
  o.progress = [&prog](uint64_t d, uint64_t t) { prog(d, t); };
  try {
    Trace t = load_trace(path, o);
    prog.clear();
    return t;
  } catch (...) {
    prog.clear();
    throw;
  }
}

RuleSet load_rules(const std::vector<std::string>& files) {
  RuleSet rules = RuleSet::builtin();
  for (const std::string& f : files) rules.add_file(f);
  return rules;
}

void write_output(const std::string& text, const std::string& path) {
  if (path.empty() || path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return;
  }
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw UsageError("cannot write " + path);
    f << text;
    if (!f) throw UsageError("cannot write " + path);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw UsageError("cannot write " + path);
}

boost::program_options::variables_map parse_command(const std::vector<std::string>& args,
                                                    const boost::program_options::options_description& visible) {
  namespace po = boost::program_options;
  po::options_description hidden;
  hidden.add_options()("input", po::value<std::vector<std::string>>(), "input");
  po::options_description all;
  all.add(visible).add(hidden);
  po::positional_options_description pos;
  pos.add("input", -1);
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(all).positional(pos).run(), vm);
  po::notify(vm);
  return vm;
}

std::vector<std::string> inputs(const boost::program_options::variables_map& vm) {
  return vm.count("input") ? vm["input"].as<std::vector<std::string>>() : std::vector<std::string>{};
}

std::vector<std::string> rules_files(const boost::program_options::variables_map& vm) {
  return vm.count("rules") ? vm["rules"].as<std::vector<std::string>>() : std::vector<std::string>{};
}

}  // namespace snapdiff::cli
