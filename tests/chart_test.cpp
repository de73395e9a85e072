// Charts and the HTML report: the pictures' totals equal the report's
// figures, DOT parses back with Graphviz, SVG is well-formed with one legend
// entry per category, PNG has the size asked for, HTML references nothing
// outside itself.
#include <cgraph.h>

#include <catch2/catch.hpp>
#include <map>
#include <regex>
#include <set>

#include "snapdiff/report/chart.hpp"
#include "snapdiff/input/input.hpp"
#include "test_util.hpp"

using namespace snapdiff;

namespace {

using test::Run;
using test::run_of;

// The HTML report of a run, its charts drawn from the run's analysis.
std::string html_of(const Run& run) {
  return render_html(report_view(run.r), [&](const ChartOptions& co) { return chart_series(run.r, run.t, co); });
}

std::string sample(const std::string& name) { return std::string(SNAPDIFF_SOURCE_DIR) + "/sample_snapshots/" + name; }

const DeviceAnalysis& top(const Analysis& r) { return r.devices[r.peak_device]; }

// A strict enough XML check for Graphviz's SVG: every tag closes in order,
// attributes are quoted, entities are known.
bool well_formed(const std::string& x, std::string* why) {
  std::vector<std::string> open;
  size_t i = 0;
  while (i < x.size()) {
    if (x[i] != '<') {
      if (x[i] == '&') {
        const size_t e = x.find(';', i);
        const std::string ent = e == std::string::npos ? "" : x.substr(i + 1, e - i - 1);
        if (!(ent == "amp" || ent == "lt" || ent == "gt" || ent == "quot" || ent == "apos" ||
              (!ent.empty() && ent[0] == '#'))) {
          *why = "bad entity at " + std::to_string(i);
          return false;
        }
      }
      ++i;
      continue;
    }
    if (x.compare(i, 4, "<!--") == 0) {
      i = x.find("-->", i);
      if (i == std::string::npos) return *why = "open comment", false;
      i += 3;
      continue;
    }
    if (x.compare(i, 2, "<?") == 0 || x.compare(i, 2, "<!") == 0) {
      i = x.find('>', i) + 1;
      continue;
    }
    const size_t e = x.find('>', i);
    if (e == std::string::npos) return *why = "open tag", false;
    std::string tag = x.substr(i + 1, e - i - 1);
    if (tag.empty()) return *why = "empty tag", false;
    if (tag[0] == '/') {
      if (open.empty() || open.back() != tag.substr(1)) {
        *why = "</" + tag.substr(1) + "> closes " + (open.empty() ? std::string("nothing") : open.back());
        return false;
      }
      open.pop_back();
    } else {
      // Quotes must pair up.
      size_t q = 0;
      for (char c : tag) q += c == '"';
      if (q % 2) return *why = "unbalanced quotes in <" + tag + ">", false;
      if (tag.back() != '/') open.push_back(tag.substr(0, tag.find_first_of(" \n\t")));
    }
    i = e + 1;
  }
  if (!open.empty()) return *why = "unclosed <" + open.back() + ">", false;
  return true;
}

int node_statements(const std::string& dot) {
  static const std::regex stmt(R"(^\s+(n\d+|bg|l\d+[ab]) \[)");
  int n = 0;
  std::istringstream in(dot);
  for (std::string line; std::getline(in, line);) n += std::regex_search(line, stmt) ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("flame chart: the root is the peak's requested bytes exactly; children never exceed their parent", "[report][chart]") {
  for (const std::string& path : {test::real_data("small_fp8.pickle"), test::real_data("med_bf16_cpp.pickle"),
                                  test::real_data("small_oom.pickle"), sample("fp8_no_pw.snap")}) {
    INFO(path);
    auto p = run_of(path);
    const DeviceAnalysis& d = top(p->r);
    ChartOptions o;
    o.kind = ChartKind::Flame;
    const FlameGraph g = flame_graph(p->r, p->t, o);
    REQUIRE(!g.boxes.empty());
    CHECK(g.total == d.replay.peak_requested.bytes);
    CHECK(g.boxes[0].bytes == d.replay.peak_requested.bytes);
    CHECK(g.total == d.peak_live_requested);
    int64_t cats = 0;
    for (int64_t v : g.category_bytes) cats += v;
    CHECK(cats == g.total);
    CHECK(g.boxes.size() <= kMaxFlameBoxes);
    std::map<int, int64_t> children;
    for (size_t i = 1; i < g.boxes.size(); ++i) {
      const FlameBox& b = g.boxes[i];
      REQUIRE(b.parent >= 0);
      REQUIRE(size_t(b.parent) < i);  // depth first
      children[b.parent] += b.bytes;
      CHECK(b.depth == g.boxes[size_t(b.parent)].depth + 1);
      int64_t sum = 0;
      for (int64_t v : b.by_category) sum += v;
      CHECK(sum == b.bytes);
    }
    for (auto& [parent, sum] : children) CHECK(sum <= g.boxes[size_t(parent)].bytes);
  }
}

TEST_CASE("flame chart: snapcapture's numbered scopes are one box ('layer 0-31')", "[report][chart]") {
  auto p = run_of(sample("fp8_no_pw.snap"));
  ChartOptions o;
  const FlameGraph g = flame_graph(p->r, p->t, o);
  bool layers = false;
  for (const FlameBox& b : g.boxes) {
    CHECK(b.label.find("layer 17") == std::string::npos);  // never one box per layer
    if (b.label == "layer 0-31") {
      layers = true;
      CHECK(b.members == 32);
    }
  }
  CHECK(layers);
}

TEST_CASE("differential flame chart: A and B totals are both peaks", "[report][chart]") {
  auto a = run_of(test::real_data("small_fp8.pickle"));
  auto b = run_of(test::real_data("small_fp8_pw.pickle"));
  ChartOptions o;
  o.kind = ChartKind::Flame;
  const FlameGraph g = flame_graph_diff(a->r, a->t, b->r, b->t, o);
  REQUIRE(g.diff);
  CHECK(g.total_a == top(a->r).replay.peak_requested.bytes);
  CHECK(g.total_b == top(b->r).replay.peak_requested.bytes);
  CHECK(g.total == g.total_a + g.total_b);
  for (const FlameBox& box : g.boxes) CHECK(box.bytes == box.a + box.b);
  const std::string dot = chart_dot_diff(chart_series_diff(a->r, a->t, b->r, b->t, o), o);
  CHECK(dot.find("class=\"new\"") != std::string::npos);   // FP8 weights re-created by the step
  CHECK(dot.find("class=\"shrank\"") != std::string::npos);  // bf16 weights and Adam's state moved
}

TEST_CASE("timeline: the stacked columns reach the requested peak exactly; the lines reach allocated and reserved", "[report][chart]") {
  for (const std::string& name : {"small_bf16", "small_fp8_pw", "med_bf16_cpp", "small_bf16_expandable"}) {
    INFO(name);
    auto p = run_of(test::real_data(name + ".pickle"));
    const DeviceAnalysis& d = top(p->r);
    ChartOptions o;
    const TimelineData td = timeline_data(p->r, p->t, o, 560);
    REQUIRE(td.columns.size() == 560);
    int64_t req = 0, alloc = 0, res = 0;
    bool peak_column = false;
    for (const TimelineColumn& c : td.columns) {
      int64_t sum = 0;
      for (int64_t v : c.by_category) sum += v;
      CHECK(sum == c.requested);  // categories sum to the requested bytes at every column
      req = std::max(req, c.requested);
      alloc = std::max(alloc, c.allocated);
      res = std::max(res, c.reserved);
      if (c.event == d.peak_index) {
        peak_column = true;
        CHECK(c.by_category == d.categories);
      }
    }
    CHECK(peak_column);
    CHECK(req == d.replay.peak_requested.bytes);
    CHECK(alloc == d.replay.peak_allocated.bytes);
    CHECK(res == d.replay.peak_reserved.bytes);
    CHECK(td.peak_requested == d.replay.peak_requested.bytes);
  }
}

TEST_CASE("lifetime: every allocation is drawn or summed; bands hold the peak's bytes; packed bars never overlap", "[report][chart]") {
  for (auto group : {LifetimeGroup::Category, LifetimeGroup::Site}) {
    for (const std::string& path : {test::real_data("small_fp8.pickle"), sample("fp8_no_pw.snap")}) {
      INFO(path << (group == LifetimeGroup::Site ? " by site" : " by category"));
      auto p = run_of(path);
      const DeviceAnalysis& d = top(p->r);
      ChartOptions o;
      o.kind = ChartKind::Lifetime;
      o.group = group;
      o.top = 300;
      const LifetimeData ld = lifetime_data(p->r, p->t, o, 500);
      uint64_t nonzero = 0;
      for (const Allocation& a : d.attr.allocations) nonzero += a.requested > 0;
      CHECK(ld.drawn + ld.aggregated == nonzero);
      CHECK(ld.drawn <= 300);
      int64_t at_peak = 0;
      for (const LifetimeBand& b : ld.bands) {
        at_peak += b.peak_bytes;
        CHECK(b.bars.size() + b.rest_allocations == b.allocations);
        CHECK(b.height >= b.max_live);
        for (size_t i = 0; i < b.bars.size(); ++i)
          for (size_t j = i + 1; j < b.bars.size(); ++j) {
            const LifetimeBar &x = b.bars[i], &y = b.bars[j];
            if (x.x0 < y.x1 && y.x0 < x.x1) {
              const bool apart = x.offset + x.bytes <= y.offset || y.offset + y.bytes <= x.offset;
              CHECK(apart);
            }
          }
      }
      CHECK(at_peak == d.replay.peak_requested.bytes);
      if (group == LifetimeGroup::Site) CHECK(ld.bands.size() <= kLifetimeSiteBands + 1);
    }
  }
  // The cap holds whatever is asked.
  auto p = run_of(test::real_data("med_bf16_cpp.pickle"));
  ChartOptions o;
  o.top = 100000;
  CHECK(lifetime_data(p->r, p->t, o, 500).drawn <= kMaxLifetimeBars);
}

TEST_CASE("chart series: the kind's data, the device and peak; two runs on one axis and shared band scales", "[analysis][chart]") {
  auto a = run_of(test::real_data("small_fp8.pickle"));
  auto b = run_of(test::real_data("small_fp8_pw.pickle"));
  ChartOptions o;
  o.kind = ChartKind::Timeline;
  const ChartSeries s = chart_series(a->r, a->t, o);
  CHECK(s.input == a->r.input_name);
  CHECK(s.device == top(a->r).device);
  CHECK(s.peak_event == top(a->r).peak_index);
  CHECK(s.timeline.columns.size() == s.geometry.columns);
  CHECK(s.timeline.peak_requested == top(a->r).replay.peak_requested.bytes);
  CHECK(s.flame.boxes.empty());
  CHECK(s.lifetime.bands.empty());
  o.kind = ChartKind::Lifetime;
  o.group = LifetimeGroup::Site;
  const ChartSeriesPair p = chart_series_diff(a->r, a->t, b->r, b->t, o);
  CHECK((p.a.label == "A" && p.b.label == "B"));
  CHECK(p.a.lifetime.time_axis == p.b.lifetime.time_axis);
  CHECK(std::max(p.a.lifetime.buckets, p.b.lifetime.buckets) == p.a.geometry.columns);
  std::map<std::string, std::pair<double, int64_t>> scales;
  for (const ChartSeries* run : {&p.a, &p.b})
    for (const LifetimeBand& band : run->lifetime.bands) {
      CHECK(band.scale_points >= 30);
      CHECK(band.scale_bytes >= band.max_live);
      // (The other sites' band has no name: the report names it by its count.)
      CHECK(band.name.empty() == (band.other_sites > 0));
      const std::string key = band.other_sites > 0 ? "other " + std::to_string(band.other_sites) : band.name;
      auto [it, added] = scales.emplace(key, std::pair{band.scale_points, band.scale_bytes});
      if (!added) CHECK(it->second == std::pair{band.scale_points, band.scale_bytes});
      for (const LifetimeBar& bar : band.bars) CHECK(!bar.site.empty());
    }
}

TEST_CASE("DOT round trip: Graphviz parses every chart back with every node", "[report][chart]") {
  auto p = run_of(test::real_data("small_fp8.pickle"));
  auto b = run_of(test::real_data("small_fp8_pw.pickle"));
  for (ChartKind k : {ChartKind::Flame, ChartKind::Lifetime, ChartKind::Timeline}) {
    for (int two = 0; two < 2; ++two) {
      INFO(chart_kind_name(k) << (two ? " (two runs)" : ""));
      ChartOptions o;
      o.kind = k;
      const std::string dot =
          two ? chart_dot_diff(chart_series_diff(p->r, p->t, b->r, b->t, o), o) : chart_dot(chart_series(p->r, p->t, o), o);
      CHECK(render_chart(dot, ChartFormat::Dot) == dot);
      Agraph_t* g = agmemread(dot.c_str());
      REQUIRE(g != nullptr);
      CHECK(agnnodes(g) == node_statements(dot));
      CHECK(agnnodes(g) > 20);
      char layout[] = "layout";
      CHECK(std::string(agget(g, layout)) == "nop2");
      agclose(g);
    }
  }
}

TEST_CASE("SVG is well-formed, with one legend entry per category at the peak, and tooltips as titles", "[report][chart]") {
  auto p = run_of(test::real_data("small_fp8.pickle"));
  const DeviceAnalysis& d = top(p->r);
  size_t nonzero = 0;
  for (int64_t v : d.categories) nonzero += v != 0;
  ChartOptions o;
  o.kind = ChartKind::Flame;
  const std::string svg = render_chart(chart_dot(chart_series(p->r, p->t, o), o), ChartFormat::Svg);
  std::string why;
  CHECK(well_formed(svg, &why));
  INFO(why);
  std::set<std::string> legend;
  static const std::regex entry(R"(class="node legend cat&#45;([a-z_]+)\")");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), entry); it != std::sregex_iterator(); ++it)
    legend.insert((*it)[1]);
  CHECK(legend.size() == nonzero);
  for (size_t k = 0; k < d.categories.size(); ++k)
    if (d.categories[k] != 0) CHECK(legend.count(d.attr.categories[k]));
  // One color per category, the same in every chart.
  for (ChartKind k : {ChartKind::Timeline, ChartKind::Lifetime}) {
    o.kind = k;
    const std::string s = render_chart(chart_dot(chart_series(p->r, p->t, o), o), ChartFormat::Svg);
    CHECK(well_formed(s, &why));
    for (const char* cat : {"parameter", "activation", "optimizer_state"})
      CHECK(s.find("class=\"node legend cat&#45;" + std::string(cat) + "\">\n<polygon fill=\"" + category_color(cat)) !=
            std::string::npos);
  }
  CHECK(svg.find("<title>n1</title>") == std::string::npos);  // no internal names on hover
  CHECK(svg.find("<title>all memory live at the peak") != std::string::npos);
  CHECK(svg.find("xlink:title") == std::string::npos);
}

TEST_CASE("PNG has the size of the drawing at 96 dpi; PDF is a PDF", "[report][chart]") {
  auto p = run_of(test::real_data("small_bf16.pickle"));
  for (double width : {1200.0, 900.0}) {
    ChartOptions o;
    o.kind = ChartKind::Timeline;
    o.width = width;
    const std::string dot = chart_dot(chart_series(p->r, p->t, o), o);
    const std::string svg = render_chart(dot, ChartFormat::Svg);
    std::smatch m;
    REQUIRE(std::regex_search(svg, m, std::regex(R"(<svg width="(\d+)pt" height="(\d+)pt")")));
    const int wpt = std::stoi(m[1]), hpt = std::stoi(m[2]);
    CHECK(wpt == int(width));
    const std::string png = render_chart(dot, ChartFormat::Png);
    REQUIRE(png.size() > 24);
    CHECK(png.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0);
    auto be32 = [&](size_t at) {
      return (uint32_t(uint8_t(png[at])) << 24) | (uint32_t(uint8_t(png[at + 1])) << 16) |
             (uint32_t(uint8_t(png[at + 2])) << 8) | uint32_t(uint8_t(png[at + 3]));
    };
    CHECK(be32(16) == uint32_t(std::lround(wpt * 96.0 / 72.0)));
    CHECK(be32(20) == uint32_t(std::lround(hpt * 96.0 / 72.0)));
  }
  ChartOptions o;
  const std::string pdf = render_chart(chart_dot(chart_series(p->r, p->t, o), o), ChartFormat::Pdf);
  CHECK(pdf.compare(0, 5, "%PDF-") == 0);
}

TEST_CASE("chart formats come from the extension; kinds parse", "[report][chart]") {
  ChartFormat f;
  CHECK((chart_format_from_path("a.SVG", &f) && f == ChartFormat::Svg));
  CHECK((chart_format_from_path("x/y.png", &f) && f == ChartFormat::Png));
  CHECK((chart_format_from_path("r.pdf", &f) && f == ChartFormat::Pdf));
  CHECK((chart_format_from_path("r.dot", &f) && f == ChartFormat::Dot));
  CHECK(!chart_format_from_path("r.jpg", &f));
  CHECK(!chart_format_from_path("svg", &f));
  ChartKind k;
  CHECK((parse_chart_kind("lifetime", &k) && k == ChartKind::Lifetime));
  CHECK(!parse_chart_kind("pie", &k));
  // The palette: built-in categories distinct, rule-defined ones stable.
  std::set<std::string> colors;
  for (int i = 0; i < kBuiltinCategoryCount; ++i) colors.insert(category_color(kBuiltinCategories[i]));
  CHECK(colors.size() == size_t(kBuiltinCategoryCount));
  CHECK(category_color("kv_cache") == category_color("kv_cache"));
}

TEST_CASE("HTML report and diff: self-contained, the report's content and three charts per device", "[report][chart][html]") {
  auto a = run_of(test::real_data("small_fp8.pickle"));
  auto b = run_of(test::real_data("small_fp8_pw.pickle"));
  const std::string html = html_of(*a);
  DiffOptions dopt;
  dopt.a_name = "small_fp8.pickle";
  dopt.b_name = "small_fp8_pw.pickle";
  const Diff d = diff_reports(a->r, b->r, dopt);
  const std::string dhtml =
      render_diff_html(d, [&](const ChartOptions& co) { return chart_series_diff(a->r, a->t, b->r, b->t, co); });
  for (const std::string* page : {&html, &dhtml}) {
    CHECK(page->rfind("<!DOCTYPE html>", 0) == 0);
    // Nothing outside the page: no external src/href, no stylesheets or scripts from elsewhere.
    static const std::regex ref(R"((src|href)\s*=\s*["']?\s*(https?:|//))", std::regex::icase);
    CHECK(!std::regex_search(*page, ref));
    CHECK(page->find("<link") == std::string::npos);
    CHECK(page->find("@import") == std::string::npos);
    CHECK(page->find("url(") == std::string::npos);
    CHECK(page->find("<script src") == std::string::npos);
    CHECK(page->find("<!DOCTYPE svg") == std::string::npos);  // SVG inlined without its prolog
    size_t svgs = 0;
    for (size_t p = 0; (p = page->find("<svg", p)) != std::string::npos; ++p) ++svgs;
    CHECK(svgs == 3);
    CHECK(page->find("</html>") != std::string::npos);
  }
  // The report's figures are there.
  const DeviceAnalysis& d0 = top(a->r);
  CHECK(html.find(human_bytes(d0.replay.peak_requested.bytes)) != std::string::npos);
  CHECK(html.find("331,651,264 B") != std::string::npos);
  for (const Finding& f : d0.findings) CHECK(html.find(finding_text(f).substr(0, 40)) != std::string::npos);
  CHECK(dhtml.find("-20.0 MiB") != std::string::npos);
}

TEST_CASE("names of megabytes: every chart is drawn in linear time with bounded labels and tooltips", "[report][chart]") {
  // Fitting a label once tried every prefix of it (quadratic): a 2 MB op
  // name took minutes. Now each chart of such a trace is its usual size.
  const std::string big(2 << 20, 'b');
  const std::string text =
      R"({"schemaVersion": 1, "baseTimeNanoseconds": 1700000000000000000, "traceEvents": [)"
      R"({"ph": "X", "cat": "cpu_op", "name": "c10d::)" + big + R"(", "pid": 1, "tid": 1, "ts": 11.0, "dur": 5.0},)"
      R"({"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 12.0, "s": "t",)"
      R"( "args": {"Device Type": 1, "Device Id": 0, "Addr": 1024, "Bytes": 512, "Total Allocated": 512, "Total Reserved": 2097152}}]})";
  Trace t = load_trace_from_memory(text, "long_names.json");
  Analysis r = analyze(t, {});
  for (ChartKind k : {ChartKind::Flame, ChartKind::Lifetime, ChartKind::Timeline}) {
    INFO(chart_kind_name(k));
    ChartOptions o;
    o.kind = k;
    const std::string dot = chart_dot(chart_series(r, t, o), o);
    CHECK(dot.size() < 200000);
    if (k != ChartKind::Timeline) CHECK(dot.find("c10d::bbbb") != std::string::npos);  // the timeline names no sites
  }
}

TEST_CASE("HTML report of a profiler trace: by op and by kernel at the peak, as in the text report", "[report][chart][html]") {
  auto p = run_of(test::real_data("small_profile.trace.json.gz"));
  REQUIRE(p->r.devices.size() >= 1);
  const DeviceAnalysis& d = p->r.devices[p->r.peak_device];
  REQUIRE(d.has_ops);
  REQUIRE(!d.by_op.empty());
  REQUIRE(!d.by_kernel.empty());
  const std::string html = html_of(*p);
  CHECK(html.find("By op at the peak") != std::string::npos);
  CHECK(html.find("By kernel at the peak") != std::string::npos);
  // The largest rows, with their bytes as the sortable value.
  const std::string op = d.by_op[0].op.empty() ? "(outside every op)" : d.by_op[0].op;
  CHECK(html.find(op) != std::string::npos);
  CHECK(html.find("data-v=\"" + std::to_string(d.by_op[0].bytes) + "\"") != std::string::npos);
  if (!d.by_kernel[0].kernel.empty()) CHECK(html.find(d.by_kernel[0].kernel.substr(0, 30)) != std::string::npos);
  // A snapshot has no ops: no such sections.
  auto s = run_of(test::real_data("small_fp8.pickle"));
  CHECK(html_of(*s).find("By op at the peak") == std::string::npos);
}

TEST_CASE("flame chart of stacks 3,000 frames deep: each path in a few steps, the middle one box", "[analysis][chart]") {
  // Node i of the chain: the user's f<i> at odd depths, nn.Module's call
  // wrapper (plumbing, never drawn) at even ones; an allocation at every
  // depth, the largest at the bottom.
  Trace t;
  const size_t depth = 3000;
  StackId s = 0;
  std::vector<StackId> chain;
  for (size_t i = 1; i <= depth; ++i) {
    Frame f;
    if (i % 2) {
      f.name = t.strings.intern(std::string("f").append(std::to_string(i)));
      f.file = t.strings.intern("/home/u/model.py");
    } else {
      f.name = t.strings.intern("_call_impl");
      f.file = t.strings.intern("/venv/lib/python3.11/site-packages/torch/nn/modules/module.py");
    }
    f.line = int64_t(i);
    s = t.stacks.child(s, t.intern_frame(f));
    chain.push_back(s);
  }
  Device& d = t.device(0);
  d.has_trace = true;
  uint64_t addr = 1 << 20;
  for (StackId x : chain) {
    Event e;
    e.kind = EventKind::Alloc;
    e.addr = addr;
    e.size = x == chain.back() ? uint64_t(1) << 32 : 4096;
    e.stack = x;
    e.time_us = int64_t(addr);
    addr += e.size;
    d.events.push_back(e);
  }
  Analysis r = analyze(t, {});
  ChartOptions o;
  o.kind = ChartKind::Flame;
  const FlameGraph g = flame_graph(r, t, o);
  REQUIRE(!g.boxes.empty());
  CHECK(g.total == r.devices[0].peak_live_requested);
  // The deepest stack keeps 1,500 frames: its outer four, one box for 1,483,
  // its inner thirteen.
  std::vector<std::string> path;
  for (const FlameBox& b : g.boxes)
    if (b.bytes >= int64_t(1) << 32) path.push_back(b.label);
  REQUIRE(path.size() == 19);
  CHECK(path[0] == "all");
  CHECK(path[1] == "f1");
  CHECK(path[4] == "f7");
  CHECK(path[5] == "\xe2\x80\xa6 1483 frames");
  CHECK(path[6] == std::string("f").append(std::to_string(depth - 25)));
  CHECK(path[18] == std::string("f").append(std::to_string(depth - 1)));
}
