// torch.profiler Chrome traces, building: the merged records nested, placed
// and turned into the Trace (chrome_trace.hpp).
#include <algorithm>
#include <map>
#include <unordered_map>

#include "input/chrome_trace.hpp"

namespace snapdiff::detail::chrome_trace {
namespace {

// Builds the Trace from the merged records.
class TraceBuilder {
 public:
  TraceBuilder(Records&& r, Trace& t)
      : t_(t),
        base_ns_(r.base_ns),
        have_base_(r.have_base),
        ranges_(std::move(r.ranges)),
        mem_(std::move(r.mem)),
        launches_(std::move(r.launches)),
        gpu_(std::move(r.gpu)),
        flows_(std::move(r.flows)),
        threads_(r.threads),
        py_frames_(std::move(r.py_frames)),
        events_(r.events),
        meta_(std::move(r.meta)),
        schema_version_(std::move(r.schema_version)) {}

  void build();

 private:
  // The steps of build(), in order.
  void sort_records();
  void nest_ranges();
  void build_ops();
  void place_points();
  void link_kernels();
  void group_op_kernels();
  void build_events();
  void op_stacks();
  void annotations();
  void describe_source();
  StackId stack_of(uint32_t r);
  FrameId range_frame(const RangeRec& r);

  Trace& t_;
  int64_t base_ns_;
  bool have_base_;
  HugeVec<RangeRec> ranges_;
  HugeVec<MemRec> mem_;
  HugeVec<LaunchRec> launches_;
  HugeVec<GpuRec> gpu_;
  HugeVec<FlowRec> flows_;
  size_t threads_;
  std::vector<FrameId> name_frame_;  // by StrId: op / annotation frames
  std::vector<FrameId> py_frames_;   // python ranges' labels are indices into this
  uint64_t events_;
  HugeVec<uint32_t> parent_;   // per sorted range
  HugeVec<StackId> stack_;     // per sorted range (UINT32_MAX: not yet)
  HugeVec<uint32_t> near_op_;  // per sorted range: the innermost op at or above it
  HugeVec<uint32_t> op_of_range_;  // per sorted range: its op (kNoOp: not an op)
  // Per memory event, launch and flow start: its innermost range (UINT32_MAX: none).
  HugeVec<uint32_t> mem_range_, launch_range_, flow_range_;
  std::vector<std::pair<std::string, std::string>> meta_;
  std::string schema_version_;
};

FrameId TraceBuilder::range_frame(const RangeRec& r) {
  if (r.kind == kPython) return py_frames_[r.label];
  if (name_frame_.size() <= r.label) name_frame_.resize(size_t(r.label) + 1, UINT32_MAX);
  FrameId& f = name_frame_[r.label];
  if (f == UINT32_MAX) {
    Frame fr;
    fr.name = r.label;
    f = t_.intern_frame(fr);
  }
  return f;
}

StackId TraceBuilder::stack_of(uint32_t r) {
  if (stack_[r] != UINT32_MAX) return stack_[r];
  // Walk up to the first range with a stack, then come back down.
  std::vector<uint32_t> chain;
  uint32_t x = r;
  while (x != UINT32_MAX && stack_[x] == UINT32_MAX) {
    chain.push_back(x);
    x = parent_[x];
  }
  StackId s = x == UINT32_MAX ? 0 : stack_[x];
  for (size_t i = chain.size(); i-- > 0;) {
    s = t_.stacks.child(s, range_frame(ranges_[chain[i]]));
    stack_[chain[i]] = s;
  }
  return s;
}

// Records in a fixed order: GPU activities in file order, launches and flow
// starts by id (shards hand them over in any order).
void TraceBuilder::sort_records() {
  std::sort(gpu_.begin(), gpu_.end(), [](const GpuRec& a, const GpuRec& b) { return a.order < b.order; });
  std::sort(launches_.begin(), launches_.end(), [](const LaunchRec& a, const LaunchRec& b) {
    if (a.corr != b.corr) return a.corr < b.corr;
    if (a.ts != b.ts) return a.ts < b.ts;
    return a.thread < b.thread;
  });
  // Flow starts in a fixed order (the first of equal ids wins below).
  std::sort(flows_.begin(), flows_.end(), [](const FlowRec& a, const FlowRec& b) {
    return a.id != b.id ? a.id < b.id : a.ts < b.ts;
  });
}

// 1. Nesting per thread.
void TraceBuilder::nest_ranges() {
  std::sort(ranges_.begin(), ranges_.end(), [](const RangeRec& a, const RangeRec& b) {
    if (a.thread != b.thread) return a.thread < b.thread;
    if (a.start != b.start) return a.start < b.start;
    if (a.end != b.end) return a.end > b.end;
    if (a.kind != b.kind) return a.kind < b.kind;
    if (a.label != b.label) return a.label < b.label;
    return a.ext < b.ext;
  });
  const size_t nr = ranges_.size();
  parent_.assign(nr, UINT32_MAX);
  stack_.assign(nr, StackId(UINT32_MAX));
  near_op_.assign(nr, kNoOp);
  {
    std::vector<uint32_t> open;
    for (uint32_t i = 0; i < nr; ++i) {
      const RangeRec& r = ranges_[i];
      if (i == 0 || ranges_[i - 1].thread != r.thread) open.clear();
      while (!open.empty() && ranges_[open.back()].end < r.end) open.pop_back();
      parent_[i] = open.empty() ? UINT32_MAX : open.back();
      open.push_back(i);
    }
  }
}


// 2. Ops in pre-order (the sorted order), with their op parents.
void TraceBuilder::build_ops() {
  const size_t nr = ranges_.size();
  op_of_range_.assign(nr, kNoOp);
  t_.ops.clear();
  {
    size_t nops = 0;
    for (const RangeRec& r : ranges_) nops += r.kind == kOp;
    reserve_huge(t_.ops, nops);
  }
  for (uint32_t i = 0; i < nr; ++i) {
    const RangeRec& r = ranges_[i];
    const uint32_t up = parent_[i] == UINT32_MAX ? kNoOp : near_op_[parent_[i]];
    if (r.kind == kOp) {
      TraceOp op;
      op.name = r.label;
      op.time_us = abs_us(base_ns_, r.start);
      op.duration_ns = wrap_sub(r.end, r.start);
      op.thread = r.thread;
      op.parent = up;
      op_of_range_[i] = uint32_t(t_.ops.size());
      near_op_[i] = op_of_range_[i];
      t_.ops.push_back(op);
    } else {
      near_op_[i] = up;
    }
  }
  {
    const size_t n = t_.ops.size();
    for (size_t i = 0; i < n; ++i) t_.ops[i].subtree_end = uint32_t(i + 1);
    for (size_t i = n; i-- > 0;) {
      uint32_t p = t_.ops[i].parent;
      if (p != kNoOp) t_.ops[p].subtree_end = std::max(t_.ops[p].subtree_end, t_.ops[i].subtree_end);
    }
  }
}


// 3. Points (memory events, launches, flow starts) into their innermost
// range. Memory events are put in time order first (ties: file order).
void TraceBuilder::place_points() {
  const size_t nr = ranges_.size();
  std::sort(mem_.begin(), mem_.end(), [](const MemRec& a, const MemRec& b) {
    if (a.ts != b.ts) return a.ts < b.ts;
    return a.order < b.order;
  });
  struct Point {
    uint32_t thread;
    int64_t ts;
    uint32_t which;  // 0 mem, 1 launch, 2 flow
    uint32_t idx;
  };
  HugeVec<Point> pts;
  reserve_huge(pts, mem_.size() + launches_.size() + flows_.size());
  for (uint32_t i = 0; i < mem_.size(); ++i) pts.push_back({mem_[i].thread, mem_[i].ts, 0, i});
  for (uint32_t i = 0; i < launches_.size(); ++i) pts.push_back({launches_[i].thread, launches_[i].ts, 1, i});
  for (uint32_t i = 0; i < flows_.size(); ++i) pts.push_back({flows_[i].thread, flows_[i].ts, 2, i});
  std::sort(pts.begin(), pts.end(), [](const Point& a, const Point& b) {
    if (a.thread != b.thread) return a.thread < b.thread;
    if (a.ts != b.ts) return a.ts < b.ts;
    if (a.which != b.which) return a.which < b.which;
    return a.idx < b.idx;
  });
  mem_range_.assign(mem_.size(), UINT32_MAX);
  launch_range_.assign(launches_.size(), UINT32_MAX);
  flow_range_.assign(flows_.size(), UINT32_MAX);
  {
    size_t ri = 0;
    std::vector<uint32_t> open;
    uint32_t cur_thread = UINT32_MAX;
    for (const Point& p : pts) {
      if (p.thread != cur_thread) {
        cur_thread = p.thread;
        open.clear();
        while (ri < nr && ranges_[ri].thread < cur_thread) ++ri;
      }
      while (ri < nr && ranges_[ri].thread == cur_thread && ranges_[ri].start <= p.ts) {
        while (!open.empty() && ranges_[open.back()].end < ranges_[ri].start) open.pop_back();
        open.push_back(uint32_t(ri));
        ++ri;
      }
      while (!open.empty() && ranges_[open.back()].end < p.ts) open.pop_back();
      uint32_t r = open.empty() ? UINT32_MAX : open.back();
      (p.which == 0 ? mem_range_ : p.which == 1 ? launch_range_ : flow_range_)[p.idx] = r;
    }
  }
}


// 4. GPU activities and their launches.
// Launches by correlation id: a sorted index (ids are unique per launch).
void TraceBuilder::link_kernels() {
  const size_t nr = ranges_.size();
  HugeVec<std::pair<int64_t, uint32_t>> by_corr;
  reserve_huge(by_corr, launches_.size());
  for (uint32_t i = 0; i < launches_.size(); ++i) by_corr.push_back({launches_[i].corr, i});
  std::sort(by_corr.begin(), by_corr.end());
  auto find_launch = [&](int64_t corr) -> uint32_t {
    auto it = std::lower_bound(by_corr.begin(), by_corr.end(), std::make_pair(corr, uint32_t(0)));
    return it != by_corr.end() && it->first == corr ? it->second : UINT32_MAX;
  };
  // The fallbacks, built only when a GPU activity has no launch record.
  std::unordered_map<int64_t, uint32_t> op_by_ext, flow_by_id;
  bool fallbacks = false;
  struct K {
    KernelLaunch k;
    uint64_t order;
  };
  HugeVec<K> ks;
  ks.reserve(gpu_.size());
  for (uint32_t i = 0; i < gpu_.size(); ++i) {
    const GpuRec& g = gpu_[i];
    KernelLaunch k;
    k.device = g.device;
    k.name = g.name;
    k.stream = uint64_t(g.stream);
    int64_t when = g.ts;
    uint32_t range = UINT32_MAX;
    const uint32_t li = g.corr >= 0 ? find_launch(g.corr) : UINT32_MAX;
    if (li == UINT32_MAX && !fallbacks) {
      fallbacks = true;
      for (uint32_t r = 0; r < nr; ++r)
        if (ranges_[r].kind == kOp && ranges_[r].ext >= 0) op_by_ext.emplace(ranges_[r].ext, r);
      for (uint32_t f = 0; f < flows_.size(); ++f) flow_by_id.emplace(flows_[f].id, f);
    }
    if (li != UINT32_MAX) {
      when = launches_[li].ts;
      range = launch_range_[li];
    } else if (auto oit = g.ext >= 0 ? op_by_ext.find(g.ext) : op_by_ext.end(); oit != op_by_ext.end()) {
      range = oit->second;
    } else if (auto fit = g.corr >= 0 ? flow_by_id.find(g.corr) : flow_by_id.end(); fit != flow_by_id.end()) {
      when = flows_[fit->second].ts;
      range = flow_range_[fit->second];
    }
    k.time_us = abs_us(base_ns_, when);
    if (range != UINT32_MAX) {
      k.stack = stack_of(range);
      k.op = near_op_[range];
    }
    ks.push_back({k, g.order});
  }
  std::sort(ks.begin(), ks.end(), [](const K& a, const K& b) {
    return a.k.time_us != b.k.time_us ? a.k.time_us < b.k.time_us : a.order < b.order;
  });
  t_.kernels.clear();
  t_.kernels.reserve(ks.size());
  for (const K& k : ks) t_.kernels.push_back(k.k);
}

// Each op's own launches, grouped in op order, chronological within an op.
void TraceBuilder::group_op_kernels() {
  {
    std::vector<uint32_t> count(t_.ops.size() + 1, 0);
    for (const KernelLaunch& k : t_.kernels)
      if (k.op != kNoOp) ++count[k.op];
    uint32_t off = 0;
    for (size_t i = 0; i < t_.ops.size(); ++i) {
      t_.ops[i].first_kernel = off;
      t_.ops[i].kernel_count = count[i];
      off += count[i];
    }
    t_.op_kernels.assign(off, 0);
    std::vector<uint32_t> fill(t_.ops.size(), 0);
    for (uint32_t i = 0; i < t_.kernels.size(); ++i) {
      uint32_t op = t_.kernels[i].op;
      if (op == kNoOp) continue;
      t_.op_kernels[t_.ops[op].first_kernel + fill[op]++] = i;
    }
  }
}

// 5. Memory events per device (sorted by time before step 3).
void TraceBuilder::build_events() {
  StackId before_stack = 0;
  {
    Frame f;
    f.name = t_.strings.intern("<allocated before the profiler started>");
    before_stack = t_.stacks.child(0, t_.intern_frame(f));
  }
  {
    std::map<int32_t, size_t> per_device;
    for (const MemRec& m : mem_)
      if (m.device >= 0) ++per_device[m.device];
    for (auto& kv : per_device) {
      Device& d = t_.device(kv.first);
      reserve_huge(d.events, kv.second);
      reserve_huge(d.reported_allocated, kv.second);
      reserve_huge(d.reported_reserved, kv.second);
      reserve_huge(d.event_op, kv.second);
    }
  }
  for (size_t i = 0; i < mem_.size(); ++i) {
    const MemRec& m = mem_[i];
    const int64_t t_us = abs_us(base_ns_, m.ts);
    const uint32_t r = mem_range_[i];
    if (m.device < 0) {
      HostMemoryEvent h;
      h.time_us = t_us;
      h.addr = m.addr;
      h.bytes = m.bytes;
      h.total_allocated = m.total_alloc;
      t_.host_memory.push_back(h);
      continue;
    }
    Device& d = t_.device(m.device);
    if (!d.has_trace) {
      d.has_trace = true;
      d.before_stack = before_stack;
      d.allocated_before = m.has_alloc ? wrap_sub(m.total_alloc, m.kind == kMemOom ? 0 : m.bytes) : 0;
    }
    Event e;
    e.kind = m.kind == kMemOom ? EventKind::Oom : m.kind == kMemAlloc ? EventKind::Alloc : EventKind::FreeRequested;
    e.addr = m.kind == kMemOom ? 0 : m.addr;
    e.size = m.bytes < 0 ? uint64_t(0) - uint64_t(m.bytes) : uint64_t(m.bytes);
    e.time_us = t_us;
    if (r != UINT32_MAX) e.stack = stack_of(r);
    d.events.push_back(e);
    const int64_t prev_alloc = d.reported_allocated.empty() ? d.allocated_before : d.reported_allocated.back();
    const int64_t delta = m.kind == kMemOom ? 0 : m.bytes;
    d.reported_allocated.push_back(m.has_alloc ? m.total_alloc : wrap_add(prev_alloc, delta));
    const int64_t prev_res = d.reported_reserved.empty() ? 0 : d.reported_reserved.back();
    d.reported_reserved.push_back(m.has_res ? m.total_res : prev_res);
    d.event_op.push_back(r == UINT32_MAX ? kNoOp : near_op_[r]);
  }
}


// Stacks of the ops that launched a kernel or enclose an event, and of
// their enclosing ops (the rest are never looked at).
void TraceBuilder::op_stacks() {
  const size_t nr = ranges_.size();
  {
    std::vector<uint32_t> range_of_op(t_.ops.size(), UINT32_MAX);
    for (uint32_t i = 0; i < nr; ++i)
      if (op_of_range_[i] != kNoOp) range_of_op[op_of_range_[i]] = i;
    std::vector<char> need(t_.ops.size(), 0);
    auto mark = [&](uint32_t op) {
      for (; op != kNoOp && !need[op]; op = t_.ops[op].parent) need[op] = 1;
    };
    for (const KernelLaunch& k : t_.kernels) mark(k.op);
    for (const Device& d : t_.devices)
      for (uint32_t op : d.event_op) mark(op);
    for (uint32_t i = 0; i < t_.ops.size(); ++i)
      if (need[i]) t_.ops[i].stack = stack_of(range_of_op[i]);
  }
}

// 6. record_function ranges as annotations (the attribution reads
// Optimizer.step#... spans from them).
void TraceBuilder::annotations() {
  {
    std::vector<Annotation> an;
    for (const RangeRec& r : ranges_) {
      if (r.kind != kAnnotation) continue;
      an.push_back({-1, abs_us(base_ns_, r.start), r.label, true});
      an.push_back({-1, abs_us(base_ns_, r.end), r.label, false});
    }
    std::stable_sort(an.begin(), an.end(), [](const Annotation& a, const Annotation& b) {
      if (a.time_us != b.time_us) return a.time_us < b.time_us;
      return !a.start && b.start;  // an end before a start at the same time
    });
    t_.annotations = std::move(an);
  }
}

// 7. What the report shows about the input.
void TraceBuilder::describe_source() {
  t_.source.format = "chrome-trace";
  t_.source.format_detail = "torch.profiler / Kineto" + (schema_version_.empty() ? std::string() : ", schemaVersion " + schema_version_);
  t_.source.shape = have_base_ ? "traceEvents, baseTimeNanoseconds" : "traceEvents, absolute timestamps";
  for (auto& kv : meta_) t_.metadata.push_back(kv);
  t_.metadata.push_back({"profiler.trace_events", std::to_string(events_)});
  t_.metadata.push_back({"profiler.threads", std::to_string(threads_)});
  std::sort(t_.devices.begin(), t_.devices.end(), [](const Device& a, const Device& b) { return a.index < b.index; });
}

void TraceBuilder::build() {
  sort_records();
  nest_ranges();      // 1
  build_ops();        // 2
  place_points();     // 3
  link_kernels();     // 4
  group_op_kernels();
  build_events();     // 5
  op_stacks();
  annotations();      // 6
  describe_source();  // 7
  // The records are no longer needed.
  HugeVec<RangeRec>().swap(ranges_);
  HugeVec<MemRec>().swap(mem_);
  HugeVec<LaunchRec>().swap(launches_);
  HugeVec<GpuRec>().swap(gpu_);
  HugeVec<FlowRec>().swap(flows_);
}

}  // namespace

void build_trace(Records&& records, Trace& t) { TraceBuilder(std::move(records), t).build(); }

}  // namespace snapdiff::detail::chrome_trace
