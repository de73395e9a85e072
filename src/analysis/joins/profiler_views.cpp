// By op, by kernel, and PyTorch's memory timeline against snapdiff's
// categories (include/snapdiff/report/report.hpp, docs/attribution.md).
#include "analysis/joins/profiler_views.hpp"
#include "analysis/analyze/report_view_build.hpp"

#include <algorithm>
#include <cctype>
#include <deque>
#include <map>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "snapdiff/model/frame_names.hpp"

namespace snapdiff::detail {

std::string kernel_display_name(std::string_view name) {
  if (name.find('<') == std::string_view::npos && name.find("::") == std::string_view::npos)
    return capped_for_display(std::string(name));
  std::string s = short_native_name(std::string(name));
  return capped_for_display(s.empty() ? std::string(name) : s);
}

namespace {

std::string before_label(const Device& dev) {
  return dev.from_profiler() ? "(allocated before the profiler started)" : "(allocated before the recorded history)";
}

uint32_t kernel_begin(const Trace& t, uint32_t op) {
  return op < t.ops.size() ? t.ops[op].first_kernel : uint32_t(t.op_kernels.size());
}

// Where an op was called from when no Python frame says it: its outermost
// enclosing op (the autograd node of a backward op, "AddmmBackward0").
std::string caller_of(const Trace& t, const OpTree& ops, uint32_t op) {
  if (op == kNoOp || op >= t.ops.size()) return "";
  const uint32_t root = ops.root[op];
  if (root == op) return "";
  return capped_for_display(short_native_name(std::string(t.strings.get(t.ops[root].name))));
}

}  // namespace

OpTree::OpTree(const Trace& t) {
  const size_t n = t.ops.size();
  std::vector<uint32_t> launching(n, kNoOp);  // innermost op at or above with kernels (kNoOp: none)
  producer.resize(n);
  root.resize(n);
  for (uint32_t o = 0; o < n; ++o) {
    const uint32_t p = t.ops[o].parent;
    const bool up = p != kNoOp && p < o;  // (an op's enclosing op comes before it)
    const bool launches = kernel_begin(t, t.ops[o].subtree_end) > kernel_begin(t, o);
    launching[o] = launches ? o : up ? launching[p] : kNoOp;
    producer[o] = launching[o] == kNoOp ? o : launching[o];
    root[o] = up ? root[p] : o;
  }
}

namespace {

bool compute_kernel(const Trace& t, uint32_t k) {
  std::string_view n = t.strings.get(t.kernels[k].name);
  return !(n.rfind("Memset", 0) == 0 || n.rfind("Memcpy", 0) == 0);
}

// The kernel of an op range [b, e) of Trace::op_kernels for an allocation at
// `when`: the first launched at or after it (the earliest; of equal times the
// first in the range), else the last before it (the latest; of equal times
// the last in the range); compute kernels first, then any.
int64_t scan_kernel(const Trace& t, uint32_t b, uint32_t e, int64_t when) {
  int64_t kernel = -1;
  for (int pass = 0; pass < 2 && kernel < 0; ++pass) {
    int64_t after = -1, before = -1;
    for (uint32_t i = b; i < e; ++i) {
      const uint32_t k = t.op_kernels[i];
      if (pass == 0 && !compute_kernel(t, k)) continue;
      const int64_t kt = t.kernels[k].time_us;
      if (when == kNoTime || kt >= when) {
        if (after < 0 || kt < t.kernels[size_t(after)].time_us) after = k;
      } else if (before < 0 || kt >= t.kernels[size_t(before)].time_us) {
        before = k;
      }
    }
    kernel = after >= 0 ? after : before;
  }
  return kernel;
}

// scan_kernel() for many ranges at once, for ranges too long to scan one by
// one (an op with 100,000 nested ops below it, each launching a kernel):
// per pass, queries by time against a segment tree over the range's
// positions that holds the kernels launched at or after (before) that time.
// O((kernels + queries) log kernels).
struct Query {
  uint32_t b, e;
  int64_t when;
  int64_t kernel = -1;
};

struct Best {
  int64_t kt = 0;
  int64_t pos = -1;  // -1: none
};

class BestTree {
 public:
  BestTree(size_t n, bool want_min) : n_(n), min_(want_min), t_(2 * n) {}
  void put(size_t pos, int64_t kt) {
    size_t i = pos + n_;
    t_[i] = {kt, int64_t(pos)};
    for (i /= 2; i >= 1; i /= 2) t_[i] = pick(t_[2 * i], t_[2 * i + 1]);
  }
  Best query(size_t l, size_t r) const {  // [l, r)
    Best res;
    for (l += n_, r += n_; l < r; l /= 2, r /= 2) {
      if (l & 1) res = pick(res, t_[l++]);
      if (r & 1) res = pick(res, t_[--r]);
    }
    return res;
  }

 private:
  // Earliest time, then first position; or latest time, then last position.
  Best pick(const Best& a, const Best& b) const {
    if (a.pos < 0) return b;
    if (b.pos < 0) return a;
    if (a.kt != b.kt) return (min_ ? a.kt < b.kt : a.kt > b.kt) ? a : b;
    return (min_ ? a.pos < b.pos : a.pos > b.pos) ? a : b;
  }
  size_t n_;
  bool min_;
  std::vector<Best> t_;
};

void batch_kernels(const Trace& t, std::vector<Query>& qs) {
  const size_t n = t.op_kernels.size();
  if (qs.empty() || n == 0) return;
  std::vector<uint32_t> pos(n);
  for (uint32_t i = 0; i < n; ++i) pos[i] = i;
  auto kt = [&](uint32_t p) { return t.kernels[t.op_kernels[p]].time_us; };
  std::sort(pos.begin(), pos.end(), [&](uint32_t a, uint32_t b) { return kt(a) < kt(b); });
  std::vector<size_t> order(qs.size());
  for (int pass = 0; pass < 2; ++pass) {
    std::vector<size_t> open;
    for (size_t q = 0; q < qs.size(); ++q)
      if (qs[q].kernel < 0) open.push_back(q);
    if (open.empty()) break;
    auto counts = [&](uint32_t p) { return pass == 1 || compute_kernel(t, t.op_kernels[p]); };
    std::vector<int64_t> after(qs.size(), -1), before(qs.size(), -1);
    // After: the latest `when` first, adding the kernels at or after it.
    {
      std::sort(open.begin(), open.end(), [&](size_t a, size_t b) { return qs[a].when > qs[b].when; });
      BestTree tree(n, true);
      size_t k = n;  // pos[k..n) are in the tree
      for (size_t q : open) {
        const int64_t w = qs[q].when;  // kNoTime is the smallest time: every kernel counts
        while (k > 0 && kt(pos[k - 1]) >= w) {
          --k;
          if (counts(pos[k])) tree.put(pos[k], kt(pos[k]));
        }
        const Best b = tree.query(qs[q].b, qs[q].e);
        if (b.pos >= 0) after[q] = t.op_kernels[size_t(b.pos)];
      }
    }
    // Before: the earliest `when` first, adding the kernels before it.
    {
      std::sort(open.begin(), open.end(), [&](size_t a, size_t b) { return qs[a].when < qs[b].when; });
      BestTree tree(n, false);
      size_t k = 0;  // pos[0..k) are in the tree
      for (size_t q : open) {
        const int64_t w = qs[q].when;
        if (w == kNoTime) continue;  // at no time: only "after"
        while (k < n && kt(pos[k]) < w) {
          if (counts(pos[k])) tree.put(pos[k], kt(pos[k]));
          ++k;
        }
        const Best b = tree.query(qs[q].b, qs[q].e);
        if (b.pos >= 0) before[q] = t.op_kernels[size_t(b.pos)];
      }
    }
    for (size_t q : open) qs[q].kernel = after[q] >= 0 ? after[q] : before[q];
  }
}

constexpr uint32_t kScanKernels = 64;  // ranges up to this long are scanned

}  // namespace

std::vector<OpContext> op_contexts(const Trace& t, const OpTree& ops, const Device& dev,
                                   const std::vector<int64_t>& alloc_events) {
  std::vector<OpContext> out(alloc_events.size());
  std::vector<Query> long_ranges;
  std::vector<size_t> long_of;
  for (size_t i = 0; i < alloc_events.size(); ++i) {
    const int64_t ev = alloc_events[i];
    if (ev < 0 || dev.event_op.size() <= size_t(ev)) continue;
    const uint32_t op = dev.event_op[size_t(ev)];
    if (op == kNoOp || op >= t.ops.size()) continue;
    OpContext& c = out[i];
    c.op = ops.producer[op];
    const int64_t when = dev.events[size_t(ev)].time_us;
    const uint32_t b = kernel_begin(t, c.op), e = kernel_begin(t, t.ops[c.op].subtree_end);
    if (e - b <= kScanKernels) {
      c.kernel = scan_kernel(t, b, e, when);
    } else {
      long_ranges.push_back({b, e, when});
      long_of.push_back(i);
    }
  }
  batch_kernels(t, long_ranges);
  for (size_t q = 0; q < long_ranges.size(); ++q) out[long_of[q]].kernel = long_ranges[q].kernel;
  return out;
}

OpContext op_context(const Trace& t, const OpTree& ops, const Device& dev, int64_t alloc_event) {
  return op_contexts(t, ops, dev, {alloc_event})[0];
}

namespace {

// Accumulates rows keyed by a string and a frame.
struct RowAcc {
  OpRow row;
  FrameId python = kNoFrame;  // written out into row.python_frame
  StackId stack = 0;          // the largest allocation's, written out into row.stack_frames
  std::vector<int64_t> by_cat;
  std::map<std::string, int64_t> by_other;
  uint64_t largest = 0;
};

void add_to(std::map<std::pair<std::string, FrameId>, RowAcc>& m, const std::string& key, FrameId py,
            const std::string& other, const std::string& caller, const Allocation& al, size_t ncat) {
  RowAcc& a = m[{key, py}];
  a.python = py;
  a.row.bytes += int64_t(al.requested);
  ++a.row.count;
  if (a.by_cat.empty()) a.by_cat.assign(ncat, 0);
  a.by_cat[al.category] += int64_t(al.requested);
  a.by_other[other] += int64_t(al.requested);
  if (al.requested >= a.largest) {
    a.largest = al.requested;
    a.stack = al.stack;
    a.row.caller = caller;
  }
}

// The rows, largest first (then by op and kernel): each with its key, its
// category and the other name holding most of its bytes.
std::vector<RowAcc*> finish(std::map<std::pair<std::string, FrameId>, RowAcc>& m, bool key_is_op) {
  std::vector<RowAcc*> rows;
  for (auto& kv : m) {
    RowAcc& a = kv.second;
    OpRow& r = a.row;
    if (key_is_op) r.op = kv.first.first;
    else r.kernel = kv.first.first;
    r.category = int(std::max_element(a.by_cat.begin(), a.by_cat.end()) - a.by_cat.begin());
    std::string best;
    int64_t best_b = -1;
    for (auto& o : a.by_other)
      if (o.second > best_b) best = o.first, best_b = o.second;
    if (key_is_op) r.kernel = best;
    else r.other = best;
    rows.push_back(&a);
  }
  std::sort(rows.begin(), rows.end(), [](const RowAcc* x, const RowAcc* y) {
    const OpRow &a = x->row, &b = y->row;
    if (a.bytes != b.bytes) return a.bytes > b.bytes;
    if (a.op != b.op) return a.op < b.op;
    return a.kernel < b.kernel;
  });
  return rows;
}

// The first `top` rows written out into `kept`, the rest summed into `other`.
void keep_top(const FrameTable& ft, const Attribution& at, const std::vector<RowAcc*>& rows, size_t top,
              std::vector<OpRow>& kept, OpRow& other) {
  other = OpRow{};
  resolve_op_row(ft, at, kNoFrame, 0, other);
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i < top) {
      kept.push_back(std::move(rows[i]->row));
      resolve_op_row(ft, at, rows[i]->python, rows[i]->stack, kept.back());
    } else {
      other.bytes += rows[i]->row.bytes;
      other.count += rows[i]->row.count;
    }
  }
}

}  // namespace

void ops_at_peak(const Trace& t, const FrameTable& ft, const OpTree& ops, const Device& dev, DeviceAnalysis& d,
                 size_t top) {
  if (t.ops.empty() || dev.event_op.empty()) return;
  d.has_ops = true;
  const Attribution& at = d.attr;
  std::map<std::pair<std::string, FrameId>, RowAcc> by_op, by_kernel;
  const std::vector<uint32_t> live = at.live_at(d.peak_index);
  std::vector<int64_t> events;
  events.reserve(live.size());
  for (uint32_t id : live) events.push_back(at.allocations[id].alloc_event);
  const std::vector<OpContext> contexts = op_contexts(t, ops, dev, events);
  for (size_t li = 0; li < live.size(); ++li) {
    const Allocation& al = at.allocations[live[li]];
    const OpContext& c = contexts[li];
    std::string op = c.op != kNoOp ? capped_for_display(std::string(t.strings.get(t.ops[c.op].name)))
                     : al.alloc_event < 0 ? before_label(dev)
                                          : std::string();
    std::string kernel = c.kernel >= 0 ? kernel_display_name(t.strings.get(t.kernels[size_t(c.kernel)].name)) : std::string();
    FrameId py = ft.innermost_python(c.op != kNoOp ? t.ops[c.op].stack : al.stack);
    const std::string caller = caller_of(t, ops, c.op);
    add_to(by_op, op, py, kernel, caller, al, at.categories.size());
    add_to(by_kernel, kernel, UINT32_MAX, op, caller, al, at.categories.size());
  }
  const std::vector<RowAcc*> ops_rows = finish(by_op, true), kernel_rows = finish(by_kernel, false);
  d.ops_rows = ops_rows.size();
  d.kernel_rows = kernel_rows.size();
  keep_top(ft, at, ops_rows, top, d.by_op, d.other_ops);
  keep_top(ft, at, kernel_rows, top, d.by_kernel, d.other_kernels);
}

namespace {

struct Key {
  int64_t t;
  uint64_t size;
  bool operator<(const Key& o) const { return t != o.t ? t < o.t : size < o.size; }
};

}  // namespace

namespace {

constexpr int kU = MemoryTimeline::kUnknown;

int64_t ns_to_us(int64_t ns) { return ns >= 0 ? ns / 1000 : -((-ns + 999) / 1000); }

// PyTorch's category of every allocation, following the timeline up to one
// moment, and what that gives at the moment.
class TimelineMatcher {
 public:
  TimelineMatcher(const Trace& t, const FrameTable& ft, const Device& dev, const Attribution& at,
                  const MemoryTimeline& tl)
      : t_(t), ft_(ft), dev_(dev), at_(at), tl_(tl), ops_(t) {
    if (tl.raw) {
      rows_ = tl.rows;
      std::stable_sort(rows_.begin(), rows_.end(), [](const MemoryTimeline::Row& a, const MemoryTimeline::Row& b) {
        const int64_t x = a.time_ns < 0 ? INT64_MIN : a.time_ns, y = b.time_ns < 0 ? INT64_MIN : b.time_ns;
        return x < y;
      });
    }
  }

  TimelineMoment at(int64_t event_index, int64_t T, size_t top);

  // The raw export followed to its end: PyTorch's category of each
  // allocation from before the trace that the trace frees (255: none), and
  // the bytes by PyTorch's category of the tensors from before profiling
  // that are still alive at the end (never destroyed in the export).
  void pre_trace(std::vector<uint8_t>& freed_category, std::array<int64_t, MemoryTimeline::kCategories>& alive) {
    pc_.assign(at_.allocations.size(), 255);
    gone_.assign(at_.allocations.size(), 0);
    live_by_.clear();
    pre_pool_.clear();
    TimelineMoment m;
    follow_raw(kNoTime, m);
    freed_category.assign(at_.allocations.size(), 255);
    for (size_t id = 0; id < at_.allocations.size(); ++id)
      if (at_.allocations[id].alloc_event < 0 && gone_[id]) freed_category[id] = pc_[id];
    alive = m.pre_trace_tensors;
  }

 private:
  bool retag(uint64_t size, int from, int to) {
    auto it = live_by_.find({size, from});
    if (it == live_by_.end()) return false;
    auto& v = it->second;
    while (!v.empty()) {
      uint32_t id = v.back();
      v.pop_back();
      if (gone_[id] || pc_[id] != from) continue;
      pc_[id] = uint8_t(to);
      live_by_[{size, to}].push_back(id);
      return true;
    }
    return false;
  }
  void follow_raw(int64_t T, TimelineMoment& m);
  void follow_sums(int64_t T, TimelineMoment& m);

  const Trace& t_;
  const FrameTable& ft_;
  const Device& dev_;
  const Attribution& at_;
  const MemoryTimeline& tl_;
  const OpTree ops_;
  std::vector<MemoryTimeline::Row> rows_;
  std::vector<uint8_t> pc_;  // PyTorch's category per allocation (255: not tied)
  std::vector<char> gone_;
  // Live allocations by (size, PyTorch category), most recent last (a
  // version bump names only a size: the latest such tensor is taken, e.g.
  // the output an in-place ReLU just overwrote).
  std::map<std::pair<uint64_t, int>, std::vector<uint32_t>> live_by_;
  std::map<std::pair<uint64_t, int>, int64_t> pre_pool_;  // tensors from before profiling: count by (size, category)
};

void TimelineMatcher::follow_raw(int64_t T, TimelineMoment& m) {
  // Allocations and frees by (time_us, size), in event order.
  std::map<Key, std::deque<uint32_t>> allocs, frees;
  for (size_t i = 0; i < dev_.events.size(); ++i) {
    const Event& e = dev_.events[i];
    const uint32_t id = i < at_.event_alloc.size() ? at_.event_alloc[i] : UINT32_MAX;
    if (id == UINT32_MAX) continue;
    if (e.kind == EventKind::Alloc) allocs[{e.time_us, e.size}].push_back(id);
    else if (e.kind == EventKind::FreeRequested) frees[{e.time_us, e.size}].push_back(id);
  }
  for (size_t i = 0; i < rows_.size(); ++i) {
    const auto& row = rows_[i];
    if (row.time_ns >= 0 && T != kNoTime && ns_to_us(row.time_ns) > T) break;
    m.pytorch[row.category] += row.bytes;
    const uint64_t b = uint64_t(row.bytes < 0 ? -row.bytes : row.bytes);
    const int64_t tu = ns_to_us(row.time_ns);
    switch (row.action) {
      case MemoryTimeline::Preexisting: ++pre_pool_[{b, row.category}]; break;
      case MemoryTimeline::Create: {
        auto it = allocs.find({tu, b});
        if (it != allocs.end() && !it->second.empty()) {
          uint32_t id = it->second.front();
          it->second.pop_front();
          pc_[id] = row.category;
          live_by_[{b, row.category}].push_back(id);
          ++m.allocations_matched;
        }
        break;
      }
      case MemoryTimeline::Destroy: {
        auto it = frees.find({tu, b});
        bool pre = true;
        if (it != frees.end() && !it->second.empty()) {
          uint32_t id = it->second.front();
          it->second.pop_front();
          pre = at_.allocations[id].alloc_event < 0;
          pc_[id] = row.category;
          gone_[id] = 1;
        }
        if (pre) {
          auto p = pre_pool_.find({b, row.category});
          if (p != pre_pool_.end() && p->second > 0) --p->second;
        }
        break;
      }
      case MemoryTimeline::IncrementVersion: {
        // Written as a pair at one time: (-bytes, old category), (+bytes, new).
        if (row.bytes < 0 && i + 1 < rows_.size() && rows_[i + 1].action == MemoryTimeline::IncrementVersion &&
            rows_[i + 1].time_ns == row.time_ns) {
          const int from = row.category, to = rows_[i + 1].category;
          ++i;
          m.pytorch[size_t(to)] += rows_[i].bytes;
          if (from == to) break;
          if (!retag(b, from, to)) {
            auto p = pre_pool_.find({b, from});
            if (p != pre_pool_.end() && p->second > 0) {
              --p->second;
              ++pre_pool_[{b, to}];
            }
          }
        }
        break;
      }
      default: break;
    }
  }
  for (auto& kv : pre_pool_) {
    const int64_t b = int64_t(kv.first.first) * kv.second;
    m.pre_trace_tensors[size_t(kv.first.second)] += b;
    if (kv.first.second == kU) m.before_profiler += b;
  }
}

void TimelineMatcher::follow_sums(int64_t T, TimelineMoment& m) {
  const auto& times = tl_.times_us;
  size_t k_at = 0;
  bool any = false;
  for (size_t k = 0; k < times.size(); ++k)
    if (T == kNoTime || times[k] <= T) k_at = k, any = true;
  if (!any) return;
  m.pytorch = tl_.sizes[k_at];
  // Events by the timeline's row. PyTorch turns nanoseconds into its
  // microseconds through a double (int(t / 1000)), which rounds some of them
  // up: an event with no row at its microsecond belongs to the next one.
  std::map<int64_t, std::vector<size_t>> bucket;
  const std::unordered_set<int64_t> row_times(times.begin(), times.end());
  for (size_t i = 0; i < dev_.events.size(); ++i) {
    const Event& e = dev_.events[i];
    if ((e.kind == EventKind::Alloc || e.kind == EventKind::FreeRequested) && i < at_.event_alloc.size() &&
        at_.event_alloc[i] != UINT32_MAX) {
      int64_t key = e.time_us;
      if (!row_times.count(key) && key != INT64_MAX && row_times.count(key + 1)) ++key;
      bucket[key].push_back(i);
    }
  }
  constexpr int N = MemoryTimeline::kCategories;
  for (size_t k = 1; k <= k_at; ++k) {
    std::array<int64_t, N> delta{};
    for (int q = 0; q < N; ++q) delta[size_t(q)] = tl_.sizes[k][size_t(q)] - tl_.sizes[k - 1][size_t(q)];
    auto bit = bucket.find(times[k]);
    if (bit != bucket.end()) {
      std::vector<uint32_t> unknown_frees;
      for (size_t i : bit->second) {
        const Event& e = dev_.events[i];
        const uint32_t id = at_.event_alloc[i];
        if (e.kind != EventKind::FreeRequested) continue;
        gone_[id] = 1;
        if (pc_[id] != 255) delta[pc_[id]] += int64_t(e.size);
        else unknown_frees.push_back(id);
      }
      // The allocations of this timestamp: first those whose size is exactly
      // one category's change; then, when the rest add up to one category's
      // change, all of them there; then each where it fits best.
      std::vector<size_t> todo;
      for (size_t i : bit->second)
        if (dev_.events[i].kind == EventKind::Alloc) todo.push_back(i);
      auto assign = [&](size_t i, int q) {
        const uint32_t id = at_.event_alloc[i];
        pc_[id] = uint8_t(q);
        delta[size_t(q)] -= int64_t(dev_.events[i].size);
        live_by_[{dev_.events[i].size, q}].push_back(id);
        ++m.allocations_matched;
      };
      std::vector<size_t> rest;
      for (size_t i : todo) {
        int q = -1;
        for (int c = 0; c < N && q < 0; ++c)
          if (delta[size_t(c)] == int64_t(dev_.events[i].size)) q = c;
        if (q >= 0) assign(i, q);
        else rest.push_back(i);
      }
      if (!rest.empty()) {
        int64_t sum = 0;
        for (size_t i : rest) sum += int64_t(dev_.events[i].size);
        int q = -1;
        for (int c = 0; c < N && q < 0; ++c)
          if (delta[size_t(c)] == sum) q = c;
        if (q >= 0) {
          for (size_t i : rest) assign(i, q);
          rest.clear();
        }
      }
      for (size_t i : rest) {
        const int64_t b = int64_t(dev_.events[i].size);
        int best = -1;
        for (int c = 0; c < N; ++c)
          if (delta[size_t(c)] >= b && (best < 0 || delta[size_t(c)] > delta[size_t(best)])) best = c;
        if (best >= 0) assign(i, best);
      }
      for (uint32_t id : unknown_frees)
        for (int q = 0; q < N; ++q)
          if (delta[size_t(q)] == -int64_t(at_.allocations[id].requested)) {
            pc_[id] = uint8_t(q);
            delta[size_t(q)] = 0;
            break;
          }
    }
    // What is left moved between categories: version bumps of live tensors.
    for (int from = 0; from < N; ++from) {
      if (delta[size_t(from)] >= 0) continue;
      for (int to = 0; to < N; ++to)
        if (delta[size_t(to)] == -delta[size_t(from)] && retag(uint64_t(delta[size_t(to)]), from, to)) {
          delta[size_t(to)] = 0;
          delta[size_t(from)] = 0;
          break;
        }
    }
  }
}

TimelineMoment TimelineMatcher::at(int64_t event_index, int64_t T, size_t top) {
  pc_.assign(at_.allocations.size(), 255);
  gone_.assign(at_.allocations.size(), 0);
  live_by_.clear();
  pre_pool_.clear();
  TimelineMoment m;
  m.time_us = T;
  m.event_index = event_index;
  m.phase = at_.phase_at(event_index);
  m.iteration = at_.iteration_at(event_index);
  for (int64_t i = 0; i < int64_t(dev_.events.size()) && i <= event_index; ++i)
    m.allocations += dev_.events[size_t(i)].kind == EventKind::Alloc;
  if (tl_.raw) follow_raw(T, m);
  else follow_sums(T, m);
  for (int64_t v : m.pytorch) m.pytorch_total += v;
  m.unknown = m.pytorch[kU];
  m.snapdiff = at_.categories_at({event_index})[0];
  for (int64_t v : m.snapdiff) m.snapdiff_total += v;
  // What PyTorch calls unknown, placed.
  m.unknown_by_category.assign(at_.categories.size(), 0);
  std::map<std::tuple<int, std::string, std::string>, RowAcc> groups;
  const std::vector<uint32_t> live = at_.live_at(event_index);
  for (uint32_t id : live)
    if (at_.allocations[id].alloc_event < 0) m.pre_trace_live += int64_t(at_.allocations[id].requested);
  std::vector<uint32_t> placed;
  std::vector<int64_t> events;
  for (uint32_t id : live)
    if (pc_[id] == kU) placed.push_back(id), events.push_back(at_.allocations[id].alloc_event);
  const std::vector<OpContext> contexts = op_contexts(t_, ops_, dev_, events);
  for (size_t pi = 0; pi < placed.size(); ++pi) {
    const Allocation& al = at_.allocations[placed[pi]];
    m.placed += int64_t(al.requested);
    m.unknown_by_category[al.category] += int64_t(al.requested);
    const OpContext& oc = contexts[pi];
    std::string op = oc.op != kNoOp ? capped_for_display(std::string(t_.strings.get(t_.ops[oc.op].name)))
                     : al.alloc_event < 0 ? before_label(dev_)
                                          : std::string();
    std::string kernel = oc.kernel >= 0 ? kernel_display_name(t_.strings.get(t_.kernels[size_t(oc.kernel)].name)) : std::string();
    RowAcc& a = groups[{int(al.category), op, kernel}];
    a.row.op = op;
    a.row.kernel = kernel;
    a.row.category = al.category;
    a.row.bytes += int64_t(al.requested);
    ++a.row.count;
    if (al.requested >= a.largest) {
      a.largest = al.requested;
      a.stack = al.stack;
      a.python = ft_.innermost_python(oc.op != kNoOp ? t_.ops[oc.op].stack : al.stack);
      a.row.caller = caller_of(t_, ops_, oc.op);
    }
  }
  std::vector<RowAcc*> rows;
  for (auto& kv : groups) rows.push_back(&kv.second);
  std::sort(rows.begin(), rows.end(), [](const RowAcc* a, const RowAcc* b) {
    if (a->row.bytes != b->row.bytes) return a->row.bytes > b->row.bytes;
    return a->row.op < b->row.op;
  });
  if (rows.size() > top) rows.resize(top);
  for (RowAcc* a : rows) {
    m.placements.push_back(std::move(a->row));
    resolve_op_row(ft_, at_, a->python, a->stack, m.placements.back());
  }
  return m;
}

}  // namespace

namespace {

// snapdiff's category of each PyTorch category ("" for UNKNOWN).
const char* const kTimelineToSnapdiff[MemoryTimeline::kCategories] = {
    "parameter", "optimizer_state", "input", "temporary", "activation", "gradient", "temporary", ""};

}  // namespace

int add_timeline_rules(RuleSet& rs) {
  const int base = int(rs.rules.size());
  for (int c = 0; c < MemoryTimeline::kCategories; ++c) {
    Rule r;
    r.name = "pytorch_memory_timeline";
    r.origin = "--memory-timeline";
    std::string pt = MemoryTimeline::kCategoryNames[c];
    for (char& ch : pt) ch = char(std::toupper(static_cast<unsigned char>(ch)));
    if (kTimelineToSnapdiff[c][0] != '\0') {
      r.category = kTimelineToSnapdiff[c];
      r.evidence = "PyTorch's memory timeline (the raw export_memory_timeline given with --memory-timeline) calls this tensor from "
                   "before the profiler started " + pt;
    } else {
      r.category = "unknown";
      r.evidence = "PyTorch's memory timeline does not know this tensor's category";
    }
    r.category_index = rs.category_index(r.category);
    // Holds for no allocation (no size is at least UINT64_MAX and at most 0).
    r.min_bytes = UINT64_MAX;
    r.max_bytes = 0;
    rs.rules.push_back(std::move(r));
  }
  return base;
}

const Device* timeline_device(const Trace& t) {
  const Device* only = nullptr;
  int with_events = 0;
  for (const Device& d : t.devices) {
    if (d.events.empty()) continue;
    if (d.index == 0) return &d;
    only = &d;
    ++with_events;
  }
  return with_events == 1 ? only : nullptr;
}

int64_t timeline_pre_trace(const Trace& t, const FrameTable& ft, const Device& dev, Attribution& at,
                           const MemoryTimeline& tl, const RuleSet& rs, int rule_base) {
  if (!tl.raw || !dev.from_profiler() || rule_base < 0 || size_t(rule_base + MemoryTimeline::kCategories) > rs.rules.size())
    return 0;
  std::vector<uint8_t> freed;
  std::array<int64_t, MemoryTimeline::kCategories> alive{};
  {
    TimelineMatcher tm(t, ft, dev, at, tl);
    tm.pre_trace(freed, alive);
  }
  auto give = [&](Allocation& al, int c) {
    const Rule& r = rs.rules[size_t(rule_base + c)];
    al.category = uint16_t(r.category_index);
    al.rule = int16_t(rule_base + c);
  };
  int64_t given = 0;
  // Freed in the trace: their Destroy row says.
  int64_t lump = -1;  // the allocation standing for what the trace never frees
  for (size_t id = 0; id < at.allocations.size(); ++id) {
    Allocation& al = at.allocations[id];
    if (al.alloc_event >= 0) continue;
    if (al.addr == 0 && al.stack == dev.before_stack && al.free_event == INT64_MAX && lump < 0) {
      lump = int64_t(id);
      continue;
    }
    const uint8_t c = id < freed.size() ? freed[id] : 255;
    if (c == 255 || c == kU || al.rule >= 0) continue;
    give(al, c);
    given += int64_t(al.requested);
  }
  // Never freed: the tensors PyTorch knew before profiling and never saw
  // destroyed, by category, out of the one allocation (at most its bytes).
  if (lump >= 0 && at.allocations[size_t(lump)].rule < 0) {
    const Allocation whole = at.allocations[size_t(lump)];
    int64_t left = int64_t(whole.requested);
    std::vector<std::pair<int, int64_t>> pieces;
    for (int c = 0; c < MemoryTimeline::kCategories; ++c) {
      if (c == kU || alive[size_t(c)] <= 0 || left <= 0) continue;
      const int64_t b = std::min(alive[size_t(c)], left);
      pieces.push_back({c, b});
      left -= b;
    }
    for (size_t k = 0; k < pieces.size(); ++k) {
      Allocation al = whole;
      al.requested = uint64_t(pieces[k].second);
      give(al, pieces[k].first);
      given += pieces[k].second;
      if (k == 0 && left == 0) at.allocations[size_t(lump)] = al;  // nothing left unknown: the lump is the first piece
      else at.allocations.push_back(al);
    }
    if (left > 0) at.allocations[size_t(lump)].requested = uint64_t(left);
  }
  if (given > 0) {
    std::vector<int64_t> idx;
    idx.reserve(at.spans.size());
    for (const PhaseSpan& s : at.spans) idx.push_back(s.peak_event);
    auto cats = at.categories_at(idx);
    for (size_t k = 0; k < at.spans.size(); ++k) at.spans[k].categories = std::move(cats[k]);
  }
  return given;
}

void trace_activity(const Trace& t, Analysis& r, size_t top) {
  TraceActivity& a = r.activity;
  a.present = true;
  a.ops = t.ops.size();
  a.kernel_launches = t.kernels.size();
  std::unordered_set<uint32_t> threads;
  // Ops by name: the outermost call of each name counts (a recursive or
  // nested call of the same name is inside its time already).
  struct Acc {
    uint64_t calls = 0, kernels = 0;
    int64_t ns = 0;
  };
  std::map<StrId, Acc> by_name;
  // The open ops (pre-order: an op's descendants follow it up to its
  // subtree_end) and how many of each name are open.
  std::vector<uint32_t> open;
  std::unordered_map<StrId, uint32_t> open_names;
  for (uint32_t o = 0; o < t.ops.size(); ++o) {
    const TraceOp& op = t.ops[o];
    threads.insert(op.thread);
    while (!open.empty() && t.ops[open.back()].subtree_end <= o) {
      --open_names[t.ops[open.back()].name];
      open.pop_back();
    }
    const bool inside_same = open_names[op.name] > 0;
    if (op.subtree_end > o + 1) {
      open.push_back(o);
      ++open_names[op.name];
    }
    Acc& acc = by_name[op.name];
    if (inside_same) continue;
    ++acc.calls;
    acc.ns += op.duration_ns;
    acc.kernels += kernel_begin(t, op.subtree_end) - kernel_begin(t, o);
  }
  a.threads = threads.size();
  a.op_names = by_name.size();
  for (auto& kv : by_name) {
    if (kv.second.calls == 0) continue;
    TraceActivity::Op row;
    row.op = capped_for_display(std::string(t.strings.get(kv.first)));
    row.calls = kv.second.calls;
    row.total_ns = kv.second.ns;
    row.kernel_launches = kv.second.kernels;
    a.top_ops.push_back(std::move(row));
  }
  std::sort(a.top_ops.begin(), a.top_ops.end(), [](const TraceActivity::Op& x, const TraceActivity::Op& y) {
    if (x.total_ns != y.total_ns) return x.total_ns > y.total_ns;
    return x.op < y.op;
  });
  if (a.top_ops.size() > top) a.top_ops.resize(top);
  // Kernels by name, with the op that launched most of them.
  std::map<std::string, std::pair<uint64_t, std::map<std::string, uint64_t>>> kernels;
  for (const KernelLaunch& k : t.kernels) {
    auto& e = kernels[kernel_display_name(t.strings.get(k.name))];
    ++e.first;
    ++e.second[k.op < t.ops.size() ? capped_for_display(std::string(t.strings.get(t.ops[k.op].name))) : std::string()];
  }
  a.kernel_names = kernels.size();
  for (auto& kv : kernels) {
    TraceActivity::Kernel row;
    row.kernel = kv.first;
    row.launches = kv.second.first;
    uint64_t best = 0;
    for (auto& o : kv.second.second)
      if (o.second > best) best = o.second, row.op = o.first;
    a.top_kernels.push_back(std::move(row));
  }
  std::sort(a.top_kernels.begin(), a.top_kernels.end(), [](const TraceActivity::Kernel& x, const TraceActivity::Kernel& y) {
    if (x.launches != y.launches) return x.launches > y.launches;
    return x.kernel < y.kernel;
  });
  if (a.top_kernels.size() > top) a.top_kernels.resize(top);
}

void compare_timeline(const Trace& t, Analysis& r, const MemoryTimeline& tl, size_t top) {
  TimelineComparison& c = r.timeline;
  c.present = true;
  c.name = tl.name;
  c.raw = tl.raw;
  c.method = tl.raw ? "per event: each row of the raw export tied to the trace's allocation or free with the same time and size"
                    : "per timestamp: the export's category totals, tied to the trace's allocations where a timestamp's change fits them";
  if (r.devices.empty()) return;
  // export_memory_timeline describes one device, cuda:0 unless told otherwise.
  size_t di = r.peak_device;
  for (size_t i = 0; i < r.devices.size(); ++i)
    if (r.devices[i].device == 0) di = i;
  const DeviceAnalysis& d = r.devices[di];
  c.device = d.device;
  const Device* dev = t.find_device(d.device);
  if (!dev || dev->events.empty()) return;
  // PyTorch's own maximum, and when its unknown is largest.
  int64_t max_unknown = 0, max_unknown_t = kNoTime;
  if (tl.raw) {
    std::vector<MemoryTimeline::Row> rows = tl.rows;
    std::stable_sort(rows.begin(), rows.end(), [](const MemoryTimeline::Row& a, const MemoryTimeline::Row& b) {
      const int64_t x = a.time_ns < 0 ? INT64_MIN : a.time_ns, y = b.time_ns < 0 ? INT64_MIN : b.time_ns;
      return x < y;
    });
    int64_t total = 0, unknown = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      total += rows[i].bytes;
      if (rows[i].category == kU) unknown += rows[i].bytes;
      if (i + 1 < rows.size() && rows[i + 1].time_ns == rows[i].time_ns) continue;
      const int64_t tu = rows[i].time_ns < 0 ? kNoTime : ns_to_us(rows[i].time_ns);
      if (total > c.pytorch_peak) c.pytorch_peak = total, c.pytorch_peak_time_us = tu;
      if (unknown > max_unknown && tu != kNoTime) max_unknown = unknown, max_unknown_t = tu;
    }
  } else {
    for (size_t k = 0; k < tl.times_us.size(); ++k) {
      int64_t sum = 0;
      for (int64_t v : tl.sizes[k]) sum += v;
      if (sum > c.pytorch_peak) c.pytorch_peak = sum, c.pytorch_peak_time_us = tl.times_us[k];
      if (tl.sizes[k][kU] > max_unknown) max_unknown = tl.sizes[k][kU], max_unknown_t = tl.times_us[k];
    }
  }
  TimelineMatcher tm(t, *r.frames, *dev, d.attr, tl);
  const int64_t peak_t = d.peak_index >= 0 ? d.peak_event.time_us : dev->events.front().time_us;
  TimelineMoment first = tm.at(d.peak_index, peak_t, top);
  first.label = "snapdiff's peak";
  c.moments.push_back(std::move(first));
  if (max_unknown > c.moments[0].unknown && max_unknown_t != kNoTime) {
    // The last event at or before that time.
    int64_t e = -1;
    for (size_t i = 0; i < dev->events.size(); ++i)
      if (dev->events[i].time_us != kNoTime && dev->events[i].time_us <= max_unknown_t) e = int64_t(i);
    TimelineMoment second = tm.at(e, max_unknown_t, top);
    second.label = "PyTorch's largest unknown";
    c.moments.push_back(std::move(second));
  }
}

}  // namespace snapdiff::detail
