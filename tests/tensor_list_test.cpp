// Tensor lists (docs/tensors.md): reading them, refusing malformed ones with
// a JSON path, and tying their notes to allocations by address and time.
#include <catch2/catch.hpp>
#include <string>

#include "snapdiff/analysis/analysis.hpp"
#include "snapdiff/error.hpp"
#include "snapdiff/input/input.hpp"
#include "test_util.hpp"

using namespace snapdiff;

namespace {

std::string list_of(const std::string& tensors, const std::string& moments) {
  return R"({"format":"snapdiff-tensors","version":1,"clock":"unix_us","tensors":)" + tensors +
         R"(,"moments":)" + moments + "}";
}

const std::string kTwo =
    R"([{"name":"model.fc.weight","kind":"parameter","dtype":"float32","shape":[64,64],"requires_grad":true,"device":0},)"
    R"({"name":"model.fc.weight.grad","kind":"gradient","device":0}])";

std::string error_of(const std::string& text) {
  try {
    read_tensor_list(text, "t.tensors.json");
  } catch (const InputError& e) {
    return e.describe();
  }
  return "";
}

}  // namespace

TEST_CASE("a tensor list is read whole, its notes in time order", "[input]") {
  const TensorList l = read_tensor_list(
      list_of(kTwo, R"([{"what":"b","time_us":20,"storages":[[1,8192,16384]]},)"
                    R"({"what":"a","time_us":10,"storages":[[0,4096,16384],[1,8192,16384]]}])"),
      "t.tensors.json");
  REQUIRE(l.tensors.size() == 2);
  CHECK(l.tensors[0].name == "model.fc.weight");
  CHECK(l.tensors[0].shape == std::vector<int64_t>{64, 64});
  CHECK(l.tensors[1].kind == TensorKind::Gradient);
  REQUIRE(l.notes.size() == 3);
  CHECK(l.notes[0].time_us == 10);
  CHECK(l.notes[2].time_us == 20);
  CHECK(l.moments == 2);
  CHECK(l.source == "t.tensors.json");
}

TEST_CASE("a malformed tensor list is refused at its JSON path", "[input]") {
  CHECK(error_of("{").find("t.tensors.json: offset") == 0);
  CHECK(error_of(std::string(5000, '[')).find("t.tensors.json: offset") == 0);
  CHECK(error_of(R"({"format":"snapdiff.rules","version":1,"tensors":[],"moments":[]})").find("$.format") != std::string::npos);
  CHECK(error_of(R"({"format":"snapdiff-tensors","version":2,"tensors":[],"moments":[]})").find("$.version: version 2 is newer") !=
        std::string::npos);
  CHECK(error_of(list_of(R"([{"name":"x","kind":"weight"}])", "[]")).find("$.tensors[0].kind") != std::string::npos);
  CHECK(error_of(list_of(R"([{"kind":"parameter"}])", "[]")).find("$.tensors[0]: missing \"name\"") != std::string::npos);
  CHECK(error_of(list_of(kTwo, R"([{"time_us":1,"storages":[[2,4096,8]]}])")).find("$.moments[0].storages[0][0]") !=
        std::string::npos);
  CHECK(error_of(list_of(kTwo, R"([{"time_us":1,"storages":[[0,4096]]}])")).find("$.moments[0].storages[0]: expected") !=
        std::string::npos);
  CHECK(error_of(list_of(kTwo, R"([{"time_us":-1,"storages":[]}])")).find("$.moments[0].time_us") != std::string::npos);
  CHECK(error_of(list_of(R"([{"name":"x","kind":"parameter","device":5000}])", "[]")).find("$.tensors[0].device") !=
        std::string::npos);
}

TEST_CASE("a note names the allocation live at its address at its time, not a later one there", "[analysis]") {
  // Two allocations at one address: the first (a gradient, noted at t=15)
  // freed at t=20, the second made at t=30 and never noted.
  Trace t;
  test::push_alloc(t, 4096, 1 << 20, 0, 10);
  Event fr;
  fr.kind = EventKind::FreeRequested;
  fr.addr = 4096;
  fr.size = 1 << 20;
  fr.time_us = 20;
  t.device(0).events.push_back(fr);
  fr.kind = EventKind::FreeCompleted;
  t.device(0).events.push_back(fr);
  test::push_alloc(t, 4096, 1 << 20, 0, 30);
  t.tensors = read_tensor_list(list_of(kTwo, R"([{"time_us":15,"storages":[[1,4096,1048576]]}])"), "t.tensors.json");
  Analysis r = analyze(t, {});
  const Attribution& at = r.devices[0].attr;
  REQUIRE(at.allocations.size() == 2);
  CHECK(at.categories[at.allocations[0].category] == "gradient");
  CHECK(at.categories[at.allocations[1].category] != "gradient");
  REQUIRE(at.named_of(0) != nullptr);
  CHECK(at.tensor_names[at.named_of(0)->tensor] == "model.fc.weight.grad");
  CHECK(at.named_of(1) == nullptr);
}
