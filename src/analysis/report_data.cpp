// The analysis behind `snapdiff report`: replay each device, find the peaks,
// the allocation that set the allocated peak, the sites live at that moment,
// fragmentation at the peak, and the cross-check with the dump.
#include <algorithm>
#include <unordered_map>

#include "snapdiff/report.hpp"

namespace snapdiff {

namespace detail {
// replay.cpp: replay_device() that also returns, in *at_peak, the allocator
// state after the allocated peak, replaying from a copy of the reconstructed
// initial state instead of reconstructing it again.
DeviceReplay replay_with_peak_state(const Trace& trace, const Device& dev, AllocatorState* at_peak);
}  // namespace detail

namespace {

bool contains(std::string_view s, std::string_view needle) { return s.find(needle) != std::string_view::npos; }

bool is_python_file(std::string_view f) { return f.size() > 3 && f.substr(f.size() - 3) == ".py"; }

bool is_library_python(std::string_view f) {
  return contains(f, "/torch/") || contains(f, "/site-packages/") || contains(f, "/dist-packages/") ||
         contains(f, "/lib/python3") || f.rfind("<frozen", 0) == 0;
}

// "void ns::f<T, U>(int, long) const" -> "ns::f<…>": template arguments and
// parameter lists make native frames unreadable in a one-line site.
std::string short_native_name(std::string name) {
  if (size_t c = name.find(" [clone "); c != std::string::npos) name.erase(c);
  std::string out;
  int angle = 0, paren = 0;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    if (c == '(' && angle == 0) {
      if (paren++ == 0 && i + 1 < name.size() && name.compare(i, 21, "(anonymous namespace)") == 0) {
        out += "(anon)";
        i += 20;
        --paren;
        continue;
      }
      continue;
    }
    if (c == ')' && angle == 0 && paren > 0) {
      --paren;
      continue;
    }
    if (paren > 0) continue;
    if (c == '<') {
      if (angle++ == 0) out += "<…>";
      continue;
    }
    if (c == '>' && angle > 0) {
      --angle;
      continue;
    }
    if (angle > 0) continue;
    out += c;
  }
  // Drop a leading return type ("void ", "at::Tensor ").
  size_t sp = out.rfind(' ');
  if (sp != std::string::npos && sp + 1 < out.size()) out = out.substr(sp + 1);
  return out.empty() ? name : out;
}

}  // namespace

bool is_internal_frame(const Trace& t, FrameId f) {
  // What PyTorch's own viewer filters out (the unwinder, the interpreter, the
  // dispatcher's boxing layers), plus the caching allocator itself.
  static const std::string_view names[] = {"unwind::unwind", "CapturedTraceback::gather", "gather_with_cpp",
                                           "_start", "__libc_start_main", "PyEval_", "PyObject_", "PyFunction_",
                                           "PyMethod_", "PyVectorcall", "_Py", "CUDACachingAllocator",
                                           "c10::cuda::", "c10::impl::", "c10::Dispatcher", "c10::BoxedKernel",
                                           "c10::KernelFunction"};
  static const std::string_view files[] = {"core/boxing", "/Register", "/Redispatch", "pythonrun.c",
                                           "Modules/main.c", "Objects/call.c", "Objects/methodobject.c",
                                           "pycore_ceval.h", "ceval.c", "cpython/abstract.h",
                                           "CUDACachingAllocator.cpp", "memory_snapshot.cpp"};
  std::string_view name = t.strings.get(t.frames[f].name);
  std::string_view file = t.strings.get(t.frames[f].file);
  for (auto n : names)
    if (contains(name, n)) return true;
  for (auto n : files)
    if (contains(file, n)) return true;
  return name.empty() && (file.empty() || file == "??");
}

bool is_python_frame(const Trace& t, FrameId f) { return is_python_file(t.strings.get(t.frames[f].file)); }

FrameId user_frame(const Trace& t, StackId stack) {
  FrameId first_py = UINT32_MAX, first_any = UINT32_MAX, first_raw = UINT32_MAX;
  for (StackId s = stack; s != 0; s = t.stacks.node(s).parent) {
    FrameId f = t.stacks.node(s).frame;
    std::string_view file = t.strings.get(t.frames[f].file);
    if (first_raw == UINT32_MAX) first_raw = f;
    if (first_any == UINT32_MAX && !is_internal_frame(t, f)) first_any = f;
    if (is_python_file(file)) {
      if (first_py == UINT32_MAX) first_py = f;
      if (!is_library_python(file)) return f;
    }
  }
  if (first_py != UINT32_MAX) return first_py;
  return first_any != UINT32_MAX ? first_any : first_raw;
}

std::string format_frame(const Trace& t, FrameId f) {
  if (f == UINT32_MAX) return "<no stack recorded>";
  const Frame& fr = t.frames[f];
  std::string name(t.strings.get(fr.name));
  std::string file(t.strings.get(fr.file));
  if (name.empty()) name = "??";
  if (!is_python_file(file)) name = short_native_name(name);
  std::string out = name;
  if (!file.empty() && file != "??") {
    // Keep the last two path components: enough to tell files apart.
    size_t cut = file.rfind('/');
    if (cut != std::string::npos && cut > 0) {
      size_t cut2 = file.rfind('/', cut - 1);
      if (cut2 != std::string::npos) file = file.substr(cut2 + 1);
    }
    out += " (" + file;
    if (fr.line >= 0 && !(fr.line == 0 && !is_python_file(file))) out += ":" + std::to_string(fr.line);
    out += ")";
  }
  return out;
}

Report analyze_report(const Trace& trace, const ReportOptions& opts) {
  Report r;
  r.input_name = opts.input_name;
  r.source = trace.source;
  r.events = trace.event_count();
  for (const Device& dev : trace.devices) {
    if (dev.events.empty() && dev.segments.empty()) continue;
    DeviceReport dr;
    dr.device = dev.index;
    dr.events = dev.events.size();
    AllocatorState st;
    dr.replay = detail::replay_with_peak_state(trace, dev, &st);
    for (const Event& e : dev.events)
      if (e.time_us != kNoTime) {
        if (dr.first_time_us == kNoTime) dr.first_time_us = e.time_us;
        dr.last_time_us = e.time_us;
      }
    const PeakPoint& pk = dr.replay.peak_allocated;
    if (pk.event_index >= 0) {
      dr.peak_event = dev.events[size_t(pk.event_index)];
      dr.peak_stack = dr.peak_event.stack;
    }
    // Sites live at the peak.
    std::unordered_map<StackId, SiteRow> by_stack;
    for (const LiveAllocation& a : st.live) {
      SiteRow& row = by_stack[a.stack];
      row.stack = a.stack;
      row.requested_bytes = int64_t(uint64_t(row.requested_bytes) + a.requested);
      row.block_bytes = int64_t(uint64_t(row.block_bytes) + a.block_size);
      ++row.count;
      dr.peak_live_requested = int64_t(uint64_t(dr.peak_live_requested) + a.requested);
    }
    dr.peak_live_allocations = st.live.size();
    std::vector<SiteRow> rows;
    rows.reserve(by_stack.size());
    for (auto& kv : by_stack) rows.push_back(kv.second);
    std::sort(rows.begin(), rows.end(), [](const SiteRow& a, const SiteRow& b) {
      if (a.requested_bytes != b.requested_bytes) return a.requested_bytes > b.requested_bytes;
      return a.stack < b.stack;
    });
    for (size_t i = 0; i < rows.size(); ++i) {
      if (i < opts.top_sites) {
        dr.sites.push_back(rows[i]);
      } else {
        dr.other_sites.requested_bytes += rows[i].requested_bytes;
        dr.other_sites.block_bytes += rows[i].block_bytes;
        dr.other_sites.count += rows[i].count;
      }
    }
    // Fragmentation at the peak.
    Fragmentation& fg = dr.frag;
    fg.reserved = st.counters.reserved;
    fg.allocated = st.counters.allocated;
    fg.requested = st.counters.requested;
    fg.pending_free = int64_t(st.pending_free_bytes);
    fg.internal = fg.allocated - fg.requested;
    fg.too_small_threshold =
        pk.event_index >= 0 ? allocator_round_size(dr.peak_event.size, trace.settings) : 0;
    for (const FreeBlockInfo& fb : st.free_blocks) {
      fg.free_cached = int64_t(uint64_t(fg.free_cached) + fb.size);
      ++fg.free_blocks;
      fg.largest_free_block = std::max(fg.largest_free_block, fb.size);
      if (fb.size < fg.too_small_threshold) fg.too_small_bytes = int64_t(uint64_t(fg.too_small_bytes) + fb.size);
    }
    r.devices.push_back(std::move(dr));
  }
  // Top-level peak: the device with the highest allocated peak.
  for (size_t i = 0; i < r.devices.size(); ++i)
    if (r.devices[i].replay.peak_allocated.bytes > r.devices[r.peak_device].replay.peak_allocated.bytes)
      r.peak_device = i;

  // Warnings.
  for (const DeviceReport& d : r.devices) {
    const DeviceReplay& rp = d.replay;
    std::string dv = "device " + std::to_string(d.device) + ": ";
    if (rp.has_trace && d.events > 0) r.has_history = true;
    if (rp.truncated) {
      r.history_truncated = true;
      r.warnings.push_back(
          {"history_truncated",
           dv + "the recorded history starts mid-run (the ring buffer wrapped): " +
               human_bytes(rp.baseline.requested) + " in " + std::to_string(rp.pre_trace_allocations) +
               " allocations and " + human_bytes(rp.baseline.reserved) +
               " of segments were live before the first event. They are rebuilt from later frees and the "
               "dump, so the requested peak is exact for the recorded window; a higher peak before the window "
               "cannot be seen" +
               (rp.allocated_estimated ? ", and block sizes of some early allocations are estimated, so the "
                                         "allocated peak may be off by their rounding"
                                       : "")});
    }
    if (!rp.has_trace || d.events == 0) {
      r.warnings.push_back({"no_history", dv +
                                              "the snapshot has no allocation history (recorded without "
                                              "_record_memory_history, or a bare segment list): the figures are the "
                                              "dump-time state only, not a peak"});
    }
    if (rp.end_check.have_dump && !rp.end_check.matches() && !rp.truncated) {
      r.warnings.push_back(
          {"end_state_mismatch",
           dv + "replayed end state (requested " + std::to_string(rp.end_check.replay.requested) + ", allocated " +
               std::to_string(rp.end_check.replay.allocated) + ", reserved " +
               std::to_string(rp.end_check.replay.reserved) + ") differs from the dumped segments (requested " +
               std::to_string(rp.end_check.dump.requested) + ", allocated " +
               std::to_string(rp.end_check.dump.allocated) + ", reserved " +
               std::to_string(rp.end_check.dump.reserved) + ")"});
    } else if (rp.end_check.have_dump && !rp.end_check.matches() && rp.truncated) {
      r.warnings.push_back({"end_state_mismatch",
                            dv + "replayed end state differs from the dump by " +
                                human_delta(rp.end_check.replay.allocated - rp.end_check.dump.allocated) +
                                " allocated (expected with a truncated history)"});
    }
    if (rp.inconsistencies > 0) {
      std::string m = dv + std::to_string(rp.inconsistencies) +
                      " events did not fit the replayed allocator layout (first: " +
                      (rp.notes.empty() ? std::string("?") : rp.notes.front()) + ")";
      r.warnings.push_back({"replay_inconsistent", m});
    }
    if (rp.oom_events > 0) {
      std::string m = dv + "the run hit " + std::to_string(rp.oom_events) + " out-of-memory error" +
                      (rp.oom_events > 1 ? "s" : "");
      const Trace& t = trace;
      for (const Device& dev : t.devices)
        if (dev.index == d.device)
          for (const Event& e : dev.events)
            if (e.kind == EventKind::Oom) {
              m += "; the first asked for " + human_bytes(int64_t(e.size)) + " while CUDA reported " +
                   human_bytes(int64_t(e.addr)) + " free on the device";
              break;
            }
      r.warnings.push_back({"oom", m});
    }
    if (d.events > 0 && d.first_time_us == kNoTime)
      r.warnings.push_back({"no_timestamps", dv + "events carry no time_us (PyTorch < 2.2): times are event indices"});
  }
  return r;
}

}  // namespace snapdiff
