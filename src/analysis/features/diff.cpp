// Diffing two runs (include/snapdiff/analysis/diff.hpp).
#include "snapdiff/analysis/diff.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <tuple>
#include <unordered_map>

#include "snapdiff/model/frame_names.hpp"

namespace snapdiff {

namespace {

// Symbolic key of a stack: function and file of each frame, innermost first;
// no addresses, no line numbers (they shift between code versions).
// Scope labels (snapcapture's frames) carry iteration and layer numbers;
// sites that differ only there are one site ("layer *").
//
// Stacks of both runs are matched by an id per distinct key: a node's id is
// that of (its parent's id, its frame's "name@file;" token), so each stack
// node is looked at once and a stack 10,000 frames deep is never written out
// to be compared. Its text (SiteDelta::key) is written for the rows kept,
// as FrameTable::shown() cuts it.
class SymbolicStacks {
 public:
  // with_lines: tokens carry the frame's line ("name@file:43;"); python_only:
  // native frames are left out (a run recorded without C++ frames is
  // matched on the frames both runs have).
  SymbolicStacks(bool with_lines, bool python_only) : lines_(with_lines), python_only_(python_only) {}
  uint32_t id(const FrameTable& ft, StackId s) {
    if (s == 0) return 0;
    PerTrace& pt = per_[&ft.trace()];
    const Trace& t = ft.trace();
    if (pt.node.size() < t.stacks.size()) pt.node.resize(t.stacks.size(), UINT32_MAX);
    if (pt.node[s] != UINT32_MAX) return pt.node[s];
    std::vector<StackId> chain;
    StackId x = s;
    for (; x != 0 && pt.node[x] == UINT32_MAX; x = t.stacks.node(x).parent) chain.push_back(x);
    uint32_t cur = x == 0 ? 0 : pt.node[x];
    for (size_t i = chain.size(); i-- > 0;) {
      const FrameId f = t.stacks.node(chain[i]).frame;
      if (skip(ft, f)) {
        pt.node[chain[i]] = cur;
        continue;
      }
      const uint64_t key = (uint64_t(cur) << 32) | token(ft, pt, f);
      cur = nodes_.emplace(key, uint32_t(nodes_.size() + 1)).first->second;
      pt.node[chain[i]] = cur;
    }
    return cur;
  }
  std::string text(const FrameTable& ft, StackId s) {
    if (s == 0) return "<no stack>";
    PerTrace& pt = per_[&ft.trace()];
    const FrameTable::Shown sh = ft.shown(s);
    std::string k;
    for (FrameId f : sh.inner)
      if (!skip(ft, f)) k += tokens_[token(ft, pt, f)];
    if (sh.elided > 0) {
      k += '<';
      k += std::to_string(sh.elided);
      k += " frames elided>;";
    }
    for (FrameId f : sh.outer)
      if (!skip(ft, f)) k += tokens_[token(ft, pt, f)];
    return k.empty() ? std::string("<no stack>") : k;
  }

 private:
  bool skip(const FrameTable& ft, FrameId f) const { return python_only_ && !ft.python(f) && !ft.scope(f); }
  bool lines_ = false, python_only_ = false;
  struct PerTrace {
    std::vector<uint32_t> frame, node;  // token per frame, id per stack node (UINT32_MAX: not yet)
  };
  uint32_t token(const FrameTable& ft, PerTrace& pt, FrameId fid) {
    const Trace& t = ft.trace();
    if (pt.frame.size() < t.frames.size()) pt.frame.resize(t.frames.size(), UINT32_MAX);
    if (pt.frame[fid] != UINT32_MAX) return pt.frame[fid];
    const Frame& f = t.frames[fid];
    std::string_view file = t.strings.get(f.file);
    size_t cut = file.rfind('/');
    if (cut != std::string_view::npos) file = file.substr(cut + 1);
    std::string k;
    if (ft.scope(fid)) k += detail::numbers_as_stars(t.strings.get(f.name));
    else k += t.strings.get(f.name);
    k += '@';
    k += file;
    if (lines_ && f.line != kNoLine && !ft.scope(fid)) {
      k += ':';
      k += std::to_string(f.line);
    }
    k += ';';
    auto it = token_ids_.emplace(k, uint32_t(tokens_.size())).first;
    if (it->second == tokens_.size()) tokens_.push_back(std::move(k));
    return pt.frame[fid] = it->second;
  }
  std::unordered_map<std::string, uint32_t> token_ids_;
  std::vector<std::string> tokens_;
  std::unordered_map<uint64_t, uint32_t> nodes_;  // (parent id << 32 | token) -> id (0: the empty stack)
  std::map<const Trace*, PerTrace> per_;
};

std::string site_display(const FrameTable& ft, StackId s, size_t depth) {
  const Trace& t = ft.trace();
  if (s == 0) return "<no stack recorded>";
  if (ft.scope(t.stacks.node(s).frame)) {
    // Scope labels: the innermost three (or --depth's), numbers generalized
    // (the row sums every layer and iteration that shares the scope).
    std::string out;
    const size_t most = depth == 0 ? kShownFrames : depth == 1 ? 3 : depth;
    size_t n = 0;
    for (StackId x = s; x != 0 && n < most; x = t.stacks.node(x).parent, ++n)
      out += (n ? " <- " : "") + detail::numbers_as_stars(t.strings.get(t.frames[t.stacks.node(x).frame].name));
    return out + "  (snapcapture)";
  }
  if (depth != 1) return ft.site_text(s, depth == 0 ? kShownFrames : depth);
  std::string out = ft.label(ft.site_frame(s));
  // A model frame named before the notebook cell it called: the cell.
  if (const std::string c = ft.cell_callee(s); !c.empty()) return out + "  [in " + c + "]";
  // Name the innermost Python frame inside the user's call, if any.
  const FrameId callee = ft.python_callee(s);
  if (callee != kNoFrame) out += "  [in " + ft.label(callee) + "]";
  return out;
}

struct SiteAcc {
  std::string key;  // the stack's text (SymbolicStacks::text) and "|category"
  std::string display;
  int64_t bytes = 0;
  uint64_t count = 0;
  uint32_t loose = 0;  // the stack's id without line numbers (the fallback match)
  StackId stack = 0;   // its (first) stack: the text without lines is written only for a moved row
  bool from_a = false;  // diff_reports(): the stack is run A's
  const SiteRow* row = nullptr;  // diff_views(): its (largest) view row, for the same
  std::map<std::string, int64_t> by_cat;
};

// One row per (site, category): a site whose bytes change role shows as two
// rows. Sites are stacks with their line numbers; gradients are one row per
// tensor size, whatever stack allocated them (the autograd engine's thread
// records no Python stack, or a backward one: the site of a gradient is its
// parameter's, and a parameter's gradient has its size).
struct SiteKey {
  uint32_t id = 0;  // SymbolicStacks id (with lines); 0 for gradients
  std::string category;
  uint64_t tensor_bytes = 0;  // gradients: the tensor's requested size
  auto operator<=>(const SiteKey&) const = default;
};

bool native_frames(const Trace& t, const FrameTable& ft) {
  for (FrameId f = 0; f < t.frames.size() && f < ft.size(); ++f)
    if (!ft.python(f) && !ft.scope(f)) return true;
  return false;
}

// The gradients' rows, one per tensor size, from the view (both diffs).
void gradient_sites(const DeviceView& v, std::map<SiteKey, SiteAcc>& m) {
  static const std::string cat = "gradient";
  for (const GradientSize& g : v.gradient_sizes) {
    SiteAcc& acc = m[SiteKey{0, cat, g.tensor_bytes}];
    acc.key = "<gradient of " + std::to_string(g.tensor_bytes) + " bytes>|" + cat;
    acc.display = "gradient tensors of " + std::to_string(g.tensor_bytes) + " bytes";
    acc.bytes += g.requested_bytes;
    acc.count += g.count;
    acc.by_cat[cat] += g.requested_bytes;
  }
}

// Every site live at the peak but the gradients (gradient_sites()).
std::map<SiteKey, SiteAcc> sites_at_peak(const FrameTable& t, const DeviceAnalysis& d, SymbolicStacks& sym,
                                         SymbolicStacks& loose, size_t depth) {
  std::map<SiteKey, SiteAcc> m;
  std::unordered_map<StackId, std::pair<uint32_t, uint32_t>> ids;
  for (uint32_t id : d.attr.live_at(d.peak_index)) {
    const Allocation& al = d.attr.allocations[id];
    const std::string& cat = d.attr.categories[al.category];
    if (cat == "gradient") continue;
    auto k = ids.find(al.stack);
    if (k == ids.end()) k = ids.emplace(al.stack, std::make_pair(sym.id(t, al.stack), loose.id(t, al.stack))).first;
    SiteAcc& acc = m[SiteKey{k->second.first, cat, 0}];
    if (acc.count == 0) {
      acc.key = sym.text(t, al.stack) + "|" + cat;
      acc.display = site_display(t, al.stack, depth);
      acc.loose = k->second.second;
      acc.stack = al.stack;
    }
    acc.bytes += int64_t(al.requested);
    ++acc.count;
    acc.by_cat[cat] += int64_t(al.requested);
  }
  gradient_sites(d, m);
  return m;
}

std::string top_cat(const std::map<std::string, int64_t>& m) {
  std::string best;
  int64_t b = -1;
  for (auto& kv : m)
    if (kv.second > b) best = kv.first, b = kv.second;
  return best;
}

// ---- Shared by diff_reports() and diff_views(): everything but reading
// the sites comes from the two report views' devices at their peaks.

int64_t cat_of(const DeviceView& d, const std::vector<int64_t>& v, const std::string& name) {
  for (size_t i = 0; i < d.category_names.size() && i < v.size(); ++i)
    if (d.category_names[i] == name) return v[i];
  return 0;
}

// The optimizer step whose temporaries are largest at its peak.
struct StepStats {
  bool any = false;
  int iteration = 0;
  int64_t temp = 0, grads = 0, rise = 0;
};
StepStats largest_step(const DeviceView& d) {
  StepStats s;
  for (const PhaseSpan& sp : d.phases) {
    if (sp.phase != Phase::Optimizer) continue;
    int64_t temp = cat_of(d, sp.categories, "optimizer_temporary");
    if (!s.any || temp > s.temp) {
      s.any = true;
      s.iteration = sp.iteration;
      s.temp = temp;
      s.grads = cat_of(d, sp.categories, "gradient");
      s.rise = sp.peak_requested - sp.start_requested;
    }
  }
  return s;
}

// One run's numbers the findings read (its device at the peak).
struct DiffSide {
  int64_t peak_requested = 0, peak_allocated = 0, peak_reserved = 0;
  int peak_iteration = 0;
  Phase peak_phase = Phase::PreTrace;
  int64_t parameter_bytes = 0;     // parameters live at the peak
  uint64_t parameter_tensors = 0;
  StepStats step;                  // the largest optimizer step's temporaries
  int64_t free_cached = 0;         // fragmentation at the peak
  uint64_t largest_free = 0;
  const DeviceView* view = nullptr;  // its phases and their categories
};
DiffSide side_of(const DeviceView& v) {
  DiffSide s;
  s.peak_requested = v.peak_requested.bytes;
  s.peak_allocated = v.peak_allocated.bytes;
  s.peak_reserved = v.peak_reserved.bytes;
  s.peak_iteration = v.peak_iteration;
  s.peak_phase = v.peak_phase;
  for (size_t i = 0; i < v.category_names.size(); ++i)
    if (v.category_names[i] == "parameter") {
      if (i < v.categories.size()) s.parameter_bytes = v.categories[i];
      if (i < v.category_allocations.size()) s.parameter_tensors = v.category_allocations[i];
    }
  s.step = largest_step(v);
  s.view = &v;
  s.free_cached = v.frag.free_cached;
  s.largest_free = v.frag.largest_free_block;
  return s;
}

// Peaks, categories at each peak and phases aligned by (iteration, phase,
// n-th occurrence).
void compare_devices(Diff& d, const DeviceView& da, const DeviceView& db) {
  d.peak_delta[0] = db.peak_requested.bytes - da.peak_requested.bytes;
  d.peak_delta[1] = db.peak_allocated.bytes - da.peak_allocated.bytes;
  d.peak_delta[2] = db.peak_reserved.bytes - da.peak_reserved.bytes;
  d.peak_delta[3] = db.peak_active.bytes - da.peak_active.bytes;

  // Categories at each run's peak: union of names, A's order first.
  std::vector<std::string> names = da.category_names;
  for (const std::string& n : db.category_names)
    if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  for (const std::string& n : names) d.categories.push_back({n, cat_of(da, da.categories, n), cat_of(db, db.categories, n)});
  std::stable_sort(d.categories.begin(), d.categories.end(), [](const CategoryDelta& x, const CategoryDelta& y) {
    return std::llabs(x.delta()) > std::llabs(y.delta());
  });

  std::map<std::tuple<int, int, int>, size_t> index;
  auto add = [&](const DeviceView& dr, bool is_a) {
    std::map<std::pair<int, int>, int> seen;
    for (const PhaseSpan& s : dr.phases) {
      int occ = seen[{s.iteration, int(s.phase)}]++;
      auto key = std::make_tuple(s.iteration, int(s.phase), occ);
      auto it = index.find(key);
      if (it == index.end()) {
        PhaseDelta p;
        p.iteration = s.iteration;
        p.phase = s.phase;
        p.occurrence = occ;
        index[key] = d.phases.size();
        d.phases.push_back(p);
        it = index.find(key);
      }
      PhaseDelta& p = d.phases[it->second];
      (is_a ? p.in_a : p.in_b) = true;
      (is_a ? p.a_peak : p.b_peak) = s.peak_requested;
      (is_a ? p.a_start : p.b_start) = s.start_requested;
      (is_a ? p.a_opt_temp : p.b_opt_temp) = cat_of(dr, s.categories, "optimizer_temporary");
    }
  };
  add(da, true);
  add(db, false);
}

// Pairs of sites on one side alone each with the same stack without lines
// (function and file of every frame), one to one, as code moves between two
// versions: first a site of A and one of B whose innermost frames' lines
// agree the longest (a caller's line moved, the allocating line did not);
// then the rest in line order, when as many are left on each side (code
// shifted: an edit moves lines and keeps their order), else by nearest
// lines. Two distinct lines of one run are never one row: what finds no
// partner stays new or gone. lines: each site's frame lines, innermost
// first (the frames with a line).
std::vector<std::pair<size_t, size_t>> pair_moved(const std::vector<std::vector<int64_t>>& xl,
                                                  const std::vector<std::vector<int64_t>>& yl) {
  struct Cand {
    size_t x, y, same;  // same: innermost frames with equal lines
    uint64_t dist;      // sum of |line differences|
  };
  std::vector<std::pair<size_t, size_t>> out;
  std::vector<bool> xu(xl.size()), yu(yl.size());
  auto in_order = [&] {
    std::vector<size_t> xo, yo;
    for (size_t i = 0; i < xl.size(); ++i)
      if (!xu[i]) xo.push_back(i);
    for (size_t i = 0; i < yl.size(); ++i)
      if (!yu[i]) yo.push_back(i);
    std::sort(xo.begin(), xo.end(), [&](size_t a, size_t b) { return xl[a] < xl[b]; });
    std::sort(yo.begin(), yo.end(), [&](size_t a, size_t b) { return yl[a] < yl[b]; });
    for (size_t i = 0; i < xo.size() && i < yo.size(); ++i) out.push_back({xo[i], yo[i]});
  };
  // Beyond this many candidates (a group of thousands of sites on each side:
  // generated code), the sites are paired in line order.
  constexpr size_t kMaxCandidates = 1 << 18;
  if (xl.size() * yl.size() > kMaxCandidates) {
    in_order();
    std::sort(out.begin(), out.end());
    return out;
  }
  std::vector<Cand> c;
  c.reserve(xl.size() * yl.size());
  for (size_t i = 0; i < xl.size(); ++i)
    for (size_t j = 0; j < yl.size(); ++j) {
      const auto &a = xl[i], &b = yl[j];
      const size_t n = std::min(a.size(), b.size());
      size_t same = 0;
      while (same < n && a[same] == b[same]) ++same;
      uint64_t dist = 0;
      for (size_t k = 0; k < n; ++k) dist += uint64_t(std::llabs(a[k] - b[k]));
      c.push_back({i, j, same, dist});
    }
  std::stable_sort(c.begin(), c.end(), [](const Cand& p, const Cand& q) {
    if (p.same != q.same) return p.same > q.same;
    return p.dist < q.dist;
  });
  size_t left_x = xl.size(), left_y = yl.size();
  auto take = [&](const Cand& k) {
    xu[k.x] = yu[k.y] = true;
    --left_x, --left_y;
    out.push_back({k.x, k.y});
  };
  for (const Cand& k : c)
    if (k.same > 0 && !xu[k.x] && !yu[k.y]) take(k);
  if (left_x == left_y) {
    in_order();
  } else {
    for (const Cand& k : c)
      if (!xu[k.x] && !yu[k.y]) take(k);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Rows of both runs, one per (site, category), matched: the same stack,
// lines included, in both; else, on one side alone, the same stack without
// lines, paired one to one (pair_moved(): code moved between the versions;
// one row each, marked); else new or gone. Sorted by |delta|, largest
// first. moved_key writes a moved row's key (without lines) from B's site;
// lines_of gives a site's frame lines (innermost first).
std::vector<SiteDelta> match_sites(std::map<SiteKey, SiteAcc>& sa, std::map<SiteKey, SiteAcc>& sb,
                                   const std::function<std::string(const SiteAcc&)>& moved_key,
                                   const std::function<std::vector<int64_t>(const SiteAcc&)>& lines_of) {
  std::vector<SiteDelta> all;
  std::vector<SiteKey> all_keys;  // parallel to `all`: ties of a cut key text keep one order
  auto row = [&](const SiteKey& k, SiteAcc* x, SiteAcc* y) {
    SiteDelta s;
    s.key = (x ? x : y)->key;
    s.display = (x ? x : y)->display;
    s.tensor_bytes = k.tensor_bytes;
    if (x) s.a = x->bytes, s.a_count = x->count;
    if (y) s.b = y->bytes, s.b_count = y->count;
    s.category = top_cat((y ? y : x)->by_cat);
    all_keys.push_back(k);
    all.push_back(std::move(s));
  };
  // 1. Sites with the same stack, lines included, in both runs.
  std::map<std::pair<uint32_t, std::string>, std::pair<std::vector<SiteAcc*>, std::vector<SiteAcc*>>> alone;
  for (auto& kv : sa) {
    auto it = sb.find(kv.first);
    if (it != sb.end()) row(kv.first, &kv.second, &it->second);
    else alone[{kv.second.loose, kv.first.category}].first.push_back(&kv.second);
  }
  for (auto& kv : sb)
    if (!sa.count(kv.first)) alone[{kv.second.loose, kv.first.category}].second.push_back(&kv.second);
  // 2. Sites on one side alone: paired by function and file (code moved
  // between the versions), marked; else new or gone.
  for (auto& kv : alone) {
    auto& [xs, ys] = kv.second;
    std::vector<bool> xpaired(xs.size()), ypaired(ys.size());
    if (!xs.empty() && !ys.empty() && kv.first.first != 0) {
      std::vector<std::vector<int64_t>> xl, yl;
      for (const SiteAcc* x : xs) xl.push_back(lines_of(*x));
      for (const SiteAcc* y : ys) yl.push_back(lines_of(*y));
      for (auto [i, j] : pair_moved(xl, yl)) {
        xpaired[i] = ypaired[j] = true;
        const SiteAcc* x = xs[i];
        const SiteAcc* y = ys[j];
        SiteDelta s;
        s.moved = true;
        s.a = x->bytes, s.a_count = x->count;
        s.b = y->bytes, s.b_count = y->count;
        s.key = moved_key(*y) + "|" + kv.first.second;
        s.display = y->display;
        s.a_display = x->display;
        s.category = top_cat(y->by_cat);
        all_keys.push_back({0, kv.first.second, uint64_t(all.size())});
        all.push_back(std::move(s));
      }
    }
    // New or gone: a row with one side only.
    auto alone_row = [&](const SiteAcc* x, bool in_a) {
      SiteDelta s;
      s.key = x->key;
      s.display = x->display;
      (in_a ? s.a : s.b) = x->bytes;
      (in_a ? s.a_count : s.b_count) = x->count;
      s.category = top_cat(x->by_cat);
      all_keys.push_back({0, kv.first.second, uint64_t(all.size())});
      all.push_back(std::move(s));
    };
    for (size_t i = 0; i < xs.size(); ++i)
      if (!xpaired[i]) alone_row(xs[i], true);
    for (size_t j = 0; j < ys.size(); ++j)
      if (!ypaired[j]) alone_row(ys[j], false);
  }
  std::vector<size_t> order(all.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t i, size_t j) {
    const SiteDelta& x = all[i];
    const SiteDelta& y = all[j];
    if (std::llabs(x.delta()) != std::llabs(y.delta())) return std::llabs(x.delta()) > std::llabs(y.delta());
    if (x.key != y.key) return x.key < y.key;
    return all_keys[i] < all_keys[j];
  });
  std::vector<SiteDelta> sorted;
  sorted.reserve(all.size());
  for (size_t i : order) sorted.push_back(std::move(all[i]));
  return sorted;
}

// Sites grouped by their innermost frame within a category (all sites,
// before the table is cut): a change spread over many call paths, e.g. the
// same operation in every layer, is named once with its total.
struct SiteGroup {
  std::string name;
  int64_t delta = 0;
  size_t sites = 0;
  bool all_new = true, all_gone = true;
};
using SiteGroups = std::map<std::string, std::map<std::string, SiteGroup>>;  // category -> name -> group

// The sorted rows grouped, then cut: the top N changed rows kept, the rest
// summed into other_sites (with what each view summed beyond its own rows).
SiteGroups keep_sites(Diff& d, std::vector<SiteDelta>& all, size_t top_sites) {
  SiteGroups groups;
  for (const SiteDelta& sd : all) {
    if (sd.delta() == 0) continue;
    size_t cut = sd.display.find(" <- ");
    std::string name = sd.tensor_bytes ? std::string("gradients (matched by tensor size)")
                       : cut == std::string::npos ? sd.display
                                                  : sd.display.substr(0, cut);
    SiteGroup& g = groups[sd.category][name];
    g.name = name;
    g.delta += sd.delta();
    ++g.sites;
    g.all_new = g.all_new && sd.a_count == 0;
    g.all_gone = g.all_gone && sd.b_count == 0;
  }
  d.other_sites.display = "[other sites]";
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].delta() == 0) continue;  // unchanged sites say nothing
    if (d.sites.size() < top_sites) {
      d.sites.push_back(std::move(all[i]));
    } else {
      d.other_sites.a += all[i].a;
      d.other_sites.b += all[i].b;
      d.other_sites.a_count += all[i].a_count;
      d.other_sites.b_count += all[i].b_count;
    }
  }
  return groups;
}

// Phases that move: per kind of phase, the aligned (iteration, phase) pair
// whose peak moves most, when it moves by kPhaseMoveFraction of the larger
// of its two peaks and kPhaseMoveMin or more; not the kind of the overall
// peak when the peak finding is there (it says so); at most kPhaseFindings,
// the largest first; each with the categories that change most at it.
void add_phase_findings(Diff& d, const DiffSide& da, const DiffSide& db) {
  const bool peak_said = std::any_of(d.findings.begin(), d.findings.end(),
                                     [](const Finding& f) { return f.code == Code::DiffPeak; });
  // Each run's spans by (iteration, phase, n-th occurrence), as d.phases.
  auto spans = [](const DiffSide& s) {
    std::map<std::tuple<int, int, int>, const PhaseSpan*> out;
    if (!s.view) return out;
    std::map<std::pair<int, int>, int> seen;
    for (const PhaseSpan& sp : s.view->phases) {
      int occ = seen[{sp.iteration, int(sp.phase)}]++;
      out[std::make_tuple(sp.iteration, int(sp.phase), occ)] = &sp;
    }
    return out;
  };
  const auto sa = spans(da), sb = spans(db);
  std::map<int, const PhaseDelta*> best;  // by kind of phase
  for (const PhaseDelta& p : d.phases) {
    if (!p.in_a || !p.in_b) continue;
    if (peak_said && (p.phase == da.peak_phase || p.phase == db.peak_phase)) continue;
    // The phase's own move, and what it moves beyond the overall peak's move:
    // a phase that only follows the peak (every phase -5 GiB when the weights
    // halve) says nothing the peak finding does not. Both must be material.
    const int64_t beyond = (p.b_peak - p.a_peak) - d.peak_delta[0];
    const int64_t need = std::max<int64_t>(
        int64_t(double(std::max(p.a_peak, p.b_peak)) * kPhaseMoveFraction), kPhaseMoveMin);
    if (std::llabs(p.b_peak - p.a_peak) < need || std::llabs(beyond) < need) continue;
    const PhaseDelta*& b = best[int(p.phase)];
    if (!b || std::llabs(beyond) > std::llabs((b->b_peak - b->a_peak) - d.peak_delta[0])) b = &p;
  }
  std::vector<const PhaseDelta*> moved;
  for (const auto& kv : best) moved.push_back(kv.second);
  const int64_t peak_move = d.peak_delta[0];
  std::stable_sort(moved.begin(), moved.end(), [peak_move](const PhaseDelta* x, const PhaseDelta* y) {
    return std::llabs(x->b_peak - x->a_peak - peak_move) > std::llabs(y->b_peak - y->a_peak - peak_move);
  });
  if (moved.size() > kPhaseFindings) moved.resize(kPhaseFindings);
  for (const PhaseDelta* p : moved) {
    DiffPhaseFacts f;
    f.phase = p->phase;
    f.iteration = p->iteration;
    f.a = p->a_peak;
    f.b = p->b_peak;
    const auto key = std::make_tuple(p->iteration, int(p->phase), p->occurrence);
    const auto ia = sa.find(key), ib = sb.find(key);
    if (ia != sa.end() && ib != sb.end()) {
      std::vector<std::string> names = da.view->category_names;
      for (const std::string& n : db.view->category_names)
        if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
      for (const std::string& n : names) {
        const int64_t a = cat_of(*da.view, ia->second->categories, n), b = cat_of(*db.view, ib->second->categories, n);
        if (std::llabs(b - a) >= kPhaseCategoryMin) f.categories.push_back({n, a, b});
      }
      std::stable_sort(f.categories.begin(), f.categories.end(),
                       [](const DiffPhaseFacts::Category& x, const DiffPhaseFacts::Category& y) {
                         return std::llabs(x.b - x.a) > std::llabs(y.b - y.a);
                       });
      if (f.categories.size() > kPhaseCategories) f.categories.resize(kPhaseCategories);
    }
    d.findings.push_back({Code::DiffPhase, p->b_peak - p->a_peak, std::move(f)});
  }
}

// The findings, from the numbers of each side, the diff's categories and
// kept sites, and the site groups: one code path for both diffs.
void add_findings(Diff& d, const DiffSide& da, const DiffSide& db, SiteGroups& groups) {
  // Only what is material (>= 1% of the larger peak and >= 1 MiB).
  const int64_t scale = std::max(da.peak_requested, db.peak_requested);
  const int64_t material = std::max<int64_t>(scale / 100, int64_t(1) << 20);
  auto is_material = [&](int64_t x) { return std::llabs(x) >= material; };
  if (is_material(d.peak_delta[0]))
    d.findings.push_back({Code::DiffPeak, d.peak_delta[0],
                          DiffPeakFacts{da.peak_requested, db.peak_requested, da.peak_iteration, db.peak_iteration,
                                        da.peak_phase, db.peak_phase}});
  // The site with the largest change in the direction of the category's change.
  auto top_site = [&](const std::string& cat, int64_t dir) -> const SiteDelta* {
    const SiteDelta* best = nullptr;
    for (const SiteDelta& s : d.sites)
      if (s.category == cat && (s.delta() > 0) == (dir > 0) && s.delta() != 0 &&
          (!best || std::llabs(s.delta()) > std::llabs(best->delta())))
        best = &s;
    return best;
  };
  for (const CategoryDelta& c : d.categories) {
    if (!is_material(c.delta())) continue;
    DiffCategoryFacts f;
    f.category = c.name;
    f.a = c.a;
    f.b = c.b;
    if (c.name == "parameter") {
      if (da.parameter_bytes > 0) {
        f.parameters = true;
        f.parameter_ratio = double(db.parameter_bytes) / double(da.parameter_bytes);
        f.a_tensors = da.parameter_tensors;
        f.b_tensors = db.parameter_tensors;
      }
    } else if (groups.count(c.name)) {
      // The largest groups of sites in the category's direction, and what
      // moves the other way when it is material: the net hides it.
      auto ranked = [&](int64_t dir) {
        std::vector<const SiteGroup*> v;
        for (auto& kv : groups[c.name])
          if ((kv.second.delta > 0) == (dir > 0) && kv.second.delta != 0 && is_material(kv.second.delta))
            v.push_back(&kv.second);
        std::sort(v.begin(), v.end(), [](const SiteGroup* x, const SiteGroup* y) {
          if (std::llabs(x->delta) != std::llabs(y->delta)) return std::llabs(x->delta) > std::llabs(y->delta);
          return x->name < y->name;
        });
        if (v.size() > 3) v.resize(3);
        std::vector<DiffCategoryFacts::Group> out;
        for (const SiteGroup* g : v) out.push_back({g->name, g->delta, g->sites, g->all_new, g->all_gone});
        return out;
      };
      f.mostly = ranked(c.delta());
      f.offset = ranked(-c.delta());
    } else if (const SiteDelta* s = top_site(c.name, c.delta())) {
      f.has_top_site = true;
      f.top_delta = s->delta();
      f.top_site = s->display;
      f.top_new = s->a_count == 0;
      f.top_gone = s->b_count == 0;
    }
    f.gradients_kept = c.name == "gradient" && da.peak_iteration > 1 && db.peak_iteration > 1;
    d.findings.push_back({Code::DiffCategory, c.delta(), std::move(f)});
  }
  // Parameters that change beside copies of them that do not: the copies
  // are made in both runs (a reader must not credit B's dtype with them).
  {
    const CategoryDelta* param = nullptr;
    const CategoryDelta* copies = nullptr;
    for (const CategoryDelta& c : d.categories) {
      if (c.name == "parameter") param = &c;
      if (c.name == "parameter_copy") copies = &c;
    }
    if (param && copies && is_material(param->delta()) && is_material(copies->a) && is_material(copies->b) &&
        std::llabs(copies->delta()) * 100 <= std::max(copies->a, copies->b)) {
      DiffCategoryFacts f;
      f.category = copies->name;
      f.a = copies->a;
      f.b = copies->b;
      f.copies_unchanged = true;
      d.findings.push_back({Code::DiffCategory, copies->delta(), std::move(f)});
    }
  }
  // The optimizer step's transient.
  const StepStats& oa = da.step;
  const StepStats& ob = db.step;
  if ((oa.any || ob.any) && is_material(ob.temp - oa.temp))
    d.findings.push_back(
        {Code::DiffOptimizerTransient, ob.temp - oa.temp, DiffStepFacts{oa.temp, ob.temp, oa.grads, ob.grads}});
  // Reserved memory: the cache, not the tensors, can move while requested
  // bytes barely do (a different allocator setting, fragmentation).
  {
    const int64_t rscale = std::max(da.peak_reserved, db.peak_reserved);
    const int64_t rmaterial = std::max<int64_t>(rscale / 100, int64_t(1) << 20);
    if (std::llabs(d.peak_delta[2]) >= rmaterial)
      d.findings.push_back({Code::DiffReserved, d.peak_delta[2],
                            DiffReservedFacts{da.peak_reserved, db.peak_reserved, da.peak_allocated, db.peak_allocated,
                                              da.free_cached, db.free_cached, da.largest_free, db.largest_free}});
  }
  add_phase_findings(d, da, db);
  std::stable_sort(d.findings.begin(), d.findings.end(), [](const Finding& x, const Finding& y) {
    if ((x.code == Code::DiffPeak) != (y.code == Code::DiffPeak)) return x.code == Code::DiffPeak;
    return std::llabs(x.bytes) > std::llabs(y.bytes);
  });
}


// ---- diff_views(): the same keys from the frames a view wrote out --------

bool python_file(std::string_view f) { return f.size() > 3 && f.substr(f.size() - 3) == ".py"; }
bool scope_ref(const FrameRef& f) { return f.file == "snapcapture"; }
// The one frame a view writes for the frames of a deep stack left out
// (FrameTable::shown(): between the kShownInner innermost and the kShownOuter
// outermost; FrameRef::elided holds their count).
bool elided_ref(const std::vector<FrameRef>& st, size_t i) { return st[i].elided > 0; }
bool native_ref(const std::vector<FrameRef>& st, size_t i) {
  return !python_file(st[i].file) && !scope_ref(st[i]) && !elided_ref(st, i);
}

// Whether a view wrote out any native frame (of any row it kept).
bool native_frames(const Report& r) {
  auto any = [](const std::vector<FrameRef>& st) {
    for (size_t i = 0; i < st.size(); ++i)
      if (native_ref(st, i)) return true;
    return false;
  };
  for (const DeviceView& d : r.devices) {
    for (const std::vector<SiteRow>* rows : {&d.sites, &d.unknown_sites})
      for (const SiteRow& s : *rows)
        if (any(s.site.stack)) return true;
    for (const std::vector<OpRow>* rows : {&d.by_op, &d.by_kernel})
      for (const OpRow& o : *rows)
        if (any(o.stack_frames)) return true;
    for (const std::optional<KernelRef>* k : {&d.kernel_before, &d.kernel_after})
      if (*k && any((*k)->stack)) return true;
  }
  for (const OomView& o : r.ooms)
    for (const SiteRow& s : o.sites)
      if (any(s.site.stack)) return true;
  return false;
}

// A written-out stack's key, as SymbolicStacks::text() writes it from the
// trace's frames: "name@file:line;" innermost first (scope labels' numbers
// as stars, no line), native frames left out when python_only.
std::string view_stack_text(const std::vector<FrameRef>& st, bool with_lines, bool python_only) {
  std::string k;
  for (size_t i = 0; i < st.size(); ++i) {
    const FrameRef& f = st[i];
    if (elided_ref(st, i)) {
      k += '<';
      k += std::to_string(f.elided);
      k += " frames elided>;";
      continue;
    }
    const bool scope = scope_ref(f);
    if (python_only && !python_file(f.file) && !scope) continue;
    std::string_view file = f.file;
    size_t cut = file.rfind('/');
    if (cut != std::string_view::npos) file = file.substr(cut + 1);
    if (scope) k += detail::numbers_as_stars(f.name);
    else k += f.name;
    k += '@';
    k += file;
    if (with_lines && f.line != kNoLine && !scope) {
      k += ':';
      k += std::to_string(f.line);
    }
    k += ';';
  }
  return k;
}

// A written-out stack's frame lines as diff_reports() reads them from the
// trace's frames (innermost first; the frames view_stack_text() keys).
std::vector<int64_t> view_stack_lines(const std::vector<FrameRef>& st, bool python_only) {
  std::vector<int64_t> out;
  for (size_t i = 0; i < st.size(); ++i) {
    if (elided_ref(st, i) || scope_ref(st[i]) || st[i].line == kNoLine) continue;
    if (python_only && !python_file(st[i].file)) continue;
    out.push_back(int64_t(st[i].line));
  }
  return out;
}

// A row's display, as site_display() writes it from the trace: from the
// frames the view wrote out (its path holds at most its --depth's labels,
// four at least).
std::string view_site_display(const SiteFrames& s, size_t depth) {
  if (s.stack.empty()) return "<no stack recorded>";
  if (scope_ref(s.stack[0])) {
    std::string out;
    const size_t most = depth == 0 ? kShownFrames : depth == 1 ? 3 : depth;
    for (size_t n = 0; n < s.stack.size() && n < most; ++n)
      out += (n ? " <- " : "") + detail::numbers_as_stars(s.stack[n].name);
    return out + "  (snapcapture)";
  }
  if (depth != 1) {
    std::string out;
    const size_t most = depth == 0 ? kShownFrames : depth;
    for (size_t i = 0; i < s.path.size() && i < most; ++i) {
      if (i) out += " <- ";
      out += s.path[i];
    }
    if (!s.callee.empty()) out += "  [in " + s.callee + "]";
    return out;
  }
  // A path led by another frame than the user frame: a model frame named
  // before the notebook cell it called, the cell as its callee.
  if (s.user && !s.path.empty() && s.path[0] != s.user->label)
    return s.path[0] + (s.callee.empty() ? std::string() : "  [in " + s.callee + "]");
  std::string out = s.user ? s.user->label : s.path.empty() ? std::string("<no stack recorded>") : s.path[0];
  // The callee named only when it is a Python frame (python_callee(); the
  // view's callee may be an op inside a Python user frame).
  if (!s.callee.empty())
    for (const FrameRef& f : s.stack)
      if (python_file(f.file) && f.label == s.callee) {
        out += "  [in " + s.callee + "]";
        break;
      }
  return out;
}

// Texts of stacks interned to ids, 0 for the empty one (what SymbolicStacks
// ids are for the trace's stacks).
struct TextIds {
  std::unordered_map<std::string, uint32_t> ids;
  uint32_t id(const std::string& text) {
    if (text.empty()) return 0;
    return ids.emplace(text, uint32_t(ids.size() + 1)).first->second;
  }
};

// One row per (stack, category), like sites_at_peak(), from the view's rows;
// gradients by tensor size from the view's gradient_sizes, as there.
// `other` is the view's other_sites less the gradients it summed.
std::map<SiteKey, SiteAcc> view_sites(const DeviceView& v, bool python_only, TextIds& sym, TextIds& loose, size_t depth,
                                      SiteRow& other) {
  std::map<SiteKey, SiteAcc> m;
  other = v.other_sites;
  other.requested_bytes -= cat_of(v, v.categories, "gradient");
  for (size_t i = 0; i < v.category_names.size() && i < v.category_allocations.size(); ++i)
    if (v.category_names[i] == "gradient") other.count -= v.category_allocations[i];
  for (const SiteRow& r : v.sites) {
    const std::string& cat = r.category_name;
    if (cat == "gradient") {
      other.requested_bytes += r.requested_bytes;
      other.count += r.count;
      continue;
    }
    const std::string text = view_stack_text(r.site.stack, true, python_only);
    SiteKey key{sym.id(text), cat, 0};
    SiteAcc& acc = m[key];
    if (acc.count == 0 && !acc.row) {
      acc.key = (text.empty() ? std::string("<no stack>") : text) + "|" + cat;
      acc.display = view_site_display(r.site, depth);
      acc.loose = loose.id(view_stack_text(r.site.stack, false, python_only));
      acc.row = &r;
    }
    acc.bytes += r.requested_bytes;
    acc.count += r.count;
    acc.by_cat[cat] += r.requested_bytes;
  }
  gradient_sites(v, m);
  return m;
}

}  // namespace

Diff diff_reports(const Analysis& a, const Analysis& b, const DiffOptions& opts) {
  Diff d;
  d.a_name = opts.a_name;
  d.b_name = opts.b_name;
  d.a = report_view(a);
  d.b = report_view(b);
  if (a.devices.empty() || b.devices.empty()) return d;
  const DeviceAnalysis& da = a.devices[a.peak_device];
  const DeviceAnalysis& db = b.devices[b.peak_device];
  const DeviceView& va = d.a.devices[d.a.peak_device];
  const DeviceView& vb = d.b.devices[d.b.peak_device];
  compare_devices(d, va, vb);

  // Sites at each peak, matched by symbolic stack. Keys leave native frames
  // out when either run has none: the same code recorded with
  // stacks="python" and with stacks="all" is one set of sites.
  const bool python_only = !native_frames(a.frames->trace(), *a.frames) || !native_frames(b.frames->trace(), *b.frames);
  SymbolicStacks sym(true, python_only), loose(false, python_only);
  auto sa = sites_at_peak(*a.frames, da, sym, loose, opts.depth);
  auto sb = sites_at_peak(*b.frames, db, sym, loose, opts.depth);
  for (auto& kv : sa) kv.second.from_a = true;
  auto lines_of = [&](const FrameTable& ft, StackId st) {
    std::vector<int64_t> out;
    const FrameTable::Shown sh = ft.shown(st);
    for (const std::vector<FrameId>* part : {&sh.inner, &sh.outer})
      for (FrameId f : *part)
        if ((!python_only || ft.python(f)) && !ft.scope(f) && ft.trace().frames[f].line != kNoLine)
          out.push_back(int64_t(ft.trace().frames[f].line));
    return out;
  };
  // (Each side's sites are looked up in its own run: a pair's x is A's.)
  std::vector<SiteDelta> all = match_sites(
      sa, sb, [&](const SiteAcc& by) { return loose.text(*b.frames, by.stack); },
      [&](const SiteAcc& s) { return lines_of(s.from_a ? *a.frames : *b.frames, s.stack); });
  SiteGroups groups = keep_sites(d, all, opts.top_sites);
  add_findings(d, side_of(va), side_of(vb), groups);
  return d;
}

Diff diff_views(const Report& a, const Report& b, const DiffOptions& opts) {
  Diff d;
  d.a_name = opts.a_name;
  d.b_name = opts.b_name;
  d.a = a;
  d.b = b;
  if (a.peak_device >= a.devices.size() || b.peak_device >= b.devices.size()) return d;
  const DeviceView& va = a.devices[a.peak_device];
  const DeviceView& vb = b.devices[b.peak_device];
  compare_devices(d, va, vb);

  const bool python_only = !native_frames(a) || !native_frames(b);
  TextIds sym, loose;
  SiteRow other_a, other_b;
  auto sa = view_sites(va, python_only, sym, loose, opts.depth, other_a);
  auto sb = view_sites(vb, python_only, sym, loose, opts.depth, other_b);
  std::vector<SiteDelta> all = match_sites(
      sa, sb, [&](const SiteAcc& by) { return view_stack_text(by.row->site.stack, false, python_only); },
      [&](const SiteAcc& s) { return view_stack_lines(s.row->site.stack, python_only); });
  SiteGroups groups = keep_sites(d, all, opts.top_sites);
  // What each view summed beyond the rows it kept.
  d.other_sites.a += other_a.requested_bytes;
  d.other_sites.b += other_b.requested_bytes;
  d.other_sites.a_count += other_a.count;
  d.other_sites.b_count += other_b.count;
  add_findings(d, side_of(va), side_of(vb), groups);
  return d;
}

}  // namespace snapdiff
