// Sites under C++ stacks: the aten op or autograd node a user recognises and
// the Python frames above it, never the allocator's plumbing.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "snapdiff/model/frame_names.hpp"
#include "snapdiff/model/frames.hpp"

using namespace snapdiff;

namespace {

struct Built {
  Trace t;
  FrameId add(const char* name, const char* file = "", int64_t line = 0) {
    Frame fr;
    fr.name = t.strings.intern(name);
    fr.file = t.strings.intern(file);
    fr.line = line;
    return t.intern_frame(fr);
  }
  // innermost first
  StackId stack(std::vector<FrameId> frames) { return t.stacks.intern(frames.data(), frames.size()); }
};

std::string shown(std::string_view raw) {
  std::string s;
  detail::classify_native(raw, &s);
  return s;
}

// Frames of a CUDA tensor's allocation as PyTorch records them with
// stacks="all" (names as recorded, parameter lists and all).
struct Plumbing {
  FrameId alloc, unwind, generic, cuda, native_cuda, strided_op, create_out;
  explicit Plumbing(Built& b)
      : alloc(b.add("c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::malloc(void**, signed char, "
                    "unsigned long, CUstream_st*)",
                    "CUDACachingAllocator.cpp", 0)),
        unwind(b.add("torch::unwind::unwind()", "??", 0)),
        generic(b.add("at::detail::empty_generic(c10::ArrayRef<long>, c10::Allocator*, c10::DispatchKeySet, "
                      "c10::ScalarType, std::optional<c10::MemoryFormat>)",
                      "??", 0)),
        cuda(b.add("at::detail::empty_cuda(c10::ArrayRef<long>, c10::TensorOptions const&)", "??", 0)),
        native_cuda(b.add("at::native::empty_cuda(c10::ArrayRef<long>, std::optional<c10::ScalarType>)", "??", 0)),
        strided_op(b.add("at::_ops::empty_strided::call(c10::ArrayRef<c10::SymInt>, c10::ArrayRef<c10::SymInt>)",
                         "??", 0)),
        create_out(b.add("at::native::(anonymous namespace)::create_out(c10::ArrayRef<long>, c10::ArrayRef<long>, "
                         "c10::TensorOptions const&)",
                         "RegisterCUDA_0.cpp", 0)) {}
};

}  // namespace

TEST_CASE("C++ frames classified: aten ops, autograd nodes, plumbing", "[model]") {
  // aten ops by their base name, as the profiler writes them.
  CHECK(detail::classify_native("at::_ops::addmm::call(at::Tensor const&, at::Tensor const&)") == NativeRole::Op);
  CHECK(shown("at::_ops::addmm::call(at::Tensor const&, at::Tensor const&)") == "aten::addmm");
  CHECK(shown("at::Tensor at::_ops::addmm::redispatch(c10::DispatchKeySet, at::Tensor const&)") == "aten::addmm");
  CHECK(shown("at::_ops::addmm_out::call(at::Tensor const&, at::Tensor&)") == "aten::addmm");
  CHECK(shown("at::_ops::add__Tensor::call(at::Tensor&, at::Tensor const&, c10::Scalar const&)") == "aten::add_");
  CHECK(shown("at::_ops::add_Tensor::call(at::Tensor const&, at::Tensor const&, c10::Scalar const&)") == "aten::add");
  CHECK(shown("at::_ops::sum_dim_IntList::call(at::Tensor const&, c10::OptionalArrayRef<long>, bool)") == "aten::sum");
  CHECK(shown("at::_ops::to_dtype_layout::call(at::Tensor const&)") == "aten::to");
  CHECK(shown("at::_ops::_foreach_add_List::call(c10::ArrayRef<at::Tensor>)") == "aten::_foreach_add");
  CHECK(shown("at::_ops::_log_softmax_backward_data::call(at::Tensor const&)") == "aten::_log_softmax_backward_data");
  CHECK(shown("at::_ops::_to_copy::call(at::Tensor const&)") == "aten::_to_copy");
  CHECK(detail::classify_native("at::_ops::_to_copy::call(at::Tensor const&)") == NativeRole::Op);
  CHECK(detail::classify_native("at::_ops::clone::call(at::Tensor const&)") == NativeRole::Op);
  CHECK(detail::classify_native("at::_ops::copy_::call(at::Tensor&, at::Tensor const&, bool)") == NativeRole::Op);
  CHECK(detail::classify_native("at::_ops::contiguous::call(at::Tensor const&)") == NativeRole::Op);
  // Factories say nothing of what the tensor is for.
  for (const char* f : {"at::_ops::empty_strided::call(c10::ArrayRef<c10::SymInt>)",
                        "at::_ops::empty_memory_format::redispatch(c10::DispatchKeySet)", "at::_ops::empty_like::call()",
                        "at::_ops::zeros::call()", "at::_ops::new_empty_strided::call()", "at::_ops::as_strided::call()",
                        "at::_ops::view::call()", "at::_ops::resize_::call()", "at::_ops::set_::call()"}) {
    INFO(f);
    CHECK(detail::classify_native(f) == NativeRole::Factory);
  }
  // Autograd nodes by the node's name.
  CHECK(shown("torch::autograd::generated::LogSoftmaxBackward0::apply(std::vector<at::Tensor>&&)") ==
        "LogSoftmaxBackward0");
  CHECK(shown("torch::autograd::generated::AddmmBackward1::apply(std::vector<at::Tensor>&&)") == "AddmmBackward1");
  CHECK(shown("torch::autograd::generated::AsStridedBackward0_copy::apply(std::vector<at::Tensor>&&)") ==
        "AsStridedBackward0_copy");
  CHECK(shown("torch::autograd::generated::GeluBackward0_apply_functional(std::vector<at::Tensor>&&, "
              "std::array<bool, 1ul>)") == "GeluBackward0");
  CHECK(shown("torch::autograd::AccumulateGrad::apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)") ==
        "AccumulateGrad");
  CHECK(shown("torch::autograd::(anonymous namespace)::AccumulateGrad_apply_impl(std::vector<at::Tensor>&&)") ==
        "AccumulateGrad");
  CHECK(shown("torch::autograd::CppNode<my_ext::ScaleFn>::apply(std::vector<at::Tensor>&&)") == "ScaleFn");
  CHECK(shown("torch::autograd::PyNode::apply(std::vector<at::Tensor>&&)") == "PyNode");
  CHECK(detail::classify_native("torch::autograd::PyNode::apply(std::vector<at::Tensor>&&)") == NativeRole::Node);
  // Plumbing: allocator, factories, dispatcher, engine, bindings, interpreter.
  for (const char* p :
       {"at::detail::empty_generic(c10::ArrayRef<long>, c10::Allocator*)", "at::native::empty_cuda(c10::ArrayRef<long>)",
        "at::native::(anonymous namespace)::create_out(c10::ArrayRef<long>)",
        "at::(anonymous namespace)::create_out(c10::ArrayRef<long>, c10::ArrayRef<long>, c10::TensorOptions const&)",
        "at::TensorBase::contiguous(c10::MemoryFormat) const", "c10::TensorImpl::~TensorImpl()",
        "at::native::structured_sum_out::impl(at::Tensor const&)",
        "at::(anonymous namespace)::(anonymous namespace)::wrapper_CUDA__empty_strided(c10::ArrayRef<c10::SymInt>)",
        "at::(anonymous namespace)::structured_mm_out_cuda_functional::set_output_raw_strided(long)",
        "at::cuda::CUDAAllocatorConfig::get()", "std::vector<at::Tensor, std::allocator<at::Tensor> >::~vector()",
        "torch::autograd::THPVariable_addmm(_object*, _object*, _object*)", "pybind11::cpp_function::dispatcher(_object*)",
        "torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)",
        "torch::autograd::Engine::evaluate_function(std::shared_ptr<torch::autograd::GraphTask>&)",
        "torch::autograd::VariableType::(anonymous namespace)::addmm(c10::DispatchKeySet)", "PyType_GetModule",
        "at::_ops::addmm::typed_handle()", "__clone", "??"}) {
    INFO(p);
    CHECK(detail::classify_native(p) == NativeRole::Plumbing);
  }
  // Other C++ frames: shown when nothing better exists.
  CHECK(detail::classify_native("void at::native::gpu_reduce_kernel<float, float, 4>(at::TensorIterator&)") ==
        NativeRole::Other);
  CHECK(detail::classify_native("at::cuda::getCurrentCUDABlasHandle()") == NativeRole::Other);
  CHECK(detail::classify_native("torch::autograd::generated::GeluBackward0::release_variables()") == NativeRole::Other);
  // A method's qualifiers are not its name.
  CHECK(detail::short_native_name("torch::autograd::InputMetadata::reduce_grad(at::Tensor&) const") ==
        "torch::autograd::InputMetadata::reduce_grad");
}

TEST_CASE("op and node labels: their short names, a file only with a real line", "[model]") {
  Built b;
  const FrameId op = b.add("at::_ops::addmm::call(at::Tensor const&, at::Tensor const&)", "??", 0);
  const FrameId op_file = b.add("at::_ops::mm::call(at::Tensor const&)", "/src/aten/build/Operators_2.cpp", 1234);
  const FrameId op_no_line = b.add("at::_ops::bmm::call(at::Tensor const&)", "Operators_2.cpp", 0);
  const FrameId node = b.add("torch::autograd::generated::LogSoftmaxBackward0::apply(std::vector<at::Tensor>&&)", "", 0);
  const FrameId plumbing = b.add("at::detail::empty_generic(c10::ArrayRef<long>)", "??", 0);
  const FrameId alloc = b.add("c10::cuda::CUDACachingAllocator::malloc", "CUDACachingAllocator.cpp", 10);
  const FrameId py = b.add("forward", "model.py", 12);
  FrameTable ft(b.t);
  CHECK(ft.label(op) == "aten::addmm");
  CHECK(ft.short_label(op) == "aten::addmm");
  CHECK(ft.short_native(op) == "aten::addmm");
  CHECK(ft.label(op_file) == "aten::mm (build/Operators_2.cpp:1234)");
  CHECK(ft.short_label(op_file) == "aten::mm (Operators_2.cpp:1234)");
  CHECK(ft.label(op_no_line) == "aten::bmm");
  CHECK(ft.short_label(op_no_line) == "aten::bmm");
  CHECK(ft.label(node) == "LogSoftmaxBackward0");
  CHECK(ft.short_label(node) == "LogSoftmaxBackward0");
  CHECK(ft.role(op) == NativeRole::Op);
  CHECK(ft.role(node) == NativeRole::Node);
  CHECK(ft.role(plumbing) == NativeRole::Plumbing);
  CHECK(ft.role(alloc) == NativeRole::Plumbing);
  CHECK(ft.role(py) == NativeRole::None);
  CHECK((ft.plumbing(plumbing) && ft.plumbing(alloc) && !ft.plumbing(op) && !ft.plumbing(py)));
  CHECK((ft.op_or_node(op) && ft.op_or_node(node) && !ft.op_or_node(plumbing)));
  // The frame kinds are as before: ops and nodes are native frames.
  CHECK(ft.kind(op) == FrameKind::Native);
  CHECK(ft.kind(plumbing) == FrameKind::Native);
  CHECK(!ft.internal(plumbing));
}

TEST_CASE("a C++-only backward stack: the aten op, then the autograd node", "[model]") {
  Built b;
  const Plumbing pl(b);
  const FrameId lsm = b.add("at::_ops::_log_softmax_backward_data::call(at::Tensor const&, at::Tensor const&, long, "
                            "c10::ScalarType)",
                            "??", 0);
  const FrameId node = b.add("torch::autograd::generated::LogSoftmaxBackward0::apply(std::vector<at::Tensor, "
                             "std::allocator<at::Tensor> >&&)",
                             "??", 0);
  const FrameId eval = b.add("torch::autograd::Engine::evaluate_function(std::shared_ptr<torch::autograd::GraphTask>&, "
                             "torch::autograd::Node*)",
                             "??", 0);
  const FrameId thread = b.add("torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)",
                               "??", 0);
  const StackId s =
      b.stack({pl.alloc, pl.unwind, pl.generic, pl.native_cuda, pl.strided_op, pl.create_out, lsm, node, eval, thread});
  FrameTable ft(b.t);
  CHECK(ft.user_frame(s) == lsm);
  CHECK(ft.python_callee(s) == kNoFrame);
  CHECK(ft.site_callee(s) == kNoFrame);
  const FrameTable::SitePath p = ft.site_path(s, 4);
  CHECK(p.frames == std::vector<std::string>{"aten::_log_softmax_backward_data", "LogSoftmaxBackward0"});
  CHECK(p.callee.empty());
  CHECK(ft.site_text(s, 4) == "aten::_log_softmax_backward_data <- LogSoftmaxBackward0");
  CHECK(ft.site_text(s, 1) == "aten::_log_softmax_backward_data");
  // No op but a factory: the node.
  const StackId accumulate =
      b.stack({pl.alloc, pl.generic, pl.cuda, b.add("at::_ops::empty_like::call(at::Tensor const&)", "??", 0),
               b.add("torch::autograd::AccumulateGrad::apply(std::vector<at::Tensor>&&)", "??", 0), eval, thread});
  FrameTable ft2(b.t);
  CHECK(ft2.site_text(accumulate, 4) == "AccumulateGrad");
  // An op with nothing meaningful above it: then the frames that are not plumbing.
  const FrameId sum_to = b.add("at::Tensor at::_sum_to<c10::SymInt>(at::Tensor, c10::ArrayRef<c10::SymInt>, bool)", "", 0);
  const FrameId reduce = b.add("torch::autograd::InputMetadata::reduce_grad(at::Tensor&) const", "??", 0);
  const StackId reduce_grad = b.stack(
      {pl.generic, b.add("at::_ops::sum_dim_IntList::call(at::Tensor const&, c10::OptionalArrayRef<long>)", "??", 0),
       sum_to, reduce, eval, thread});
  FrameTable ft3(b.t);
  CHECK(ft3.site_text(reduce_grad, 4) == "aten::sum <- at::_sum_to<…> <- torch::autograd::InputMetadata::reduce_grad");
}

TEST_CASE("a forward stack under the user's Python: the Python site, the aten op as its callee", "[model]") {
  Built b;
  const Plumbing pl(b);
  const FrameId addmm = b.add("at::_ops::addmm::call(at::Tensor const&, at::Tensor const&, at::Tensor const&, "
                              "c10::Scalar const&, c10::Scalar const&)",
                              "??", 0);
  const FrameId binding = b.add("torch::autograd::THPVariable_addmm(_object*, _object*, _object*)",
                                "python_torch_functions_0.cpp", 0);
  const FrameId eval = b.add("_PyEval_EvalFrameDefault", "??", 0);
  const FrameId forward = b.add("forward", "model.py", 12);
  const FrameId train = b.add("train", "train.py", 40);
  const StackId s = b.stack({pl.alloc, pl.generic, pl.cuda, pl.create_out, addmm, binding, eval, forward, eval, train});
  FrameTable ft(b.t);
  CHECK(ft.user_frame(s) == forward);
  CHECK(ft.python_callee(s) == kNoFrame);
  CHECK(ft.site_callee(s) == addmm);
  const FrameTable::SitePath p = ft.site_path(s, 4);
  CHECK(p.frames == std::vector<std::string>{"forward (model.py:12)", "train (train.py:40)"});
  CHECK(p.callee == "aten::addmm");
  CHECK(ft.site_text(s, 4) == "forward (model.py:12) <- train (train.py:40)  [in aten::addmm]");
  // A Python callee (library code inside the user's call) comes first.
  const FrameId linear = b.add("linear", "/venv/lib/python3.11/site-packages/torch/nn/functional.py", 125);
  const StackId lib = b.stack({pl.generic, addmm, binding, eval, linear, forward, train});
  // Only library Python: the op, then the Python frames that call it.
  const StackId lib_only = b.stack({pl.generic, pl.create_out, addmm, binding, eval, linear});
  // Factories only under the user's Python: no callee.
  const StackId factory = b.stack({pl.generic, pl.strided_op, binding, forward, train});
  FrameTable ft2(b.t);
  CHECK(ft2.site_text(lib, 4) == "forward (model.py:12) <- train (train.py:40)  [in linear (nn/functional.py:125)]");
  CHECK(ft2.user_frame(lib_only) == addmm);
  CHECK(ft2.site_text(lib_only, 4) == "aten::addmm <- linear (nn/functional.py:125)");
  CHECK(ft2.site_text(factory, 4) == "forward (model.py:12) <- train (train.py:40)");
  // A library Python backward run by an autograd node: the Python frame,
  // inside the node, is the site (a Python site's callers are Python frames).
  const FrameId py_node = b.add("torch::autograd::PyNode::apply(std::vector<at::Tensor>&&)", "??", 0);
  const FrameId backward = b.add("backward", "/venv/lib/python3.11/site-packages/mylib/fn.py", 30);
  const StackId custom = b.stack({pl.generic, pl.strided_op, eval, backward, py_node});
  FrameTable ft3(b.t);
  CHECK(ft3.user_frame(custom) == backward);
  CHECK(ft3.site_text(custom, 4) == "backward (mylib/fn.py:30)");
}

TEST_CASE("a stack of plumbing only still gets a site: its innermost frame", "[model]") {
  Built b;
  const Plumbing pl(b);
  const StackId s = b.stack({pl.generic, pl.cuda, pl.native_cuda, pl.create_out});
  const StackId internal_only = b.stack({pl.alloc, pl.unwind});
  FrameTable ft(b.t);
  CHECK(ft.user_frame(s) == pl.generic);
  const FrameTable::SitePath p = ft.site_path(s, 4);
  REQUIRE(!p.frames.empty());
  CHECK(p.frames[0] == "at::detail::empty_generic");
  CHECK(ft.user_frame(internal_only) == pl.alloc);
  REQUIRE(!ft.site_path(internal_only, 4).frames.empty());
  CHECK(ft.site_path(internal_only, 4).frames[0] == ft.label(pl.alloc));
  // Plumbing under a kernel: the kernel, then its callers that are not plumbing.
  const FrameId kernel = b.add("void at::native::gpu_reduce_kernel<float, float, 4>(at::TensorIterator&)", "Reduce.cu", 0);
  const FrameId helper = b.add("my_ext::launch(at::Tensor const&)", "ext.cpp", 7);
  const StackId k = b.stack({pl.generic, kernel, pl.create_out, helper, pl.unwind});
  FrameTable ft2(b.t);
  CHECK(ft2.site_text(k, 4) == "at::native::gpu_reduce_kernel<…> (Reduce.cu) <- my_ext::launch (ext.cpp:7)");
}

namespace {

// The walks per stack the one-pass answers must equal.
FrameId naive_user_frame(const FrameTable& ft, StackId stack) {
  const StackTable& st = ft.trace().stacks;
  FrameId py = kNoFrame, op = kNoFrame, node = kNoFrame, plain = kNoFrame, any = kNoFrame, raw = kNoFrame;
  for (StackId s = stack; s != 0; s = st.node(s).parent) {
    const FrameId f = st.node(s).frame;
    if (ft.kind(f) == FrameKind::UserPython) return f;
    if (raw == kNoFrame) raw = f;
    if (any == kNoFrame && !ft.internal(f)) any = f;
    if (plain == kNoFrame && !ft.plumbing(f)) plain = f;
    if (py == kNoFrame && ft.python(f)) py = f;
    // Ops and nodes count only inside the innermost Python frame.
    if (py == kNoFrame && op == kNoFrame && ft.role(f) == NativeRole::Op) op = f;
    if (py == kNoFrame && node == kNoFrame && ft.role(f) == NativeRole::Node) node = f;
  }
  for (FrameId f : {op, node, py, plain, any, raw})
    if (f != kNoFrame) return f;
  return kNoFrame;
}

// The node of naive_user_frame's frame (the innermost one that has it).
StackId naive_user_node(const FrameTable& ft, StackId stack) {
  const StackTable& st = ft.trace().stacks;
  const FrameId uf = naive_user_frame(ft, stack);
  for (StackId s = stack; s != 0; s = st.node(s).parent)
    if (st.node(s).frame == uf) return s;
  return 0;
}

FrameId naive_site_callee(const FrameTable& ft, StackId stack) {
  const StackTable& st = ft.trace().stacks;
  const StackId u = naive_user_node(ft, stack);
  FrameId op = kNoFrame, node = kNoFrame;
  for (StackId s = stack; s != u; s = st.node(s).parent) {
    const FrameId f = st.node(s).frame;
    if (ft.python(f)) return f;
    if (op == kNoFrame && ft.role(f) == NativeRole::Op) op = f;
    if (node == kNoFrame && ft.role(f) == NativeRole::Node) node = f;
  }
  if (!ft.python(st.node(u).frame)) return kNoFrame;
  return op != kNoFrame ? op : node;
}

std::vector<std::string> naive_site_path(const FrameTable& ft, StackId stack, size_t max_frames) {
  const StackTable& st = ft.trace().stacks;
  if (stack == 0) return {"<no stack recorded>"};
  const StackId u = naive_user_node(ft, stack);
  const FrameId uf = st.node(u).frame;
  const bool py = ft.python(uf), meaningful = ft.op_or_node(uf), plain = !ft.plumbing(uf);
  std::vector<std::string> out;
  bool only_plain = false;  // no op, node or Python frame left above
  for (StackId s = u; s != 0 && out.size() < max_frames; s = st.node(s).parent) {
    const FrameId f = st.node(s).frame;
    if (s != u) {
      if (meaningful && !only_plain) {
        bool left = false;
        for (StackId a = s; a != 0 && !left; a = st.node(a).parent) left = ft.python(st.node(a).frame) || ft.op_or_node(st.node(a).frame);
        only_plain = !left;
      }
      const bool take = py ? ft.python(f)
                        : meaningful ? (only_plain ? !ft.plumbing(f) : ft.python(f) || ft.op_or_node(f))
                        : plain ? !ft.plumbing(f) : !ft.internal(f);
      if (!take) continue;
    }
    const std::string& text = ft.label(f);
    if (!out.empty() && text == out.back()) continue;
    out.push_back(text);
  }
  return out;
}

}  // namespace

TEST_CASE("site facts from one pass over the stack tree equal the walks per stack", "[model]") {
  Built b;
  std::vector<FrameId> pool = {
      b.add("train_step", "/home/me/train.py", 42),
      b.add("forward", "/venv/lib/python3.11/site-packages/torch/nn/modules/linear.py", 125),
      b.add("_foreach_sqrt", "/venv/lib/python3.11/site-packages/torch/optim/adam.py", 554),
      b.add("at::_ops::addmm::call(at::Tensor const&)", "??", 0),
      b.add("at::_ops::addmm::redispatch(c10::DispatchKeySet)", "??", 0),
      b.add("at::_ops::mm::call(at::Tensor const&)", "??", 0),
      b.add("at::_ops::empty_strided::call(c10::ArrayRef<c10::SymInt>)", "??", 0),
      b.add("torch::autograd::generated::AddmmBackward0::apply(std::vector<at::Tensor>&&)", "??", 0),
      b.add("torch::autograd::AccumulateGrad::apply(std::vector<at::Tensor>&&)", "??", 0),
      b.add("at::detail::empty_generic(c10::ArrayRef<long>)", "??", 0),
      b.add("torch::autograd::Engine::thread_main()", "??", 0),
      b.add("at::native::gemm", "", 0),
      b.add("c10::cuda::CUDACachingAllocator::malloc", "CUDACachingAllocator.cpp", 10),
      b.add("_PyEval_EvalFrameDefault", "ceval.c", 0),
      b.add("layer 3", "snapcapture", 0),
      b.add("", "", 0)};
  std::vector<StackId> nodes = {0};
  uint64_t x = 987654321;
  auto rnd = [&](uint64_t n) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    return (x >> 33) % n;
  };
  for (int i = 0; i < 4000; ++i) {
    const StackId parent = nodes[rnd(nodes.size())];
    nodes.push_back(b.t.stacks.child(parent, pool[rnd(pool.size())]));
  }
  FrameTable ft(b.t);
  size_t ops_first = 0, with_op_callee = 0;
  for (StackId s : nodes) {
    if (s == 0) continue;
    INFO("stack " << s);
    CHECK(ft.user_frame(s) == naive_user_frame(ft, s));
    CHECK(ft.site_callee(s) == naive_site_callee(ft, s));
    for (size_t n : {size_t(1), size_t(4), size_t(50)}) CHECK(ft.site_path(s, n).frames == naive_site_path(ft, s, n));
    ops_first += ft.op_or_node(ft.user_frame(s));
    with_op_callee += ft.site_callee(s) != kNoFrame && ft.op_or_node(ft.site_callee(s));
  }
  // The forest has both kinds of stacks the new rules name.
  CHECK(ops_first > 100);
  CHECK(with_op_callee > 100);
}
