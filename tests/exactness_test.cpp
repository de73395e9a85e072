// The replayed peaks against PyTorch's own counters (memory_stats() in each
// file's .truth.json, recorded by PyTorch 2.11 on an H200).
#include <catch2/catch.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "snapdiff/input/input.hpp"
#include "snapdiff/analysis/replay.hpp"
#include "snapdiff/analysis/analysis.hpp"
#include "snapdiff/report/report.hpp"
#include "test_util.hpp"

using namespace snapdiff;

TEST_CASE("every recording replays to PyTorch's own counters: peaks, end, truncation", "[analysis][exact]") {
  // For each recording: the four peaks are memory_stats()' peaks (since the
  // recording started; for wrapped_gpt2 since a reset before the last two
  // steps, which lie inside the recorded window, so the window's peaks are
  // PyTorch's), the end is the dump and memory_stats()' current values, no
  // event contradicts the replayed layout, and the history is named for
  // what it covers.
  const auto recordings = test::real_recordings();
  REQUIRE(recordings.size() >= 24);  // the 7 reference runs and the 17 allocator modes, at least
  for (const auto& [file, stem] : recordings) {
    DYNAMIC_SECTION(file) {
      Trace t = load_trace(test::real_data(file));
      Analysis r = analyze(t, {});
      REQUIRE(!r.devices.empty());
      const DeviceReplay& rp = r.devices[r.peak_device].replay;
      const auto tr = test::truth(stem);
      const auto& ms = tr["memory_stats"];
      const std::string truncation = tr.contains("truncation") ? tr["truncation"].get<std::string>() : "none";
      CHECK(std::string(truncation_name(rp.truncation)) == truncation);
      CHECK(std::string(truncation_name(r.truncation)) == truncation);
      CHECK(rp.truncated == (truncation != "none"));
      CHECK(r.history_truncated == (truncation != "none"));
      CHECK(rp.peak_requested.bytes == ms["requested_bytes.all.peak"].get<int64_t>());
      CHECK(rp.peak_allocated.bytes == ms["allocated_bytes.all.peak"].get<int64_t>());
      CHECK(rp.peak_reserved.bytes == ms["reserved_bytes.all.peak"].get<int64_t>());
      CHECK(rp.peak_active.bytes == ms["active_bytes.all.peak"].get<int64_t>());
      CHECK(rp.end_check.matches());
      // The older truth files (the reference workload's) lack requested_bytes.all.current
      // and `truncation` (their histories are complete); their end requested
      // bytes are the dump's, which end_check compares.
      if (ms.contains("requested_bytes.all.current"))
        CHECK(rp.end.requested == ms["requested_bytes.all.current"].get<int64_t>());
      CHECK(rp.end.allocated == ms["allocated_bytes.all.current"].get<int64_t>());
      CHECK(rp.end.reserved == ms["reserved_bytes.all.current"].get<int64_t>());
      CHECK(rp.end.active == ms["active_bytes.all.current"].get<int64_t>());
      CHECK(rp.end.allocated == tr["memory_allocated_end"].get<int64_t>());
      CHECK(rp.end.reserved == tr["memory_reserved_end"].get<int64_t>());
      CHECK(rp.inconsistencies == 0);
      if (tr.contains("trace_entries")) CHECK(rp.truncation_evidence.entries == tr["trace_entries"][0].get<uint64_t>());
    }
  }
}

TEST_CASE("truncation_name spells the four kinds", "[analysis][exact]") {
  CHECK(std::string(truncation_name(Truncation::None)) == "none");
  CHECK(std::string(truncation_name(Truncation::LateStart)) == "late_start");
  CHECK(std::string(truncation_name(Truncation::Wrapped)) == "wrapped");
  CHECK(std::string(truncation_name(Truncation::Unknown)) == "unknown");
}

TEST_CASE("the OOM run reports its out-of-memory event", "[analysis][exact]") {
  Trace t = load_trace(test::real_data("small_oom.pickle"));
  Analysis r = analyze(t, {});
  bool has = false;
  for (auto& w : r.warnings) has |= w.code == Code::Oom;
  CHECK(has);
  CHECK(r.devices[0].replay.oom_events == 1);
}

TEST_CASE("every byte live at the peak is in exactly one site row", "[analysis][exact]") {
  Trace t = load_trace(test::real_data("small_fp8.pickle"));
  ReportOptions o;
  o.top_sites = 5;
  Analysis r = analyze(t, o);
  const DeviceAnalysis& d = r.devices[0];
  int64_t sum = d.other_sites.requested_bytes;
  uint64_t count = d.other_sites.count;
  for (auto& s : d.sites) {
    sum += s.requested_bytes;
    count += s.count;
  }
  CHECK(sum == d.peak_live_requested);
  CHECK(count == d.peak_live_allocations);
  // The peak is the requested peak: the live bytes there are that counter.
  CHECK(d.peak_live_requested == d.replay.peak_requested.bytes);
  CHECK(d.frag.allocated == d.replay.allocated[size_t(d.replay.peak_requested.event_index)]);
  CHECK(d.frag.free_cached + d.frag.pending_free + d.frag.allocated == d.frag.reserved);
}

TEST_CASE("xxl_fp8: wrapped history, requested peak exact", "[analysis][exact][xxl]") {
  // 170 MB; the build unpacks it from tests/data/real/xxl_fp8.pickle.xz.
  Trace t = load_trace(test::unpacked_data("xxl_fp8.pickle"));
  CHECK(t.event_count() == 1000000);
  Analysis r = analyze(t, {});
  CHECK(r.history_truncated);
  bool warned = false;
  for (auto& w : r.warnings) warned |= w.code == Code::HistoryTruncated;
  CHECK(warned);
  auto ms = test::truth("xxl_fp8")["memory_stats"];
  const DeviceReplay& rp = r.devices[r.peak_device].replay;
  CHECK(rp.peak_requested.bytes == ms["requested_bytes.all.peak"].get<int64_t>());
  CHECK(rp.end_check.matches());
  // 1,000,000 entries (max_entries, a round count) whose head frees blocks
  // the history never allocated: the ring wrapped.
  CHECK(std::string(truncation_name(rp.truncation)) == "wrapped");
  CHECK(std::string(truncation_name(r.truncation)) == "wrapped");
  CHECK(rp.truncation_evidence.entries == 1000000);
  CHECK(rp.truncation_evidence.entries_round);
  // Attribution on the wrapped, full-size run: the three long-lived classes.
  const DeviceAnalysis& d = r.devices[r.peak_device];
  auto tr = test::truth("xxl_fp8");
  auto cat = [&](const char* name) {
    for (size_t i = 0; i < d.attr.categories.size(); ++i)
      if (d.attr.categories[i] == name) return d.categories[i];
    return int64_t(0);
  };
  auto near = [](int64_t got, int64_t want) { return std::llabs(got - want) <= want / 100; };
  CHECK(near(cat("parameter"), tr["param_bytes"].get<int64_t>()));
  CHECK(near(cat("gradient"), tr["grad_bytes"].get<int64_t>()));
  CHECK(near(cat("optimizer_state"), tr["optimizer_state_bytes"].get<int64_t>()));
  for (const PhaseSpan& s : d.attr.spans)
    if (s.phase == Phase::Optimizer) {
      int64_t temp = 0;
      for (size_t i = 0; i < d.attr.categories.size(); ++i)
        if (d.attr.categories[i] == "optimizer_temporary") temp = s.categories[i];
      CHECK(double(temp) >= 0.9 * double(tr["grad_bytes"].get<int64_t>()));
    }
}

TEST_CASE("graph and MemPool runs: every allocation knows its pool, as the dump does", "[analysis][exact]") {
  // The requested bytes alive at the end in private pools, by the pool the
  // replay gave each allocation, against the dump's own blocks in segments
  // whose segment_pool_id is not (0, 0).
  for (const char* stem : {"graphed_resnet", "graph_step", "mempool_resnet"}) {
    INFO(stem);
    Trace t = load_trace(test::real_data(std::string(stem) + ".pickle.gz"));
    Analysis r = analyze(t, {});
    REQUIRE(!r.devices.empty());
    const DeviceAnalysis& d = r.devices[0];
    REQUIRE(d.replay.pools.size() >= 2);
    CHECK(d.replay.pools[0].id[0] == 0);
    CHECK(d.replay.pools[0].id[1] == 0);
    int64_t dumped = 0, replayed = 0;
    for (const Segment& sg : t.devices[0].segments)
      if (sg.pool_id[0] != 0 || sg.pool_id[1] != 0)
        for (uint32_t k = 0; k < sg.block_count; ++k)
          if (t.devices[0].blocks[sg.first_block + k].state != BlockState::Inactive)
            dumped += int64_t(t.devices[0].blocks[sg.first_block + k].requested_size);
    for (const Allocation& al : d.attr.allocations)
      if (al.free_event == INT64_MAX && al.pool != 0) replayed += int64_t(al.requested);
    CHECK(dumped > 0);
    CHECK(replayed == dumped);
  }
}
