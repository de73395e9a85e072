// Helpers shared by the tests: paths to data, a tiny pickle writer for
// opcode-level cases, reading the PyTorch truth files.
#pragma once

#include <cstdint>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "snapdiff/error.hpp"
#include "snapdiff/input/input.hpp"
#include "snapdiff/analysis/analysis.hpp"
#include "snapdiff/report/report.hpp"

namespace snapdiff::test {

inline bool file_exists(const std::string& path) { return std::ifstream(path).good(); }
// A file the test needs: a missing one fails the test with its path (a test
// whose data is absent never passes silently).
inline std::string required(std::string path) {
  if (!file_exists(path)) throw std::runtime_error("test data missing: " + path);
  return path;
}
// The real PyTorch recordings in tests/data/real/ (see its README.md).
inline std::string real_data(const std::string& name) {
  return required(std::string(SNAPDIFF_SOURCE_DIR) + "/tests/data/real/" + name);
}
// Files the build unpacks from tests/data/real/ (xxl_fp8.pickle from its .xz).
inline std::string unpacked_data(const std::string& name) {
  return required(std::string(SNAPDIFF_UNPACKED_DATA) + "/" + name);
}
inline std::string fixture(const std::string& name) {
  return std::string(SNAPDIFF_SOURCE_DIR) + "/tests/data/" + name;
}
inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read test data: " + path);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}
// A run read and analyzed with the default options, kept together (the
// analysis points into the trace's frames).
struct Run {
  Trace t;
  Analysis r;
};
inline std::unique_ptr<Run> run_of(const std::string& path) {
  auto p = std::make_unique<Run>();
  p->t = load_trace(path);
  ReportOptions o;
  o.input_name = path;
  p->r = analyze(p->t, o);
  return p;
}

// Appends one alloc event to device 0 of a trace built by hand (its history
// marked present).
inline void push_alloc(Trace& t, uint64_t addr, uint64_t size, StackId stack, int64_t time_us) {
  Device& d = t.device(0);
  d.has_trace = true;
  Event e;
  e.kind = EventKind::Alloc;
  e.addr = addr;
  e.size = size;
  e.stack = stack;
  e.time_us = time_us;
  d.events.push_back(e);
}

inline nlohmann::json truth(const std::string& stem) {
  return nlohmann::json::parse(read_file(real_data(stem + ".truth.json")));
}

// Every recording in tests/data/real/ with a truth file and a snapshot beside
// it (STEM.pickle or STEM.pickle.gz), as {file, stem}, sorted; with `key`, only
// those whose truth has that key. A file added there is checked without a
// change to the tests.
inline std::vector<std::pair<std::string, std::string>> real_recordings(const std::string& key = "") {
  std::vector<std::pair<std::string, std::string>> out;
  const std::filesystem::path dir = std::filesystem::path(SNAPDIFF_SOURCE_DIR) / "tests/data/real";
  const std::string suffix = ".truth.json";
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    const std::string stem = name.substr(0, name.size() - suffix.size());
    if (!key.empty() && !truth(stem).contains(key)) continue;
    for (const char* ext : {".pickle", ".pickle.gz"})
      if (std::filesystem::exists(dir / (stem + ext))) out.push_back({stem + ext, stem});
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Requested bytes of a category at the device's peak (0 when it has none).
inline int64_t category_at_peak(const DeviceAnalysis& d, const std::string& name) {
  for (size_t i = 0; i < d.attr.categories.size() && i < d.categories.size(); ++i)
    if (d.attr.categories[i] == name) return d.categories[i];
  return 0;
}

// Emits pickle opcodes byte by byte.
class PickleWriter {
 public:
  PickleWriter& raw(std::initializer_list<uint8_t> b) {
    out.insert(out.end(), b.begin(), b.end());
    return *this;
  }
  PickleWriter& bytes(const std::string& s) {
    out.insert(out.end(), s.begin(), s.end());
    return *this;
  }
  PickleWriter& le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out.push_back(uint8_t(v >> (8 * i)));
    return *this;
  }
  PickleWriter& proto(int v) { return raw({0x80, uint8_t(v)}); }
  PickleWriter& mark() { return raw({'('}); }
  PickleWriter& empty_dict() { return raw({'}'}); }
  PickleWriter& empty_list() { return raw({']'}); }
  PickleWriter& setitems() { return raw({'u'}); }
  PickleWriter& setitem() { return raw({'s'}); }
  PickleWriter& appends() { return raw({'e'}); }
  PickleWriter& append() { return raw({'a'}); }
  PickleWriter& stop() { return raw({'.'}); }
  PickleWriter& memoize() { return raw({0x94}); }
  PickleWriter& binput(uint8_t i) { return raw({'q', i}); }
  PickleWriter& binget(uint8_t i) { return raw({'h', i}); }
  PickleWriter& long_binput(uint32_t i) { raw({'r'}); return le(i, 4); }
  PickleWriter& long_binget(uint32_t i) { raw({'j'}); return le(i, 4); }
  PickleWriter& sstr(const std::string& s) { raw({0x8c, uint8_t(s.size())}); return bytes(s); }
  PickleWriter& ustr(const std::string& s) { raw({'X'}); le(s.size(), 4); return bytes(s); }
  PickleWriter& ustr8(const std::string& s) { raw({0x8d}); le(s.size(), 8); return bytes(s); }
  PickleWriter& int1(uint8_t v) { return raw({'K', v}); }
  PickleWriter& int2(uint16_t v) { raw({'M'}); return le(v, 2); }
  PickleWriter& int4(int32_t v) { raw({'J'}); return le(uint32_t(v), 4); }
  PickleWriter& long1(const std::vector<uint8_t>& le_bytes) {
    raw({0x8a, uint8_t(le_bytes.size())});
    out.insert(out.end(), le_bytes.begin(), le_bytes.end());
    return *this;
  }
  PickleWriter& long4(const std::vector<uint8_t>& le_bytes) {
    raw({0x8b});
    le(le_bytes.size(), 4);
    out.insert(out.end(), le_bytes.begin(), le_bytes.end());
    return *this;
  }
  PickleWriter& binfloat(double d) {
    uint64_t b;
    std::memcpy(&b, &d, 8);
    raw({'G'});
    for (int i = 7; i >= 0; --i) out.push_back(uint8_t(b >> (8 * i)));
    return *this;
  }
  std::string str() const { return std::string(out.begin(), out.end()); }
  std::vector<uint8_t> out;
};

// The contract on any bytes: a result the analysis and the text report
// survive, or an InputError with something to say.
inline bool survives(std::string_view bytes) {
  try {
    Trace t = load_trace_from_memory(bytes, "x");
    Analysis r = analyze(t, {});
    (void)render_text(report_view(r));
    return true;
  } catch (const InputError& e) {
    return !e.describe().empty();
  }
}

}  // namespace snapdiff::test
