// Reading attribution rules files (rules/builtin.json, --rules FILE).
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "snapdiff/analysis/attribution.hpp"
#include "snapdiff/error.hpp"
#include "util/json_depth.hpp"
#include "util/read_file.hpp"
#include "util/quote_value.hpp"

namespace snapdiff {

extern const char* const kBuiltinRulesJson;  // generated from rules/builtin.json

const char* const kBuiltinCategories[] = {"parameter", "parameter_copy", "gradient",      "optimizer_state",
                                          "optimizer_temporary", "activation", "kv_cache", "input", "temporary",
                                          "workspace", "communication",  "graph_pool", "leaked",
                                          "unknown"};

const char* const kFactNames[kFactCount] = {"graph_pool",          "pre_trace_parameter", "pre_trace_gradient",
                                            "pre_trace_optimizer_state", "parameter_sized_copy", "parameter_copy_site",
                                            "freed_by_zero_grad", "input_site",
                                            "graph_pool_gradient", "kept_backward_buffer",
                                            "frozen_parameter", "trained_tensor",
                                            "kv_cache_held", "kv_cache_growth", "inference_input",
                                            "noted_parameter", "noted_gradient", "noted_optimizer_state"};

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::Init: return "init";
    case Phase::Forward: return "forward";
    case Phase::Backward: return "backward";
    case Phase::Optimizer: return "optimizer";
    case Phase::Other: return "other";
    case Phase::PreTrace: return "pre_trace";
  }
  return "other";
}

bool phase_from_name(std::string_view name, Phase* out) {
  for (Phase p : {Phase::Init, Phase::Forward, Phase::Backward, Phase::Optimizer, Phase::Other, Phase::PreTrace})
    if (name == phase_name(p)) return *out = p, true;
  return false;
}

namespace {

using J = nlohmann::json;

[[noreturn]] void fail(const std::string& path, const std::string& msg) { throw InputError(path, msg); }

bool parse_phase(const std::string& s, Phase* p) {
  for (int i = 0; i < kPhaseCount; ++i)
    if (s == phase_name(Phase(i))) {
      *p = Phase(i);
      return true;
    }
  return false;
}

std::string n_commas(uint64_t v) {
  std::string s = std::to_string(v), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return out;
}

// The largest number of copies a counted repetition makes of what it
// repeats ("x{1000}" is a thousand x's to the automaton; counts inside a
// repeated group multiply): RE2 syntax read as far as that takes — escapes
// (\Q...\E, \x{...}, \p{...}), character classes (first ']' literal,
// [:name:]) and groups; a '{' that does not open {n}, {n,} or {n,m} is
// literal, as in RE2.
uint64_t max_repetition(const std::string& re) {
  const size_t n = re.size();
  std::vector<uint64_t> group_max = {1};  // per open group: the most copies inside it
  uint64_t last = 1;                      // copies inside the last atom
  uint64_t best = 1;
  auto number = [&](size_t& i, uint64_t& v) {
    const size_t start = i;
    v = 0;
    while (i < n && re[i] >= '0' && re[i] <= '9') v = std::min<uint64_t>(v * 10 + uint64_t(re[i++] - '0'), 1u << 30);
    return i > start;
  };
  for (size_t i = 0; i < n;) {
    const char c = re[i];
    if (c == '\\') {
      if (i + 1 < n && re[i + 1] == 'Q') {
        const size_t e = re.find("\\E", i + 2);
        i = e == std::string::npos ? n : e + 2;
      } else if (i + 2 < n && (re[i + 1] == 'x' || re[i + 1] == 'p' || re[i + 1] == 'P') && re[i + 2] == '{') {
        const size_t e = re.find('}', i + 3);
        i = e == std::string::npos ? n : e + 1;
      } else {
        i += 2;
      }
      last = 1;
    } else if (c == '[') {
      size_t j = i + 1;
      if (j < n && re[j] == '^') ++j;
      if (j < n && re[j] == ']') ++j;  // a ']' first is literal
      while (j < n && re[j] != ']') {
        if (re[j] == '\\') j += 2;
        else if (re[j] == '[' && j + 1 < n && re[j + 1] == ':') {
          const size_t e = re.find(":]", j + 2);
          j = e == std::string::npos ? n : e + 2;
        } else {
          ++j;
        }
      }
      i = j + 1;
      last = 1;
    } else if (c == '(') {
      group_max.push_back(1);
      ++i;
      last = 1;
    } else if (c == ')') {
      last = group_max.back();
      if (group_max.size() > 1) group_max.pop_back();
      group_max.back() = std::max(group_max.back(), last);
      ++i;
    } else if (c == '{') {
      size_t j = i + 1;
      uint64_t lo = 0, hi = 0;
      bool ok = number(j, lo);
      hi = lo;
      if (ok && j < n && re[j] == ',') {
        ++j;
        if (j < n && re[j] >= '0' && re[j] <= '9') number(j, hi);
      }
      if (ok && j < n && re[j] == '}') {
        const uint64_t copies = std::min<uint64_t>(std::max(lo, hi) * last, 1u << 30);
        best = std::max(best, copies);
        group_max.back() = std::max(group_max.back(), copies);
        last = copies;
        i = j + 1;
      } else {
        last = 1;  // a literal '{'
        ++i;
      }
    } else {
      last = 1;
      ++i;
    }
  }
  return best;
}

// Set while builtin() reads the compiled-in rules: their patterns compile
// when first used (Pattern::deferred; a report matches frames with the
// rules' PatternSet, which compiles them together, so alone they are
// compiled only for --rules files' limit or a set RE2 gives up on).
thread_local bool t_builtin = false;

// `program` counts the compiled size of every pattern of the rule set so far.
Pattern compile(const std::string& re, const std::string& path, int64_t& program) {
  if (re.size() > RuleSet::kMaxPatternBytes)
    fail(path, "pattern of " + n_commas(re.size()) + " bytes: at most " + n_commas(RuleSet::kMaxPatternBytes));
  if (const uint64_t copies = max_repetition(re); copies > RuleSet::kMaxRepeat)
    fail(path, "a counted repetition of " + n_commas(copies) + " copies (counts in repeated groups multiply): rules allow " +
                   n_commas(RuleSet::kMaxRepeat) + " (RE2 compiles every copy)");
  if (t_builtin) return Pattern::deferred(re);
  Pattern p;
  try {
    p = Pattern(re);
  } catch (const std::invalid_argument& e) {
    fail(path, std::string("invalid regular expression (RE2 syntax): ") + e.what());
  }
  program += p.program_size();
  if (program > RuleSet::kMaxProgramSize)
    fail(path, "the rules' patterns compile to more than " + n_commas(uint64_t(RuleSet::kMaxProgramSize)) +
                   " RE2 instructions together (this one has " + n_commas(uint64_t(p.program_size())) +
                   "): use fewer or smaller patterns, e.g. smaller repetition counts");
  return p;
}

std::string str_field(const J& j, const char* key, const std::string& path, bool required) {
  if (!j.contains(key)) {
    if (required) fail(path + "." + key, "missing");
    return "";
  }
  if (!j[key].is_string()) fail(path + "." + key, "expected a string");
  return j[key].get<std::string>();
}

// A list of phase names -> bit set. `extra` names map to bit 7.
uint16_t phase_bits(const J& j, const std::string& path, const char* extra) {
  if (!j.is_array()) fail(path, "expected an array of phase names");
  uint16_t bits = 0;
  for (size_t i = 0; i < j.size(); ++i) {
    if (!j[i].is_string()) fail(path + "[" + std::to_string(i) + "]", "expected a phase name");
    std::string s = j[i].get<std::string>();
    Phase p;
    if (parse_phase(s, &p)) bits |= uint16_t(1u << int(p));
    else if (extra && s == extra) bits |= 0x80;
    else fail(path + "[" + std::to_string(i) + "]", "unknown phase " + quote_value(s));
  }
  return bits;
}

Lifetime parse_lifetime(const std::string& s, const std::string& path) {
  static const std::pair<const char*, Lifetime> names[] = {
      {"within_phase", Lifetime::WithinPhase},
      {"outlives_phase", Lifetime::OutlivesPhase},
      {"crosses_iteration", Lifetime::CrossesIteration},
      {"within_iteration", Lifetime::WithinIteration},
      {"never_freed", Lifetime::NeverFreed},
      {"held_to_end", Lifetime::HeldToEnd},
      {"alive_at_next_optimizer", Lifetime::AliveAtNextOptimizer},
      {"spans_backward", Lifetime::SpansBackward},
  };
  for (auto& n : names)
    if (s == n.first) return n.second;
  fail(path, "unknown lifetime " + quote_value(s));
}

}  // namespace

int RuleSet::category_index(const std::string& name) {
  for (size_t i = 0; i < categories.size(); ++i)
    if (categories[i] == name) return int(i);
  categories.push_back(name);
  return int(categories.size() - 1);
}

void RuleSet::add_json(const std::string& text, const std::string& origin) {
  J j;
  detail::check_json_depth(text);
  try {
    j = J::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(uint64_t(e.byte > 0 ? e.byte - 1 : 0), std::string("invalid JSON in rules file: ") + e.what());
  } catch (const nlohmann::json::exception& e) {
    // e.g. out_of_range.406: a number literal beyond what a double holds.
    throw InputError("$", std::string("invalid JSON in rules file: ") + e.what());
  }
  if (!j.is_object()) fail("$", "a rules file is a JSON object");
  if (str_field(j, "format", "$", true) != "snapdiff.rules") fail("$.format", "expected \"snapdiff.rules\"");
  if (!j.contains("version") || !j["version"].is_number_integer()) fail("$.version", "missing");
  if (j["version"].get<int64_t>() > 1) fail("$.version", "rules format version newer than this snapdiff reads (1)");
  // The program size of the patterns loaded before (the built-in ones are
  // compiled here, when a rules file is added to them).
  int64_t program = 0;
  if (!t_builtin) {
    for (const PhaseHint& h : hints) program += h.name.program_size() + h.file.program_size();
    for (const Rule& r : rules) program += r.frame_name.program_size() + r.frame_file.program_size();
  }
  std::vector<PhaseHint> new_hints;
  if (j.contains("phase_hints")) {
    const J& h = j["phase_hints"];
    if (!h.is_array()) fail("$.phase_hints", "expected an array");
    for (size_t i = 0; i < h.size(); ++i) {
      std::string p = "$.phase_hints[" + std::to_string(i) + "]";
      if (hints.size() + i >= kMaxHints)
        fail(p, "more than " + n_commas(kMaxHints) + " phase hints (the built-in ones included)");
      if (!h[i].is_object()) fail(p, "expected an object");
      PhaseHint ph;
      std::string phase = str_field(h[i], "phase", p, true);
      if (phase == "ignore") ph.ignore = true, ph.phase = Phase::Other;
      else if (!parse_phase(phase, &ph.phase) || ph.phase == Phase::PreTrace)
        fail(p + ".phase", "unknown phase " + quote_value(phase));
      if (h[i].contains("outer")) {
        if (!h[i]["outer"].is_boolean()) fail(p + ".outer", "expected true or false");
        ph.outer = h[i]["outer"].get<bool>();
      }
      ph.name_re = str_field(h[i], "name", p, false);
      ph.file_re = str_field(h[i], "file", p, false);
      if (ph.name_re.empty() && ph.file_re.empty()) fail(p, "a hint needs \"name\" or \"file\"");
      if (!ph.name_re.empty()) ph.name = compile(ph.name_re, p + ".name", program), ph.has_name = true;
      if (!ph.file_re.empty()) ph.file = compile(ph.file_re, p + ".file", program), ph.has_file = true;
      new_hints.push_back(std::move(ph));
    }
  }
  std::vector<Rule> new_rules;
  if (j.contains("rules")) {
    const J& r = j["rules"];
    if (!r.is_array()) fail("$.rules", "expected an array");
    for (size_t i = 0; i < r.size(); ++i) {
      std::string p = "$.rules[" + std::to_string(i) + "]";
      if (rules.size() + i >= kMaxRules) fail(p, "more than " + n_commas(kMaxRules) + " rules (the built-in ones included)");
      if (!r[i].is_object()) fail(p, "expected an object");
      Rule rule;
      rule.origin = origin;
      rule.name = str_field(r[i], "name", p, true);
      rule.category = str_field(r[i], "category", p, true);
      if (rule.category.empty()) fail(p + ".category", "empty category");
      rule.evidence = str_field(r[i], "evidence", p, false);
      rule.category_index = category_index(rule.category);
      if (categories.size() > kMaxCategories)
        fail(p + ".category", "more than " + n_commas(kMaxCategories) + " categories (the built-in ones included)");
      if (r[i].contains("when")) {
        const J& w = r[i]["when"];
        std::string wp = p + ".when";
        if (!w.is_object()) fail(wp, "expected an object");
        for (auto it = w.begin(); it != w.end(); ++it) {
          const std::string& k = it.key();
          const J& v = it.value();
          std::string kp = wp + "." + capped_value(k);
          if (k == "frame_name") {
            if (!v.is_string()) fail(kp, "expected a regular expression");
            rule.frame_name_re = v.get<std::string>();
            rule.frame_name = compile(rule.frame_name_re, kp, program);
            rule.has_frame_name = true;
          } else if (k == "frame_file") {
            if (!v.is_string()) fail(kp, "expected a regular expression");
            rule.frame_file_re = v.get<std::string>();
            rule.frame_file = compile(rule.frame_file_re, kp, program);
            rule.has_frame_file = true;
          } else if (k == "alloc_phase") {
            rule.alloc_phases = uint8_t(phase_bits(v, kp, nullptr));
          } else if (k == "free_phase") {
            rule.free_phases = phase_bits(v, kp, "never");
          } else if (k == "stack_hint") {
            rule.stack_hints = uint8_t(phase_bits(v, kp, "none"));
          } else if (k == "lifetime") {
            if (!v.is_string()) fail(kp, "expected a lifetime name");
            rule.lifetime = parse_lifetime(v.get<std::string>(), kp);
          } else if (k == "size_bytes") {
            if (!v.is_array()) fail(kp, "expected an array of byte counts");
            for (size_t s = 0; s < v.size(); ++s) {
              if (!v[s].is_number_unsigned()) fail(kp + "[" + std::to_string(s) + "]", "expected a byte count");
              rule.sizes.push_back(v[s].get<uint64_t>());
            }
          } else if (k == "min_bytes" || k == "max_bytes") {
            if (!v.is_number_unsigned()) fail(kp, "expected a byte count");
            (k == "min_bytes" ? rule.min_bytes : rule.max_bytes) = v.get<uint64_t>();
          } else if (k == "replaces_category") {
            if (!v.is_string()) fail(kp, "expected a category name");
            rule.replaces_category = category_index(v.get<std::string>());
            if (categories.size() > kMaxCategories)
              fail(kp, "more than " + n_commas(kMaxCategories) + " categories (the built-in ones included)");
          } else if (k == "unlike_sizes_of") {
            if (!v.is_string()) fail(kp, "expected a category name");
            rule.unlike_sizes_of = category_index(v.get<std::string>());
            if (categories.size() > kMaxCategories)
              fail(kp, "more than " + n_commas(kMaxCategories) + " categories (the built-in ones included)");
          } else if (k == "inferred") {
            if (!v.is_array() || v.empty()) fail(kp, "expected a list of inference names");
            for (size_t s = 0; s < v.size(); ++s) {
              const std::string sp = kp + "[" + std::to_string(s) + "]";
              if (!v[s].is_string()) fail(sp, "expected an inference name");
              int f = 0;
              while (f < kFactCount && v[s].get<std::string>() != kFactNames[f]) ++f;
              if (f == kFactCount) fail(sp, "unknown inference " + quote_value(v[s].get<std::string>()));
              rule.facts_any = rule.facts_any | (1u << f);
            }
          } else if (k == "no_later_optimizer") {
            if (!v.is_boolean()) fail(kp, "expected true or false");
            rule.no_later_optimizer = v.get<bool>();
          } else {
            fail(kp, "unknown condition " + quote_value(k));
          }
        }
      }
      new_rules.push_back(std::move(rule));
    }
  }
  // A later file's hints and rules take precedence.
  new_hints.insert(new_hints.end(), std::make_move_iterator(hints.begin()), std::make_move_iterator(hints.end()));
  hints = std::move(new_hints);
  new_rules.insert(new_rules.end(), std::make_move_iterator(rules.begin()), std::make_move_iterator(rules.end()));
  rules = std::move(new_rules);
  program_size = program;
}

void RuleSet::add_file(const std::string& path) {
  const std::string text = detail::read_small_file(path, "rules file");
  try {
    add_json(text, path);
  } catch (InputError& e) {
    e.set_file(path);
    throw;
  }
}

RuleSet RuleSet::builtin() {
  RuleSet rs;
  for (int i = 0; i < kBuiltinCategoryCount; ++i) rs.categories.push_back(kBuiltinCategories[i]);
  struct Builtin {
    Builtin() { t_builtin = true; }
    ~Builtin() { t_builtin = false; }
  } reading;
  rs.add_json(kBuiltinRulesJson, "builtin");
  return rs;
}

}  // namespace snapdiff
