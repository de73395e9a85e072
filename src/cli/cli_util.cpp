#include "cli/cli_util.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cstdio>

#include "snapdiff/analysis/check.hpp"
#include "snapdiff/error.hpp"
#include "snapdiff/input/input.hpp"
#include "util/output_file.hpp"

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

namespace {
// The file being read, for the SIGBUS handler: a memory-mapped input that
// shrinks while it is read faults on the vanished pages.
char g_reading[4096];
size_t g_reading_len = 0;

extern "C" void on_sigbus(int) {
  static const char a[] = "snapdiff: error: ";
  static const char b[] = ": the file changed size while it was being read\n";
  ssize_t ignored = ::write(2, a, sizeof a - 1);
  ignored = ::write(2, g_reading, g_reading_len);
  ignored = ::write(2, b, sizeof b - 1);
  (void)ignored;
  ::_exit(3);  // the input-error exit code; nothing was printed on stdout yet
}
}  // namespace

void install_input_fault_handler() {
  struct sigaction sa {};
  sa.sa_handler = on_sigbus;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGBUS, &sa, nullptr);
}

namespace {

uint64_t default_max_memory() {
  long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 0;
  return uint64_t(pages) * uint64_t(page) / 4 * 3;
}

uint64_t parse_max_memory(const std::string& text) {
  if (text == "auto") return default_max_memory();
  if (text == "none" || text == "0") return 0;
  auto b = parse_size(text);
  if (!b || *b <= 0) throw UsageError("--max-memory: expected a size such as 8GiB, 'auto' or 'none', got '" + text + "'");
  return uint64_t(*b);
}

}  // namespace

void add_input_options(boost::program_options::options_description& d) {
  namespace po = boost::program_options;
  d.add_options()("max-input-bytes", po::value<uint64_t>()->default_value(LoadOptions{}.max_decoded_bytes),
                  "refuse inputs that decompress to more than this many bytes")(
      "max-memory", po::value<std::string>()->default_value("auto"),
      "refuse inputs predicted to need more memory than this (a size, 'auto' = 75% of RAM, or 'none')");
}

LoadOptions load_options(const boost::program_options::variables_map& vm, unsigned held_at_once) {
  LoadOptions o;
  o.max_decoded_bytes = vm["max-input-bytes"].as<uint64_t>();
  o.max_memory_bytes = parse_max_memory(vm["max-memory"].as<std::string>()) / std::max(held_at_once, 1u);
  return o;
}

Trace load_input(const std::string& path, LoadOptions opts) {
  g_reading_len = std::min(path.size(), sizeof g_reading);
  std::memcpy(g_reading, path.data(), g_reading_len);
  Progress prog{path};
  opts.progress = [&prog](uint64_t d, uint64_t t) { prog(d, t); };
  try {
    Trace t = load_trace(path, opts);
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
  write_output_file(path, text);
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
