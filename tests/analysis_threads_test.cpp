// The analysis on two threads (the replay beside the attribution) gives the
// same result as on one, on every real recording: the JSON report and each
// allocation's category, rule and pool.
#include <catch2/catch.hpp>
#include <string>

#include "snapdiff/analysis/analysis.hpp"
#include "snapdiff/input/input.hpp"
#include "snapdiff/report/report.hpp"
#include "test_util.hpp"

using namespace snapdiff;
using namespace snapdiff::test;

TEST_CASE("analysis threads: one and two threads give the same analysis on every real recording", "[analysis]") {
  size_t with_private_pools = 0, checked = 0;
  for (const auto& [file, stem] : real_recordings()) {
    INFO(file);
    const Trace t = load_trace(real_data(file));
    for (const Device& d : t.devices)
      for (const Segment& sg : d.segments) with_private_pools += sg.pool_id[0] != 0 || sg.pool_id[1] != 0;
    ReportOptions one, two;
    one.input_name = two.input_name = file;
    one.threads = 1;
    two.threads = 2;
    const Analysis a = analyze(t, one), b = analyze(t, two);
    REQUIRE(render_json(report_view(a)) == render_json(report_view(b)));
    REQUIRE(a.devices.size() == b.devices.size());
    for (size_t k = 0; k < a.devices.size(); ++k) {
      const auto& x = a.devices[k].attr.allocations;
      const auto& y = b.devices[k].attr.allocations;
      REQUIRE(x.size() == y.size());
      for (size_t i = 0; i < x.size(); ++i) {
        REQUIRE(x[i].category == y[i].category);
        REQUIRE(x[i].rule == y[i].rule);
        REQUIRE(x[i].pool == y[i].pool);
        REQUIRE(x[i].facts == y[i].facts);
      }
      REQUIRE(a.devices[k].replay.requested == b.devices[k].replay.requested);
      REQUIRE(a.devices[k].replay.reserved == b.devices[k].replay.reserved);
    }
    ++checked;
  }
  CHECK(checked >= 20);
  // The attribution waits for the replay before its first rule when the dump
  // has private pools (CUDA graphs): some recording must take that path.
  CHECK(with_private_pools > 0);
}

TEST_CASE("analysis threads: an error of the replay is the error on two threads too", "[analysis]") {
  // 1,100 allocations of 1 TiB: the replay's running total passes 2^50 at
  // event 1024 and the replay refuses the input; the attribution beside it
  // has no error of its own, and the two-thread analysis reports the replay's.
  Trace t;
  Device& d = t.device(0);
  d.has_trace = true;
  for (size_t i = 0; i < 1100; ++i) {
    Event e;
    e.kind = EventKind::Alloc;
    e.action = t.strings.intern("alloc");
    e.addr = (uint64_t(1) << 40) + i * 4096;
    e.size = uint64_t(1) << 40;
    e.time_us = int64_t(1000 + i);
    d.events.push_back(e);
  }
  auto error_of = [&](int threads) {
    ReportOptions o;
    o.threads = threads;
    try {
      (void)analyze(t, o);
    } catch (const InputError& e) {
      return e.describe();
    }
    return std::string();
  };
  const std::string one = error_of(1);
  CHECK(one.find("device 0, event 1024: the requested bytes come to") != std::string::npos);
  CHECK(error_of(2) == one);
}
