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

FrameId FrameTable::user_frame(StackId stack) const {
  FrameId first_py = kNoFrame, first_any = kNoFrame, first_raw = kNoFrame;
  for (StackId s = stack; s != 0; s = trace_->stacks.node(s).parent) {
    const FrameId f = trace_->stacks.node(s).frame;
    if (first_raw == kNoFrame) first_raw = f;
    if (first_any == kNoFrame && !internal(f)) first_any = f;
    if (python(f)) {
      if (first_py == kNoFrame) first_py = f;
      if (kind_[f] == FrameKind::UserPython) return f;
    }
  }
  if (first_py != kNoFrame) return first_py;
  return first_any != kNoFrame ? first_any : first_raw;
}

FrameId FrameTable::innermost_python(StackId stack) const {
  for (StackId s = stack; s != 0; s = trace_->stacks.node(s).parent)
    if (python(trace_->stacks.node(s).frame)) return trace_->stacks.node(s).frame;
  return kNoFrame;
}

FrameId FrameTable::python_callee(StackId stack) const {
  const FrameId uf = user_frame(stack);
  for (StackId s = stack; s != 0; s = trace_->stacks.node(s).parent) {
    const FrameId f = trace_->stacks.node(s).frame;
    if (f == uf) break;
    if (python(f)) return f;
  }
  return kNoFrame;
}

FrameTable::SitePath FrameTable::site_path(StackId stack, size_t max_frames) const {
  SitePath p;
  if (stack == 0) {
    p.frames.push_back(kNoStack);
    return p;
  }
  const FrameId uf = user_frame(stack);
  const bool py = uf != kNoFrame && python(uf);
  bool started = false;
  for (StackId s = stack; s != 0 && p.frames.size() < max_frames; s = trace_->stacks.node(s).parent) {
    const FrameId f = trace_->stacks.node(s).frame;
    if (!started && f != uf) continue;
    if (started && (py ? !python(f) : internal(f))) continue;
    started = true;
    const std::string& text = label(f);
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
