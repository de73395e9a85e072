// read_small_document (include/snapdiff/input/input.hpp).
#include "input/file_source.hpp"
#include "snapdiff/error.hpp"
#include "snapdiff/input/input.hpp"
#include "snapdiff/input/small_document.hpp"
#include "util/read_file.hpp"

namespace snapdiff {

std::string read_small_document(const std::string& path, const std::string& what, uint64_t max_bytes) {
  std::string text = detail::read_small_file(path, what, max_bytes);
  const auto* p = reinterpret_cast<const uint8_t*>(text.data());
  if (!detail::is_gzip(p, text.size())) return text;
  try {
    std::vector<uint8_t> out = detail::gunzip(p, text.size(), max_bytes);
    return std::string(out.begin(), out.end());
  } catch (InputError& e) {
    if (e.file().empty()) e.set_file(path);
    throw;
  }
}

std::string decode_small_document(std::string_view bytes, uint64_t max_bytes, const char* limit_option) {
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  if (!detail::is_gzip(p, bytes.size())) {
    if (bytes.size() > max_bytes)
      throw InputError("the document holds more than " + std::to_string(max_bytes) +
                       " bytes (the limit; raise it with " + limit_option + ")");
    return std::string(bytes);
  }
  std::vector<uint8_t> out = detail::gunzip(p, bytes.size(), max_bytes, limit_option);
  return std::string(out.begin(), out.end());
}

bool is_gzip_bytes(std::string_view bytes) {
  return detail::is_gzip(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

}  // namespace snapdiff
