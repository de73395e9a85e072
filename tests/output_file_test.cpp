// write_output_file(): all or nothing. A failure of any step (creating the
// temporary file, a short write, the rename) leaves no temporary file behind
// and the target as it was; every writer of a snapshot goes through it.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
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
  CHECK(d.names() == std::vector<std::string>{"out.txt"});
}

TEST_CASE("write_output_file writes character devices in place", "[util][output]") {
  CHECK_NOTHROW(write_output_file("/dev/null", "discarded"));
  CHECK(fs::is_character_file("/dev/null"));
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
