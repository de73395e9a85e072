// Internal: the pieces the two .snap encodings share (snap_format.cpp, the
// JSON document of versions 1 and 2; snap_binary.cpp, version 3).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "snapdiff/input/input.hpp"

namespace snapdiff::detail {

// The first bytes of a version 3 file: 0x89 "SNAPDF" '\n' (docs/snap_format.md).
constexpr char kSnapBinaryMagic[8] = {'\x89', 'S', 'N', 'A', 'P', 'D', 'F', '\n'};
inline bool is_snap_binary(std::string_view head) {
  return head.size() >= 8 && head.substr(0, 8) == std::string_view(kSnapBinaryMagic, 8);
}

// producer, source, metadata, allocator_settings, annotations (names as
// string indices) into `j`.
void write_snap_common(const Trace& t, nlohmann::json& j);
// Reads them back from `j` (source, metadata, allocator_settings,
// annotations; errors with their JSON path); `strings` maps the document's
// string indices to `t`'s.
void read_snap_common(const nlohmann::json& j, Trace& t, std::vector<StrId> strings);

// The JSON document (versions 1 and 2).
void read_snap_json(std::string_view text, Trace& out);

// Version 3. The reader refuses, before it builds anything, a file whose
// decoded sections would pass `max_decoded_bytes` or whose model would pass
// `max_memory_bytes` (0: unbounded); errors carry the byte offset in the file.
void read_snap_binary(std::string_view bytes, Trace& out, uint64_t max_decoded_bytes, uint64_t max_memory_bytes);

}  // namespace snapdiff::detail
