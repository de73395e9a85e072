// torch.profiler inputs: Chrome traces (real ones and hand-made tiny ones,
// one per event kind and join rule), memory timelines, the snapshot join.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "input/file_source.hpp"
#include "input/detect.hpp"
#include "snapdiff/error.hpp"
#include "snapdiff/input/input.hpp"
#include "snapdiff/input/profiler.hpp"
#include "snapdiff/analysis/trace_join.hpp"
#include "snapdiff/analysis/replay.hpp"
#include "snapdiff/analysis/analysis.hpp"
#include "snapdiff/report/report.hpp"
#include "test_util.hpp"

using namespace snapdiff;
using snapdiff::test::fixture;
using snapdiff::test::read_file;
using snapdiff::test::real_data;

namespace {

// ---- building tiny traces ----------------------------------------------------

std::string q(const std::string& s) { return "\"" + s + "\""; }

std::string op(const std::string& name, int tid, double ts, double dur, int ext = -1, const char* cat = "cpu_op") {
  std::string args = ext >= 0 ? "{\"External id\": " + std::to_string(ext) + ", \"Input Dims\": [[2, 3], []]}" : "{}";
  return "{\"ph\": \"X\", \"cat\": " + q(cat) + ", \"name\": " + q(name) + ", \"pid\": 100, \"tid\": " +
         std::to_string(tid) + ", \"ts\": " + std::to_string(ts) + ", \"dur\": " + std::to_string(dur) +
         ", \"args\": " + args + "}";
}
std::string py(const std::string& name, int tid, double ts, double dur) {
  return "{\"ph\": \"X\", \"cat\": \"python_function\", \"name\": " + q(name) + ", \"pid\": 100, \"tid\": " +
         std::to_string(tid) + ", \"ts\": " + std::to_string(ts) + ", \"dur\": " + std::to_string(dur) +
         ", \"args\": {\"Python parent id\": null, \"Python id\": 1}}";
}
std::string mem(int tid, double ts, uint64_t addr, int64_t bytes, int64_t total_alloc, int64_t total_res, int dev = 0,
                int type = 1) {
  return "{\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"s\": \"t\", \"name\": \"[memory]\", \"pid\": 100, \"tid\": " +
         std::to_string(tid) + ", \"ts\": " + std::to_string(ts) + ", \"args\": {\"Total Reserved\": " +
         std::to_string(total_res) + ", \"Total Allocated\": " + std::to_string(total_alloc) +
         ", \"Bytes\": " + std::to_string(bytes) + ", \"Device Id\": " + std::to_string(dev) +
         ", \"Device Type\": " + std::to_string(type) + ", \"Addr\": " + std::to_string(addr) + ", \"finished\": false}}";
}
std::string runtime(int tid, double ts, int corr, int ext = -1) {
  std::string extra = ext >= 0 ? ", \"External id\": " + std::to_string(ext) : "";
  return "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 100, \"tid\": " +
         std::to_string(tid) + ", \"ts\": " + std::to_string(ts) + ", \"dur\": 2, \"args\": {\"cbid\": 211, \"correlation\": " +
         std::to_string(corr) + extra + "}}";
}
std::string kernel(const std::string& name, int stream, double ts, int corr, int ext = -1, const char* cat = "kernel") {
  std::string c = corr >= 0 ? ", \"correlation\": " + std::to_string(corr) : "";
  std::string e = ext >= 0 ? ", \"External id\": " + std::to_string(ext) : "";
  return "{\"ph\": \"X\", \"cat\": " + q(cat) + ", \"name\": " + q(name) + ", \"pid\": 0, \"tid\": " +
         std::to_string(stream) + ", \"ts\": " + std::to_string(ts) + ", \"dur\": 5, \"args\": {\"device\": 0, " +
         "\"stream\": " + std::to_string(stream) + c + e + "}}";
}
std::string flow(char ph, int id, int pid, int tid, double ts) {
  return std::string("{\"ph\": \"") + ph + "\", \"id\": " + std::to_string(id) + ", \"pid\": " + std::to_string(pid) +
         ", \"tid\": " + std::to_string(tid) + ", \"ts\": " + std::to_string(ts) +
         ", \"cat\": \"ac2g\", \"name\": \"ac2g\"" + (ph == 'f' ? ", \"bp\": \"e\"" : "") + "}";
}
std::string trace(const std::vector<std::string>& events, const std::string& extra = "") {
  std::string s = "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [{\"id\": 0, \"name\": \"Test GPU\", "
                  "\"totalGlobalMem\": 1000}],\n  \"baseTimeNanoseconds\": 1000000000000000,\n" +
                  extra + "  \"traceEvents\": [\n";
  for (size_t i = 0; i < events.size(); ++i) s += "  " + events[i] + (i + 1 < events.size() ? ",\n" : "\n");
  return s + "  ],\n  \"traceName\": \"tiny\"\n}\n";
}

Trace load(const std::string& text) { return load_trace_from_memory(text, "tiny.json"); }

std::vector<std::string> frame_names(const Trace& t, StackId s) {
  std::vector<std::string> out;
  for (FrameId f : t.stacks.frames(s)) out.emplace_back(t.strings.get(t.frames[f].name));
  return out;
}

std::string op_name(const Trace& t, uint32_t op) { return op == kNoOp ? "" : std::string(t.strings.get(t.ops[op].name)); }

// The largest "Total Allocated" a trace reports for CUDA device `dev`.
int64_t max_total_allocated(const std::string& json_text, int dev) {
  auto j = nlohmann::json::parse(json_text);
  int64_t m = 0;
  for (auto& e : j["traceEvents"])
    if (e.value("name", "") == "[memory]" && e["args"].value("Device Type", -1) == 1 && e["args"].value("Device Id", -1) == dev)
      m = std::max(m, e["args"]["Total Allocated"].get<int64_t>());
  return m;
}

int64_t max_total_reserved(const std::string& json_text, int dev) {
  auto j = nlohmann::json::parse(json_text);
  int64_t m = 0;
  for (auto& e : j["traceEvents"])
    if (e.value("name", "") == "[memory]" && e["args"].value("Device Type", -1) == 1 && e["args"].value("Device Id", -1) == dev)
      m = std::max(m, e["args"]["Total Reserved"].get<int64_t>());
  return m;
}

std::string gunzip_file(const std::string& path) {
  std::string raw = read_file(path);
  auto v = detail::gunzip(reinterpret_cast<const uint8_t*>(raw.data()), raw.size(), uint64_t(1) << 32);
  return std::string(v.begin(), v.end());
}

void expect_error(const std::string& text, const std::string& where, const std::string& what) {
  try {
    load(text);
    FAIL("no error for: " << text.substr(0, 200));
  } catch (const InputError& e) {
    INFO(e.describe());
    CHECK(e.file() == "tiny.json");
    CHECK(e.describe().find(where) != std::string::npos);
    CHECK(e.describe().find(what) != std::string::npos);
  }
}

}  // namespace

// ---- real traces ---------------------------------------------------------------

TEST_CASE("small_profile trace: the replayed peak is the largest Total Allocated, exactly", "[analysis][profiler]") {
  const std::string path = real_data("small_profile.trace.json.gz");
  Trace t = load_trace(path);
  CHECK(t.source.format == "chrome-trace");
  CHECK(t.source.gzip);
  CHECK(is_profiler_trace(t));
  REQUIRE(t.devices.size() == 1);
  const Device& d = t.devices[0];
  CHECK(d.index == 0);
  CHECK(d.from_profiler());
  CHECK(d.segments.empty());
  const std::string text = gunzip_file(path);
  DeviceReplay rp = replay_device(t, d);
  CHECK(rp.reported_totals);
  CHECK(rp.inconsistencies == 0);  // the events' Bytes sum to the reported totals after every event
  CHECK(rp.peak_allocated.bytes == max_total_allocated(text, 0));
  CHECK(rp.peak_reserved.bytes == max_total_reserved(text, 0));
  CHECK(rp.peak_requested.bytes == rp.peak_allocated.bytes);  // a trace has block sizes only
  // And PyTorch's own counter for the run (the profiled steps hold the peak).
  CHECK(rp.peak_allocated.bytes == test::truth("small_profile")["max_memory_allocated"].get<int64_t>());
  CHECK(t.host_memory.size() == 4);   // the CPU allocator's events are kept apart
  CHECK(t.kernels.size() > 200);
  CHECK(t.ops.size() == 1450);
  // Every kernel found its launching op.
  size_t with_op = 0;
  for (const KernelLaunch& k : t.kernels) with_op += k.op != kNoOp;
  CHECK(with_op == t.kernels.size());
}

TEST_CASE("small_profile trace: report sums, ops, and the optimizer's foreach temporaries", "[analysis][profiler]") {
  Trace t = load_trace(real_data("small_profile.trace.json.gz"));
  ReportOptions ro;
  ro.top_sites = 50;
  Analysis r = analyze(t, ro);
  REQUIRE(r.devices.size() == 1);
  const DeviceAnalysis& d = r.devices[0];
  int64_t sum = 0;
  for (int64_t c : d.categories) sum += c;
  CHECK(sum == d.replay.peak_requested.bytes);
  CHECK(d.peak_live_requested == d.replay.peak_requested.bytes);
  REQUIRE(d.has_ops);
  int64_t by_op = d.other_ops.bytes, by_kernel = d.other_kernels.bytes;
  for (const OpRow& o : d.by_op) by_op += o.bytes;
  for (const OpRow& o : d.by_kernel) by_kernel += o.bytes;
  CHECK(by_op == d.peak_live_requested);
  CHECK(by_kernel == d.peak_live_requested);
  // Two iterations, each with an optimizer step whose temporaries come from
  // _foreach_sqrt (what PyTorch's timeline calls unknown).
  CHECK(d.attr.iterations == 2);
  // One gradient-sized copy per step: PyTorch's timeline has the gradients'
  // blocks (its GRADIENT column) at the start.
  const int64_t grads = load_memory_timeline(real_data("small_profile.memtl.json")).sizes[0][5];
  CHECK(grads == 41992192);
  int steps = 0;
  for (const PhaseSpan& s : d.attr.spans)
    if (s.phase == Phase::Optimizer) {
      ++steps;
      for (size_t i = 0; i < d.attr.categories.size(); ++i)
        if (d.attr.categories[i] == "optimizer_temporary") CHECK(s.categories[i] == grads);
    }
  CHECK(steps == 2);
  std::string text = render_text(report_view(r));
  CHECK(text.find("BY OP AT THE PEAK") != std::string::npos);
  CHECK(text.find("BY KERNEL AT THE PEAK") != std::string::npos);
  CHECK(text.find("aten::addmm -> nvjet_") != std::string::npos);
  CHECK(text.find("[profiler_window]") != std::string::npos);
  auto j = nlohmann::json::parse(render_json(report_view(r)));
  CHECK(j["input"]["format"] == "chrome-trace");
  CHECK(j["peak"]["allocated_bytes"] == 326411776);
  CHECK(j["devices"][0]["counters"] == "reported");
  CHECK(j["devices"][0]["by_op"].size() > 3);
}

TEST_CASE("joint trace: peak exact against PyTorch's counters", "[analysis][profiler]") {
  const std::string path = fixture("profile/joint.trace.json.gz");
  Trace t = load_trace(path);
  REQUIRE(t.devices.size() == 1);
  DeviceReplay rp = replay_device(t, t.devices[0]);
  CHECK(rp.inconsistencies == 0);
  CHECK(rp.peak_allocated.bytes == max_total_allocated(gunzip_file(path), 0));
  auto truth = nlohmann::json::parse(read_file(fixture("profile/joint.truth.json")));
  CHECK(rp.peak_allocated.bytes == truth["max_memory_allocated"].get<int64_t>());
}

// ---- tiny traces: each event kind and join rule ---------------------------------

TEST_CASE("tiny trace: nested ops, Python stack, allocation inside the innermost op", "[input][profiler]") {
  std::string text = trace({
      py("train.py(10): step", 1, 0, 1000),
      py("nn.Module: Linear_0", 1, 5, 500),
      op("aten::linear", 1, 10, 100, 11),
      op("aten::addmm", 1, 20, 50, 12),
      op("aten::empty", 1, 22, 5, 13),
      mem(1, 23, 4096, 512, 512, 2097152),
      mem(1, 300, 4096, -512, 0, 2097152),
  });
  Trace t = load(text);
  REQUIRE(t.devices.size() == 1);
  const Device& d = t.devices[0];
  REQUIRE(d.events.size() == 2);
  CHECK(d.events[0].kind == EventKind::Alloc);
  CHECK(d.events[1].kind == EventKind::FreeRequested);
  CHECK(op_name(t, d.event_op[0]) == "aten::empty");
  CHECK(d.event_op[1] == kNoOp);  // the free happens outside every op
  auto names = frame_names(t, d.events[0].stack);
  REQUIRE(names.size() == 5);
  CHECK(names == std::vector<std::string>{"aten::empty", "aten::addmm", "aten::linear", "nn.Module: Linear_0", "step"});
  FrameId outer = t.stacks.frames(d.events[0].stack).back();
  CHECK(t.strings.get(t.frames[outer].file) == "train.py");
  CHECK(t.frames[outer].line == 10);
  // The free's stack: the Python frames around it.
  CHECK(frame_names(t, d.events[1].stack) == std::vector<std::string>{"nn.Module: Linear_0", "step"});
  // Times: baseTimeNanoseconds/1000 + ts.
  CHECK(d.events[0].time_us == 1000000000000 + 23);
  // Op tree.
  REQUIRE(t.ops.size() == 3);
  CHECK(op_name(t, t.ops[2].parent) == "aten::addmm");
  CHECK(t.ops[0].subtree_end == 3);
}

TEST_CASE("tiny trace: a python_function with an empty name is a frame too (fuzzer finding)", "[input][profiler]") {
  // The empty name is the string table's entry 0; it once got no frame and
  // the stack walk read far outside the frame array.
  std::string text = trace({
      py("", 1, 0, 1000),
      op("aten::empty", 1, 10, 5, 13),
      mem(1, 12, 4096, 512, 512, 2097152),
  });
  Trace t = load(text);
  REQUIRE(t.devices.size() == 1);
  REQUIRE(t.devices[0].events.size() == 1);
  CHECK(frame_names(t, t.devices[0].events[0].stack) == std::vector<std::string>{"aten::empty", ""});
}

TEST_CASE("tiny trace: ops on two threads do not nest across threads", "[input][profiler]") {
  std::string text = trace({
      op("aten::mm", 1, 0, 100),
      op("MmBackward0", 2, 0, 100),
      op("aten::mm", 2, 10, 50),
      mem(2, 20, 8192, 1024, 1024, 2097152),
      mem(1, 30, 16384, 512, 1536, 2097152),
  });
  Trace t = load(text);
  const Device& d = t.devices[0];
  REQUIRE(d.events.size() == 2);
  CHECK(frame_names(t, d.events[0].stack) == std::vector<std::string>{"aten::mm", "MmBackward0"});
  CHECK(frame_names(t, d.events[1].stack) == std::vector<std::string>{"aten::mm"});
  CHECK(t.ops[d.event_op[0]].thread != t.ops[d.event_op[1]].thread);
}

TEST_CASE("tiny trace: kernels on two streams, found through correlation, External id and flows", "[input][profiler]") {
  std::string text = trace({
      op("aten::_foreach_sqrt", 1, 0, 100, 21),
      mem(1, 5, 4096, 1024, 1024, 2097152),
      runtime(1, 10, 501, 21),
      runtime(1, 20, 502, 21),
      kernel("void multi_tensor_apply_kernel<TensorListMetadata<1>, UnaryOpFunctor<float> >(int)", 7, 12, 501, 21),
      kernel("Memset (Device)", 13, 22, 502, 21, "gpu_memset"),
      // No runtime record: the op by External id.
      op("aten::copy_", 1, 200, 50, 22),
      kernel("copy_kernel", 7, 230, 503, 22),
      // No runtime record, no External id: the flow start.
      op("aten::add", 1, 300, 50, 23),
      flow('s', 504, 100, 1, 310),
      flow('f', 504, 0, 7, 330),
      kernel("add_kernel", 7, 330, 504),
      // A flow end without its start, and a start without its end.
      flow('f', 999, 0, 7, 400),
      flow('s', 998, 100, 1, 401),
  });
  Trace t = load(text);
  REQUIRE(t.kernels.size() == 4);
  auto by_name = [&](const std::string& n) -> const KernelLaunch& {
    for (const KernelLaunch& k : t.kernels)
      if (std::string(t.strings.get(k.name)) == n) return k;
    FAIL("no kernel " << n);
    return t.kernels[0];
  };
  const KernelLaunch& k1 = by_name("void multi_tensor_apply_kernel<TensorListMetadata<1>, UnaryOpFunctor<float> >(int)");
  const KernelLaunch& k2 = by_name("Memset (Device)");
  CHECK(k1.stream == 7);
  CHECK(k2.stream == 13);
  CHECK(op_name(t, k1.op) == "aten::_foreach_sqrt");
  CHECK(op_name(t, k2.op) == "aten::_foreach_sqrt");
  CHECK(k1.time_us == 1000000000000 + 10);  // the launch time, not the GPU time
  CHECK(op_name(t, by_name("copy_kernel").op) == "aten::copy_");
  CHECK(op_name(t, by_name("add_kernel").op) == "aten::add");
  CHECK(by_name("add_kernel").time_us == 1000000000000 + 310);
  // The op's own launches.
  const TraceOp& o = t.ops[k1.op];
  CHECK(o.kernel_count == 2);
  // The allocation's kernel: the compute kernel, not the memset.
  ReportOptions ro;
  Analysis r = analyze(t, ro);
  REQUIRE(r.devices[0].by_kernel.size() == 1);
  CHECK(r.devices[0].by_kernel[0].kernel == "multi_tensor_apply_kernel<…>");
  CHECK(r.devices[0].by_op[0].op == "aten::_foreach_sqrt");
}

TEST_CASE("tiny trace: an allocation outside every op, OOM, CPU events, a second device, string pids", "[input][profiler]") {
  std::string text = trace({
      "{\"ph\": \"X\", \"cat\": \"Trace\", \"name\": \"PyTorch Profiler (0)\", \"pid\": \"Spans\", \"tid\": \"PyTorch Profiler\", \"ts\": 0, \"dur\": 1000, \"args\": {\"Op count\": 0}}",
      "{\"name\": \"process_name\", \"ph\": \"M\", \"ts\": 0, \"pid\": 100, \"tid\": 0, \"args\": {\"name\": \"python3\"}}",
      op("aten::unrelated", 9, 0, 100),
      mem(1, 1, 4096, 2048, 2048, 2097152),
      mem(1, 2, 77, 64, 64, 0, -1, 0),
      mem(1, 3, 8192, 1024, 1024, 2097152, 1),
      "{\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"s\": \"t\", \"name\": \"[OutOfMemory]\", \"pid\": 100, \"tid\": 1, \"ts\": 4, \"args\": {\"Total Reserved\": 2097152, \"Total Allocated\": 2048, \"Bytes\": 1000000000, \"Device Id\": 0, \"Device Type\": 1}}",
      "{\"name\": \"Iteration Start: PyTorch Profiler\", \"ph\": \"i\", \"s\": \"g\", \"pid\": \"Traces\", \"tid\": \"Trace PyTorch Profiler\", \"ts\": 0}",
  });
  Trace t = load(text);
  REQUIRE(t.devices.size() == 2);
  CHECK(t.devices[0].index == 0);
  CHECK(t.devices[1].index == 1);
  CHECK(t.devices[0].events.size() == 2);
  CHECK(t.devices[0].events[0].stack == 0);
  CHECK(t.devices[0].event_op[0] == kNoOp);
  CHECK(t.devices[0].events[1].kind == EventKind::Oom);
  CHECK(t.devices[0].events[1].size == 1000000000);
  REQUIRE(t.host_memory.size() == 1);
  CHECK(t.host_memory[0].bytes == 64);
  ReportOptions ro;
  Analysis r = analyze(t, ro);
  CHECK(r.devices[0].replay.oom_events == 1);
  REQUIRE(!r.devices[0].by_op.empty());
  CHECK(r.devices[0].by_op[0].op.empty());  // outside every op
  std::string txt = render_text(report_view(r));
  CHECK(txt.find("(outside every op)") != std::string::npos);
}

TEST_CASE("tiny trace: allocations before the trace, exact totals, categories sum", "[analysis][profiler]") {
  // 10,000 bytes were allocated before the first event; 1,024 of them are
  // freed in the trace (an address never allocated in it).
  std::string text = trace({
      mem(1, 1, 4096, 2048, 12048, 4194304),
      mem(1, 2, 9999, -1024, 11024, 4194304),
      mem(1, 3, 8192, 4096, 15120, 6291456),
      mem(1, 4, 4096, -2048, 13072, 6291456),
  });
  Trace t = load(text);
  const Device& d = t.devices[0];
  CHECK(d.allocated_before == 10000);
  DeviceReplay rp = replay_device(t, d);
  CHECK(rp.inconsistencies == 0);
  CHECK(rp.truncated);
  CHECK(rp.peak_allocated.bytes == 15120);
  CHECK(rp.peak_allocated.event_index == 2);
  CHECK(rp.peak_reserved.bytes == 6291456);
  CHECK(rp.baseline.allocated == 10000);
  AllocatorState st = allocator_state_at(t, d, 2);
  int64_t live = 0;
  for (const LiveAllocation& la : st.live) live += int64_t(la.requested);
  CHECK(live == 15120);
  ReportOptions ro;
  Analysis r = analyze(t, ro);
  int64_t sum = 0;
  for (int64_t c : r.devices[0].categories) sum += c;
  CHECK(sum == 15120);
  // The rest of what was there before: one row, 10000 - 1024 bytes.
  bool found = false;
  for (const Allocation& al : r.devices[0].attr.allocations)
    if (al.addr == 0 && al.alloc_event < 0) found = al.requested == 8976;
  CHECK(found);
  CHECK(render_text(report_view(r)).find("<allocated before the profiler started>") != std::string::npos);
}

TEST_CASE("tiny trace: totals that disagree with the events are reported, the reported peak kept", "[analysis][profiler]") {
  std::string text = trace({
      mem(1, 1, 4096, 2048, 2048, 2097152),
      mem(1, 2, 8192, 1024, 5000, 2097152),  // the events sum to 3072
  });
  Trace t = load(text);
  DeviceReplay rp = replay_device(t, t.devices[0]);
  CHECK(rp.inconsistencies == 1);
  CHECK(rp.peak_allocated.bytes == 5000);
  Analysis r = analyze(t, ReportOptions{});
  bool warned = false;
  for (const Warning& w : r.warnings) warned |= w.code == Code::ReplayInconsistent;
  CHECK(warned);
}

TEST_CASE("tiny trace: record_function ranges are annotations; the optimizer phase comes from them", "[analysis][profiler]") {
  std::string text = trace({
      py("train.py(5): main", 1, 0, 10000),
      py("torch/nn/modules/module.py(1779): _call_impl", 1, 10, 100),
      op("aten::addmm", 1, 20, 10),
      mem(1, 21, 4096, 4096, 4096, 2097152),
      op("autograd::engine::evaluate_function: AddmmBackward0", 2, 200, 100),
      op("aten::mm", 2, 210, 10),
      mem(2, 211, 8192, 4096, 8192, 2097152),
      mem(2, 260, 4096, -4096, 4096, 2097152),
      op("Optimizer.step#Adam.step", 1, 400, 100, -1, "user_annotation"),
      op("aten::_foreach_sqrt", 1, 410, 10),
      mem(1, 411, 16384, 4096, 8192, 2097152),
      mem(1, 420, 16384, -4096, 4096, 2097152),
  });
  Trace t = load(text);
  REQUIRE(t.annotations.size() == 2);
  CHECK(t.strings.get(t.annotations[0].name) == "Optimizer.step#Adam.step");
  CHECK(t.annotations[0].start);
  CHECK(!t.annotations[1].start);
  Analysis r = analyze(t, ReportOptions{});
  const Attribution& a = r.devices[0].attr;
  CHECK(a.phase_at(0) == Phase::Forward);
  CHECK(a.phase_at(1) == Phase::Backward);
  CHECK(a.phase_at(3) == Phase::Optimizer);
  // The backward's allocation kept into the optimizer step is a gradient.
  for (const Allocation& al : a.allocations)
    if (al.addr == 8192) CHECK(a.categories[al.category] == "gradient");
}

TEST_CASE("tiny trace: lenient where PyTorch writes broken JSON; exact times; array format; gzip", "[input][profiler]") {
  // A raw tab and a raw newline inside a name (pytorch#130622).
  std::string text = trace({
      op("aten::weird\tname", 1, 0, 100),
      mem(1, 1.5, 4096, 512, 512, 2097152),
  });
  Trace t = load(text);
  REQUIRE(t.ops.size() == 1);
  CHECK(t.strings.get(t.ops[0].name) == "aten::weird name");
  CHECK(t.devices[0].events[0].time_us == 1000000000000 + 1);
  // The JSON Array Format (a bare list of events, absolute microseconds).
  std::string arr = "[" + op("aten::x", 1, 1700000000000000.0, 10) + ", " + mem(1, 1700000000000001.0, 4096, 512, 512, 0) + "]";
  Trace ta = load(arr);
  REQUIRE(ta.devices.size() == 1);
  CHECK(ta.devices[0].events[0].time_us == 1700000000000001);
  CHECK(op_name(ta, ta.devices[0].event_op[0]) == "aten::x");
  // gzip: the same trace.
  auto gz = detail::gzip_compress(text);
  Trace tg = load_trace_from_memory(std::string_view(reinterpret_cast<const char*>(gz.data()), gz.size()), "tiny.json.gz");
  CHECK(tg.source.gzip);
  CHECK(tg.devices[0].events.size() == 1);
  CHECK(tg.strings.get(tg.ops[0].name) == "aten::weird name");
}

TEST_CASE("tiny trace: truncated and malformed JSON name the JSON path and byte offset", "[input][profiler]") {
  std::string good = trace({op("aten::a", 1, 0, 10), mem(1, 1, 4096, 512, 512, 0), mem(1, 2, 4096, -512, 0, 0)});
  // Cut inside the third event.
  size_t cut = good.find("\"Bytes\": -512");
  expect_error(good.substr(0, cut), "$.traceEvents[2]", "truncated input");
  // Cut between events.
  size_t between = good.find("},\n", good.find("[memory]")) + 2;
  expect_error(good.substr(0, between), "$.traceEvents[2]", "truncated input");
  // A string where a number belongs.
  std::string bad = good;
  bad.replace(bad.find("\"Bytes\": 512"), 12, "\"Bytes\": \"x\"");
  expect_error(bad, "$.traceEvents[1].args.Bytes", "expected an integer");
  // A [memory] event without Bytes.
  std::string nobytes = trace({"{\"ph\": \"i\", \"name\": \"[memory]\", \"pid\": 1, \"tid\": 1, \"ts\": 1, \"args\": {\"Addr\": 1}}"});
  expect_error(nobytes, "$.traceEvents[0].args", "without \"Bytes\"");
  // Garbage between events.
  std::string garbage = good;
  garbage.insert(garbage.find("},\n") + 1, " 42");
  expect_error(garbage, "$.traceEvents[1]", "expected ',' or ']'");
  // Broken inside an event.
  std::string broken = good;
  broken.replace(broken.find("\"dur\": "), 7, "\"dur\" ");
  expect_error(broken, "$.traceEvents[0]", "malformed JSON");
  // A bad timestamp.
  std::string badts = good;
  badts.replace(badts.find("\"ts\": 0.000000"), 14, "\"ts\": \"x\"");
  expect_error(badts, "$.traceEvents[0].ts", "expected a number of microseconds");
  // No traceEvents at all.
  expect_error("{\"schemaVersion\": 1, \"traceName\": \"x\"}", "$", "no \"traceEvents\" array");
  // Trailing garbage after the document.
  expect_error(good + "x", "offset", "unexpected data after the JSON document");
}

TEST_CASE("profiler JSON sniffing", "[input][profiler]") {
  using detail::detect;
  using detail::InputFormat;
  CHECK(detect("{\"schemaVersion\": 1, \"traceEvents\": [") == InputFormat::ChromeTrace);
  CHECK(detect("  {\"deviceProperties\": [{\"id\": 0}], ") == InputFormat::ChromeTrace);
  CHECK(detect("[{\"ph\": \"X\"}]") == InputFormat::ChromeTrace);
  CHECK(detect("{\"format\": \"snapdiff.snap\", \"version\": 1}") == InputFormat::Snap);
  CHECK(detect("[[1, 2, 3, 4, 5], [[0, 1, 2, 3, 4, 5, 6, 7, 8]]]") == InputFormat::MemoryTimeline);
  CHECK(detect("[[1, 2], [[0, 1, 2, 3, 4, 5, 6, 7, 8], [0, 1, 2, 3, 4, 5, 6, 7, 8]]]") == InputFormat::MemoryTimeline);
  CHECK(detect("[[-1, 1, 2097152, 7], [-1, 1, 2048, 0]]") == InputFormat::MemoryTimelineRaw);
  CHECK(detect("[[], []]") == InputFormat::MemoryTimeline);
  CHECK(detect("[]") == InputFormat::MemoryTimelineRaw);
  // Found by mutating a timeline: a stray '}' among the times once made the
  // sniffer loop forever.
  CHECK(detect("[[1796036634544799, 179603663454485}, 1796036634544899]") == InputFormat::Snap);
  CHECK(detect("[[1, 2, }") == InputFormat::Snap);
  CHECK(detect("{\"a\": }, \"b\": 1}") == InputFormat::Snap);
}

TEST_CASE("many batches parsed on several threads give the same trace as one thread", "[input][profiler]") {
  // Large enough to be split into batches for worker threads.
  std::vector<std::string> ev;
  const int n = 12000;
  for (int i = 0; i < n; ++i) {
    const double t0 = i * 100.0;
    ev.push_back(py("train.py(" + std::to_string(10 + i % 7) + "): step", 1, t0, 90));
    ev.push_back(op("aten::op" + std::to_string(i % 13), 1, t0 + 10, 50, i));
    ev.push_back(mem(1, t0 + 20, 4096 + uint64_t(i % 5) * 8192, 512, 512, 2097152));
    ev.push_back(runtime(1, t0 + 30, i, i));
    ev.push_back(kernel("k" + std::to_string(i % 3), 7 + i % 2, t0 + 40, i, i));
    ev.push_back(mem(1, t0 + 80, 4096 + uint64_t(i % 5) * 8192, -512, 0, 2097152));
  }
  std::string text = trace(ev);
  REQUIRE(text.size() > (size_t(8) << 20));  // several 4 MiB batches
  LoadOptions opts;
  opts.trace_reader_workers = 0;
  Trace one = load_trace_from_memory(text, "tiny.json", opts);
  opts.trace_reader_workers = 3;
  Trace many = load_trace_from_memory(text, "tiny.json", opts);
  CHECK(render_json(analyze_report(one, ReportOptions{})) == render_json(analyze_report(many, ReportOptions{})));
  REQUIRE(one.devices[0].events.size() == many.devices[0].events.size());
  for (size_t i = 0; i < one.devices[0].events.size(); ++i) {
    CHECK(one.devices[0].events[i].stack == many.devices[0].events[i].stack);
    CHECK(one.devices[0].events[i].time_us == many.devices[0].events[i].time_us);
  }
  CHECK(one.kernels.size() == size_t(n));
  CHECK(one.strings.size() == many.strings.size());
}

// ---- memory timelines ------------------------------------------------------------

TEST_CASE("memory timeline exports: both formats read; refused as a main input", "[input][profiler]") {
  MemoryTimeline j = load_memory_timeline(real_data("small_profile.memtl.json"));
  CHECK(!j.raw);
  CHECK(j.times_us.size() == 584);
  CHECK(j.sizes.size() == 584);
  CHECK(j.sizes[0][0] == 41992192);  // parameters (column 1 of the file; column 0 is always 0)
  MemoryTimeline r = load_memory_timeline(real_data("small_profile.memtl.raw.json.gz"));
  CHECK(r.raw);
  CHECK(r.rows.size() == 1370);
  CHECK(r.rows[0].time_ns == -1);
  CHECK(r.rows[0].action == MemoryTimeline::Preexisting);
  CHECK(r.rows[0].category == 7);
  try {
    load_trace(real_data("small_profile.memtl.json"));
    FAIL("a memory timeline read as a trace");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("--memory-timeline") != std::string::npos);
  }
  try {
    read_memory_timeline("[[1, 2], [[0, 1, 2]]]", "bad.json");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(e.describe().find("bad.json: $[1]") != std::string::npos);
  }
  try {
    read_memory_timeline("[[-1, 9, 2048, 0]]", "bad.raw.json");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(e.describe().find("$[0][1]") != std::string::npos);
  }
}

TEST_CASE("memory timelines are held to the load options", "[input][profiler]") {
  const std::string json = real_data("small_profile.memtl.json");
  const std::string raw = real_data("small_profile.memtl.raw.json.gz");
  LoadOptions little_memory;
  little_memory.max_memory_bytes = uint64_t(32) << 20;  // below what reading any input takes
  for (const std::string& path : {json, raw}) {
    INFO(path);
    try {
      load_memory_timeline(path, little_memory);
      FAIL("read beyond the memory bound");
    } catch (const InputError& e) {
      CHECK(e.file() == path);
      CHECK(std::string(e.what()).find("(raise it with --max-memory)") != std::string::npos);
    }
  }
  try {
    read_memory_timeline(read_file(json), "in-memory.json", little_memory);
    FAIL("read beyond the memory bound");
  } catch (const InputError& e) {
    CHECK(e.describe().find("in-memory.json: reading and analysing this input needs about") == 0);
  }
  LoadOptions little_output;
  little_output.max_decoded_bytes = 1000;
  try {
    load_memory_timeline(raw, little_output);
    FAIL("inflated beyond --max-input-bytes");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()) ==
          "gzip data decompresses to more than 1000 bytes (the limit; raise it with --max-input-bytes)");
  }
  // Within the bounds: read as without them, with progress.
  LoadOptions roomy;
  roomy.max_memory_bytes = uint64_t(8) << 30;
  roomy.max_decoded_bytes = uint64_t(64) << 20;
  uint64_t last_done = 0, calls = 0;
  roomy.progress = [&](uint64_t done, uint64_t) {
    last_done = done;
    ++calls;
  };
  MemoryTimeline r = load_memory_timeline(raw, roomy);
  CHECK(r.rows.size() == 1370);
  CHECK(calls >= 2);
  CHECK(last_done > 0);
}

TEST_CASE("PyTorch's unknown at the peak, placed by snapdiff (raw and per-timestamp exports)", "[analysis][profiler]") {
  Trace t = load_trace(real_data("small_profile.trace.json.gz"));
  for (const char* name : {"small_profile.memtl.raw.json.gz", "small_profile.memtl.json"}) {
    INFO(name);
    MemoryTimeline tl = load_memory_timeline(real_data(name));
    ReportOptions ro;
    ro.timeline = &tl;
    Analysis r = analyze(t, ro);
    const TimelineComparison& tc = r.timeline;
    REQUIRE(tc.present);
    // At snapdiff's peak, then where PyTorch's unknown is largest: the foreach
    // optimizer step, whose intermediates PyTorch cannot categorize.
    REQUIRE(tc.moments.size() == 2);
    const TimelineMoment& c = tc.moments[0];
    CHECK(c.pytorch_total > 0);
    CHECK(c.pytorch_total <= r.devices[0].peak_live_requested);  // PyTorch counts tensors only
    CHECK(c.snapdiff_total == r.devices[0].peak_live_requested);
    CHECK(c.unknown == c.pytorch[MemoryTimeline::kUnknown]);
    CHECK(c.placed <= c.unknown);
    CHECK(c.allocations_matched > 0);
    if (tl.raw) {
      // Per event: every trace allocation has its row, and every unknown
      // byte is either a live allocation or a tensor from before profiling.
      CHECK(c.allocations_matched == c.allocations);
      CHECK(c.placed + c.before_profiler == c.unknown);
    }
    const TimelineMoment& u = tc.moments[1];
    CHECK(u.phase == Phase::Optimizer);
    CHECK(u.unknown == 41992192);
    CHECK(u.placed == u.unknown);
    REQUIRE(!u.placements.empty());
    CHECK(u.placements[0].op == "aten::_foreach_sqrt");
    CHECK(r.devices[0].attr.categories[size_t(u.placements[0].category)] == "optimizer_temporary");
    std::string text = render_text(report_view(r));
    CHECK(text.find("PyTorch's memory timeline calls") != std::string::npos);
    auto j = nlohmann::json::parse(render_json(report_view(r)));
    CHECK(j["memory_timeline"]["moments"][0]["unknown_bytes"] == c.unknown);
  }
}

// ---- the snapshot join -------------------------------------------------------------

TEST_CASE("a snapshot joined with a trace of the same run: clocks lined up, ops and kernels gained", "[analysis][profiler]") {
  Trace snap = load_trace(fixture("profile/joint.snapshot.pickle"));
  Trace prof = load_trace(fixture("profile/joint.trace.json.gz"));
  const Analysis before = analyze(snap, ReportOptions{});
  CHECK(snap.ops.empty());
  Joined<TraceJoin> joined = join_profiler_trace(std::move(snap), prof, "joint.trace.json.gz");
  snap = std::move(joined.trace);
  const TraceJoin& j = joined.join;
  REQUIRE(j.devices.size() == 1);
  const TraceJoinDevice& jd = j.devices[0];
  CHECK(jd.method == "time");
  CHECK(std::abs(jd.offset_us) < 20);  // snapshot time_us = baseTimeNanoseconds/1000 + ts, to a few µs
  CHECK(jd.matched * 10 >= jd.trace_allocs * 9);
  CHECK(jd.matched <= jd.snapshot_allocs);
  CHECK(!snap.ops.empty());
  CHECK(snap.kernels.size() == prof.kernels.size());
  Joins joins;
  joins.trace = j;
  Analysis r = analyze(snap, ReportOptions{}, std::move(joins));
  // The peak itself does not move: the join adds frames, not events.
  CHECK(r.devices[0].replay.peak_allocated.bytes == before.devices[0].replay.peak_allocated.bytes);
  CHECK(r.devices[0].replay.peak_requested.bytes == before.devices[0].replay.peak_requested.bytes);
  CHECK(r.devices[0].has_ops);
  std::string text = render_text(report_view(r));
  CHECK(text.find("joint.trace.json.gz: cuda:0") != std::string::npos);
  CHECK(text.find("BY OP AT THE PEAK") != std::string::npos);
  // Without clocks: the order of allocations at each address.
  Trace snap2 = load_trace(fixture("profile/joint.snapshot.pickle"));
  for (Device& d : snap2.devices)
    for (Event& e : d.events) e.time_us = kNoTime;
  const TraceJoin j2 = join_profiler_trace(std::move(snap2), prof, "joint.trace.json.gz").join;
  REQUIRE(j2.devices.size() == 1);
  CHECK(j2.devices[0].method == "address-order");
  CHECK(j2.devices[0].matched * 10 >= j2.devices[0].trace_allocs * 8);
}

// ---- what the rough edges became ----------------------------------------------

TEST_CASE("a raw memory timeline gives the tensors from before profiling PyTorch's categories", "[analysis][profiler]") {
  Trace t = load_trace(real_data("small_profile.trace.json.gz"));
  MemoryTimeline tl = load_memory_timeline(real_data("small_profile.memtl.raw.json.gz"));
  REQUIRE(tl.raw);
  const Analysis without = analyze(t, ReportOptions{});
  ReportOptions ro;
  ro.timeline = &tl;
  const Analysis with = analyze(t, ro);
  REQUIRE(with.devices.size() == 1);
  const DeviceAnalysis& d = with.devices[0];
  const DeviceAnalysis& d0 = without.devices[0];
  // Same peak, same bytes: only the categories move.
  REQUIRE(d.peak_index == d0.peak_index);
  CHECK(d.peak_live_requested == d0.peak_live_requested);
  int64_t sum = 0;
  for (int64_t v : d.categories) sum += v;
  CHECK(sum == d.peak_live_requested);
  const int64_t unknown0 = test::category_at_peak(d0, "unknown");
  const int64_t unknown1 = test::category_at_peak(d, "unknown");
  CHECK(unknown1 < unknown0);
  CHECK(d.timeline_pre_trace > 0);
  CHECK(unknown0 - unknown1 <= d.timeline_pre_trace);
  // PyTorch's own figures at snapdiff's peak, summed straight from the
  // export's rows (those before profiling, then every row up to that time).
  const int64_t peak_us = d.peak_event.time_us;
  std::array<int64_t, MemoryTimeline::kCategories> pytorch{};
  for (const MemoryTimeline::Row& row : tl.rows)
    if (row.time_ns < 0 || row.time_ns / 1000 <= peak_us) pytorch[row.category] += row.bytes;
  // Parameters, optimizer state and gradients: only the tensors from before
  // profiling hold them (the run allocates none of them in the trace), so
  // the split alone must give PyTorch's bytes. Tolerance 1%: the trace's
  // sizes are the allocator's blocks, the timeline's the same events'.
  const std::pair<int, const char*> same[] = {{0, "parameter"}, {1, "optimizer_state"}, {5, "gradient"}};
  for (const auto& [pc, name] : same) {
    INFO(name);
    REQUIRE(pytorch[size_t(pc)] > 0);
    const int64_t ours = test::category_at_peak(d, name);
    CHECK(std::llabs(ours - pytorch[size_t(pc)]) * 100 <= pytorch[size_t(pc)]);
    CHECK(test::category_at_peak(d0, name) == 0);  // unknown without the timeline
  }
  // What is left unknown from before profiling is what PyTorch does not
  // know as tensors: allocated, less the tensors its timeline holds.
  CHECK(unknown1 <= d.peak_live_requested - (pytorch[0] + pytorch[1] + pytorch[5]));
  // The rule and the evidence say where the category came from.
  ReportOptions ex = ro;
  ex.explain = "allocated before the profiler started";
  const Analysis e = analyze(t, ex);
  bool timeline_rule = false;
  for (const ExplainItem& it : e.explain)
    if (it.rule == "pytorch_memory_timeline") {
      timeline_rule = true;
      CHECK(it.evidence.find("PyTorch's memory timeline") != std::string::npos);
      CHECK(it.category != "unknown");
    }
  CHECK(timeline_rule);
  // The words: the unknown finding no longer says the trace cannot tell.
  bool said = false;
  for (const Finding& f : d.findings)
    if (f.code == Code::Unknown) {
      said = true;
      CHECK(finding_text(f).find("PyTorch's memory timeline does not know it as tensors either") != std::string::npos);
      CHECK(finding_text(f).find("a trace does not say which") == std::string::npos);
    }
  CHECK(said);
  // The per-timestamp export has no rows per tensor: nothing changes.
  MemoryTimeline sums = load_memory_timeline(real_data("small_profile.memtl.json"));
  ReportOptions rs;
  rs.timeline = &sums;
  const Analysis s = analyze(t, rs);
  CHECK(test::category_at_peak(s.devices[0], "unknown") == unknown0);
}

TEST_CASE("a snapshot joined with a trace of another run is an input error naming both", "[analysis][profiler]") {
  Trace other = load_trace(real_data("small_profile.trace.json.gz"));
  try {
    join_profiler_trace(load_trace(fixture("profile/joint.snapshot.pickle")), other, "small_profile.trace.json.gz", "joint.snapshot.pickle");
    FAIL("joined a trace of another run");
  } catch (const InputError& e) {
    const std::string m = e.describe();
    CHECK(e.file() == "small_profile.trace.json.gz");
    CHECK(m.find("joint.snapshot.pickle") != std::string::npos);
    CHECK(m.find("of its 266 allocations tie") != std::string::npos);
    CHECK(m.find('\n') == std::string::npos);
  }
  // The trace of the same run still joins.
  Trace same = load_trace(fixture("profile/joint.trace.json.gz"));
  const TraceJoin j =
      join_profiler_trace(load_trace(fixture("profile/joint.snapshot.pickle")), same, "joint.trace.json.gz", "joint.snapshot.pickle").join;
  REQUIRE(j.devices.size() == 1);
  CHECK(j.devices[0].matched * 10 >= j.devices[0].trace_allocs * 9);
}

TEST_CASE("a trace without memory events: says so, shows its ops and kernels", "[analysis][profiler]") {
  // Derived from small_profile's trace by tests/data/derived/strip_profile_memory.py.
  const Trace full = load_trace(real_data("small_profile.trace.json.gz"));
  const Trace t = load_trace(fixture("derived/small_profile_nomem.trace.json.gz"));
  CHECK(t.event_count() == 0);
  const Analysis r = analyze(t, ReportOptions{});
  const TraceActivity& a = r.activity;
  REQUIRE(a.present);
  // The ops and kernels are the full trace's.
  CHECK(a.ops == full.ops.size());
  CHECK(a.kernel_launches == full.kernels.size());
  REQUIRE(!a.top_ops.empty());
  REQUIRE(!a.top_kernels.empty());
  for (size_t i = 1; i < a.top_ops.size(); ++i) CHECK(a.top_ops[i - 1].total_ns >= a.top_ops[i].total_ns);
  for (size_t i = 1; i < a.top_kernels.size(); ++i) CHECK(a.top_kernels[i - 1].launches >= a.top_kernels[i].launches);
  // The longest op: no op of the trace is longer than its calls' sum.
  int64_t longest = 0;
  for (const TraceOp& o : t.ops) longest = std::max(longest, o.duration_ns);
  CHECK(a.top_ops[0].total_ns >= longest);
  uint64_t launches = 0;
  for (const TraceActivity::Kernel& k : a.top_kernels) launches += k.launches;
  CHECK(launches <= a.kernel_launches);
  // A trace with memory events has none of this.
  CHECK(!analyze(full, ReportOptions{}).activity.present);
  const Report v = report_view(r);
  const std::string text = render_text(v);
  CHECK(text.find("NO MEMORY EVENTS") != std::string::npos);
  CHECK(text.find("torch.profiler.profile(profile_memory=True)") != std::string::npos);
  CHECK(text.find("TOP OPS BY TIME") != std::string::npos);
  CHECK(text.find("dump-time state only") == std::string::npos);
  auto j = nlohmann::json::parse(render_json(v));
  CHECK(j["profiler_activity"]["ops"] == a.ops);
  CHECK(j["profiler_activity"]["top_kernels"].size() == a.top_kernels.size());
}

TEST_CASE("a real trace recorded without profile_memory: says so, with PyTorch's own counts", "[analysis][profiler]") {
  // noprofmem (scripts/record/record_noprofmem.py): transformers' GPT-2, one
  // AdamW step under torch.profiler without profile_memory. PyTorch's
  // profiler object counted 170 CUDA events (its kernels, memsets and one
  // GPU-side user annotation) and 1,337 CPU events (ops, CUDA runtime and
  // driver calls, user annotations): the launches are the CUDA events less
  // the annotation, the ops a part of the CPU events.
  const Trace t = load_trace(real_data("noprofmem.trace.json.gz"));
  const auto tr = test::truth("noprofmem");
  CHECK(t.event_count() == 0);
  const Analysis r = analyze(t, ReportOptions{});
  REQUIRE(r.activity.present);
  const uint64_t cuda_events = tr["profiler_cuda_events"].get<uint64_t>();
  CHECK(r.activity.kernel_launches <= cuda_events);
  CHECK(r.activity.kernel_launches * 100 >= cuda_events * 99);
  CHECK(r.activity.ops > 0);
  CHECK(r.activity.ops < tr["profiler_cpu_events"].get<uint64_t>());
  const std::string text = render_text(report_view(r));
  CHECK(text.find("NO MEMORY EVENTS") != std::string::npos);
  CHECK(text.find("profile_memory=True") != std::string::npos);
  CHECK(text.find("TOP KERNELS BY LAUNCHES") != std::string::npos);
}

TEST_CASE("a parameter ratio that would read 0.00x is said in words", "[report]") {
  DiffCategoryFacts f;
  f.category = "parameter";
  f.a = 41943040;
  f.parameters = true;
  f.a_tensors = 24;
  auto words = [&](uint64_t b_tensors, int64_t b) {
    f.b_tensors = b_tensors;
    f.b = b;
    f.parameter_ratio = double(b) / double(f.a);
    return finding_text(Finding{Code::DiffCategory, f.b - f.a, f});
  };
  const std::string none = words(0, 0);
  CHECK(none.find("0.00x") == std::string::npos);
  CHECK(none.find("B has no tensors known as parameters at its peak (24 in A)") != std::string::npos);
  const std::string tiny = words(2, 4096);
  CHECK(tiny.find("0.00x") == std::string::npos);
  CHECK(tiny.find("less than 1% of A's bytes (24 tensors in A, 2 in B)") != std::string::npos);
  const std::string half = words(24, 20971520);
  CHECK(half.find("0.50x A's bytes") != std::string::npos);
}
