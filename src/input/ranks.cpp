// Finding the per-rank files of a multi-GPU run (snapdiff/input/ranks.hpp;
// docs/ranks.md, "Finding the ranks"). Names only: no file is opened here.
#include "snapdiff/input/ranks.hpp"

#include <fnmatch.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <regex>
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

// The step a name gives: "step_20", "step20", "iteration_20", "iter-20",
// bounded by a non-letter before and a non-digit after.
int64_t step_in(const std::string& s) {
  static const std::regex re("(^|[^a-z])(step|iteration|iter)[-_]?([0-9]+)(?![0-9])");
  std::smatch m;
  if (std::regex_search(s, m, re)) return number(m[3].str(), 18);
  return -1;
}

bool oom_in(const std::string& s) {
  static const std::regex re("(^|[^a-z])oom([^a-z]|$)");
  return std::regex_search(s, re);
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
  // a rank ("rank3", "rank_3") gives the rank when the file's name gives none.
  static const std::regex step_dir("(step|iteration|iter)[-_]?([0-9]+)(_exit)?");
  static const std::regex rank_dir("rank[-_]?([0-9]+)");
  // Megatron's oom_rank-{rank}_{path} when the path has folders:
  // "oom_rank-3_out/snapshot.pickle".
  static const std::regex oom_rank_dir("oom_rank-([0-9]{1,6})_.*");
  int folder_rank = -1;
  bool folder_megatron = false;
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
    const std::string dir = lower(*it);
    std::smatch m;
    if (out.step < 0 && std::regex_match(dir, m, step_dir)) {
      out.step = number(m[2].str(), 18);
      if (m[3].matched) out.oom = true;
    }
    if (folder_rank < 0 && std::regex_match(dir, m, rank_dir)) folder_rank = int(number(m[1].str(), 6));
    if (folder_rank < 0 && std::regex_match(dir, m, oom_rank_dir)) {
      folder_rank = int(number(m[1].str(), 6));
      folder_megatron = true;
      out.oom = true;
    }
  }

  // The file's name, strongest pattern first (ranks.hpp lists them).
  static const std::regex titan_now("^([0-9]{1,6})_step_([0-9]+)(\\.|$)");
  static const std::regex titan_old("^rank([0-9]{1,6})_memory_snapshot(\\.|$)");
  static const std::regex megatron_oom_prefix("^oom_rank-([0-9]{1,6})_");
  static const std::regex megatron_oom_suffix("_oom_rank[-_]([0-9]{1,6})(\\.|$)");
  static const std::regex rank_word("(^|[^a-z])rank[-_]?([0-9]{1,6})(?![0-9])");
  static const std::regex composer("^rank([0-9]{1,6})\\.([0-9]+)\\.");
  static const std::regex r_token("(^|[-_.])r([0-9]{1,6})(?=[-_.]|$)");
  const std::string base = stem(name);
  std::smatch m;
  if (std::regex_search(name, m, titan_now)) {
    out.rank = int(number(m[1].str(), 6));
    out.step = number(m[2].str(), 18);
    out.layout = "torchtitan";
  } else if (std::regex_search(name, m, titan_old)) {
    out.rank = int(number(m[1].str(), 6));
    out.layout = "torchtitan";
  } else if (std::regex_search(name, m, megatron_oom_prefix) || std::regex_search(name, m, megatron_oom_suffix)) {
    out.rank = int(number(m[1].str(), 6));
    out.oom = true;
    out.layout = "megatron";
  } else if (std::regex_search(name, m, rank_word)) {
    out.rank = int(number(m[2].str(), 6));
    out.layout = "rank";
    std::smatch c;
    if (std::regex_search(name, c, composer)) out.step = number(c[2].str(), 18);  // Composer's batch
  } else if (std::regex_search(base, m, r_token)) {
    out.rank = int(number(m[2].str(), 6));
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
  std::vector<std::string> found;    // files of the kind, as reached
  std::vector<std::string> skipped;  // other files

  // Walks a folder: its entries in name order, sub-folders to `depth` 16,
  // links to files followed, links to folders not. Returns how many files
  // of the kind it found.
  size_t folder(const std::string& dir, int depth) {
    std::error_code ec;
    std::vector<std::string> names;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
      names.push_back(it->path().filename().string());
    if (ec) fail(dir, "cannot list this folder: " + ec.message());
    std::sort(names.begin(), names.end());
    size_t n = 0;
    for (const std::string& name : names) {
      const std::string p = join(dir, name);
      const fs::file_status link = fs::symlink_status(p, ec);
      if (fs::is_directory(link)) {
        if (depth < 16) n += folder(p, depth + 1);
        continue;
      }
      if (!fs::is_regular_file(fs::status(p, ec))) continue;  // a link to a folder, a dangling link, a device
      n += file(p);
    }
    return n;
  }
  size_t file(const std::string& p) {
    if (of_kind(p, kind)) {
      found.push_back(p);
      return 1;
    }
    skipped.push_back(p);
    return 0;
  }
};

bool has_pattern(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

// Whether a "B_N" name may be Megatron's {base}_{rank}: not when N follows
// another number ("mem_2024_01_05", a date or a time) or a word that names
// what a number counts ("run_bs_32", "mem_step_3", "model_v_2", "tp_4").
bool rank_like_base(const std::string& base) {
  static const std::regex number_before(".*[-_.][0-9]+|[0-9]+");
  if (std::regex_match(base, number_before)) return false;
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
  static const std::regex re("(.*[^_])_([0-9]{1,6})");
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
      std::smatch m;
      if (!std::regex_match(s, m, re) || (!base.empty() && m[1].str() != base) || !rank_like_base(m[1].str())) {
        ok = false;
        break;
      }
      base = m[1].str();
      const int r = int(number(m[2].str(), 6));
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

RankFileSet find_rank_files(const std::vector<std::string>& args, RankInputs kind) {
  if (args.empty()) throw UsageError("no file or folder given");
  Walk walk{kind, {}, {}};
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
        if (fs::is_directory(fs::symlink_status(p, ec)))
          n += walk.folder(p, 1);
        else if (fs::is_regular_file(fs::status(p, ec)))
          n += walk.file(p);
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
    files.push_back({p, rank_from_name(p)});
  }
  RankFileSet out = select_rank_files(std::move(files));
  out.skipped = std::move(walk.skipped);
  std::sort(out.skipped.begin(), out.skipped.end());
  out.skipped.erase(std::unique(out.skipped.begin(), out.skipped.end()), out.skipped.end());
  return out;
}

}  // namespace snapdiff
