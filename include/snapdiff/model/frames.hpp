// snapdiff/model/frames.hpp — every frame of a trace classified once, in one place
// (model layer).
//
// Reports, diffs and charts all need to know of a frame whether it is the
// user's Python, library Python, a native frame worth showing, interpreter or
// allocator plumbing, or a scope label, and how to write it. A FrameTable
// decides that once per trace, right after loading; everything above the
// model asks it instead of looking at file names itself.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "snapdiff/model/model.hpp"

namespace snapdiff {

constexpr FrameId kNoFrame = UINT32_MAX;

// Stacks as deep as a hostile input likes (100,000 frames) cost no more than
// shallow ones: what the FrameTable answers about a stack (its user frame, its
// innermost Python frame, its depth) it knows for every stack node from one
// pass over the stack tree, and where a stack is written out frame by frame
// (reports' frame lists, diff keys) a stack deeper than kShownFrames is shown
// as its kShownInner innermost frames, a marker for the frames left out, and
// its kShownOuter outermost frames (docs/reliability.md, "Time").
constexpr size_t kShownInner = 500, kShownOuter = 500;
constexpr size_t kShownFrames = kShownInner + kShownOuter;

enum class FrameKind : uint8_t {
  UserPython,     // a .py file outside the libraries: the user's own code
  LibraryPython,  // torch/, site-packages, the standard library, <frozen ...>
  Native,         // a C/C++ frame worth showing
  Internal,       // plumbing: unwinder, interpreter, dispatcher, the caching allocator
  Scope,          // a scope label snapcapture records (file "snapcapture": "layer 3")
};
const char* frame_kind_name(FrameKind k);

// What a C++ frame is to a site (decided once per frame, from its name
// normalised as short_native_name does). Python frames and scope labels are
// None.
enum class NativeRole : uint8_t {
  None,      // Python or a scope label
  Op,        // an aten op's entry ("at::_ops::addmm::call"): "aten::addmm"
  Factory,   // an op that only makes or views a tensor (empty, empty_strided, view, ...): plumbing
  Node,      // an autograd node's apply ("...::LogSoftmaxBackward0::apply"): "LogSoftmaxBackward0"
  Plumbing,  // allocator, factory, dispatcher, binding and interpreter internals (internal() ones too)
  Other,     // any other C++ frame (a kernel, a helper): shown when nothing better exists
};
const char* native_role_name(NativeRole r);
namespace detail {
// The role of a C++ frame by its name as recorded; for an Op or Node, *shown
// (when given) is set to what a user recognises: "aten::addmm",
// "LogSoftmaxBackward0", "AccumulateGrad".
NativeRole classify_native(std::string_view raw_name, std::string* shown = nullptr);
}  // namespace detail

// PyTorch's own Python files: torch/ inside an installation's packages
// (".../site-packages/torch/nn/modules/linear.py"), or a path relative to
// sys.path ("torch/nn/modules/linear.py", profiler traces); a checkout's
// torch/ package (".../pytorch/torch/nn/...") by its subpackages. Not any
// "/torch/" in a path: a virtual environment may live in /opt/torch/.
bool pytorch_python_file(std::string_view f);

class FrameTable {
 public:
  FrameTable() = default;
  explicit FrameTable(const Trace& t);

  FrameKind kind(FrameId f) const { return kind_[f]; }
  bool python(FrameId f) const { return kind_[f] == FrameKind::UserPython || kind_[f] == FrameKind::LibraryPython; }
  bool scope(FrameId f) const { return kind_[f] == FrameKind::Scope; }
  // Unwinder, interpreter, dispatcher and allocator frames by name or file:
  // noise in a site (kind() is Internal for the native ones).
  bool internal(FrameId f) const { return internal_[f] != 0; }
  // A C++ frame's role in a site; plumbing() is Plumbing or Factory (every
  // internal() frame among them): never a site when anything better exists.
  NativeRole role(FrameId f) const { return role_[f]; }
  bool plumbing(FrameId f) const { return role_[f] == NativeRole::Plumbing || role_[f] == NativeRole::Factory; }
  // An aten op that is not a factory, or an autograd node.
  bool op_or_node(FrameId f) const { return role_[f] == NativeRole::Op || role_[f] == NativeRole::Node; }
  size_t size() const { return kind_.size(); }
  // A notebook cell or a REPL line: a file in a directory "ipykernel_NNN" (".../ipykernel_114/3105878423.py"),
  // "<ipython-input-3-a1b2c3>", "<stdin>", "<string>" or "<console>".
  bool cell(FrameId f) const { return cell_[f] != 0; }

  // "name (dir/file.py:88)": the name verbatim for Python and scopes, native
  // names shortened ("at::native::f<…>"), the last two path components, the
  // line when there is one; both cut for display. An aten op or autograd node
  // is its short name ("aten::addmm", "LogSoftmaxBackward0"), with its file
  // only when it has a real file and line. kNoFrame: "<no stack recorded>".
  const std::string& label(FrameId f) const;
  // "name (file.py:88)": the charts' shorter form (the file's base name,
  // native names cut to their last two scopes).
  const std::string& short_label(FrameId f) const;
  // A native frame's name shortened and cut to its last two scopes
  // ("native::add_kernel"), an op's or node's short name ("aten::addmm");
  // the name as recorded for other frames.
  std::string short_native(FrameId f) const;

  // The frame a site is named by: the innermost frame of the user's own code;
  // without one, the innermost aten op that is not a factory, else the
  // innermost autograd node, when it lies inside the innermost Python frame
  // (a backward on the autograd engine's thread: "aten::mm", then
  // "AddmmBackward0"); else the innermost Python frame; else the innermost
  // frame that is not plumbing; else the innermost that is not internal();
  // else the innermost. kNoFrame for an empty stack.
  FrameId user_frame(StackId stack) const;
  // The frame a site's label leads with: the user frame, except when that is
  // a notebook cell or a REPL line (cell()) and an outer frame of the user's
  // own code is not: then the innermost such one (the model's "forward
  // (mymodel.py:44)"); without one, the library model frame inside the cell's
  // call (library_model_frame(): a transformers model's "forward
  // (gpt2/modeling_gpt2.py:697)"). cell_context() is then the cell. kNoFrame
  // for an empty stack.
  FrameId site_frame(StackId stack) const;
  // The innermost Python frame inside the user frame's call that is not
  // PyTorch's own (pytorch_python_file()): the model's line that made the
  // tensor, under nn.Linear's forward; kNoFrame when none.
  FrameId library_model_frame(StackId stack) const;
  // The cell a site_frame() other than the user frame was called in
  // (kNoFrame: none); cell_text() writes it "cell ipykernel_114/3105878423.py:21".
  FrameId cell_context(StackId stack) const;
  std::string cell_text(FrameId cell) const;
  // What a site led by another frame than its user frame shows as its
  // callee: the cell, then the site callee inside it, if any ("cell
  // ipykernel_114/3105878423.py:21, in forward (modules/linear.py:125)");
  // "" when the site frame is the user frame.
  std::string cell_callee(StackId stack) const;
  // The innermost Python frame inside the user's call (e.g. the optimizer
  // function a training-loop line calls); kNoFrame when none.
  FrameId python_callee(StackId stack) const;
  // What a site shows as "[in ...]": the Python callee; without one, when the
  // user frame is Python, the innermost aten op (not a factory) inside its
  // call, else the innermost autograd node inside it ("aten::addmm");
  // kNoFrame when none.
  FrameId site_callee(StackId stack) const;
  // The innermost Python frame of a stack; kNoFrame when none.
  FrameId innermost_python(StackId stack) const;

  // A site in one line: the site frame (site_frame()), then its callers ("f (a.py:3) <-
  // g (b.py:9)"), at most `max_frames`; callers of a Python frame are Python
  // frames, of an op or node the ops, nodes and Python frames ("aten::mm <-
  // AddmmBackward0", "aten::addmm <- linear (nn/functional.py:125)"; when
  // none is left, the frames that are not plumbing), of
  // another native one the frames that are not plumbing; then the site
  // callee, if any, as "  [in that one]"; where the site frame is not the
  // user frame, the callee is cell_callee() ("[in cell
  // ipykernel_114/3105878423.py:21, in forward (modules/linear.py:125)]").
  std::string site_text(StackId stack, size_t max_frames, std::string_view separator = " <- ") const;
  struct SitePath {
    std::vector<std::string> frames;  // labels: the user frame, then its callers
    std::string callee;               // the site callee's label ("" = none)
  };
  SitePath site_path(StackId stack, size_t max_frames) const;

  // Frames of a stack from one pass over the stack tree (parents come before
  // their children): O(1) each.
  size_t depth(StackId stack) const;
  // The stack's frames as shown, innermost first: all of them up to
  // kShownFrames; deeper, the kShownInner innermost, then (elided > 0) the
  // kShownOuter outermost. O(kShownFrames) whatever the depth.
  struct Shown {
    std::vector<FrameId> inner;  // innermost first
    size_t elided = 0;           // frames left out between inner and outer
    std::vector<FrameId> outer;  // innermost first (the outermost frame last)
  };
  Shown shown(StackId stack) const;

  const Trace& trace() const { return *trace_; }

 private:
  const Trace* trace_ = nullptr;
  std::vector<FrameKind> kind_;
  std::vector<uint8_t> internal_;
  std::vector<NativeRole> role_;
  std::vector<uint8_t> cell_;
  // Labels are made when first asked for: a report names a few hundred of a
  // run's frames, a million-event run has hundreds of thousands.
  mutable std::vector<std::optional<std::string>> label_, short_label_;
  // Per stack node, made by index() for the nodes the trace has (and again
  // when it has more): depth, and the innermost node at or above it of the
  // user's Python, of any Python, not internal(), not plumbing(), an aten op
  // that is not a factory, an autograd node (0 = none); the ancestor at
  // depth kShownOuter (0 = not that deep).
  struct NodeInfo {
    uint32_t depth = 0;
    StackId user = 0, py = 0, any = 0, outer = 0;
    StackId model = 0;  // the innermost frame of the user's code that is not a cell()
    StackId plain = 0, op = 0, node = 0;
  };
  mutable std::vector<NodeInfo> node_;
  const NodeInfo& info(StackId s) const {
    if (s >= node_.size()) index();
    return node_[s];
  }
  void index() const;
  StackId user_node(StackId stack) const;
};

}  // namespace snapdiff
