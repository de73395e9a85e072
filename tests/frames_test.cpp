// The FrameTable: every frame's kind decided once, the labels reports print,
// the user frame and the site path of a stack.
#include <catch2/catch.hpp>
#include <vector>

#include "snapdiff/model/frames.hpp"
#include "test_util.hpp"

using namespace snapdiff;

namespace {

struct Built {
  Trace t;
  std::vector<FrameId> f;
  FrameId add(const char* name, const char* file, int64_t line) {
    Frame fr;
    fr.name = t.strings.intern(name);
    fr.file = t.strings.intern(file);
    fr.line = line;
    f.push_back(t.intern_frame(fr));
    return f.back();
  }
  // innermost first
  StackId stack(std::vector<FrameId> frames) { return t.stacks.intern(frames.data(), frames.size()); }
};

}  // namespace

TEST_CASE("frame kinds: user and library Python, native, plumbing, scope labels", "[model][frames]") {
  Built b;
  const FrameId user = b.add("train_step", "/home/me/proj/train.py", 42);
  const FrameId lib = b.add("_multi_tensor_adam", "/usr/lib/python3/dist-packages/torch/optim/adam.py", 554);
  const FrameId rel = b.add("forward", "torch/nn/modules/linear.py", 125);  // profiler traces: relative to sys.path
  const FrameId native = b.add("void at::native::addmm_out<float, int>(at::Tensor const&) [clone .isra.0]", "", 0);
  const FrameId alloc = b.add("c10::cuda::CUDACachingAllocator::malloc", "CUDACachingAllocator.cpp", 10);
  const FrameId py_internal = b.add("_PyEval_EvalFrameDefault", "ceval.c", 0);
  const FrameId scope = b.add("layer 3", "snapcapture", 0);
  FrameTable ft(b.t);
  CHECK(ft.kind(user) == FrameKind::UserPython);
  CHECK(ft.kind(lib) == FrameKind::LibraryPython);
  CHECK(ft.kind(rel) == FrameKind::LibraryPython);
  CHECK(ft.kind(native) == FrameKind::Native);
  CHECK(ft.kind(alloc) == FrameKind::Internal);
  CHECK(ft.kind(py_internal) == FrameKind::Internal);
  CHECK(ft.kind(scope) == FrameKind::Scope);
  CHECK((ft.python(user) && ft.python(lib) && !ft.python(native) && !ft.python(scope)));
  CHECK((ft.internal(alloc) && !ft.internal(native) && !ft.internal(user)));
  // Labels: Python names as recorded with the last two path components;
  // native names shortened; scope labels as they are.
  CHECK(ft.label(user) == "train_step (proj/train.py:42)");
  CHECK(ft.label(lib) == "_multi_tensor_adam (optim/adam.py:554)");
  CHECK(ft.label(native) == "at::native::addmm_out<…>");
  CHECK(ft.label(scope) == "layer 3 (snapcapture)");
  CHECK(ft.short_label(user) == "train_step (train.py:42)");
  CHECK(ft.short_label(scope) == "layer 3");
  CHECK(ft.label(kNoFrame) == "<no stack recorded>");
}

TEST_CASE("user frame and site path of a stack", "[model][frames]") {
  Built b;
  const FrameId alloc = b.add("c10::cuda::CUDACachingAllocator::malloc", "CUDACachingAllocator.cpp", 10);
  const FrameId sqrt = b.add("_foreach_sqrt", "/venv/lib/python3.11/site-packages/torch/optim/adam.py", 554);
  const FrameId step = b.add("step", "/venv/lib/python3.11/site-packages/torch/optim/adam.py", 200);
  const FrameId run = b.add("run", "/src/train.py", 88);
  const FrameId main = b.add("main", "/src/train.py", 120);
  FrameTable ft(b.t);
  const StackId s = b.stack({alloc, sqrt, step, run, main});
  CHECK(ft.user_frame(s) == run);
  CHECK(ft.python_callee(s) == sqrt);
  CHECK(ft.innermost_python(s) == sqrt);
  const FrameTable::SitePath p = ft.site_path(s, 4);
  REQUIRE(p.frames.size() == 2);
  CHECK(p.frames[0] == "run (src/train.py:88)");
  CHECK(p.frames[1] == "main (src/train.py:120)");
  CHECK(p.callee == "_foreach_sqrt (optim/adam.py:554)");
  CHECK(ft.site_text(s, 1) == "run (src/train.py:88)  [in _foreach_sqrt (optim/adam.py:554)]");
  // Only library Python: the innermost Python frame is the user frame.
  const StackId lib_only = b.stack({alloc, sqrt, step});
  CHECK(ft.user_frame(lib_only) == sqrt);
  // Only native frames: the innermost that is not plumbing.
  const FrameId kernel = b.add("at::native::gemm", "", 0);
  const StackId native = b.stack({alloc, kernel});
  const FrameTable again(b.t);  // the table is made once every frame is in
  CHECK(again.user_frame(native) == kernel);
  CHECK(ft.user_frame(0) == kNoFrame);
  CHECK(ft.site_text(0, 3) == "<no stack recorded>");
}
