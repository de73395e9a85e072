// The built-in rules' patterns are compiled when first used, not when the
// rules are read (Pattern::deferred): every one of them compiles, matches
// what the same pattern compiled at once matches (on every frame name and
// file of the real recordings), from two threads at once as from one, and
// still counts toward the limit on the compiled size of --rules files.
#include <catch2/catch.hpp>
#include <set>
#include <thread>

#include "snapdiff/analysis/attribution.hpp"
#include "snapdiff/analysis/pattern.hpp"
#include "snapdiff/error.hpp"
#include "snapdiff/input/input.hpp"
#include "test_util.hpp"

using namespace snapdiff;

namespace {

// Every pattern of the rule set, in order.
std::vector<const Pattern*> patterns_of(const RuleSet& rs) {
  std::vector<const Pattern*> out;
  for (const PhaseHint& h : rs.hints)
    for (const Pattern* p : {&h.name, &h.file})
      if (!p->empty()) out.push_back(p);
  for (const Rule& r : rs.rules)
    for (const Pattern* p : {&r.frame_name, &r.frame_file})
      if (!p->empty()) out.push_back(p);
  return out;
}

// The frame names and files of every real recording.
std::vector<std::string> real_subjects() {
  std::set<std::string> all;
  for (const auto& [file, stem] : test::real_recordings()) {
    const Trace t = load_trace(test::real_data(file));
    for (const Frame& f : t.frames) {
      all.insert(std::string(t.strings.get(f.name)));
      all.insert(std::string(t.strings.get(f.file)));
    }
  }
  return {all.begin(), all.end()};
}

}  // namespace

TEST_CASE("the built-in rules' patterns compile at first use and match as compiled at once", "[analysis][rules]") {
  const RuleSet rs = RuleSet::builtin();
  const std::vector<const Pattern*> lazy = patterns_of(rs);
  REQUIRE(lazy.size() >= 10);
  std::vector<Pattern> eager;
  for (const Pattern* p : lazy) eager.emplace_back(p->source());  // throws if it does not compile
  const std::vector<std::string> subjects = real_subjects();
  REQUIRE(subjects.size() > 500);
  // Two threads ask the same deferred patterns at once: each compiles once
  // and both see what the eager ones say.
  auto verdicts = [&](const std::vector<const Pattern*>& ps) {
    std::vector<char> v;
    for (const std::string& s : subjects)
      for (const Pattern* p : ps) v.push_back(char(p->search(s)));
    return v;
  };
  std::vector<char> on_other;
  std::thread other([&] { on_other = verdicts(lazy); });
  const std::vector<char> here = verdicts(lazy);
  other.join();
  std::vector<const Pattern*> eager_ptrs;
  for (const Pattern& p : eager) eager_ptrs.push_back(&p);
  const std::vector<char> want = verdicts(eager_ptrs);
  CHECK(here == want);
  CHECK(on_other == want);
  size_t matched = 0;
  for (char c : want) matched += size_t(c);
  CHECK(matched > 0);  // the subjects exercise the patterns
  for (size_t i = 0; i < lazy.size(); ++i) {
    INFO(lazy[i]->source());
    CHECK(lazy[i]->program_size() == eager[i].program_size());
    CHECK(lazy[i]->program_size() > 0);
  }
}

TEST_CASE("a rules file's compiled-size limit counts the built-in patterns", "[analysis][rules]") {
  int64_t builtin_size = 0;
  {
    const RuleSet rs = RuleSet::builtin();
    for (const Pattern* p : patterns_of(rs)) builtin_size += p->program_size();
  }
  REQUIRE(builtin_size > 0);
  auto file_of = [](const std::vector<std::string>& res) {
    std::string j = R"({"format": "snapdiff.rules", "version": 1, "rules": [)";
    for (size_t i = 0; i < res.size(); ++i)
      j += std::string(i ? "," : "") + R"({"name": "r)" + std::to_string(i) + R"(", "category": "c", "when": {"frame_name": ")" +
           res[i] + R"("}})";
    return j + "]}";
  };
  // Large patterns up to the limit less the built-in patterns' size, then
  // small ones until just past it: within the limit alone, over it beside
  // the built-in rules. Sizes measured, pattern by pattern.
  std::string body;
  for (int i = 0; i < 900; ++i) body += std::string(i ? "|" : "") + char('a' + i % 26) + char('a' + i / 26 % 26) + char('a' + i / 676);
  std::vector<std::string> res;
  int64_t total = 0;
  for (int i = 0;; ++i) {
    std::string re = "^";  // appended, not "^" + ...: g++ 12 warns falsely (-Wrestrict) on that
    re += std::to_string(i) + "x(" + body + ")";
    const int64_t size = Pattern(re).program_size();
    if (total + size > RuleSet::kMaxProgramSize - builtin_size) break;
    res.push_back(re);
    total += size;
  }
  REQUIRE(res.size() >= 2);
  RuleSet fits = RuleSet::builtin();
  CHECK_NOTHROW(fits.add_json(file_of(res), "t"));
  for (int i = 0; total <= RuleSet::kMaxProgramSize - builtin_size; ++i) {
    std::string re = "^y";
    re += std::to_string(i) + "$";
    res.push_back(re);
    total += Pattern(re).program_size();
  }
  REQUIRE(total <= RuleSet::kMaxProgramSize);
  RuleSet alone;  // no built-in rules: the same file fits
  CHECK_NOTHROW(alone.add_json(file_of(res), "t"));
  RuleSet over = RuleSet::builtin();
  try {
    over.add_json(file_of(res), "t");
    FAIL("accepted patterns beyond the compiled-size limit, the built-in ones included");
  } catch (const InputError& e) {
    CHECK(e.describe().find("RE2 instructions together") != std::string::npos);
  }
}
