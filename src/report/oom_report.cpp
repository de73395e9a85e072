// The OUT OF MEMORY section: the first OOM of each device, what was asked,
// what the allocator held, what CUDA had free, why it failed and what was
// live — the words here, once, for the text, JSON and HTML reports.
#include "report/oom_report.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "report/facts_json.hpp"
#include "report/format.hpp"
#include "report/text_util.hpp"
#include "snapdiff/model/frame_names.hpp"

namespace snapdiff::detail {

namespace {

std::string hb(int64_t v) { return human_bytes(v); }
std::string hb(uint64_t v) { return human_bytes(int64_t(std::min<uint64_t>(v, uint64_t(INT64_MAX)))); }
std::string dn(std::string_view s) { return display_name(s); }

std::string plural(uint64_t n, const char* one, const char* many) {
  return with_commas(n) + " " + (n == 1 ? one : many);
}

std::string stream_words(uint64_t stream) {
  if (stream == 0) return "the default stream";
  char b[32];
  std::snprintf(b, sizeof b, "stream 0x%llx", (unsigned long long)stream);
  return b;
}

const char* cause_words(OomCause c) {
  switch (c) {
    case OomCause::Fragmentation: return "fragmentation";
    case OomCause::ProcessCap: return "a per-process cap";
    case OomCause::OtherProcesses: return "other processes";
    case OomCause::DeviceFull: return "the device was full";
  }
  return "the device was full";
}

constexpr const char* kCapWho = "torch.cuda.set_per_process_memory_fraction, or a limit like it";

// "the cap is at least 2.99 GiB and below 3.04 GiB" (`is` = "is " or "").
std::string cap_range(const OomView& v, const char* is) {
  std::string m = std::string("the cap ") + is;
  if (v.cap_at_least > 0) m += "at least " + bytes_apart(v.cap_at_least, v.cap_below) + " and ";
  return m + "below " + bytes_apart(v.cap_below, v.cap_at_least);
}

// What the free cache could do for a request it did not serve.
std::string cache_sentence(const OomView& v) {
  if (v.free_cached == 0) return "The allocator had no free cached blocks left to reuse.";
  std::string m;
  if (v.stream_free == 0)
    m = "Its free cached blocks (" + hb(v.free_cached) + " in " + plural(v.free_blocks, "block", "blocks") +
        ") could not serve the request: none is on " + stream_words(v.stream) +
        " in the pool and size class it draws from.";
  else if (v.stream_largest_free >= v.request)
    m = "Its free cached blocks on " + stream_words(v.stream) + " include one of " + hb(v.stream_largest_free) +
        ", large enough, that the allocator did not take (max_split_size_mb keeps a block above it for requests as "
        "large, or the request came from a CUDA graph's private pool).";
  else if (v.stream_free < int64_t(v.request))
    m = "Its free cached blocks could not serve it either: those it could use add up to " + hb(v.stream_free) + " (" +
        plural(v.stream_free_blocks, "block", "blocks") + ", the largest " + hb(v.stream_largest_free) +
        "), less than the " + hb(v.request) + " asked for.";
  else
    m = "The free cached blocks it could use add up to " + hb(v.stream_free) + " (" +
        plural(v.stream_free_blocks, "block", "blocks") + "), enough in total, but the largest is " +
        hb(v.stream_largest_free) + ": no single block was large enough.";
  if (v.stream_free < v.free_cached && v.stream_free > 0)
    m += " Another " + hb(v.free_cached - v.stream_free) +
         " is free on other streams, in private pools or in the other size class, where this request cannot use it.";
  return m;
}

std::string expandable_sentence(const OomView& v) {
  const std::string room = hb(v.expandable_room) + (v.capped ? " it already held" : " it held and CUDA had free");
  if (v.expandable_fits)
    return "With expandable_segments:True it would likely have fit: the allocator then maps pages into one "
           "growing segment instead of cutting fixed ones, and the " +
           hb(v.held.allocated) + " allocated plus the " + hb(v.request) + " asked for is " + hb(v.expandable_need) +
           ", within the " + room + " (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True).";
  return "With expandable_segments:True alone it would likely not have fit: the " + hb(v.held.allocated) +
         " allocated plus the " + hb(v.request) + " asked for is " + hb(v.expandable_need) + ", more than the " + room +
         ".";
}

// What the allocator model says, where it reproduces this very error under
// the recorded settings (OomView::whatif_*).
std::string whatif_sentence(const OomView& v) {
  auto list = [](const std::vector<std::string>& l) {
    std::string o;
    for (size_t i = 0; i < l.size(); ++i) o += (i ? (i + 1 == l.size() ? " or " : ", ") : "") + l[i];
    return o;
  };
  std::string s = "The allocator model (snapdiff whatif), which runs out of memory at this very request under the "
                  "recorded settings" +
                  std::string(v.capped ? " and any cap in that range" : "") + ", ";
  if (!v.whatif_fit.empty()) return s + "says it would have fit with PYTORCH_CUDA_ALLOC_CONF=" + list(v.whatif_fit) + ".";
  return s + "finds it would not have fit with " + list(v.whatif_tried) + " either.";
}

}  // namespace

std::string bytes_apart(int64_t bytes, int64_t other) {
  const std::string one = human_bytes(bytes);
  if (one != human_bytes(other) || bytes == other) return one;
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  auto with = [&](int64_t b, int decimals) {
    double v = b < 0 ? -double(b) : double(b);
    int u = 0;
    while (v >= 1024.0 && u < 6) v /= 1024.0, ++u;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s%.*f %s", b < 0 ? "-" : "", decimals, v, units[u]);
    return std::string(buf);
  };
  for (int decimals = 2; decimals <= 3; ++decimals)
    if (with(bytes, decimals) != with(other, decimals)) return with(bytes, decimals);
  return with_commas_signed(bytes) + " B";
}

std::vector<std::string> oom_sentences(const OomView& v) {
  std::vector<std::string> s;
  const std::string seg = hb(v.segment_size), req = hb(v.request), free = hb(v.device_free);
  if (!v.free_sample.empty())
    s.push_back("The oom entry records no free bytes; the device-memory sample \"" + v.free_sample +
                "\", the one nearest the error, had " + free + " free.");
  switch (v.cause) {
    case OomCause::Fragmentation:
      s.push_back("The free cached blocks the request could use (on " + stream_words(v.stream) + ") add up to " +
                  hb(v.stream_free) + ", enough for the " + req + " asked for, but the largest is " +
                  hb(v.stream_largest_free) + ": no block was large enough (fragmentation).");
      s.push_back(expandable_sentence(v));
      if (!v.whatif_fit.empty() || v.whatif_reproduced) s.push_back(whatif_sentence(v));
      if (v.capped)
        s.push_back("A new " + seg + " segment was refused although CUDA reported " + free +
                    " free: the process is also capped (" + kCapWho + "), " + cap_range(v, "") + ".");
      else
        s.push_back("A new " + seg + " segment could not be had either: CUDA reported only " + free + " free.");
      return s;
    case OomCause::ProcessCap:
      s.push_back("CUDA reported " + free + " free, enough for the new " + seg +
                  " segment the request needed: the limit was not the device but a cap on this process (" + kCapWho +
                  ").");
      if (v.max_reserved > v.held.reserved)
        s.push_back("The allocator held " + hb(v.held.reserved) + " and could not add the " + seg +
                    " segment to it; the most it ever held was " + hb(v.max_reserved) + ": " + cap_range(v, "is ") + ".");
      else
        s.push_back("The allocator held " + hb(v.held.reserved) + ", the most it ever held, and could not add the " +
                    seg + " segment to it: " + cap_range(v, "is ") + ".");
      break;
    case OomCause::OtherProcesses:
      s.push_back("CUDA reported only " + free + " free, too little for the new " + seg +
                  " segment the request needed, while the allocator held " + hb(v.held.reserved) + " of the device's " +
                  hb(v.device_total) +
                  ": other processes, or this one outside the caching allocator (the CUDA context, NCCL, library "
                  "workspaces), held " +
                  hb(v.others) + ".");
      break;
    case OomCause::DeviceFull:
      if (v.device_total > 0)
        s.push_back("CUDA reported only " + free + " free, too little for the new " + seg +
                    " segment the request needed; the allocator held " + hb(v.held.reserved) + " of the device's " +
                    hb(v.device_total) + ": the run needs more memory than the device has" +
                    (v.others > 0 ? " (another " + hb(v.others) + " is held outside the allocator)" : std::string()) +
                    ".");
      else
        s.push_back("CUDA reported only " + free + " free, too little for the new " + seg +
                    " segment the request needed, while the allocator held " + hb(v.held.reserved) +
                    ": the device was full (the input does not record the device's total memory, so how much other "
                    "processes held is not known).");
      break;
  }
  if (v.cause != OomCause::Fragmentation && v.whatif_reproduced) s.push_back(whatif_sentence(v));
  s.push_back(cache_sentence(v));
  if (v.expandable && v.free_cached > 0)
    s.push_back("The allocator already ran with expandable_segments:True: it maps and unmaps whole pages, so its " +
                hb(v.free_cached) + " of free cached bytes most likely share pages with live blocks.");
  return s;
}

std::string oom_text(const Report& r) {
  std::ostringstream o;
  for (const OomView& v : r.ooms) {
    uint64_t events = 0;
    for (const DeviceView& d : r.devices)
      if (d.device == v.device) events = d.events;
    o << "\nOUT OF MEMORY  cuda:" << v.device << "  ("
      << (v.errors == 1 ? std::string("1 error") : with_commas(v.errors) + " errors; the first explained") << ": event "
      << with_commas(uint64_t(v.event_index)) << " of " << with_commas(events);
    if (v.since_first_event_us != kNoTime) o << ", t = " << signed_seconds_between(0, v.since_first_event_us);
    if (v.iteration > 0) o << ", iteration " << v.iteration;
    o << ", " << phase_name(v.phase) << ")\n";
    auto row = [&](const char* name, const std::string& bytes, const std::string& rest) {
      o << "  " << pad_right(name, 14) << pad_left(bytes, 10) << (rest.empty() ? "" : "   " + rest) << "\n";
    };
    row("asked for", hb(v.request),
        "on " + stream_words(v.stream) + ", at " + (v.user_frame ? dn(v.user_frame->label) : "<no stack recorded>"));
    row("new segment", hb(v.segment_size), "what the allocator asked CUDA for (PyTorch's \"Tried to allocate\")");
    row("CUDA free", hb(v.device_free),
        (v.device_total > 0 ? "of " + hb(v.device_total) : std::string()) +
            (v.free_sample.empty() ? std::string()
                                   : std::string(v.device_total > 0 ? ", " : "") + "from the sample \"" +
                                         dn(v.free_sample) + "\" (the oom entry records none)"));
    row("reserved", hb(v.held.reserved),
        v.max_reserved > v.held.reserved ? "the most it held: " + hb(v.max_reserved) : std::string());
    row("allocated", hb(v.held.allocated), "");
    row("free cached", hb(v.free_cached),
        v.free_blocks == 0 ? std::string()
                           : plural(v.free_blocks, "block", "blocks") + ", the largest " + hb(v.largest_free_block));
    if (v.free_blocks > 0)
      row("  usable", hb(v.stream_free),
          (v.stream_free_blocks == 0 ? std::string("none") : plural(v.stream_free_blocks, "block", "blocks")) +
              " the request could use (" + stream_words(v.stream) +
              ")" + (v.stream_free_blocks > 0 ? ", the largest " + hb(v.stream_largest_free) : std::string()));
    if (v.pending_free > 0) row("pending free", hb(v.pending_free), "freed, waiting on other streams");
    o << "  cause         " << cause_words(v.cause) << "\n";
    for (const std::string& s : oom_sentences(v)) o << wrap("  * ", dn(s));

    o << "  live at the OOM by category  (" << plural(v.live_allocations, "allocation", "allocations") << ", "
      << hb(v.live_requested) << " requested)\n";
    o << "         BYTES       %   ALLOCS  CATEGORY\n";
    std::vector<std::pair<int64_t, size_t>> rows;
    for (size_t i = 0; i < v.categories.size(); ++i)
      if (v.categories[i] != 0) rows.push_back({v.categories[i], i});
    std::sort(rows.begin(), rows.end(),
              [](auto& x, auto& y) { return x.first != y.first ? x.first > y.first : x.second < y.second; });
    for (auto& [bytes, i] : rows)
      o << "    " << pad_left(hb(bytes), 10) << "  " << share_percent(bytes, v.live_requested) << "  "
        << pad_left(with_commas(i < v.category_allocations.size() ? v.category_allocations[i] : 0), 7) << "  "
        << dn(i < v.category_names.size() ? v.category_names[i] : std::string("?")) << "\n";
    o << "  live at the OOM by site\n";
    o << "         BYTES       %   COUNT  CATEGORY             SITE (innermost user frame <- callers)\n";
    for (const SiteRow& s : v.sites)
      o << "    " << pad_right(pad_left(hb(s.requested_bytes), 10) + "  " + share_percent(s.requested_bytes, v.live_requested) +
                                  "  " + pad_left(with_commas(s.count), 6) + "  " +
                                  (s.category >= 0 ? dn(s.category_name) : std::string("?")),
                              47)
        << "  " << dn(site_line(s.site, 3, " <- ")) << "\n";
    if (v.other_sites.count > 0)
      o << "    " << pad_left(hb(v.other_sites.requested_bytes), 10) << "  "
        << share_percent(v.other_sites.requested_bytes, v.live_requested) << "  "
        << pad_left(with_commas(v.other_sites.count), 6) << "  " << pad_right("", 19) << "  [other sites]\n";
  }
  return o.str();
}

std::string oom_html(const Report& r) {
  auto esc = [](std::string_view s) { return escape(s, Markup::Html); };
  std::ostringstream o;
  for (size_t k = 0; k < r.ooms.size(); ++k) {
    const OomView& v = r.ooms[k];
    o << "<section id=\"oom" << (k ? std::to_string(k) : std::string()) << "\"><h2>Out of memory <span class=\"dev\">cuda:"
      << v.device << "</span></h2>\n<p class=\"muted\">"
      << (v.errors == 1 ? std::string("1 error") : with_commas(v.errors) + " errors; the first explained") << ": event "
      << with_commas(uint64_t(v.event_index)) << (v.iteration > 0 ? ", iteration " + std::to_string(v.iteration) : "")
      << ", " << phase_name(v.phase) << "; cause: " << esc(cause_words(v.cause)) << ".</p>\n<table>\n";
    auto row = [&](const char* name, const std::string& bytes, const std::string& rest) {
      o << "<tr><th>" << name << "</th><td class=\"n\">" << esc(bytes) << "</td><td>" << esc(rest) << "</td></tr>\n";
    };
    row("asked for", hb(v.request),
        "on " + stream_words(v.stream) + ", at " + (v.user_frame ? v.user_frame->label : "<no stack recorded>"));
    row("new segment", hb(v.segment_size), "what the allocator asked CUDA for");
    row("CUDA free", hb(v.device_free), v.device_total > 0 ? "of " + hb(v.device_total) : std::string());
    row("reserved", hb(v.held.reserved), v.max_reserved > v.held.reserved ? "the most it held: " + hb(v.max_reserved) : "");
    row("allocated", hb(v.held.allocated), "");
    row("free cached", hb(v.free_cached),
        v.free_blocks ? plural(v.free_blocks, "block", "blocks") + ", the largest " + hb(v.largest_free_block) : "");
    row("usable", hb(v.stream_free), plural(v.stream_free_blocks, "block", "blocks") + " the request could use");
    o << "</table>\n<ul class=\"findings\">\n";
    for (const std::string& s : oom_sentences(v)) o << "<li>" << esc(s) << "</li>\n";
    o << "</ul>\n<table><thead><tr><th class=\"n\">bytes</th><th class=\"n\">count</th><th>category</th><th>site</th></tr>"
         "</thead><tbody>\n";
    for (const SiteRow& s : v.sites)
      o << "<tr><td class=\"n\">" << esc(hb(s.requested_bytes)) << "</td><td class=\"n\">" << with_commas(s.count)
        << "</td><td>" << esc(s.category_name) << "</td><td>" << esc(site_line(s.site, 3, " \xe2\x86\x90 ")) << "</td></tr>\n";
    if (v.other_sites.count > 0)
      o << "<tr><td class=\"n\">" << esc(hb(v.other_sites.requested_bytes)) << "</td><td class=\"n\">"
        << with_commas(v.other_sites.count) << "</td><td></td><td>other sites</td></tr>\n";
    o << "</tbody></table></section>\n";
  }
  return o.str();
}

}  // namespace snapdiff::detail
