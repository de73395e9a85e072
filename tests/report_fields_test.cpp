// The report layer on the view's active counter, truncation kinds, pending
// frees and pools: a real run's view with those fields set by hand, so that
// what each renderer writes for them is checked apart from how the analysis
// derives them.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <string>

#include "snapdiff/analysis/chart_data.hpp"
#include "snapdiff/analysis/diff.hpp"
#include "snapdiff/input/input.hpp"
#include "snapdiff/report/chart.hpp"
#include "snapdiff/report/diff_report.hpp"
#include "snapdiff/report/report.hpp"
#include "test_util.hpp"

using namespace snapdiff;

namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

nlohmann::json schema() {
  return nlohmann::json::parse(test::read_file(test::required(std::string(SNAPDIFF_SOURCE_DIR) + "/schemas/report.schema.json")));
}

// small_bf16's view, with the fields under test set: a history wrapped at
// max_entries = 100,000, an active peak, pending frees at the peak and a
// private pool beside the default one.
const Trace& trace() {
  static const Trace t = load_trace(test::real_data("small_bf16.pickle"));
  return t;
}
const Analysis& run() {
  static const Analysis a = analyze(trace(), {});
  return a;
}
ChartSeries charts(const ChartOptions& o) { return chart_series(run(), trace(), o); }

Report filled_view() {
  Report r = report_view(run());
  REQUIRE(r.devices.size() == 1);
  r.history_truncated = true;
  r.truncation = Truncation::Wrapped;
  DeviceView& d = r.devices[0];
  d.truncated = true;
  d.truncation = Truncation::Wrapped;
  d.truncation_evidence.entries = 100000;
  d.truncation_evidence.max_entries = 100000;
  d.truncation_evidence.entries_round = true;
  d.truncation_evidence.head_orphan_free = true;
  d.truncation_evidence.framed_early_blocks = 5;
  d.truncation_evidence.dropped_mid_history = 3;
  d.peak_active = {d.peak_allocated.bytes + 4096, d.peak_allocated.event_index, d.peak_allocated.time_us};
  d.active_at_peak = d.allocated_at_peak + 2048;
  d.baseline.active = 512;
  d.end_check.replay.active = d.end_check.replay.allocated;
  d.end_check.dump.active = d.end_check.dump.allocated;
  d.frag.pending_free = 2048;
  d.frag.pending_free_requested = 1500;
  PoolUsage def, graph;
  def.segments = 3;
  def.reserved = 6 << 20;
  def.allocated = 1 << 20;
  graph.id[0] = 1;
  graph.id[1] = 2;
  graph.segments = 1;
  graph.reserved = 2 << 20;
  d.pools = {def, graph};
  return r;
}

}  // namespace

TEST_CASE("JSON: the active counter, the truncation kind and its evidence, pending frees and pools", "[report]") {
  const Report r = filled_view();
  const DeviceView& d = r.devices[0];
  const auto j = nlohmann::json::parse(render_json(r));
  CHECK(j["input"]["history"] == "truncated");
  CHECK(j["input"]["truncation"] == "wrapped");
  const auto& dj = j["devices"][0];
  CHECK(dj["truncation"] == "wrapped");
  CHECK(dj["truncation_evidence"] == nlohmann::json{{"entries", 100000},
                                                    {"max_entries", 100000},
                                                    {"entries_round", true},
                                                    {"head_orphan_free", true}, {"framed_early_blocks", 5},
                                                    {"dropped_mid_history", 3}});
  for (const auto* peak : {&j["peak"], &dj["peak"]}) {
    CHECK((*peak)["active_bytes"] == d.peak_active.bytes);
    CHECK((*peak)["active"]["bytes"] == d.peak_active.bytes);
    CHECK((*peak)["active"]["event_index"] == d.peak_active.event_index);
    CHECK((*peak)["active_bytes_at_peak"] == d.active_at_peak);
  }
  CHECK(dj["before_first_event"]["active_bytes"] == 512);
  CHECK(dj["end_state"]["replay"]["active_bytes"] == d.end_check.replay.active);
  CHECK(dj["end_state"]["dump"]["active_bytes"] == d.end_check.dump.active);
  CHECK(dj["fragmentation_at_peak"]["pending_free_bytes"] == 2048);
  CHECK(dj["fragmentation_at_peak"]["pending_free_requested_bytes"] == 1500);
  REQUIRE(dj["pools"].size() == 2);
  CHECK(dj["pools"][0] == nlohmann::json{{"id", {0, 0}}, {"private", false}, {"segments", 3},
                                         {"reserved_bytes", 6 << 20}, {"allocated_bytes", 1 << 20}});
  CHECK(dj["pools"][1]["id"] == nlohmann::json{1, 2});
  CHECK(dj["pools"][1]["private"] == true);

  // Every field the schema requires is there.
  const auto s = schema();
  for (const auto& k : s["properties"]["input"]["required"]) CHECK(j["input"].contains(k.get<std::string>()));
  for (const auto& k : s["$defs"]["devicePeak"]["required"]) CHECK(dj["peak"].contains(k.get<std::string>()));
  for (const auto& k : s["$defs"]["device"]["required"]) CHECK(dj.contains(k.get<std::string>()));
  for (const auto& k : s["$defs"]["counters"]["required"]) CHECK(dj["before_first_event"].contains(k.get<std::string>()));
  const auto& ev = s["$defs"]["device"]["properties"]["truncation_evidence"];
  for (const auto& k : ev["required"]) CHECK(dj["truncation_evidence"].contains(k.get<std::string>()));
  const auto& pool = s["$defs"]["device"]["properties"]["pools"]["items"];
  for (const auto& k : pool["required"]) CHECK(dj["pools"][0].contains(k.get<std::string>()));
  CHECK(s["properties"]["input"]["properties"]["truncation"]["enum"] ==
        nlohmann::json{"none", "late_start", "wrapped", "unknown"});

  // A file that does not record max_entries: null.
  Report unrecorded = r;
  unrecorded.devices[0].truncation_evidence.max_entries = -1;
  CHECK(nlohmann::json::parse(render_json(unrecorded))["devices"][0]["truncation_evidence"]["max_entries"].is_null());
}

TEST_CASE("text and HTML: the history line follows the truncation kind", "[report]") {
  Report r = filled_view();
  const std::pair<Truncation, std::string> kinds[] = {
      {Truncation::LateStart, "truncated (recording started late)"},
      {Truncation::Wrapped, "truncated (ring buffer wrapped)"},
      {Truncation::Unknown, "truncated (cannot tell whether the recording started late or the ring buffer wrapped)"},
      {Truncation::None, "truncated (cannot tell whether the recording started late or the ring buffer wrapped)"}};
  for (const auto& [kind, words] : kinds) {
    INFO(words);
    r.truncation = kind;
    r.devices[0].truncation = kind;
    CHECK(has(render_text(r, kMaxTextWidth), "  history     " + words + "\n"));
    CHECK(has(render_html(r, charts), "history " + words + "</p>"));
  }
  r.history_truncated = false;
  CHECK(has(render_text(r, kMaxTextWidth), "  history     complete\n"));
  r.has_history = false;
  CHECK(has(render_text(r, kMaxTextWidth), "  history     none (dump-time state only)\n"));

  // Devices that disagree are named one by one.
  Report two = filled_view();
  two.devices.push_back(two.devices[0]);
  two.devices[1].device = 1;
  two.devices[1].truncation = Truncation::LateStart;
  two.truncation = Truncation::Unknown;
  CHECK(has(render_text(two, kMaxTextWidth), "  history     truncated (cuda:0: ring buffer wrapped; cuda:1: recording started late)\n"));
}

TEST_CASE("text: the active peak, and pending frees tied to the requested peak", "[report]") {
  Report r = filled_view();
  const std::string text = render_text(r, kMaxTextWidth);
  CHECK(has(text, "\n  active    "));
  CHECK(has(text, "their requested " + human_bytes(1500) + " is part of the requested peak"));
  CHECK(has(text, "requested here without the pending frees"));
  r.devices[0].frag.pending_free = 0;
  r.devices[0].frag.pending_free_requested = 0;
  const std::string none = render_text(r, kMaxTextWidth);
  CHECK_FALSE(has(none, "pending free"));
  CHECK_FALSE(has(none, "without the pending frees"));
}

TEST_CASE("warnings: history_truncated says why the history is truncated", "[report]") {
  Warning w;
  w.code = Code::HistoryTruncated;
  HistoryTruncatedFacts f;
  f.requested = 1 << 20;
  f.reserved = 2 << 20;
  f.allocations = 7;
  f.evidence.entries = 100000;

  f.kind = Truncation::LateStart;
  w.facts = f;
  std::string m = warning_text(w);
  CHECK(has(m, "recording started after memory was already in use"));
  CHECK(has(m, "_record_memory_history"));
  CHECK(has(m, "1.0 MiB in 7 allocations and 2.0 MiB of segments were live before the first event"));
  CHECK_FALSE(has(m, "ring buffer"));

  f.kind = Truncation::Wrapped;
  f.evidence.max_entries = 100000;
  w.facts = f;
  m = warning_text(w);
  CHECK(has(m, "the ring buffer of max_entries=100,000 wrapped"));
  CHECK(has(m, "larger max_entries"));

  f.evidence.max_entries = -1;
  w.facts = f;
  m = warning_text(w);
  CHECK(has(m, "does not record max_entries"));
  CHECK(has(m, "100,000 entries are a round number"));

  f.kind = Truncation::Unknown;
  w.facts = f;
  m = warning_text(w);
  CHECK(has(m, "cannot tell whether recording started late or the ring buffer wrapped (100,000 entries)"));
}

TEST_CASE("warnings: end_state_mismatch names each counter that differs, active included", "[report]") {
  Warning w;
  w.code = Code::EndStateMismatch;
  EndStateFacts f;
  f.truncated = true;
  f.replay.allocated = 3 << 20;
  f.dump.allocated = 1 << 20;
  f.replay.active = 1 << 20;
  w.facts = f;
  CHECK(has(warning_text(w), "differs from the dump by +2.0 MiB allocated, +1.0 MiB active (expected with a truncated history)"));
  f.truncated = false;
  w.facts = f;
  CHECK(has(warning_text(w), "active 1048576, reserved 0) differs from the dumped segments"));
}

TEST_CASE("diff: the active peak beside the other three, except for profiler traces", "[report]") {
  Diff d;
  d.a = filled_view();
  d.b = filled_view();
  d.b.devices[0].peak_active.bytes += 1 << 20;
  d.peak_delta[3] = 1 << 20;  // the analysis's delta (diff.cpp), which the renderers show
  CHECK(has(render_diff_text(d, kMaxTextWidth), "\n  active   "));
  CHECK(has(render_diff_markdown(d), "| active | "));
  CHECK(nlohmann::json::parse(render_diff_json(d))["delta"]["peak"]["active_bytes"] == 1 << 20);
  d.b.devices[0].reported_totals = true;
  CHECK_FALSE(has(render_diff_text(d, kMaxTextWidth), "\n  active   "));
}
