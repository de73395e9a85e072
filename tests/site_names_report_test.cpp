// A real run recorded with stacks="all" (small_bf16_cpp: the backward's
// allocations on the autograd engine's thread have C++ frames only): no site
// live at the peak is named by allocator or factory plumbing.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "snapdiff/analysis/analysis.hpp"
#include "snapdiff/input/input.hpp"
#include "snapdiff/model/frames.hpp"
#include "test_util.hpp"

using namespace snapdiff;

TEST_CASE("small_bf16_cpp: every site live at the peak names an op, a node or Python, never plumbing", "[report]") {
  const Trace t = load_trace(test::real_data("small_bf16_cpp.pickle"));
  ReportOptions o;
  o.top_sites = 1000;  // every site
  const Analysis a = analyze(t, o);
  const Report r = report_view(a);
  REQUIRE(r.devices.size() == 1);
  const DeviceView& d = r.devices[0];
  REQUIRE(d.sites.size() > 20);
  const FrameTable& ft = *a.frames;
  std::vector<std::string> texts;
  for (const SiteRow& s : d.sites) {
    REQUIRE(!s.site.path.empty());
    const std::string& first = s.site.path[0];
    INFO(first);
    REQUIRE(s.site.user);  // the view writes the user frame out; find its id by its label
    FrameId uf = kNoFrame;
    for (FrameId f = 0; f < ft.size() && uf == kNoFrame; ++f)
      if (ft.label(f) == s.site.user->label) uf = f;
    REQUIRE(uf != kNoFrame);
    CHECK(!ft.plumbing(uf));
    CHECK((ft.python(uf) || ft.op_or_node(uf)));
    for (const char* plumbing : {"at::detail::", "at::native::empty", "at::(anon)::", "create_out", "c10::", "std::",
                                 "wrapper_CUDA", "at::TensorBase::", "at::native::structured_"})
      CHECK(first.find(plumbing) == std::string::npos);
    std::string text;  // as the text report writes it: three frames
    for (size_t i = 0; i < s.site.path.size() && i < 3; ++i) text += (i ? " <- " : "") + s.site.path[i];
    if (!s.site.callee.empty()) text += "  [in " + s.site.callee + "]";
    texts.push_back(text);
  }
  auto has = [&](const std::string& text) { return std::find(texts.begin(), texts.end(), text) != texts.end(); };
  std::string all;
  for (const std::string& text : texts) all += text + "\n";
  INFO("the sites:\n" << all);
  // The backward's gradients and temporaries: the op, then its node.
  CHECK(has("aten::mm <- AddmmBackward0"));
  CHECK(has("aten::gelu_backward <- GeluBackward0"));
  CHECK(has("aten::native_layer_norm_backward <- NativeLayerNormBackward0"));
  // The forward's activations: the user's line, in the op it called.
  CHECK(has("forward (reference_workload/torch_reference.py:88) <- _call_impl (modules/module.py:1790) <- "
            "_wrapped_call_impl (modules/module.py:1779)  [in aten::addmm]"));
}
