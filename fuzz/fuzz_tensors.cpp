// Tensor lists (PATH.tensors.json, docs/tensors.md): read, then tied to the
// allocations of a small trace by address and time.
#include <cstdint>
#include <string>

#include "fuzz_common.hpp"
#include "snapdiff/analysis/analysis.hpp"
#include "snapdiff/input/input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace snapdiff;
  fuzz::expect_result_or_input_error([&] {
    Trace t;
    t.tensors = read_tensor_list(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
    // Allocations at the addresses the list notes, one per note (bounded).
    Device& d = t.device(0);
    d.has_trace = true;
    for (size_t i = 0; i < t.tensors.notes.size() && i < 64; ++i) {
      Event e;
      e.kind = EventKind::Alloc;
      e.addr = t.tensors.notes[i].addr;
      e.size = t.tensors.notes[i].bytes;
      e.time_us = t.tensors.notes[i].time_us - 1;
      d.events.push_back(e);
    }
    (void)analyze(t, {});
  });
  return 0;
}
