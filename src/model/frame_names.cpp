#include "snapdiff/model/frame_names.hpp"
#include "util/quote_value.hpp"

namespace snapdiff::detail {

// "void ns::f<T, U>(int, long) const" -> "ns::f<…>": template arguments and
// parameter lists make native frames unreadable in a one-line site.
std::string short_native_name(std::string name) {
  // A name wholly in angle brackets is a label, not a template
  // ("<built-in method ...>", "<allocated before the profiler started>").
  if (name.size() >= 2 && name.front() == '<' && name.back() == '>') return name;
  if (size_t c = name.find(" [clone "); c != std::string::npos) name.erase(c);
  std::string out;
  int angle = 0, paren = 0;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    if (c == '(' && angle == 0) {
      if (paren++ == 0 && i + 1 < name.size() && name.compare(i, 21, "(anonymous namespace)") == 0) {
        out += "(anon)";
        i += 20;
        --paren;
        continue;
      }
      continue;
    }
    if (c == ')' && angle == 0 && paren > 0) {
      --paren;
      continue;
    }
    if (paren > 0) continue;
    if (c == '<') {
      if (angle++ == 0) out += "<…>";
      continue;
    }
    if (c == '>' && angle > 0) {
      --angle;
      continue;
    }
    if (angle > 0) continue;
    out += c;
  }
  // Drop a method's qualifiers ("f(...) const" would otherwise read "const").
  for (bool cut = true; cut;) {
    cut = false;
    for (std::string_view q : {" const", " volatile", " &&", " &", " noexcept"})
      if (out.size() > q.size() && out.compare(out.size() - q.size(), q.size(), q.data(), q.size()) == 0) {
        out.resize(out.size() - q.size());
        cut = true;
      }
  }
  // Drop a leading return type ("void ", "at::Tensor ").
  size_t sp = out.rfind(' ');
  if (sp != std::string::npos && sp + 1 < out.size()) out = out.substr(sp + 1);
  return out.empty() ? name : out;
}


std::string numbers_as_stars(std::string_view s) {
  auto wordy = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] >= '0' && s[i] <= '9' && (i == 0 || !wordy(s[i - 1]))) {
      size_t j = i;
      while (j + 1 < s.size() && s[j + 1] >= '0' && s[j + 1] <= '9') ++j;
      if (j + 1 == s.size() || !wordy(s[j + 1])) {
        out += '*';
        i = j;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

std::string capped_for_display(std::string s, size_t max_bytes) {
  if (s.size() <= max_bytes) return s;
  return capped_value(s, max_bytes);
}

}  // namespace snapdiff::detail
