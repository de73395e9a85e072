// Internal to the CLI: the memory the view and the rendering build, counted
// against --max-memory (docs/reliability.md, "Bounds"). The readers count
// what they build and the model's analysis is predicted from its counts
// (analysis_memory_bytes); what a report then builds — site rows, chart
// series, the JSON tree, the text — depends on -n and on the input's
// variety, so it is measured as it happens instead: while a RenderBound is
// alive, the executable's operator new counts the heap bytes allocated less
// those freed, and the allocation that would take them past the room left
// fails. The command then stops with one error line (exit 3), the way a
// reader refuses an input beyond the bound.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "snapdiff/input/input.hpp"

namespace snapdiff::cli {

// Runs fn() with the heap growth it causes bounded by `room` bytes
// (0: unbounded, fn runs as is). Beyond it: an InputError naming `file`,
// "rendering the report needs more than the limit of X of memory (raise it
// with --max-memory, or show fewer rows with -n)". Not reentrant: one bound
// at a time.
void with_render_bound(uint64_t room, uint64_t limit, const std::string& file, const std::function<void()>& fn);

// The room --max-memory leaves for rendering: the limit less what is
// resident now (or `held`, the model and its analysis as predicted, when
// that is more or the resident size cannot be read); 0 when unbounded.
uint64_t render_room(const LoadOptions& lo, uint64_t held);

}  // namespace snapdiff::cli
