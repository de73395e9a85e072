// Many ranks (src/analysis/ranks.cpp) on real per-rank recordings
// (tests/data/real/ranks/): every rank's peaks, the worst and the median
// rank, and the imbalance figures against PyTorch's own numbers from each
// rank's process (.truth.json).
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "snapdiff/analysis/analysis.hpp"
#include "snapdiff/analysis/ranks.hpp"
#include "snapdiff/input/input.hpp"
#include "snapdiff/input/ranks.hpp"
#include "test_util.hpp"

using namespace snapdiff;

namespace {

std::string ranks_dir(const std::string& name) {
  return std::string(SNAPDIFF_SOURCE_DIR) + "/tests/data/real/ranks/" + name;
}

nlohmann::json truth_of(const std::string& snapshot) {
  const std::string base = snapshot.substr(0, snapshot.size() - std::string(".pickle.gz").size());
  return nlohmann::json::parse(test::read_file(base + ".truth.json"));
}

int64_t stat_of(const nlohmann::json& t, const std::string& key) { return t["memory_stats"][key].get<int64_t>(); }

struct Read {
  std::vector<RankEntry> entries;
  std::vector<nlohmann::json> truths;  // by entry, before sorting
};

Read read_folder(const std::string& dir) {
  Read r;
  RankFileSet set = find_rank_files({dir}, RankInputs::Snapshots);
  for (const RankFile& f : set.files) {
    RankEntry e;
    e.name = f.path;
    e.rank = f.name.rank;
    e.rank_from = "name";
    Trace t = load_trace(f.path);
    ReportOptions ro;
    ro.input_name = f.path;
    e.report = analyze_report(t, ro);
    r.entries.push_back(std::move(e));
    r.truths.push_back(truth_of(f.path));
  }
  return r;
}

int64_t lower_median(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v[(v.size() - 1) / 2];
}

const RankMetric& metric(const RanksView& v, const std::string& key) {
  for (const RankMetric& m : v.metrics)
    if (m.key == key) return m;
  FAIL("no metric " << key);
  return v.metrics.front();
}

}  // namespace

TEST_CASE("ranks: every rank's peaks and the worst and median rank and the imbalance match PyTorch's figures",
          "[analysis]") {
  for (const char* folder : {"pp_resnet50", "fsdp_gpt2_uneven", "oom_rank_gpt2"}) {
    INFO(folder);
    Read r = read_folder(ranks_dir(folder));
    REQUIRE(r.entries.size() == r.truths.size());
    REQUIRE(r.entries.size() >= 3);
    // Each file's rank, as its name says, is the rank its process had.
    std::map<int, nlohmann::json> by_rank;
    for (size_t i = 0; i < r.entries.size(); ++i) {
      CHECK(r.entries[i].rank == r.truths[i]["rank"].get<int>());
      by_rank[r.truths[i]["rank"].get<int>()] = r.truths[i];
    }
    RanksView v = build_ranks_view(std::move(r.entries), {}, RanksOptions{});
    CHECK(v.read == by_rank.size());
    CHECK(v.failed == 0);
    std::vector<int64_t> req, alloc, res;
    int truth_worst = -1;
    int64_t truth_worst_peak = -1;
    for (const RankEntry& e : v.ranks) {
      const nlohmann::json& t = by_rank.at(e.rank);
      const DeviceView& d = e.report->devices[e.report->peak_device];
      CHECK(d.peak_requested.bytes == stat_of(t, "requested_bytes.all.peak"));
      CHECK(d.peak_allocated.bytes == stat_of(t, "allocated_bytes.all.peak"));
      CHECK(d.peak_reserved.bytes == stat_of(t, "reserved_bytes.all.peak"));
      CHECK(d.peak_active.bytes == stat_of(t, "active_bytes.all.peak"));
      req.push_back(stat_of(t, "requested_bytes.all.peak"));
      alloc.push_back(stat_of(t, "allocated_bytes.all.peak"));
      res.push_back(stat_of(t, "reserved_bytes.all.peak"));
      if (req.back() > truth_worst_peak) truth_worst_peak = req.back(), truth_worst = e.rank;
      // The rank that ran out of memory is the one the truth says did.
      CHECK(e.report->ooms.empty() == (!t.contains("oom") || t.at("oom").is_null()));
    }
    // Ranks are in order, and the table's figures are PyTorch's.
    for (size_t i = 1; i < v.ranks.size(); ++i) CHECK(v.ranks[i - 1].rank < v.ranks[i].rank);
    const RankMetric& mr = metric(v, "peak_requested_bytes");
    CHECK(mr.max == *std::max_element(req.begin(), req.end()));
    CHECK(mr.min == *std::min_element(req.begin(), req.end()));
    CHECK(mr.median == lower_median(req));
    const RankMetric& ma = metric(v, "peak_allocated_bytes");
    CHECK(ma.max == *std::max_element(alloc.begin(), alloc.end()));
    CHECK(ma.median == lower_median(alloc));
    const RankMetric& mv = metric(v, "peak_reserved_bytes");
    CHECK(mv.max == *std::max_element(res.begin(), res.end()));
    CHECK(mv.min == *std::min_element(res.begin(), res.end()));
    CHECK(mv.median == lower_median(res));
    REQUIRE(v.worst < v.ranks.size());
    CHECK(v.ranks[v.worst].rank == truth_worst);
    CHECK(v.ranks[mr.max_entry].rank == truth_worst);
    CHECK(v.shown == v.worst);
    // The median rank is the one whose requested peak is the lower median.
    REQUIRE(v.median < v.ranks.size());
    CHECK(stat_of(by_rank.at(v.ranks[v.median].rank), "requested_bytes.all.peak") == lower_median(req));
    // The worst rank against the median one: B - A is PyTorch's difference.
    REQUIRE(v.worst_vs_median.has_value());
    CHECK(v.worst_vs_median->peak_delta[0] == truth_worst_peak - lower_median(req));
    CHECK(v.worst_vs_median->b_name == v.ranks[v.worst].name);
    CHECK(v.worst_vs_median->a_name == v.ranks[v.median].name);
  }
}

TEST_CASE("ranks: the pipeline's last stage holds the most parameters and optimizer state", "[analysis]") {
  // ResNet-50's layer4 and head hold 17.0 M of its 25.6 M parameters (the
  // stages of record_ranks.py): rank 3's parameters are the largest, and
  // Adam keeps two tensors of each.
  Read r = read_folder(ranks_dir("pp_resnet50"));
  RanksView v = build_ranks_view(std::move(r.entries), {}, RanksOptions{});
  const RankMetric& par = metric(v, "category:parameter");
  CHECK(v.ranks[par.max_entry].rank == 3);
  CHECK(v.ranks[par.min_entry].rank == 0);
  const RankMetric& st = metric(v, "category:optimizer_state");
  CHECK(v.ranks[st.max_entry].rank == 3);
  // The worst rank is the first stage, which keeps the most micro-batches in flight.
  CHECK(v.ranks[v.worst].rank == 0);
}

TEST_CASE("ranks: an unreadable rank is listed with its error and the others are still summarized", "[analysis]") {
  Read r = read_folder(ranks_dir("fsdp_gpt2_uneven"));
  RankEntry bad;
  bad.name = "run/snapshot_7.pickle";
  bad.rank = 7;
  bad.error = "run/snapshot_7.pickle: offset 12: pickle data ends inside a string";
  bad.exit_code = 3;
  r.entries.push_back(bad);
  RanksView v = build_ranks_view(std::move(r.entries), {}, RanksOptions{});
  CHECK(v.read == 3);
  CHECK(v.failed == 1);
  REQUIRE(v.ranks.size() == 4);
  CHECK(v.ranks.back().rank == 7);
  CHECK(!v.ranks.back().report);
  // Its zero is not the minimum: only ranks read count.
  CHECK(metric(v, "peak_requested_bytes").min > 0);
  CHECK(v.ranks[metric(v, "peak_requested_bytes").min_entry].rank != 7);
}

TEST_CASE("ranks: ranks the names do not tell come from the devices only when each file has one distinct device",
          "[analysis]") {
  Read r = read_folder(ranks_dir("fsdp_gpt2_uneven"));
  for (RankEntry& e : r.entries) e.rank = -1, e.rank_from.clear();
  {
    // All three recorded on cuda:0: the devices tell nothing.
    RanksView v = build_ranks_view(r.entries, {}, RanksOptions{});
    for (const RankEntry& e : v.ranks) CHECK(e.rank == -1);
  }
  // A launcher pinning rank r to cuda:r (the device numbers rewritten).
  for (size_t i = 0; i < r.entries.size(); ++i)
    for (DeviceView& d : r.entries[i].report->devices) d.device = int(2 - i);
  RanksView v = build_ranks_view(r.entries, {}, RanksOptions{});
  for (const RankEntry& e : v.ranks) {
    CHECK(e.rank >= 0);
    CHECK(e.rank_from == "device " + std::to_string(e.rank));
  }
  CHECK(v.ranks.front().rank == 0);
}

TEST_CASE("ranks: rank r against rank r names the rank whose peak moves unlike the others", "[analysis]") {
  // Run A: the three ranks of the uneven FSDP run; run B: the same ranks with
  // rank 1's snapshot swapped for rank 1 of the OOM run (a different job).
  Read a = read_folder(ranks_dir("fsdp_gpt2_uneven"));
  Read b = read_folder(ranks_dir("fsdp_gpt2_uneven"));
  Read o = read_folder(ranks_dir("oom_rank_gpt2"));
  std::vector<RankPair> pairs;
  for (size_t i = 0; i < a.entries.size(); ++i) {
    RankPair p;
    p.rank = a.entries[i].rank;
    p.a_name = a.entries[i].name;
    const RankEntry& be = p.rank == 1 ? o.entries[1] : b.entries[i];
    p.b_name = be.name;
    DiffOptions d;
    p.diff = diff_views(*a.entries[i].report, *be.report, d);
    pairs.push_back(std::move(p));
  }
  RanksDiff d = build_ranks_diff(std::move(pairs), {}, {4}, RanksOptions{});
  REQUIRE(d.pairs.size() == 3);
  CHECK(d.only_b == std::vector<int>{4});
  REQUIRE(!d.outliers.empty());
  CHECK(d.outliers[0].rank == 1);
  const int64_t expect = stat_of(o.truths[1], "requested_bytes.all.peak") - stat_of(a.truths[1], "requested_bytes.all.peak");
  CHECK(d.outliers[0].delta == expect);
  CHECK(d.outliers[0].others_median == 0);  // ranks 0 and 2 are the same files on both sides
  CHECK(!d.outliers[0].category.empty());
  CHECK(d.pairs[d.shown].rank == 1);
}

namespace {

// A read entry whose name tells no rank: one device, its requested peak and
// parameter bytes at the peak, its recorded window.
RankEntry run_entry(const std::string& name, int64_t peak, int64_t params, int64_t first_us, int64_t last_us) {
  RankEntry e;
  e.name = name;
  Report r;
  r.input_name = name;
  DeviceView d;
  d.peak_requested.bytes = peak;
  d.category_names = {"parameter", "activation"};
  d.categories = {params, peak - params};
  d.first_time_us = first_us;
  d.last_time_us = last_us;
  r.devices.push_back(d);
  e.report = std::move(r);
  return e;
}

}  // namespace

TEST_CASE("files with no rank id that do not look like one job: each reason, and ranks never judged", "[analysis]") {
  const int64_t t0 = 1700000000000000;  // wall-clock microseconds (2023)
  const int64_t MiB = 1 << 20, minute = 60000000;
  SECTION("alike: one job") {
    std::vector<RankEntry> e = {run_entry("a", 100 * MiB, 10 * MiB, t0, t0 + minute),
                                run_entry("b", 130 * MiB, 10 * MiB, t0 + 1000, t0 + minute)};
    CHECK_FALSE(judge_one_job(e).not_one_job);
  }
  SECTION("peaks far apart") {
    std::vector<RankEntry> e = {run_entry("a", 2 * MiB, MiB, t0, t0 + minute), run_entry("b", 3000 * MiB, MiB, t0, t0 + minute)};
    const NotOneJob j = judge_one_job(e);
    CHECK(j.not_one_job);
    CHECK(j.peaks_differ);
    CHECK(j.peak_max == 3000 * MiB);
    CHECK_FALSE(j.parameters_differ);
    CHECK_FALSE(j.far_apart);
  }
  SECTION("parameters differ") {
    std::vector<RankEntry> e = {run_entry("a", 100 * MiB, 10 * MiB, t0, t0 + minute), run_entry("b", 100 * MiB, 40 * MiB, t0, t0 + minute)};
    const NotOneJob j = judge_one_job(e);
    CHECK(j.parameters_differ);
    CHECK(j.not_one_job);
  }
  SECTION("recorded far apart, and not when the times are not wall-clock") {
    std::vector<RankEntry> e = {run_entry("a", 100 * MiB, 10 * MiB, t0, t0 + minute),
                                run_entry("b", 100 * MiB, 10 * MiB, t0 + 60 * minute, t0 + 61 * minute)};
    const NotOneJob j = judge_one_job(e);
    CHECK(j.far_apart);
    CHECK(j.gap_us == 59 * minute);
    std::vector<RankEntry> rel = {run_entry("a", 100 * MiB, 10 * MiB, 0, minute),
                                  run_entry("b", 100 * MiB, 10 * MiB, 60 * minute, 61 * minute)};
    CHECK_FALSE(judge_one_job(rel).not_one_job);
  }
  SECTION("devices of different sizes") {
    std::vector<RankEntry> e = {run_entry("a", 100 * MiB, 10 * MiB, t0, t0 + minute), run_entry("b", 100 * MiB, 10 * MiB, t0, t0 + minute)};
    DeviceMemoryRow m;
    m.total_bytes = 80ull << 30;
    e[0].report->device_memory.push_back(m);
    m.total_bytes = 40ull << 30;
    e[1].report->device_memory.push_back(m);
    const NotOneJob j = judge_one_job(e);
    CHECK(j.not_one_job);
    CHECK(j.device_totals == std::vector<uint64_t>{40ull << 30, 80ull << 30});
  }
  SECTION("a rank told by a name: never judged") {
    std::vector<RankEntry> e = {run_entry("a", 2 * MiB, MiB, t0, t0 + minute), run_entry("b", 3000 * MiB, MiB, t0, t0 + minute)};
    e[0].rank = 0;
    CHECK_FALSE(judge_one_job(e).not_one_job);
  }
  SECTION("ranks told by their distinct devices: never judged") {
    std::vector<RankEntry> e = {run_entry("a", 2 * MiB, MiB, t0, t0 + minute), run_entry("b", 3000 * MiB, MiB, t0, t0 + minute)};
    e[0].report->devices[0].device = 0;
    e[1].report->devices[0].device = 1;
    for (RankEntry& x : e) x.report->devices[0].has_trace = true;
    CHECK_FALSE(judge_one_job(e).not_one_job);
  }
}
