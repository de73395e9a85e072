// Internal: reads a small text file (rules, budgets) whole; an InputError
// naming the file when it cannot be opened or read.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

#include "snapdiff/error.hpp"

namespace snapdiff::detail {

inline std::string read_small_file(const std::string& path, const std::string& what) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  if (f) s << f.rdbuf();
  if (!f || f.bad()) {
    InputError e("cannot " + std::string(f ? "read" : "open") + " the " + what);
    e.set_file(path);
    throw e;
  }
  return s.str();
}

}  // namespace snapdiff::detail
