// DEVICE MEMORY OUTSIDE THE ALLOCATOR BY CALLER: per device, what each
// caller of the driver held at the allocator's peak, at exit and at most,
// the context and unrecorded rest, and the total device peak — the words
// here, once, for the text, JSON and HTML reports.
#include "report/outside_report.hpp"

#include <sstream>

#include "report/format.hpp"
#include "report/text_util.hpp"
#include "snapdiff/model/frame_names.hpp"

namespace snapdiff::detail {

namespace {

std::string dn(std::string_view s) { return display_name(s); }
std::string esc(std::string_view s) { return escape(s, Markup::Html); }

// A moment of the device, from its first event: "+3.100 s".
std::string when(const OutsideDevice& d, int64_t t) {
  if (t == kNoTime) return "an unknown time";
  if (d.first_time_us == kNoTime) return utc_time(t, true);
  return signed_seconds_between(d.first_time_us, t);
}

// The snapshot's allocator row (PyTorch of the snapshot's process).
bool is_allocator_row(const OutsideDevice& d, const OutsideRow& row) {
  return !row.context && row.caller == MemoryCaller::PyTorch && row.pid == d.snapshot_pid && d.snapshot_pid != 0;
}

// A holder in a line of the over-time list: its name, with its process when
// the device has several.
std::string short_label(const OutsideDevice& d, const OutsideRow& row) {
  std::string name = outside_row_name(row);
  if (d.pids.size() > 1 && !row.context) name = "process " + std::to_string(row.pid) + " " + name;
  return name;
}

std::string peak_cell(const OutsideRow& row) { return row.at_peak_known ? human_bytes(row.at_peak) : "not known"; }

}  // namespace

std::string outside_row_label(const OutsideDevice& d, const OutsideRow& row) {
  std::string name = outside_row_name(row);
  if (row.caller == MemoryCaller::PyTorch && !row.context) name += is_allocator_row(d, row) ? " (the allocator's segments)" : " (its segments)";
  if (d.pids.size() > 1 && !row.context) name = "process " + std::to_string(row.pid) + ": " + name;
  return name;
}

std::vector<std::string> outside_sentences(const OutsideDevice& d) {
  std::vector<std::string> out;
  const bool has_context = !d.rows.empty() && d.rows.back().context;
  if (d.peak_time_us == kNoTime) {
    out.push_back("AT THE PEAK is not known: the allocator's peak has no time.");
  } else {
    std::string s = "AT THE PEAK: the allocator's peak, at " + when(d, d.peak_time_us);
    if (has_context) {
      if (d.peak_sample_time_us != kNoTime)
        s += " (context and unrecorded: the last sample at or before it, at " + when(d, d.peak_sample_time_us) + ")";
      else
        s += " (no sample was taken at or before it, so context and unrecorded there is not known)";
    }
    out.push_back(s + ".");
  }
  if (d.exit_time_us != kNoTime)
    out.push_back(std::string("AT EXIT: ") + (d.exit_from_sample ? "the last sample" : "after the last driver call") +
                  ", at " + when(d, d.exit_time_us) + ".");
  if (d.device_peak_known) {
    std::string s = "The device peak is " + human_bytes(d.device_peak.bytes);
    if (d.total_bytes > 0) s += " of its " + human_bytes(int64_t(std::min<uint64_t>(d.total_bytes, INT64_MAX)));
    s += ", at " + when(d, d.device_peak.time_us) + ": " + human_bytes(d.device_peak.reserved) +
         " reserved by the allocator and " + human_bytes(d.device_peak.outside) + " outside it";
    if (d.peak_time_us != kNoTime)
      s += "; PyTorch's own peaks are " + human_bytes(d.peak_allocated) + " allocated and " +
           human_bytes(d.peak_reserved) + " reserved.";
    else  // a recording read alone: no snapshot, no replay
      s += " (the allocator's bytes as its driver calls hold them; `snapdiff report SNAPSHOT --kernels RECORDING`"
           " gives PyTorch's own peaks).";
    out.push_back(s);
  }
  if (d.pids.size() > 1 && d.snapshot_pid != 0)
    out.push_back("The snapshot's allocator is that of process " + std::to_string(d.snapshot_pid) +
                  " (its segments come closest to the allocator's reserved bytes); the memory of the other processes counts as outside it.");
  if (d.snapshot_pid == 0)
    out.push_back("No call of PyTorch's allocator to the driver was recorded: the allocator's reserved bytes stand for its segments.");
  if (d.checked_samples > 0) {
    if (d.mismatched_samples == 0)
      out.push_back("PyTorch's driver calls hold exactly the allocator's reserved bytes at " +
                    std::string(d.checked_samples == 1 ? "the one sample" : "all " + count_of(d.checked_samples, "sample")) +
                    " taken during the replayed history.");
    else
      out.push_back("PyTorch's driver calls differ from the allocator's reserved bytes at " +
                    with_commas(d.mismatched_samples) + " of the " + count_of(d.checked_samples, "sample") +
                    " taken during the replayed history (by up to " + human_delta(d.largest_mismatch) + ", first at " +
                    when(d, d.first_mismatch_time_us) + "): the figures above use the driver calls.");
  }
  if (d.unmatched_frees > 0)
    out.push_back(count_of(d.unmatched_frees, "free, release or unmap", "frees, releases or unmaps") +
                  " of memory no recorded call made " + (d.unmatched_frees == 1 ? "was" : "were") +
                  " left out: memory from before the recording started, or a handle taken again with"
                  " cuMemRetainAllocationHandle (NCCL does, to give its buffers back), which is not recorded.");
  return out;
}

// At most this many holders named on a line of the over-time listing (and
// columns of its HTML table).
constexpr size_t kOverTimeHolders = 32;

std::string outside_text(const Report& r) {
  std::ostringstream o;
  for (const OutsideDevice& d : r.outside) {
    o << "\nDEVICE MEMORY OUTSIDE THE ALLOCATOR BY CALLER  cuda:" << d.device << "  (from "
      << count_of(d.driver_events, "driver call") << " of " << count_of(d.pids.size(), "process", "processes");
    if (d.samples > 0) o << " and " << count_of(d.samples, "cudaMemGetInfo sample");
    o << ")\n";
    size_t w = 22;
    for (const OutsideRow& row : d.rows) w = std::max(w, display_name(outside_row_label(d, row)).size());
    o << "  " << pad_right("HELD BY", w) << "  AT THE PEAK      AT EXIT    MOST HELD  WHEN\n";
    for (const OutsideRow& row : d.rows)
      o << "  " << pad_right(dn(outside_row_label(d, row)), w) << "  " << pad_left(peak_cell(row), 11) << "  "
        << pad_left(human_bytes(row.at_exit), 11) << "  " << pad_left(human_bytes(row.max_bytes), 11) << "  "
        << (row.max_bytes > 0 ? when(d, row.max_time_us) : std::string("-")) << "\n";
    o << "  " << pad_right("outside the allocator", w) << "  "
      << pad_left(d.outside_at_peak_known ? human_bytes(d.outside_at_peak) : std::string("not known"), 11) << "  "
      << pad_left(human_bytes(d.outside_at_exit), 11) << "\n";
    for (const std::string& s : outside_sentences(d)) o << wrap("  ", s);
    if (!d.over_time.empty()) o << "  Over time, at each sample (the holders with bytes then):\n";
    // Samples that hold the same bytes as the one before (an interval
    // sampler's quiet stretches) are one line; past kOverTimeLines lines
    // only the first and last halves are shown (the JSON has every sample).
    struct Run {
      size_t first, last;
    };
    std::vector<Run> runs;
    for (size_t k = 0; k < d.over_time.size(); ++k) {
      const OutsideSample& s = d.over_time[k];
      if (!runs.empty()) {
        const OutsideSample& p = d.over_time[runs.back().last];
        if (p.used == s.used && s.changes.empty() && p.label == s.label) {
          runs.back().last = k;
          continue;
        }
      }
      runs.push_back({k, k});
    }
    // Every row's bytes, brought up to each shown sample in turn (the
    // samples keep only what changed).
    std::vector<int64_t> bytes(d.rows.size(), 0);
    size_t applied = 0;
    auto bring_to = [&](size_t k) {
      for (; applied <= k; ++applied)
        for (const OutsideChange& c : d.over_time[applied].changes)
          if (c.row < bytes.size()) bytes[c.row] = c.bytes;
    };
    constexpr size_t kOverTimeLines = 16;
    for (size_t k = 0; k < runs.size(); ++k) {
      if (runs.size() > kOverTimeLines && k == kOverTimeLines / 2) {
        size_t hidden = 0;
        for (size_t m = k; m < runs.size() - kOverTimeLines / 2; ++m) hidden += runs[m].last - runs[m].first + 1;
        o << "    ... " << count_of(hidden, "more sample") << " (every sample is in the JSON report) ...\n";
        k = runs.size() - kOverTimeLines / 2 - 1;
        continue;
      }
      const OutsideSample& s = d.over_time[runs[k].first];
      bring_to(runs[k].first);
      const size_t n = runs[k].last - runs[k].first + 1;
      std::string line = human_bytes(s.used) + " used" + (s.label.empty() ? std::string() : " (" + dn(s.label) + ")");
      if (n > 1) line += " at " + count_of(n, "sample") + " to " + when(d, d.over_time[runs[k].last].time_us);
      size_t listed = 0, more = 0;
      for (size_t i = 0; i < bytes.size(); ++i) {
        if (bytes[i] == 0) continue;
        if (listed == kOverTimeHolders) {
          ++more;
          continue;
        }
        line += (listed ? ", " : ": ") + dn(short_label(d, d.rows[i])) + " " + human_bytes(bytes[i]);
        ++listed;
      }
      if (more) line += " and " + count_of(more, "more holder") + " (in the JSON report)";
      o << wrap("    " + pad_left(when(d, s.time_us), 10) + "  ", line);
    }
  }
  return o.str();
}

std::string outside_html(const Report& r) {
  std::ostringstream o;
  auto td = [](int64_t v, const std::string& text) {
    return "<td class=\"n\" data-v=\"" + std::to_string(v) + "\">" + esc(text) + "</td>";
  };
  for (const OutsideDevice& d : r.outside) {
    o << "<section id=\"outside-" << d.device << "\"><h2>Device memory outside the allocator by caller, cuda:" << d.device
      << "</h2>\n<table><thead><tr><th>held by</th><th class=\"n\">at the peak</th><th class=\"n\">at exit</th>"
         "<th class=\"n\">most held</th><th class=\"n\">when</th></tr></thead><tbody>\n";
    for (const OutsideRow& row : d.rows)
      o << "<tr><td>" << esc(outside_row_label(d, row)) << "</td>" << td(row.at_peak, peak_cell(row))
        << td(row.at_exit, human_bytes(row.at_exit)) << td(row.max_bytes, human_bytes(row.max_bytes)) << "<td class=\"n\">"
        << esc(row.max_bytes > 0 ? when(d, row.max_time_us) : std::string("-")) << "</td></tr>\n";
    o << "<tr><td>outside the allocator</td>"
      << td(d.outside_at_peak, d.outside_at_peak_known ? human_bytes(d.outside_at_peak) : std::string("not known"))
      << td(d.outside_at_exit, human_bytes(d.outside_at_exit)) << "<td></td><td></td></tr>\n</tbody></table>\n";
    for (const std::string& s : outside_sentences(d)) o << "<p class=\"muted\">" << esc(s) << "</p>\n";
    if (!d.over_time.empty()) {
      // A column per holder while they are few; past that, and past
      // kOverTimeRows samples, the JSON report has the rest (samples x
      // holders cells from a small recording once made gigabytes).
      constexpr size_t kOverTimeRows = 2000;
      const size_t cols = std::min(d.rows.size(), kOverTimeHolders);
      o << "<table><thead><tr><th class=\"n\">t</th><th>label</th><th class=\"n\">used</th>";
      for (size_t i = 0; i < cols; ++i) o << "<th class=\"n\">" << esc(short_label(d, d.rows[i])) << "</th>";
      o << "</tr></thead><tbody>\n";
      std::vector<int64_t> bytes(d.rows.size(), 0);
      for (size_t k = 0; k < d.over_time.size() && k < kOverTimeRows; ++k) {
        const OutsideSample& s = d.over_time[k];
        for (const OutsideChange& c : s.changes)
          if (c.row < bytes.size()) bytes[c.row] = c.bytes;
        o << "<tr><td class=\"n\">" << esc(when(d, s.time_us)) << "</td><td>" << esc(s.label.empty() ? "-" : s.label)
          << "</td>" << td(s.used, human_bytes(s.used));
        for (size_t i = 0; i < cols; ++i) o << td(bytes[i], human_bytes(bytes[i]));
        o << "</tr>\n";
      }
      o << "</tbody></table>\n";
      if (d.over_time.size() > kOverTimeRows || d.rows.size() > cols)
        o << "<p class=\"muted\">" << esc("The first " + std::to_string(std::min(d.over_time.size(), kOverTimeRows)) +
                                            " samples and " + std::to_string(cols) +
                                            " holders are shown; every sample and holder is in the JSON report.")
          << "</p>\n";
    }
    o << "</section>\n";
  }
  return o.str();
}

}  // namespace snapdiff::detail
