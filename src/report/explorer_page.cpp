// The explorer's data in the page (snapdiff/report/explorer.hpp): the
// container of docs/explorer.md, gzip'd and base64'd. Names from the input
// live only in the header JSON inside it, never in markup.
#include <zlib.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "report/text_util.hpp"
#include "snapdiff/report/chart.hpp"
#include "snapdiff/report/explorer.hpp"
#include "snapdiff/analysis/analysis.hpp"

namespace snapdiff {

namespace {

using nlohmann::json;

// The arrays of the container, appended one after another, each at a
// multiple of 8 from the arrays' start.
class Arrays {
 public:
  template <class T, class Out>
  json add(const std::vector<T>& v, const char* type) {
    pad();
    const size_t off = bin_.size();
    bin_.resize(off + v.size() * sizeof(Out));
    Out* p = reinterpret_cast<Out*>(bin_.data() + off);
    for (size_t i = 0; i < v.size(); ++i) p[i] = Out(v[i]);  // little-endian machines only (x86-64, arm64)
    list_.push_back({{"type", type}, {"offset", off}, {"length", v.size()}});
    return json{{"array", list_.size() - 1}};
  }
  json f64(const std::vector<int64_t>& v) { return add<int64_t, double>(v, "f64"); }
  json f64(const std::vector<uint64_t>& v) { return add<uint64_t, double>(v, "f64"); }
  json f64(const std::vector<double>& v) { return add<double, double>(v, "f64"); }
  json i32(const std::vector<int32_t>& v) { return add<int32_t, int32_t>(v, "i32"); }
  json u16(const std::vector<uint16_t>& v) { return add<uint16_t, uint16_t>(v, "u16"); }
  // The header's "arrays", with offsets from the container's start.
  json list(size_t base) const {
    json l = list_;
    for (json& e : l) e["offset"] = e["offset"].get<size_t>() + base;
    return l;
  }
  const std::string& bin() const { return bin_; }

 private:
  void pad() {
    while (bin_.size() % 8) bin_.push_back('\0');
  }
  std::string bin_;
  json list_ = json::array();
};

const char* kind_word(FrameKind k) {
  switch (k) {
    case FrameKind::UserPython: return "user";
    case FrameKind::LibraryPython: return "library";
    case FrameKind::Native: return "native";
    case FrameKind::Scope: return "scope";
    case FrameKind::Internal: return "internal";
  }
  return "internal";
}

json run_json(const ExplorerPageRun& pr, Arrays& ar) {
  const ExplorerRun& r = *pr.run;
  json j;
  j["label"] = pr.label;
  j["input"] = pr.input;
  j["device"] = r.device;
  j["events"] = r.events;
  j["time_us"] = r.has_times ? ar.f64(r.column_time_us) : json(nullptr);
  json cats = json::array();
  for (const std::string& c : r.categories) cats.push_back({{"name", c}, {"color", category_color(c)}});
  j["categories"] = std::move(cats);
  json ph = json::array(), its = json::array();
  for (const ExplorerPhase& p : r.phases)
    ph.push_back({{"start", p.start}, {"end", p.end}, {"phase", phase_name(p.phase)}, {"iteration", p.iteration}});
  for (const ExplorerPhase& p : r.iterations) its.push_back({{"index", p.iteration}, {"start", p.start}, {"end", p.end}});
  j["phases"] = std::move(ph);
  j["iterations"] = std::move(its);
  j["peak"] = {{"event", r.peak_event},         {"requested", r.peak_requested}, {"allocated", r.peak_allocated},
               {"reserved", r.peak_reserved},   {"by_category", r.peak_by_category}};
  json ooms = json::array();
  for (size_t i = 0; i < r.ooms.size(); ++i)
    ooms.push_back({{"event", r.ooms[i].event}, {"requested", r.ooms[i].requested}, {"label", "OOM " + std::to_string(i + 1)}});
  j["ooms"] = std::move(ooms);
  json levels = json::array();
  for (const ExplorerLevel& lv : r.levels)
    levels.push_back({{"buckets", lv.buckets},
                      {"event", ar.i32(lv.event)},
                      {"by_category", ar.f64(lv.by_category)},
                      {"requested", ar.f64(lv.requested)},
                      {"allocated", ar.f64(lv.allocated)},
                      {"reserved", ar.f64(lv.reserved)}});
  j["levels"] = std::move(levels);
  j["allocs"] = {{"count", r.alloc_event.size()},
                 {"total", r.total_allocations},
                 {"note", r.allocations_note},
                 {"complete_from", r.complete_from},
                 {"complete_to", r.complete_to},
                 {"alloc", ar.i32(r.alloc_event)},
                 {"free", ar.i32(r.free_event)},
                 {"size", ar.f64(r.size)},
                 {"addr", ar.f64(r.addr)},
                 {"category", ar.u16(r.category)},
                 {"stack", ar.i32(r.stack)},
                 {"evidence", ar.u16(r.evidence)},
                 {"kernel", r.kernel.empty() ? json(nullptr) : ar.i32(r.kernel)}};
  json frames = json::array();
  for (size_t i = 0; i < r.frame_labels.size(); ++i)
    frames.push_back({{"label", r.frame_labels[i]}, {"kind", kind_word(r.frame_kinds[i])}});
  j["frames"] = std::move(frames);
  j["stacks"] = {{"parent", ar.i32(r.stack_parent)}, {"frame", ar.i32(r.stack_frame)}, {"site", ar.i32(r.stack_site)}};
  json sites = json::array();
  for (const SiteFrames& s : r.sites) sites.push_back(detail::site_line(s, r.site_shown, " \xe2\x86\x90 "));
  j["sites"] = std::move(sites);
  json ev = json::array();
  for (const ExplorerEvidence& e : r.evidences) ev.push_back({{"category", e.category}, {"rule", e.rule}, {"text", e.text}});
  j["evidence"] = std::move(ev);
  j["kernels"] = r.kernels;
  json states = json::array();
  for (const ExplorerState& s : r.states)
    states.push_back({{"label", s.label},
                      {"event", s.event},
                      {"segments",
                       {{"addr", ar.f64(s.seg_addr)}, {"size", ar.f64(s.seg_size)}, {"pool", ar.i32(s.seg_pool)},
                        {"stream", ar.f64(s.seg_stream)}}},
                      {"blocks",
                       {{"segment", ar.i32(s.block_segment)}, {"addr", ar.f64(s.block_addr)},
                        {"size", ar.f64(s.block_size)}, {"alloc", ar.i32(s.block_alloc)}}}});
  j["states"] = std::move(states);
  return j;
}

std::string gzip(const std::string& in) {
  z_stream z{};
  if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) throw std::runtime_error("zlib: deflateInit2 failed");
  std::string out;
  out.resize(deflateBound(&z, uLong(in.size())) + 64);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = uInt(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = uInt(out.size());
  const int rc = deflate(&z, Z_FINISH);
  const size_t n = z.total_out;
  deflateEnd(&z);
  if (rc != Z_STREAM_END) throw std::runtime_error("zlib: deflate did not finish");
  out.resize(n);
  return out;
}

std::string base64(const std::string& in) {
  static const char k[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.resize((in.size() + 2) / 3 * 4);
  const auto* p = reinterpret_cast<const unsigned char*>(in.data());
  size_t i = 0, o = 0;
  for (; i + 3 <= in.size(); i += 3) {
    const uint32_t v = uint32_t(p[i]) << 16 | uint32_t(p[i + 1]) << 8 | p[i + 2];
    out[o++] = k[v >> 18];
    out[o++] = k[v >> 12 & 63];
    out[o++] = k[v >> 6 & 63];
    out[o++] = k[v & 63];
  }
  if (i < in.size()) {
    const uint32_t v = uint32_t(p[i]) << 16 | (i + 1 < in.size() ? uint32_t(p[i + 1]) << 8 : 0);
    out[o++] = k[v >> 18];
    out[o++] = k[v >> 12 & 63];
    out[o++] = i + 1 < in.size() ? k[v >> 6 & 63] : '=';
    out[o++] = '=';
  }
  return out;
}

}  // namespace

std::string explorer_data(const std::string& kind, const std::string& title, const std::vector<ExplorerPageRun>& runs) {
  Arrays ar;
  json h;
  h["version"] = 1;
  h["kind"] = kind;
  h["title"] = title;
  json rs = json::array();
  for (const ExplorerPageRun& r : runs) rs.push_back(run_json(r, ar));
  h["runs"] = std::move(rs);
  // The arrays' offsets count from the container's start, after the header:
  // settle the header's length (its offsets' digits change it).
  size_t base = 0;
  std::string text;
  for (int round = 0; round < 8; ++round) {
    h["arrays"] = ar.list(base);
    text = h.dump(-1, ' ', false, json::error_handler_t::replace);
    const size_t next = (8 + text.size() + 7) / 8 * 8;
    if (next == base) break;
    base = next;
  }
  std::string c;
  c.reserve(base + ar.bin().size());
  c.append("SDX1");
  const uint32_t hl = uint32_t(text.size());
  for (int i = 0; i < 4; ++i) c.push_back(char(hl >> (8 * i) & 0xff));
  c.append(text);
  c.resize(base, '\0');
  c.append(ar.bin());
  return base64(gzip(c));
}

std::string explorer_report_data(const Analysis& a, const Trace& t, const std::string& input, const std::string& title,
                                 const ExplorerOptions& o) {
  std::vector<ExplorerRun> runs;
  for (size_t i = 0; i < a.devices.size(); ++i)
    if (const Device* dv = t.find_device(a.devices[i].device); dv && !dv->events.empty())
      runs.push_back(explorer_run(a, t, i, o));
  std::vector<ExplorerPageRun> pr;
  for (const ExplorerRun& er : runs) pr.push_back({"", input, &er});
  return explorer_data("report", title, pr);
}

}  // namespace snapdiff
