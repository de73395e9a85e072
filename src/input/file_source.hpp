// Internal: gzip.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/hugepages.hpp"

namespace snapdiff::detail {

bool is_gzip(const uint8_t* p, size_t n);
// Inflates a (possibly multi-member) gzip stream; refuses output beyond
// max_out, and bytes after the last member that do not start another one
// (gzip(1) warns about such "trailing garbage" and ignores it; snapdiff
// refuses it: a file that is not one gzip file is damaged). Errors carry the
// compressed byte offset.
std::vector<uint8_t> gunzip(const uint8_t* p, size_t n, uint64_t max_out,
                            const char* limit_option = "--max-input-bytes");
// "N bytes after the end of the gzip stream (not another gzip member): ...".
std::string gzip_trailing_message(uint64_t bytes);
std::vector<uint8_t> gzip_compress(std::string_view data, int level = 6);

}  // namespace snapdiff::detail
