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
// max_out. Errors carry the compressed byte offset.
std::vector<uint8_t> gunzip(const uint8_t* p, size_t n, uint64_t max_out,
                            const char* limit_option = "--max-input-bytes");
std::vector<uint8_t> gzip_compress(std::string_view data, int level = 6);

}  // namespace snapdiff::detail
