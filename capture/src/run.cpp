// snapcapture run / snapcapture convert: runs an unmodified program with
// libsnapcapture_inject.so loaded through CUDA_INJECTION64_PATH, and turns
// the raw logs it left (capture/inject/log_format.hpp) into a .snap.
// docs/capture.md, "The injection library", is the user's view.
#include "run.hpp"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
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
#include "snapdiff/model/budget.hpp"
#include "util/terminal_text.hpp"

namespace snapcapture {

namespace {

// The signals a shell delivers to a foreground job, or that kill(1), a
// timeout or a job scheduler send: each goes on to the command, so that
// snapcapture never dies of one while the command runs on. SIGKILL and
// SIGSTOP cannot be caught; for SIGKILL the command gets SIGTERM
// (PR_SET_PDEATHSIG) rather than running on orphaned.
constexpr int kForwarded[] = {SIGHUP,  SIGINT,  SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM,
                              SIGWINCH, SIGPIPE, SIGCONT, SIGTSTP, SIGTTIN, SIGTTOU};
constexpr size_t kNumForwarded = sizeof kForwarded / sizeof kForwarded[0];

volatile sig_atomic_t g_child = 0;    // the command while it runs
volatile sig_atomic_t g_pending = 0;  // a signal that ends snapcapture, come after the command ended

bool stops(int sig) { return sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU; }
bool only_informs(int sig) { return sig == SIGWINCH || sig == SIGCONT || stops(sig); }

// While the command runs, a signal sent to snapcapture goes on to it. One the
// terminal sent (Ctrl-C, Ctrl-Backslash, a hangup, a resize: si_code SI_KERNEL)
// reached the whole foreground process group, the command included,
// already: passing it on would deliver it twice. A stop (SIGTSTP, SIGTTIN,
// SIGTTOU) stops snapcapture too, as the job the shell sees; SIGCONT goes on.
// Once the command has ended, a signal that would end snapcapture waits
// until the recording is written and the log folder removed.
void on_signal(int sig, siginfo_t* info, void*) {
  const int saved_errno = errno;
  const pid_t child = pid_t(g_child);
  if (child > 0) {
    if (!(info && info->si_code == SI_KERNEL)) ::kill(child, sig);
    if (stops(sig)) ::kill(::getpid(), SIGSTOP);
  } else if (!only_informs(sig)) {
    g_pending = sig;
  }
  errno = saved_errno;
}

// Installs on_signal for every forwarded signal that was not ignored when
// snapcapture started (nohup's SIGHUP stays ignored, for the command too);
// `old` gets what was there.
void install_forwarding(struct sigaction (&old)[kNumForwarded], bool (&installed)[kNumForwarded]) {
  struct sigaction sa{};
  sa.sa_sigaction = on_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : kForwarded) sigaddset(&sa.sa_mask, sig);  // one handler at a time
  sa.sa_flags = SA_RESTART | SA_SIGINFO;
  for (size_t k = 0; k < kNumForwarded; ++k) {
    installed[k] = false;
    if (::sigaction(kForwarded[k], nullptr, &old[k]) != 0) continue;
    if (old[k].sa_handler == SIG_IGN && !(old[k].sa_flags & SA_SIGINFO)) continue;
    installed[k] = ::sigaction(kForwarded[k], &sa, nullptr) == 0;
  }
}

void restore_signals(const struct sigaction (&old)[kNumForwarded], const bool (&installed)[kNumForwarded]) {
  for (size_t k = 0; k < kNumForwarded; ++k)
    if (installed[k]) ::sigaction(kForwarded[k], &old[k], nullptr);
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
    "usage: snapcapture run [-o OUT.snap] [--interval-ms N] [--keep-logs DIR] [--inject LIB] [--max-memory SIZE]\n"
    "                       [--max-input-bytes SIZE] -- COMMAND ARGS...\n"
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
    "                      next to the snapcapture executable)\n"
    "  --max-memory SIZE   refuse logs that need more memory than this (a size, 'auto' = 75% of RAM, or 'none')\n"
    "  --max-input-bytes SIZE  refuse logs of more bytes than this, all together (default 16GiB)\n"
    "\n"
    "Signals sent to snapcapture while COMMAND runs (HUP, INT, QUIT, TERM, USR1, USR2, ALRM, WINCH, PIPE,\n"
    "CONT; TSTP, TTIN and TTOU stop snapcapture too) go on to COMMAND; the recording is written and the\n"
    "temporary log folder removed however COMMAND ends.\n";

const char* kConvertHelp =
    "usage: snapcapture convert [--max-memory SIZE] [--max-input-bytes SIZE] LOGDIR_OR_FILES... -o OUT.snap\n"
    "\n"
    "Turns raw logs of libsnapcapture_inject.so (<pid>.sclog files, or folders of them) into one .snap.\n"
    "A log is a regular file (a FIFO or a device is refused); kernel names are demangled up to 16 KiB of\n"
    "text (a longer one keeps its mangled name).\n"
    "\n"
    "  --max-memory SIZE       refuse logs that need more memory than this (a size, 'auto' = 75% of RAM, or 'none')\n"
    "  --max-input-bytes SIZE  refuse logs of more bytes than this, all together (default 16GiB)\n";

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

// 75% of physical memory: snapdiff's --max-memory auto.
uint64_t default_max_memory() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) / 4 * 3 : 0;
}

// The bounds on reading the logs: snapdiff's --max-memory and
// --max-input-bytes, with its defaults (docs/reliability.md, "Bounds").
struct Limits {
  uint64_t max_memory = default_max_memory();
  uint64_t max_input_bytes = uint64_t(16) << 30;
};

// --max-memory / --max-input-bytes VALUE of `cmd`; false when the option is another.
bool limit_option(const std::string& cmd, const std::string& opt, const std::string& v, Limits& l) {
  if (opt == "--max-memory") {
    if (v == "auto") {
      l.max_memory = default_max_memory();
    } else if (v == "none" || v == "0") {
      l.max_memory = 0;
    } else {
      const auto b = snapdiff::parse_size(v);
      if (!b || *b <= 0) usage_error(cmd, "--max-memory: expected a size such as 8GiB, 'auto' or 'none', got '" + v + "'");
      l.max_memory = uint64_t(*b);
    }
    return true;
  }
  if (opt == "--max-input-bytes") {
    const auto b = snapdiff::parse_size(v);
    if (!b || *b <= 0) usage_error(cmd, "--max-input-bytes: expected a size of at least 1 byte, got '" + v + "'");
    l.max_input_bytes = uint64_t(*b);
    return true;
  }
  return false;
}

// Reads the logs and writes OUT; an exit code (0, 2 output, 3 input, 4 memory).
int convert_logs(const std::vector<std::string>& inputs, const std::string& out, const std::string& cmd,
                 const std::vector<std::pair<std::string, std::string>>& metadata, bool say_if_empty,
                 const Limits& limits) {
  try {
    log::ReadOptions opts;
    opts.max_memory_bytes = limits.max_memory;
    opts.max_input_bytes = limits.max_input_bytes;
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
  } catch (const std::exception& e) {
    say(std::string("snapcapture: error: ") + e.what());
    return 2;
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
  Limits limits;
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
    } else if (a == "--max-memory" || a == "--max-input-bytes") {
      limit_option("run", a, value(a), limits);
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

  // The forwarded signals are blocked from before the fork until the
  // command's pid is known: none arrives while nobody would pass it on.
  struct sigaction old_actions[kNumForwarded];
  bool installed[kNumForwarded];
  sigset_t forwarded, old_mask;
  sigemptyset(&forwarded);
  for (int sig : kForwarded) sigaddset(&forwarded, sig);
  ::sigprocmask(SIG_BLOCK, &forwarded, &old_mask);
  g_pending = 0;
  install_forwarding(old_actions, installed);

  std::fflush(nullptr);
  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  if (child < 0) {
    const int err = errno;
    restore_signals(old_actions, installed);
    ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    say(std::string("snapcapture run: cannot start a process: ") + std::strerror(err));
    if (keep.empty()) remove_folder(dir);
    return 2;
  }
  if (child == 0) {
    // The command gets the dispositions and the mask snapcapture was given,
    // and SIGTERM should snapcapture die without passing a signal on
    // (SIGKILL): it never runs on orphaned.
    restore_signals(old_actions, installed);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(128 + SIGTERM);
    ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    ::execvp(cmd[0], cmd.data());
    const int err = errno;
    say(std::string("snapcapture run: cannot run ") + cmd[0] + ": " + std::strerror(err));
    ::_exit(err == ENOENT ? 127 : 126);
  }
  g_child = child;
  ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) {
      status = 0;
      break;
    }
  }
  g_child = 0;
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;

  const std::vector<std::pair<std::string, std::string>> meta = {
      {"capture.command", cmdline},
      {"capture.exit_status", std::to_string(code)},
      {"capture.interval_ms", std::to_string(interval_ms)},
  };
  const int rc = convert_logs({dir}, out, "run", meta, true, limits);
  // A bad log is kept (the error names it); otherwise the folder goes.
  if (keep.empty() && rc != 3) remove_folder(dir);
  restore_signals(old_actions, installed);
  // A signal that came once the command had ended (a second Ctrl-C, a
  // timeout's SIGTERM) ends snapcapture now, as it would have then.
  if (const int sig = g_pending) {
    ::signal(sig, SIG_DFL);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    ::sigprocmask(SIG_UNBLOCK, &one, nullptr);
    ::raise(sig);
  }
  return rc != 0 ? rc : code;
}

int convert_main(int argc, char** argv) {
  std::string out;
  std::vector<std::string> inputs;
  Limits limits;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kConvertHelp, stdout);
      return 0;
    } else if (a == "-o" || a == "--output") {
      if (i + 1 >= argc) usage_error("convert", "-o needs a value");
      out = argv[++i];
    } else if (a == "--max-memory" || a == "--max-input-bytes") {
      if (i + 1 >= argc) usage_error("convert", a + " needs a value");
      limit_option("convert", a, argv[++i], limits);
    } else if (a.size() > 1 && a[0] == '-') {
      usage_error("convert", "unknown option " + a);
    } else {
      inputs.push_back(a);
    }
  }
  if (inputs.empty()) usage_error("convert", "no logs given");
  if (out.empty()) usage_error("convert", "-o OUT.snap is required");
  return convert_logs(inputs, out, "convert", {}, true, limits);
}

}  // namespace snapcapture
