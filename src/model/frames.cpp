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

}  // namespace

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

FrameTable::FrameTable(const Trace& t) : trace_(&t) {
  const size_t n = t.frames.size();
  kind_.resize(n);
  internal_.resize(n);
  label_.resize(n);
  short_label_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const std::string_view name = t.strings.get(t.frames[i].name);
    const std::string_view file = t.strings.get(t.frames[i].file);
    const bool internal = is_internal(name, file);
    internal_[i] = internal;
    if (is_python_file(file)) kind_[i] = is_library_python(file) ? FrameKind::LibraryPython : FrameKind::UserPython;
    else if (file == "snapcapture") kind_[i] = FrameKind::Scope;
    else kind_[i] = internal ? FrameKind::Internal : FrameKind::Native;
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
  if (!python(f) && !scope(f)) name = detail::short_native_name(name);
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
  if (scope(f) || file.empty() || file == "??") {
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
    x.py = python(n.frame) ? id : p.py;
    x.any = !internal(n.frame) ? id : p.any;
    x.outer = x.depth == kShownOuter ? id : x.depth > kShownOuter ? p.outer : 0;
  }
}

size_t FrameTable::depth(StackId stack) const { return stack == 0 ? 0 : info(stack).depth; }

// The node of the user frame: the innermost frame of the user's own code,
// else the innermost Python frame, else the innermost frame that is not
// plumbing, else the innermost.
StackId FrameTable::user_node(StackId stack) const {
  if (stack == 0) return 0;
  const NodeInfo& x = info(stack);
  return x.user ? x.user : x.py ? x.py : x.any ? x.any : stack;
}

FrameId FrameTable::user_frame(StackId stack) const {
  return stack == 0 ? kNoFrame : trace_->stacks.node(user_node(stack)).frame;
}

FrameId FrameTable::innermost_python(StackId stack) const {
  if (stack == 0) return kNoFrame;
  const StackId n = info(stack).py;
  return n ? trace_->stacks.node(n).frame : kNoFrame;
}

FrameId FrameTable::python_callee(StackId stack) const {
  // Walking outward from the innermost frame, the first Python frame met
  // before the user frame: the innermost Python frame unless that is the
  // user frame itself (a user frame that is not Python means no Python frame).
  const FrameId ip = innermost_python(stack);
  return ip != user_frame(stack) ? ip : kNoFrame;
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
  // From the user frame outward: its Python callers (of a native user frame,
  // the callers that are not plumbing), each found in one step. Callers that
  // print like the previous one are skipped: at most kShownFrames of them.
  StackId x = user_node(stack);
  const bool py = python(st.node(x).frame);
  auto next = [&](StackId n) -> StackId {
    const StackId up = st.node(n).parent;
    return up == 0 ? 0 : py ? info(up).py : info(up).any;
  };
  for (size_t steps = 0; x != 0 && p.frames.size() < max_frames && steps <= kShownFrames; x = next(x), ++steps) {
    const std::string& text = label(st.node(x).frame);
    if (!p.frames.empty() && text == p.frames.back()) continue;  // overloads and inlined copies print alike
    p.frames.push_back(text);
  }
  const FrameId callee = python_callee(stack);
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
