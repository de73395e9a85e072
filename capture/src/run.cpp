// snapcapture run / snapcapture convert: runs an unmodified program with
// libsnapcapture_inject.so loaded through CUDA_INJECTION64_PATH, and turns
// the raw logs it left (capture/inject/log_format.hpp) into a .snap.
// docs/capture.md, "The injection library", is the user's view.
#include "run.hpp"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "log_format.hpp"
#include "log_reader.hpp"
#include "snapdiff/error.hpp"
#include "snapdiff/input/input.hpp"
#include "util/terminal_text.hpp"

namespace snapcapture {

namespace {

volatile sig_atomic_t g_child = 0;

// A signal sent to snapcapture (kill, timeout, a job scheduler) goes on to
// the command. One the terminal sent (Ctrl-C: si_code SI_KERNEL) reached the
// whole foreground process group, the command included, already: passing it
// on would deliver it twice.
void forward_signal(int sig, siginfo_t* info, void*) {
  if (info && info->si_code == SI_KERNEL) return;
  if (g_child > 0) ::kill(pid_t(g_child), sig);
}

// One line on stderr, through the project's one escaper: file names and
// commands in it are the user's bytes (docs/reliability.md).
void say(const std::string& line) {
  const std::string s = snapdiff::escape_for_terminal(line) + "\n";
  if (::write(2, s.data(), s.size()) < 0) {
  }
}

[[noreturn]] void usage_error(const std::string& cmd, const std::string& what) {
  say("snapcapture " + cmd + ": " + what + " (snapcapture " + cmd + " --help)");
  std::exit(2);
}

const char* kRunHelp =
    "usage: snapcapture run [-o OUT.snap] [--interval-ms N] [--keep-logs DIR] [--inject LIB] -- COMMAND ARGS...\n"
    "\n"
    "Runs COMMAND with libsnapcapture_inject.so loaded (CUDA_INJECTION64_PATH): it records every kernel\n"
    "launch, every driver device-memory call and cuMemGetInfo samples, one log per process; when COMMAND\n"
    "has exited the logs become one .snap recording. Exits with COMMAND's exit status (128 + the signal\n"
    "when it was killed).\n"
    "\n"
    "  -o OUT.snap         the recording (default run.kernels.snap)\n"
    "  --interval-ms N     cuMemGetInfo sample interval in milliseconds (default 200; 0: at start and exit only)\n"
    "  --keep-logs DIR     write the raw logs into DIR and keep them (default: a private temporary folder, removed)\n"
    "  --inject LIB        the injection library (default: $SNAPCAPTURE_INJECT, else libsnapcapture_inject.so\n"
    "                      next to the snapcapture executable)\n";

const char* kConvertHelp =
    "usage: snapcapture convert LOGDIR_OR_FILES... -o OUT.snap\n"
    "\n"
    "Turns raw logs of libsnapcapture_inject.so (<pid>.sclog files, or folders of them) into one .snap.\n";

std::string self_dir() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string p(buf, size_t(n));
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? "." : p.substr(0, slash);
}

std::string absolute(const std::string& p) {
  char buf[PATH_MAX];
  if (::realpath(p.c_str(), buf)) return buf;
  return p;
}

// Folder and everything in it (one level: the logs).
void remove_folder(const std::string& dir) {
  try {
    for (const std::string& f : log::logs_in_dir(dir)) ::unlink(f.c_str());
  } catch (const snapdiff::InputError&) {
  }
  ::rmdir(dir.c_str());
}

// Reads the logs and writes OUT; an exit code (0, 2 output, 3 input).
int convert_logs(const std::vector<std::string>& inputs, const std::string& out, const std::string& cmd,
                 const std::vector<std::pair<std::string, std::string>>& metadata, bool say_if_empty) {
  try {
    // Bounded like snapdiff's readers: 75% of physical memory.
    log::ReadOptions opts;
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) opts.max_memory_bytes = uint64_t(pages) * uint64_t(page) / 4 * 3;
    snapdiff::Trace t = log::read_logs(inputs, opts);
    for (const auto& kv : metadata) t.metadata.push_back(kv);
    const bool empty = t.kernels.empty() && t.driver_memory.empty() && t.device_memory.empty();
    // The JSON form (gzip'd): kernel recordings are small, and scripts read
    // them with Python's json (docs/capture.md).
    snapdiff::write_snap_file(t, out, snapdiff::SnapEncoding::JsonGzip);
    if (empty && say_if_empty)
      say("snapcapture " + cmd + ": no CUDA activity was recorded (the program never used CUDA): " + out +
          " holds no records");
    return 0;
  } catch (const snapdiff::InputError& e) {
    say("snapcapture: error: " + e.describe());
    return 3;
  } catch (const snapdiff::OutputError& e) {
    say(std::string("snapcapture: error: ") + e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    say("snapcapture: error: out of memory while reading the logs");
    return 4;
  }
}

bool parse_uint(const std::string& s, uint64_t max, uint64_t* out) {
  if (s.empty() || s.size() > 12) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + uint64_t(c - '0');
  }
  if (v > max) return false;
  *out = v;
  return true;
}

}  // namespace

int run_main(int argc, char** argv) {
  std::string out = "run.kernels.snap", keep, inject;
  uint64_t interval_ms = 200;
  int i = 0;
  auto value = [&](const std::string& opt) -> std::string {
    if (i + 1 >= argc) usage_error("run", opt + " needs a value");
    return argv[++i];
  };
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a == "-h" || a == "--help") {
      std::fputs(kRunHelp, stdout);
      return 0;
    } else if (a == "-o" || a == "--output") {
      out = value(a);
    } else if (a == "--interval-ms") {
      const std::string v = value(a);
      if (!parse_uint(v, 86400000, &interval_ms)) usage_error("run", "--interval-ms wants milliseconds, not '" + v + "'");
    } else if (a == "--keep-logs") {
      keep = value(a);
    } else if (a == "--inject") {
      inject = value(a);
    } else if (!a.empty() && a[0] == '-') {
      usage_error("run", "unknown option " + a);
    } else {
      break;  // the command starts here
    }
  }
  if (i >= argc) usage_error("run", "no command to run (snapcapture run [options] -- COMMAND ARGS...)");
  if (out.empty()) usage_error("run", "-o needs a file name");
  std::vector<char*> cmd(argv + i, argv + argc);
  cmd.push_back(nullptr);
  std::string cmdline;
  for (int k = i; k < argc; ++k) {
    if (!cmdline.empty()) cmdline += ' ';
    cmdline += argv[k];
  }

  if (inject.empty()) {
    const char* env = std::getenv("SNAPCAPTURE_INJECT");
    inject = env && *env ? env : self_dir() + "/libsnapcapture_inject.so";
  }
  if (::access(inject.c_str(), R_OK) != 0)
    usage_error("run", "the injection library " + inject + " cannot be read: " + std::strerror(errno));
  inject = absolute(inject);

  std::string dir;
  if (!keep.empty()) {
    if (::mkdir(keep.c_str(), 0700) != 0 && errno != EEXIST)
      usage_error("run", "cannot make the folder " + keep + ": " + std::strerror(errno));
    dir = absolute(keep);
  } else {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : P_tmpdir) + "/snapcapture-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (!::mkdtemp(buf.data())) usage_error("run", "cannot make a temporary folder " + tmpl + ": " + std::strerror(errno));
    dir = buf.data();
  }
  ::setenv("SNAPCAPTURE_LOG_DIR", dir.c_str(), 1);
  ::setenv("SNAPCAPTURE_INTERVAL_MS", std::to_string(interval_ms).c_str(), 1);
  ::setenv("CUDA_INJECTION64_PATH", inject.c_str(), 1);
  // Preloaded as well, so that a profiler's cuptiSubscribe reaches the
  // library first and it can step aside (docs/capture.md, "Safety"); the
  // driver's dlopen of the same path then finds it already loaded.
  {
    const char* pre = std::getenv("LD_PRELOAD");
    std::string v = inject;
    if (pre && *pre) v += std::string(":") + pre;
    ::setenv("LD_PRELOAD", v.c_str(), 1);
  }

  struct sigaction sa{};
  sa.sa_sigaction = forward_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART | SA_SIGINFO;
  struct sigaction old_int{}, old_term{};
  ::sigaction(SIGINT, &sa, &old_int);
  ::sigaction(SIGTERM, &sa, &old_term);

  std::fflush(nullptr);
  const pid_t child = ::fork();
  if (child < 0) {
    say(std::string("snapcapture run: cannot start a process: ") + std::strerror(errno));
    if (keep.empty()) remove_folder(dir);
    return 2;
  }
  if (child == 0) {
    ::sigaction(SIGINT, &old_int, nullptr);
    ::sigaction(SIGTERM, &old_term, nullptr);
    ::execvp(cmd[0], cmd.data());
    const int err = errno;
    say(std::string("snapcapture run: cannot run ") + cmd[0] + ": " + std::strerror(err));
    ::_exit(err == ENOENT ? 127 : 126);
  }
  g_child = child;
  int status = 0;
  while (::waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) {
      status = 0;
      break;
    }
  }
  g_child = 0;
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;

  const std::vector<std::pair<std::string, std::string>> meta = {
      {"capture.command", cmdline},
      {"capture.exit_status", std::to_string(code)},
      {"capture.interval_ms", std::to_string(interval_ms)},
  };
  const int rc = convert_logs({dir}, out, "run", meta, true);
  // A bad log is kept (the error names it); otherwise the folder goes.
  if (keep.empty() && rc != 3) remove_folder(dir);
  return rc != 0 ? rc : code;
}

int convert_main(int argc, char** argv) {
  std::string out;
  std::vector<std::string> inputs;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kConvertHelp, stdout);
      return 0;
    } else if (a == "-o" || a == "--output") {
      if (i + 1 >= argc) usage_error("convert", "-o needs a value");
      out = argv[++i];
    } else if (a.size() > 1 && a[0] == '-') {
      usage_error("convert", "unknown option " + a);
    } else {
      inputs.push_back(a);
    }
  }
  if (inputs.empty()) usage_error("convert", "no logs given");
  if (out.empty()) usage_error("convert", "-o OUT.snap is required");
  return convert_logs(inputs, out, "convert", {}, true);
}

}  // namespace snapcapture
