#include "cli/cli_util.hpp"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <thread>
#include <utility>

#include "snapdiff/analysis/check.hpp"
#include "snapdiff/error.hpp"
#include "snapdiff/input/input.hpp"
#include "snapdiff/input/profiler.hpp"
#include "snapdiff/report/report.hpp"  // kDefaultTextWidth
#include "cli/commands.hpp"
#include "util/output_file.hpp"
#include "util/quote_value.hpp"

namespace snapdiff::cli {

namespace {
struct Progress {
  std::string name;  // escaped
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
// shrinks while it is read faults on the vanished pages. The fault is
// delivered to the thread that touched the page: the file that thread reads
// (two inputs are read at once by diff and check), else the one read last.
char g_reading[4096];
size_t g_reading_len = 0;
thread_local char t_reading[4096];
thread_local size_t t_reading_len = 0;
std::thread::id g_main_thread;

extern "C" void on_sigbus(int) {
  static const char a[] = "snapdiff: error: ";
  static const char b[] = ": the file changed size while it was being read\n";
  ssize_t ignored = ::write(2, a, sizeof a - 1);
  if (t_reading_len) ignored = ::write(2, t_reading, t_reading_len);
  else ignored = ::write(2, g_reading, g_reading_len);
  ignored = ::write(2, b, sizeof b - 1);
  (void)ignored;
  ::_exit(3);  // the input-error exit code; nothing was printed on stdout yet
}
}  // namespace

void install_input_fault_handler() {
  g_main_thread = std::this_thread::get_id();
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


// --max-input-bytes: a size (bytes, or 16GiB); 0 would refuse every input
// (and was silently ignored for plain files), so it is a usage error.
uint64_t parse_max_input_bytes(const std::string& text) {
  auto b = parse_size(text);
  if (!b || *b < 0)
    throw UsageError("--max-input-bytes: expected a number of bytes or a size such as 16GiB, got " + quote_value(text));
  if (*b == 0) throw UsageError("--max-input-bytes must be at least 1 (a size such as 16GiB)");
  return uint64_t(*b);
}

}  // namespace

uint64_t parse_max_memory(const std::string& text) {
  if (text == "auto") return default_max_memory();
  if (text == "none" || text == "0") return 0;
  auto b = parse_size(text);
  if (!b || *b <= 0) throw UsageError("--max-memory: expected a size such as 8GiB, 'auto' or 'none', got '" + text + "'");
  return uint64_t(*b);
}

void add_input_options(boost::program_options::options_description& d) {
  namespace po = boost::program_options;
  d.add_options()("max-input-bytes", po::value<std::string>()->default_value(std::to_string(LoadOptions{}.max_decoded_bytes)),
                  "refuse inputs that decompress to more than this many bytes (at least 1; a size such as 16GiB)")(
      "max-memory", po::value<std::string>()->default_value("auto"),
      "refuse inputs predicted to need more memory than this (a size, 'auto' = 75% of RAM, or 'none')")(
      "max-entries", po::value<std::string>(),
      "the max_entries the history was recorded with, for files that do not record it: a truncated history with "
      "fewer entries per device started late, one with as many wrapped")(
      "no-tensors", po::bool_switch(), "ignore tensor lists beside the inputs (attribute from the snapshot alone)");
}

void add_tensors_option(boost::program_options::options_description& d) {
  d.add_options()("tensors", boost::program_options::value<std::string>(),
                  "the run's tensor list (docs/tensors.md) for a single input; by default PATH.tensors.json "
                  "beside the input is read when it is there");
}

LoadOptions load_options(const boost::program_options::variables_map& vm, unsigned held_at_once) {
  LoadOptions o;
  o.max_decoded_bytes = parse_max_input_bytes(vm["max-input-bytes"].as<std::string>());
  o.max_memory_bytes = parse_max_memory(vm["max-memory"].as<std::string>()) / std::max(held_at_once, 1u);
  if (vm.count("max-entries")) o.recorded_max_entries = int64_t(count_arg(vm, "max-entries", "--max-entries", uint64_t(1) << 40));
  o.tensors_beside = !(vm.count("no-tensors") && vm["no-tensors"].as<bool>());
  if (vm.count("tensors")) {
    if (held_at_once > 1)
      throw UsageError("--tensors names the tensor list of a single input; with several, each input's "
                       "PATH.tensors.json is read from beside it");
    if (!o.tensors_beside) throw UsageError("--tensors and --no-tensors contradict each other");
    o.tensors_path = vm["tensors"].as<std::string>();
  }
  return o;
}

void mark_reading(const std::string& path) {
  t_reading_len = std::min(path.size(), sizeof t_reading);
  std::memcpy(t_reading, path.data(), t_reading_len);
  if (std::this_thread::get_id() != g_main_thread) return;  // the other thread of a pair: its own name only
  g_reading_len = std::min(path.size(), sizeof g_reading);
  std::memcpy(g_reading, path.data(), g_reading_len);
}

Trace load_input(const std::string& path, LoadOptions opts) {
  mark_reading(path);
  Progress prog{escape_for_terminal(path)};
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

Joined<KernelJoin> join_kernels(Trace t, const std::string& snapshot_path, const std::string& recording_path,
                                const LoadOptions& opts) {
  if (is_profiler_trace(t))
    throw UsageError("--kernels joins a snapshot with a kernel recording; " + snapshot_path +
                     " is a profiler trace, which records its own kernels");
  LoadOptions ro = opts;  // a kernel recording has no tensor list
  ro.tensors_path.clear();
  ro.tensors_beside = false;
  const Trace rec = load_input(recording_path, ro);
  if (rec.event_count() > 0)
    throw UsageError("--kernels " + recording_path +
                     ": it has allocator events (a snapshot, not a kernel recording of snapcapture run)");
  return join_kernel_recording(std::move(t), rec, recording_path, snapshot_path);
}

std::vector<std::string> kernels_args(const boost::program_options::variables_map& vm, size_t inputs) {
  std::vector<std::string> out(inputs);
  auto get = [&](const char* o) { return vm.count(o) ? vm[o].as<std::string>() : std::string(); };
  const std::string one = get("kernels"), a = get("kernels-a"), b = get("kernels-b");
  if (inputs == 1) {
    if (!a.empty() || !b.empty()) throw UsageError("--kernels-a and --kernels-b are for two runs: give --kernels");
    out[0] = one;
  } else if (inputs == 2) {
    if (!one.empty()) throw UsageError("two runs: give A's kernel recording as --kernels-a and B's as --kernels-b");
    out[0] = a, out[1] = b;
  }
  return out;
}

RuleSet load_rules(const std::vector<std::string>& files) {
  RuleSet rules = RuleSet::builtin();
  for (const std::string& f : files) rules.add_file(f);
  return rules;
}

void write_output(const std::string& text, const std::string& path) {
  // The names of the descriptor itself: written as stdout is (a rename
  // through /proc/self/fd/1 would replace the file a shell redirected to).
  if (path.empty() || path == "-" || path == "/dev/stdout" || path == "/dev/fd/1" || path == "/proc/self/fd/1") {
    write_stdout(text);
    return;
  }
  write_output_file(path, text);
}

namespace {

[[noreturn]] void die_of_sigpipe() {
  // As git does: the reader went away, so end as a shell expects a writer
  // to (status 141), nothing printed.
  std::signal(SIGPIPE, SIG_DFL);
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGPIPE);
  ::sigprocmask(SIG_UNBLOCK, &s, nullptr);
  ::raise(SIGPIPE);
  ::_exit(128 + SIGPIPE);
}

[[noreturn]] void stdout_failed(int err) {
  if (err == EPIPE) die_of_sigpipe();
  throw OutputError("-", "cannot write to standard output" + (err ? ": " + std::string(std::strerror(err)) : ""));
}

}  // namespace

void write_stdout(std::string_view text) {
  errno = 0;
  if (std::fflush(stdout) != 0) stdout_failed(errno);
  if (const int err = write_all_fd(STDOUT_FILENO, text)) stdout_failed(err);
}

void prepare_standard_streams() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) >= 0 || errno != EBADF) continue;
    const int nfd = ::open("/dev/null", (fd == STDOUT_FILENO ? O_RDONLY : O_WRONLY) | O_NOCTTY);
    if (nfd >= 0 && nfd != fd) {
      ::dup2(nfd, fd);
      ::close(nfd);
    }
  }
  struct sigaction old {};
  if (::sigaction(SIGXFSZ, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) std::signal(SIGXFSZ, SIG_IGN);
}

int finish_stdout(int rc) {
  errno = 0;
  bool failed = std::cout.bad() || std::ferror(stdout) != 0;
  int err = errno;
  if (std::fflush(stdout) != 0) {
    failed = true;
    err = errno;
  }
  if (!failed && ::close(STDOUT_FILENO) != 0 && errno != EBADF) {
    failed = true;
    err = errno;
  }
  if (!failed) return rc;
  if (err == EPIPE) die_of_sigpipe();
  if (rc >= kExitOutput) return rc;  // its error is on stderr already
  print_error("cannot write to standard output" + (err ? ": " + std::string(std::strerror(err)) : std::string()));
  return kExitOutput;
}

void print_error(const std::string& message, const char* suffix) {
  // Values are quoted cut (quote_value); this holds the line itself to a
  // screenful whatever a message was built from: its head (the file, the
  // offset) and its tail kept, the middle said in bytes.
  std::string line = escape_for_terminal(message);
  constexpr size_t kHead = 3000, kTail = 600;
  if (line.size() > kHead + kTail + 100) {
    size_t a = kHead, b = line.size() - kTail;
    while (a > 0 && (uint8_t(line[a]) & 0xC0) == 0x80) --a;
    while (b < line.size() && (uint8_t(line[b]) & 0xC0) == 0x80) ++b;
    line = line.substr(0, a) + "...(" + std::to_string(b - a) + " bytes of the message left out)..." + line.substr(b);
  }
  std::fprintf(stderr, "snapdiff: error: %s%s\n", line.c_str(), suffix);
  std::fflush(stderr);
}

uint64_t count_arg(const boost::program_options::variables_map& vm, const std::string& name, const std::string& option,
                   uint64_t max) {
  const std::string& v = vm[name].as<std::string>();
  const bool digits = !v.empty() && v.size() <= 19 && std::all_of(v.begin(), v.end(), [](char c) {
    return c >= '0' && c <= '9';
  });
  const uint64_t n = digits ? std::stoull(v) : 0;
  if (!digits || n > max)
    throw UsageError(option + ": " + quote_value(v) + " is not a count from 0 to " + std::to_string(max));
  return n;
}

size_t depth_arg(const boost::program_options::variables_map& vm, size_t fallback) {
  if (!vm.count("depth")) return fallback;
  return size_t(count_arg(vm, "depth", "--depth", kMaxDepth));
}

void add_width_option(boost::program_options::options_description& d) {
  d.add_options()("width", boost::program_options::value<std::string>(),
                  "columns of text output, 40 to 1000 (default: the terminal's width; 80 when not a terminal)");
}

size_t text_width(const boost::program_options::variables_map& vm) {
  if (vm.count("width")) {
    const std::string& v = vm["width"].as<std::string>();
    const bool digits = !v.empty() && v.size() <= 9 && std::all_of(v.begin(), v.end(), [](char c) {
      return c >= '0' && c <= '9';
    });
    const uint64_t n = digits ? std::stoull(v) : 0;
    if (!digits || n < kMinTextWidth || n > kMaxTextWidth)
      throw UsageError("--width: " + quote_value(v) + " is not a width from " + std::to_string(kMinTextWidth) + " to " +
                       std::to_string(kMaxTextWidth) + " columns");
    return size_t(n);
  }
  // Written to a file: the default width, whatever the terminal.
  if (vm.count("output")) {
    const std::string& o = vm["output"].as<std::string>();
    if (o != "-" && o != "/dev/stdout" && o != "/dev/fd/1") return kDefaultTextWidth;
  }
  if (!::isatty(STDOUT_FILENO)) return kDefaultTextWidth;
  size_t cols = 0;
  struct winsize ws {};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) cols = ws.ws_col;
  if (cols == 0)
    if (const char* c = std::getenv("COLUMNS"); c && *c && std::strlen(c) <= 6 && std::all_of(c, c + std::strlen(c), [](char ch) {
          return ch >= '0' && ch <= '9';
        }))
      cols = size_t(std::atoi(c));
  if (cols == 0) return kDefaultTextWidth;
  return std::clamp(cols, kMinTextWidth, kMaxTextWidth);
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
  // A file option given an empty name (`--write-budget ''`, an unset shell
  // variable) is a mistake, not "standard output" or "none".
  for (const char* o : {"output", "write-budget", "junit", "github-benchmark", "budget", "kernels", "kernels-a",
                        "kernels-b", "tensors", "tensors-a", "tensors-b", "trace", "memory-timeline"})
    if (vm.count(o) && !vm[o].defaulted() && vm[o].as<std::string>().empty())
      throw UsageError(std::string("--") + o + " was given an empty file name");
  return vm;
}

std::vector<std::string> inputs(const boost::program_options::variables_map& vm) {
  return vm.count("input") ? vm["input"].as<std::vector<std::string>>() : std::vector<std::string>{};
}

std::vector<std::string> rules_files(const boost::program_options::variables_map& vm) {
  return vm.count("rules") ? vm["rules"].as<std::vector<std::string>>() : std::vector<std::string>{};
}

}  // namespace snapdiff::cli
