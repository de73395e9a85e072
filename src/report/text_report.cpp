// The human-readable report: its sections (sections.cpp), each a function.
#include <algorithm>
#include <cstdio>
#include <optional>
#include <set>
#include <sstream>

#include "report/format.hpp"
#include "report/profiler_report.hpp"
#include "report/sections.hpp"
#include "report/text_util.hpp"
#include "snapdiff/model/frame_names.hpp"
#include "snapdiff/report/report.hpp"

namespace snapdiff {

namespace {

using detail::pad_left;
using detail::pad_right;
using detail::wrap;
using detail::with_commas;
// Every name printed goes through display_name (report/format.hpp).
std::string dn(std::string_view s) { return detail::display_name(s); }

std::string pct(int64_t part, int64_t whole) { return detail::share_percent(part, whole); }

std::string hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "%llx", (unsigned long long)v);
  return b;
}

// "inner <- caller <- caller" from the innermost user frame outward, at most n frames.
std::string site_text(const SiteFrames& s, size_t n) { return dn(detail::site_line(s, n, " <- ")); }

// "40 us after the peak", "1.5 ms before the peak", "at the peak's time".
std::string offset_from_peak(int64_t time_us, int64_t peak_us) {
  if (time_us == peak_us) return "at the peak's time";
  const bool before = time_us < peak_us;
  const uint64_t a = before ? uint64_t(peak_us) - uint64_t(time_us) : uint64_t(time_us) - uint64_t(peak_us);
  char b[48];
  if (a < 1000) std::snprintf(b, sizeof b, "%llu us", (unsigned long long)a);
  else if (a < 1000000) std::snprintf(b, sizeof b, "%.1f ms", double(a) / 1e3);
  else std::snprintf(b, sizeof b, "%.3f s", double(a) / 1e6);
  return std::string(b) + (before ? " before the peak" : " after the peak");
}

std::string signed_seconds(int64_t us) {
  char b[32];
  std::snprintf(b, sizeof b, "%+.3f s", double(us) / 1e6);
  return b;
}

}  // namespace

namespace detail::as_text {

void input(std::ostream& o, const Report& r) {
  o << "\nINPUT\n";
  std::string format = dn(r.source.format);
  if (!r.source.format_detail.empty()) format += " (" + dn(r.source.format_detail) + ")";
  if (r.source.gzip) format += ", gzip";
  o << wrap("  format      ", format + ", " + human_bytes(int64_t(r.source.file_bytes)));
  if (!r.source.shape.empty()) o << "  shape       " << dn(r.source.shape) << "\n";
  o << "  devices     ";
  for (size_t i = 0; i < r.devices.size(); ++i) o << (i ? ", " : "") << "cuda:" << r.devices[i].device;
  if (r.devices.empty()) o << "none";
  o << "\n";
  o << "  events      " << with_commas(r.events) << "\n";
  if (r.kernel_launches > 0) o << "  kernels     " << with_commas(r.kernel_launches) << " launches\n";
  o << detail::profiler_input_text(r);
  o << wrap("  history     ", detail::history_words(r));
  o << wrap("  allocator   ", "settings: " + dn(detail::settings_text(r.allocator_settings)));
}

void peak(std::ostream& o, const TextDevice& t) {
  const Report& r = t.r;
  const DeviceView& d = t.d;
  o << "\nPEAK  cuda:" << d.device << "  (" << with_commas(d.events) << " events, " << d.streams
    << (d.streams == 1 ? " stream" : " streams");
  if (d.first_time_us != kNoTime) o << ", " << detail::time_span(d.first_time_us, d.last_time_us, true);
  o << ")\n";
  auto line = [&](const char* name, const PeakPoint& p) {
    o << "  " << name << pad_left(human_bytes(p.bytes), 11) << "  " << pad_left(with_commas(uint64_t(p.bytes)), 17)
      << " B";
    if (p.event_index >= 0) o << "   at event " << with_commas(uint64_t(p.event_index));
    else o << "   before the first event";
    o << "\n";
  };
  if (d.reported_totals) {
    o << detail::reported_peak_text(d);
  } else {
    line("requested ", d.peak_requested);
    line("allocated ", d.peak_allocated);
    line("active    ", d.peak_active);
    line("reserved  ", d.peak_reserved);
  }
  const PeakPoint& pk = d.peak_requested;
  if (pk.event_index >= 0) {
    std::ostringstream when;
    when << "event " << with_commas(uint64_t(pk.event_index)) << " of " << with_commas(d.events);
    if (pk.time_us != kNoTime && d.first_time_us != kNoTime)
      when << ", t = " << detail::signed_seconds_between(d.first_time_us, pk.time_us);
    if (d.peak_iteration > 0) when << ", iteration " << d.peak_iteration;
    when << ", " << phase_name(d.peak_phase) << "  (the requested peak: the moment the live tensors are largest)";
    o << wrap("  when        ", when.str());
    o << wrap("  reached by  ", std::string(event_kind_name(d.reached_by.kind)) + " of " +
                                    human_bytes(int64_t(d.reached_by.size)) + " at " +
                                    (d.peak_user_frame ? dn(d.peak_user_frame->label) : std::string("<no stack recorded>")));
    if (r.kernel_launches > 0 && pk.time_us != kNoTime) {
      auto kernel = [&](const char* label, const std::optional<KernelRef>& k, const char* none) {
        const std::string lead = "  " + std::string(label) + " ";
        if (!k) {
          o << wrap(lead, none);
          return;
        }
        std::string s = dn(k->display) + "  (" + offset_from_peak(k->time_us, pk.time_us);
        if (k->stream != 0) s += ", stream 0x" + hex(k->stream);
        o << wrap(lead, s + ")  in " + dn(detail::kernel_scope(*k)));
      };
      kernel("last kernel", d.kernel_before, "none launched at or before the peak");
      kernel("next kernel", d.kernel_after, "none launched after the peak");
    }
  }
  if (d.window)
    o << "  window      from " << detail::moment_words(d.window->first_event, d.window->first_time_us, d.first_time_us, "", 0)
      << " to " << detail::moment_words(d.window->last_event, d.window->last_time_us, d.first_time_us, "", 0)
      << "  (--window '" << dn(d.window->spec) << "': the peaks and phases are within it)\n";
}

// --at: what follows is at that moment, not at the peak.
void at(std::ostream& o, const TextDevice& t) {
  const DeviceView& d = t.d;
  if (!d.at) return;
  const std::string moment =
      detail::moment_words(d.at->event_index, d.at->time_us, d.first_time_us, phase_name(d.at->phase), d.at->iteration);
  o << "\nAT  cuda:" << d.device << "  (--at '" << dn(d.at->spec) << "')\n";
  o << wrap("  ", "at " + moment + ": requested " + human_bytes(d.at->counters.requested) + ", allocated " +
                      human_bytes(d.at->counters.allocated) + ", reserved " + human_bytes(d.at->counters.reserved) +
                      "; the categories, sites, unknown sites and fragmentation below are at this moment; the "
                      "explanation of the peak is left out");
}

void explanation(std::ostream& o, const TextDevice& t) {
  if (t.d.findings.empty()) return;
  o << "\nEXPLANATION  cuda:" << t.d.device << "\n";
  for (const Finding& fd : t.d.findings) o << wrap("  * ", dn(finding_text(fd)));
}

void categories(std::ostream& o, const TextDevice& t) {
  const DeviceView& d = t.d;
  o << "\n" << t.moment_title << " BY CATEGORY  cuda:" << d.device << "\n";
  o << "       BYTES       %   ALLOCS   SITES  CATEGORY\n";
  int64_t total = 0;
  const std::vector<std::pair<int64_t, size_t>> rows = detail::categories_by_size(d.categories, total);
  for (auto& row : rows) {
    o << "  " << pad_left(human_bytes(row.first), 10) << "  " << pct(row.first, total) << "  "
      << pad_left(with_commas(d.category_allocations[row.second]), 7) << " "
      << pad_left(with_commas(d.category_sites[row.second]), 7) << "  " << dn(d.category_names[row.second]) << "\n";
    // Under unknown, its share that no evidence can name, counted apart.
    if (d.category_names[row.second] == "unknown" && d.unknown_held_from_before > 0)
      o << wrap("  " + pad_left(human_bytes(d.unknown_held_from_before), 10) + "  " + pct(d.unknown_held_from_before, total) +
                    "                    ",
                "of it held since before recording, never freed in the window");
  }
  o << "  " << pad_left(human_bytes(total), 10) << "  " << pct(total, total) << "  "
    << pad_left(with_commas(d.peak_live_allocations), 7) << " " << pad_left("", 7) << (d.at ? "  TOTAL (= requested then)\n" : "  TOTAL (= requested peak)\n");
}

void sites(std::ostream& o, const TextDevice& t) {
  const DeviceView& d = t.d;
  o << "\nLIVE " << t.moment_title << "  cuda:" << d.device << "  (" << detail::count_of(d.peak_live_allocations, "allocation")
    << ", " << human_bytes(d.peak_live_requested) << " requested)\n";
  // The category column as wide as its longest name (at most 19).
  size_t cw = 8;
  for (const SiteRow& s : d.sites)
    cw = std::max(cw, std::min<size_t>(19, detail::display_columns(s.category >= 0 ? dn(s.category_name) : "?")));
  o << "       BYTES       %   COUNT  " << pad_right("CATEGORY", cw) << "  SITE (user frame <- callers)\n";
  for (const SiteRow& s : d.sites) {
    std::string cat = s.category >= 0 ? dn(s.category_name) : "?";
    o << "  " << pad_right(pad_left(human_bytes(s.requested_bytes), 10) + "  " + pct(s.requested_bytes, d.peak_live_requested) +
                            "  " + pad_left(with_commas(s.count), 6) + "  " + cat, 28 + cw)
      << "  " << site_text(s.site, t.depth) << dn(detail::tensors_words(s)) << "\n";
  }
  if (d.other_sites.count > 0)
    o << "  " << pad_left(human_bytes(d.other_sites.requested_bytes), 10) << "  "
      << pct(d.other_sites.requested_bytes, d.peak_live_requested) << "  "
      << pad_left(with_commas(d.other_sites.count), 6) << "  " << pad_right("", cw) << "  [other sites]\n";
  o << "  " << pad_left(human_bytes(d.peak_live_requested), 10) << "  " << pct(d.peak_live_requested, d.peak_live_requested)
    << "  " << pad_left(with_commas(d.peak_live_allocations), 6) << "  " << pad_right("", cw) << "  TOTAL\n";
}

void phases(std::ostream& o, const TextDevice& t) {
  const DeviceView& d = t.d;
  if (d.phases.empty()) return;
  o << "\nPHASES  cuda:" << d.device << "  (found from " << dn(d.phase_evidence) << ")\n";
  // Requested bytes at the phase's start, peak and end; reserved at its start
  // and end. A narrow width drops columns (the reserved ones, then EVENTS,
  // then END) to leave the largest category 24 columns, and marks the peak's
  // row with "*" instead of "<- the peak".
  constexpr size_t kLargest = 24, kMarker = 14;
  bool res = true, events = true, end = true;
  auto fixed = [&]() { return 18 + (events ? 15 : 0) + 12 * (3 + (end ? 1 : 0) + (res ? 2 : 0)) + 2 + kLargest; };
  const size_t wide = fixed() + kMarker;
  const bool full = wide <= t.width;
  if (fixed() > t.width) res = false;
  if (fixed() > t.width) events = false;
  if (fixed() > t.width) end = false;
  o << "  ITER  " << pad_right("PHASE", 10) << (events ? pad_left("EVENTS", 15) : "");
  for (const char* h : {"START", "PEAK", "END", "RISE", "RES START", "RES END"}) {
    if ((!end && std::string_view(h) == "END") || (!res && std::string_view(h).substr(0, 3) == "RES")) continue;
    o << "  " << pad_left(h, 10);
  }
  o << (full ? "  LARGEST AT THE PHASE PEAK\n" : "  LARGEST AT ITS PEAK\n");
  // Long runs: the first two iterations, the peak's, and the last one.
  std::set<int> shown = {0, 1, 2, d.peak_iteration, d.iterations};
  int skipped_from = -1, skipped_to = -1, skipped = 0;
  auto flush_skip = [&]() {
    if (skipped > 0)
      o << "  ...   (" << skipped << " phases of iteration" << (skipped_from == skipped_to ? " " : "s ")
        << skipped_from << (skipped_from == skipped_to ? "" : "-" + std::to_string(skipped_to))
        << " omitted; --format json lists every phase)\n";
    skipped = 0;
    skipped_from = -1;
  };
  for (const PhaseSpan& ps : d.phases) {
    if (!shown.count(ps.iteration)) {
      if (skipped_from < 0) skipped_from = ps.iteration;
      skipped_to = ps.iteration;
      ++skipped;
      continue;
    }
    flush_skip();
    size_t big = 0;
    for (size_t i = 0; i < ps.categories.size(); ++i)
      if (ps.categories[i] > ps.categories[big]) big = i;
    std::string largest = ps.categories.empty() ? "" : dn(d.category_names[big]) + " " + human_bytes(ps.categories[big]);
    const bool the_peak = ps.peak_event == d.peak_requested.event_index && !ps.empty();
    o << (the_peak && !full ? "* " : "  ") << pad_left(std::to_string(ps.iteration), 4) << "  "
      << pad_right(phase_name(ps.phase), 10);
    if (events)
      o << pad_left(ps.empty() ? std::string("none") : std::to_string(ps.start_event) + "-" + std::to_string(ps.end_event), 15);
    o << "  " << pad_left(human_bytes(ps.start_requested), 10) << "  " << pad_left(human_bytes(ps.peak_requested), 10);
    if (end) o << "  " << pad_left(human_bytes(ps.end_requested), 10);
    o << "  " << pad_left(human_delta(ps.peak_requested - ps.start_requested), 10);
    if (res) o << "  " << pad_left(human_bytes(ps.start_reserved), 10) << "  " << pad_left(human_bytes(ps.end_reserved), 10);
    o << "  " << largest << (the_peak && full ? "   <- the peak" : "") << "\n";
  }
  flush_skip();
  if (!full) {
    std::string left;
    if (!events) left += ", EVENTS";
    if (!end) left += ", END";
    if (!res) left += ", RES START, RES END";
    o << wrap("  ", "(* the phase of the peak" +
                        (left.empty() ? std::string() : "; --width " + std::to_string(wide) +
                                                            " or --format json shows " + left.substr(2)) +
                        ")");
  }
}

void unknown(std::ostream& o, const TextDevice& t) {
  const DeviceView& d = t.d;
  if (d.unknown_sites.empty()) return;
  o << "\nUNKNOWN " << t.moment_title << "  cuda:" << d.device << "  (no rule placed these; add one with --rules)\n";
  o << "       BYTES   COUNT  ALLOCATED IN       FREED IN           SITE\n";
  auto when = [](Phase p, int it) { return std::string(phase_name(p)) + (it > 0 ? " it " + std::to_string(it) : ""); };
  for (const SiteRow& s : d.unknown_sites)
    o << "  " << pad_left(human_bytes(s.requested_bytes), 10) << "  " << pad_left(with_commas(s.count), 6) << "  "
      << pad_right(when(s.alloc_phase, s.alloc_iteration), 17) << "  "
      << pad_right(s.freed ? when(s.free_phase, s.free_iteration) : "never", 17) << "  " << site_text(s.site, t.depth)
      << "\n";
}

void fragmentation(std::ostream& o, const TextDevice& t) {
  const DeviceView& d = t.d;
  if (d.reported_totals) {
    o << detail::no_fragmentation_text(d);
    return;
  }
  const Fragmentation& f = d.frag;
  o << "\nFRAGMENTATION " << t.moment_title << "  cuda:" << d.device << "\n";
  o << "  reserved - allocated   " << pad_left(human_bytes(f.reserved - f.allocated), 10) << "   ("
    << pct(f.reserved - f.allocated, f.reserved) << " of reserved)\n";
  o << "    in free blocks       " << pad_left(human_bytes(f.free_cached), 10) << "   (" << with_commas(f.free_blocks)
    << " blocks, largest " << human_bytes(int64_t(f.largest_free_block)) << ")\n";
  if (f.pending_free > 0)
    o << wrap("    pending free         " + pad_left(human_bytes(f.pending_free), 10) + "   ",
              "(freed, waiting on other streams; their requested " + human_bytes(f.pending_free_requested) +
                  " is part of the requested peak: PyTorch counts a block until its free completes)");
  if (f.too_small_threshold > 0)
    o << wrap("    too small to reuse   " + pad_left(human_bytes(f.too_small_bytes), 10) + "   ",
              "(free blocks smaller than the " + human_bytes(int64_t(f.too_small_threshold)) + " block that set the peak)");
  for (const FreeSizeClass& c : f.classes)
    if (c.blocks > 0)
      o << "    free " << pad_right(dn(c.label), 16) << pad_left(human_bytes(c.bytes), 10) << "   (" << with_commas(c.blocks)
        << (c.blocks == 1 ? " block)\n" : " blocks)\n");
  o << "  allocated - requested  " << pad_left(human_bytes(f.internal), 10)
    << "   (rounding and unsplit block remainders"
    << (f.pending_free_requested > 0 ? "; requested here without the pending frees" : "") << ")\n";
}

void end_state(std::ostream& o, const TextDevice& t) {
  const DeviceView& d = t.d;
  const EndStateCheck& ck = d.end_check;
  if (!ck.have_dump) return;
  o << "\nEND STATE vs DUMPED SEGMENTS  cuda:" << d.device << "\n";
  auto cmp = [&](const char* name, int64_t a, int64_t b) {
    o << "  " << name << pad_left(human_bytes(a), 11) << "  replayed, " << pad_left(human_bytes(b), 11)
      << "  dumped  " << (a == b ? "match" : "DIFFER by " + human_delta(a - b)) << "\n";
  };
  cmp("requested ", ck.replay.requested, ck.dump.requested);
  cmp("allocated ", ck.replay.allocated, ck.dump.allocated);
  cmp("active    ", ck.replay.active, ck.dump.active);
  cmp("reserved  ", ck.replay.reserved, ck.dump.reserved);
  o << "  segments  " << pad_left(with_commas(ck.replay_segments), 11) << "  replayed, "
    << pad_left(with_commas(ck.dump_segments), 11) << "  dumped\n";
  // Private pools (CUDA graphs, torch.cuda.MemPool): their memory is
  // reused only within them and empty_cache() does not return it.
  for (size_t k = 1; k < d.pools.size(); ++k) {
    const PoolUsage& p = d.pools[k];
    if (p.segments == 0 && p.reserved == 0) continue;
    o << "  pool (" << p.id[0] << ", " << p.id[1] << ")" << pad_left(human_bytes(p.reserved), 11)
      << "  reserved, " << pad_left(human_bytes(p.allocated), 11) << "  allocated in " << with_commas(p.segments)
      << (p.segments == 1 ? " segment" : " segments") << "  (private: a CUDA graph's or a MemPool's)\n";
  }
}

// With driver calls recorded, the section by caller (outside_report.cpp)
// shows the samples with who held what; this table is for recordings of
// samples alone (snapcapture's phase boundaries).
void device_memory(std::ostream& o, const Report& r) {
  if (r.device_memory.empty() || !r.outside.empty()) return;
  o << "\nDEVICE MEMORY OUTSIDE THE ALLOCATOR  (cudaMemGetInfo samples: used = total - free)\n";
  o << "  DEVICE           T        USED    RESERVED     OUTSIDE  LABEL\n";
  for (const DeviceMemoryRow& m : r.device_memory)
    o << "  " << pad_right("cuda:" + std::to_string(m.device), 6) << "  "
      << pad_left(m.since_first_event_us != kNoTime ? signed_seconds(m.since_first_event_us) : std::string("?"), 10)
      << "  " << pad_left(human_bytes(m.used_bytes), 10) << "  " << pad_left(human_bytes(m.reserved_bytes), 10) << "  "
      << pad_left(human_bytes(m.outside_bytes), 10) << "  " << (m.label.empty() ? "-" : dn(m.label)) << "\n";
  o << "  outside the allocator: min " << human_bytes(r.outside_min_bytes) << ", max "
    << human_bytes(r.outside_max_bytes) << "  (CUDA context, library handles and modules)\n";
}

void explain(std::ostream& o, const Report& r) {
  if (r.explain_query.empty()) return;
  o << "\nEXPLAIN " << dn(r.explain_query) << "  (" << r.explain_total << (r.explain_total == 1 ? " match" : " matches")
    << (r.explain_total > r.explain.size() ? ", first " + std::to_string(r.explain.size()) + " shown" : "") << ")\n";
  if (r.explain.empty()) o << "  nothing matches: give an address (0x... or decimal) or a frame (function, file:line)\n";
  for (const ExplainItem& it : r.explain) {
    o << "  " << dn(it.category) << "  <- rule " << dn(it.rule);
    if (it.count > 1) o << "   (" << with_commas(it.count) << " allocations, " << human_bytes(it.bytes) << ")";
    else o << "   (" << human_bytes(int64_t(it.requested)) << " at 0x" << hex(it.addr) << ")";
    o << "\n";
    o << wrap("      why: ", dn(detail::explain_evidence(it)));
    o << "      allocated: " << (it.alloc_event < 0 ? std::string("before the recorded history")
                                                   : "event " + std::to_string(it.alloc_event) + ", " +
                                                         phase_name(it.alloc_phase) +
                                                         (it.alloc_iteration > 0 ? " of iteration " + std::to_string(it.alloc_iteration) : ""))
      << ";  freed: "
      << (it.free_event == INT64_MAX ? std::string("never (alive at the end)")
                                     : "event " + std::to_string(it.free_event) + ", " + phase_name(it.free_phase) +
                                           (it.free_iteration > 0 ? " of iteration " + std::to_string(it.free_iteration) : ""))
      << "\n";
    o << "      site: " << site_text(it.site, 4) << "\n";
    if (it.has_kernels) {
      std::string k = it.kernel.empty() ? "no kernel launched on its stream after it"
                                        : "made for " + dn(it.kernel);
      if (it.kernels_while_live > 0)
        k += "; " + with_commas(it.kernels_while_live) +
             (it.kernels_while_live == 1 ? " launch" : " launches") + " on its stream while it lived, the last " +
             dn(it.last_kernel);
      o << wrap("      kernel: ", k);
    }
  }
}

void warnings(std::ostream& o, const Report& r) {
  if (r.warnings.empty()) return;
  o << "\nWARNINGS\n";
  for (const Warning& w : r.warnings) o << wrap("  [" + std::string(code_name(w.code)) + "] ", dn(warning_text(w)));
}

}  // namespace detail::as_text

// The frame: the title line, then the sections (sections.cpp) in order.
std::string render_text(const Report& r, size_t width) {
  const size_t depth = r.site_depth == 0 ? SIZE_MAX : r.site_depth;
  std::ostringstream o;
  o << "snapdiff report: " << dn(r.input_name) << "\n";
  for (const detail::ReportSection& s : detail::report_sections()) {
    if (!s.per_device) {
      if (s.text) s.text(o, r);
      continue;
    }
    for (const DeviceView& d : r.devices) {
      // --at: what follows is at that moment, not at the peak.
      const std::string moment_title = d.at ? (d.at->event_index >= 0 ? "AT EVENT " + with_commas(uint64_t(d.at->event_index))
                                                                      : std::string("BEFORE THE FIRST EVENT"))
                                            : "AT THE PEAK";
      const detail::TextDevice t{r, d, depth, moment_title, width};
      for (const detail::DeviceSection& ds : detail::device_sections())
        if (ds.text) ds.text(o, t);
    }
  }
  // The last guard: no control byte reaches a terminal, whatever a section
  // printed; every line fits the width.
  return detail::finish_text(o.str(), width);
}

}  // namespace snapdiff
