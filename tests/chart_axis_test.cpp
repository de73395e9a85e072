// Two-run charts share an x axis on which iteration k starts at the same x in
// both runs, each run spanning the full width (chart_series_diff(),
// src/analysis/chart_align.cpp). Checked on real pairs with different event
// counts, per event (the axis map) and in the series the drawing reads.
#include <catch2/catch.hpp>
#include <cmath>
#include <map>

#include "analysis/charts/chart_series.hpp"
#include "snapdiff/report/chart.hpp"
#include "snapdiff/input/input.hpp"
#include "test_util.hpp"

using namespace snapdiff;

namespace {

using test::Run;
using test::run_of;

const DeviceAnalysis& top(const Analysis& r) { return r.devices[r.peak_device]; }

// Iteration k -> its first event, from the attribution's phase spans.
std::map<int, int64_t> first_events(const Attribution& a) {
  std::map<int, int64_t> out;
  for (const PhaseSpan& s : a.spans)
    if (s.iteration > 0) {
      auto [it, added] = out.emplace(s.iteration, s.start_event);
      if (!added) it->second = std::min(it->second, s.start_event);
    }
  return out;
}

// Iteration k -> the x where its first phase band starts in a series.
std::map<int, double> band_starts(const std::vector<PhaseBand>& bands) {
  std::map<int, double> out;
  for (const PhaseBand& b : bands)
    if (b.iteration > 0) out.emplace(b.iteration, b.x0);
  return out;
}

const char* const kPairs[][2] = {{"small_bf16.pickle", "small_fp8.pickle"},
                                 {"ans_gpt2_py.pickle.gz", "cat_resnet50_sgd.pickle.gz"}};

}  // namespace

TEST_CASE("two-run axis: iteration starts coincide, every event in order and on the axis, both runs full width",
          "[analysis]") {
  for (const auto& pair : kPairs) {
    for (ChartAxis want : {ChartAxis::Auto, ChartAxis::Time}) {
      INFO(pair[0] << " vs " << pair[1] << (want == ChartAxis::Time ? " --x time" : " --x auto"));
      auto a = run_of(test::real_data(pair[0]));
      auto b = run_of(test::real_data(pair[1]));
      const DeviceAnalysis& da = top(a->r);
      const DeviceAnalysis& db = top(b->r);
      const Device* deva = a->t.find_device(da.device);
      const Device* devb = b->t.find_device(db.device);
      REQUIRE((deva && devb));
      const size_t n[2] = {deva->events.size(), devb->events.size()};
      CHECK(n[0] != n[1]);  // the point of the pair
      detail::EventAxis ax[2];
      detail::shared_axes(*deva, da.attr, *devb, db.attr, want, &ax[0], &ax[1]);
      const std::map<int, int64_t> firsts[2] = {first_events(da.attr), first_events(db.attr)};
      REQUIRE(!firsts[0].empty());
      REQUIRE(!firsts[1].empty());
      CHECK(ax[0].shared == SharedAxis::Iterations);
      CHECK(ax[1].shared == SharedAxis::Iterations);
      int common = 0;
      for (const auto& [k, ea] : firsts[0]) {
        auto eb = firsts[1].find(k);
        if (eb == firsts[1].end()) continue;
        ++common;
        INFO("iteration " << k);
        CHECK(ax[0].at(ea) == ax[1].at(eb->second));
      }
      CHECK(common >= 1);
      for (int r = 0; r < 2; ++r) {
        CHECK(ax[r].lo == 0);
        CHECK(ax[r].hi == 1);
        CHECK(ax[r].at(0) == Approx(0).margin(1e-9));
        CHECK(ax[r].at(int64_t(n[r]) - 1) == Approx(1).margin(1e-9));
        double prev = -1;
        size_t out_of_axis = 0, backwards = 0;
        for (size_t e = 0; e < n[r]; ++e) {
          const double x = ax[r].at(int64_t(e));
          out_of_axis += x < ax[r].lo || x > ax[r].hi;
          // --x time places events by time within an iteration; time stamps
          // can step back across streams, so only the event axis is strict.
          if (!ax[r].time) backwards += x < prev;
          prev = x;
        }
        CHECK(out_of_axis == 0);
        CHECK(backwards == 0);
      }
    }
  }
}

TEST_CASE("two-run timeline and lifetime series: iterations at one x, marks at the starts, all x on the axis",
          "[analysis]") {
  for (const auto& pair : kPairs) {
    INFO(pair[0] << " vs " << pair[1]);
    auto a = run_of(test::real_data(pair[0]));
    auto b = run_of(test::real_data(pair[1]));
    ChartOptions o;
    o.kind = ChartKind::Timeline;
    const ChartSeriesPair tp = chart_series_diff(a->r, a->t, b->r, b->t, o);
    o.kind = ChartKind::Lifetime;
    const ChartSeriesPair lp = chart_series_diff(a->r, a->t, b->r, b->t, o);
    for (const ChartSeriesPair* p : {&tp, &lp}) {
      const bool tl = p == &tp;
      INFO((tl ? "timeline" : "lifetime"));
      const double lo[2] = {tl ? p->a.timeline.x_min : p->a.lifetime.x_min, tl ? p->b.timeline.x_min : p->b.lifetime.x_min};
      const double hi[2] = {tl ? p->a.timeline.x_max : p->a.lifetime.x_max, tl ? p->b.timeline.x_max : p->b.lifetime.x_max};
      const auto& marks_a = tl ? p->a.timeline.iteration_marks : p->a.lifetime.iteration_marks;
      const auto& marks_b = tl ? p->b.timeline.iteration_marks : p->b.lifetime.iteration_marks;
      const auto& bands_a = tl ? p->a.timeline.phases : p->a.lifetime.phases;
      const auto& bands_b = tl ? p->b.timeline.phases : p->b.lifetime.phases;
      CHECK((tl ? p->a.timeline.shared : p->a.lifetime.shared) == SharedAxis::Iterations);
      CHECK((lo[0] == 0 && lo[1] == 0 && hi[0] == 1 && hi[1] == 1));
      // The marks are the same in both runs and sit where each iteration's phases begin.
      REQUIRE(marks_a.size() == marks_b.size());
      REQUIRE(!marks_a.empty());
      const std::map<int, double> sa = band_starts(bands_a), sb = band_starts(bands_b);
      for (size_t i = 0; i < marks_a.size(); ++i) {
        CHECK(marks_a[i].iteration == marks_b[i].iteration);
        CHECK(marks_a[i].x == marks_b[i].x);
        if (i) CHECK(marks_a[i].x > marks_a[i - 1].x);
        REQUIRE(sa.count(marks_a[i].iteration));
        REQUIRE(sb.count(marks_a[i].iteration));
        CHECK(sa.at(marks_a[i].iteration) == marks_a[i].x);
        CHECK(sb.at(marks_a[i].iteration) == marks_a[i].x);
      }
      // Phase bands tile each run's axis from 0 to its end.
      for (const auto* bands : {&bands_a, &bands_b}) {
        REQUIRE(!bands->empty());
        CHECK(bands->front().x0 == 0);
        CHECK(bands->back().x1 == 1);
        for (const PhaseBand& band : *bands) CHECK((band.x0 >= 0 && band.x1 <= 1 && band.x0 <= band.x1));
      }
      if (tl) {
        for (const ChartSeries* s : {&p->a, &p->b}) {
          const TimelineData& td = s->timeline;
          REQUIRE(td.columns.size() == s->geometry.columns);  // both runs use every column
          CHECK(td.columns.front().event >= 0);  // an event falls in the first column...
          CHECK((td.peak_x >= 0 && td.peak_x <= 1));
          for (const TimelineColumn& c : td.columns) CHECK((c.x0 >= 0 && c.x1 <= 1 + 1e-12));
          // ... and the last event in the last one: the run reaches the right edge.
          const int64_t last = td.columns.back().event;
          int64_t before = -1;
          for (size_t i = 0; i + 1 < td.columns.size(); ++i) before = std::max(before, td.columns[i].event);
          CHECK(last > before);
        }
      } else {
        for (const ChartSeries* s : {&p->a, &p->b}) {
          const LifetimeData& ld = s->lifetime;
          CHECK(ld.buckets == s->geometry.columns);
          size_t bars = 0;
          for (const LifetimeBand& band : ld.bands)
            for (const LifetimeBar& bar : band.bars) {
              ++bars;
              CHECK((bar.x0 >= 0 && bar.x1 <= 1 && bar.x0 <= bar.x1));
            }
          CHECK(bars > 0);
        }
      }
    }
  }
}

TEST_CASE("two-run axis: a run without iterations puts both runs on their position, 0 to 1", "[analysis]") {
  auto a = run_of(test::real_data("small_bf16.pickle"));
  auto b = run_of(test::real_data("small_fp8.pickle"));
  const DeviceAnalysis& da = top(a->r);
  const DeviceAnalysis& db = top(b->r);
  Attribution none = db.attr;  // B's attribution without its iterations
  for (PhaseSpan& s : none.spans) s.iteration = 0;
  detail::EventAxis ax[2];
  detail::shared_axes(*a->t.find_device(da.device), da.attr, *b->t.find_device(db.device), none, ChartAxis::Auto,
                      &ax[0], &ax[1]);
  const size_t n[2] = {a->t.find_device(da.device)->events.size(), b->t.find_device(db.device)->events.size()};
  for (int r = 0; r < 2; ++r) {
    CHECK(ax[r].shared == SharedAxis::Position);
    CHECK(ax[r].marks.empty());
    CHECK(ax[r].at(0) == 0);
    CHECK(ax[r].at(int64_t(n[r]) - 1) == 1);
    // Position by event index: event e of n at e / (n - 1).
    const int64_t mid = int64_t(n[r]) / 2;
    CHECK(ax[r].at(mid) == Approx(double(mid) / double(n[r] - 1)));
  }
}

TEST_CASE("single-run charts keep the run's own axis", "[analysis]") {
  auto a = run_of(test::real_data("small_fp8.pickle"));
  ChartOptions o;
  o.kind = ChartKind::Timeline;
  o.axis = ChartAxis::Events;
  const ChartSeries s = chart_series(a->r, a->t, o);
  CHECK(s.timeline.shared == SharedAxis::None);
  CHECK(s.timeline.iteration_marks.empty());
  CHECK(s.timeline.x_max == double(a->t.find_device(s.device)->events.size() - 1));
}

TEST_CASE("two-run charts name their shared axis: iteration labels, or the position in each run", "[report]") {
  auto a = run_of(test::real_data("small_bf16.pickle"));
  auto b = run_of(test::real_data("small_fp8.pickle"));
  ChartOptions o;
  o.kind = ChartKind::Timeline;
  ChartSeriesPair p = chart_series_diff(a->r, a->t, b->r, b->t, o);
  const std::string dot = chart_dot_diff(p, o);
  CHECK(dot.find("iterations aligned: each starts at the same x in both runs") != std::string::npos);
  CHECK(dot.find("time since the first event") == std::string::npos);
  CHECK(dot.find("event index") == std::string::npos);
  // The drawing of the fallback, from series that say so.
  for (ChartSeries* s : {&p.a, &p.b}) {
    s->timeline.shared = SharedAxis::Position;
    s->timeline.iteration_marks.clear();
  }
  const std::string pos = chart_dot_diff(p, o);
  CHECK(pos.find("position in each run, first event to last (a run has no iterations to align)") != std::string::npos);
  CHECK(pos.find(">100%<") != std::string::npos);
  // "iteration 1" is the phase strip's too; on the aligned axis each panel's x axis adds it.
  auto count = [](const std::string& s, const std::string& w) {
    size_t n = 0;
    for (size_t i = s.find(w); i != std::string::npos; i = s.find(w, i + 1)) ++n;
    return n;
  };
  CHECK(count(dot, ">iteration 1<") == count(pos, ">iteration 1<") + 2);
}
