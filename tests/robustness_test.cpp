// The bad-input contract in process: every truncation of a real snapshot, bit
// flips and random bytes give an InputError (never a crash or a hang).
#include <catch2/catch.hpp>
#include <random>

#include "input/file_source.hpp"
#include "snapdiff/error.hpp"
#include "snapdiff/input/input.hpp"
#include "snapdiff/analysis/analysis.hpp"
#include "snapdiff/report/report.hpp"
#include "test_util.hpp"

using namespace snapdiff;

TEST_CASE("every truncation of a real snapshot is an input error", "[input][robust]") {
  std::string full = test::read_file(test::real_data("small_oom.pickle"));
  REQUIRE(full.size() > 1000);
  size_t errors = 0;
  for (size_t len = 0; len < full.size(); ++len) {
    try {
      load_trace_from_memory(std::string_view(full.data(), len), "t.pickle");
    } catch (const InputError& e) {
      ++errors;
      if (e.has_offset()) REQUIRE(e.offset() <= len);
    }
  }
  // No proper prefix of a pickle holds its STOP opcode, so all must fail.
  CHECK(errors == full.size());
  CHECK_NOTHROW(load_trace_from_memory(full, "t.pickle"));
}

TEST_CASE("truncated gzip input is an input error", "[input][robust]") {
  std::string raw = test::read_file(test::real_data("small_bf16.pickle"));
  auto z = detail::gzip_compress(raw);
  std::string gz(z.begin(), z.end());
  for (size_t len = 0; len < gz.size(); len += 97)
    CHECK_THROWS_AS(load_trace_from_memory(std::string_view(gz.data(), len), "t.gz"), InputError);
  CHECK_NOTHROW(load_trace_from_memory(gz, "t.gz"));
}

TEST_CASE("gzip output beyond the limit is refused", "[input][robust]") {
  std::string zeros(8 << 20, '\0');
  auto z = detail::gzip_compress(zeros);
  LoadOptions o;
  o.max_decoded_bytes = 1 << 20;
  try {
    load_trace_from_memory(std::string_view(reinterpret_cast<const char*>(z.data()), z.size()), "bomb.gz", o);
    FAIL("accepted");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("--max-input-bytes") != std::string::npos);
  }
}

TEST_CASE("bit flips in a real snapshot never crash", "[input][robust]") {
  std::string full = test::read_file(test::real_data("small_oom.pickle"));
  std::mt19937_64 rng(12345);
  for (int i = 0; i < 1500; ++i) {
    std::string m = full;
    int flips = 1 + int(rng() % 4);
    for (int k = 0; k < flips; ++k) m[rng() % m.size()] ^= char(1 << (rng() % 8));
    REQUIRE(test::survives(m));
  }
}

TEST_CASE("random bytes are refused", "[input][robust]") {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 500; ++i) {
    std::string m(1 + rng() % 512, '\0');
    for (auto& c : m) c = char(rng());
    if (i % 2) m[0] = char(0x80);  // make it look like a pickle
    REQUIRE(test::survives(m));
  }
}
