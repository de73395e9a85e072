// snapdiff/input/ranks.hpp — finding the per-rank files of a multi-GPU run.
//
// A run on many GPUs writes one snapshot per rank, in the layout of its
// launcher (docs/ranks.md, "Finding the ranks"):
//   torchtitan (older)    memory_snapshot/iteration_N/rankR_memory_snapshot.pickle
//   torchtitan (current)  profiling/memory_snapshot/step_{N:012d}/{R:06d}_step_N.pickle
//                         (an OOM in step_{N:012d}_exit/ or iteration_N_exit/)
//   Megatron-LM           {base}_{rank}{ext}, snapshot_{rank}.pickle, oom_rank-{rank}_{path}
//   Megatron-Bridge       {base}_{rank}{ext}, {base}_oom_rank-{rank}{ext}
//   Composer and others   rank{R}.{batch}...pickle, oom_rank{N}.pickle, snapshot_..._rank{N}.pickle
//   users                 rank-0_....pickle, rank_3.pickle, ..._r3.pickle
// The rank is told from the file's name (and the step or iteration from its
// folders); a file whose name tells none is listed by name (the analysis
// may still tell it from the device the snapshot records).
//
// The rules, case-insensitive, the first that applies wins:
//   1. {R}_step_{N}...              torchtitan (current): rank R, step N
//   2. rank{R}_memory_snapshot...   torchtitan (older)
//   3. oom_rank-{R}_..., ..._oom_rank_{R}.ext, ..._oom_rank-{R}.ext
//                                   Megatron-LM / Megatron-Bridge OOM dumps
//   4. "rank" then R, after a non-letter or at the start, with an optional
//      - or _ between ("rank3", "rank-0_x", "x_rank_3", "oom_rank4"); in
//      Composer's rank{R}.{batch}.... the batch is the step
//   5. a token "r{R}" between - _ . or the ends ("x_r3", "r3.pickle")
//   6. a folder named rank{R} / rank_{R} / rank-{R} (the innermost), or
//      oom_rank-{R}_... (Megatron's OOM dump of a snapshot path with folders)
//   7. (find_rank_files only) Megatron's {base}_{R}{ext}: at least two files
//      of one folder, none told by 1-6, all "B_{R}" for one B and distinct R,
//      B not ending in another number (dates: "mem_2024_01_05") nor in a word
//      that counts something ("bs", "step", "v", "tp", "seed", ...)
// R has 1 to 6 digits (a longer number is a date, a time or a size). gpu{N},
// device{N} and cuda{N} are not ranks: they name a device of a node, the
// same on every node. The step: from the name ("step_20", "iter-20",
// "iteration20") or else the innermost folder step_{N} / iteration_{N} /
// iter_{N} (also with _exit). The OOM mark: an "oom" in the name between
// non-letters, an *_exit folder, or an oom_rank-{R}_... folder.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace snapdiff {

// What a file's path says of the rank that wrote it.
struct RankName {
  int rank = -1;          // -1: the name tells none
  int64_t step = -1;      // the step or iteration its folder or name gives (-1: none)
  bool oom = false;       // an out-of-memory dump (oom in the name, or an *_exit folder)
  std::string layout;     // the convention that told the rank: "torchtitan" (1-2), "megatron" (3, 6, 7),
                          // "rank" (4-6); "" = none
};
// Reads the rank, step and OOM mark from a path (the folders and the file
// name). Pure: no file is opened.
RankName rank_from_name(std::string_view path);

struct RankFile {
  std::string path;  // as given, or the folder joined with the name found in it
  RankName name;
  // Why the file cannot be read, "" when it may be: an entry of a folder (or
  // a pattern's match) named as an input of the kind that is not a regular
  // file (a dangling symbolic link, a named pipe, a device, a socket). It is
  // a rank all the same, listed with this error (never opened: a FIFO would
  // block), as a corrupt rank is.
  std::string unreadable;
};

// What to look for in a folder.
enum class RankInputs : uint8_t {
  Snapshots,  // inputs of `snapdiff report`: *.pickle, *.pkl, *.snap, *.trace.json (each also .gz)
  Summaries,  // the map step's outputs: *.json (and .json.gz), *.truth.json and *.trace.json left out
};

// The bounds of a folder's walk (find_rank_files): sub-folders to this depth
// (the folder given is depth 1; deeper folders are listed in
// RankFileSet::too_deep, not walked), and at most this many files looked at
// over the whole walk (then it stops: RankFileSet::walk_stopped). A folder of
// ranks holds one file per rank and step, far fewer; a home folder or a
// dataset given by mistake is not read to its end.
inline constexpr int kMaxWalkDepth = 16;
inline constexpr uint64_t kMaxWalkFiles = 100000;
struct WalkLimits {
  int max_depth = kMaxWalkDepth;
  uint64_t max_files = kMaxWalkFiles;
};

struct RankFileSet {
  // One file per rank, by rank; files whose rank is not told last, by path.
  std::vector<RankFile> files;
  // Files found in folders but not read: other kinds of file (logs, truth
  // files, HTML), by path.
  std::vector<std::string> skipped;
  // Files of a rank already taken (an earlier step; a regular dump when the
  // same step has an OOM dump), by path: the latest step of each rank is
  // read, and its OOM dump before its regular one.
  std::vector<RankFile> superseded;
  // Folders deeper than kMaxWalkDepth, not walked, by path.
  std::vector<std::string> too_deep;
  // The walk stopped at kMaxWalkFiles files: the rest was not looked at.
  bool walk_stopped = false;
};

// The files to read of those found: one per rank (the latest step, an OOM
// dump before a regular one of the same step; files whose rank is not told
// all kept), the rest superseded. find_rank_files() ends with it; the reduce
// step applies it to the snapshot names its summaries carry.
RankFileSet select_rank_files(std::vector<RankFile> found);

// Expands the arguments: a folder is walked (sub-folders too, in name order,
// at most kMaxWalkDepth levels and kMaxWalkFiles files; symbolic links to files followed, to folders not;
// entries named as inputs that are not regular files are found with
// RankFile::unreadable set); a
// file is taken whatever its name; a pattern with * ? or [...] in its last
// component is matched in its folder. Throws InputError for a path that does
// not exist, a pattern that matches nothing, or a folder with no file of
// the kind asked for (UsageError for no argument). A file reached twice
// (named, and in a folder named) is taken once.
RankFileSet find_rank_files(const std::vector<std::string>& args, RankInputs kind, const WalkLimits& limits = {});

}  // namespace snapdiff
