// --explain ADDRESS|SITE|CATEGORY: why allocations got their category.
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <unordered_map>

#include "analysis/analyze/analyze_parts.hpp"
#include "analysis/joins/profiler_views.hpp"
#include "analysis/analyze/report_view_build.hpp"
#include "snapdiff/analysis/kernel_join.hpp"
#include "snapdiff/analysis/analysis.hpp"

namespace snapdiff::detail {

namespace {

bool parse_address(const std::string& q, uint64_t* out) {
  if (q.empty()) return false;
  char* end = nullptr;
  errno = 0;
  unsigned long long v = (q.size() > 2 && q[0] == '0' && (q[1] == 'x' || q[1] == 'X'))
                             ? std::strtoull(q.c_str() + 2, &end, 16)
                             : std::strtoull(q.c_str(), &end, 10);
  if (errno != 0 || !end || *end != '\0') return false;
  *out = v;
  return true;
}

// --explain ADDRESS|SITE|CATEGORY: every allocation at that address, or
// every allocation whose stack has a frame matching SITE ("function",
// "file:line", or a substring of "function (file:line)"), or every
// allocation of the category so named, grouped by stack and category.
}  // namespace

void explain_query(const Trace& t, Analysis& r, const std::string& q) {
  r.explain_query = q;
  uint64_t addr = 0;
  const bool by_addr = parse_address(q, &addr);
  const RuleSet& rs = *r.rules;
  auto fill = [&](ExplainItem& it, const DeviceAnalysis& d, const Allocation& al) {
    const Attribution& a = d.attr;
    it.device = d.device;
    it.addr = al.addr;
    it.requested = al.requested;
    it.alloc_event = al.alloc_event;
    it.free_event = al.user_free();
    it.alloc_phase = a.phase_at(al.alloc_event);
    it.alloc_iteration = a.iteration_at(al.alloc_event);
    if (al.user_free() != INT64_MAX) {
      it.free_phase = a.phase_at(al.user_free());
      it.free_iteration = a.iteration_at(al.user_free());
    }
    it.category = a.categories[al.category];
    if (al.rule >= 0) {
      it.rule = rs.rules[size_t(al.rule)].name;
      it.evidence = rs.rules[size_t(al.rule)].evidence;
      // The run's own evidence for each inference the rule relied on.
      const uint32_t used = rs.rules[size_t(al.rule)].facts_any & al.facts;
      for (int f = 0; f < kFactCount; ++f)
        if (used >> f & 1) {
          InferredEvidence e;
          e.fact = kFactNames[f];
          // kFactPreParameter, kFactPreGradient, kFactPreOptimizerState:
          // the groups' facts (worded by the report layer), and any
          // sentence of their own (optimizer state a step replaces).
          if (f >= 1 && f <= 3 && a.pre_trace.blocks[f - 1] > 0) {
            InferredEvidence g = e;
            g.pre_trace = f - 1;
            g.facts = a.pre_trace;
            it.inferred.push_back(std::move(g));
          }
          if (a.fact_evidence[f].empty()) continue;
          e.words = a.fact_evidence[f];
          it.inferred.push_back(std::move(e));
        }
    } else {
      it.rule = "(none)";  // no evidence: the report layer says why from its phases
    }
    it.bytes = int64_t(al.requested);
  };
  // Stacks with a matching frame: each frame tested once, each stack node
  // once (a node matches when its frame or its parent does), for all devices.
  std::vector<int8_t> frame_match, node_match;  // -1: not yet
  auto frame_matches = [&](FrameId fid) {
    if (frame_match.size() <= fid) frame_match.resize(t.frames.size(), -1);
    int8_t& m = frame_match[fid];
    if (m < 0) {
      const Frame& fr = t.frames[fid];
      std::string name(t.strings.get(fr.name)), file(t.strings.get(fr.file));
      std::string base = file.substr(file.rfind('/') == std::string::npos ? 0 : file.rfind('/') + 1);
      std::string line = fr.line >= 0 ? std::to_string(fr.line) : "";
      m = name == q || base + ":" + line == q || file + ":" + line == q || r.frames->label(fid).find(q) != std::string::npos;
    }
    return m != 0;
  };
  auto matches = [&](StackId s) {
    if (node_match.size() < t.stacks.size()) node_match.resize(t.stacks.size(), -1);
    std::vector<StackId> chain;
    StackId x = s;
    for (; x != 0 && node_match[x] < 0; x = t.stacks.node(x).parent) chain.push_back(x);
    bool m = x != 0 && node_match[x] > 0;
    for (size_t i = chain.size(); i-- > 0;) {
      m = m || frame_matches(t.stacks.node(chain[i]).frame);
      node_match[chain[i]] = m;
    }
    return s != 0 && node_match[s] > 0;
  };
  // Inputs with launches and no ops: each allocation's kernels.
  const bool kernels = t.ops.empty() && !t.kernels.empty();
  const StreamLaunches launches = kernels ? StreamLaunches(t, r.kernel_join.recording_first_us) : StreamLaunches(Trace{});
  for (const DeviceAnalysis& d : r.devices) {
    const Attribution& a = d.attr;
    if (by_addr) {
      const Device* dev = kernels ? t.find_device(d.device) : nullptr;
      for (uint32_t id = 0; id < a.allocations.size(); ++id) {
        const Allocation& al = a.allocations[id];
        if (al.addr != addr) continue;
        ++r.explain_total;
        if (r.explain.size() >= 50) continue;
        ExplainItem it;
        fill(it, d, al);
        if (dev) {
          const AllocationKernels k = allocation_kernels(launches, *dev, a, {id})[0];
          auto name = [&](int64_t i) {
            return i < 0 ? std::string() : detail::kernel_display_name(t.strings.get(t.kernels[size_t(i)].name));
          };
          it.has_kernels = true;
          it.kernel = name(k.kernel);
          it.last_kernel = name(k.last);
          it.kernels_while_live = k.while_live;
        }
        it.site = site_frames(*r.frames, al.stack);
        r.explain.push_back(std::move(it));
      }
      continue;
    }
    // A category's name (kv_cache, unknown, ...): its allocations, by stack.
    int by_category = -1;
    for (size_t c = 0; c < a.categories.size(); ++c)
      if (a.categories[c] == q) by_category = int(c);
    std::map<std::pair<StackId, std::string>, ExplainItem> groups;
    for (const Allocation& al : a.allocations) {
      if (by_category >= 0 ? al.category != uint16_t(by_category) : (al.stack == 0 || !matches(al.stack))) continue;
      ExplainItem it;
      fill(it, d, al);
      auto key = std::make_pair(al.stack, it.category + "/" + it.rule);
      auto g = groups.find(key);
      if (g == groups.end()) {
        groups.emplace(key, std::move(it));
      } else {
        ++g->second.count;
        g->second.bytes += int64_t(al.requested);
      }
    }
    std::vector<std::pair<StackId, ExplainItem>> items;  // the stack: written out for the items kept
    for (auto& kv : groups) items.emplace_back(kv.first.first, std::move(kv.second));
    std::sort(items.begin(), items.end(), [](const auto& x, const auto& y) { return x.second.bytes > y.second.bytes; });
    r.explain_total += items.size();
    for (auto& [stack, it] : items)
      if (r.explain.size() < 50) {
        it.site = site_frames(*r.frames, stack);
        r.explain.push_back(std::move(it));
      }
  }
}

}  // namespace snapdiff::detail
