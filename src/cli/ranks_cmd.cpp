// Many ranks: `snapdiff report DIR` (and several files or a pattern), the
// reduce step `snapdiff ranks SUMMARY...`, and `snapdiff DIR_A DIR_B`
// (docs/ranks.md). The ranks are read by map_ranks(); each becomes its view
// and its trace is released before that thread reads the next.
#include <glob.h>
#include <sys/stat.h>

#include <boost/program_options.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_util.hpp"
#include "cli/commands.hpp"
#include "cli/rank_map.hpp"
#include "snapdiff/report/explorer.hpp"
#include "cli/pair.hpp"
#include "cli/ranks_cmd.hpp"
#include "snapdiff/analysis/analysis.hpp"
#include "snapdiff/analysis/diff.hpp"
#include "snapdiff/analysis/ranks.hpp"
#include "snapdiff/error.hpp"
#include "snapdiff/input/input.hpp"
#include "snapdiff/input/ranks.hpp"
#include "snapdiff/report/ranks_report.hpp"
#include "snapdiff/report/report_read.hpp"
#include "input/memory_budget.hpp"
#include "util/read_file.hpp"

namespace po = boost::program_options;

namespace snapdiff::cli {

namespace {

bool is_directory(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
bool exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}
// A pattern for many ranks: its last component has * or ?, or a [...]
// class that matches some file (a name with brackets that matches nothing
// is one missing file, reported as such).
bool is_pattern(const std::string& p) {
  const size_t slash = p.rfind('/');
  const size_t from = slash == std::string::npos ? 0 : slash + 1;
  if (p.find_first_of("*?", from) != std::string::npos) return true;
  if (p.find('[', from) == std::string::npos) return false;
  glob_t g{};
  const bool any = ::glob(p.c_str(), GLOB_NOSORT, nullptr, &g) == 0 && g.gl_pathc > 0;
  ::globfree(&g);
  return any;
}

RankEntry entry_of(const RankFile& f) {
  RankEntry e;
  e.name = f.path;
  e.rank = f.name.rank;
  if (f.name.rank >= 0) e.rank_from = f.name.layout.empty() ? "name" : "name (" + f.name.layout + ")";
  e.step = f.name.step;
  e.oom_file = f.name.oom;
  return e;
}

std::string thousands(uint64_t n) {
  std::string d = std::to_string(n), out;
  for (size_t i = 0; i < d.size(); ++i) {
    if (i > 0 && (d.size() - i) % 3 == 0) out += ',';
    out += d[i];
  }
  return out;
}

// What the walk of the folders left out, in one line on stderr (so the
// report itself is the same whichever path, direct or reduce, made it):
// "snapdiff: note: skipped 1,693 files: 1,650 are not snapshots by their
// name (x.log, ...); 43 are earlier steps of a rank (...)"; folders deeper
// than kMaxWalkDepth and a walk stopped at kMaxWalkFiles are said too.
void note_walk(const RankFileSet& set, const char* what) {
  const size_t files = set.skipped.size() + set.superseded.size();
  if (files == 0 && set.too_deep.empty() && !set.walk_stopped) return;
  auto first = [](const std::string& p, size_t n) { return " (" + escape_for_terminal(p) + (n > 1 ? ", ..." : "") + ")"; };
  std::vector<std::string> parts;
  if (!set.skipped.empty())
    parts.push_back(thousands(set.skipped.size()) + (set.skipped.size() == 1 ? " is" : " are") + " not " + what +
                    " by " + (set.skipped.size() == 1 ? "its" : "their") + " name, not read" +
                    first(set.skipped[0], set.skipped.size()));
  if (!set.superseded.empty())
    parts.push_back(thousands(set.superseded.size()) + (set.superseded.size() == 1 ? " is" : " are") +
                    " superseded by a later step of the same rank (or its OOM dump)" +
                    first(set.superseded[0].path, set.superseded.size()));
  if (!set.too_deep.empty())
    parts.push_back(thousands(set.too_deep.size()) + (set.too_deep.size() == 1 ? " folder" : " folders") +
                    " deeper than " + std::to_string(kMaxWalkDepth) + " levels not walked" +
                    first(set.too_deep[0], set.too_deep.size()));
  if (set.walk_stopped)
    parts.push_back("the walk stopped after " + thousands(kMaxWalkFiles) + " files: the rest was not looked at");
  std::string line = "snapdiff: note: skipped " + thousands(files) + (files == 1 ? " file: " : " files: ");
  for (size_t i = 0; i < parts.size(); ++i) line += (i ? "; " : "") + parts[i];
  line += "\n";
  std::fputs(line.c_str(), stderr);
}

// The ranks that could not be read: one error line each on stderr; exit 3
// unless --skip-bad-ranks.
int failed_ranks_code(const std::vector<std::string>& errors, bool skip_bad) {
  for (const std::string& e : errors) print_error(e);
  return errors.empty() || skip_bad ? kExitOk : kExitInput;
}

// A summary's bytes as stored: at most max_text (a gzip'd one is smaller
// than its text), and within a memory share when there is one.
std::string read_summary_file(const std::string& path, uint64_t max_text, uint64_t share) {
  const uint64_t by_memory = share == 0 ? UINT64_MAX : share / kSummaryMemoryPerByte;
  struct stat st {};
  if (by_memory < max_text && ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
      uint64_t(st.st_size) > by_memory) {
    InputError e("reading this summary (" + std::to_string(st.st_size) + " bytes) needs more than the " +
                 detail::memory_text(share) + " of memory it may use (raise the limit with --max-memory)");
    e.set_file(path);
    throw e;
  }
  return detail::read_small_file(path, "summary", max_text);
}

void check_format(const std::string& fmt) {
  if (fmt != "text" && fmt != "json" && fmt != "markdown" && fmt != "html")
    throw UsageError("unknown --format '" + fmt + "' for many ranks (text, json, markdown, html)");
}

std::string known_ranks(const std::vector<RankEntry>& rs) {
  std::string s;
  size_t n = 0;
  for (const RankEntry& e : rs)
    if (e.rank >= 0 && e.report) s += (n++ ? ", " : "") + std::to_string(e.rank);
  return n ? s : "none told";
}

// Renders the view, writes it, reports the ranks that failed.
int finish_ranks(const po::variables_map& vm, std::vector<RankEntry> entries, std::vector<std::string> superseded,
                 const RanksOptions& ro) {
  const std::string fmt = vm["format"].as<std::string>();
  // Files with no rank id whose recordings do not look like one job: a
  // table of separate runs, not an imbalance.
  if (const NotOneJob j = judge_one_job(entries); j.not_one_job) {
    if (ro.shown_rank >= 0)
      throw UsageError("--rank " + std::to_string(ro.shown_rank) + ": no rank was read (" + separate_runs_line(entries, j) + ")");
    const std::string text = fmt == "json"       ? render_runs_json(entries, j)
                             : fmt == "markdown" ? render_runs_markdown(entries, j)
                             : fmt == "html"     ? render_runs_html(entries, j)
                                                 : render_runs_text(entries, j, text_width(vm));
    write_output(text, vm.count("output") ? vm["output"].as<std::string>() : "");
    std::vector<std::string> errors;
    for (const RankEntry& e : entries)
      if (!e.error.empty()) errors.push_back(e.error);
    return failed_ranks_code(errors, vm.count("skip-bad-ranks") > 0);
  }
  RanksView v = build_ranks_view(std::move(entries), std::move(superseded), ro);
  if (ro.shown_rank >= 0 && v.shown == SIZE_MAX)
    throw UsageError("--rank " + std::to_string(ro.shown_rank) + ": no rank of that number was read (ranks read: " +
                     known_ranks(v.ranks) + ")");
  const std::string text = fmt == "json"       ? render_ranks_json(v)
                           : fmt == "markdown" ? render_ranks_markdown(v)
                           : fmt == "html"     ? render_ranks_html(v)
                                               : render_ranks_text(v, text_width(vm));
  write_output(text, vm.count("output") ? vm["output"].as<std::string>() : "");
  std::vector<std::string> errors;
  for (const RankEntry& e : v.ranks)
    if (!e.error.empty()) errors.push_back(e.error);
  return failed_ranks_code(errors, vm.count("skip-bad-ranks") > 0);
}

RanksOptions ranks_options(const po::variables_map& vm, size_t top, size_t depth) {
  RanksOptions ro;
  if (vm.count("rank")) ro.shown_rank = int(count_arg(vm, "rank", "--rank", 1u << 30));
  ro.diff.top_sites = top;
  ro.diff.depth = depth;
  return ro;
}

}  // namespace

void add_rank_options(po::options_description& d) {
  d.add_options()("jobs,j", po::value<std::string>(), "ranks read at once (default: the machine's cores); diff A B and check BASELINE CANDIDATE: "
                                                      "-j 1 reads the two runs one after the other")(
      "rank", po::value<std::string>(), "show this rank's full report (default: the worst rank)")(
      "skip-bad-ranks", "exit 0 when some ranks cannot be read (they are listed with their errors either way)");
}

bool is_ranks_input(const std::vector<std::string>& inputs) {
  if (inputs.size() != 1) return inputs.size() > 1;
  const std::string& p = inputs[0];
  return is_directory(p) || (!exists(p) && is_pattern(p));
}

int report_ranks(const po::variables_map& vm, const std::vector<std::string>& inputs, const ReportOptions& base,
                 size_t top, size_t depth) {
  check_format(vm["format"].as<std::string>());
  text_width(vm);  // a bad --width fails before any file is read
  const RanksOptions ro = ranks_options(vm, top, depth);
  const unsigned jobs = jobs_arg(vm);
  const LoadOptions lo = load_options(vm, vm.count("tensors") ? 2u : 1u);  // ranks: each its own list
  RankFileSet set;
  try {
    set = find_rank_files(inputs, RankInputs::Snapshots);
  } catch (const InputError& e) {
    // A folder of the map step's summaries, given to report: say what reads them.
    bool summaries = false;
    try {
      summaries = !find_rank_files(inputs, RankInputs::Summaries).files.empty();
    } catch (const InputError&) {
    }
    if (!summaries) throw;
    InputError hinted(std::string(e.what()) + " (it holds summaries: `snapdiff ranks` reads them)");
    hinted.set_file(e.file());
    throw hinted;
  }
  note_walk(set, "snapshots");
  std::vector<RankEntry> entries;
  std::vector<std::string> paths;
  for (const RankFile& f : set.files) {
    entries.push_back(entry_of(f));
    paths.push_back(f.path);
  }
  // HTML to a file: each rank's explorer is a page in a folder beside it
  // (PAGE.html -> PAGE_ranks/rank-N.html).
  const std::string out = vm.count("output") ? vm["output"].as<std::string>() : "";
  std::string pages_dir, pages_rel;
  if (vm["format"].as<std::string>() == "html" && !out.empty() && out != "-") {
    std::string stem = out;
    if (stem.size() > 5 && stem.compare(stem.size() - 5, 5, ".html") == 0) stem.resize(stem.size() - 5);
    pages_dir = stem + "_ranks";
    pages_rel = pages_dir.substr(pages_dir.rfind('/') == std::string::npos ? 0 : pages_dir.rfind('/') + 1);
    if (::mkdir(pages_dir.c_str(), 0777) != 0 && errno != EEXIST)
      throw OutputError(pages_dir, "cannot make the folder " + pages_dir + " for the ranks' pages: " + std::strerror(errno));
  }
  map_ranks(
      set.files, jobs, lo,
      [&](size_t i, Trace& t) {
        ReportOptions o = base;
        o.input_name = paths[i];
        o.threads = 1;  // the ranks are the parallelism (-j 1: one thread, never one started per rank)
        Analysis a = analyze(t, o);
        if (!pages_dir.empty()) {
          ExplorerOptions eo;
          eo.site_depth = o.site_depth;
          const std::string name = (entries[i].rank >= 0 ? "rank-" + std::to_string(entries[i].rank) : "file-" + std::to_string(i)) + ".html";
          const std::string title = entries[i].rank >= 0 ? "snapdiff: rank " + std::to_string(entries[i].rank) : "snapdiff: " + paths[i];
          write_output(render_explorer_html(title, paths[i], "../" + out.substr(out.rfind('/') == std::string::npos ? 0 : out.rfind('/') + 1),
                                            explorer_report_data(a, t, paths[i], title, eo)),
                       pages_dir + "/" + name);
          entries[i].explorer_page = pages_rel + "/" + name;
        }
        entries[i].report = report_view(std::move(a));
        return view_memory_bytes(*entries[i].report);
      },
      [&](size_t i, const InputError& e) {
        entries[i].report.reset();
        entries[i].error = e.describe();
        entries[i].exit_code = kExitInput;
      },
      render_factor_of(vm["format"].as<std::string>()));
  std::vector<std::string> superseded;
  for (const RankFile& f : set.superseded) superseded.push_back(f.path);
  return finish_ranks(vm, std::move(entries), std::move(superseded), ro);
}

int cmd_ranks(const std::vector<std::string>& args) {
  po::options_description d(
      "snapdiff ranks SUMMARY... [options]\n\n"
      "The reduce step: the report of many ranks from the JSON each rank's\n"
      "`snapdiff report FILE --format json` wrote (files, folders or patterns),\n"
      "the same report `snapdiff report DIR` gives from the snapshots.\n\nOptions");
  d.add_options()("help,h", "show this help")(
      "format,f", po::value<std::string>()->default_value("text"), "output format: text | json | markdown | html")(
      "output,o", po::value<std::string>(), "write the report to this file instead of stdout")(
      "top,n", po::value<std::string>()->default_value("10"), "sites in the worst-against-median diff, 0 to 10000000 (as "
                                                                "`report DIR -n`; at most the rows each summary kept)")(
      "depth", po::value<std::string>(), "frames per site row of that diff (default 1; 0: the whole stack)");
  add_width_option(d);
  add_rank_options(d);
  add_input_options(d);
  po::variables_map vm = parse_command(args, d);
  if (vm.count("help")) {
    std::ostringstream help;
    help << d << "\nThe JSON output is described by schemas/ranks.schema.json; docs/ranks.md has worked examples\n"
                 "for Slurm job arrays, Kubernetes Indexed Jobs and GNU parallel.\n";
    write_stdout(help.str());
    return kExitOk;
  }
  const std::vector<std::string> in = inputs(vm);
  if (in.empty()) throw UsageError("ranks needs the summaries: SUMMARY.json files, or folders of them");
  check_format(vm["format"].as<std::string>());
  text_width(vm);  // a bad --width fails before any file is read
  const size_t top = size_t(count_arg(vm, "top", "-n/--top", kMaxTopSites));
  const RanksOptions ro = ranks_options(vm, top, depth_arg(vm, 1));
  const unsigned jobs = jobs_arg(vm);
  RankFileSet set = find_rank_files(in, RankInputs::Summaries);
  note_walk(set, "summaries");
  // Each summary names the snapshot it summarizes: the rank, step and OOM
  // mark come from that name, as in the direct read.
  const size_t n = set.files.size();
  std::vector<RankEntry> read(n);
  std::vector<char> ok(n, 0);
  // The memory bound is shared by the threads and the summaries kept (as
  // map_ranks shares it); a summary refused for memory under its share is
  // read again after the others, alone.
  const LoadOptions lo = load_options(vm);
  const uint64_t max_text = std::min<uint64_t>(kMaxSummaryBytes, lo.max_decoded_bytes);
  const unsigned threads = unsigned(std::min<size_t>(std::max(jobs, 1u), std::max<size_t>(n, 1)));
  KeptViews kept(lo.max_memory_bytes, render_factor_of(vm["format"].as<std::string>()));
  std::vector<char> retry(n, 0);
  auto attempt = [&](size_t i, unsigned sharing, bool may_retry) {
    const std::string& path = set.files[i].path;
    try {
      if (!set.files[i].unreadable.empty()) throw unreadable_error(set.files[i]);
      const uint64_t share = kept.share(sharing);
      std::string bytes = read_summary_file(path, max_text, share);
      Report r = read_summary(bytes, path, max_text, share);
      bytes = std::string();
      kept.keep(view_memory_bytes(r));
      read[i].name = r.input_name;  // its rank is told below, by the same selection as the direct read
      read[i].report = std::move(r);
      ok[i] = 1;
    } catch (const InputError& e) {
      if (may_retry && refused_for_memory(e)) {
        retry[i] = 1;
        return;
      }
      read[i] = entry_of(set.files[i]);
      InputError copy = e;
      if (copy.file().empty()) copy.set_file(path);
      read[i].error = copy.describe();
      read[i].exit_code = kExitInput;
    }
  };
  map_indices(
      n, threads, [&](size_t i) { attempt(i, threads, threads > 1 && lo.max_memory_bytes != 0); },
      [&](size_t, const InputError&) {});
  for (size_t i = 0; i < n; ++i)
    if (retry[i]) attempt(i, 1, false);
  // The same choice of one file per rank as the direct read, on the
  // snapshots' names.
  std::vector<RankFile> named;
  std::vector<size_t> index_of;
  std::vector<RankEntry> entries;
  for (size_t i = 0; i < n; ++i) {
    if (!ok[i]) {
      entries.push_back(std::move(read[i]));
      continue;
    }
    named.push_back({read[i].name, rank_from_name(read[i].name), {}});
    index_of.push_back(i);
  }
  RankFileSet chosen = select_rank_files(named);
  std::vector<char> keep(n, 0);
  for (const RankFile& f : chosen.files)
    for (size_t k = 0; k < named.size(); ++k) {
      const size_t i = index_of[k];
      if (named[k].path != f.path || keep[i]) continue;
      keep[i] = 1;
      RankEntry e = entry_of(f);  // the rank as the selection told it (a shared base names it too)
      e.report = std::move(read[i].report);
      entries.push_back(std::move(e));
      break;
    }
  std::vector<std::string> superseded;
  for (const RankFile& f : chosen.superseded) superseded.push_back(f.path);
  return finish_ranks(vm, std::move(entries), std::move(superseded), ro);
}

int diff_ranks(const po::variables_map& vm, const std::vector<std::string>& a_in, const std::vector<std::string>& b_in,
               const RuleSet& rules, size_t top, size_t depth) {
  const std::string fmt = vm["format"].as<std::string>();
  if (fmt != "text" && fmt != "json" && fmt != "markdown")
    throw UsageError("unknown --format '" + fmt + "' for two runs' ranks (text, json, markdown)");
  const RanksOptions ro = ranks_options(vm, top, depth);
  const unsigned jobs = jobs_arg(vm);
  RankFileSet sa = find_rank_files(a_in, RankInputs::Snapshots);
  RankFileSet sb = find_rank_files(b_in, RankInputs::Snapshots);
  note_walk(sa, "snapshots");
  note_walk(sb, "snapshots");
  // Rank r against rank r; files whose rank is not told, by position.
  std::vector<RankPair> pairs;
  std::vector<std::pair<const RankFile*, const RankFile*>> files;
  std::vector<int> only_a, only_b;
  std::vector<const RankFile*> ua, ub;
  for (const RankFile& f : sb.files)
    if (f.name.rank < 0) ub.push_back(&f);
  for (const RankFile& f : sa.files) {
    if (f.name.rank < 0) {
      ua.push_back(&f);
      continue;
    }
    const RankFile* match = nullptr;
    for (const RankFile& g : sb.files)
      if (g.name.rank == f.name.rank) match = &g;
    if (!match) {
      only_a.push_back(f.name.rank);
      continue;
    }
    files.push_back({&f, match});
  }
  for (const RankFile& g : sb.files) {
    if (g.name.rank < 0) continue;
    bool found = false;
    for (const RankFile& f : sa.files) found = found || f.name.rank == g.name.rank;
    if (!found) only_b.push_back(g.name.rank);
  }
  for (size_t k = 0; k < std::min(ua.size(), ub.size()); ++k) files.push_back({ua[k], ub[k]});
  if (files.empty())
    throw InputError("no rank is present in both runs (" + std::to_string(sa.files.size()) + " and " +
                     std::to_string(sb.files.size()) + " files found)");
  pairs.resize(files.size());
  for (size_t i = 0; i < files.size(); ++i) {
    pairs[i].rank = files[i].first->name.rank;
    pairs[i].a_name = files[i].first->path;
    pairs[i].b_name = files[i].second->path;
  }
  // Both runs of a pair are held at once: each read gets half a thread's
  // share of what the diffs kept leave (each holds both runs' views).
  const LoadOptions whole = load_options(vm, vm.count("tensors") ? 2u : 1u);
  const unsigned threads = std::max(1u, std::min<unsigned>(jobs, unsigned(files.size())));
  KeptViews kept(whole.max_memory_bytes, render_factor_of(fmt));
  map_indices(
      files.size(), threads,
      [&](size_t i) {
        RankPair& p = pairs[i];
        LoadOptions lo = whole;
        lo.progress = nullptr;
        if (threads > 1) lo.trace_reader_workers = 0, lo.pickle_read_ahead = 0;
        if (whole.max_memory_bytes != 0) lo.max_memory_bytes = std::max<uint64_t>(1, kept.share(threads) / 2);
        auto load = [&](const RankFile& f, std::string& err) -> std::optional<Trace> {
          try {
            if (!f.unreadable.empty()) throw unreadable_error(f);
            return load_trace(f.path, lo);
          } catch (InputError& e) {
            if (e.file().empty()) e.set_file(f.path);
            err = e.describe();
            return std::nullopt;
          }
        };
        std::optional<Trace> ta = load(*files[i].first, p.a_error);
        std::optional<Trace> tb = load(*files[i].second, p.b_error);
        if (!ta || !tb) return;
        ReportOptions o;
        o.rules = &rules;
        o.threads = 1;  // the pairs are the parallelism (-j 1: one thread)
        o.input_name = p.a_name;
        const Analysis aa = analyze(*ta, o);
        o.input_name = p.b_name;
        const Analysis ab = analyze(*tb, o);
        DiffOptions dopt = ro.diff;
        dopt.a_name = p.a_name;
        dopt.b_name = p.b_name;
        p.diff = diff_reports(aa, ab, dopt);
        try {
          kept.keep(view_memory_bytes(p.diff->a) + view_memory_bytes(p.diff->b) +
                    p.diff->sites.size() * (sizeof(SiteDelta) + 256));
        } catch (InputError& e) {
          p.diff.reset();
          e.set_file(p.b_name);
          p.b_error = e.describe();
        }
      },
      [&](size_t i, const InputError& e) { pairs[i].b_error = e.describe(); });
  RanksDiff d = build_ranks_diff(std::move(pairs), std::move(only_a), std::move(only_b), ro);
  if (ro.shown_rank >= 0 && d.shown == SIZE_MAX)
    throw UsageError("--rank " + std::to_string(ro.shown_rank) + ": no rank of that number was read in both runs");
  const std::string text = fmt == "json"       ? render_ranks_diff_json(d)
                           : fmt == "markdown" ? render_ranks_diff_markdown(d)
                                               : render_ranks_diff_text(d, text_width(vm));
  write_output(text, vm.count("output") ? vm["output"].as<std::string>() : "");
  std::vector<std::string> errors;
  for (const RankPair& p : d.pairs) {
    if (!p.a_error.empty()) errors.push_back(p.a_error);
    if (!p.b_error.empty()) errors.push_back(p.b_error);
  }
  return failed_ranks_code(errors, vm.count("skip-bad-ranks") > 0);
}

}  // namespace snapdiff::cli
