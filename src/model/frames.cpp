// The one place that decides what kind of frame a frame is and how it is
// written; reports, diffs and charts ask the FrameTable.
#include "snapdiff/model/frames.hpp"

#include <string_view>

#include "snapdiff/model/frame_names.hpp"

namespace snapdiff {

namespace {

bool contains(std::string_view s, std::string_view needle) { return s.find(needle) != std::string_view::npos; }

bool is_python_file(std::string_view f) { return f.size() > 3 && f.substr(f.size() - 3) == ".py"; }

bool is_library_python(std::string_view f) {
  // Profiler traces name files relative to sys.path ("torch/nn/modules/module.py").
  static const std::string_view relative[] = {"torch/", "torchvision/", "torchaudio/", "transformers/",
                                              "accelerate/", "triton/", "apex/", "deepspeed/", "numpy/"};
  for (auto r : relative)
    if (f.rfind(r, 0) == 0) return true;
  return contains(f, "/torch/") || contains(f, "/site-packages/") || contains(f, "/dist-packages/") ||
         contains(f, "/lib/python3") || f.rfind("<frozen", 0) == 0;
}

bool is_internal(std::string_view name, std::string_view file) {
  // What PyTorch's own viewer filters out (the unwinder, the interpreter, the
  // dispatcher's boxing layers), plus the caching allocator itself.
  static const std::string_view names[] = {"unwind::unwind", "CapturedTraceback::gather", "gather_with_cpp",
                                           "_start", "__libc_start_main", "PyEval_", "PyObject_", "PyFunction_",
                                           "PyMethod_", "PyVectorcall", "_Py", "CUDACachingAllocator",
                                           "c10::cuda::", "c10::impl::", "c10::Dispatcher", "c10::BoxedKernel",
                                           "c10::KernelFunction"};
  static const std::string_view files[] = {"core/boxing", "/Register", "/Redispatch", "pythonrun.c",
                                           "Modules/main.c", "Objects/call.c", "Objects/methodobject.c",
                                           "pycore_ceval.h", "ceval.c", "cpython/abstract.h",
                                           "CUDACachingAllocator.cpp", "memory_snapshot.cpp"};
  for (auto n : names)
    if (contains(name, n)) return true;
  for (auto n : files)
    if (contains(file, n)) return true;
  return name.empty() && (file.empty() || file == "??");
}

const std::string kNoStack = "<no stack recorded>";

bool starts(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends(std::string_view s, std::string_view p) { return s.size() >= p.size() && s.substr(s.size() - p.size()) == p; }

// Notebook cells and REPL lines: Jupyter's "<tmp>/ipykernel_114/3105878423.py",
// older IPython's "<ipython-input-3-a1b2c3>", the interpreter's "<stdin>",
// "<string>" (exec) and "<console>" (code.interact).
bool is_cell_file(std::string_view f) {
  if (f == "<stdin>" || f == "<string>" || f == "<console>" || starts(f, "<ipython-input-")) return true;
  const size_t k = f.find("ipykernel_");
  if (k == std::string_view::npos || (k > 0 && f[k - 1] != '/')) return false;
  size_t i = k + 10, d = i;
  while (i < f.size() && f[i] >= '0' && f[i] <= '9') ++i;
  return i > d && i < f.size() && f[i] == '/' && f.find('/', i + 1) == std::string_view::npos;
}

// An op's name without its overload, as the profiler writes ops:
// "addmm_out" -> "addmm", "add__Tensor" -> "add_", "sum_dim_IntList" ->
// "sum", "to_dtype_layout" -> "to", "empty_memory_format" -> "empty".
// Overload names are the op's trailing capitalised words ("Tensor",
// "Scalar_out") and a few lowercase ones.
std::string_view base_op(std::string_view op) {
  static const std::string_view lower[] = {"_out", "_dim", "_int", "_self", "_other", "_mode", "_dtype_layout",
                                           "_dtype", "_device", "_memory_format", "_using_ints", "_correction",
                                           "_grad_input"};
  for (bool cut = true; cut;) {
    cut = false;
    const size_t u = op.rfind('_');
    if (u != std::string_view::npos && u > 0 && u + 1 < op.size() && op[u + 1] >= 'A' && op[u + 1] <= 'Z' &&
        op.find_first_not_of('_') < u) {
      op = op.substr(0, u);
      cut = true;
      continue;
    }
    for (std::string_view l : lower)
      if (op.size() > l.size() && ends(op, l) && op.find_first_not_of('_') < op.size() - l.size()) {
        op = op.substr(0, op.size() - l.size());
        cut = true;
        break;
      }
  }
  return op;
}

// Ops that only make, reshape or view a tensor: they say nothing of what it
// is for (the op or node that asked for it does).
bool factory_op(std::string_view op) {
  static const std::string_view names[] = {"empty",     "empty_strided",     "empty_like",     "empty_permuted",
                                           "zeros",     "new_empty",         "new_empty_strided", "as_strided",
                                           "view",      "resize_",           "set_",           "_reshape_alias",
                                           "_unsafe_view", "alias"};
  for (auto n : names)
    if (op == n) return true;
  return false;
}

// Allocator, factory, dispatcher, autograd-engine, binding and interpreter
// frames by their shortened name: what sits between the op or node that
// allocated and the allocator.
bool plumbing_name(std::string_view s) {
  static const std::string_view prefixes[] = {
      "at::detail::", "at::empty", "at::zeros", "at::native::empty", "at::native::zeros", "at::native::resize",
      "at::native::structured_", "at::TensorBase::", "at::Tensor::", "at::meta::", "at::impl::",
      "at::TensorIterator", "at::(anon)::", "at::_ops::", "at::functionalization::", "at::autocast::", "c10::",
      "std::", "__gnu_cxx::", "torch::autograd::THPVariable_", "torch::autograd::TypeError_to_NotImplemented_",
      "torch::autograd::Engine::", "torch::autograd::python::", "torch::autograd::Node::",
      "torch::autograd::validate_outputs", "torch::autograd::VariableType::", "torch::autograd::impl::",
      "torch::autograd::utils::", "torch::autograd::dispatch_", "torch::ADInplaceOrView::", "torch::detail::",
      "torch::utils::", "torch::unwind", "torch::CapturedTraceback", "torch::cuda::", "torch::PythonArgParser",
      "torch::FunctionSignature", "pybind11::", "THP", "Py", "_Py", "__clone", "clone3", "start_thread",
      "pthread_", "__libc", "_start", "_dl_"};
  static const std::string_view inside[] = {"wrapper_", "create_out", "set_output", "Allocator"};
  if (s.empty() || s == "??") return true;
  for (auto p : prefixes)
    if (starts(s, p)) return true;
  for (auto p : inside)
    if (contains(s, p)) return true;
  return false;
}

// The last "::" component of a shortened name (template arguments are "<…>"
// there, so no "::" hides inside them).
std::string_view last_component(std::string_view s) {
  const size_t c = s.rfind("::");
  return c == std::string_view::npos ? s : s.substr(c + 2);
}

// "CppNode<ns::MyFunction>": the custom Function's class, by its last
// component, from the name as recorded.
std::string cpp_node_name(std::string_view raw) {
  const size_t at = raw.find("CppNode<");
  if (at == std::string_view::npos) return "CppNode";
  const size_t from = at + 8;
  int depth = 1;
  size_t i = from;
  for (; i < raw.size() && depth > 0; ++i) depth += raw[i] == '<' ? 1 : raw[i] == '>' ? -1 : 0;
  if (depth != 0 || i - 1 <= from) return "CppNode";
  const std::string arg = detail::short_native_name(std::string(raw.substr(from, i - 1 - from)));
  const std::string_view last = last_component(arg);
  return last.empty() ? std::string("CppNode") : std::string(last);
}

}  // namespace

namespace detail {

NativeRole classify_native(std::string_view raw_name, std::string* shown) {
  const std::string s = short_native_name(std::string(raw_name));
  // An aten op's entry: at::_ops::<op>::call / ::redispatch.
  if (starts(s, "at::_ops::")) {
    std::string_view rest = std::string_view(s).substr(10);
    for (std::string_view tail : {"::call", "::redispatch"})
      if (ends(rest, tail) && rest.size() > tail.size()) {
        const std::string_view op = rest.substr(0, rest.size() - tail.size());
        if (contains(op, "::") || contains(op, "<")) break;
        const std::string_view base = base_op(op);
        if (shown) *shown = "aten::" + std::string(base);
        return factory_op(base) ? NativeRole::Factory : NativeRole::Op;
      }
    return NativeRole::Plumbing;
  }
  // An autograd node: torch::autograd::[generated::]<Node>::apply, and the
  // generated code's <Node>_apply_functional / AccumulateGrad_apply_impl.
  if (starts(s, "torch::autograd::")) {
    std::string_view cls;
    const std::string_view sv(s);
    if (ends(sv, "::apply")) cls = last_component(sv.substr(0, sv.size() - 7));
    else if (ends(sv, "_apply_functional")) cls = last_component(sv.substr(0, sv.size() - 17));
    else if (ends(sv, "_apply_impl")) cls = last_component(sv.substr(0, sv.size() - 11));
    const bool named = !cls.empty() && ((cls[0] >= 'A' && cls[0] <= 'Z') || (cls[0] >= 'a' && cls[0] <= 'z'));
    if (named && cls != "Node" && cls != "Engine" && cls != "Function") {
      if (shown) *shown = starts(cls, "CppNode") ? cpp_node_name(raw_name) : std::string(cls);
      return NativeRole::Node;
    }
  }
  return plumbing_name(s) ? NativeRole::Plumbing : NativeRole::Other;
}

}  // namespace detail

const char* frame_kind_name(FrameKind k) {
  switch (k) {
    case FrameKind::UserPython: return "user_python";
    case FrameKind::LibraryPython: return "library_python";
    case FrameKind::Native: return "native";
    case FrameKind::Internal: return "internal";
    case FrameKind::Scope: return "scope";
  }
  return "native";
}

const char* native_role_name(NativeRole r) {
  switch (r) {
    case NativeRole::None: return "none";
    case NativeRole::Op: return "op";
    case NativeRole::Factory: return "factory";
    case NativeRole::Node: return "node";
    case NativeRole::Plumbing: return "plumbing";
    case NativeRole::Other: return "other";
  }
  return "other";
}

FrameTable::FrameTable(const Trace& t) : trace_(&t) {
  const size_t n = t.frames.size();
  kind_.resize(n);
  internal_.resize(n);
  role_.resize(n);
  cell_.resize(n);
  label_.resize(n);
  short_label_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const std::string_view name = t.strings.get(t.frames[i].name);
    const std::string_view file = t.strings.get(t.frames[i].file);
    const bool internal = is_internal(name, file);
    internal_[i] = internal;
    cell_[i] = is_cell_file(file);
    if (is_python_file(file)) kind_[i] = is_library_python(file) ? FrameKind::LibraryPython : FrameKind::UserPython;
    else if (file == "snapcapture") kind_[i] = FrameKind::Scope;
    else kind_[i] = internal ? FrameKind::Internal : FrameKind::Native;
    if (kind_[i] == FrameKind::Native) role_[i] = detail::classify_native(name);
    else role_[i] = kind_[i] == FrameKind::Internal ? NativeRole::Plumbing : NativeRole::None;
  }
}

const std::string& FrameTable::label(FrameId f) const {
  if (f == kNoFrame) return kNoStack;
  std::optional<std::string>& slot = label_[f];
  if (slot) return *slot;
  const Frame& fr = trace_->frames[f];
  std::string name(trace_->strings.get(fr.name));
  std::string file = detail::capped_for_display(std::string(trace_->strings.get(fr.file)));
  if (name.empty()) name = "??";
  if (op_or_node(f)) {
    std::string shown;
    detail::classify_native(name, &shown);  // "aten::addmm", "LogSoftmaxBackward0"
    name = std::move(shown);
    if (fr.line <= 0) file.clear();        // a file without a line says nothing
  } else if (!python(f) && !scope(f)) {
    name = detail::short_native_name(name);
  }
  std::string out = detail::capped_for_display(std::move(name));
  if (!file.empty() && file != "??") {
    // Keep the last two path components: enough to tell files apart.
    size_t cut = file.rfind('/');
    if (cut != std::string::npos && cut > 0) {
      size_t cut2 = file.rfind('/', cut - 1);
      if (cut2 != std::string::npos) file = file.substr(cut2 + 1);
    }
    out += " (" + file;
    // Appended in two steps: `":" + std::to_string(...)` draws a GCC 12
    // -Wrestrict false positive.
    if (fr.line >= 0 && !(fr.line == 0 && !is_python_file(file))) {
      out += ':';
      out += std::to_string(fr.line);
    }
    out += ")";
  }
  slot = std::move(out);
  return *slot;
}

std::string FrameTable::short_native(FrameId f) const {
  std::string raw(trace_->strings.get(trace_->frames[f].name));
  if (op_or_node(f)) {
    std::string shown;
    detail::classify_native(raw, &shown);
    return shown;
  }
  for (std::string_view q : {" const", " volatile", " &&", " &"})
    while (raw.size() > q.size() && raw.compare(raw.size() - q.size(), q.size(), q) == 0) raw.resize(raw.size() - q.size());
  std::string n = detail::short_native_name(raw);
  size_t cut = std::string::npos, seen = 0;
  int angle = 0;
  for (size_t i = n.size(); i-- > 1;) {
    if (n[i] == '>') ++angle;
    if (n[i] == '<') --angle;
    if (angle == 0 && n[i] == ':' && n[i - 1] == ':' && ++seen == 2) {
      cut = i + 1;
      break;
    }
  }
  return cut == std::string::npos ? n : n.substr(cut);
}

const std::string& FrameTable::short_label(FrameId f) const {
  if (f == kNoFrame) return kNoStack;
  std::optional<std::string>& slot = short_label_[f];
  if (slot) return *slot;
  const Frame& fr = trace_->frames[f];
  const std::string_view file = trace_->strings.get(fr.file);
  std::string name = python(f) || scope(f) ? std::string(trace_->strings.get(fr.name)) : short_native(f);
  if (name.empty()) name = "??";
  if (scope(f) || file.empty() || file == "??" || (op_or_node(f) && fr.line <= 0)) {
    slot = std::move(name);
    return *slot;
  }
  const size_t cut = file.find_last_of('/');
  std::string out = name + " (" + std::string(cut == std::string_view::npos ? file : file.substr(cut + 1));
  if (fr.line > 0 || (fr.line == 0 && python(f))) {
    out += ':';
    out += std::to_string(fr.line);
  }
  slot = out + ")";
  return *slot;
}

void FrameTable::index() const {
  // One pass in node order: a node's parent comes before it (StackTable
  // makes a node only under an existing one), so its facts are known.
  const StackTable& st = trace_->stacks;
  size_t from = node_.size();
  node_.resize(st.size());
  if (from == 0) from = 1;  // node 0: the empty stack
  for (size_t i = from; i < node_.size(); ++i) {
    const StackTable::Node& n = st.node(StackId(i));
    const NodeInfo p = n.parent < i ? node_[n.parent] : NodeInfo{};
    NodeInfo& x = node_[i];
    const StackId id = StackId(i);
    x.depth = p.depth + 1;
    x.user = kind_[n.frame] == FrameKind::UserPython ? id : p.user;
    x.model = kind_[n.frame] == FrameKind::UserPython && !cell_[n.frame] ? id : p.model;
    x.py = python(n.frame) ? id : p.py;
    x.any = !internal(n.frame) ? id : p.any;
    x.plain = !plumbing(n.frame) ? id : p.plain;
    x.op = role_[n.frame] == NativeRole::Op ? id : p.op;
    x.node = role_[n.frame] == NativeRole::Node ? id : p.node;
    x.outer = x.depth == kShownOuter ? id : x.depth > kShownOuter ? p.outer : 0;
  }
}

size_t FrameTable::depth(StackId stack) const { return stack == 0 ? 0 : info(stack).depth; }

// The node of the user frame: the innermost frame of the user's own code;
// else the innermost op (not a factory), else the innermost autograd node,
// when inside the innermost Python frame (or there is none); else the
// innermost Python frame; else the innermost frame that is not plumbing,
// else not internal(), else the innermost. The nodes found are all
// ancestors of `stack`, so the deeper is the inner.
StackId FrameTable::user_node(StackId stack) const {
  if (stack == 0) return 0;
  const NodeInfo& x = info(stack);
  if (x.user) return x.user;
  const uint32_t py_depth = x.py ? node_[x.py].depth : 0;
  if (x.op && node_[x.op].depth > py_depth) return x.op;
  if (x.node && node_[x.node].depth > py_depth) return x.node;
  return x.py ? x.py : x.plain ? x.plain : x.any ? x.any : stack;
}

FrameId FrameTable::user_frame(StackId stack) const {
  return stack == 0 ? kNoFrame : trace_->stacks.node(user_node(stack)).frame;
}

bool pytorch_python_file(std::string_view f) {
  for (std::string_view pkg : {"/site-packages/", "/dist-packages/"}) {
    const size_t p = f.rfind(pkg);
    if (p != std::string_view::npos) return f.substr(p + pkg.size()).rfind("torch/", 0) == 0;
  }
  if (f.rfind("torch/", 0) == 0) return true;
  for (std::string_view sub : {"/torch/nn/", "/torch/autograd/", "/torch/optim/", "/torch/utils/", "/torch/_"})
    if (f.find(sub) != std::string_view::npos) return true;
  return false;
}

FrameId FrameTable::library_model_frame(StackId stack) const {
  const FrameId user = user_frame(stack);
  const StackTable& st = trace_->stacks;
  for (StackId s = stack; s != 0; s = st.node(s).parent) {
    const FrameId f = st.node(s).frame;
    if (f == user) break;
    if (!python(f)) continue;
    if (pytorch_python_file(trace_->strings.get(trace_->frames[f].file))) continue;
    return f;
  }
  return kNoFrame;
}

FrameId FrameTable::cell_context(StackId stack) const {
  if (stack == 0) return kNoFrame;
  const StackId u = user_node(stack);
  const FrameId uf = trace_->stacks.node(u).frame;
  if (!cell_[uf]) return kNoFrame;
  return info(stack).model != 0 || library_model_frame(stack) != kNoFrame ? uf : kNoFrame;
}

FrameId FrameTable::site_frame(StackId stack) const {
  if (cell_context(stack) == kNoFrame) return user_frame(stack);
  if (info(stack).model != 0) return trace_->stacks.node(info(stack).model).frame;
  return library_model_frame(stack);
}

std::string FrameTable::cell_text(FrameId cell) const {
  const Frame& fr = trace_->frames[cell];
  std::string file = detail::capped_for_display(std::string(trace_->strings.get(fr.file)));
  // The last two path components, as label() writes them.
  const size_t cut = file.rfind('/');
  if (cut != std::string::npos && cut > 0) {
    const size_t cut2 = file.rfind('/', cut - 1);
    if (cut2 != std::string::npos) file = file.substr(cut2 + 1);
  }
  std::string out = (starts(file, "<") && !starts(file, "<ipython-input-") ? "" : "cell ") + file;
  if (fr.line >= 0) {
    out += ':';
    out += std::to_string(fr.line);
  }
  return out;
}

std::string FrameTable::cell_callee(StackId stack) const {
  const FrameId cell = cell_context(stack);
  if (cell == kNoFrame) return {};
  std::string out = cell_text(cell);
  const FrameId inner = site_callee(stack);
  if (inner != kNoFrame && inner != site_frame(stack)) out += ", in " + label(inner);
  return out;
}

FrameId FrameTable::innermost_python(StackId stack) const {
  if (stack == 0) return kNoFrame;
  const StackId n = info(stack).py;
  return n ? trace_->stacks.node(n).frame : kNoFrame;
}

FrameId FrameTable::python_callee(StackId stack) const {
  // Walking outward from the innermost frame, the first Python frame met
  // before the user frame: the innermost Python frame when it lies inside
  // the user frame (deeper than it; an op or node chosen as the user frame
  // lies inside every Python frame, and no Python frame is its callee).
  if (stack == 0) return kNoFrame;
  const NodeInfo& x = info(stack);
  const StackId u = user_node(stack);
  return x.py && x.py != u && node_[x.py].depth > node_[u].depth ? trace_->stacks.node(x.py).frame : kNoFrame;
}

FrameId FrameTable::site_callee(StackId stack) const {
  const FrameId pc = python_callee(stack);
  if (pc != kNoFrame || stack == 0) return pc;
  const NodeInfo& x = info(stack);
  const StackId u = user_node(stack);
  if (!python(trace_->stacks.node(u).frame)) return kNoFrame;
  const uint32_t d = node_[u].depth;
  if (x.op && node_[x.op].depth > d) return trace_->stacks.node(x.op).frame;
  if (x.node && node_[x.node].depth > d) return trace_->stacks.node(x.node).frame;
  return kNoFrame;
}

FrameTable::Shown FrameTable::shown(StackId stack) const {
  Shown out;
  if (stack == 0) return out;
  const StackTable& st = trace_->stacks;
  const NodeInfo& x = info(stack);
  if (x.depth <= kShownFrames) {
    out.inner.reserve(x.depth);
    for (StackId s = stack; s != 0; s = st.node(s).parent) out.inner.push_back(st.node(s).frame);
    return out;
  }
  out.inner.reserve(kShownInner);
  StackId s = stack;
  for (size_t i = 0; i < kShownInner; ++i, s = st.node(s).parent) out.inner.push_back(st.node(s).frame);
  out.elided = x.depth - kShownInner - kShownOuter;
  out.outer.reserve(kShownOuter);
  for (s = x.outer; s != 0; s = st.node(s).parent) out.outer.push_back(st.node(s).frame);
  return out;
}

FrameTable::SitePath FrameTable::site_path(StackId stack, size_t max_frames) const {
  SitePath p;
  if (stack == 0) {
    p.frames.push_back(kNoStack);
    return p;
  }
  const StackTable& st = trace_->stacks;
  // From the user frame outward: its Python callers; of an op or node, the
  // ops, nodes and Python frames that call it (once none is left, the frames
  // that are not plumbing); of another native user frame, the callers that
  // are not plumbing (not internal(), when it is plumbing itself). Each is
  // found in one step; callers that print like the previous one are skipped:
  // at most kShownFrames of them.
  // A notebook cell or REPL line as the user frame gives way to the model
  // frame outside it (site_frame()); the cell is named as the callee.
  const FrameId cell = cell_context(stack);
  // Led by a library model frame inside the cell's call: that frame, then
  // the cell's callers (the cell itself is named as the callee).
  const FrameId inner_model = cell != kNoFrame && info(stack).model == 0 ? library_model_frame(stack) : kNoFrame;
  StackId x = cell == kNoFrame ? user_node(stack) : inner_model != kNoFrame ? user_node(stack) : info(stack).model;
  const FrameId uf = st.node(x).frame;
  enum class Walk { Python, Meaningful, Plain, Any };
  const Walk walk = python(uf) ? Walk::Python : op_or_node(uf) ? Walk::Meaningful : !plumbing(uf) ? Walk::Plain : Walk::Any;
  auto next = [&](StackId n) -> StackId {
    const StackId up = st.node(n).parent;
    if (up == 0) return 0;
    const NodeInfo& i = info(up);
    switch (walk) {
      case Walk::Python: return i.py;
      case Walk::Plain: return i.plain;
      case Walk::Any: return i.any;
      case Walk::Meaningful: break;
    }
    StackId best = i.py;
    for (StackId c : {i.op, i.node})
      if (c && (best == 0 || node_[c].depth > node_[best].depth)) best = c;
    return best ? best : i.plain;  // none left: what is not plumbing ("at::_sum_to<…>")
  };
  if (inner_model != kNoFrame) {
    p.frames.push_back(label(inner_model));
    x = next(x);
  }
  for (size_t steps = 0; x != 0 && p.frames.size() < max_frames && steps <= kShownFrames; x = next(x), ++steps) {
    const std::string& text = label(st.node(x).frame);
    if (!p.frames.empty() && text == p.frames.back()) continue;  // overloads and inlined copies print alike
    p.frames.push_back(text);
  }
  if (cell != kNoFrame) {
    p.callee = cell_callee(stack);
    return p;
  }
  const FrameId callee = site_callee(stack);
  if (callee != kNoFrame) p.callee = label(callee);
  return p;
}

std::string FrameTable::site_text(StackId stack, size_t max_frames, std::string_view separator) const {
  const SitePath p = site_path(stack, max_frames);
  std::string out;
  for (size_t i = 0; i < p.frames.size(); ++i) {
    if (i) out += separator;
    out += p.frames[i];
  }
  if (!p.callee.empty()) out += "  [in " + p.callee + "]";
  return out;
}

}  // namespace snapdiff
