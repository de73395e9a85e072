#include "input/file_source.hpp"

#include <zlib.h>

#include "snapdiff/error.hpp"

namespace snapdiff::detail {

bool is_gzip(const uint8_t* p, size_t n) { return n >= 2 && p[0] == 0x1f && p[1] == 0x8b; }

std::string gzip_trailing_message(uint64_t bytes) {
  return std::to_string(bytes) + (bytes == 1 ? " byte" : " bytes") +
         " after the end of the gzip stream (not another gzip member): the file is damaged or not one gzip file";
}

std::vector<uint8_t> gunzip(const uint8_t* p, size_t n, uint64_t max_out, const char* limit_option) {
  std::vector<uint8_t> out;
  z_stream zs{};
  if (inflateInit2(&zs, 15 + 32) != Z_OK) throw InputError(uint64_t(0), "zlib initialisation failed");
  size_t first = n < (size_t(1) << 20) ? (size_t(1) << 20) : n * 4;
  if (first > max_out) first = size_t(max_out);
  if (first == 0) first = 1;
  out.resize(first);
  size_t in_off = 0;
  size_t produced = 0;
  for (;;) {
    if (produced == out.size()) {
      if (out.size() >= max_out) {
        inflateEnd(&zs);
        throw InputError(in_off, "gzip data decompresses to more than " + std::to_string(max_out) +
                                     " bytes (the limit; raise it with " + limit_option + ")");
      }
      size_t grow = out.size() * 2;
      if (grow > max_out) grow = size_t(max_out);
      out.resize(grow);
    }
    zs.next_in = const_cast<Bytef*>(p + in_off);
    size_t avail_in = n - in_off;
    zs.avail_in = uInt(avail_in > (1u << 30) ? (1u << 30) : avail_in);
    zs.next_out = out.data() + produced;
    size_t avail_out = out.size() - produced;
    zs.avail_out = uInt(avail_out > (1u << 30) ? (1u << 30) : avail_out);
    uInt in_before = zs.avail_in, out_before = zs.avail_out;
    int rc = inflate(&zs, Z_NO_FLUSH);
    in_off += in_before - zs.avail_in;
    produced += out_before - zs.avail_out;
    if (rc == Z_STREAM_END) {
      // Concatenated members (legal gzip): continue when another follows;
      // anything else after the stream is refused.
      if (in_off < n && is_gzip(p + in_off, n - in_off)) {
        inflateReset(&zs);
        continue;
      }
      if (in_off < n) {
        inflateEnd(&zs);
        throw InputError(in_off, gzip_trailing_message(n - in_off));
      }
      break;
    }
    if (rc == Z_BUF_ERROR && in_before == 0) {
      inflateEnd(&zs);
      throw InputError(in_off, "gzip data is truncated");
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      inflateEnd(&zs);
      throw InputError(in_off, std::string("corrupt gzip data: ") + (zs.msg ? zs.msg : "inflate failed"));
    }
    if (in_off == n && zs.avail_out != 0) {
      inflateEnd(&zs);
      throw InputError(in_off, "gzip data is truncated");
    }
  }
  inflateEnd(&zs);
  out.resize(produced);
  out.shrink_to_fit();
  return out;
}

std::vector<uint8_t> gzip_compress(std::string_view data, int level) {
  z_stream zs{};
  if (deflateInit2(&zs, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("zlib deflateInit2 failed");
  std::vector<uint8_t> out(deflateBound(&zs, uLong(data.size())) + 64);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = uInt(data.size());
  zs.next_out = out.data();
  zs.avail_out = uInt(out.size());
  int rc = deflate(&zs, Z_FINISH);
  if (rc != Z_STREAM_END) {
    deflateEnd(&zs);
    throw std::runtime_error("zlib deflate failed");
  }
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

}  // namespace snapdiff::detail
