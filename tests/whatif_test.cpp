// `snapdiff whatif`: the allocator model against real runs recorded under
// several PYTORCH_CUDA_ALLOC_CONF settings (tests/data/real/whatif/, made by
// scripts/record/record_whatif.py). Each run's request stream, replayed under
// another run's settings, must give that run's peaks as PyTorch counted them
// (its .truth.json) within 0.5%; runs under a memory cap must run out of
// memory exactly where the recorded run did. Files added there in the same
// layout (MODEL__SETTING.pickle.gz and .truth.json) are checked too.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <map>

#include "snapdiff/analysis/whatif.hpp"
#include "snapdiff/error.hpp"
#include "snapdiff/input/input.hpp"
#include "test_util.hpp"

using namespace snapdiff;

namespace {

struct Recorded {
  std::string file, model;
  nlohmann::json truth;
};

std::vector<Recorded> whatif_runs() {
  std::vector<Recorded> out;
  const std::filesystem::path dir = std::filesystem::path(SNAPDIFF_SOURCE_DIR) / "tests/data/real/whatif";
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    const size_t cut = name.find("__");
    if (cut == std::string::npos || name.size() < 11 || name.substr(name.size() - 10) != ".pickle.gz") continue;
    const std::string stem = name.substr(0, name.size() - 10);
    out.push_back({e.path().string(), name.substr(0, cut),
                   nlohmann::json::parse(test::read_file((dir / (stem + ".truth.json")).string()))});
  }
  std::sort(out.begin(), out.end(), [](const Recorded& a, const Recorded& b) { return a.file < b.file; });
  return out;
}

int64_t peak(const nlohmann::json& truth, const char* counter) {
  return truth["memory_stats"][std::string(counter) + "_bytes.all.peak"].get<int64_t>();
}

double off(int64_t got, int64_t want) { return std::fabs(double(got - want)) / double(want); }

bool capped(const Recorded& r) { return r.truth["config"].contains("cap_bytes") && !r.truth["config"]["cap_bytes"].is_null(); }

}  // namespace

TEST_CASE("whatif: each run predicted from every other run of its model, within 0.5% of PyTorch's peaks", "[analysis][whatif]") {
  const std::vector<Recorded> runs = whatif_runs();
  std::map<std::string, std::vector<const Recorded*>> by_model;
  for (const Recorded& r : runs)
    if (!capped(r) && r.truth["oom"].is_null()) by_model[r.model].push_back(&r);
  REQUIRE(by_model.size() >= 2);
  size_t pairs = 0, settings = 0;
  for (const auto& [model, group] : by_model) {
    std::vector<AllocConf> confs;
    for (const Recorded* r : group) confs.push_back(parse_alloc_conf(r->truth["alloc_conf"].get<std::string>()));
    settings = std::max(settings, confs.size());
    for (const Recorded* src : group) {
      const Trace t = load_trace(src->file);
      const WhatIfResult w = what_if(t, confs, {});
      REQUIRE(w.scenarios.size() == group.size());
      for (size_t k = 0; k < group.size(); ++k) {
        const nlohmann::json& want = group[k]->truth;
        const WhatIfScenario& s = w.scenarios[k];
        INFO(src->file << " under " << s.alloc_conf << " (recorded as " << group[k]->file << ")");
        CHECK(!s.oom);
        CHECK(s.requested == peak(want, "requested"));  // the same requests
        CHECK(off(s.allocated, peak(want, "allocated")) <= 0.005);
        CHECK(off(s.reserved, peak(want, "reserved")) <= 0.005);
        ++pairs;
      }
      // The recorded row is PyTorch's own counters (the exact replay).
      CHECK(w.recorded_allocated == peak(src->truth, "allocated"));
      CHECK(w.recorded_reserved == peak(src->truth, "reserved"));
    }
  }
  CHECK(settings >= 5);
  CHECK(pairs >= 50);
}

TEST_CASE("whatif: out of memory predicted exactly where a capped run ran out, and not where it did not", "[analysis][whatif]") {
  size_t checked = 0;
  for (const Recorded& r : whatif_runs()) {
    if (!capped(r)) continue;
    const Trace t = load_trace(r.file);
    WhatIfOptions o;
    o.memory_limit = r.truth["config"]["cap_bytes"].get<int64_t>();
    o.limit_is_fraction = true;
    const WhatIfResult w = what_if(t, {parse_alloc_conf(r.truth["alloc_conf"].get<std::string>())}, o);
    const WhatIfScenario& s = w.scenarios.at(0);
    INFO(r.file);
    int64_t recorded_oom = -1;
    const Device& d = t.devices.at(0);
    for (size_t i = 0; i < d.events.size(); ++i)
      if (d.events[i].kind == EventKind::Oom) recorded_oom = int64_t(i);
    if (r.truth["oom"].is_null()) {
      CHECK(recorded_oom < 0);
      CHECK(!s.oom);
      CHECK(off(s.allocated, peak(r.truth, "allocated")) <= 0.005);
      CHECK(off(s.reserved, peak(r.truth, "reserved")) <= 0.005);
    } else {
      REQUIRE(s.oom);
      CHECK(s.oom->event_index == recorded_oom);
      CHECK(int64_t(s.oom->requested_bytes) == int64_t(d.events[size_t(recorded_oom)].size));
    }
    ++checked;
  }
  CHECK(checked >= 4);
  // The answers' own OOM runs (recorded under a cap, tests/data/real/).
  for (const std::string stem : {"ans_oom_cap_gpt2", "ans_oom_frag"}) {
    const nlohmann::json truth = test::truth(stem);
    const Trace t = load_trace(test::real_data(stem + ".pickle.gz"));
    WhatIfOptions o;
    o.memory_limit = truth["oom"]["cap_bytes"].get<int64_t>();
    const WhatIfResult w = what_if(t, {alloc_conf_of(t.settings)}, o);
    int64_t recorded_oom = -1;
    for (size_t i = 0; i < t.devices.at(0).events.size(); ++i)
      if (t.devices[0].events[i].kind == EventKind::Oom) recorded_oom = int64_t(i);
    INFO(stem);
    REQUIRE(w.scenarios.at(0).oom);
    CHECK(w.scenarios[0].oom->event_index == recorded_oom);
    CHECK(w.calibration.oom);
  }
}

TEST_CASE("whatif: PYTORCH_CUDA_ALLOC_CONF as PyTorch reads it; settings the model lacks are refused", "[analysis][whatif]") {
  // The list form, against what PyTorch itself recorded for the run that used it.
  const Trace t = load_trace(test::real_data("whatif/gpt2__roundupmap.pickle.gz"));
  const AllocConf c = parse_alloc_conf("roundup_power2_divisions:[256:1,512:2,1024:4,>:8]");
  CHECK(c.roundup_power2_divisions == t.settings.roundup_power2_divisions);
  CHECK(parse_alloc_conf("roundup_power2_divisions:4").roundup_power2_divisions == std::vector<uint64_t>(16, 4));
  const AllocConf m = parse_alloc_conf(" max_split_size_mb:128 , expandable_segments:True,garbage_collection_threshold:0.6");
  CHECK(m.max_split_size == int64_t(128) << 20);
  CHECK(m.expandable_segments);
  CHECK(m.garbage_collection_threshold == Approx(0.6));
  CHECK(parse_alloc_conf("release_lock_on_cudamalloc:True").notes.size() == 1);
  CHECK(parse_alloc_conf("").max_split_size == -1);
  for (const char* bad : {"backend:cudaMallocAsync", "pinned_use_cuda_host_register:True", "max_split_size_mb:10",
                          "max_split_size_mb:lots", "roundup_power2_divisions:3", "garbage_collection_threshold:1.5",
                          "expandable_segments:maybe", "no_such_setting:1", "max_split_size_mb"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_alloc_conf(bad), UsageError);
  }
}

TEST_CASE("whatif: a run with a private pool (CUDA graphs) is refused, a partial one covers its window", "[analysis][whatif]") {
  const Trace g = load_trace(test::real_data("graph_step.pickle.gz"));
  CHECK_THROWS_AS(what_if(g, {parse_alloc_conf("")}, {}), UsageError);
  const Trace late = load_trace(test::real_data("late_gpt2.pickle.gz"));
  const WhatIfResult w = what_if(late, {parse_alloc_conf("expandable_segments:True")}, {});
  CHECK(w.partial);
  CHECK(w.truncation == Truncation::LateStart);
  // The blocks alive at the window's start are requested first: the
  // requested peak is the exact replay's.
  CHECK(w.calibration.requested == w.recorded_requested);
}

TEST_CASE("whatif in the OOM section: said only where the model reproduces the error, and as the recordings confirm", "[analysis][whatif]") {
  // oomfrag__default ran out of memory under a 1 GiB cap; the same requests
  // recorded under expandable_segments:True ran out too (oomfrag__expandable).
  const auto run = test::run_of(test::real_data("whatif/oomfrag__default.pickle.gz"));
  REQUIRE(run->r.ooms.size() == 1);
  const OomView& v = run->r.ooms[0];
  CHECK(v.whatif_run);
  CHECK(v.whatif_reproduced);
  CHECK(std::find(v.whatif_tried.begin(), v.whatif_tried.end(), "expandable_segments:True") != v.whatif_tried.end());
  CHECK(std::find(v.whatif_fit.begin(), v.whatif_fit.end(), "expandable_segments:True") == v.whatif_fit.end());
  CHECK(!test::truth("whatif/oomfrag__expandable")["oom"].is_null());
  // A run without an OOM has no OOM section to say anything in.
  const auto fine = test::run_of(test::real_data("whatif/gpt2cap__default.pickle.gz"));
  CHECK(fine->r.ooms.empty());
}

TEST_CASE("whatif: the recorded row is PyTorch's own peaks on every complete real recording", "[analysis][whatif]") {
  size_t checked = 0;
  for (const auto& [file, stem] : test::real_recordings("memory_stats")) {
    const nlohmann::json truth = test::truth(stem);
    if (truth.contains("truncation") && truth["truncation"] != "none") continue;
    const Trace t = load_trace(test::real_data(file));
    WhatIfResult w;
    try {
      w = what_if(t, {}, {});
    } catch (const UsageError&) {
      continue;  // a private pool: refused, tested above
    }
    if (w.partial) continue;
    INFO(file);
    CHECK(w.recorded_allocated == peak(truth, "allocated"));
    CHECK(w.recorded_reserved == peak(truth, "reserved"));
    CHECK(w.recorded_requested == peak(truth, "requested"));
    // The model asks for exactly the recorded requests.
    if (!w.recorded_oom) CHECK(w.calibration.requested == w.recorded_requested);
    ++checked;
  }
  CHECK(checked >= 15);
}

namespace {

Event wev(EventKind k, uint64_t addr, uint64_t size, int64_t t) {
  Event e;
  e.kind = k;
  e.addr = addr;
  e.size = size;
  e.time_us = t;
  return e;
}

}  // namespace

TEST_CASE("whatif: a request beyond an expandable segment's range is out of memory, every figure possible", "[analysis]") {
  // A 1.5 TiB request: larger than the model's 1 TiB range; once mapped
  // only 1 TiB of it and wrapped the rest (reserved below allocated,
  // negative cached bytes) and "fitted" a limit below the request.
  Trace t;
  Device& d = t.device(0);
  d.has_trace = true;
  const uint64_t big = (uint64_t(3) << 40) / 2;
  d.events.push_back(wev(EventKind::SegmentAlloc, 0x10000000000, big, 1));
  d.events.push_back(wev(EventKind::Alloc, 0x10000000000, big, 2));
  for (int64_t limit : {int64_t(0), int64_t(1200) << 30}) {
    WhatIfOptions o;
    o.memory_limit = limit;
    o.limit_is_fraction = limit > 0;
    const WhatIfResult r = what_if(t, {parse_alloc_conf("expandable_segments:True"), parse_alloc_conf("")}, o);
    const WhatIfScenario& e = r.scenarios[0];
    REQUIRE(e.oom);
    CHECK(e.oom->requested_bytes == big);
    for (const WhatIfScenario& s : r.scenarios) {
      CHECK(s.allocated <= s.reserved);
      CHECK(s.cached_at_peak >= 0);
    }
    // Without the expandable range, the default fits it unless the limit is below it.
    CHECK(bool(r.scenarios[1].oom) == (limit > 0));
  }
}

TEST_CASE("whatif: a setting quoted in a refusal is cut at 400 bytes, its length said", "[analysis]") {
  const std::string v(1 << 20, '7');
  try {
    parse_alloc_conf("max_split_size_mb:" + v);
    FAIL("accepted");
  } catch (const UsageError& e) {
    const std::string m = e.what();
    CHECK(m.size() < 600);
    CHECK(m.find("more bytes)") != std::string::npos);  // the cut says what it left out
  }
}
