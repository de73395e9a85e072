// The flame chart's series: the call tree of the bytes live at the peak
// (callers outermost), with the narrow boxes merged, and its differential
// form for two runs.
#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "analysis/charts/chart_series.hpp"
#include "snapdiff/model/frame_names.hpp"

namespace snapdiff {

using namespace detail;

namespace {

constexpr size_t kMaxDepth = 18;        // deeper stacks keep their outer 4 and inner 13 frames
constexpr size_t kMaxNativeFrames = 6;  // native-only stacks (autograd threads under stacks="all")
constexpr double kPureShare = 0.9;      // a box is one category's color from this share on

bool contains(std::string_view s, std::string_view n) { return s.find(n) != std::string_view::npos; }

std::string file_base(std::string_view file) {
  const size_t cut = file.find_last_of('/');
  return std::string(cut == std::string_view::npos ? file : file.substr(cut + 1));
}

// Python frames that only forward a call: nn.Module's call wrappers and the
// optimizer's step decorators. They double the depth of every chart.
bool python_plumbing(const FrameTable& frames, FrameId f) {
  const Trace& t = frames.trace();
  const std::string_view name = t.strings.get(t.frames[f].name);
  const std::string_view file = t.strings.get(t.frames[f].file);
  if (frames.kind(f) != FrameKind::LibraryPython || !contains(file, "torch/")) return false;
  return name == "_call_impl" || name == "_wrapped_call_impl" || name == "_use_grad" ||
         (name == "wrapper" && contains(file, "optim/")) || name == "decorate_context";
}

// Native frames that say nothing about what was allocated: threads, the
// autograd engine's loop, the dispatcher, tensor-creation helpers.
bool native_plumbing(const FrameTable& frames, FrameId f) {
  if (frames.internal(f)) return true;
  const Trace& t = frames.trace();
  const std::string_view name = t.strings.get(t.frames[f].name);
  static const std::string_view prefixes[] = {
      "__clone", "start_thread", "pthread_", "std::", "__libc", "Py", "_Py", "at::_ops::", "c10::",
      "torch::autograd::Engine::", "torch::autograd::python::PythonEngine::", "torch::autograd::Node::operator",
      "torch::autograd::validate_outputs", "torch::autograd::VariableType::", "at::detail::empty", "at::empty",
      "at::meta::", "at::TensorIteratorBase::", "void at::", "at::(anon)::create_out", "at::(anonymous namespace)::create_out"};
  if (name.empty() || name == "const" || name == "??") return true;
  const std::string shown = frames.short_native(f);
  if (shown.empty() || shown == "const" || shown.substr(0, 2) == "Py" || shown.substr(0, 3) == "_Py") return true;
  for (std::string_view p : prefixes)
    if (name.substr(0, p.size()) == p) return true;
  return contains(name, "set_output") || contains(name, "_apply_functional") || contains(name, "wrapper_CUDA") ||
         contains(name, "create_out");
}

// The frames a flame chart shows for a stack, outermost first: of a stack
// with Python frames its Python frames but the plumbing; else of one with
// scope labels those; else its native frames but the plumbing, each only
// once in a row, the outermost kMaxNativeFrames. Of more than kMaxDepth,
// the outer four and the inner kMaxDepth - 5, with a box for those between.
//
// Worked out once per stack node, from its parent's (a parent comes first):
// per kind of stack, the nearest frame kept at or above each node, how many
// are kept there, and the one kept at the depth the outer part ends. A
// stack's path is then a few steps, however deep it is (a path copied frame
// by frame made a 30,000-deep stack cost 30,000 per distinct stack).
class FlameIndex {
 public:
  static constexpr size_t kKeepOuter = 4, kKeepInner = kMaxDepth - kKeepOuter - 1;
  explicit FlameIndex(const FrameTable& frames) : frames_(frames) {
    const Trace& t = frames.trace();
    recs_.emplace_back();  // node 0, the empty stack
    slot_.emplace(0, 0);
    py_plumb_.assign(t.frames.size(), -1);
    nat_plumb_.assign(t.frames.size(), -1);
  }

  // Fills the nodes of `stack` not yet known, outermost first (only the
  // stacks drawn are looked at, each node once; kept apart from the trace's
  // other nodes, which can be millions).
  void add(StackId stack) {
    const Trace& t = frames_.trace();
    chain_.clear();
    for (StackId x = stack; !slot_.count(x); x = t.stacks.node(x).parent) chain_.push_back(x);
    for (size_t k = chain_.size(); k-- > 0;) {
      const StackId i = chain_[k];
      const StackTable::Node& nd = t.stacks.node(i);
      const FrameId f = nd.frame;
      const Rec up = recs_[slot_.at(nd.parent)];  // a copy: recs_ grows below
      Rec x = up;
      x.any_scope = up.any_scope || frames_.scope(f);
      if (py_plumb_[f] < 0) py_plumb_[f] = python_plumbing(frames_, f);
      if (nat_plumb_[f] < 0) nat_plumb_[f] = native_plumbing(frames_, f);
      const bool keep_py = frames_.python(f) && !py_plumb_[f];
      const bool keep_scope = frames_.scope(f);
      bool keep_native = !nat_plumb_[f];
      if (keep_native) {
        const StackId prev = up.m[kNative].kept;  // the last kept, outermost first
        if (prev != 0) {
          const FrameId pf = t.stacks.node(prev).frame;
          keep_native = pf != f && frames_.label(pf) != frames_.label(f);
        }
      }
      step(x.m[kPython], i, keep_py, kKeepOuter);
      step(x.m[kScope], i, keep_scope, kKeepOuter);
      step(x.m[kNative], i, keep_native, kMaxNativeFrames);
      slot_.emplace(i, uint32_t(recs_.size()));
      recs_.push_back(x);
    }
  }

  const FrameTable& frames() const { return frames_; }
  bool has_scope(StackId stack) {
    add(stack);
    return recs_[slot_.at(stack)].any_scope;
  }

  struct Path {
    std::vector<FrameId> frames;  // outermost first
    size_t dots_at = SIZE_MAX;    // the "…" box goes before frames[dots_at]
    uint32_t skipped = 0;         // frames it stands for
  };
  Path path(StackId stack) {
    add(stack);
    Path out;
    const Rec& rec = recs_[slot_.at(stack)];
    const int m = frames_.innermost_python(stack) != kNoFrame ? kPython : rec.any_scope ? kScope : kNative;
    const Info& x = rec.m[m];
    const Trace& t = frames_.trace();
    // `count` kept frames from `from` outward, appended outermost first
    // (every kept node's parent was filled by add()).
    auto take = [&](StackId from, size_t count) {
      const size_t at = out.frames.size();
      for (StackId y = from; y != 0 && count > 0; --count) {
        out.frames.push_back(t.stacks.node(y).frame);
        const StackId up = t.stacks.node(y).parent;
        y = up == 0 ? 0 : recs_[slot_.at(up)].m[m].kept;
      }
      std::reverse(out.frames.begin() + long(at), out.frames.end());
    };
    if (m == kNative) {
      take(x.count >= kMaxNativeFrames ? x.outer : x.kept, std::min<size_t>(x.count, kMaxNativeFrames));
    } else if (x.count > kMaxDepth) {
      take(x.outer, kKeepOuter);
      out.dots_at = out.frames.size();
      out.skipped = uint32_t(x.count - kKeepOuter - kKeepInner);
      take(x.kept, kKeepInner);
    } else {
      take(x.kept, x.count);
    }
    return out;
  }

 private:
  enum { kPython, kScope, kNative };
  struct Info {
    StackId kept = 0;    // the nearest kept node at or above (0: none)
    uint32_t count = 0;  // kept nodes at or above
    StackId outer = 0;   // the kept node at or above at which `count` reaches the outer part's size
  };
  struct Rec {
    Info m[3];  // per kind of stack
    bool any_scope = false;
  };
  static void step(Info& x, StackId i, bool keep, size_t outer_size) {
    if (!keep) return;
    x.kept = i;
    ++x.count;
    if (x.count == outer_size) x.outer = i;
  }
  const FrameTable& frames_;
  std::vector<Rec> recs_;
  std::unordered_map<StackId, uint32_t> slot_;  // stack node -> recs_
  std::vector<int8_t> py_plumb_, nat_plumb_;    // per frame (-1: not yet)
  std::vector<StackId> chain_;
};

struct Elem {
  std::string key;  // identity in the tree
  FrameId frame = kNoFrame;  // kNoFrame: a box of snapdiff's own (`text`)
  std::string text, note;      // such a box's label and tooltip
  std::string generalized;  // scope label with numbers as '*' ("" = exact frame)
  uint32_t skipped = 0;     // the "…" element: frames left out
};

struct TNode {
  Elem e;
  int parent = -1;
  std::vector<int> children;
  int64_t bytes = 0, a = 0, b = 0;
  uint64_t allocations = 0;
  std::vector<int64_t> by_cat;
  std::set<std::string> names;  // exact scope labels merged into a generalized node
};

class Builder {
 public:
  Builder(bool diff, size_t ncat) : diff_(diff), ncat_(ncat) {
    nodes_.push_back({});
    nodes_[0].by_cat.assign(ncat, 0);
  }
  std::vector<TNode> nodes_;

  // Adds one allocation's bytes along its path (cached per stack).
  // `origin`: 0 allocated in the recorded history; 1 before it and freed in
  // it; 2 before it and alive at the dump (truncated histories).
  void add(FlameIndex& index, StackId stack, int origin, int64_t bytes, int category, int side,
           const std::set<std::string>& general) {
    const FrameTable& frames = index.frames();
    auto& cache = side == 1 ? cache_b_ : cache_a_;
    const uint64_t ck = uint64_t(stack) * 4 + uint64_t(origin);
    auto f = cache.find(ck);
    int leaf;
    if (f != cache.end()) {
      leaf = f->second;
    } else {
      leaf = 0;
      if (origin > 0) {
        Elem pre;
        pre.key = "\x1fpre";
        pre.text = "allocated before the recorded history";
        pre.note = "the history starts mid-run (a late start or a wrapped ring buffer): these allocations were made before the first recorded event";
        leaf = child(leaf, pre, frames);
        Elem how;
        how.key = origin == 1 ? "\x1f" "freed" : "\x1f" "alive";
        how.text = origin == 1 ? "freed later (stacks as recorded with the free)" : "still alive at the dump";
        how.note = origin == 1 ? "known from their free events; with context=\"all\" the stack below is where they "
                                 "were freed, not where they were allocated"
                               : "known from the dumped segments; the stack below is where they were allocated";
        leaf = child(leaf, how, frames);
      }
      for (const Elem& e : path(index, stack, general)) leaf = child(leaf, e, frames);
      cache.emplace(ck, leaf);
    }
    for (int n = leaf; n >= 0; n = nodes_[size_t(n)].parent) {
      TNode& nd = nodes_[size_t(n)];
      nd.bytes += bytes;
      (side == 1 ? nd.b : nd.a) += bytes;
      ++nd.allocations;
      if (category >= 0 && size_t(category) < nd.by_cat.size()) nd.by_cat[size_t(category)] += bytes;
    }
  }

  std::vector<Elem> path(FlameIndex& index, StackId stack, const std::set<std::string>& general) const {
    const FrameTable& frames = index.frames();
    const Trace& t = frames.trace();
    std::vector<Elem> out;
    if (stack == 0) {
      Elem e;
      e.key = "\x1f<none>";
      e.text = "<no stack recorded>";
      e.note = "allocations recorded without any frame (with stacks=\"python\", the autograd engine's threads)";
      out.push_back(std::move(e));
      return out;
    }
    FlameIndex::Path fp = index.path(stack);
    if (fp.frames.empty()) fp.frames.push_back(t.stacks.node(stack).frame);  // every frame was plumbing: keep the innermost
    for (size_t i = 0; i < fp.frames.size(); ++i) {
      if (i == fp.dots_at) {
        Elem dots;
        dots.skipped = fp.skipped;
        dots.key = "\x1f...";
        out.push_back(std::move(dots));
      }
      const FrameId f = fp.frames[i];
      Elem e;
      e.frame = f;
      const Frame& fm = t.frames[f];
      if (frames.scope(f)) {
        std::string g = numbers_as_stars(t.strings.get(fm.name));
        if (diff_ || general.count(g)) {
          e.generalized = g;
          e.key = "S\x1f" + g;
        } else {
          e.key = "S\x1f" + std::string(t.strings.get(fm.name));
        }
      } else if (diff_) {
        e.key = "F\x1f" + std::string(t.strings.get(fm.name)) + "\x1f" + file_base(t.strings.get(fm.file));
      } else {
        e.key = "I" + std::to_string(f);
      }
      out.push_back(std::move(e));
    }
    return out;
  }

 private:
  int child(int parent, const Elem& e, const FrameTable& frames) {
    auto kid = key_ids_.find(e.key);
    if (kid == key_ids_.end()) kid = key_ids_.emplace(e.key, uint32_t(key_ids_.size())).first;
    const uint64_t k = (uint64_t(uint32_t(parent)) << 32) | kid->second;
    auto f = index_.find(k);
    int id;
    if (f != index_.end()) {
      id = f->second;
      if (nodes_[size_t(id)].e.skipped < e.skipped) nodes_[size_t(id)].e.skipped = e.skipped;
    } else {
      id = int(nodes_.size());
      TNode n;
      n.e = e;
      n.parent = parent;
      n.by_cat.assign(ncat_, 0);
      nodes_.push_back(std::move(n));
      nodes_[size_t(parent)].children.push_back(id);
      index_.emplace(k, id);
    }
    if (!e.generalized.empty() && e.frame != kNoFrame) {
      const Trace& t = frames.trace();
      nodes_[size_t(id)].names.insert(std::string(t.strings.get(t.frames[e.frame].name)));
    }
    return id;
  }

  bool diff_;
  size_t ncat_;
  std::unordered_map<std::string, uint32_t> key_ids_;  // Elem::key -> a number
  std::unordered_map<uint64_t, int> index_;            // (parent, key number) -> node
  std::unordered_map<uint64_t, int> cache_a_, cache_b_;
};

// Scope labels that differ only in their numbers and appear as three or
// more siblings somewhere ("layer 0" .. "layer 31") are drawn as one box.
struct LiveStack {
  StackId stack;
  int origin;  // Builder::add()
  int64_t bytes;
  int category;
};

std::set<std::string> generalizable(FlameIndex& index, const std::vector<LiveStack>& stacks) {
  const FrameTable& frames = index.frames();
  const Trace& t = frames.trace();
  std::set<std::string> out;
  if (std::none_of(stacks.begin(), stacks.end(), [&](const LiveStack& s) { return index.has_scope(s.stack); }))
    return out;  // no scope labels: nothing to generalize
  Builder exact(false, 0);
  for (const auto& s : stacks) exact.add(index, s.stack, s.origin, s.bytes, -1, 0, {});
  for (const TNode& n : exact.nodes_) {
    std::map<std::string, std::set<FrameId>> groups;
    for (int c : n.children) {
      const Elem& e = exact.nodes_[size_t(c)].e;
      if (e.frame != kNoFrame && frames.scope(e.frame))
        groups[numbers_as_stars(t.strings.get(t.frames[e.frame].name))].insert(e.frame);
    }
    for (auto& g : groups)
      if (g.second.size() >= 3 && g.first.find('*') != std::string::npos) out.insert(g.first);
  }
  return out;
}

// "layer 0-31" when the merged labels are one number apart, else "layer * (32)".
std::string merged_label(const std::string& generalized, const std::set<std::string>& names) {
  if (names.size() < 2) return names.empty() ? generalized : *names.begin();
  if (std::count(generalized.begin(), generalized.end(), '*') == 1) {
    const size_t star = generalized.find('*');
    std::vector<long> nums;
    for (const std::string& n : names) {
      const std::string tail = generalized.substr(star + 1);
      if (n.compare(0, star, generalized, 0, star) != 0 || n.size() < star + tail.size() + 1) break;
      const std::string digits = n.substr(star, n.size() - star - tail.size());
      if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) break;
      nums.push_back(std::stol(digits));
    }
    if (nums.size() == names.size()) {
      std::sort(nums.begin(), nums.end());
      if (nums.back() - nums.front() + 1 == long(nums.size()))
        return generalized.substr(0, star) + std::to_string(nums.front()) + "-" + std::to_string(nums.back()) +
               generalized.substr(star + 1);
    }
  }
  return generalized + " (" + std::to_string(names.size()) + ")";
}

// Turns the tree into boxes: children by bytes, the narrow ones merged.
void lay_out(const std::vector<TNode>& nodes, const FrameTable* ta, const FrameTable* tb, bool diff, double width_pt,
             FlameGraph& g) {
  const double total = double(std::max<int64_t>(nodes[0].bytes, 1));
  double min_pt = 3;
  for (int attempt = 0; attempt < 12; ++attempt) {
    g.boxes.clear();
    g.max_depth = 0;
    struct Item {
      int node;
      int parent_box;
      int depth;
      double x;
    };
    std::vector<Item> stack{{0, -1, 0, 0.0}};
    while (!stack.empty()) {
      Item it = stack.back();
      stack.pop_back();
      const TNode& n = nodes[size_t(it.node)];
      FlameBox box;
      box.depth = it.depth;
      box.parent = it.parent_box;
      box.bytes = n.bytes;
      box.a = n.a;
      box.b = n.b;
      box.allocations = n.allocations;
      box.by_category = n.by_cat;
      box.x = it.x;
      box.w = double(n.bytes) / total;
      box.members = n.names.empty() ? 1 : uint32_t(n.names.size());
      if (it.node == 0) {
        box.label = "all";
        box.full = diff ? "all memory live at each run's peak" : "all memory live at the peak";
      } else if (n.e.skipped > 0) {
        box.label = "\xe2\x80\xa6 " + std::to_string(n.e.skipped) + " frames";
      } else if (n.e.frame == kNoFrame) {
        box.label = n.e.text;
        box.full = n.e.text + (n.e.note.empty() ? "" : "\n(" + n.e.note + ")");
      } else {
        const FrameTable& frames = (diff && n.a == 0 && tb) ? *tb : *ta;
        const Trace& t = frames.trace();
        const Frame& f = t.frames[n.e.frame];
        const std::string file(t.strings.get(f.file));
        const bool scope = frames.scope(n.e.frame);
        if (scope) {
          box.label = n.e.generalized.empty() ? std::string(t.strings.get(f.name)) : merged_label(n.e.generalized, n.names);
        } else if (frames.python(n.e.frame)) {
          box.label = std::string(t.strings.get(f.name));
          box.location = file_base(file) + (!diff && f.line >= 0 ? ":" + std::to_string(f.line) : "");
        } else {
          box.label = frames.short_native(n.e.frame);
          if (!file.empty() && file != "??") box.location = file_base(file);
        }
        box.full = scope ? box.label : frames.label(n.e.frame);
        if (diff && !scope)
          box.full = box.label + (box.location.empty() ? "" : " (" + box.location + ")");
      }
      // Category: the one holding >= 90% of the bytes.
      for (size_t k = 0; k < n.by_cat.size(); ++k)
        if (n.bytes > 0 && double(n.by_cat[k]) >= kPureShare * double(n.bytes)) box.category = int(k);
      const int self = int(g.boxes.size());
      if (box.w * width_pt >= 1) g.max_depth = std::max(g.max_depth, it.depth);
      g.boxes.push_back(std::move(box));
      // Children, largest first; those narrower than min_pt merge into one.
      std::vector<int> ch = n.children;
      std::sort(ch.begin(), ch.end(), [&](int x, int y) {
        const TNode& a = nodes[size_t(x)];
        const TNode& b = nodes[size_t(y)];
        if (a.bytes != b.bytes) return a.bytes > b.bytes;
        return a.e.key < b.e.key;
      });
      double cx = it.x;
      std::vector<Item> pending;
      int64_t rest = 0, rest_a = 0, rest_b = 0;
      uint64_t rest_n = 0, rest_allocs = 0;
      std::vector<int64_t> rest_cat(n.by_cat.size(), 0);
      for (int c : ch) {
        const TNode& cn = nodes[size_t(c)];
        if (cn.bytes <= 0) continue;
        const double w = double(cn.bytes) / total;
        if (w * width_pt < min_pt) {
          rest += cn.bytes;
          rest_a += cn.a;
          rest_b += cn.b;
          ++rest_n;
          rest_allocs += cn.allocations;
          for (size_t k = 0; k < rest_cat.size() && k < cn.by_cat.size(); ++k) rest_cat[k] += cn.by_cat[k];
          continue;
        }
        pending.push_back({c, self, it.depth + 1, cx});
        cx += w;
      }
      if (rest > 0) {
        FlameBox o;
        o.other = true;
        o.other_count = uint32_t(rest_n);
        o.depth = it.depth + 1;
        o.parent = self;
        o.bytes = rest;
        o.a = rest_a;
        o.b = rest_b;
        o.allocations = rest_allocs;
        o.by_category = rest_cat;
        o.x = cx;
        o.w = double(rest) / total;
        o.label = "+" + std::to_string(rest_n);
        o.full = std::to_string(rest_n) + (rest_n == 1 ? " narrower frame" : " narrower frames");
        for (size_t k = 0; k < rest_cat.size(); ++k)
          if (double(rest_cat[k]) >= kPureShare * double(rest)) o.category = int(k);
        if (o.w * width_pt >= 1) g.max_depth = std::max(g.max_depth, o.depth);
        g.boxes.push_back(std::move(o));
      }
      for (auto p = pending.rbegin(); p != pending.rend(); ++p) stack.push_back(*p);
    }
    if (g.boxes.size() <= kMaxFlameBoxes) return;
    min_pt *= 1.5;
  }
}

std::vector<LiveStack> live_stacks(const DeviceAnalysis& d) {
  std::vector<LiveStack> out;
  for (uint32_t id : d.attr.live_at(d.peak_index)) {
    const Allocation& a = d.attr.allocations[id];
    const int origin = a.alloc_event >= 0 ? 0 : a.free_event != INT64_MAX ? 1 : 2;
    out.push_back({a.stack, origin, int64_t(a.requested), int(a.category)});
  }
  return out;
}

}  // namespace

FlameGraph flame_graph(const Analysis& r, const Trace& t, const ChartOptions& o) {
  FlameGraph g;
  const DeviceAnalysis* d = chart_device(r, o);
  if (!d) return g;
  g.categories = d->attr.categories;
  g.category_bytes = d->categories;
  const std::vector<LiveStack> stacks = live_stacks(*d);
  const FrameTable& frames = chart_frames(r, t);
  FlameIndex index(frames);
  const std::set<std::string> general = generalizable(index, stacks);
  Builder b(false, g.categories.size());
  for (const LiveStack& s : stacks) b.add(index, s.stack, s.origin, s.bytes, s.category, 0, general);
  g.total = b.nodes_[0].bytes;
  g.total_a = g.total;
  lay_out(b.nodes_, &frames, nullptr, false, flame_plot_width(o), g);
  return g;
}

FlameGraph flame_graph_diff(const Analysis& ra, const Trace& ta, const Analysis& rb, const Trace& tb, const ChartOptions& o) {
  FlameGraph g;
  g.diff = true;
  const DeviceAnalysis* da = chart_device(ra, o);
  const DeviceAnalysis* db = chart_device(rb, o);
  if (!da || !db) return g;
  const FrameTable& fa = chart_frames(ra, ta);
  const FrameTable& fb = chart_frames(rb, tb);
  FlameIndex ia(fa), ib(fb);
  Builder b(true, 0);
  for (const LiveStack& s : live_stacks(*da)) b.add(ia, s.stack, s.origin, s.bytes, -1, 0, {});
  for (const LiveStack& s : live_stacks(*db)) b.add(ib, s.stack, s.origin, s.bytes, -1, 1, {});
  g.total = b.nodes_[0].bytes;
  g.total_a = b.nodes_[0].a;
  g.total_b = b.nodes_[0].b;
  lay_out(b.nodes_, &fa, &fb, true, flame_plot_width(o), g);
  return g;
}

}  // namespace snapdiff
