// Finding the per-rank files of a multi-GPU run (snapdiff/input/ranks.hpp;
// docs/ranks.md, "Finding the ranks"). Names only: no file is opened here.
#include "snapdiff/input/ranks.hpp"

#include <fnmatch.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <set>
#include <system_error>
#include <tuple>

#include "snapdiff/error.hpp"

namespace snapdiff {

namespace fs = std::filesystem;

namespace {

// A number of at most `max_digits` digits (ranks: 6, torchtitan's padding;
// steps: 18), or -1.
int64_t number(const std::string& digits, size_t max_digits) {
  if (digits.empty() || digits.size() > max_digits) return -1;
  int64_t v = 0;
  for (char c : digits) v = v * 10 + (c - '0');
  return v;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The components of a path, split at '/' (empty ones dropped).
std::vector<std::string> components(std::string_view path) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    if (j > i) out.emplace_back(path.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The file name without the extensions snapshot writers add: "mem_0" of
// "mem_0.pickle.gz", "rank0.12" of "rank0.12.pt.trace.memory_snapshot.html".
std::string stem(std::string name) {
  static const char* const kExts[] = {".gz", ".pickle", ".pkl", ".snap", ".json", ".html", ".memory_snapshot",
                                      ".trace", ".pt"};
  for (bool again = true; again;) {
    again = false;
    for (const char* e : kExts)
      if (ends_with(name, e) && name.size() > std::string_view(e).size()) {
        name.resize(name.size() - std::string_view(e).size());
        again = true;
      }
  }
  return name;
}

// Name matching is by hand, one pass over the name (no backtracking): a
// name read from a summary may be as long as a path allows, and a
// backtracking matcher recurses once per character (issue 37).
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_letter(char c) { return c >= 'a' && c <= 'z'; }  // names are lowered first
bool is_sep(char c) { return c == '-' || c == '_' || c == '.'; }

// The length of the run of digits at s[i] (0: none).
size_t digits_at(std::string_view s, size_t i) {
  size_t j = i;
  while (j < s.size() && is_digit(s[j])) ++j;
  return j - i;
}

bool at(std::string_view s, size_t i, std::string_view word) {
  return i <= s.size() && s.substr(i, word.size()) == word;
}

// "step", "iteration" or "iter" at s[i] (in that order): its length, or 0.
size_t step_word_at(std::string_view s, size_t i) {
  for (std::string_view w : {std::string_view("step"), std::string_view("iteration"), std::string_view("iter")})
    if (at(s, i, w)) {
      // "iteration5" is "iteration" then 5; "iter" is tried when "iteration"
      // is not followed by a number (never: "iteration" goes on with a letter).
      size_t j = i + w.size();
      if (j < s.size() && (s[j] == '-' || s[j] == '_') && digits_at(s, j + 1) > 0) ++j;
      if (digits_at(s, j) > 0) return j - i;
    }
  return 0;
}

// The step a name gives: "step_20", "step20", "iteration_20", "iter-20",
// bounded by a non-letter before (the number runs to its last digit).
int64_t step_in(std::string_view s) {
  for (size_t i = 0; i < s.size(); ++i) {
    if (i > 0 && is_letter(s[i - 1])) continue;
    const size_t w = step_word_at(s, i);
    if (w > 0) return number(std::string(s.substr(i + w, digits_at(s, i + w))), 18);
  }
  return -1;
}

// "oom" between non-letters (or the ends).
bool oom_in(std::string_view s) {
  for (size_t i = s.find("oom"); i != std::string_view::npos; i = s.find("oom", i + 1))
    if ((i == 0 || !is_letter(s[i - 1])) && (i + 3 >= s.size() || !is_letter(s[i + 3]))) return true;
  return false;
}

// A rank of 1 to 6 digits at s[i] that the digit run ends: its value, or -1.
int rank_digits_at(std::string_view s, size_t i) {
  const size_t n = digits_at(s, i);
  return n >= 1 && n <= 6 ? int(number(std::string(s.substr(i, n)), 6)) : -1;
}

// Whether s[i] is the end, or a '.' (the extension after a number).
bool dot_or_end(std::string_view s, size_t i) { return i >= s.size() || s[i] == '.'; }

// Folder "step20", "iteration_20", "iter-20_exit" (the whole name): the step
// and the _exit mark.
bool step_folder(std::string_view dir, int64_t& step, bool& exit_mark) {
  const size_t w = step_word_at(dir, 0);
  if (w == 0) return false;
  const size_t n = digits_at(dir, w);
  const std::string_view rest = dir.substr(w + n);
  if (!rest.empty() && rest != "_exit") return false;
  step = number(std::string(dir.substr(w, n)), 18);
  exit_mark = !rest.empty();
  return true;
}

// Folder "rank3", "rank_3", "rank-3" (the whole name): its number (up to 6
// digits), -1 otherwise.
int rank_folder(std::string_view dir) {
  if (!at(dir, 0, "rank")) return -1;
  size_t j = 4;
  if (j < dir.size() && (dir[j] == '-' || dir[j] == '_')) ++j;
  const size_t n = digits_at(dir, j);
  if (n == 0 || j + n != dir.size()) return -1;
  return int(number(std::string(dir.substr(j, n)), 6));
}

// "oom_rank-{R}_..." at the start of s: R, or -1.
int megatron_oom_prefix(std::string_view s) {
  if (!at(s, 0, "oom_rank-")) return -1;
  const size_t n = digits_at(s, 9);
  if (n < 1 || n > 6 || !at(s, 9 + n, "_")) return -1;
  return rank_digits_at(s, 9);
}

// "..._oom_rank_{R}" or "..._oom_rank-{R}" then '.' or the end: R, or -1.
int megatron_oom_suffix(std::string_view s) {
  for (size_t i = s.find("_oom_rank"); i != std::string_view::npos; i = s.find("_oom_rank", i + 1)) {
    const size_t j = i + 9;
    if (j >= s.size() || (s[j] != '-' && s[j] != '_')) continue;
    const int r = rank_digits_at(s, j + 1);
    if (r >= 0 && dot_or_end(s, j + 1 + digits_at(s, j + 1))) return r;
  }
  return -1;
}

// "rank" after a non-letter (or at the start), an optional - or _, then 1 to
// 6 digits (the whole run): the first such R, or -1.
int rank_word(std::string_view s) {
  for (size_t i = s.find("rank"); i != std::string_view::npos; i = s.find("rank", i + 1)) {
    if (i > 0 && is_letter(s[i - 1])) continue;
    size_t j = i + 4;
    if (j < s.size() && (s[j] == '-' || s[j] == '_') && digits_at(s, j + 1) > 0) ++j;
    const int r = rank_digits_at(s, j);
    if (r >= 0) return r;
  }
  return -1;
}

// A token "r{R}" between - _ . or the ends: the first R, or -1.
int r_token(std::string_view s) {
  for (size_t i = s.find('r'); i != std::string_view::npos; i = s.find('r', i + 1)) {
    if (i > 0 && !is_sep(s[i - 1])) continue;
    const int r = rank_digits_at(s, i + 1);
    const size_t end = i + 1 + digits_at(s, i + 1);
    if (r >= 0 && (end == s.size() || is_sep(s[end]))) return r;
  }
  return -1;
}

}  // namespace

RankName rank_from_name(std::string_view path) {
  RankName out;
  std::vector<std::string> parts = components(path);
  if (parts.empty()) return out;
  const std::string name = lower(parts.back());
  parts.pop_back();

  // The folders: the innermost step or iteration folder gives the step, an
  // *_exit one (torchtitan's OOM dumps) the OOM mark; a folder named only by
  // a rank ("rank3", "rank_3") gives the rank when the file's name gives none;
  // Megatron's oom_rank-{rank}_{path} when the path has folders
  // ("oom_rank-3_out/snapshot.pickle") too.
  int folder_rank = -1;
  bool folder_megatron = false;
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
    const std::string dir = lower(*it);
    int64_t step = -1;
    bool exit_mark = false;
    if (out.step < 0 && step_folder(dir, step, exit_mark)) {
      out.step = step;
      if (exit_mark) out.oom = true;
    }
    if (folder_rank < 0) folder_rank = rank_folder(dir);
    if (folder_rank < 0) {
      folder_rank = megatron_oom_prefix(dir);
      if (folder_rank >= 0) {
        folder_megatron = true;
        out.oom = true;
      }
    }
  }

  // The file's name, strongest pattern first (ranks.hpp lists them).
  const std::string base = stem(name);
  int r = -1;
  const size_t lead = digits_at(name, 0);             // {R} of {R}_step_{N}
  const size_t step_digits = digits_at(name, lead + 6);  // {N}
  const size_t after_rank = 4 + digits_at(name, 4);    // rank{R}|...
  if (rank_digits_at(name, 0) >= 0 && at(name, lead, "_step_") && step_digits > 0 &&
      dot_or_end(name, lead + 6 + step_digits)) {
    // {R}_step_{N}, then '.' or the end: torchtitan (current)
    out.rank = rank_digits_at(name, 0);
    out.step = number(name.substr(lead + 6, step_digits), 18);
    out.layout = "torchtitan";
  } else if (at(name, 0, "rank") && rank_digits_at(name, 4) >= 0 && at(name, after_rank, "_memory_snapshot") &&
             dot_or_end(name, after_rank + 16)) {
    // rank{R}_memory_snapshot, then '.' or the end: torchtitan (older)
    out.rank = rank_digits_at(name, 4);
    out.layout = "torchtitan";
  } else if ((r = megatron_oom_prefix(name)) >= 0 || (r = megatron_oom_suffix(name)) >= 0) {
    out.rank = r;
    out.oom = true;
    out.layout = "megatron";
  } else if ((r = rank_word(name)) >= 0) {
    out.rank = r;
    out.layout = "rank";
    // Composer's rank{R}.{batch}.: the batch is the step.
    if (at(name, 0, "rank") && rank_digits_at(name, 4) >= 0 && at(name, after_rank, ".")) {
      const size_t k = after_rank + 1;
      const size_t n = digits_at(name, k);
      if (n > 0 && at(name, k + n, ".")) out.step = number(name.substr(k, n), 18);
    }
  } else if ((r = r_token(base)) >= 0) {
    out.rank = r;
    out.layout = "rank";
  } else if (folder_rank >= 0) {
    out.rank = folder_rank;
    out.layout = folder_megatron ? "megatron" : "rank";
  }
  if (out.layout != "torchtitan" || out.step < 0) {
    const int64_t s = step_in(base);
    if (s >= 0) out.step = s;
  }
  if (oom_in(base)) out.oom = true;
  return out;
}

namespace {

bool is_summary(const std::string& lname) {
  std::string n = lname;
  if (ends_with(n, ".gz")) n.resize(n.size() - 3);
  return ends_with(n, ".json") && !ends_with(n, ".truth.json") && !ends_with(n, ".trace.json");
}

bool is_snapshot(const std::string& lname) {
  std::string n = lname;
  if (ends_with(n, ".gz")) n.resize(n.size() - 3);
  return ends_with(n, ".pickle") || ends_with(n, ".pkl") || ends_with(n, ".snap") || ends_with(n, ".trace.json");
}

bool of_kind(const std::string& path, RankInputs kind) {
  const std::string n = lower(fs::path(path).filename().string());
  return kind == RankInputs::Summaries ? is_summary(n) : is_snapshot(n);
}

const char* kind_words(RankInputs kind) {
  return kind == RankInputs::Summaries ? "no summary file (.json, .json.gz) in this folder"
                                       : "no snapshot file (.pickle, .pkl, .snap, .trace.json, each also .gz) in "
                                         "this folder";
}

[[noreturn]] void fail(const std::string& file, const std::string& what) {
  InputError e(what);
  e.set_file(file);
  throw e;
}

std::string join(const std::string& dir, const std::string& name) {
  if (dir.empty() || dir == ".") return dir.empty() ? name : "./" + name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

struct Walk {
  RankInputs kind;
  WalkLimits limits;
  std::vector<std::string> found;    // files of the kind, as reached
  std::vector<std::string> skipped;  // other files
  std::vector<std::string> too_deep;  // folders below kMaxWalkDepth, not walked
  uint64_t considered = 0;            // files looked at (of the kind or not)
  bool stopped = false;               // kMaxWalkFiles reached: the rest not looked at

  // Walks a folder: its entries in name order, sub-folders to depth
  // kMaxWalkDepth, links to files followed, links to folders not, at most
  // kMaxWalkFiles files over the whole walk. Returns how many files of the
  // kind it found.
  size_t folder(const std::string& dir, int depth) {
    std::error_code ec;
    std::vector<std::string> names;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
      names.push_back(it->path().filename().string());
    if (ec) fail(dir, "cannot list this folder: " + ec.message());
    std::sort(names.begin(), names.end());
    size_t n = 0;
    for (const std::string& name : names) {
      if (stopped) break;
      const std::string p = join(dir, name);
      const fs::file_status link = fs::symlink_status(p, ec);
      if (fs::is_directory(link)) {
        if (depth < limits.max_depth) n += folder(p, depth + 1);
        else too_deep.push_back(p);
        continue;
      }
      n += entry(p, link);
    }
    return n;
  }
  // An entry that is not a folder: a file, or a link to anything.
  size_t entry(const std::string& p, const fs::file_status& link) {
    if (considered >= limits.max_files) {
      stopped = true;
      return 0;
    }
    ++considered;
    std::error_code ec;
    const fs::file_status st = fs::status(p, ec);
    if (fs::is_directory(st)) return 0;  // a link to a folder: not followed
    if (fs::is_regular_file(st)) return file(p);
    if (!of_kind(p, kind)) {
      skipped.push_back(p);
      return 0;
    }
    // Named as an input but not a regular file: a rank that cannot be read.
    found.push_back(p);
    unreadable[p] = ec && ec != std::errc::no_such_file_or_directory ? "cannot be examined: " + ec.message()
                    : fs::is_symlink(link) && !fs::exists(st) ? "a dangling symbolic link (its target does not exist)"
                    : fs::is_fifo(st)                       ? "a named pipe (FIFO), not a regular file: not read"
                    : fs::is_socket(st)                     ? "a socket, not a regular file: not read"
                    : fs::is_character_file(st) || fs::is_block_file(st) ? "a device, not a regular file: not read"
                                                                         : "not a regular file: not read";
    return 1;
  }
  size_t file(const std::string& p) {
    if (of_kind(p, kind)) {
      found.push_back(p);
      return 1;
    }
    skipped.push_back(p);
    return 0;
  }
  std::map<std::string, std::string> unreadable;  // path -> why, of those found
};

bool has_pattern(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

// Whether a "B_N" name may be Megatron's {base}_{rank}: not when N follows
// another number ("mem_2024_01_05", a date or a time) or a word that names
// what a number counts ("run_bs_32", "mem_step_3", "model_v_2", "tp_4").
bool rank_like_base(const std::string& base) {
  // A number after - _ . (or the whole name a number).
  size_t d = base.size();
  while (d > 0 && is_digit(base[d - 1])) --d;
  if (d < base.size() && (d == 0 || is_sep(base[d - 1]))) return false;
  static const std::set<std::string> counts = {
      "bs",   "mbs",  "gbs", "batch", "seq",   "seqlen", "len",  "length", "step", "steps", "iter",
      "iteration", "epoch", "v",     "ver",   "version", "size", "layers", "n",    "mb",    "gb",
      "kb",   "tp",   "pp",  "dp",    "cp",    "ep",     "sp",   "run",    "try",  "trial", "seed"};
  const size_t cut = base.find_last_of("-_.");
  return counts.count(cut == std::string::npos ? base : base.substr(cut + 1)) == 0;
}

// Megatron's {base}_{rank}{ext}: files of one folder whose names tell no
// rank, all "B_N" for one B and distinct N (at least two of them): N is the
// rank. A lone "model_2.pickle", or files of different bases, tell none.
void shared_base_ranks(std::vector<RankFile>& files) {
  std::map<std::string, std::vector<size_t>> by_folder;
  for (size_t i = 0; i < files.size(); ++i)
    if (files[i].name.rank < 0) by_folder[fs::path(files[i].path).parent_path().string()].push_back(i);
  for (const auto& [dir, idx] : by_folder) {
    if (idx.size() < 2) continue;
    std::string base;
    std::set<int> seen;
    std::vector<int> ranks;
    bool ok = true;
    for (size_t i : idx) {
      const std::string s = stem(lower(fs::path(files[i].path).filename().string()));
      // "B_N": N the digits at the end (1 to 6), B before the '_' (not
      // ending in another '_').
      size_t d = s.size();
      while (d > 0 && is_digit(s[d - 1])) --d;
      const size_t nd = s.size() - d;
      const bool shaped = nd >= 1 && nd <= 6 && d >= 2 && s[d - 1] == '_' && s[d - 2] != '_';
      const std::string b = shaped ? s.substr(0, d - 1) : std::string();
      if (!shaped || (!base.empty() && b != base) || !rank_like_base(b)) {
        ok = false;
        break;
      }
      base = b;
      const int r = int(number(s.substr(d), 6));
      if (!seen.insert(r).second) {
        ok = false;
        break;
      }
      ranks.push_back(r);
    }
    if (!ok) continue;
    for (size_t k = 0; k < idx.size(); ++k) {
      files[idx[k]].name.rank = ranks[k];
      files[idx[k]].name.layout = "megatron";
    }
  }
}

}  // namespace

RankFileSet select_rank_files(std::vector<RankFile> files) {
  shared_base_ranks(files);

  // One file per rank: the latest step, its OOM dump before its regular one,
  // then the first by path.
  auto better = [](const RankFile& a, const RankFile& b) {
    return std::make_tuple(-a.name.step, !a.name.oom, a.path) < std::make_tuple(-b.name.step, !b.name.oom, b.path);
  };
  std::stable_sort(files.begin(), files.end(), [&](const RankFile& a, const RankFile& b) {
    const bool at = a.name.rank >= 0, bt = b.name.rank >= 0;
    if (at != bt) return at;
    if (!at) return a.path < b.path;
    if (a.name.rank != b.name.rank) return a.name.rank < b.name.rank;
    return better(a, b);
  });
  RankFileSet out;
  for (RankFile& f : files) {
    if (f.name.rank >= 0 && !out.files.empty() && out.files.back().name.rank == f.name.rank)
      out.superseded.push_back(std::move(f));
    else
      out.files.push_back(std::move(f));
  }
  std::sort(out.superseded.begin(), out.superseded.end(),
            [](const RankFile& a, const RankFile& b) { return a.path < b.path; });
  return out;
}

RankFileSet find_rank_files(const std::vector<std::string>& args, RankInputs kind, const WalkLimits& limits) {
  if (args.empty()) throw UsageError("no file or folder given");
  Walk walk{kind, limits, {}, {}, {}, 0, false, {}};
  for (const std::string& arg : args) {
    std::error_code ec;
    const std::string last = fs::path(arg).filename().string();
    if (has_pattern(last) && !fs::exists(fs::symlink_status(arg, ec))) {
      std::string dir = fs::path(arg).parent_path().string();
      if (!dir.empty() && !fs::is_directory(dir, ec)) fail(dir, "no such folder (for the pattern " + arg + ")");
      std::vector<std::string> names;
      for (fs::directory_iterator it(dir.empty() ? "." : dir, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (fnmatch(last.c_str(), name.c_str(), FNM_PERIOD) == 0) names.push_back(name);
      }
      if (ec) fail(dir.empty() ? "." : dir, "cannot list this folder: " + ec.message());
      std::sort(names.begin(), names.end());
      size_t n = 0;
      for (const std::string& name : names) {
        const std::string p = dir.empty() ? name : join(dir, name);
        const fs::file_status link = fs::symlink_status(p, ec);
        if (fs::is_directory(link))
          n += walk.folder(p, 1);
        else
          n += walk.entry(p, link);
      }
      if (names.empty()) fail(arg, "the pattern matches no file");
      if (n == 0) fail(arg, kind == RankInputs::Summaries ? "the pattern matches no summary file (.json, .json.gz)"
                                                          : "the pattern matches no snapshot file (.pickle, .pkl, "
                                                            ".snap, .trace.json, each also .gz)");
      continue;
    }
    const fs::file_status st = fs::status(arg, ec);
    if (!fs::exists(st)) fail(arg, "no such file or folder");
    if (fs::is_directory(st)) {
      if (walk.folder(arg, 1) == 0) fail(arg, kind_words(kind));
    } else {
      walk.found.push_back(arg);  // a file named is taken whatever its name
    }
  }

  // The same file reached twice (named, and inside a folder named) is read once.
  std::vector<RankFile> files;
  std::set<std::string> seen;
  for (const std::string& p : walk.found) {
    std::error_code ec;
    fs::path key = fs::weakly_canonical(p, ec);
    if (!seen.insert(ec ? p : key.string()).second) continue;
    auto why = walk.unreadable.find(p);
    files.push_back({p, rank_from_name(p), why == walk.unreadable.end() ? std::string() : why->second});
  }
  RankFileSet out = select_rank_files(std::move(files));
  out.too_deep = std::move(walk.too_deep);
  out.walk_stopped = walk.stopped;
  out.skipped = std::move(walk.skipped);
  std::sort(out.skipped.begin(), out.skipped.end());
  out.skipped.erase(std::unique(out.skipped.begin(), out.skipped.end()), out.skipped.end());
  return out;
}

}  // namespace snapdiff
