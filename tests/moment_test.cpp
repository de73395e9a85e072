// `report --at` and `--window` (snapdiff/analysis/moment.hpp): the specs, and
// the moments they resolve to against PyTorch's own memory_allocated() at
// iteration boundaries, recorded in the same process as the snapshot.
#include <catch2/catch.hpp>
#include <algorithm>
#include <string>

#include "snapdiff/analysis/analysis.hpp"
#include "snapdiff/analysis/moment.hpp"
#include "snapdiff/error.hpp"
#include "snapdiff/input/input.hpp"
#include "test_util.hpp"

using namespace snapdiff;

namespace {

ReportOptions at_opts(const std::string& at, const std::string& window = "") {
  ReportOptions o;
  if (!at.empty()) o.at = parse_moment(at);
  if (!window.empty()) o.window = parse_window(window);
  return o;
}

const DeviceAnalysis& peak_dev(const Analysis& a) { return a.devices[a.peak_device]; }

const Device& device_of(const Trace& t, const DeviceAnalysis& d) {
  for (const Device& dev : t.devices)
    if (dev.index == d.device) return dev;
  throw std::runtime_error("no device " + std::to_string(d.device));
}

// The recordings whose truth has a non-empty list under `key`.
std::vector<std::pair<std::string, std::string>> with_list(const std::string& key) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& fs : test::real_recordings(key))
    if (!test::truth(fs.second)[key].empty()) out.push_back(fs);
  return out;
}

int64_t allocated_at(const DeviceAnalysis& d, int64_t i) {
  return i >= 0 ? d.replay.allocated[size_t(i)] : d.replay.baseline.allocated;
}

}  // namespace

TEST_CASE("moment specs: events, times, phases, and what is refused", "[analysis]") {
  MomentSpec m = parse_moment("1746");
  CHECK(m.kind == MomentSpec::Kind::Event);
  CHECK(m.event == 1746);
  m = parse_moment("+4.7s");
  CHECK(m.kind == MomentSpec::Kind::Relative);
  CHECK(m.time_us == 4700000);
  CHECK(parse_moment("+350ms").time_us == 350000);
  CHECK(parse_moment("+12us").time_us == 12);
  CHECK(parse_moment("+0.0000010s").time_us == 1);  // finer than a microsecond only with zeros
  m = parse_moment("@1746000000123456");
  CHECK(m.kind == MomentSpec::Kind::Absolute);
  CHECK(m.time_us == 1746000000123456);
  CHECK(parse_moment("@1746000000.5s").time_us == 1746000000500000);
  m = parse_moment("iteration 2 optimizer");
  CHECK(m.kind == MomentSpec::Kind::Span);
  CHECK(m.iteration == 2);
  CHECK(!m.whole_iteration);
  CHECK(m.phase == Phase::Optimizer);
  CHECK(m.edge == MomentSpec::Edge::Default);
  m = parse_moment("  Iteration 3 START ");
  CHECK(m.whole_iteration);
  CHECK(m.edge == MomentSpec::Edge::Start);
  CHECK(parse_moment("iteration 1 backward end").edge == MomentSpec::Edge::End);
  CHECK(parse_moment("peak").kind == MomentSpec::Kind::Peak);
  for (const char* bad : {"", "+4.7", "+4.7 parsecs", "-3", "iteration", "iteration two", "iteration 2 lunch",
                          "iteration 2 forward start now", "@", "+", "soon", "12x", "+0.0000015s",
                          "99999999999999999999"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_moment(bad), UsageError);
  }
  WindowSpec w = parse_window("..iteration 3");
  CHECK(w.from.empty());
  CHECK(w.to.iteration == 3);
  w = parse_window("+1s..");
  CHECK(w.from.time_us == 1000000);
  CHECK(w.to.empty());
  for (const char* bad : {"", "..", "iteration 2", "1..2..3", "x..y"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_window(bad), UsageError);
  }
}

TEST_CASE("--at out of range says the range", "[analysis]") {
  Trace t = load_trace(test::real_data("small_bf16.pickle"));
  const Analysis a = analyze(t, {});
  const DeviceAnalysis& d = peak_dev(a);
  const auto message = [&](const std::string& at) {
    try {
      analyze(t, at_opts(at));
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(message(std::to_string(d.events)), Catch::Contains("has events 0 to " + std::to_string(d.events - 1)));
  CHECK_THAT(message("iteration 99"), Catch::Contains("has iterations 1 to " + std::to_string(d.attr.iterations)));
  CHECK_THAT(message("+100000s"), Catch::Contains("after the last event"));
  CHECK_THAT(message("@1"), Catch::Contains("before the first event"));
  CHECK_THAT(message("iteration 1 init"), Catch::Contains("has no init phase"));
  // A clock that runs backwards: the earliest to the latest time, offsets
  // from the first event's with one sign each, exact at int64's ends.
  Trace back;
  test::push_alloc(back, 0x1000, 512, 0, INT64_MAX);
  test::push_alloc(back, 0x2000, 512, 0, -INT64_MAX);
  try {
    analyze(back, at_opts("+1s"));
    FAIL("accepted");
  } catch (const UsageError& e) {
    CHECK_THAT(std::string(e.what()),
               Catch::Contains("run from @-9223372036854775807 to @9223372036854775807 (-18446744073709.551614 s to +0"));
  }
}

TEST_CASE("--at the peak is the default report; --at another moment moves the live set there", "[analysis]") {
  const auto recordings = with_list("iters");
  REQUIRE(recordings.size() >= 5);
  for (const auto& [file, stem] : recordings) {
    DYNAMIC_SECTION(file) {
      Trace t = load_trace(test::real_data(file));
      const Analysis base = analyze(t, {});
      const DeviceAnalysis& d0 = peak_dev(base);
      const Analysis at = analyze(t, at_opts(std::to_string(d0.peak_index)));
      const DeviceAnalysis& d1 = peak_dev(at);
      REQUIRE(d1.at);
      CHECK(d1.at->event_index == d0.peak_index);
      CHECK(d1.at->counters.requested == d0.replay.peak_requested.bytes);
      CHECK(d1.categories == d0.categories);
      CHECK(d1.category_allocations == d0.category_allocations);
      CHECK(d1.peak_live_requested == d0.peak_live_requested);
      CHECK(d1.peak_live_allocations == d0.peak_live_allocations);
      REQUIRE(d1.sites.size() == d0.sites.size());
      for (size_t i = 0; i < d0.sites.size(); ++i) {
        CHECK(d1.sites[i].site.path == d0.sites[i].site.path);
        CHECK(d1.sites[i].site.stack.size() == d0.sites[i].site.stack.size());
        CHECK(d1.sites[i].requested_bytes == d0.sites[i].requested_bytes);
        CHECK(d1.sites[i].block_bytes == d0.sites[i].block_bytes);
      }
      CHECK(d1.frag.reserved == d0.frag.reserved);
      CHECK(d1.frag.free_cached == d0.frag.free_cached);
      // The live set at any moment sums to the replay's requested bytes then,
      // and its allocator state is the replay's.
      for (const std::string spec : {"0", "iteration 1 start", "iteration 2 backward", "+1ms"}) {
        INFO(spec);
        const Analysis m = analyze(t, at_opts(spec));
        const DeviceAnalysis& dm = peak_dev(m);
        REQUIRE(dm.at);
        int64_t sum = 0;
        for (int64_t c : dm.categories) sum += c;
        CHECK(sum == dm.at->counters.requested);
        CHECK(dm.peak_live_requested == dm.at->counters.requested);
        CHECK(dm.frag.allocated == dm.at->counters.allocated);
        CHECK(dm.frag.reserved == dm.at->counters.reserved);
        CHECK(dm.findings.empty());  // the findings explain the peak
      }
    }
  }
}

TEST_CASE("--at an iteration's end is PyTorch's memory_allocated() after it; --window peaks are its maxima", "[analysis]") {
  // `iters` (scripts/record): after each iteration of the training loop,
  // memory_allocated() and max_memory_allocated(), in the process that
  // recorded the snapshot; the history starts with an empty allocator.
  const auto recordings = with_list("iters");
  REQUIRE(recordings.size() >= 5);
  for (const auto& [file, stem] : recordings) {
    DYNAMIC_SECTION(file) {
      const auto tr = test::truth(stem);
      Trace t = load_trace(test::real_data(file));
      const Analysis base = analyze(t, {});
      const DeviceAnalysis& d = peak_dev(base);
      REQUIRE(!d.replay.truncated);
      const auto& iters = tr["iters"];
      REQUIRE(int(iters.size()) == d.attr.iterations);
      int64_t prev_max = 0;
      for (const auto& it : iters) {
        const int n = it["iter"].get<int>();
        INFO("iteration " << n);
        const int64_t end = resolve_moment(parse_moment("iteration " + std::to_string(n) + " end"), device_of(t, d), d.replay,
                                           d.attr, MomentSpec::Edge::Peak)
                                .event;
        CHECK(allocated_at(d, end) == it["allocated"].get<int64_t>());
        const Analysis a = analyze(t, at_opts("iteration " + std::to_string(n) + " end"));
        REQUIRE(peak_dev(a).at);
        CHECK(peak_dev(a).at->counters.allocated == it["allocated"].get<int64_t>());
        // From the start to the iteration's end: max_memory_allocated() then.
        const int64_t so_far = it["max_allocated_so_far"].get<int64_t>();
        const Analysis upto = analyze(t, at_opts("", "..iteration " + std::to_string(n)));
        CHECK(peak_dev(upto).replay.peak_allocated.bytes == so_far);
        CHECK(peak_dev(upto).replay.peak_allocated.bytes <= d.replay.peak_allocated.bytes);
        // The iteration alone: its maximum is the running maximum where that rose in it.
        const Analysis only = analyze(t, at_opts("", "iteration " + std::to_string(n) + "..iteration " + std::to_string(n)));
        const int64_t win = peak_dev(only).replay.peak_allocated.bytes;
        CHECK(win <= so_far);
        if (so_far > prev_max) CHECK(win == so_far);
        prev_max = so_far;
      }
    }
  }
}

TEST_CASE("--at an iteration's start and end time is PyTorch's memory_allocated() and memory_reserved() then", "[analysis]") {
  // `iterations` (scripts/record/record_answers.py): at each iteration's start
  // and end, memory_allocated(), memory_reserved() and time.time_ns() // 1000,
  // the clock of the snapshot's time_us, read in the process that recorded it.
  const auto recordings = with_list("iterations");
  REQUIRE(recordings.size() >= 4);
  for (const auto& [file, stem] : recordings) {
    DYNAMIC_SECTION(file) {
      const auto tr = test::truth(stem);
      Trace t = load_trace(test::real_data(file));
      const Analysis base = analyze(t, {});
      const DeviceAnalysis& d = peak_dev(base);
      REQUIRE(!d.replay.truncated);
      size_t inside = 0;
      for (const auto& it : tr["iterations"]) {
        for (const char* edge : {"start", "end"}) {
          if (!it.contains(edge)) continue;  // the step that died of an out-of-memory error has no end
          const auto& w = it[edge];
          const int64_t when = w["time_us"].get<int64_t>();
          const std::string spec = std::string("@").append(std::to_string(when));
          INFO("iteration " << it["iteration"].get<int>() << " (from 0) " << edge << " at " << spec);
          const int64_t want_alloc = w["memory_allocated"].get<int64_t>(), want_res = w["memory_reserved"].get<int64_t>();
          if (when > d.last_time_us || when < d.first_time_us) {
            // Outside the events' times: the state the history ends (or
            // starts) with, and --at refuses the time, saying the range.
            const Counters c = when > d.last_time_us ? d.replay.end : d.replay.baseline;
            CHECK(c.allocated == want_alloc);
            CHECK(c.reserved == want_res);
            CHECK_THROWS_AS(analyze(t, at_opts(spec)), UsageError);
            continue;
          }
          const Analysis a = analyze(t, at_opts(spec));
          REQUIRE(peak_dev(a).at);
          CHECK(peak_dev(a).at->counters.allocated == want_alloc);
          CHECK(peak_dev(a).at->counters.reserved == want_res);
          ++inside;
        }
      }
      CHECK(inside > 0);
    }
  }
}
