// check_json_depth(): the nesting bound every JSON tree reader applies first.
#include <catch2/catch.hpp>
#include <string>

#include "snapdiff/error.hpp"
#include "util/json_depth.hpp"

using snapdiff::InputError;
using snapdiff::detail::check_json_depth;

TEST_CASE("JSON nesting beyond the bound is refused at the byte that crosses it", "[util]") {
  const std::string ok = std::string(256, '[') + std::string(256, ']');
  CHECK_NOTHROW(check_json_depth(ok));
  const std::string deep = std::string(200000, '[');
  try {
    check_json_depth(deep);
    FAIL("not refused");
  } catch (const InputError& e) {
    CHECK(e.has_offset());
    CHECK(e.offset() == 256);  // the 257th bracket
  }
  // Mixed objects and arrays count alike.
  std::string mixed;
  for (int i = 0; i < 300; ++i) mixed += "{\"a\":[";
  CHECK_THROWS_AS(check_json_depth(mixed), InputError);
}

TEST_CASE("brackets inside JSON strings, escaped quotes included, do not count", "[util]") {
  const std::string s = "{\"k\": \"" + std::string(1000, '[') + "\\\"" + std::string(1000, '{') + "\"}";
  CHECK_NOTHROW(check_json_depth(s));
  // Closing brackets never take the depth below zero.
  CHECK_NOTHROW(check_json_depth(std::string(1000, ']') + std::string(10, '[')));
}
