// `snapdiff view FILE...`: the HTML explorer of a report (one input), a diff
// (two) or many ranks (a folder), written to a new temporary folder (or -o),
// its path printed, and opened with $BROWSER when that is set.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cctype>
#include <cstring>
#include <boost/program_options.hpp>
#include <sstream>

#include "cli/cli_util.hpp"
#include "cli/commands.hpp"
#include "snapdiff/error.hpp"

extern char** environ;

namespace snapdiff::cli {

namespace {

const char* kViewHelp =
    "usage: snapdiff view FILE [B] [options] [-o PAGE.html] [--no-open]\n"
    "  Writes the HTML explorer of FILE (of A against B with two inputs, of\n"
    "  every rank with a folder of ranks) to a new folder under $TMPDIR (or\n"
    "  to PAGE.html with -o), prints its path, and opens it with $BROWSER\n"
    "  when that is set (\"firefox\", \"chromium --new-window\"; %s stands\n"
    "  for the page when given). --no-open only writes and prints.\n"
    "  Every other option is report's or diff's; --format is always html.\n";

std::string base_of(const std::string& p) {
  std::string s = p;
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  const size_t slash = s.rfind('/');
  if (slash != std::string::npos) s = s.substr(slash + 1);
  for (const char* ext : {".gz", ".zst", ".xz", ".pickle", ".pkl", ".json", ".snap"})
    if (s.size() > std::strlen(ext) && s.compare(s.size() - std::strlen(ext), std::string::npos, ext) == 0)
      s.resize(s.size() - std::strlen(ext));
  std::string out;
  for (char c : s) out.push_back((std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') ? c : '_');
  return out.empty() || out[0] == '.' ? "snapdiff" + out : out;
}

// $BROWSER as argv: words split on spaces; "%s" replaced by the page, else
// the page appended. Several commands separated by ':' (as Python's
// webbrowser reads it): the first.
std::vector<std::string> browser_argv(const std::string& browser, const std::string& page) {
  const std::string first = browser.substr(0, browser.find(':'));
  std::vector<std::string> argv;
  std::istringstream in(first);
  bool placed = false;
  for (std::string w; in >> w;) {
    const size_t p = w.find("%s");
    if (p != std::string::npos) w.replace(p, 2, page), placed = true;
    argv.push_back(w);
  }
  if (!argv.empty() && !placed) argv.push_back(page);
  return argv;
}

}  // namespace

int cmd_view(const std::vector<std::string>& args, const std::function<int(const std::vector<std::string>&)>& dispatch) {
  std::vector<std::string> rest;
  std::string out;
  bool open = true;
  std::vector<std::string> inputs;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::ostringstream h;
      h << kViewHelp << "\n" << report_options();
      write_stdout(h.str());
      return kExitOk;
    }
    if (a == "--no-open") {
      open = false;
      continue;
    }
    if (a == "-o" || a == "--output") {
      if (i + 1 >= args.size()) throw UsageError("view: " + a + " needs a file name");
      out = args[++i];
      continue;
    }
    if (a.rfind("--output=", 0) == 0) {
      out = a.substr(9);
      continue;
    }
    if (a == "-f" || a == "--format" || a.rfind("--format=", 0) == 0 || (a.size() > 2 && a.rfind("-f", 0) == 0))
      throw UsageError("view always writes HTML: leave out " + a + " (snapdiff report --format ... for other formats)");
    if (!a.empty() && a[0] != '-') inputs.push_back(a);
    rest.push_back(a);
  }
  if (inputs.empty()) throw UsageError("view needs a snapshot (snapdiff view FILE [B])");
  std::string made;  // the folder made here: removed again when nothing was written into it
  if (out.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/snapdiff-view-XXXXXX";
    std::vector<char> buf(dir.begin(), dir.end());
    buf.push_back('\0');
    if (!mkdtemp(buf.data()))
      throw OutputError(dir, "cannot make a folder in " + std::string(tmp && *tmp ? tmp : "/tmp") + ": " + std::strerror(errno));
    made = buf.data();
    out = made + "/" + base_of(inputs[0]) + (inputs.size() >= 2 ? "-vs-" + base_of(inputs[1]) : "") + ".html";
  }
  rest.push_back("--format");
  rest.push_back("html");
  rest.push_back("-o");
  rest.push_back(out);
  int rc = kExitInternal;
  try {
    rc = dispatch(rest);
  } catch (...) {
    if (!made.empty()) rmdir(made.c_str());
    throw;
  }
  if (rc != kExitOk && rc != kExitCheckFailed) {
    if (!made.empty()) rmdir(made.c_str());
    return rc;
  }
  write_stdout(out + "\n");
  const char* browser = std::getenv("BROWSER");
  if (open && browser && *browser) {
    std::vector<std::string> av = browser_argv(browser, out);
    if (av.empty()) return rc;
    std::vector<char*> argv;
    for (std::string& s : av) argv.push_back(s.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    const int e = posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ);
    if (e != 0) throw UsageError("cannot start $BROWSER (" + av[0] + "): " + std::strerror(e) + "; the page is " + out);
  }
  return rc;
}

}  // namespace snapdiff::cli
