// The OUT OF MEMORY section: the four real recordings that hit an OOM
// against what PyTorch itself said (the exception's text and the counters
// the recorder took in its except block, tests/data/real/*.truth.json), and
// the section's sentences for edge-case numbers.
#include <catch2/catch.hpp>

#include <cctype>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <regex>
#include <string>

#include "report/oom_report.hpp"
#include "snapdiff/analysis/analysis.hpp"
#include "snapdiff/analysis/chart_data.hpp"
#include "snapdiff/input/input.hpp"
#include "snapdiff/report/chart.hpp"
#include "snapdiff/report/report.hpp"
#include "test_util.hpp"

using namespace snapdiff;

namespace {

struct Case {
  const char* file;
  const char* stem;
  OomCause cause;
};
// The cause each recording was made to show (its truth's config): a cap set
// with set_per_process_memory_fraction for three, fragmentation under a cap
// for ans_oom_frag.
const Case kCases[] = {
    {"ans_oom_cap_gpt2.pickle.gz", "ans_oom_cap_gpt2", OomCause::ProcessCap},
    {"small_oom.pickle", "small_oom", OomCause::ProcessCap},
    {"ans_oom_frag.pickle.gz", "ans_oom_frag", OomCause::Fragmentation},
    {"oom_expandable.pickle.gz", "oom_expandable", OomCause::ProcessCap},
};

struct Run {
  Trace trace;
  Analysis analysis;
};
const Run& run(const std::string& file) {
  static std::map<std::string, Run> runs;
  auto it = runs.find(file);
  if (it == runs.end()) {
    // Analysed in place: the analysis's frame table refers to the trace.
    it = runs.emplace(file, Run{load_trace(test::real_data(file)), {}}).first;
    it->second.analysis = analyze(it->second.trace, {});
  }
  return it->second;
}

// PyTorch's format_size() (c10/cuda/CUDACachingAllocator.cpp), which writes
// every figure of the OOM message.
std::string format_size(uint64_t size) {
  char b[64];
  if (size <= 1024) std::snprintf(b, sizeof b, "%llu bytes", (unsigned long long)size);
  else if (size <= 1048576) std::snprintf(b, sizeof b, "%.2f KiB", double(size) / 1024.0);
  else if (size <= 1073741824ULL) std::snprintf(b, sizeof b, "%.2f MiB", double(size) / 1048576.0);
  else std::snprintf(b, sizeof b, "%.2f GiB", double(size) / 1073741824.0);
  return b;
}

std::string message(const nlohmann::json& t) {
  const auto& o = t.at("oom");
  return o.is_string() ? o.get<std::string>() : o.at("message").get<std::string>();
}

// The figure before `after` in the message ("256.00 MiB" of "Tried to allocate 256.00 MiB").
std::string figure(const std::string& msg, const std::string& before, const std::string& after) {
  const std::regex re(before + "([0-9.]+ (?:bytes|KiB|MiB|GiB))" + after);
  std::smatch m;
  if (!std::regex_search(msg, m, re)) return "";
  return m[1];
}

// The bytes a format_size() figure stands for, as [lo, hi): it rounds to two decimals.
std::pair<double, double> figure_range(const std::string& f) {
  double v = 0;
  char unit[8] = {0};
  REQUIRE(std::sscanf(f.c_str(), "%lf %7s", &v, unit) == 2);
  const std::string u = unit;
  const double scale = u == "GiB" ? 1073741824.0 : u == "MiB" ? 1048576.0 : u == "KiB" ? 1024.0 : 1.0;
  return {(v - 0.005) * scale, (v + 0.005) * scale};
}

const OomView& the_oom(const Run& r) {
  REQUIRE(r.analysis.ooms.size() == 1);
  return r.analysis.ooms.front();
}

const DeviceAnalysis& device_of(const Run& r, int device) {
  for (const DeviceAnalysis& d : r.analysis.devices)
    if (d.device == device) return d;
  FAIL("no device " << device);
  return r.analysis.devices.front();
}

}  // namespace

TEST_CASE("OOM: what was asked, CUDA's free bytes, the allocator's counters and the cause agree with PyTorch's message",
          "[analysis]") {
  for (const Case& c : kCases) {
    INFO(c.file);
    const Run& r = run(c.file);
    const nlohmann::json t = test::truth(c.stem);
    const std::string msg = message(t);
    const OomView& v = the_oom(r);
    CHECK(v.errors == t.at("memory_stats").at("num_ooms").get<uint64_t>());
    // "Tried to allocate X": the segment the allocator asked CUDA for.
    const std::string asked = figure(msg, "Tried to allocate ", "\\.");
    REQUIRE(!asked.empty());
    CHECK(format_size(v.segment_size) == asked);
    CHECK(v.request <= v.segment_size);
    // "... of which X is free": cudaMemGetInfo at the error.
    CHECK(format_size(v.device_free) == figure(msg, "of which ", " is free"));
    // "Of the allocated memory X is allocated by PyTorch, and Y is reserved by
    // PyTorch but unallocated": the counters when it raised (no private pools here).
    CHECK(format_size(uint64_t(v.held.allocated)) == figure(msg, "Of the allocated memory ", " is allocated by PyTorch"));
    CHECK(format_size(uint64_t(v.held.reserved - v.held.allocated)) == figure(msg, "and ", " is reserved by PyTo"));
    CHECK(v.cause == c.cause);
    // The cap: "X allowed" in the message, the exact cap where the recorder noted it.
    const std::string allowed = figure(msg, "", " allowed");
    REQUIRE(!allowed.empty());
    REQUIRE(v.capped);
    const auto [lo, hi] = figure_range(allowed);
    CHECK(double(v.cap_below) > lo);
    CHECK(double(v.cap_at_least) < hi);
    if (t["oom"].is_object() && t["oom"].contains("cap_bytes")) {
      const int64_t cap = t["oom"]["cap_bytes"].get<int64_t>();
      CHECK(v.cap_at_least <= cap);
      CHECK(cap < v.cap_below);
      CHECK(v.cap_at_least > 0);
      // CUDA's free bytes as the except block read them: nothing went back to CUDA in between.
      CHECK(v.device_free == t["oom"]["mem_get_info"][0].get<uint64_t>());
    }
  }
}

TEST_CASE("OOM: a fragmented cache — the allocator at the OOM equals memory_stats, no block fits, expandable would",
          "[analysis]") {
  const Run& r = run("ans_oom_frag.pickle.gz");
  const nlohmann::json o = test::truth("ans_oom_frag").at("oom");
  const nlohmann::json& ms = o.at("memory_stats");
  const OomView& v = the_oom(r);
  // The recorder held every tensor through the except block: its counters are the OOM's.
  CHECK(v.held.allocated == o.at("memory_allocated").get<int64_t>());
  CHECK(v.held.reserved == o.at("memory_reserved").get<int64_t>());
  CHECK(v.held.allocated == ms.at("allocated_bytes.all.current").get<int64_t>());
  CHECK(v.held.reserved == ms.at("reserved_bytes.all.current").get<int64_t>());
  CHECK(v.held.requested == ms.at("requested_bytes.all.current").get<int64_t>());
  // Free cached blocks are the split segment's inactive pieces, all of them.
  CHECK(v.free_cached == ms.at("inactive_split_bytes.all.current").get<int64_t>());
  CHECK(v.free_cached == v.held.reserved - v.held.allocated);
  CHECK(v.free_blocks == ms.at("inactive_split.all.current").get<uint64_t>());
  CHECK(v.largest_free_block == uint64_t(20) << 20);  // every other 20 MiB piece freed: none adjacent
  CHECK(v.request == o.at("asked").get<uint64_t>());  // 400 MiB
  CHECK(v.stream_free >= int64_t(v.request));
  CHECK(v.stream_largest_free < v.request);
  // Live at the OOM: the 25 pieces kept.
  CHECK(v.live_allocations == ms.at("allocation.all.current").get<uint64_t>());
  CHECK(v.live_requested == ms.at("requested_bytes.all.current").get<int64_t>());
  // 500 MiB allocated + 400 MiB is within the 1000 MiB it held (below the 1200 MiB cap).
  CHECK(v.expandable_need == v.held.allocated + int64_t(v.request));
  CHECK(v.expandable_fits);
  CHECK(v.expandable_need <= o.at("cap_bytes").get<int64_t>());
}

TEST_CASE("OOM: a per-process cap — reserved and the free cache at the OOM equal memory_stats", "[analysis]") {
  const Run& r = run("ans_oom_cap_gpt2.pickle.gz");
  const nlohmann::json o = test::truth("ans_oom_cap_gpt2").at("oom");
  const nlohmann::json& ms = o.at("memory_stats");
  const OomView& v = the_oom(r);
  CHECK(v.held.reserved == o.at("memory_reserved").get<int64_t>());
  CHECK(v.held.reserved == ms.at("reserved_bytes.all.current").get<int64_t>());
  // By the except block the failed step's tensors were freed (allocated fell),
  // but none of them lay in a split segment: the inactive split pieces, which
  // are all the free cache left once the allocator returned what it could, stayed.
  CHECK(v.free_cached == ms.at("inactive_split_bytes.all.current").get<int64_t>());
  CHECK(v.free_blocks == ms.at("inactive_split.all.current").get<uint64_t>());
  CHECK(v.held.allocated >= o.at("memory_allocated").get<int64_t>());
  CHECK(v.held.allocated <= o.at("max_memory_allocated").get<int64_t>());
  CHECK(v.max_reserved <= o.at("max_memory_reserved").get<int64_t>());
  // The free cache could not serve 256 MiB.
  CHECK(v.stream_free < int64_t(v.request));
  CHECK(v.request == uint64_t(256) << 20);
}

TEST_CASE("OOM: what is live at the OOM adds up to the requested counter there", "[analysis]") {
  for (const Case& c : kCases) {
    INFO(c.file);
    const Run& r = run(c.file);
    const OomView& v = the_oom(r);
    const DeviceAnalysis& d = device_of(r, v.device);
    REQUIRE(v.event_index >= 0);
    CHECK(v.live_requested == d.replay.requested[size_t(v.event_index)]);
    CHECK(v.held.requested == d.replay.requested[size_t(v.event_index)]);
    CHECK(v.held.reserved == d.replay.reserved[size_t(v.event_index)]);
    CHECK(std::accumulate(v.categories.begin(), v.categories.end(), int64_t(0)) == v.live_requested);
    CHECK(std::accumulate(v.category_allocations.begin(), v.category_allocations.end(), uint64_t(0)) ==
          v.live_allocations);
    int64_t sites = v.other_sites.requested_bytes;
    for (const SiteRow& s : v.sites) sites += s.requested_bytes;
    CHECK(sites == v.live_requested);
    for (size_t i = 1; i < v.sites.size(); ++i) CHECK(v.sites[i - 1].requested_bytes >= v.sites[i].requested_bytes);
    CHECK(v.free_cached >= v.stream_free);
    CHECK(v.largest_free_block >= v.stream_largest_free);
  }
}

TEST_CASE("OOM: the section comes first in the text report, JSON has `oom`, HTML opens with it", "[report]") {
  for (const Case& c : kCases) {
    INFO(c.file);
    const Run& r = run(c.file);
    const Report view = report_view(r.analysis);
    const std::string text = render_text(view);
    const size_t oom = text.find("\nOUT OF MEMORY  cuda:0");
    REQUIRE(oom != std::string::npos);
    CHECK(text.compare(0, oom + 1, "snapdiff report: " + view.input_name + "\n\n") == 0);
    CHECK(oom < text.find("\nINPUT\n"));
    CHECK(oom < text.find("\nPEAK "));
    CHECK(text.find("live at the OOM by category") != std::string::npos);
    const auto j = nlohmann::json::parse(render_json(view));
    REQUIRE(j.contains("oom"));
    const auto& o = j["oom"];
    CHECK(o["cause"] == oom_cause_name(c.cause));
    CHECK(o["allocator"]["reserved_bytes"] == view.ooms[0].held.reserved);
    CHECK(o["requested_bytes"] == view.ooms[0].request);
    CHECK(o["explanation"].size() >= 2);
    // The JSON's first keys: the OOM right after the input.
    const auto ordered = nlohmann::ordered_json::parse(render_json(view));
    auto it = ordered.begin();
    CHECK((++(++(++it))).key() == "oom");
    const std::string html =
        render_html(view, [&](const ChartOptions& co) { return chart_series(r.analysis, r.trace, co); });
    CHECK(html.find("<section id=\"oom\">") < html.find("<section id=\"d0-peak\">"));
  }
  const Run& frag = run("ans_oom_frag.pickle.gz");
  // The sentences wrap at 100 columns: read them as one line.
  std::string text = std::regex_replace(render_text(report_view(frag.analysis)), std::regex("\n +"), " ");
  CHECK(text.find("no block was large enough (fragmentation)") != std::string::npos);
  CHECK(text.find("With expandable_segments:True it would likely have fit") != std::string::npos);
  // A run without an OOM has neither.
  const Trace t = load_trace(test::real_data("small_bf16.pickle"));
  const Report none = analyze_report(t, {});
  CHECK(none.ooms.empty());
  CHECK(render_text(none).find("OUT OF MEMORY") == std::string::npos);
  CHECK_FALSE(nlohmann::json::parse(render_json(none)).contains("oom"));
}

namespace {

// A sentence as a reader meets it: a capital first, a full stop last, no
// doubled spaces or punctuation, no "1 blocks", no negative or undecided
// size, no range whose two ends read the same.
void plain_english(const std::string& s) {
  INFO(s);
  REQUIRE(!s.empty());
  CHECK(std::isupper(static_cast<unsigned char>(s.front())));
  CHECK(s.back() == '.');
  for (const char* bad : {"  ", " ,", " .", "..", ",,", "::", " 1 blocks", " 1 errors", " 1 allocations", "nan", "inf ",
                          "0.00x", " -", "()", "( ", " )"})
    CHECK(s.find(bad) == std::string::npos);
  const std::regex range("at least ([0-9.,]+ [KMGTPE]?i?B) and below ([0-9.,]+ [KMGTPE]?i?B)");
  std::smatch m;
  if (std::regex_search(s, m, range)) CHECK(m[1] != m[2]);
}

OomView base() {
  OomView v;
  v.errors = 1;
  v.event_index = 0;
  v.request = 512;
  v.segment_size = 2 << 20;
  v.device_free = 0;
  return v;
}

}  // namespace

TEST_CASE("OOM: the section's sentences read as plain English for edge-case numbers", "[report]") {
  std::vector<OomView> views;
  {  // A cap hit at the most it ever held, nothing cached, a one-byte-wide cap range.
    OomView v = base();
    v.cause = OomCause::ProcessCap;
    v.capped = true;
    v.device_free = 1 << 30;
    v.held.reserved = v.max_reserved = int64_t(3) << 30;
    v.cap_at_least = v.max_reserved;
    v.cap_below = v.cap_at_least + 1;
    views.push_back(v);
    v.cap_at_least = 0;  // the allocator once held more than the cap could be: only the upper bound
    v.cap_below = 2 << 20;
    v.free_cached = 1024;
    v.free_blocks = 1;
    v.largest_free_block = 1024;
    views.push_back(v);
    v.stream_free = 1024, v.stream_free_blocks = 1, v.stream_largest_free = 1024;
    v.free_cached = 5000;
    v.free_blocks = 2;
    v.request = 4096;
    views.push_back(v);
    v.stream_free = 8192, v.stream_largest_free = 8192;  // a block large enough the allocator did not take
    v.free_cached = 8192;
    views.push_back(v);
    v.expandable = true;  // already expandable
    views.push_back(v);
  }
  {  // Fragmentation, with and without a cap, fitting and not.
    OomView v = base();
    v.cause = OomCause::Fragmentation;
    v.request = 400 << 20;
    v.segment_size = 400 << 20;
    v.stream_free = v.free_cached = 500 << 20;
    v.stream_free_blocks = v.free_blocks = 25;
    v.stream_largest_free = v.largest_free_block = 20 << 20;
    v.held.allocated = 500 << 20;
    v.held.reserved = v.max_reserved = 1000 << 20;
    v.capped = true;
    v.device_free = uint64_t(138) << 30;
    v.cap_at_least = v.max_reserved;
    v.cap_below = v.held.reserved + int64_t(v.segment_size);
    v.expandable_need = 900 << 20;
    v.expandable_room = 1000 << 20;
    v.expandable_fits = true;
    views.push_back(v);
    v.capped = false;
    v.device_free = 0;
    v.expandable_room = v.held.reserved;
    v.expandable_fits = false;
    views.push_back(v);
  }
  {  // The device full or shared: total known or not, nothing outside or much.
    OomView v = base();
    v.cause = OomCause::OtherProcesses;
    v.device_total = uint64_t(80) << 30;
    v.device_free = 30 << 20;
    v.held.reserved = int64_t(12) << 30;
    v.others = int64_t(v.device_total) - int64_t(v.device_free) - v.held.reserved;
    views.push_back(v);
    v.cause = OomCause::DeviceFull;
    v.held.reserved = int64_t(v.device_total - v.device_free);
    v.others = 0;
    views.push_back(v);
    v.device_total = 0;
    v.others = -1;
    views.push_back(v);
  }
  for (const OomView& v : views) {
    const std::vector<std::string> s = detail::oom_sentences(v);
    CHECK(s.size() >= 2);
    for (const std::string& x : s) plain_english(x);
  }
  // The text header counts errors in words.
  Report r;
  DeviceView d;
  d.events = 1;
  r.devices.push_back(d);
  r.ooms.push_back(views.front());
  CHECK(detail::oom_text(r).find("(1 error: event 0 of 1, ") != std::string::npos);
  r.ooms[0].errors = 2;
  CHECK(detail::oom_text(r).find("(2 errors; the first explained: event 0 of 1, ") != std::string::npos);
  // Sizes told apart only as far as needed.
  CHECK(detail::bytes_apart(3214934016, 3258974208) == "2.99 GiB");
  CHECK(detail::bytes_apart(3258974208, 3214934016) == "3.04 GiB");
  CHECK(detail::bytes_apart(1 << 30, (1 << 30) + 1) == "1,073,741,824 B");
  CHECK(detail::bytes_apart(400 << 20, 1 << 30) == "400.0 MiB");
}

TEST_CASE("OOM: an entry without CUDA's free bytes (snapcapture) takes them from the nearest device-memory sample",
          "[analysis]") {
  const Trace t = load_trace(test::required(std::string(SNAPDIFF_SOURCE_DIR) + "/tests/data/capture/small_oom_fp8.snap"));
  const Analysis a = analyze(t, {});
  REQUIRE(a.ooms.size() == 1);
  const OomView& v = a.ooms[0];
  const Event& e = t.devices.at(0).events.at(size_t(v.event_index));
  REQUIRE(e.kind == EventKind::Oom);
  CHECK(e.addr == 0);  // the shim records no device_free
  REQUIRE(!v.free_sample.empty());
  bool found = false;
  for (const DeviceMemorySample& m : t.device_memory)
    if (std::string(t.strings.get(m.label)) == v.free_sample) found = found || m.free_bytes == v.device_free;
  CHECK(found);
  // The shim ran under --memory-limit: a cap, the device nearly empty.
  CHECK(v.cause == OomCause::ProcessCap);
  CHECK(v.device_free > v.segment_size);
}
