// `snapdiff report SNAPSHOT --trace TRACE`: a snapshot's allocations gain
// the ops and kernels of a profiler trace of the same run (see
// include/snapdiff/input/profiler.hpp).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <unordered_map>
#include <utility>

#include "snapdiff/analysis/trace_join.hpp"
#include "analysis/joins/quantile.hpp"
#include "snapdiff/input/profiler.hpp"
#include "snapdiff/analysis/replay.hpp"
#include "snapdiff/error.hpp"

namespace snapdiff {

namespace {

// Copies strings, frames and stacks of one Trace into another.
class Importer {
 public:
  Importer(Trace& dst, const Trace& src) : dst_(dst), src_(src) {}
  StrId str(StrId s) {
    if (strs_.size() <= s) strs_.resize(src_.strings.size(), UINT32_MAX);
    if (strs_[s] == UINT32_MAX) strs_[s] = dst_.strings.intern(src_.strings.get(s));
    return strs_[s];
  }
  FrameId frame(FrameId f) {
    if (frames_.size() <= f) frames_.resize(src_.frames.size(), UINT32_MAX);
    if (frames_[f] == UINT32_MAX) {
      const Frame& fr = src_.frames[f];
      Frame c;
      c.name = str(fr.name);
      c.file = str(fr.file);
      c.line = fr.line;
      frames_[f] = dst_.intern_frame(c);
    }
    return frames_[f];
  }
  StackId stack(StackId s) {
    if (s == 0) return 0;
    if (stacks_.size() <= s) stacks_.resize(src_.stacks.size(), UINT32_MAX);
    if (stacks_[s] != UINT32_MAX) return stacks_[s];
    std::vector<StackId> chain;
    StackId x = s;
    while (x != 0 && (x >= stacks_.size() || stacks_[x] == UINT32_MAX)) {
      chain.push_back(x);
      x = src_.stacks.node(x).parent;
    }
    StackId d = x == 0 ? 0 : stacks_[x];
    for (size_t i = chain.size(); i-- > 0;) {
      d = dst_.stacks.child(d, frame(src_.stacks.node(chain[i]).frame));
      stacks_[chain[i]] = d;
    }
    return d;
  }

 private:
  Trace& dst_;
  const Trace& src_;
  std::vector<StrId> strs_;
  std::vector<FrameId> frames_;
  std::vector<StackId> stacks_;
};

struct Alloc {
  size_t event;
  uint64_t addr, size;
  int64_t t;
};

bool fits(uint64_t requested, uint64_t block, const AllocatorSettings& s) {
  const uint64_t r = allocator_round_size(requested, s);
  // A block is the rounded request, or a whole free block that was not
  // split (up to 1 MiB more in the large pool; more for oversize blocks).
  return block >= r && block - r <= (uint64_t(20) << 20);
}

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return joins::quantile_of_sorted(v, q);
}

}  // namespace

namespace {

// The first and last event times of a trace's devices (kNoTime: none).
std::pair<int64_t, int64_t> time_window(const Trace& t) {
  int64_t lo = kNoTime, hi = kNoTime;
  for (const Device& d : t.devices)
    for (const Event& e : d.events) {
      if (e.time_us == kNoTime) continue;
      if (lo == kNoTime || e.time_us < lo) lo = e.time_us;
      if (hi == kNoTime || e.time_us > hi) hi = e.time_us;
    }
  return {lo, hi};
}

std::string seconds_words(int64_t us) {
  char buf[64];
  const double s = double(us) / 1e6;
  if (s >= 10) std::snprintf(buf, sizeof buf, "%.0f s", s);
  else std::snprintf(buf, sizeof buf, "%.3f s", s);
  return buf;
}

std::string count_words(uint64_t n) {
  std::string s = std::to_string(n), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return out;
}

}  // namespace

Joined<TraceJoin> join_profiler_trace(Trace snap, const Trace& tr, const std::string& trace_name,
                                      const std::string& snapshot_name) {
  TraceJoin out;
  out.trace_name = trace_name;
  // A trace of another run: it ties almost none of its allocations and its
  // events are not at the snapshot's times. An input error, before anything
  // is copied.
  const auto sw = time_window(snap), tw = time_window(tr);
  Importer imp(snap, tr);
  // Ops and kernel launches, appended.
  const uint32_t op_base = uint32_t(snap.ops.size());
  const uint32_t ok_base = uint32_t(snap.op_kernels.size());
  const uint32_t k_base = uint32_t(snap.kernels.size());
  for (const TraceOp& o : tr.ops) {
    TraceOp c = o;
    c.name = imp.str(o.name);
    c.stack = imp.stack(o.stack);
    if (c.parent != kNoOp) c.parent += op_base;
    c.subtree_end += op_base;
    c.first_kernel += ok_base;
    snap.ops.push_back(c);
  }
  for (const KernelLaunch& k : tr.kernels) {
    KernelLaunch c = k;
    c.name = imp.str(k.name);
    c.stack = imp.stack(k.stack);
    if (c.op != kNoOp) c.op += op_base;
    snap.kernels.push_back(c);
  }
  for (uint32_t k : tr.op_kernels) snap.op_kernels.push_back(k + k_base);
  if (k_base > 0) {
    // Keep the launches chronological: sort, then renumber the op lists.
    std::vector<uint32_t> perm(snap.kernels.size());
    for (uint32_t i = 0; i < perm.size(); ++i) perm[i] = i;
    std::stable_sort(perm.begin(), perm.end(),
                     [&](uint32_t a, uint32_t b) { return snap.kernels[a].time_us < snap.kernels[b].time_us; });
    std::vector<uint32_t> where(perm.size());
    std::vector<KernelLaunch> sorted;
    sorted.reserve(perm.size());
    for (uint32_t i = 0; i < perm.size(); ++i) {
      where[perm[i]] = i;
      sorted.push_back(snap.kernels[perm[i]]);
    }
    snap.kernels.swap(sorted);
    for (uint32_t& k : snap.op_kernels) k = where[k];
  }
  out.ops = tr.ops.size();
  out.kernels = tr.kernels.size();

  // The op frames of an op and its enclosing ops, innermost first.
  auto op_frames = [&](uint32_t op) {
    std::vector<FrameId> f;
    for (uint32_t o = op; o != kNoOp; o = tr.ops[o].parent)
      if (tr.ops[o].stack != 0) f.push_back(imp.frame(tr.stacks.node(tr.ops[o].stack).frame));
    return f;
  };
  std::unordered_map<uint64_t, StackId> joined;  // (snapshot stack, trace op stack) -> stack

  for (Device& d : snap.devices) {
    const Device* td = tr.find_device(d.index);
    if (!td || td->events.empty() || d.events.empty()) continue;
    TraceJoinDevice jd;
    jd.device = d.index;
    std::vector<Alloc> ta, sa;
    for (size_t j = 0; j < td->events.size(); ++j)
      if (td->events[j].kind == EventKind::Alloc) ta.push_back({j, td->events[j].addr, td->events[j].size, td->events[j].time_us});
    for (size_t i = 0; i < d.events.size(); ++i)
      if (d.events[i].kind == EventKind::Alloc) sa.push_back({i, d.events[i].addr, d.events[i].size, d.events[i].time_us});
    jd.trace_allocs = ta.size();
    jd.snapshot_allocs = sa.size();
    std::unordered_map<uint64_t, std::vector<uint32_t>> by_addr;  // snapshot allocs by address, in order
    for (uint32_t i = 0; i < sa.size(); ++i) by_addr[sa[i].addr].push_back(i);

    // The clock offset: for each trace allocation, the nearest fitting
    // snapshot allocation at its address.
    std::vector<double> dts;
    for (const Alloc& a : ta) {
      if (a.t == kNoTime) continue;
      auto it = by_addr.find(a.addr);
      if (it == by_addr.end()) continue;
      double best = 0;
      bool have = false;
      for (uint32_t i : it->second) {
        if (sa[i].t == kNoTime || !fits(sa[i].size, a.size, snap.settings)) continue;
        double dt = double(sa[i].t - a.t);
        if (!have || std::fabs(dt) < std::fabs(best)) best = dt, have = true;
      }
      if (have) dts.push_back(best);
    }
    std::vector<int64_t> match(ta.size(), -1);  // trace alloc -> snapshot alloc
    bool by_time = false;
    if (!dts.empty()) {
      const double med = quantile(dts, 0.5);
      const double spread = (quantile(dts, 0.75) - quantile(dts, 0.25)) / 2;
      const double tol = 100.0 + 4 * spread;
      size_t close = 0;
      for (double v : dts) close += std::fabs(v - med) <= tol;
      if (close * 2 >= ta.size() && close * 4 >= dts.size() * 3) {
        by_time = true;
        jd.offset_us = med;
        jd.offset_spread_us = spread;
        std::vector<char> used(sa.size(), 0);
        for (size_t j = 0; j < ta.size(); ++j) {
          const Alloc& a = ta[j];
          auto it = by_addr.find(a.addr);
          if (a.t == kNoTime || it == by_addr.end()) continue;
          int64_t best = -1;
          double best_d = 0;
          for (uint32_t i : it->second) {
            if (used[i] || sa[i].t == kNoTime || !fits(sa[i].size, a.size, snap.settings)) continue;
            double dd = std::fabs(double(sa[i].t - a.t) - med);
            if (dd <= tol && (best < 0 || dd < best_d)) best = i, best_d = dd;
          }
          if (best >= 0) {
            used[size_t(best)] = 1;
            match[j] = best;
          }
        }
        const double lo = double(ta.front().t) + med - tol, hi = double(ta.back().t) + med + tol;
        for (const Alloc& s : sa)
          if (s.t != kNoTime && double(s.t) >= lo && double(s.t) <= hi) ++jd.in_window;
      }
    }
    if (!by_time) {
      // No clock to line up: the k-th fitting allocation at an address after
      // the previous match, in order.
      std::unordered_map<uint64_t, size_t> next_at;  // address -> position in by_addr list
      int64_t last = -1;
      for (size_t j = 0; j < ta.size(); ++j) {
        auto it = by_addr.find(ta[j].addr);
        if (it == by_addr.end()) continue;
        size_t& p = next_at[ta[j].addr];
        const auto& list = it->second;
        while (p < list.size() && (int64_t(list[p]) <= last || !fits(sa[list[p]].size, ta[j].size, snap.settings))) ++p;
        if (p < list.size()) {
          match[j] = list[p];
          last = list[p];
          ++p;
        }
      }
    }
    jd.method = by_time ? "time" : "address-order";
    d.event_op.assign(d.events.size(), kNoOp);
    for (size_t j = 0; j < ta.size(); ++j) {
      if (match[j] < 0) continue;
      const size_t te = ta[j].event;
      const uint32_t op = td->event_op.empty() ? kNoOp : td->event_op[te];
      Event& e = d.events[sa[size_t(match[j])].event];
      ++jd.matched;
      if (op == kNoOp) continue;
      ++jd.with_op;
      d.event_op[sa[size_t(match[j])].event] = op + op_base;
      const uint64_t key = (uint64_t(e.stack) << 32) | tr.ops[op].stack;
      auto it = joined.find(key);
      if (it == joined.end()) {
        StackId s = e.stack;
        std::vector<FrameId> f = op_frames(op);
        for (size_t k = f.size(); k-- > 0;) s = snap.stacks.child(s, f[k]);
        it = joined.emplace(key, s).first;
      }
      e.stack = it->second;
    }
    out.devices.push_back(jd);
  }
  uint64_t tied = 0, trace_allocs = 0;
  for (const TraceJoinDevice& jd : out.devices) tied += jd.matched, trace_allocs += jd.trace_allocs;
  if (trace_allocs == 0)
    for (const Device& d : tr.devices)
      for (const Event& e : d.events) trace_allocs += e.kind == EventKind::Alloc;
  const bool timed = sw.first != kNoTime && tw.first != kNoTime;
  const bool apart = timed && (tw.second < sw.first || tw.first > sw.second);
  if (trace_allocs > 0 && tied * 100 < uint64_t(kJoinMinTiedPercent) * trace_allocs && apart) {
    const std::string when = tw.second < sw.first
                                 ? "its events end " + seconds_words(sw.first - tw.second) + " before the snapshot's first event"
                                 : "its events start " + seconds_words(tw.first - sw.second) + " after the snapshot's last event";
    InputError e("not a trace of the run of " + (snapshot_name.empty() ? std::string("the snapshot") : snapshot_name) +
                 ": " + (tied == 0 ? std::string("none") : "only " + count_words(tied)) + " of its " + count_words(trace_allocs) +
                 " allocations tie to the snapshot's (same device, address and fitting size; less than " +
                 std::to_string(kJoinMinTiedPercent) + "%), and " + when +
                 "; give --trace the profiler trace recorded in the same run");
    e.set_file(trace_name);
    throw e;
  }
  return {std::move(snap), std::move(out)};
}

}  // namespace snapdiff
