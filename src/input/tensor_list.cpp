// Tensor lists (docs/tensors.md, schemas/tensors.schema.json): the run's
// own names for its parameters, buffers, gradients and optimizer state,
// written beside a snapshot by python/snapdiff/torch.py. Read whole (they
// are small: a few rows per tensor and noted moment), every value checked,
// an error naming its JSON path.
#include <algorithm>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "snapdiff/error.hpp"
#include "snapdiff/input/input.hpp"
#include "util/json_depth.hpp"
#include "util/quote_value.hpp"

namespace snapdiff {

namespace {

using json = nlohmann::json;

constexpr int kTensorListVersion = 1;
// Devices are numbered with 8 bits by PyTorch; shapes beyond 64 dimensions
// are not tensors PyTorch makes.
constexpr int64_t kMaxDevice = 1023;
constexpr size_t kMaxDims = 64;

struct ListReader {
  [[noreturn]] static void fail(const std::string& path, const std::string& what) { throw InputError(path, what); }

  static const json& field(const json& obj, const std::string& path, const char* key) {
    auto it = obj.find(key);
    if (it == obj.end()) fail(path, std::string("missing \"") + key + "\"");
    return *it;
  }
  static std::string text(const json& j, const std::string& path) {
    if (!j.is_string()) fail(path, std::string("expected a string, found ") + j.type_name());
    return j.get<std::string>();
  }
  static int64_t integer(const json& j, const std::string& path, int64_t lo, int64_t hi) {
    int64_t v = 0;
    if (j.is_number_unsigned()) {
      uint64_t u = j.get<uint64_t>();
      if (u > uint64_t(std::numeric_limits<int64_t>::max())) fail(path, "integer out of range");
      v = int64_t(u);
    } else if (j.is_number_integer()) {
      v = j.get<int64_t>();
    } else {
      fail(path, std::string("expected an integer, found ") + j.type_name());
    }
    if (v < lo || v > hi) fail(path, "integer out of range (" + std::to_string(v) + ")");
    return v;
  }
  static uint64_t address(const json& j, const std::string& path) {
    if (j.is_number_unsigned()) return j.get<uint64_t>();
    return uint64_t(integer(j, path, 0, std::numeric_limits<int64_t>::max()));
  }
  static const json& array(const json& j, const std::string& path) {
    if (!j.is_array()) fail(path, std::string("expected an array, found ") + j.type_name());
    return j;
  }

  static TensorKind kind(const json& j, const std::string& path) {
    const std::string k = text(j, path);
    if (k == "parameter") return TensorKind::Parameter;
    if (k == "buffer") return TensorKind::Buffer;
    if (k == "gradient") return TensorKind::Gradient;
    if (k == "optimizer_state") return TensorKind::OptimizerState;
    fail(path, "unknown kind " + quote_value(k, kMaxQuotedBytes, '"') + " (parameter, buffer, gradient, optimizer_state)");
  }

  static void read(const json& doc, TensorList& out) {
    if (!doc.is_object()) fail("$", std::string("expected an object, found ") + doc.type_name());
    if (text(field(doc, "$", "format"), "$.format") != "snapdiff-tensors")
      fail("$.format", "not a snapdiff tensor list (format must be \"snapdiff-tensors\")");
    const int64_t version = integer(field(doc, "$", "version"), "$.version", 1, std::numeric_limits<int32_t>::max());
    if (version > kTensorListVersion)
      fail("$.version", "version " + std::to_string(version) + " is newer than this snapdiff reads (" +
                            std::to_string(kTensorListVersion) + ")");
    if (auto c = doc.find("clock"); c != doc.end() && text(*c, "$.clock") != "unix_us")
      fail("$.clock", "unknown clock (snapdiff reads \"unix_us\")");
    const json& tensors = array(field(doc, "$", "tensors"), "$.tensors");
    out.tensors.reserve(tensors.size());
    for (size_t i = 0; i < tensors.size(); ++i) {
      const std::string p = "$.tensors[" + std::to_string(i) + "]";
      const json& t = tensors[i];
      if (!t.is_object()) fail(p, std::string("expected an object, found ") + t.type_name());
      NamedTensor nt;
      nt.name = text(field(t, p, "name"), p + ".name");
      nt.kind = kind(field(t, p, "kind"), p + ".kind");
      if (auto it = t.find("dtype"); it != t.end()) nt.dtype = text(*it, p + ".dtype");
      if (auto it = t.find("shape"); it != t.end()) {
        const json& sh = array(*it, p + ".shape");
        if (sh.size() > kMaxDims) fail(p + ".shape", "more than 64 dimensions");
        for (size_t d = 0; d < sh.size(); ++d)
          nt.shape.push_back(integer(sh[d], p + ".shape[" + std::to_string(d) + "]", 0,
                                     std::numeric_limits<int64_t>::max()));
      }
      if (auto it = t.find("requires_grad"); it != t.end()) {
        if (!it->is_boolean()) fail(p + ".requires_grad", std::string("expected a boolean, found ") + it->type_name());
        nt.requires_grad = it->get<bool>();
      }
      if (auto it = t.find("device"); it != t.end()) nt.device = int(integer(*it, p + ".device", 0, kMaxDevice));
      out.tensors.push_back(std::move(nt));
    }
    const json& moments = array(field(doc, "$", "moments"), "$.moments");
    int64_t last = std::numeric_limits<int64_t>::min();
    bool sorted = true;
    for (size_t m = 0; m < moments.size(); ++m) {
      const std::string p = "$.moments[" + std::to_string(m) + "]";
      const json& mo = moments[m];
      if (!mo.is_object()) fail(p, std::string("expected an object, found ") + mo.type_name());
      if (auto it = mo.find("what"); it != mo.end()) text(*it, p + ".what");
      const int64_t t = integer(field(mo, p, "time_us"), p + ".time_us", 0, std::numeric_limits<int64_t>::max());
      sorted &= t >= last;
      last = std::max(last, t);
      const json& rows = array(field(mo, p, "storages"), p + ".storages");
      for (size_t r = 0; r < rows.size(); ++r) {
        const std::string rp = p + ".storages[" + std::to_string(r) + "]";
        const json& row = array(rows[r], rp);
        if (row.size() != 3) fail(rp, "expected [tensor, address, bytes]");
        TensorNote n;
        n.time_us = t;
        n.tensor = uint32_t(integer(row[0], rp + "[0]", 0, int64_t(out.tensors.size()) - 1));
        n.addr = address(row[1], rp + "[1]");
        n.bytes = address(row[2], rp + "[2]");
        out.notes.push_back(n);
      }
    }
    out.moments = int64_t(moments.size());
    if (!sorted)
      std::stable_sort(out.notes.begin(), out.notes.end(),
                       [](const TensorNote& a, const TensorNote& b) { return a.time_us < b.time_us; });
  }
};

}  // namespace

TensorList read_tensor_list(std::string_view text, const std::string& name) {
  TensorList out;
  try {
    detail::check_json_depth(text);
    json doc;
    try {
      doc = json::parse(text.begin(), text.end());
    } catch (const json::parse_error& e) {
      throw InputError(uint64_t(e.byte > 0 ? e.byte - 1 : 0), "not valid JSON");
    } catch (const json::exception&) {
      // The parser's out_of_range.406: a number literal beyond a double
      // (fuzz finding, tests/data/fuzz_regressions/tensors_number_overflow.json).
      throw InputError("$", "a number beyond what JSON numbers hold");
    }
    ListReader::read(doc, out);
  } catch (InputError& e) {
    if (e.file().empty()) e.set_file(name);
    throw;
  }
  out.source = name;
  return out;
}

std::string tensor_list_beside(const std::string& snapshot_path) {
  namespace fs = std::filesystem;
  std::vector<std::string> tries{snapshot_path + ".tensors.json", snapshot_path + ".tensors.json.gz"};
  const std::string gz = ".gz";
  if (snapshot_path.size() > gz.size() && snapshot_path.compare(snapshot_path.size() - gz.size(), gz.size(), gz) == 0) {
    const std::string base = snapshot_path.substr(0, snapshot_path.size() - gz.size());
    tries.push_back(base + ".tensors.json");
    tries.push_back(base + ".tensors.json.gz");
  }
  for (const std::string& p : tries) {
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) return p;
  }
  return {};
}

}  // namespace snapdiff
