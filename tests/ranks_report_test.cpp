// The renderers of many ranks (snapdiff/report/ranks_report.hpp) on views
// made by hand from real per-rank recordings (tests/data/real/ranks/: FSDP2
// GPT-2 with uneven data, each rank read as `snapdiff report FILE` reads it),
// a fourth rank that could not be read, and metrics computed here from the
// views. The numbers the tables show are checked against PyTorch's own (each
// snapshot's .truth.json).
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "snapdiff/analysis/diff.hpp"
#include "snapdiff/analysis/ranks.hpp"
#include "snapdiff/input/input.hpp"
#include "snapdiff/report/diff_report.hpp"
#include "snapdiff/report/ranks_report.hpp"
#include "snapdiff/report/report.hpp"
#include "test_util.hpp"

using namespace snapdiff;
using nlohmann::json;

namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }
std::string detail_pad(std::string s, size_t w) { return s.size() >= w ? s : s + std::string(w - s.size(), ' '); }

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t p = text.find(part); p != std::string::npos; p = text.find(part, p + part.size())) ++n;
  return n;
}

// The recordings standing for ranks 0, 1 and 2, with their analyses kept
// alive (diff_reports reads their frame tables).
struct Run {
  std::string stem, name;
  Trace trace;
  Analysis analysis;
  Report report;
};
// Each Run stays where it was made: its analysis points into its trace.
const std::vector<std::unique_ptr<Run>>& run_list() {
  static const std::vector<std::unique_ptr<Run>> v = [] {
    std::vector<std::unique_ptr<Run>> out;
    const std::pair<const char*, const char*> files[] = {
        {"ranks/fsdp_gpt2_uneven/snapshot_0", "run/fsdp_gpt2_uneven/snapshot_0.pickle.gz"},
        {"ranks/fsdp_gpt2_uneven/snapshot_1", "run/fsdp_gpt2_uneven/snapshot_1.pickle.gz"},
        {"ranks/fsdp_gpt2_uneven/snapshot_2", "run/fsdp_gpt2_uneven/snapshot_2.pickle.gz"}};
    for (const auto& [stem, name] : files) {
      auto r = std::make_unique<Run>();
      r->stem = stem;
      r->name = name;
      r->trace = load_trace(test::real_data(std::string(stem) + ".pickle.gz"));
      ReportOptions o;
      o.input_name = name;
      r->analysis = analyze(r->trace, o);
      r->report = report_view(r->analysis);
      out.push_back(std::move(r));
    }
    return out;
  }();
  return v;
}
struct Runs {
  const Run& operator[](size_t i) const { return *run_list()[i]; }
  size_t size() const { return run_list().size(); }
};
Runs runs() { return {}; }

int64_t truth_peak(const std::string& stem, const char* key = "requested_bytes.all.peak") {
  return test::truth(stem)["memory_stats"][key].get<int64_t>();
}

// A metric over the entries read, as the analysis describes it (ranks.hpp).
RankMetric metric(const RanksView& v, std::string name, std::string key, const std::function<int64_t(const Report&)>& of) {
  RankMetric m;
  m.name = std::move(name);
  m.key = std::move(key);
  std::vector<std::pair<int64_t, size_t>> read;
  for (size_t i = 0; i < v.ranks.size(); ++i) {
    const int64_t x = v.ranks[i].report ? of(*v.ranks[i].report) : 0;
    m.values.push_back(x);
    if (v.ranks[i].report) read.push_back({x, i});
  }
  std::vector<std::pair<int64_t, size_t>> sorted = read;
  std::sort(sorted.begin(), sorted.end());
  m.max = sorted.back().first;
  m.min = sorted.front().first;
  m.median = sorted[(sorted.size() - 1) / 2].first;
  bool max_found = false, min_found = false;
  for (const auto& [x, i] : read) {  // the first entry holding each
    if (x == m.max && !max_found) m.max_entry = i, max_found = true;
    if (x == m.min && !min_found) m.min_entry = i, min_found = true;
  }
  m.max_over_median = m.median ? double(m.max) / double(m.median) : 0;
  return m;
}

const DeviceView& top(const Report& r) { return r.devices[r.peak_device]; }

// Ranks 0..2 read (sequences of 256, 512 and 384 tokens), rank 3 failed;
// the worst (rank 1) against the median (rank 2); the worst shown.
RanksView view() {
  RanksView v;
  for (size_t i = 0; i < runs().size(); ++i) {
    RankEntry e;
    e.name = runs()[i].name;
    e.rank = int(i);
    e.rank_from = "name (megatron)";
        e.report = runs()[i].report;
    v.ranks.push_back(std::move(e));
  }
  RankEntry bad;
  bad.name = "run/fsdp_gpt2_uneven/snapshot_3.pickle.gz";
  bad.rank = 3;
  bad.rank_from = "name (megatron)";
    bad.error = bad.name + ": byte 12: unexpected pickle opcode 0xff";
  bad.exit_code = 3;
  v.ranks.push_back(bad);
  v.superseded = {"run/old/snapshot_0.pickle.gz"};
  v.read = 3;
  v.failed = 1;
  v.metrics.push_back(metric(v, "peak requested", "peak_requested_bytes", [](const Report& r) { return top(r).peak_requested.bytes; }));
  v.metrics.push_back(metric(v, "peak reserved", "peak_reserved_bytes", [](const Report& r) { return top(r).peak_reserved.bytes; }));
  // One that does not vary: left out of the imbalance.
  v.metrics.push_back(metric(v, "OOMs", "ooms", [](const Report&) { return 0; }));
  v.worst = 1;
  v.median = 2;
  DiffOptions o;
  o.a_name = runs()[2].name;
  o.b_name = runs()[1].name;
  v.worst_vs_median = diff_reports(runs()[2].analysis, runs()[1].analysis, o);
  v.shown = 1;
  return v;
}

// ---- A small JSON Schema check (the keywords schemas/ use) ---------------
json load_schema(const std::string& file) {
  return json::parse(test::read_file(test::required(std::string(SNAPDIFF_SOURCE_DIR) + "/schemas/" + file)));
}
struct Validator {
  std::map<std::string, json> files;
  std::vector<std::string> errors;
  const json& file(const std::string& f) {
    if (!files.count(f)) files[f] = load_schema(f);
    return files[f];
  }
  bool type_is(const json& v, const std::string& t) {
    if (t == "null") return v.is_null();
    if (t == "object") return v.is_object();
    if (t == "array") return v.is_array();
    if (t == "string") return v.is_string();
    if (t == "boolean") return v.is_boolean();
    if (t == "integer") return v.is_number_integer();
    if (t == "number") return v.is_number();
    return false;
  }
  // Errors of `v` against schema `s` of file `f`, at `path`.
  void check(const json& v, const json& s, const std::string& f, const std::string& path, std::vector<std::string>& out) {
    if (s.is_boolean()) {
      if (!s.get<bool>()) out.push_back(path + ": not allowed");
      return;
    }
    if (s.contains("$ref")) {
      std::string ref = s["$ref"];
      const size_t hash = ref.find('#');
      const std::string target = hash == 0 ? f : ref.substr(0, hash);
      const std::string pointer = hash == std::string::npos ? "" : ref.substr(hash + 1);
      const json& root = file(target);
      check(v, pointer.empty() ? root : root.at(json::json_pointer(pointer)), target, path, out);
    }
    if (s.contains("anyOf")) {
      bool ok = false;
      std::vector<std::string> first;
      for (const json& alt : s["anyOf"]) {
        std::vector<std::string> e;
        check(v, alt, f, path, e);
        if (e.empty()) ok = true;
        else if (first.empty()) first = e;
      }
      if (!ok) out.push_back(path + ": matches none of anyOf (" + (first.empty() ? "" : first.front()) + ")");
    }
    if (s.contains("allOf"))
      for (const json& part : s["allOf"]) check(v, part, f, path, out);
    if (s.contains("oneOf")) {
      size_t matched = 0;
      for (const json& alt : s["oneOf"]) {
        std::vector<std::string> e;
        check(v, alt, f, path, e);
        matched += e.empty();
      }
      if (matched != 1) out.push_back(path + ": matches " + std::to_string(matched) + " of oneOf");
    }
    if (s.contains("const") && v != s["const"]) out.push_back(path + ": not " + s["const"].dump());
    if (s.contains("enum") && std::find(s["enum"].begin(), s["enum"].end(), v) == s["enum"].end())
      out.push_back(path + ": " + v.dump() + " not in the enum");
    if (s.contains("type")) {
      bool ok = false;
      if (s["type"].is_array())
        for (const json& t : s["type"]) ok = ok || type_is(v, t.get<std::string>());
      else ok = type_is(v, s["type"].get<std::string>());
      if (!ok) {
        out.push_back(path + ": " + v.type_name() + " is not " + s["type"].dump());
        return;
      }
    }
    if (s.contains("minimum") && v.is_number() && v.get<double>() < s["minimum"].get<double>()) out.push_back(path + ": below minimum");
    if (v.is_object()) {
      if (s.contains("required"))
        for (const json& k : s["required"])
          if (!v.contains(k.get<std::string>())) out.push_back(path + ": lacks " + k.get<std::string>());
      for (const auto& [k, x] : v.items()) {
        if (s.contains("properties") && s["properties"].contains(k)) check(x, s["properties"][k], f, path + "." + k, out);
        else if (s.contains("additionalProperties")) check(x, s["additionalProperties"], f, path + "." + k, out);
      }
    }
    if (v.is_array() && s.contains("items"))
      for (size_t i = 0; i < v.size(); ++i) check(v[i], s["items"], f, path + "[" + std::to_string(i) + "]", out);
  }
  std::vector<std::string> validate(const json& v, const std::string& schema_file) {
    std::vector<std::string> out;
    check(v, file(schema_file), schema_file, "$", out);
    return out;
  }
};

}  // namespace

TEST_CASE("ranks text: a row per rank with PyTorch's peaks, a failed rank's error, the imbalance, the worst rank", "[report]") {
  const RanksView v = view();
  const std::string text = render_ranks_text(v, kMaxTextWidth);
  INFO(text.substr(0, 6000));
  CHECK(has(text, "snapdiff report: 3 ranks read, 1 failed; 1 file superseded (earlier steps of a rank, or its regular dump beside an OOM dump)\n"));
  // One row per rank, its file shortened to its last two components, the
  // peaks PyTorch recorded.
  for (size_t i = 0; i < runs().size(); ++i) {
    const std::regex row("\\n[* ] +" + std::to_string(i) + "  fsdp_gpt2_uneven/snapshot_" + std::to_string(i) +
                         "\\.pickle\\.gz +([^\\n]*)\\n");
    std::smatch m;
    REQUIRE(std::regex_search(text, m, row));
    const std::string cells = m[1];
    CHECK(has(cells, human_bytes(truth_peak(runs()[i].stem))));
    CHECK(has(cells, human_bytes(truth_peak(runs()[i].stem, "reserved_bytes.all.peak"))));
    const DeviceView& d = top(runs()[i].report);
    CHECK(has(cells, "iteration " + std::to_string(d.peak_iteration) + ", " + phase_name(d.peak_phase)));
    CHECK(!has(cells, "error"));
  }
  // The worst rank is marked; each history is complete (recorded from the start).
  CHECK(std::regex_search(text, std::regex("\\n\\*    1  fsdp_gpt2_uneven/snapshot_1")));
  for (int i = 0; i < 3; ++i)
    CHECK(std::regex_search(text, std::regex("\\n[* ]    " + std::to_string(i) + "  fsdp_gpt2_uneven/snapshot_[^\\n]* complete ")));
  // The failed rank: its one-line error instead of numbers.
  CHECK(has(text, "     3  " + detail_pad("fsdp_gpt2_uneven/snapshot_3.pickle.gz", 40) + "  error: " + v.ranks[3].error + "\n"));

  // The imbalance: the metrics that vary, with where their max and min are.
  const RankMetric& peak = v.metrics[0];
  char ratio[32];
  std::snprintf(ratio, sizeof ratio, "%.2fx", double(truth_peak("ranks/fsdp_gpt2_uneven/snapshot_1")) / double(truth_peak("ranks/fsdp_gpt2_uneven/snapshot_2")));
  CHECK(std::regex_search(text, std::regex("\\n  peak requested +max +" + std::regex_replace(human_bytes(peak.max), std::regex("\\."), "\\.") +
                                           " on rank 1 +min +[^\\n]* on rank 0 +median +[^\\n]*max/median " + ratio + "\\n")));
  CHECK(has(text, "\n  peak reserved "));
  CHECK(!has(text, "\n  OOMs "));  // the same on every rank

  // The worst rank against the median one: the diff's own findings.
  CHECK(has(text, "\nWORST RANK 1 AGAINST THE MEDIAN RANK 2\n"));
  CHECK(has(text, "\n  A is the median rank 2 (" + runs()[2].name + "), B the worst rank 1 (" + runs()[1].name + ")\n"));
  REQUIRE(!v.worst_vs_median->findings.empty());
  CHECK(has(text, "  * " + finding_text(v.worst_vs_median->findings.front()).substr(0, 40)));
  CHECK(has(text, "\nCATEGORIES AT EACH PEAK"));
  CHECK(has(text, "\nSITES AT EACH PEAK"));
  // Then the worst rank's full report, as `snapdiff report FILE` prints it.
  const std::string heading = "\nRANK 1 (" + runs()[1].name + ")\n\n";
  REQUIRE(has(text, heading));
  CHECK(text.substr(text.find(heading) + heading.size()) == render_text(runs()[1].report, kMaxTextWidth));
}

TEST_CASE("ranks text: a rank not told shows as ?, one rank read has nothing to compare", "[report]") {
  RanksView v;
  RankEntry e;
  e.name = "snapshots/a/b/c/snapshot.pickle";
  e.report = runs()[0].report;
  v.ranks.push_back(e);
  v.read = 1;
  v.worst = v.median = v.shown = 0;
  const std::string text = render_ranks_text(v, kMaxTextWidth);
  CHECK(has(text, "snapdiff report: 1 rank read\n"));
  CHECK(has(text, "\n*    ?  c/snapshot.pickle "));
  CHECK(has(text, "\nWORST RANK ? AGAINST THE MEDIAN RANK ?\n  the worst rank is the median rank: nothing to compare\n"));
  CHECK(has(text, "none: every metric is the same on every rank read"));
}

TEST_CASE("ranks JSON: valid against ranks.schema.json, embedding the shown report and the worst-against-median diff", "[report]") {
  const RanksView v = view();
  const json j = json::parse(render_ranks_json(v));
  Validator val;
  const auto errors = val.validate(j, "ranks.schema.json");
  INFO((errors.empty() ? std::string() : errors.front()));
  CHECK(errors.empty());
  CHECK(j["schema"] == "snapdiff/ranks/1");
  REQUIRE(j["ranks"].size() == 4);
  for (size_t i = 0; i < runs().size(); ++i) {
    const json& r = j["ranks"][i];
    CHECK(r["rank"] == int(i));
    CHECK(r["error"].is_null());
    CHECK(r["summary"]["peak"]["requested_bytes"] == truth_peak(runs()[i].stem));
    CHECK(r["summary"]["peak"]["allocated_bytes"] == truth_peak(runs()[i].stem, "allocated_bytes.all.peak"));
    CHECK(r["summary"]["peak"]["reserved_bytes"] == truth_peak(runs()[i].stem, "reserved_bytes.all.peak"));
    int64_t sum = 0;
    for (const auto& [k, b] : r["summary"]["categories_at_peak"].items()) sum += b.get<int64_t>();
    CHECK(sum == truth_peak(runs()[i].stem));  // every byte at the peak in a category
  }
  CHECK(j["ranks"][2]["summary"]["truncation"] == "none");
  CHECK(j["ranks"][3]["error"] == v.ranks[3].error);
  CHECK(j["ranks"][3]["exit_code"] == 3);
  CHECK(j["ranks"][3]["summary"].is_null());
  CHECK(j["worst"] == 1);
  CHECK(j["worst_rank"] == 1);
  CHECK(j["median"] == 2);
  CHECK(j["shown"] == 1);
  CHECK(j["metrics"][0]["max_entry"] == 1);
  CHECK(j["metrics"][0]["min_rank"] == 0);
  CHECK(j["metrics"][0]["max"] == truth_peak("ranks/fsdp_gpt2_uneven/snapshot_1"));
  CHECK(j["metrics"][0]["varies"] == true);
  CHECK(j["metrics"][2]["varies"] == false);
  CHECK(j["shown_report"] == json::parse(render_json(runs()[1].report)));
  CHECK(j["worst_vs_median"] == json::parse(render_diff_json(*v.worst_vs_median)));
  CHECK(j["worst_vs_median"]["delta"]["peak"]["requested_bytes"] == truth_peak("ranks/fsdp_gpt2_uneven/snapshot_1") - truth_peak("ranks/fsdp_gpt2_uneven/snapshot_2"));

  // The check itself catches a document that is not one.
  json broken = j;
  broken["ranks"][0].erase("summary");
  broken["shown_report"]["peak"] = "high";
  CHECK(val.validate(broken, "ranks.schema.json").size() >= 2);
}

TEST_CASE("ranks markdown: a table row per rank, the failed one with its error, the imbalance", "[report]") {
  const RanksView v = view();
  const std::string md = render_ranks_markdown(v);
  INFO(md);
  CHECK(has(md, "### snapdiff: 3 ranks read, 1 failed"));
  CHECK(has(md, "| rank | file | requested | allocated | reserved |"));
  for (size_t i = 0; i < runs().size(); ++i) {
    const std::string lead = "| " + std::to_string(i) + " | `fsdp_gpt2_uneven/snapshot_" + std::to_string(i) +
                             ".pickle.gz` | " + human_bytes(truth_peak(runs()[i].stem)) + " | " +
                             human_bytes(truth_peak(runs()[i].stem, "allocated_bytes.all.peak")) + " | ";
    CHECK(has(md, "\n" + lead));
  }
  CHECK(has(md, "\n| 3 | `fsdp_gpt2_uneven/snapshot_3.pickle.gz` | error: "));
  CHECK(has(md, "\n- peak requested: the most " + human_bytes(truth_peak("ranks/fsdp_gpt2_uneven/snapshot_1")) + " on rank 1, the least " +
                    human_bytes(truth_peak("ranks/fsdp_gpt2_uneven/snapshot_0")) + " on rank 0, the median " + human_bytes(truth_peak("ranks/fsdp_gpt2_uneven/snapshot_2"))));
  CHECK(!has(md, "- OOMs"));
  CHECK(has(md, "\nThe worst rank (the highest requested peak): rank 1.\n"));
  CHECK(has(md, "**Worst rank 1 against the median rank 2**"));
}

TEST_CASE("ranks HTML: one SVG per rank on one axis, the worst highlighted, names escaped", "[report]") {
  RanksView v = view();
  // A rank file with markup in its name, whose report lacks its first phase
  // span (a rank whose recording began later): its spans must sit at the
  // same x as rank 0's.
  RankEntry odd;
  odd.name = "run/<script>alert(1)</script>.pickle";
  odd.report = runs()[0].report;
  DeviceView& d = odd.report->devices[odd.report->peak_device];
  REQUIRE(d.phases.size() >= 3);
  d.phases.erase(d.phases.begin());
  v.ranks.push_back(odd);
  const std::string html = render_ranks_html(v);
  CHECK(!has(html, "<script>alert"));
  CHECK(has(html, "&lt;script&gt;alert(1)&lt;/script&gt;"));
  CHECK(!has(html, "http://"));
  CHECK(!has(html, "https://"));
  // One SVG per rank read (the failed one shows its error), one viewBox.
  const std::regex svg("<svg class=\"rank( worst)?\" viewBox=\"([^\"]*)\"");
  std::set<std::string> boxes;
  size_t svgs = 0, worst = 0;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), svg); it != std::sregex_iterator(); ++it) {
    ++svgs;
    worst += (*it)[1].matched;
    boxes.insert((*it)[2]);
  }
  CHECK(svgs == 4);
  CHECK(worst == 1);
  CHECK(boxes.size() == 1);
  CHECK(count(html, "<svg") == 4);
  CHECK(has(html, "not read: " + v.ranks[3].error.substr(0, 20)));
  // Rank 0 and the odd rank hold the same spans but its first: the same
  // points, on one x axis and one y scale.
  std::vector<std::string> lines;
  const std::regex poly("<svg class=\"rank[^>]*>(.*?)</svg>");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), poly); it != std::sregex_iterator(); ++it) lines.push_back((*it)[1]);
  REQUIRE(lines.size() == 4);
  auto points = [](const std::string& s) {
    std::vector<std::string> out;
    const std::regex p("<polyline points=\"([^\"]*)\"");
    for (auto it = std::sregex_iterator(s.begin(), s.end(), p); it != std::sregex_iterator(); ++it) out.push_back((*it)[1]);
    return out;
  };
  const auto full = points(lines[0]), cut = points(lines[3]);
  REQUIRE(!full.empty());
  REQUIRE(!cut.empty());
  // The cut rank's line is the full one without its first span's three points.
  std::string joined_full, joined_cut;
  for (const auto& s : full) joined_full += s;
  for (const auto& s : cut) joined_cut += s;
  CHECK(joined_cut.size() < joined_full.size());
  CHECK(joined_full.substr(joined_full.size() - joined_cut.size()) == joined_cut);
  CHECK(has(html, "<section id=\"worst\">"));
  CHECK(has(html, finding_text(v.worst_vs_median->findings.front()).substr(0, 30)));
}

namespace {
RanksDiff ranks_diff() {
  RanksDiff d;
  // Rank 0: A read snapshot_0, B snapshot_1 (as if rank 0 got longer
  // sequences); rank 1: snapshot_1 on both sides (no change); rank 2: B failed.
  DiffOptions o;
  o.a_name = "a/rank0.pickle";
  o.b_name = "b/rank0.pickle";
  RankPair p0;
  p0.rank = 0;
  p0.a_name = "a/rank0.pickle";
  p0.b_name = "b/rank0.pickle";
  p0.diff = diff_reports(runs()[0].analysis, runs()[1].analysis, o);
  o.a_name = "a/rank1.pickle";
  o.b_name = "b/rank1.pickle";
  RankPair p1;
  p1.rank = 1;
  p1.a_name = "a/rank1.pickle";
  p1.b_name = "b/rank1.pickle";
  p1.diff = diff_reports(runs()[1].analysis, runs()[1].analysis, o);
  RankPair p2;
  p2.rank = 2;
  p2.a_name = "a/rank2.pickle";
  p2.b_name = "b/rank2.pickle";
  p2.b_error = "b/rank2.pickle: byte 0: not a snapshot";
  d.pairs = {p0, p1, p2};
  d.only_a = {5};
  d.only_b = {6};
  RankOutlier x;
  x.rank = 0;
  x.entry = 0;
  x.delta = p0.diff->peak_delta[0];
  x.others_median = 0;
  x.category = p0.diff->categories.front().name;
  x.category_delta = p0.diff->categories.front().delta();
  d.outliers = {x};
  d.shown = 0;
  return d;
}
}  // namespace

TEST_CASE("ranks diff: rank r against rank r, the ranks on one side, the outlier, the shown pair's diff", "[report]") {
  const RanksDiff d = ranks_diff();
  const int64_t change = truth_peak("ranks/fsdp_gpt2_uneven/snapshot_1") - truth_peak("ranks/fsdp_gpt2_uneven/snapshot_0");
  const std::string text = render_ranks_diff_text(d, kMaxTextWidth);
  INFO(text.substr(0, 4000));
  CHECK(has(text, "snapdiff diff: 3 ranks side by side"));
  CHECK(std::regex_search(text, std::regex("\\n     0 +" + std::regex_replace(human_bytes(truth_peak("ranks/fsdp_gpt2_uneven/snapshot_0")), std::regex("\\."), "\\.") +
                                           " +[^ ]+ GiB +\\+[^ ]+ [MG]iB  a/rank0\\.pickle -> b/rank0\\.pickle\\n")));
  CHECK(has(text, "\n     1 "));
  CHECK(has(text, "\n     2  error in B: b/rank2.pickle: byte 0: not a snapshot\n"));
  CHECK(has(text, "  rank 5: only in A\n  rank 6: only in B\n"));
  CHECK(has(text, "  * rank 0 grows " + human_delta(change) + ", the other ranks do not change (median): its activation "));
  const std::string heading = "\nRANK 0: A AGAINST B\n\n";
  REQUIRE(has(text, heading));
  CHECK(text.substr(text.find(heading) + heading.size()) == render_diff_text(*d.pairs[0].diff, kMaxTextWidth));

  const json j = json::parse(render_ranks_diff_json(d));
  Validator val;
  const auto errors = val.validate(j, "ranks_diff.schema.json");
  INFO((errors.empty() ? std::string() : errors.front()));
  CHECK(errors.empty());
  CHECK(j["pairs"][0]["delta_peak_requested_bytes"] == change);
  CHECK(j["pairs"][1]["delta_peak_requested_bytes"] == 0);
  CHECK(j["pairs"][2]["delta_peak_requested_bytes"].is_null());
  CHECK(j["pairs"][2]["b_error"] == d.pairs[2].b_error);
  CHECK(j["only_a"] == json{5});
  CHECK(j["outliers"][0]["delta_bytes"] == change);
  CHECK(j["shown_diff"] == json::parse(render_diff_json(*d.pairs[0].diff)));

  const std::string md = render_ranks_diff_markdown(d);
  CHECK(has(md, "\n| 0 | " + human_bytes(truth_peak("ranks/fsdp_gpt2_uneven/snapshot_0")) + " | " + human_bytes(truth_peak("ranks/fsdp_gpt2_uneven/snapshot_1")) + " | " +
                    human_delta(change) + " |\n"));
  CHECK(has(md, "\n| 2 | error in B: b/rank2.pickle: byte 0: not a snapshot | | |\n"));
  CHECK(has(md, "Rank 5 is only in A."));
}

TEST_CASE("ranks text and JSON: the rank that ran out of memory shows its OOMs", "[report]") {
  // Megatron-Bridge's layout: rank 1's dump is its OOM dump.
  const std::pair<int, const char*> files[] = {
      {0, "memsnap_0"}, {1, "memsnap_oom_rank-1"}, {2, "memsnap_2"}};
  std::vector<Trace> traces;
  RanksView v;
  for (const auto& [rank, stem] : files) {
    const std::string path = "ranks/oom_rank_gpt2/" + std::string(stem);
    traces.push_back(load_trace(test::real_data(path + ".pickle.gz")));
    RankEntry e;
    e.name = path + ".pickle.gz";
    e.rank = rank;
    e.oom_file = rank == 1;
    ReportOptions o;
    o.input_name = e.name;
    e.report = analyze_report(traces.back(), o);
    v.ranks.push_back(e);
  }
  v.read = 3;
  v.worst = v.median = v.shown = 1;
  const std::string text = render_ranks_text(v, kMaxTextWidth);
  const json j = json::parse(render_ranks_json(v));
  for (size_t i = 0; i < 3; ++i) {
    const std::string stem = "ranks/oom_rank_gpt2/" + std::string(files[i].second);
    const json t = test::truth(stem)["memory_stats"];
    const int64_t ooms = t.value("num_ooms", int64_t(0));
    INFO(stem);
    std::smatch m;
    REQUIRE(std::regex_search(text, m, std::regex("\\n[* ]    " + std::to_string(i) + "  oom_rank_gpt2/" + files[i].second +
                                                  "\\.pickle\\.gz +[^\\n]*[0-9] ([KMG]iB|B) +([0-9]+)  complete ")));
    CHECK(m[2] == std::to_string(ooms));
    CHECK(j["ranks"][i]["summary"]["ooms"] == ooms);
    CHECK(j["ranks"][i]["oom_file"] == (i == 1));
  }
  CHECK(has(text, "\nRANK 1 (ranks/oom_rank_gpt2/memsnap_oom_rank-1.pickle.gz)\n"));
}

TEST_CASE("ranks renderers on build_ranks_view's view of a real run: the schema, one SVG per rank, the worst rank's report", "[report]") {
  std::vector<RankEntry> entries;
  for (size_t i = 0; i < runs().size(); ++i) {
    RankEntry e;
    e.name = runs()[i].name;
    e.rank = int(i);
    e.rank_from = "name (megatron)";
    e.report = runs()[i].report;
    entries.push_back(std::move(e));
  }
  const RanksView v = build_ranks_view(entries, {}, {});
  REQUIRE(v.worst < v.ranks.size());
  CHECK(v.ranks[v.worst].rank == 1);  // the longest sequences: PyTorch's highest peak (truth)
  const std::string text = render_ranks_text(v, kMaxTextWidth);
  CHECK(has(text, "snapdiff report: 3 ranks read\n"));
  CHECK(has(text, "\nWORST RANK 1 AGAINST THE MEDIAN RANK 2\n"));
  CHECK(has(text, "\nRANK 1 (" + runs()[1].name + ")\n\n" + render_text(runs()[1].report, kMaxTextWidth)));
  Validator val;
  const json j = json::parse(render_ranks_json(v));
  const auto errors = val.validate(j, "ranks.schema.json");
  INFO((errors.empty() ? std::string() : errors.front()));
  CHECK(errors.empty());
  CHECK(j["worst_rank"] == 1);
  const std::string html = render_ranks_html(v);
  CHECK(count(html, "<svg class=\"rank") == 3);
}
