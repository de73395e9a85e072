// Analysis sections for inputs with ops: profiler traces and snapshots joined
// with one (docs/cli.md).
#include "report/profiler_report.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "report/facts_json.hpp"
#include "report/format.hpp"
#include "snapdiff/model/frame_names.hpp"
#include "snapdiff/report/report.hpp"

namespace snapdiff::detail {

namespace {

std::string commas(uint64_t v) { return with_commas(v); }
std::string percent(int64_t part, int64_t whole) { return share_percent(part, whole); }
// Every name printed as text goes through display_name (report/format.hpp).
std::string dn(std::string_view s) { return display_name(s); }



// Display width: UTF-8 continuation bytes take no column.
size_t width(const std::string& s) {
  size_t w = 0;
  for (char c : s) w += (uint8_t(c) & 0xC0) != 0x80;
  return w;
}
std::string lpad(const std::string& s, size_t w) { return width(s) >= w ? s : std::string(w - width(s), ' ') + s; }
std::string rpad(const std::string& s, size_t w) { return width(s) >= w ? s : s + std::string(w - width(s), ' '); }
// Cuts to at most w columns, ending in "..." when cut.
std::string clip(const std::string& s, size_t w) {
  if (width(s) <= w) return s;
  std::string out;
  size_t cols = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if ((uint8_t(s[i]) & 0xC0) != 0x80) {
      if (cols + 3 >= w) break;
      ++cols;
    }
    out += s[i];
  }
  return out + "...";
}

// "1.234 s after the peak" / "0.5 ms before the peak" from a to b (the
// difference taken without overflow).
std::string time_from_peak(int64_t a, int64_t b) {
  if (a == kNoTime || b == kNoTime) return "at another time";
  const bool before = b < a;
  const double ad = double(before ? uint64_t(a) - uint64_t(b) : uint64_t(b) - uint64_t(a));
  char buf[48];
  if (ad < 1e3) std::snprintf(buf, sizeof buf, "%.0f us", ad);
  else if (ad < 1e6) std::snprintf(buf, sizeof buf, "%.1f ms", ad / 1e3);
  else std::snprintf(buf, sizeof buf, "%.3f s", ad / 1e6);
  return std::string(buf) + (before ? " before the peak" : " after the peak");
}

// A paragraph for finish_text() to wrap (prose(): the lead's width is the
// hanging indent); sizes made by hb() stay on one line.
std::string wrap_text(const std::string& lead, const std::string& text) {
  std::string t = text;
  for (char& c : t)
    if (c == '\x01') c = ' ';
  return prose(lead, t);
}

// A size that wrap_text keeps on one line.
std::string hb(int64_t b) {
  std::string s = human_bytes(b);
  for (char& c : s)
    if (c == ' ') c = '\x01';
  return s;
}

std::string op_or_none(const std::string& op) { return op.empty() ? "(outside every op)" : op; }

std::string op_kernel(const OpRow& r) {
  std::string s = op_or_none(r.op);
  if (!r.kernel.empty()) s += " -> " + r.kernel;
  return s;
}

std::string where(const OpRow& r) {
  if (r.python_frame) return r.python_frame->label;
  return r.caller.empty() ? std::string("-") : "in " + r.caller;
}

std::string cat_name(const DeviceView& d, int c) {
  return c >= 0 && size_t(c) < d.category_names.size() ? d.category_names[size_t(c)] : std::string("?");
}

std::string kernel_join_text(const KernelJoin& k) {
  std::ostringstream o;
  o << "  recording   " << dn(k.recording_name) << ": process " << k.pid;
  if (k.processes > 1) o << " of the " << commas(k.processes) << " it recorded";
  o << ", " << commas(k.kernels) << " launches, " << commas(k.driver_memory_events) << " driver memory calls, "
    << commas(k.samples) << (k.samples == 1 ? " device-memory sample" : " device-memory samples") << "; "
    << commas(k.matched_segments) << " of the snapshot's " << commas(k.segment_events)
    << (k.segment_events == 1 ? " segment allocation" : " segment allocations") << " matched its cudaMalloc calls";
  if (k.offset_measured) {
    char b[96];
    std::snprintf(b, sizeof b, " (clocks aligned: snapshot = recording %+.1f us, spread %.1f us)", k.offset_us,
                  k.offset_spread_us);
    o << b;
  } else {
    o << " (clock offset not measured: times taken as recorded)";
  }
  o << "; " << commas(k.allocations_with_kernel) << " of " << commas(k.allocations)
    << " allocations are followed by a launch on their stream";
  if (k.allocations_before_kernels > 0)
    o << ", " << commas(k.allocations_before_kernels) << " were made before the recording began (no kernel)";
  o << "\n";
  return o.str();
}

}  // namespace

std::string profiler_input_text(const Report& r) {
  std::ostringstream o;
  if (r.ops > 0) o << "  ops         " << commas(r.ops) << " (cpu_op ranges)\n";
  if (r.host_memory_events > 0)
    o << "  cpu memory  " << commas(r.host_memory_events) << " events of the CPU allocator, largest total "
      << human_bytes(r.host_peak_bytes) << " (not replayed)\n";
  for (const TraceJoinDevice& j : r.join.devices) {
    o << "  trace       " << dn(r.join.trace_name) << ": cuda:" << j.device << ", " << commas(j.matched) << " of "
      << commas(j.snapshot_allocs) << " allocations tied to the trace's, " << commas(j.with_op) << " of them inside an op";
    if (j.method == "time") {
      char b[96];
      std::snprintf(b, sizeof b, " (clocks aligned: snapshot = trace %+.1f us, spread %.1f us", j.offset_us,
                    j.offset_spread_us);
      o << b << "; " << commas(j.in_window) << " allocations fall in the traced window, the trace has "
        << commas(j.trace_allocs) << ")\n";
    } else {
      o << " (no consistent clock offset: matched by address and size in order; the trace has "
        << commas(j.trace_allocs) << ")\n";
    }
  }
  if (r.kernel_join.joined()) o << kernel_join_text(r.kernel_join);
  if (r.join.devices.empty() && !r.join.trace_name.empty())
    o << "  trace       " << dn(r.join.trace_name) << ": no device in common with the snapshot, nothing joined\n";
  return o.str();
}

std::string reported_peak_text(const DeviceView& d) {
  std::ostringstream o;
  auto line = [&](const char* name, const PeakPoint& p, const char* note) {
    std::string s = std::string(p.event_index >= 0 ? "at event " + commas(uint64_t(p.event_index)) : "before the first event");
    o << prose("  " + std::string(name) + lpad(human_bytes(p.bytes), 11) + "  " + lpad(commas(uint64_t(p.bytes)), 17) +
                   " B   ",
               s + note);
  };
  o << prose("  requested         n/a  ",
             "(a profiler trace records block sizes, not requested sizes; below, requested = allocated)");
  line("allocated ", d.peak_allocated, "  (exact: the largest Total Allocated the trace reports)");
  line("reserved  ", d.peak_reserved, "  (Total Reserved as reported)");
  return o.str();
}

std::string no_fragmentation_text(const DeviceView& d) {
  const Fragmentation& f = d.frag;
  std::ostringstream o;
  o << "\nFRAGMENTATION AT THE PEAK  cuda:" << d.device << "\n";
  o << prose("  reserved - allocated   " + lpad(human_bytes(f.reserved - f.allocated), 10) + "   ",
             "(a profiler trace has no segments or blocks: how it splits into free blocks is not known)");
  return o.str();
}

OpRowWords op_row_words(const DeviceView& d, const OpRow& r, bool by_kernel) {
  OpRowWords w;
  w.category = cat_name(d, r.category);
  if (by_kernel && d.kernels_only) {
    w.what = r.kernel.empty() ? std::string(kNoKernel) : r.kernel;
    w.where = r.other.empty() ? "-" : r.other;
  } else if (by_kernel) {
    w.what = r.kernel.empty() ? "(no kernel: the op launched none)" : r.kernel;
    w.where = op_or_none(r.other);
  } else {
    w.what = op_kernel(r);
    w.where = where(r);
  }
  return w;
}

std::string kernel_coverage_words(const KernelCoverage& c) {
  auto pc = [](uint64_t part, uint64_t whole) {
    if (whole == 0 || part == whole) return std::string(whole == 0 ? "0%" : "100%");
    char b[16];
    double v = 100.0 * double(part) / double(whole);
    if (v > 99.9) v = 99.9;
    if (part > 0 && v < 0.1) v = 0.1;
    std::snprintf(b, sizeof b, "%.1f%%", v);
    return std::string(b);
  };
  return commas(c.with_kernel) + " of the " + commas(c.allocations) + " allocations live at the peak (" +
         pc(c.with_kernel, c.allocations) + ") have a kernel, holding " +
         pc(uint64_t(c.bytes_with_kernel), uint64_t(c.bytes)) + " of their bytes";
}

namespace {

// BY KERNEL of an input with launches and no ops.
std::string kernels_only_text(const DeviceView& d) {
  std::ostringstream o;
  const int64_t total = d.peak_live_requested;
  o << "\nBY KERNEL AT THE PEAK  cuda:" << d.device
    << "  (each live byte under the first kernel launched on its stream at or after its allocation)\n";
  o << "  " << kernel_coverage_words(d.kernel_coverage) << "\n";
  o << "       BYTES       %   COUNT  CATEGORY             KERNEL                                                                    MADE AT\n";
  for (const OpRow& r : d.by_kernel) {
    const OpRowWords w = op_row_words(d, r, true);
    o << "  " << lpad(human_bytes(r.bytes), 10) << "  " << percent(r.bytes, total) << "  " << lpad(commas(r.count), 6)
      << "  " << rpad(dn(w.category), 19) << "  " << rpad(clip(dn(w.what), 72), 72) << "  " << dn(w.where) << "\n";
  }
  if (d.other_kernels.count > 0)
    o << "  " << lpad(human_bytes(d.other_kernels.bytes), 10) << "  " << percent(d.other_kernels.bytes, total) << "  "
      << lpad(commas(d.other_kernels.count), 6) << "  " << rpad("", 19) << "  ["
      << commas(d.kernel_rows - d.by_kernel.size()) << " other kernels]\n";
  return o.str();
}

}  // namespace

std::string ops_text(const DeviceView& d) {
  if (d.kernels_only) return kernels_only_text(d);
  if (!d.has_ops) return "";
  std::ostringstream o;
  const int64_t total = d.peak_live_requested;
  o << "\nBY OP AT THE PEAK  cuda:" << d.device
    << "  (the op that made each live byte: the innermost op around the allocation that launched a kernel)\n";
  o << "       BYTES       %   COUNT  CATEGORY             OP -> KERNEL                                                              CALLED FROM\n";
  for (const OpRow& r : d.by_op)
    o << "  " << lpad(human_bytes(r.bytes), 10) << "  " << percent(r.bytes, total) << "  " << lpad(commas(r.count), 6)
      << "  " << rpad(dn(cat_name(d, r.category)), 19) << "  " << rpad(clip(dn(op_kernel(r)), 72), 72) << "  "
      << dn(where(r)) << "\n";
  if (d.other_ops.count > 0)
    o << "  " << lpad(human_bytes(d.other_ops.bytes), 10) << "  " << percent(d.other_ops.bytes, total) << "  "
      << lpad(commas(d.other_ops.count), 6) << "  " << rpad("", 19) << "  [" << commas(d.ops_rows - d.by_op.size())
      << " other ops]\n";
  o << "\nBY KERNEL AT THE PEAK  cuda:" << d.device
    << "  (each live byte under the first kernel its op launched after allocating it)\n";
  o << "       BYTES       %   COUNT  CATEGORY             KERNEL                                                                    LAUNCHED BY\n";
  for (const OpRow& r : d.by_kernel)
    o << "  " << lpad(human_bytes(r.bytes), 10) << "  " << percent(r.bytes, total) << "  " << lpad(commas(r.count), 6)
      << "  " << rpad(dn(cat_name(d, r.category)), 19) << "  "
      << rpad(clip(r.kernel.empty() ? "(no kernel: the op launched none)" : dn(r.kernel), 72), 72) << "  "
      << dn(op_or_none(r.other)) << "\n";
  if (d.other_kernels.count > 0)
    o << "  " << lpad(human_bytes(d.other_kernels.bytes), 10) << "  " << percent(d.other_kernels.bytes, total) << "  "
      << lpad(commas(d.other_kernels.count), 6) << "  " << rpad("", 19) << "  ["
      << commas(d.kernel_rows - d.by_kernel.size()) << " other kernels]\n";
  return o.str();
}

namespace {

std::string placement_text(const DeviceView& d, const TimelineMoment& m) {
  std::ostringstream o;
  std::vector<std::pair<int64_t, std::string>> by_cat;
  for (size_t i = 0; i < m.unknown_by_category.size(); ++i)
    if (m.unknown_by_category[i] > 0) by_cat.push_back({m.unknown_by_category[i], dn(d.category_names[i])});
  std::sort(by_cat.begin(), by_cat.end(), [](auto& a, auto& b) { return a.first > b.first; });
  o << "    ";
  for (size_t i = 0; i < by_cat.size(); ++i) o << (i ? ", " : "") << by_cat[i].second << " " << human_bytes(by_cat[i].first);
  if (by_cat.empty()) o << "(none of it tied to an allocation)";
  o << "\n";
  o << "         BYTES  CATEGORY             OP -> KERNEL                                                              CALLED FROM\n";
  int64_t shown = 0;
  for (const OpRow& p : m.placements) {
    shown += p.bytes;
    o << "    " << lpad(human_bytes(p.bytes), 10) << "  " << rpad(dn(cat_name(d, p.category)), 19) << "  "
      << rpad(clip(dn(op_kernel(p)), 72), 72) << "  " << dn(where(p)) << "\n";
  }
  if (m.placed > shown) o << "    " << lpad(human_bytes(m.placed - shown), 10) << "  " << rpad("", 19) << "  [other ops]\n";
  if (m.before_profiler > 0)
    o << "    " << lpad(human_bytes(m.before_profiler), 10) << "  " << rpad("", 19)
      << "  tensors that existed before profiling (the export gives no address)\n";
  // (Negative when rows at the moment's microsecond come after its event.)
  const int64_t rest = m.unknown - m.placed - m.before_profiler;
  if (rest > 0)
    o << "    " << lpad(human_bytes(rest), 10) << "  " << rpad("", 19)
      << "  not tied to an allocation (rows whose time and size fit none)\n";
  return o.str();
}

std::string when_text(const TimelineMoment& m) {
  std::string s = phase_name(m.phase);
  if (m.iteration > 0) s = "iteration " + std::to_string(m.iteration) + ", " + s;
  return s;
}

}  // namespace

namespace {

// "12.3 ms", "1.234 s", "850 us" from nanoseconds.
std::string duration_words(int64_t ns) {
  char buf[48];
  const double us = double(ns) / 1e3;
  if (us < 1e3) std::snprintf(buf, sizeof buf, "%.0f us", us);
  else if (us < 1e6) std::snprintf(buf, sizeof buf, "%.1f ms", us / 1e3);
  else std::snprintf(buf, sizeof buf, "%.3f s", us / 1e6);
  return buf;
}

std::string plural(uint64_t n, const char* one, const char* many) { return commas(n) + " " + (n == 1 ? one : many); }

}  // namespace

std::string no_memory_message(const TraceActivity& a) {
  return "The trace holds no memory events: it was recorded without memory profiling, so it shows no allocations, "
         "no peak and no categories. Record them with torch.profiler.profile(profile_memory=True) (with_stack=True "
         "adds the Python call sites). It holds " +
         plural(a.ops, "op", "ops") + " (" + plural(a.op_names, "distinct name", "distinct names") + ") and " +
         plural(a.kernel_launches, "kernel launch", "kernel launches") + " (" +
         plural(a.kernel_names, "distinct kernel", "distinct kernels") + ").";
}

std::string activity_text(const Report& r) {
  const TraceActivity& a = r.activity;
  if (!a.present) return "";
  std::ostringstream o;
  o << "\nNO MEMORY EVENTS\n" << wrap_text("  ", no_memory_message(a));
  if (!a.top_ops.empty()) {
    o << "\nTOP OPS BY TIME  (each op's outermost calls, each with everything it calls)\n";
    o << "       TIME     CALLS   KERNELS  OP\n";
    for (const TraceActivity::Op& x : a.top_ops)
      o << "  " << lpad(duration_words(x.total_ns), 9) << "  " << lpad(commas(x.calls), 8) << "  "
        << lpad(commas(x.kernel_launches), 8) << "  " << dn(x.op) << "\n";
  }
  if (!a.top_kernels.empty()) {
    o << "\nTOP KERNELS BY LAUNCHES\n";
    o << "   LAUNCHES  " << rpad("KERNEL", 72) << "  LAUNCHED BY\n";
    for (const TraceActivity::Kernel& k : a.top_kernels)
      o << "  " << lpad(commas(k.launches), 9) << "  " << rpad(clip(dn(k.kernel), 72), 72) << "  "
        << op_or_none(dn(k.op)) << "\n";
  }
  return o.str();
}

std::string timeline_text(const Report& r) {
  const TimelineComparison& c = r.timeline;
  if (!c.present) return "";
  std::ostringstream o;
  const DeviceView* d = nullptr;
  for (const DeviceView& x : r.devices)
    if (x.device == c.device) d = &x;
  o << "\nPYTORCH'S MEMORY TIMELINE  cuda:" << c.device << "  (" << dn(c.name) << ": export_memory_timeline"
    << (c.raw ? ", raw" : "") << ")\n";
  if (!d || c.moments.empty()) {
    o << "  nothing to compare: the input has no allocations on this device\n";
    return o.str();
  }
  const TimelineMoment& m = c.moments[0];
  {
    std::string msg = "At snapdiff's peak (" + when_text(m) + ") PyTorch's timeline holds " + hb(m.pytorch_total) +
                      " in tensors against " + hb(m.snapdiff_total) + " allocated";
    if (m.snapdiff_total > m.pytorch_total)
      msg += " (" + hb(m.snapdiff_total - m.pytorch_total) + " are not tensors to it: workspaces and other buffers)";
    msg += "; its own maximum is " + hb(c.pytorch_peak) + ".";
    o << wrap_text("  ", msg);
  }
  o << "    PYTORCH'S CATEGORY          BYTES     SNAPDIFF'S CATEGORY          BYTES\n";
  std::vector<std::pair<std::string, int64_t>> ours;
  for (size_t i = 0; i < m.snapdiff.size(); ++i)
    if (m.snapdiff[i] != 0) ours.push_back({dn(d->category_names[i]), m.snapdiff[i]});
  std::sort(ours.begin(), ours.end(), [](auto& a, auto& b) { return a.second > b.second; });
  const size_t rows = std::max(size_t(MemoryTimeline::kCategories), ours.size());
  for (size_t i = 0; i < rows; ++i) {
    std::string left = i < size_t(MemoryTimeline::kCategories)
                           ? "    " + rpad(MemoryTimeline::kCategoryNames[i], 20) + lpad(human_bytes(m.pytorch[i]), 11)
                           : std::string(35, ' ');
    std::string right = i < ours.size() ? "     " + rpad(ours[i].first, 20) + lpad(human_bytes(ours[i].second), 11) : "";
    o << left << right << "\n";
  }
  o << "    " << rpad("TOTAL", 20) << lpad(human_bytes(m.pytorch_total), 11) << "     " << rpad("TOTAL", 20)
    << lpad(human_bytes(m.snapdiff_total), 11) << "\n";
  if (c.raw && m.pre_trace_live > 0) {
    int64_t tensors = 0;
    std::string parts;
    for (int i = 0; i < MemoryTimeline::kCategories; ++i) {
      if (m.pre_trace_tensors[size_t(i)] <= 0) continue;
      tensors += m.pre_trace_tensors[size_t(i)];
      parts += (parts.empty() ? "" : ", ") + std::string(MemoryTimeline::kCategoryNames[i]) + " " +
               hb(m.pre_trace_tensors[size_t(i)]);
    }
    std::string msg = "Of the " + hb(m.pre_trace_live) + " allocated before the trace's first event and alive at the peak, "
                      "PyTorch's timeline knows " + hb(tensors) + " as tensors" + (parts.empty() ? "" : " (" + parts + ")");
    if (m.pre_trace_live > tensors)
      msg += "; the other " + hb(m.pre_trace_live - tensors) + " are not tensors (library workspaces and other buffers)";
    if (tensors > m.pre_trace_tensors[size_t(MemoryTimeline::kUnknown)])
      msg += ". snapdiff gives those tensors the timeline's categories (rule pytorch_memory_timeline)";
    o << "\n" << wrap_text("  ", msg + ".");
  }
  o << "\n  PyTorch's memory timeline calls " << human_bytes(m.unknown) << " unknown at the peak";
  if (m.unknown == 0) o << ".\n";
  else o << "; snapdiff places it as:\n" << placement_text(*d, m);
  for (size_t k = 1; k < c.moments.size(); ++k) {
    const TimelineMoment& x = c.moments[k];
    o << "\n"
      << wrap_text("  ", "Its unknown is largest elsewhere: " + hb(x.unknown) + " (of " + hb(x.pytorch_total) + ") in " +
                             when_text(x) + ", " + time_from_peak(m.time_us, x.time_us) + "; snapdiff places it as:")
      << placement_text(*d, x);
  }
  o << wrap_text("  ", "(" + commas(m.allocations_matched) + " of " + commas(m.allocations) +
                          " of the trace's allocations up to the peak tied to the timeline; " + dn(c.method) + ")");
  return o.str();
}

}  // namespace snapdiff::detail
