// capture/inject/demangle.cpp — see demangle.hpp.
//
// The bound follows the Itanium C++ ABI's grammar far enough to know each
// component's extent (what GCC, Clang and NVCC emit for kernels: nested and
// local names, templates, lambdas, literals, argument packs, function and
// array types); what it does not follow (expressions, decltype, special
// names) keeps the mangled name. Each construct costs at most what
// abi::__cxa_demangle prints for it: a source name its length, a builtin
// type its longest spelling, separators and brackets a few bytes; a
// back-reference S<n>_ or T<n>_ the largest component completed before it
// (every substitution candidate is one; a template parameter refers to an
// argument already read); a pack expansion Dp its pattern once per element
// of the longest argument pack. The sum is then an upper bound however the
// demangler resolves each reference, and each byte of the name is looked at
// once.
#include "demangle.hpp"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace snapcapture::log {

namespace {

constexpr uint64_t kHuge = uint64_t(1) << 60;  // sizes saturate here

uint64_t add(uint64_t a, uint64_t b) { return std::min(a + b, kHuge); }  // both <= 2^60: no wrap
uint64_t mul(uint64_t a, uint64_t b) { return b != 0 && a > kHuge / b ? kHuge : std::min(a * b, kHuge); }

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_lower(char c) { return c >= 'a' && c <= 'z'; }

// The longest spelling of each builtin type code ('v' void ... 'z' ...).
uint64_t builtin_length(char c) {
  switch (c) {
    case 'v': case 'b': case 'c': case 'l': return 4;
    case 'w': return 7;
    case 'a': case 'e': return 11;
    case 'h': case 'm': return 13;
    case 's': case 'f': return 5;
    case 't': return 14;
    case 'i': case 'z': return 3;
    case 'j': return 12;
    case 'x': case 'n': return 9;
    case 'y': case 'o': return 18;
    case 'd': return 6;
    case 'g': return 10;
    default: return 0;
  }
}

// The two-letter operator codes of <operator-name> (besides cv, li, v<digit>).
bool is_operator(char a, char b) {
  static const char* const kOps[] = {"nw", "na", "dl", "da", "aw", "ps", "ng", "ad", "de", "co", "pl", "mi", "ml",
                                     "dv", "rm", "an", "or", "eo", "aS", "pL", "mI", "mL", "dV", "rM", "aN", "oR",
                                     "eO", "ls", "rs", "lS", "rS", "eq", "ne", "lt", "gt", "le", "ge", "ss", "nt",
                                     "aa", "oo", "pp", "mm", "cm", "pm", "pt", "cl", "ix", "qu"};
  for (const char* op : kOps)
    if (op[0] == a && op[1] == b) return true;
  return false;
}

class Bound {
 public:
  // `param_charge`: what a template parameter costs (at least the longest
  // argument); `pack`: the elements of the longest argument pack.
  Bound(std::string_view s, uint64_t param_charge, uint64_t pack) : s_(s), param_charge_(param_charge), pack_(pack) {}

  uint64_t longest_argument() const { return max_arg_; }
  uint64_t longest_pack() const { return max_pack_; }

  std::optional<uint64_t> run() {
    if (s_.size() < 3 || s_.substr(0, 2) != "_Z") return std::nullopt;
    i_ = 2;
    uint64_t n = encoding();
    // Clone suffixes: ".constprop.0" prints " [clone .constprop.0]".
    while (ok_ && i_ < s_.size() && s_[i_] == '.') {
      const size_t start = i_++;
      while (i_ < s_.size() && s_[i_] != '.') {
        const char c = s_[i_];
        if (!(is_digit(c) || is_lower(c) || (c >= 'A' && c <= 'Z') || c == '_')) return std::nullopt;
        ++i_;
      }
      n = add(n, 10 + (i_ - start));
    }
    if (!ok_ || i_ != s_.size()) return std::nullopt;
    return n;
  }

 private:
  char peek(size_t k = 0) const { return i_ + k < s_.size() ? s_[i_ + k] : '\0'; }
  uint64_t fail() {
    ok_ = false;
    i_ = s_.size();
    return 0;
  }
  bool eat(char c) {
    if (peek() != c) {
      fail();
      return false;
    }
    ++i_;
    return true;
  }
  // A substitution candidate, in the order the demangler numbers them
  // (libiberty's d_add_substitution): S_ is the first, S0_ the second...
  uint64_t candidate(uint64_t n) {
    if (subs_.size() >= s_.size()) return fail();  // never more than the name's bytes
    subs_.push_back({n, trefs_});
    max_sub_ = std::max(max_sub_, n);
    return n;
  }

  struct Depth {
    Bound& b;
    explicit Depth(Bound& bound) : b(bound) {
      if (++b.depth_ > kMaxDemangleDepth) b.fail();
    }
    ~Depth() { --b.depth_; }
  };

  // Digits of a <number> (an 'n' first: negative); false when none.
  bool number(uint64_t* v) {
    if (peek() == 'n') ++i_;
    if (!is_digit(peek())) return false;
    uint64_t x = 0;
    while (is_digit(peek())) {
      x = std::min<uint64_t>(x * 10 + uint64_t(peek() - '0'), kHuge);
      ++i_;
    }
    *v = x;
    return true;
  }

  uint64_t encoding() {
    Depth d(*this);
    const char c = peek();
    if (c == 'T' || c == 'G') return fail();  // special names: never a kernel
    // The arguments of the encoding's name (and its prefixes) are those its
    // template parameters name; arguments inside types are not.
    const int saved = in_type_;
    in_type_ = 0;
    scopes_.push_back({});
    uint64_t n = name();
    if (ok_ && i_ != s_.size() && peek() != 'E' && peek() != '.') n = add(n, function_params('\0'));
    scopes_.pop_back();
    in_type_ = saved;
    return n;
  }

  // Types up to `end` ('\0': the end of the name, a local name's 'E' or a
  // clone suffix), each with ", ", and the parentheses.
  uint64_t function_params(char end) {
    uint64_t n = 2;
    while (ok_ && i_ < s_.size() && peek() != end && !(end == '\0' && (peek() == 'E' || peek() == '.'))) {
      if (end == 'E' && (peek() == 'R' || peek() == 'O') && peek(1) == 'E') {  // ref-qualifier of a function type
        ++i_;
        n = add(n, 3);
        continue;
      }
      n = add(n, add(type(), 2));
    }
    return n;
  }

  uint64_t name() {
    Depth d(*this);
    uint64_t n = 0;
    switch (peek()) {
      case 'N':
        return nested_name();
      case 'Z':
        return local_name();
      case 'S':
        if (peek(1) == 't') {
          i_ += 2;
          n = add(5, unqualified_name());
          break;
        }
        n = substitution();  // a template name already a candidate
        if (ok_ && peek() == 'I') n = add(n, template_args());
        return n;
      default:
        n = unqualified_name();
    }
    // An unscoped template name is a candidate; its arguments follow.
    if (ok_ && peek() == 'I') {
      candidate(n);
      n = add(n, template_args());
    }
    return n;
  }

  uint64_t nested_name() {
    eat('N');
    uint64_t quals = 0;
    while (peek() == 'r' || peek() == 'V' || peek() == 'K') ++i_, quals += 9;
    if (peek() == 'R' || peek() == 'O') ++i_, quals += 3;
    uint64_t n = 0;
    // Each prefix but the whole name is a candidate, unless it was a
    // substitution itself.
    while (ok_ && peek() != 'E') {
      const char c = peek();
      if (c == 'S' && peek(1) == 't') {
        i_ += 2;
        n = add(n, 5);
        continue;
      }
      if (c == 'S') n = add(n, substitution());
      else if (c == 'T') n = add(n, template_param());
      else if (c == 'I') n = add(n, template_args());
      else if (c == 'M' || c == 'L') {
        ++i_;  // a lambda's initializer scope, internal linkage: nothing printed
        continue;
      } else {
        n = add(n, add(unqualified_name(), 2));
      }
      if (ok_ && c != 'S' && peek() != 'E') candidate(n);
    }
    eat('E');
    return add(n, quals);
  }

  // Z <function encoding> E <entity name> | s [discriminator] | d [number] _ <name>
  uint64_t local_name() {
    eat('Z');
    uint64_t n = add(encoding(), 2);
    eat('E');
    if (peek() == 's') {
      ++i_;
      n = add(n, 18);  // "string literal"
    } else {
      if (peek() == 'd') {
        ++i_;
        uint64_t v = 0;
        number(&v);
        eat('_');
        n = add(n, 40);  // "{default arg#N}::"
      }
      n = add(n, name());
    }
    // Discriminator: _ <digit> or __ <number> _
    if (ok_ && peek() == '_') {
      ++i_;
      uint64_t v = 0;
      if (peek() == '_') {
        ++i_;
        if (!number(&v)) return fail();
        eat('_');
      } else if (!number(&v)) {
        return fail();
      }
    }
    return n;
  }

  uint64_t source_name() {
    uint64_t len = 0;
    if (!is_digit(peek()) || !number(&len) || len > s_.size() - i_) return fail();
    const std::string_view id = s_.substr(i_, size_t(len));
    i_ += size_t(len);
    return id.substr(0, 8) == "_GLOBAL_" ? std::max<uint64_t>(len, 21) : len;  // "(anonymous namespace)"
  }

  uint64_t unqualified_name() {
    Depth d(*this);
    const char c = peek();
    uint64_t n = 0;
    if (is_digit(c)) {
      n = source_name();
    } else if (c == 'U' && peek(1) == 't') {  // {unnamed type#N}
      i_ += 2;
      uint64_t v = 0;
      number(&v);
      eat('_');
      n = candidate(40);
    } else if (c == 'U' && peek(1) == 'l') {  // {lambda(params)#N}
      i_ += 2;
      ++in_lambda_;
      n = add(function_params('E'), 30);
      --in_lambda_;
      eat('E');
      uint64_t v = 0;
      number(&v);
      eat('_');
      candidate(n);
    } else if (c == 'C' && (peek(1) == 'I' || (peek(1) >= '1' && peek(1) <= '5'))) {  // constructor: the class's name
      if (peek(1) == 'I') {
        i_ += 3;
        n = type();
      } else {
        i_ += 2;
      }
      n = add(n, max_sub_);
    } else if (c == 'D' && (peek(1) == '0' || peek(1) == '1' || peek(1) == '2' || peek(1) == '4' || peek(1) == '5')) {
      i_ += 2;
      n = add(max_sub_, 1);  // ~ and the class's name (the last of a prefix: a candidate)
    } else if (c == 'L') {
      ++i_;
      return unqualified_name();
    } else if (is_lower(c)) {
      n = operator_name();
    } else {
      return fail();
    }
    while (ok_ && peek() == 'B') {  // [abi:tag]
      ++i_;
      n = add(n, add(source_name(), 6));
    }
    return n;
  }

  uint64_t operator_name() {
    const char a = peek(), b = peek(1);
    i_ += 2;
    if (a == 'c' && b == 'v') {  // operator TYPE: a parameter there may name arguments not read yet
      ++in_conversion_;
      const uint64_t t = type();
      --in_conversion_;
      return add(t, 10);
    }
    if (a == 'l' && b == 'i') return add(source_name(), 12);
    if (a == 'v' && is_digit(b)) return add(source_name(), 10);
    if (!is_operator(a, b)) return fail();
    return 20;
  }

  // S_, S<seq>_: a candidate completed before; Sa, Sb, Ss, Si, So, Sd.
  uint64_t substitution() {
    eat('S');
    const char c = peek();
    if (c == 'a' || c == 'b' || c == 's' || c == 'i' || c == 'o' || c == 'd') {
      ++i_;
      return 80;  // "std::basic_string<char, std::char_traits<char>, std::allocator<char> >" and shorter
    }
    // <seq-id>: base 36, digits then capitals; S_ is 0, S0_ 1.
    uint64_t k = 0;
    if (peek() != '_') {
      while (is_digit(peek()) || (peek() >= 'A' && peek() <= 'Z')) {
        const char d = peek();
        k = std::min<uint64_t>(k * 36 + uint64_t(is_digit(d) ? d - '0' : d - 'A' + 10), kHuge);
        ++i_;
      }
      ++k;
    }
    if (!eat('_')) return 0;
    if (k >= subs_.size()) return fail();  // the demangler refuses it too
    // Printed again elsewhere, a template parameter in it may name another
    // template's argument: each one read before it may cost the charge.
    const Sub& sub = subs_[size_t(k)];
    return add(sub.length, mul(sub.params_before, std::max<uint64_t>(param_charge_, 25)));
  }

  // T_, T<n>_: a template argument (or "auto:N" in a lambda's signature):
  // the charge, at least the longest argument of the name.
  // Read directly, it names an argument of the innermost encoding (a local
  // name's function, else the kernel): the longest of those, once they are
  // all read; else the charge.
  uint64_t template_param() {
    eat('T');
    uint64_t v = 0;
    if (peek() != '_' && !number(&v)) return fail();
    eat('_');
    if (in_conversion_) return fail();
    ++trefs_;
    if (in_lambda_) return 25;  // "auto:N"
    if (scopes_.empty() || scopes_.back().open > 0 || !scopes_.back().any)
      return std::max<uint64_t>(param_charge_, 25);
    return std::max<uint64_t>(scopes_.back().longest, 1);
  }

  uint64_t template_args() {
    Depth d(*this);
    eat('I');
    const bool named = in_type_ == 0 && !scopes_.empty();  // arguments a template parameter may name
    if (named) ++scopes_.back().open;
    uint64_t n = 3;  // "<", "> " (the space of "> >")
    while (ok_ && peek() != 'E') {
      const uint64_t a = template_arg();
      if (named) {
        max_arg_ = std::max(max_arg_, a);
        scopes_.back().longest = std::max(scopes_.back().longest, a);
        scopes_.back().any = true;
      }
      n = add(n, add(a, 2));
    }
    if (named) --scopes_.back().open;
    eat('E');
    return n;
  }

  uint64_t template_arg() {
    Depth d(*this);
    switch (peek()) {
      case 'L':
        return expr_primary();
      case 'J': {  // an argument pack
        ++i_;
        uint64_t n = 0, count = 0;
        while (ok_ && peek() != 'E') {
          n = add(n, add(template_arg(), 2));
          ++count;
        }
        eat('E');
        max_pack_ = std::max(max_pack_, count);
        return n;
      }
      case 'X': {  // X <expression> E
        ++i_;
        const uint64_t n = expression();
        eat('E');
        return n;
      }
      default:
        return type();
    }
  }

  // The expressions of template arguments that kernels use: a parameter, a
  // literal, and unary and binary operators over them ("!(T)", "&f",
  // "(a)+(b)"); any other keeps the name mangled.
  uint64_t expression() {
    Depth d(*this);
    const char a = peek(), b = peek(1);
    if (a == 'T') return template_param();
    if (a == 'L') return expr_primary();
    static const char* const kUnary[] = {"nt", "ng", "ad", "de", "co", "ps"};
    static const char* const kBinary[] = {"pl", "mi", "ml", "dv", "rm", "an", "or", "eo", "ls", "rs",
                                          "eq", "ne", "lt", "gt", "le", "ge", "aa", "oo"};
    for (const char* op : kUnary)
      if (op[0] == a && op[1] == b) {
        i_ += 2;
        return add(expression(), 4);
      }
    for (const char* op : kBinary)
      if (op[0] == a && op[1] == b) {
        i_ += 2;
        const uint64_t left = expression();
        return add(add(left, expression()), 10);
      }
    return fail();
  }

  // L <type> <value> E | L _Z <encoding> E: "(type)value", "&f".
  uint64_t expr_primary() {
    eat('L');
    if (peek() == '_' && peek(1) == 'Z') {
      i_ += 2;
      const uint64_t n = encoding();
      eat('E');
      return add(n, 2);
    }
    uint64_t n = add(type(), 6);
    const size_t start = i_;
    while (i_ < s_.size() && s_[i_] != 'E') ++i_;
    n = add(n, i_ - start);
    eat('E');
    return n;
  }

  uint64_t type() {
    Depth d(*this);
    if (!ok_) return 0;
    struct InType {
      int& n;
      explicit InType(int& count) : n(count) { ++n; }
      ~InType() { --n; }
    } in_type(in_type_);
    const char c = peek();
    if (const uint64_t b = builtin_length(c)) {
      ++i_;
      return b;
    }
    switch (c) {
      case 'u':  // vendor builtin
        ++i_;
        return candidate(source_name());
      case 'r':
      case 'V':
      case 'K': {
        uint64_t q = 0;
        while (peek() == 'r' || peek() == 'V' || peek() == 'K') ++i_, q += 9;
        return candidate(add(q, type()));
      }
      case 'P':
      case 'R':
      case 'O':
        ++i_;
        return candidate(add(type(), 4));  // "*", "&", "&&"; "(*)" and a space for a function
      case 'C':
      case 'G':
        ++i_;
        return candidate(add(type(), 11));  // " _Complex", " _Imaginary"
      case 'F': {
        ++i_;
        if (peek() == 'Y') ++i_;
        const uint64_t n = function_params('E');
        eat('E');
        return candidate(add(n, 6));
      }
      case 'A': {
        ++i_;
        uint64_t v = 0;
        const size_t start = i_;
        if (peek() != '_' && !number(&v)) return fail();  // an expression as the size is not followed
        const uint64_t digits = i_ - start;
        eat('_');
        return candidate(add(type(), digits + 4));
      }
      case 'M': {
        ++i_;
        const uint64_t cls = type();
        return candidate(add(add(cls, type()), 5));
      }
      case 'T': {  // T_ is a candidate; T_<args> too
        uint64_t n = candidate(template_param());
        if (ok_ && peek() == 'I') n = candidate(add(n, template_args()));
        return n;
      }
      case 'S': {
        const char k = peek(1);
        if (is_digit(k) || k == '_' || (k >= 'A' && k <= 'Z')) {  // S<seq>_ [<args>]: with arguments, a candidate
          const uint64_t n = substitution();
          return ok_ && peek() == 'I' ? candidate(add(n, template_args())) : n;
        }
        if (k == 't') return candidate(name());  // std::name, a class
        // Sa, Sb, Ss, Si, So, Sd: alone not a candidate; with arguments one.
        const uint64_t n = substitution();
        return ok_ && peek() == 'I' ? candidate(add(n, template_args())) : n;
      }
      case 'U': {  // vendor qualifier: U <source-name> [<template-args>] <type>
        ++i_;
        uint64_t n = add(source_name(), 2);
        if (ok_ && peek() == 'I') n = add(n, template_args());
        return candidate(add(n, type()));
      }
      case 'D':
        return d_type();
      case 'N':
      case 'Z':
        return candidate(name());  // a class or enum
      default:
        if (is_digit(c)) return candidate(name());
        return fail();
    }
  }

  uint64_t d_type() {
    const char c = peek(1);
    switch (c) {
      case 'p': {  // pack expansion: the pattern once per element of a pack
        i_ += 2;
        const uint64_t pattern = type();
        return candidate(mul(add(pattern, 2), std::max<uint64_t>(pack_, 1)));
      }
      case 'v': {  // vector: Dv <number> _ <type>
        i_ += 2;
        uint64_t v = 0;
        if (!number(&v)) return fail();
        eat('_');
        return candidate(add(type(), 24));
      }
      case 'F': {  // _FloatN, std::bfloat16_t: DF <number> _ | x | b
        i_ += 2;
        uint64_t v = 0;
        if (!number(&v)) return fail();
        if (peek() == '_' || peek() == 'x' || peek() == 'b') ++i_;
        else return fail();
        return 20;
      }
      case 'n': case 'a': case 'c': case 'f': case 'd': case 'e': case 'h': case 's': case 'i': case 'u':
        i_ += 2;
        return 20;  // "decltype(nullptr)", "auto", "decltype(auto)", "char16_t", ...
      default:
        return fail();  // decltype(expression), exception specifications, _BitInt, ...
    }
  }

  std::string_view s_;
  size_t i_ = 0;
  bool ok_ = true;
  int depth_ = 0;
  int in_lambda_ = 0;
  int in_type_ = 0;
  int in_conversion_ = 0;
  const uint64_t param_charge_;
  const uint64_t pack_;
  struct Sub {
    uint64_t length;
    uint64_t params_before;  // template parameters read before it was complete
  };
  struct Scope {  // an encoding: the arguments its parameters name
    uint64_t longest = 0;
    bool any = false;
    int open = 0;  // argument lists being read
  };
  std::vector<Sub> subs_;  // the substitution candidates
  std::vector<Scope> scopes_;
  uint64_t trefs_ = 0;
  uint64_t max_sub_ = 0;
  uint64_t max_arg_ = 0;   // the longest template argument
  uint64_t max_pack_ = 0;  // the most elements of an argument pack
};

}  // namespace

std::optional<uint64_t> demangled_length_bound(std::string_view mangled) {
  if (mangled.size() > kMaxMangledBytes) return std::nullopt;
  // A template parameter prints an argument, which may itself hold
  // parameters: the charge C is sound once no argument costs more than C
  // with every parameter charged C. The first pass charges nothing and
  // finds the packs; each next one charges the longest argument of the one
  // before, until that no longer grows (three passes at most, else the
  // name is kept: it refers to itself).
  Bound first(mangled, 0, 0);
  if (!first.run()) return std::nullopt;
  uint64_t charge = first.longest_argument();
  const uint64_t pack = first.longest_pack();
  for (int pass = 0; pass < 2; ++pass) {
    Bound b(mangled, charge, pack);
    const std::optional<uint64_t> n = b.run();
    if (!n) return std::nullopt;
    if (b.longest_argument() <= charge) return n;
    charge = b.longest_argument();
  }
  return std::nullopt;
}

std::string demangle_kernel_name(std::string_view name, uint64_t max_bytes) {
  if (name.size() < 3 || name.substr(0, 2) != "_Z") return std::string(name);
  const std::optional<uint64_t> bound = demangled_length_bound(name);
  if (!bound || *bound > max_bytes) return std::string(name);
  const std::string z(name);
  int status = 0;
  char* d = abi::__cxa_demangle(z.c_str(), nullptr, nullptr, &status);
  std::string out = status == 0 && d != nullptr && std::strlen(d) <= max_bytes ? std::string(d) : z;
  std::free(d);
  return out;
}

}  // namespace snapcapture::log
