// write_output_file(): all or nothing. A failure of any step (creating the
// temporary file, a short write, the rename) leaves no temporary file behind
// and the target as it was; every writer of a snapshot goes through it.
// Planted symlinks are never written through, modes are those a plain open
// gives, and devices, pipes and sockets are never replaced.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "snapdiff/error.hpp"
#include "snapdiff/input/input.hpp"
#include "test_util.hpp"
#include "util/output_file.hpp"

using namespace snapdiff;
namespace fs = std::filesystem;

namespace {

// A fresh directory, removed with what is in it at the end of the test.
struct ScratchDir {
  fs::path path;
  ScratchDir() {
    std::string tmpl = (fs::temp_directory_path() / "snapdiff-output-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
  // The names in the directory (hidden ones included), sorted.
  std::vector<std::string> names() const {
    std::vector<std::string> n;
    for (const auto& e : fs::directory_iterator(path)) n.push_back(e.path().filename().string());
    std::sort(n.begin(), n.end());
    return n;
  }
};

// Expects OutputError naming `path`.
template <typename F>
void expect_output_error(const std::string& path, F&& write) {
  try {
    write();
    FAIL("no OutputError");
  } catch (const OutputError& e) {
    CHECK(e.path() == path);
    CHECK(std::string(e.what()).rfind("cannot write " + path + ": ", 0) == 0);
  }
}

struct stat lstat_of(const std::string& path) {
  struct stat st {};
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st;
}

mode_t mode_of(const std::string& path) { return lstat_of(path).st_mode & 07777; }

// Sets the umask for the scope.
struct Umask {
  mode_t old;
  explicit Umask(mode_t m) : old(::umask(m)) {}
  ~Umask() { ::umask(old); }
};

}  // namespace

TEST_CASE("write_output_file writes a new file and replaces an old one whole", "[util][output]") {
  ScratchDir d;
  write_output_file(d / "out.txt", "first");
  CHECK(test::read_file(d / "out.txt") == "first");
  write_output_file(d / "out.txt", "second, longer");
  CHECK(test::read_file(d / "out.txt") == "second, longer");
  write_output_file(d / "empty.txt", "");
  CHECK(test::read_file(d / "empty.txt").empty());
  CHECK(d.names() == std::vector<std::string>{"empty.txt", "out.txt"});
}

TEST_CASE("write_output_file: a missing directory is an OutputError, nothing is created", "[util][output]") {
  ScratchDir d;
  expect_output_error(d / "no/such/dir/out.txt", [&] { write_output_file(d / "no/such/dir/out.txt", "x"); });
  CHECK(d.names().empty());
}

TEST_CASE("write_output_file: a directory in the way stays as it was, no temporary file is left", "[util][output]") {
  ScratchDir d;
  fs::create_directory(d / "report");
  write_output_file(d / "report/inside.txt", "kept");
  for (const std::string& target : {d / "report", d / "report/"}) {
    INFO(target);
    expect_output_error(target, [&] { write_output_file(target, "x"); });
    CHECK(d.names() == std::vector<std::string>{"report"});
    std::vector<std::string> inside;
    for (const auto& e : fs::directory_iterator(d.path / "report")) inside.push_back(e.path().filename().string());
    CHECK(inside == std::vector<std::string>{"inside.txt"});
    CHECK(test::read_file(d / "report/inside.txt") == "kept");
  }
}

TEST_CASE("write_output_file: a short write (file size limit) leaves the old file and no temporary", "[util][output]") {
  ScratchDir d;
  write_output_file(d / "out.txt", "the old contents");
  REQUIRE(::chmod((d / "out.txt").c_str(), 0640) == 0);
  // A write past RLIMIT_FSIZE fails with EFBIG once SIGXFSZ is ignored.
  struct rlimit old_limit {};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &old_limit) == 0);
  struct sigaction ignore {}, old_action {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  REQUIRE(::sigaction(SIGXFSZ, &ignore, &old_action) == 0);
  struct rlimit small = old_limit;
  small.rlim_cur = 4096;
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
  bool threw = false;
  try {
    write_output_file(d / "out.txt", std::string(100000, 'x'));
  } catch (const OutputError& e) {
    threw = true;
    CHECK(std::string(e.what()).rfind("cannot write " + (d / "out.txt") + ": ", 0) == 0);
  }
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  ::sigaction(SIGXFSZ, &old_action, nullptr);
  CHECK(threw);
  CHECK(test::read_file(d / "out.txt") == "the old contents");
  CHECK(mode_of(d / "out.txt") == 0640);
  CHECK(d.names() == std::vector<std::string>{"out.txt"});
}

TEST_CASE("write_output_file writes character devices in place", "[util][output]") {
  CHECK_NOTHROW(write_output_file("/dev/null", "discarded"));
  CHECK(fs::is_character_file("/dev/null"));
  // A device that fails the write: the error, and the device stays.
  try {
    write_output_file("/dev/full", "x");
    FAIL("no OutputError");
  } catch (const OutputError& e) {
    CHECK(std::string(e.what()) == "cannot write /dev/full: No space left on device");
  }
  CHECK(fs::is_character_file("/dev/full"));
  // Through a symlink to the device: written in place, the link stays.
  ScratchDir d;
  fs::create_symlink("/dev/null", d / "sink");
  CHECK_NOTHROW(write_output_file(d / "sink", "discarded"));
  CHECK(fs::is_symlink(d / "sink"));
  CHECK(fs::is_character_file("/dev/null"));
  CHECK(d.names() == std::vector<std::string>{"sink"});
}

TEST_CASE("write_output_file never writes through a planted symlink", "[util][output]") {
  ScratchDir d;
  write_output_file(d / "victim", "precious");
  // Every name a temporary file could plausibly have: the old fixed
  // "OUT.tmp", editors' and tools' names, the old ".snapdiff-PID-N.tmp"
  // scheme, and names shaped like mkstemp's.
  std::vector<std::string> planted = {"out.txt.tmp", ".out.txt.tmp", "out.txt~", ".out.txt.swp", ".snapdiff.tmp",
                                      ".snapdiff-XXXXXX.tmp", ".snapdiff-000000.tmp", ".snapdiff-aaaaaa.tmp"};
  for (int n = 0; n < 64; ++n) planted.push_back(".snapdiff-" + std::to_string(::getpid()) + "-" + std::to_string(n) + ".tmp");
  for (const std::string& p : planted) fs::create_symlink(d / "victim", d / p);
  for (int round = 0; round < 20; ++round) write_output_file(d / "out.txt", "report " + std::to_string(round));
  CHECK(test::read_file(d / "out.txt") == "report 19");
  CHECK(test::read_file(d / "victim") == "precious");
  for (const std::string& p : planted) {
    INFO(p);
    CHECK(fs::is_symlink(d / p));
    CHECK(fs::read_symlink(d / p) == fs::path(d / "victim"));
  }
  CHECK(d.names().size() == planted.size() + 2);  // nothing new but out.txt
}

TEST_CASE("write_output_file gives the modes a plain open would", "[util][output]") {
  ScratchDir d;
  {
    Umask u(022);
    write_output_file(d / "new644", "x");
    CHECK(mode_of(d / "new644") == 0644);
  }
  {
    Umask u(077);
    write_output_file(d / "new600", "x");
    CHECK(mode_of(d / "new600") == 0600);
  }
  {
    Umask u(0);
    write_output_file(d / "new666", "x");
    CHECK(mode_of(d / "new666") == 0666);
  }
  // An existing file keeps its mode, whatever the umask.
  Umask u(077);
  write_output_file(d / "kept", "old");
  REQUIRE(::chmod((d / "kept").c_str(), 0664) == 0);
  write_output_file(d / "kept", "new");
  CHECK(mode_of(d / "kept") == 0664);
  CHECK(test::read_file(d / "kept") == "new");
  REQUIRE(::chmod((d / "kept").c_str(), 0751) == 0);
  write_output_file(d / "kept", "newer");
  CHECK(mode_of(d / "kept") == 0751);
}

TEST_CASE("write_output_file refuses a file it could not open for writing", "[util][output]") {
  if (::geteuid() == 0) {
    WARN("skipped: root may write any file");
    return;
  }
  ScratchDir d;
  write_output_file(d / "ro.txt", "keep me");
  REQUIRE(::chmod((d / "ro.txt").c_str(), 0444) == 0);
  expect_output_error(d / "ro.txt", [&] { write_output_file(d / "ro.txt", "x"); });
  CHECK(test::read_file(d / "ro.txt") == "keep me");
  CHECK(d.names() == std::vector<std::string>{"ro.txt"});
}

TEST_CASE("write_output_file follows a symlink target as > would: the named file is replaced, the link stays",
          "[util][output]") {
  ScratchDir d;
  fs::create_directory(d / "real");
  write_output_file(d / "real/report.txt", "old");
  REQUIRE(::chmod((d / "real/report.txt").c_str(), 0640) == 0);
  fs::create_symlink("real/report.txt", d / "link.txt");     // relative
  fs::create_symlink(d / "link.txt", d / "link2.txt");       // a chain
  write_output_file(d / "link.txt", "via the link");
  CHECK(fs::is_symlink(d / "link.txt"));
  CHECK(test::read_file(d / "real/report.txt") == "via the link");
  CHECK(mode_of(d / "real/report.txt") == 0640);
  write_output_file(d / "link2.txt", "via the chain");
  CHECK(fs::is_symlink(d / "link2.txt"));
  CHECK(test::read_file(d / "real/report.txt") == "via the chain");
  // The temporary file was beside the real file, and is gone.
  CHECK(d.names() == std::vector<std::string>{"link.txt", "link2.txt", "real"});
  std::vector<std::string> inside;
  for (const auto& e : fs::directory_iterator(d.path / "real")) inside.push_back(e.path().filename().string());
  CHECK(inside == std::vector<std::string>{"report.txt"});

  // A dangling link: the file it names is created (as > creates it).
  fs::create_symlink("real/new.txt", d / "dangling.txt");
  {
    Umask u(022);
    write_output_file(d / "dangling.txt", "created");
  }
  CHECK(fs::is_symlink(d / "dangling.txt"));
  CHECK(test::read_file(d / "real/new.txt") == "created");
  CHECK(mode_of(d / "real/new.txt") == 0644);
  // ... into a directory that does not exist: an error, nothing created.
  fs::create_symlink("nowhere/x.txt", d / "nowhere.txt");
  expect_output_error(d / "nowhere.txt", [&] { write_output_file(d / "nowhere.txt", "x"); });
  CHECK(!fs::exists(d / "nowhere"));
  // A loop: ELOOP, nothing created.
  fs::create_symlink("loop-b", d / "loop-a");
  fs::create_symlink("loop-a", d / "loop-b");
  expect_output_error(d / "loop-a", [&] { write_output_file(d / "loop-a", "x"); });
  CHECK(d.names() == std::vector<std::string>{"dangling.txt", "link.txt", "link2.txt", "loop-a", "loop-b",
                                              "nowhere.txt", "real"});
  // A symlink to a directory is a directory.
  fs::create_symlink("real", d / "dirlink");
  expect_output_error(d / "dirlink", [&] { write_output_file(d / "dirlink", "x"); });
  CHECK(fs::is_symlink(d / "dirlink"));
}

TEST_CASE("write_output_file: a dangling link in a sticky world-writable directory is followed only as the kernel "
          "would follow it (fs.protected_symlinks)", "[util][output]") {
  if (::geteuid() != 0) {
    WARN("skipped: giving a link to another user needs root");
    return;
  }
  bool guarded = true;
  if (fs::exists("/proc/sys/fs/protected_symlinks"))
    guarded = test::read_file("/proc/sys/fs/protected_symlinks").rfind('0', 0) != 0;
  ScratchDir d;
  fs::create_directory(d / "shared");
  REQUIRE(::chmod((d / "shared").c_str(), 01777) == 0);
  fs::create_directory(d / "target");
  // A link owned by someone else (uid 65534), pointing at a file that does not exist yet.
  fs::create_symlink(d / "target/created.txt", d / "shared/theirs");
  REQUIRE(::lchown((d / "shared/theirs").c_str(), 65534, 65534) == 0);
  // One of our own: always followed.
  fs::create_symlink(d / "target/ours.txt", d / "shared/ours");
  write_output_file(d / "shared/ours", "ours");
  CHECK(test::read_file(d / "target/ours.txt") == "ours");
  if (guarded) {
    expect_output_error(d / "shared/theirs", [&] { write_output_file(d / "shared/theirs", "x"); });
    CHECK(!fs::exists(d / "target/created.txt"));
  } else {
    write_output_file(d / "shared/theirs", "followed");
    CHECK(test::read_file(d / "target/created.txt") == "followed");
  }
  CHECK(fs::is_symlink(d / "shared/theirs"));
}

TEST_CASE("write_output_file writes a named pipe in place, and a pipe nobody reads is an error, not a hang",
          "[util][output]") {
  ScratchDir d;
  const std::string fifo = d / "pipe";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const auto start = std::chrono::steady_clock::now();
  try {
    write_output_file(fifo, "nobody reads");
    FAIL("no OutputError");
  } catch (const OutputError& e) {
    CHECK(std::string(e.what()) == "cannot write " + fifo + ": no process is reading the named pipe");
  }
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  CHECK(fs::is_fifo(fifo));
  // With a reader: everything arrives, in blocking writes past the pipe's buffer.
  const int rfd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  REQUIRE(rfd >= 0);
  const std::string big(1 << 20, 'p');
  std::string got;
  std::thread reader([&] {
    char buf[65536];
    for (;;) {
      const ssize_t n = ::read(rfd, buf, sizeof buf);
      if (n > 0) got.append(buf, size_t(n));
      else if (n == 0 && got.size() == big.size()) break;
      else std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  write_output_file(fifo, big);
  reader.join();
  ::close(rfd);
  CHECK(got == big);
  CHECK(fs::is_fifo(fifo));
  CHECK(d.names() == std::vector<std::string>{"pipe"});
}

TEST_CASE("write_output_file refuses a socket and leaves it", "[util][output]") {
  ScratchDir d;
  const std::string path = d / "sock";
  const int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
  REQUIRE(s >= 0);
  struct sockaddr_un a {};
  a.sun_family = AF_UNIX;
  REQUIRE(path.size() < sizeof a.sun_path);
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  REQUIRE(::bind(s, reinterpret_cast<struct sockaddr*>(&a), sizeof a) == 0);
  expect_output_error(path, [&] { write_output_file(path, "x"); });
  ::close(s);
  CHECK(fs::is_socket(path));
  CHECK(d.names() == std::vector<std::string>{"sock"});
}

TEST_CASE("write_output_file writes /dev/fd/N to the descriptor itself, appending, never renaming", "[util][output]") {
  ScratchDir d;
  write_output_file(d / "log", "first\n");
  const struct stat before = lstat_of(d / "log");
  const int fd = ::open((d / "log").c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  REQUIRE(fd >= 0);
  write_output_file("/dev/fd/" + std::to_string(fd), "second\n");
  write_output_file("/proc/self/fd/" + std::to_string(fd), "third\n");
  ::close(fd);
  CHECK(test::read_file(d / "log") == "first\nsecond\nthird\n");
  CHECK(lstat_of(d / "log").st_ino == before.st_ino);
  CHECK(d.names() == std::vector<std::string>{"log"});
  // A descriptor that is not open: an error, nothing created.
  expect_output_error("/dev/fd/999", [&] { write_output_file("/dev/fd/999", "x"); });
  // The links themselves stay links.
  CHECK(fs::is_symlink("/dev/stdout"));
  CHECK(fs::is_symlink("/dev/stderr"));
}

TEST_CASE("write_output_file: a file as a directory and an empty name are errors", "[util][output]") {
  ScratchDir d;
  write_output_file(d / "file", "kept");
  expect_output_error(d / "file/out.txt", [&] { write_output_file(d / "file/out.txt", "x"); });
  expect_output_error(d / "file/", [&] { write_output_file(d / "file/", "x"); });
  expect_output_error("", [&] { write_output_file("", "x"); });
  CHECK(test::read_file(d / "file") == "kept");
  CHECK(d.names() == std::vector<std::string>{"file"});
}

TEST_CASE("snapshot writers throw OutputError and leave nothing behind", "[input][output]") {
  ScratchDir d;
  Trace t = load_trace(test::fixture("tiny_p4.pickle"));
  fs::create_directory(d / "dir.snap");
  fs::create_directory(d / "dir.pickle");
  expect_output_error(d / "dir.snap", [&] { write_snap_file(t, d / "dir.snap", true); });
  expect_output_error(d / "dir.snap", [&] { write_snap_file(t, d / "dir.snap", false); });
  expect_output_error(d / "dir.pickle", [&] { write_torch_pickle_file(t, d / "dir.pickle", false); });
  expect_output_error(d / "dir.pickle", [&] { write_torch_pickle_file(t, d / "dir.pickle", true); });
  expect_output_error(d / "missing/x.pickle", [&] { write_torch_pickle_file(t, d / "missing/x.pickle", true); });
  CHECK(d.names() == std::vector<std::string>{"dir.pickle", "dir.snap"});
  write_snap_file(t, d / "t.snap", true);
  write_torch_pickle_file(t, d / "t.pickle", false);
  CHECK(d.names() == std::vector<std::string>{"dir.pickle", "dir.snap", "t.pickle", "t.snap"});
}
