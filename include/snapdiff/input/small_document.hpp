// snapdiff/input/small_document.hpp — a small document (a map step's
// summary) given as bytes: gzip, told by the bytes, unwrapped within a bound.
// read_small_document() (input.hpp) reads one from a file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace snapdiff {

// The text of `bytes`, gzip unwrapped: at most max_bytes decoded (the
// refusal names `limit_option` as the way to raise it). InputError without
// a file.
std::string decode_small_document(std::string_view bytes, uint64_t max_bytes,
                                  const char* limit_option = "--max-input-bytes");
// Whether bytes start as gzip does.
bool is_gzip_bytes(std::string_view bytes);

}  // namespace snapdiff
