// snapdiff/model/frame_names.hpp — display helpers for frame names
// (model layer; numbers in words are the report layer's: src/report/format.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace snapdiff::detail {

// "void ns::f<T, U>(int, long) const [clone .isra.0]" -> "ns::f<…>":
// template arguments, parameter lists, qualifiers and return types removed.
std::string short_native_name(std::string name);

// Numbers that stand alone ("layer 17", "layers.0.fc1") become '*'; digits
// inside a word ("fc1", "fp8") are part of the name. Sites and scopes that
// differ only there are one ("layer *") in diffs and charts.
std::string numbers_as_stars(std::string_view s);

// A name or file for display: beyond max_bytes (a hostile input's
// megabytes) cut at a UTF-8 boundary, with the number of bytes left out.
std::string capped_for_display(std::string s, size_t max_bytes = 400);

}  // namespace snapdiff::detail
