// Finding the per-rank files of a run (snapdiff/input/ranks.hpp): the rank,
// step and OOM mark each launcher's names give, and the walk over folders,
// patterns and files named. The trees are made, with empty files, under the
// test's working directory (the build tree) and removed after.
#include <catch2/catch.hpp>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "snapdiff/error.hpp"
#include "snapdiff/input/ranks.hpp"

namespace fs = std::filesystem;
using snapdiff::find_rank_files;
using snapdiff::InputError;
using snapdiff::rank_from_name;
using snapdiff::RankFileSet;
using snapdiff::RankInputs;

namespace {

// A folder of empty files under the working directory, removed at the end.
struct Tree {
  fs::path root;
  explicit Tree(const std::string& name) : root(fs::path("ranks_files_test") / name) {
    fs::remove_all(root);
    fs::create_directories(root);
  }
  ~Tree() {
    std::error_code ec;
    fs::remove_all(root, ec);
    fs::remove(root.parent_path(), ec);  // only when empty: other cases may run beside
  }
  Tree(const Tree&) = delete;
  Tree& operator=(const Tree&) = delete;
  std::string add(const std::string& rel) const {
    const fs::path p = root / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << "";
    return p.string();
  }
  std::string path(const std::string& rel = "") const { return rel.empty() ? root.string() : (root / rel).string(); }
};

std::vector<std::string> paths(const std::vector<snapdiff::RankFile>& files) {
  std::vector<std::string> out;
  for (const auto& f : files) out.push_back(f.path);
  return out;
}
std::vector<int> ranks(const RankFileSet& s) {
  std::vector<int> out;
  for (const auto& f : s.files) out.push_back(f.name.rank);
  return out;
}

// The message of the InputError `f` throws, with its file ("" when none thrown).
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.describe();
  }
  return "";
}

}  // namespace

TEST_CASE("rank_from_name reads the rank, step and OOM mark of each launcher's layout", "[input]") {
  struct Case {
    const char* path;
    int rank;
    int64_t step;
    bool oom;
    const char* layout;
  };
  const Case cases[] = {
      // torchtitan, older and current, with their OOM folders
      {"outputs/memory_snapshot/iteration_20/rank3_memory_snapshot.pickle", 3, 20, false, "torchtitan"},
      {"outputs/memory_snapshot/iteration_19_exit/rank3_memory_snapshot.pickle", 3, 19, true, "torchtitan"},
      {"profiling/memory_snapshot/step_000000000020/000007_step_20.pickle", 7, 20, false, "torchtitan"},
      {"profiling/memory_snapshot/step_000000000020_exit/000007_step_20.pickle.gz", 7, 20, true, "torchtitan"},
      {"000123_step_4.pickle", 123, 4, false, "torchtitan"},
      // Megatron-LM and Megatron-Bridge OOM dumps
      {"oom_rank-5_snapshot.pickle", 5, -1, true, "megatron"},
      {"logs/mem_oom_rank_5.pickle", 5, -1, true, "megatron"},
      {"mem_oom_rank-12.pickle", 12, -1, true, "megatron"},
      {"oom_rank-3_out/snapshot.pickle", 3, -1, true, "megatron"},  // a snapshot path with a folder
      // Composer (the batch is the step) and others
      {"rank2.15.pt.trace.memory_snapshot.pickle", 2, 15, false, "rank"},
      {"oom_rank4.pickle", 4, -1, true, "rank"},
      {"snapshot_gpt_rank6.pickle.gz", 6, -1, false, "rank"},
      {"snapshot_step_20_rank1.pickle", 1, 20, false, "rank"},
      // users
      {"rank-0_snapshot.pickle", 0, -1, false, "rank"},
      {"rank_3.pickle", 3, -1, false, "rank"},
      {"RANK3.PICKLE", 3, -1, false, "rank"},
      {"run_r3.pickle", 3, -1, false, "rank"},
      {"r11.snap", 11, -1, false, "rank"},
      {"job/rank1/memory.pickle", 1, -1, false, "rank"},
      {"job/rank_1/iter_8/memory_oom.pickle", 1, 8, true, "rank"},
      // names that tell no rank
      {"mem_0.pickle", -1, -1, false, ""},  // alone: Megatron's {base}_{rank} needs the folder
      {"model_v2.pickle", -1, -1, false, ""},
      {"bs32.pickle", -1, -1, false, ""},
      {"gpu3.pickle", -1, -1, false, ""},  // a local device index, repeated on every node
      {"device3.pickle", -1, -1, false, ""},
      {"cuda3.pickle", -1, -1, false, ""},
      {"frank3.pickle", -1, -1, false, ""},
      {"ranks_8.pickle", -1, -1, false, ""},
      {"rank1234567.pickle", -1, -1, false, ""},  // more digits than any rank (a time, a size)
      {"snapshot_20240105.pickle", -1, -1, false, ""},
      {"arr3.pickle", -1, -1, false, ""},
      {"zoom_room.pickle", -1, -1, false, ""},
      {"step_3/snapshot.pickle", -1, 3, false, ""},
  };
  for (const Case& c : cases) {
    INFO(c.path);
    const snapdiff::RankName n = rank_from_name(c.path);
    CHECK(n.rank == c.rank);
    CHECK(n.step == c.step);
    CHECK(n.oom == c.oom);
    CHECK(n.layout == c.layout);
  }
}

TEST_CASE("find_rank_files keeps torchtitan's latest step of each rank, its OOM dump first", "[input]") {
  Tree t("titan");
  for (int r = 0; r < 4; ++r) {
    t.add("step_000000000002/00000" + std::to_string(r) + "_step_2.pickle.gz");
    t.add("step_000000000004/00000" + std::to_string(r) + "_step_4.pickle.gz");
  }
  const std::string oom = t.add("step_000000000004_exit/000001_step_4.pickle.gz");
  const std::string log = t.add("train.log");
  const std::string html = t.add("step_000000000004/000000_step_4.html");
  const RankFileSet s = find_rank_files({t.path()}, RankInputs::Snapshots);
  CHECK(ranks(s) == std::vector<int>{0, 1, 2, 3});
  REQUIRE(s.files.size() == 4);
  CHECK(s.files[0].path == t.path("step_000000000004/000000_step_4.pickle.gz"));
  CHECK(s.files[1].path == oom);
  CHECK(s.files[1].name.oom);
  CHECK(s.files[3].path == t.path("step_000000000004/000003_step_4.pickle.gz"));
  for (const auto& f : s.files) CHECK(f.name.step == 4);
  CHECK(s.superseded.size() == 5);  // four of step 2, and rank 1's regular dump of step 4
  CHECK(paths(s.superseded).back() == t.path("step_000000000004/000001_step_4.pickle.gz"));
  CHECK(s.skipped == std::vector<std::string>{html, log});
}

TEST_CASE("find_rank_files reads the older torchtitan layout and its OOM folder", "[input]") {
  Tree t("titan_old");
  t.add("memory_snapshot/iteration_10/rank0_memory_snapshot.pickle");
  t.add("memory_snapshot/iteration_10/rank1_memory_snapshot.pickle");
  t.add("memory_snapshot/iteration_20/rank0_memory_snapshot.pickle");
  t.add("memory_snapshot/iteration_20/rank1_memory_snapshot.pickle");
  const std::string oom = t.add("memory_snapshot/iteration_20_exit/rank1_memory_snapshot.pickle");
  const RankFileSet s = find_rank_files({t.path("memory_snapshot")}, RankInputs::Snapshots);
  REQUIRE(ranks(s) == std::vector<int>{0, 1});
  CHECK(s.files[0].path == t.path("memory_snapshot/iteration_20/rank0_memory_snapshot.pickle"));
  CHECK(s.files[1].path == oom);
  CHECK(s.superseded.size() == 3);
}

TEST_CASE("find_rank_files tells Megatron's {base}_{rank} only when the folder's files share the base",
          "[input]") {
  Tree t("megatron");
  t.add("run/mem_0.pickle");
  t.add("run/mem_1.pickle");
  t.add("run/mem_2.pickle");
  const std::string oom = t.add("run/mem_oom_rank_1.pickle");
  const std::string lone = t.add("lone/model_2.pickle");
  const std::string v2 = t.add("v/model_v2.pickle");
  const std::string mixed_a = t.add("mixed/mem_0.pickle");
  const std::string mixed_b = t.add("mixed/other_1.pickle");
  const std::string date_a = t.add("dates/mem_2024_01_05.pickle");
  const std::string date_b = t.add("dates/mem_2024_01_06.pickle");
  const std::string bs_a = t.add("sizes/run_bs_32.pickle");
  const std::string bs_b = t.add("sizes/run_bs_64.pickle");
  const std::string twice_a = t.add("twice/mem_1.pickle");
  const std::string twice_b = t.add("twice/mem_01.pickle");
  const RankFileSet s = find_rank_files({t.path()}, RankInputs::Snapshots);
  REQUIRE(s.files.size() >= 3);
  CHECK(s.files[0].path == t.path("run/mem_0.pickle"));
  CHECK(s.files[0].name.layout == "megatron");
  CHECK(s.files[1].path == oom);
  CHECK(s.files[2].path == t.path("run/mem_2.pickle"));
  CHECK(paths(s.superseded) == std::vector<std::string>{t.path("run/mem_1.pickle")});
  // Everything else tells no rank, and comes after, by path.
  const std::vector<std::string> all = paths(s.files);
  const std::vector<std::string> untold(all.begin() + 3, all.end());
  const std::vector<std::string> expected = {date_a, date_b, lone, mixed_a, mixed_b, bs_a, bs_b, twice_b, twice_a, v2};
  CHECK(untold == expected);
  for (size_t i = 3; i < s.files.size(); ++i) CHECK(s.files[i].name.rank == -1);

  Tree one("megatron_one");
  const std::string only = one.add("snapshot_0.pickle");
  const RankFileSet s1 = find_rank_files({one.path()}, RankInputs::Snapshots);
  REQUIRE(s1.files.size() == 1);
  CHECK(s1.files[0].name.rank == -1);  // one file alone: "_0" may be anything

  Tree two("megatron_two");
  two.add("snapshot_0.pickle");
  two.add("snapshot_8.pickle");
  CHECK(ranks(find_rank_files({two.path()}, RankInputs::Snapshots)) == std::vector<int>{0, 8});
  // Named one by one, files of one folder are judged together too.
  CHECK(ranks(find_rank_files({two.path("snapshot_8.pickle"), two.path("snapshot_0.pickle")},
                              RankInputs::Snapshots)) == std::vector<int>{0, 8});
}

TEST_CASE("find_rank_files expands a pattern in the last component", "[input]") {
  Tree t("glob");
  const std::string r0 = t.add("runs/rank0.pickle.gz");
  const std::string r1 = t.add("runs/rank1.pickle.gz");
  t.add("runs/rank2.pickle");
  t.add("runs/other3.pickle.gz");
  t.add("runs/.rank9.pickle.gz");  // hidden: a pattern's * does not match a leading dot
  const RankFileSet s = find_rank_files({t.path("runs/rank*.pickle.gz")}, RankInputs::Snapshots);
  CHECK(paths(s.files) == std::vector<std::string>{r0, r1});
  CHECK(ranks(find_rank_files({t.path("runs/rank[02].pickle*")}, RankInputs::Snapshots)) == std::vector<int>{0, 2});
  CHECK(ranks(find_rank_files({t.path("runs/rank?.pickle")}, RankInputs::Snapshots)) == std::vector<int>{2});

  const std::string none = error_of([&] { find_rank_files({t.path("runs/rank*.json")}, RankInputs::Snapshots); });
  CHECK(none == t.path("runs/rank*.json") + ": the pattern matches no file");
  t.add("runs/notes.txt");
  const std::string wrong = error_of([&] { find_rank_files({t.path("runs/*.txt")}, RankInputs::Snapshots); });
  CHECK(wrong.find("the pattern matches no snapshot file") != std::string::npos);
  const std::string nodir = error_of([&] { find_rank_files({t.path("nope/*.pickle")}, RankInputs::Snapshots); });
  CHECK(nodir.find(t.path("nope") + ": no such folder") == 0);
}

TEST_CASE("find_rank_files says which path is missing or holds nothing of the kind", "[input]") {
  Tree t("errors");
  const std::string missing = t.path("no_such_run");
  CHECK(error_of([&] { find_rank_files({missing}, RankInputs::Snapshots); }) ==
        missing + ": no such file or folder");
  t.add("logs/train.log");
  t.add("logs/report.html");
  CHECK(error_of([&] { find_rank_files({t.path("logs")}, RankInputs::Snapshots); }).find(t.path("logs") +
                                                                                         ": no snapshot file") == 0);
  fs::create_directories(t.path("empty"));
  CHECK(error_of([&] { find_rank_files({t.path("empty")}, RankInputs::Summaries); }).find(t.path("empty") +
                                                                                          ": no summary file") == 0);
  CHECK_THROWS_AS(find_rank_files({}, RankInputs::Snapshots), snapdiff::UsageError);
}

TEST_CASE("find_rank_files picks summaries or snapshots by their extension", "[input]") {
  Tree t("kinds");
  const std::string j0 = t.add("rank0.json");
  const std::string j1 = t.add("rank1.json.gz");
  const std::string truth = t.add("rank2.truth.json");
  const std::string trace = t.add("rank3.pt.trace.json");
  const std::string pkl = t.add("rank4.pkl");
  const std::string snap = t.add("rank5.snap.gz");
  const RankFileSet sum = find_rank_files({t.path()}, RankInputs::Summaries);
  CHECK(paths(sum.files) == std::vector<std::string>{j0, j1});
  CHECK(sum.skipped == std::vector<std::string>{truth, trace, pkl, snap});
  const RankFileSet snaps = find_rank_files({t.path()}, RankInputs::Snapshots);
  CHECK(paths(snaps.files) == std::vector<std::string>{trace, pkl, snap});
  CHECK(snaps.skipped == std::vector<std::string>{j0, j1, truth});
}

TEST_CASE("find_rank_files takes a named file whatever its name, and each file once", "[input]") {
  Tree t("named");
  const std::string odd = t.add("capture.bin");
  const std::string r1 = t.add("run/rank1.pickle");
  const RankFileSet s = find_rank_files({odd, t.path("run"), r1}, RankInputs::Snapshots);
  CHECK(paths(s.files) == std::vector<std::string>{r1, odd});
  CHECK(s.superseded.empty());
}

TEST_CASE("find_rank_files follows links to files, not to folders, and stops 16 levels down", "[input]") {
  Tree t("walk");
  const std::string target = t.add("elsewhere/rank7.pickle");
  t.add("other/rank8.pickle");
  fs::create_directories(t.path("run"));
  fs::create_symlink(fs::absolute(target), t.path("run/rank7.pickle"));
  fs::create_directory_symlink(fs::absolute(t.path("other")), t.path("run/other"));
  std::string deep = "run";
  for (int level = 2; level <= 17; ++level) {
    deep += "/d";
    t.add(deep + "/rank" + std::to_string(100 + level) + ".pickle");
  }
  const RankFileSet s = find_rank_files({t.path("run")}, RankInputs::Snapshots);
  // rank 7 through the link to a file; not rank 8 behind the link to a
  // folder; ranks 102..116 in folders 2 to 16 levels down, not 117.
  std::vector<int> expected = {7};
  for (int level = 2; level <= 16; ++level) expected.push_back(100 + level);
  CHECK(ranks(s) == expected);
  // The folder left out is said (the CLI's note names it).
  REQUIRE(s.too_deep.size() == 1);
  CHECK(s.too_deep[0] == t.path(deep));
  CHECK_FALSE(s.walk_stopped);
}

TEST_CASE("rank_from_name reads names of any length in one pass (no recursion)", "[input]") {
  // Names as long as a summary may carry (issue 37: recursive std::regex
  // overflowed the stack at 30,000 characters).
  const std::string a(200000, 'a'), nines(200000, '9');
  CHECK(rank_from_name("oom_rank-1_" + a + "/x.pickle").rank == 1);
  CHECK(rank_from_name("oom_rank-1_" + a + "/x.pickle").oom);
  const auto step = rank_from_name("step_" + nines + "/rank1.pickle");
  CHECK(step.rank == 1);
  CHECK(step.step == -1);  // more than 18 digits: no step
  CHECK(rank_from_name(a + "_r3.pickle").rank == 3);
  CHECK(rank_from_name(a + "rank3.pickle").rank == -1);  // "rank" after a letter
  CHECK(rank_from_name(std::string(200000, '_') + "rank3.pickle").rank == 3);
  CHECK(rank_from_name(std::string(200000, '-') + "step-4").step == 4);
  // Megatron's {base}_{rank} on long bases.
  std::vector<snapdiff::RankFile> files = {{"d/" + std::string(100000, 'b') + "_1.pickle", {}},
                                           {"d/" + std::string(100000, 'b') + "_2.pickle", {}}};
  for (auto& f : files) f.name = rank_from_name(f.path);
  const RankFileSet s = snapdiff::select_rank_files(files);
  CHECK(ranks(s) == std::vector<int>{1, 2});
}

TEST_CASE("find_rank_files finds a rank that is not a regular file as unreadable, never opening it", "[input]") {
  Tree t("unreadable");
  t.add("run/rank0.pickle");
  fs::create_symlink("gone.pickle", t.path("run/rank1.pickle"));    // dangling
  REQUIRE(::mkfifo(t.path("run/rank2.pickle").c_str(), 0600) == 0);  // a FIFO: opening it could block
  fs::create_symlink("rank3.pickle", t.path("run/rank3.pickle"));   // a loop
  REQUIRE(::mkfifo(t.path("run/notes.txt").c_str(), 0600) == 0);     // not named as a snapshot: skipped
  const RankFileSet s = find_rank_files({t.path("run")}, RankInputs::Snapshots);
  REQUIRE(ranks(s) == std::vector<int>{0, 1, 2, 3});
  CHECK(s.files[0].unreadable.empty());
  CHECK(s.files[1].unreadable.find("dangling symbolic link") != std::string::npos);
  CHECK(s.files[2].unreadable.find("named pipe") != std::string::npos);
  CHECK(!s.files[3].unreadable.empty());
  CHECK(s.skipped == std::vector<std::string>{t.path("run/notes.txt")});
  // The same through a pattern.
  const RankFileSet p = find_rank_files({t.path("run/rank*.pickle")}, RankInputs::Snapshots);
  CHECK(ranks(p) == std::vector<int>{0, 1, 2, 3});
  CHECK(!p.files[2].unreadable.empty());
}

TEST_CASE("find_rank_files stops after the files it may look at, and says so", "[input]") {
  Tree t("bounded");
  for (int r = 0; r < 6; ++r) t.add("run/rank" + std::to_string(r) + ".pickle");
  snapdiff::WalkLimits three;
  three.max_files = 3;
  const RankFileSet s = snapdiff::find_rank_files({t.path("run")}, snapdiff::RankInputs::Snapshots, three);
  CHECK(ranks(s) == std::vector<int>{0, 1, 2});  // in name order, then the walk stopped
  CHECK(s.walk_stopped);
  const RankFileSet all = find_rank_files({t.path("run")}, RankInputs::Snapshots);
  CHECK(all.files.size() == 6);
  CHECK_FALSE(all.walk_stopped);
}
