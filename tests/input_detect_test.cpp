// Format detection: detect() on the first bytes of each format, and Source,
// which reads those bytes once (inflated when gzip) from memory or a file.
#include <catch2/catch.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "input/detect.hpp"
#include "input/file_source.hpp"
#include "input/source.hpp"
#include "test_util.hpp"

using snapdiff::detail::detect;
using snapdiff::detail::InputFormat;
using snapdiff::detail::Source;
using snapdiff::test::fixture;
using snapdiff::test::real_data;

namespace {

struct Head {
  const char* what;
  std::string bytes;
  InputFormat format;
};

std::vector<Head> heads() {
  return {
      {"pickle, protocol 4", std::string("\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00}\x94(", 14),
       InputFormat::TorchPickle},
      {"pickle, protocol 0 dict", "(dp0\nVsegments\n", InputFormat::TorchPickle},
      {"pickle, protocol 1 empty dict", std::string("}q\x00(", 4), InputFormat::TorchPickle},
      {"pickle, protocol 1 empty list", std::string("]q\x00(", 4), InputFormat::TorchPickle},
      {".snap", "{\"format\": \"snapdiff.snap\", \"version\": 1, \"devices\": [", InputFormat::Snap},
      {".snap after a byte order mark", "\xEF\xBB\xBF\n {\"format\": \"snapdiff.snap\"", InputFormat::Snap},
      {"JSON of no known shape", "{\"a\": 1, \"b\": [2, 3]}", InputFormat::Snap},
      {"Chrome trace", "{\"schemaVersion\": 1, \"deviceProperties\": [], \"traceEvents\": [", InputFormat::ChromeTrace},
      {"Chrome trace, array format", "[{\"ph\": \"X\", \"cat\": \"cpu_op\"", InputFormat::ChromeTrace},
      {"memory timeline", "[[1700000000000000, 1700000000000100], [[0, 1, 2, 3, 4, 5, 6, 7, 8], [0,",
       InputFormat::MemoryTimeline},
      {"memory timeline, raw", "[[-1, 1, 2097152, 7], [12, 2, 512, 3], [", InputFormat::MemoryTimelineRaw},
      {"empty", "", InputFormat::Empty},
      {"text", "hello", InputFormat::Unknown},
      {"whitespace only", " \n\t", InputFormat::Unknown},
  };
}

std::string gzip(const std::string& s) {
  std::vector<uint8_t> z = snapdiff::detail::gzip_compress(s);
  return std::string(z.begin(), z.end());
}

}  // namespace

TEST_CASE("detect() names each format from its first bytes", "[input][detect]") {
  for (const Head& h : heads()) {
    INFO(h.what);
    CHECK(detect(h.bytes) == h.format);
  }
}

TEST_CASE("a source detects from the first decoded bytes, plain and gzip'd", "[input][detect]") {
  for (const Head& h : heads()) {
    INFO(h.what);
    Source plain = Source::of_bytes(h.bytes);
    CHECK(plain.format() == h.format);
    CHECK(!plain.gzip());
    const std::string z = gzip(h.bytes);
    Source zipped = Source::of_bytes(z);
    CHECK(zipped.format() == h.format);
    CHECK(zipped.gzip());
  }
}

TEST_CASE("a source shows detect() only the first bytes", "[input][detect]") {
  // A Chrome trace's key after kDetectBytes of another member: detect()
  // finds it in the whole text, a source does not give it that far.
  const std::string late =
      "{\"padding\": \"" + std::string(snapdiff::detail::kDetectBytes, 'x') + "\", \"traceEvents\": []}";
  CHECK(detect(late) == InputFormat::ChromeTrace);
  CHECK(Source::of_bytes(late).format() == InputFormat::Snap);
  const std::string z = gzip(late);
  CHECK(Source::of_bytes(z).format() == InputFormat::Snap);
}

TEST_CASE("files are detected as stored and as gzip'd", "[input][detect]") {
  struct File {
    std::string path;
    InputFormat format;
    bool gzip;
  };
  const File files[] = {
      {real_data("small_bf16.pickle"), InputFormat::TorchPickle, false},
      {fixture("tiny_p4.pickle.gz"), InputFormat::TorchPickle, true},
      {std::string(SNAPDIFF_SOURCE_DIR) + "/sample_snapshots/bf16.snap", InputFormat::Snap, true},
      {real_data("small_profile.trace.json.gz"), InputFormat::ChromeTrace, true},
      {real_data("small_profile.memtl.json"), InputFormat::MemoryTimeline, false},
      {real_data("small_profile.memtl.raw.json.gz"), InputFormat::MemoryTimelineRaw, true},
  };
  for (const File& f : files) {
    INFO(f.path);
    Source s = Source::open(f.path);
    CHECK(s.regular_file());
    CHECK(s.format() == f.format);
    CHECK(s.gzip() == f.gzip);
  }
}
