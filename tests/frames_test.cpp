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

TEST_CASE("a notebook cell as the user frame: the label leads with the model frame, the cell as context", "[model]") {
  Built b;
  const FrameId alloc = b.add("c10::cuda::CUDACachingAllocator::malloc", "CUDACachingAllocator.cpp", 10);
  const FrameId linear = b.add("forward", "/venv/lib/python3.11/site-packages/torch/nn/modules/linear.py", 125);
  const FrameId cell = b.add("<module>", "/var/folders/5x/T/ipykernel_114/3105878423.py", 21);
  const FrameId call = b.add("_call_impl", "/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", 1747);
  const FrameId forward = b.add("forward", "/home/me/proj/mymodel.py", 44);
  const FrameId train = b.add("train", "/home/me/proj/mymodel.py", 90);
  const FrameId run_code = b.add("run_code", "/venv/lib/python3.11/site-packages/IPython/core/interactiveshell.py", 3577);
  const FrameId stdin_line = b.add("<module>", "<stdin>", 3);
  const FrameId old_cell = b.add("<module>", "<ipython-input-3-a1b2c3d4e5f6>", 7);
  const FrameId hf = b.add("forward", "/venv/lib/python3.11/site-packages/transformers/models/gpt2/modeling_gpt2.py", 697);
  const FrameId not_cell = b.add("step", "/home/me/ipykernel_tools/run.py", 5);
  FrameTable ft(b.t);
  CHECK((ft.cell(cell) && ft.cell(stdin_line) && ft.cell(old_cell)));
  CHECK((!ft.cell(forward) && !ft.cell(not_cell) && !ft.cell(linear)));
  // Kinds are not changed by it: the cell is still the user's Python.
  CHECK(ft.kind(cell) == FrameKind::UserPython);

  // A cell called from a model frame (a function defined in the notebook that
  // the model's code calls): the model frame leads, the cell is the context.
  const StackId s = b.stack({alloc, linear, cell, call, forward, train, run_code});
  CHECK(ft.user_frame(s) == cell);  // what categories see: unchanged
  CHECK(ft.site_frame(s) == forward);
  CHECK(ft.cell_context(s) == cell);
  const FrameTable::SitePath p = ft.site_path(s, 4);
  REQUIRE(p.frames.size() >= 2);
  CHECK(p.frames[0] == "forward (proj/mymodel.py:44)");
  CHECK(p.frames[1] == "train (proj/mymodel.py:90)");
  CHECK(p.callee == "cell ipykernel_114/3105878423.py:21, in forward (modules/linear.py:125)");
  CHECK(ft.site_text(s, 1) ==
        "forward (proj/mymodel.py:44)  [in cell ipykernel_114/3105878423.py:21, in forward (modules/linear.py:125)]");

  // No other user frame: the cell stays the label.
  const StackId only_cell = b.stack({alloc, linear, cell, run_code});
  CHECK(ft.site_frame(only_cell) == cell);
  CHECK(ft.cell_context(only_cell) == kNoFrame);
  CHECK(ft.cell_callee(only_cell).empty());
  CHECK(ft.site_text(only_cell, 2) ==
        "<module> (ipykernel_114/3105878423.py:21) <- run_code (core/interactiveshell.py:3577)  [in forward "
        "(modules/linear.py:125)]");

  // No other user frame, but a library's model inside the cell's call (a
  // transformers model called from the cell): that frame leads, the cell is
  // the context, and the callee it would repeat is left out.
  const StackId lib = b.stack({alloc, linear, call, hf, call, cell, run_code});
  CHECK(ft.user_frame(lib) == cell);  // categories: unchanged
  CHECK(ft.library_model_frame(lib) == hf);
  CHECK(ft.site_frame(lib) == hf);
  CHECK(ft.cell_context(lib) == cell);
  CHECK(ft.site_text(lib, 1) == "forward (gpt2/modeling_gpt2.py:697)  [in cell ipykernel_114/3105878423.py:21, in forward "
                                "(modules/linear.py:125)]");
  CHECK(ft.site_text(lib, 2) ==
        "forward (gpt2/modeling_gpt2.py:697) <- run_code (core/interactiveshell.py:3577)  [in cell "
        "ipykernel_114/3105878423.py:21, in forward (modules/linear.py:125)]");

  // Not a notebook: unchanged.
  const StackId plain = b.stack({alloc, linear, call, forward, train});
  CHECK(ft.site_frame(plain) == forward);
  CHECK(ft.cell_context(plain) == kNoFrame);
  CHECK(ft.site_text(plain, 2) == "forward (proj/mymodel.py:44) <- train (proj/mymodel.py:90)  [in forward "
                                  "(modules/linear.py:125)]");
  // A directory merely named like a kernel's is not a cell.
  const StackId tools = b.stack({alloc, linear, not_cell, forward});
  CHECK(ft.site_frame(tools) == not_cell);
  CHECK(ft.cell_text(stdin_line) == "<stdin>:3");
  CHECK(ft.cell_text(old_cell) == "cell <ipython-input-3-a1b2c3d4e5f6>:7");
}

namespace {

// The walks the FrameTable made per stack before it knew every node's facts
// (kept as the reference its one-pass answers must equal).
FrameId naive_user_frame(const FrameTable& ft, StackId stack) {
  const StackTable& st = ft.trace().stacks;
  FrameId first_py = kNoFrame, first_any = kNoFrame, first_raw = kNoFrame;
  for (StackId s = stack; s != 0; s = st.node(s).parent) {
    const FrameId f = st.node(s).frame;
    if (first_raw == kNoFrame) first_raw = f;
    if (first_any == kNoFrame && !ft.internal(f)) first_any = f;
    if (ft.python(f)) {
      if (first_py == kNoFrame) first_py = f;
      if (ft.kind(f) == FrameKind::UserPython) return f;
    }
  }
  if (first_py != kNoFrame) return first_py;
  return first_any != kNoFrame ? first_any : first_raw;
}

FrameId naive_innermost_python(const FrameTable& ft, StackId stack) {
  const StackTable& st = ft.trace().stacks;
  for (StackId s = stack; s != 0; s = st.node(s).parent)
    if (ft.python(st.node(s).frame)) return st.node(s).frame;
  return kNoFrame;
}

FrameId naive_python_callee(const FrameTable& ft, StackId stack) {
  const StackTable& st = ft.trace().stacks;
  const FrameId uf = naive_user_frame(ft, stack);
  for (StackId s = stack; s != 0; s = st.node(s).parent) {
    const FrameId f = st.node(s).frame;
    if (f == uf) break;
    if (ft.python(f)) return f;
  }
  return kNoFrame;
}

std::vector<std::string> naive_site_path(const FrameTable& ft, StackId stack, size_t max_frames) {
  const StackTable& st = ft.trace().stacks;
  std::vector<std::string> out;
  if (stack == 0) return {"<no stack recorded>"};
  const FrameId uf = naive_user_frame(ft, stack);
  const bool py = uf != kNoFrame && ft.python(uf);
  bool started = false;
  for (StackId s = stack; s != 0 && out.size() < max_frames; s = st.node(s).parent) {
    const FrameId f = st.node(s).frame;
    if (!started && f != uf) continue;
    if (started && (py ? !ft.python(f) : ft.internal(f))) continue;
    started = true;
    const std::string& text = ft.label(f);
    if (!out.empty() && text == out.back()) continue;
    out.push_back(text);
  }
  return out;
}

}  // namespace

TEST_CASE("stack facts from one pass over the stack tree equal the walks per stack", "[model][frames]") {
  // A random forest of stacks over frames of every kind, some shared, some
  // printing alike (overloads): every node is a stack.
  Built b;
  std::vector<FrameId> pool = {
      b.add("train_step", "/home/me/train.py", 42),           b.add("main", "/home/me/train.py", 9),
      b.add("forward", "/venv/lib/python3.11/site-packages/torch/nn/modules/linear.py", 125),
      b.add("_foreach_sqrt", "/venv/lib/python3.11/site-packages/torch/optim/adam.py", 554),
      b.add("at::native::gemm", "", 0),                        b.add("at::native::gemm", "blas.cpp", 0),
      b.add("c10::cuda::CUDACachingAllocator::malloc", "CUDACachingAllocator.cpp", 10),
      b.add("_PyEval_EvalFrameDefault", "ceval.c", 0),         b.add("layer 3", "snapcapture", 0),
      b.add("helper", "/home/me/util.py", 7),                  b.add("", "", 0)};
  std::vector<StackId> nodes = {0};
  uint64_t x = 12345;
  auto rnd = [&](uint64_t n) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    return (x >> 33) % n;
  };
  for (int i = 0; i < 4000; ++i) {
    const StackId parent = nodes[rnd(nodes.size())];
    nodes.push_back(b.t.stacks.child(parent, pool[rnd(pool.size())]));
  }
  FrameTable ft(b.t);
  for (StackId s : nodes) {
    INFO("stack " << s);
    CHECK(ft.depth(s) == b.t.stacks.depth(s));
    CHECK(ft.user_frame(s) == (s == 0 ? kNoFrame : naive_user_frame(ft, s)));
    CHECK(ft.innermost_python(s) == naive_innermost_python(ft, s));
    CHECK(ft.python_callee(s) == (s == 0 ? kNoFrame : naive_python_callee(ft, s)));
    for (size_t n : {size_t(0), size_t(1), size_t(4), size_t(50)}) CHECK(ft.site_path(s, n).frames == naive_site_path(ft, s, n));
  }
  // Stacks made after the table: it learns the new nodes when asked.
  const StackId later = b.t.stacks.child(nodes.back(), pool[0]);
  CHECK(ft.user_frame(later) == pool[0]);
  CHECK(ft.depth(later) == b.t.stacks.depth(later));
}

TEST_CASE("a stack 100,000 frames deep: facts in constant time, shown as its ends", "[model][frames]") {
  Built b;
  const size_t depth = 100000;
  std::vector<FrameId> fr;
  for (size_t i = 0; i < depth; ++i) fr.push_back(b.add((std::string("f").append(std::to_string(i))).c_str(), "/home/me/deep.py", int64_t(i)));
  // Node k (1-based) has frame fr[k-1] under node k-1: the outermost frame is fr[0].
  std::vector<StackId> chain = {0};
  for (size_t i = 0; i < depth; ++i) chain.push_back(b.t.stacks.child(chain.back(), fr[i]));
  FrameTable ft(b.t);
  // Every node asked, as a report asks every live site: linear in all.
  size_t wrong = 0;
  for (size_t k = 1; k < chain.size(); ++k)
    wrong += ft.user_frame(chain[k]) != fr[k - 1] || ft.depth(chain[k]) != k || ft.python_callee(chain[k]) != kNoFrame;
  CHECK(wrong == 0);
  const StackId deepest = chain.back();
  const FrameTable::Shown sh = ft.shown(deepest);
  REQUIRE(sh.inner.size() == kShownInner);
  REQUIRE(sh.outer.size() == kShownOuter);
  CHECK(sh.elided == depth - kShownFrames);
  CHECK(sh.inner.front() == fr[depth - 1]);
  CHECK(sh.inner.back() == fr[depth - kShownInner]);
  CHECK(sh.outer.front() == fr[kShownOuter - 1]);
  CHECK(sh.outer.back() == fr[0]);
  // Up to kShownFrames deep: every frame, nothing elided.
  const FrameTable::Shown whole = ft.shown(chain[kShownFrames]);
  CHECK(whole.inner.size() == kShownFrames);
  CHECK(whole.elided == 0);
  CHECK(whole.outer.empty());
  CHECK(ft.shown(chain[kShownFrames + 1]).elided == 1);
  const FrameTable::SitePath p = ft.site_path(deepest, 4);
  REQUIRE(p.frames.size() == 4);
  CHECK(p.frames[0] == ft.label(fr[depth - 1]));
  CHECK(p.frames[3] == ft.label(fr[depth - 4]));
  // Recursion 100,000 deep through one frame: the site path skips the
  // repeats it prints alike for at most kShownFrames steps.
  Built r;
  const FrameId rec = r.add("recurse", "/home/me/deep.py", 3);
  const FrameId top = r.add("main", "/home/me/deep.py", 1);
  StackId s = r.t.stacks.child(0, top);
  for (size_t i = 0; i < depth; ++i) s = r.t.stacks.child(s, rec);
  FrameTable rt(r.t);
  const FrameTable::SitePath rp = rt.site_path(s, 4);
  REQUIRE(!rp.frames.empty());
  CHECK(rp.frames[0] == rt.label(rec));
  CHECK(rp.frames.size() == 1);  // main lies beyond the repeats looked at
}
