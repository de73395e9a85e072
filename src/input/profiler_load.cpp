// PyTorch's memory timeline exports.
#include <simdjson.h>

#include "input/json_stream.hpp"
#include "input/source.hpp"
#include "snapdiff/error.hpp"
#include "snapdiff/input/profiler.hpp"

namespace snapdiff {

const char* const MemoryTimeline::kCategoryNames[MemoryTimeline::kCategories] = {
    "parameter", "optimizer_state", "input", "temporary", "activation", "gradient", "autograd_detail", "unknown"};

bool is_profiler_trace(const Trace& t) {
  if (t.source.format == "chrome-trace") return true;
  for (const Device& d : t.devices)
    if (d.from_profiler()) return true;
  return false;
}

namespace {

namespace dom = simdjson::dom;

[[noreturn]] void bad(const std::string& path, const std::string& msg) { throw InputError(path, msg); }

int64_t int_at(dom::element e, const std::string& path) {
  int64_t v;
  if (!e.get_int64().get(v)) return v;
  double d;
  if (!e.get_double().get(d) && d > -9.2e18 && d < 9.2e18 && double(int64_t(d)) == d) return int64_t(d);
  bad(path, "expected an integer");
}

// What reading a timeline of `tokens` tokens takes besides the text: for
// simdjson's DOM, its tape (two 8-byte words a number, one a bracket) and
// structural index (4 bytes a structural, about two a token), the padded
// copy of the text; then the rows (8 bytes a value) and what the comparison
// copies and sorts of them.
constexpr uint64_t kTimelineBytesPerToken = 48;

// Read with simdjson's DOM. Held to the memory bound by counting the
// document's tokens first (what the DOM and the rows will take); a file
// of nothing but short numbers takes about 20 times its size, a real one
// about 3.
MemoryTimeline read_timeline(detail::Source& src, const std::string& name, const LoadOptions& opts) {
  MemoryTimeline tl;
  tl.name = name;
  const std::string_view bytes = src.decoded(opts);
  if (src.format() != detail::InputFormat::MemoryTimeline && src.format() != detail::InputFormat::MemoryTimelineRaw)
    throw InputError(uint64_t(0),
                     "not a torch.profiler memory timeline (expected what export_memory_timeline writes: "
                     "[times, sizes] in .json/.json.gz, or [[time_ns, action, bytes, category], ...] in "
                     "raw.json.gz)");
  if (opts.max_memory_bytes) {
    // The text (a mapping is resident too once read) and, for gzip, the stored bytes.
    const uint64_t held = (src.gzip() ? src.size() : 0) + bytes.size();
    detail::check_memory(detail::kFixedMemoryBytes + held + bytes.size() + detail::json_token_bound(bytes) * kTimelineBytesPerToken,
                         opts);
  }
  tl.raw = src.format() == detail::InputFormat::MemoryTimelineRaw;
  if (opts.progress) opts.progress(0, src.size());
  simdjson::padded_string ps(bytes);
  dom::parser parser;
  dom::element root;
  auto err = parser.parse(ps).get(root);
  if (err) {
    // simdjson gives no position: name the kind of problem.
    throw InputError(std::string("$"), std::string("malformed JSON: ") + simdjson::error_message(err));
  }
  dom::array top;
  if (root.get_array().get(top)) bad("$", "expected an array");
  if (tl.raw) {
    size_t i = 0;
    tl.rows.reserve(top.size());
    for (dom::element row : top) {
      const std::string path = "$[" + std::to_string(i) + "]";
      dom::array a;
      if (row.get_array().get(a) || a.size() != 4) bad(path, "expected [time_ns, action, bytes, category]");
      MemoryTimeline::Row r;
      size_t k = 0;
      int64_t v[4];
      for (dom::element x : a) {
        v[k] = int_at(x, path + "[" + std::to_string(k) + "]");
        ++k;
      }
      if (v[1] < 1 || v[1] > 4) bad(path + "[1]", "unknown action " + std::to_string(v[1]) + " (1-4)");
      if (v[3] < 0 || v[3] >= MemoryTimeline::kCategories)
        bad(path + "[3]", "unknown category index " + std::to_string(v[3]) + " (0-7)");
      r.time_ns = v[0];
      r.action = uint8_t(v[1]);
      r.bytes = v[2];
      r.category = uint8_t(v[3]);
      tl.rows.push_back(r);
      ++i;
    }
  } else {
    if (top.size() != 2) bad("$", "expected [times, sizes]");
    dom::array times, sizes;
    if (top.at(0).get_array().get(times)) bad("$[0]", "expected an array of times");
    if (top.at(1).get_array().get(sizes)) bad("$[1]", "expected an array of rows");
    if (times.size() != sizes.size())
      bad("$[1]", std::to_string(sizes.size()) + " rows for " + std::to_string(times.size()) + " times");
    size_t i = 0;
    for (dom::element t : times) tl.times_us.push_back(int_at(t, "$[0][" + std::to_string(i++) + "]"));
    i = 0;
    for (dom::element row : sizes) {
      const std::string path = "$[1][" + std::to_string(i) + "]";
      dom::array a;
      if (row.get_array().get(a) || (a.size() != 9 && a.size() != 8))
        bad(path, "expected 9 columns (0, then bytes per category)");
      std::array<int64_t, MemoryTimeline::kCategories> v{};
      size_t k = 0, skip = a.size() == 9 ? 1 : 0;
      for (dom::element x : a) {
        int64_t b = int_at(x, path + "[" + std::to_string(k) + "]");
        if (k >= skip) v[k - skip] = b;
        ++k;
      }
      tl.sizes.push_back(v);
      ++i;
    }
  }
  if (opts.progress) opts.progress(src.size(), src.size());
  return tl;
}

}  // namespace

MemoryTimeline read_memory_timeline(std::string_view bytes, const std::string& name, const LoadOptions& opts) {
  try {
    detail::Source src = detail::Source::of_bytes(bytes);
    return read_timeline(src, name, opts);
  } catch (InputError& e) {
    e.set_file(name);
    throw;
  }
}

MemoryTimeline load_memory_timeline(const std::string& path, const LoadOptions& opts) {
  try {
    detail::Source src = detail::Source::open(path, opts);
    return read_timeline(src, path, opts);
  } catch (InputError& e) {
    e.set_file(path);
    throw;
  }
}

}  // namespace snapdiff
