// `snapdiff check BASELINE CANDIDATE` / `snapdiff check --budget FILE CANDIDATE`
// / `snapdiff check --max-peak SIZE CANDIDATE`: the CI gate on peak memory
// (docs/cli.md, docs/ci.md). Exit 0 within budget, 1 a threshold failed;
// usage and input errors are thrown to main() (exit 2, 3).
#include <boost/program_options.hpp>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli/cli_util.hpp"
#include "cli/commands.hpp"
#include "cli/pair.hpp"
#include "cli/rank_map.hpp"
#include "cli/ranks_cmd.hpp"
#include "snapdiff/analysis/ranks_check.hpp"
#include "snapdiff/input/ranks.hpp"
#include "snapdiff/analysis/attribution.hpp"
#include "snapdiff/input/budget_io.hpp"
#include "snapdiff/analysis/check.hpp"
#include "snapdiff/report/check_report.hpp"
#include "snapdiff/error.hpp"
#include "snapdiff/input/input.hpp"
#include "snapdiff/report/report.hpp"

namespace po = boost::program_options;

namespace snapdiff::cli {

namespace {

Amount amount_arg(const std::string& opt, const std::string& v) {
  auto a = parse_amount(v);
  if (!a) throw UsageError(opt + ": '" + v + "' is not a share or a size (e.g. 2%, 0.5%, 512MiB, 1.5GB)");
  return *a;
}

int64_t size_arg(const std::string& opt, const std::string& v) {
  auto b = parse_size(v);
  if (!b) throw UsageError(opt + ": '" + v + "' is not a size (e.g. 60GiB, 512MiB, 1.5GB, or bytes)");
  return *b;
}

// CATEGORY=SIZE or PHASE:CATEGORY=SIZE (the phase checked later, with the
// categories: check_limit_categories).
CategoryLimit limit_arg(const std::string& v) {
  size_t eq = v.find('=');
  if (eq == std::string::npos || eq == 0)
    throw UsageError("--limit: '" + v +
                     "' is not CATEGORY=SIZE or PHASE:CATEGORY=SIZE (e.g. optimizer_temporary=1GiB, "
                     "optimizer:optimizer_temporary=1GiB)");
  CategoryLimit l;
  l.category = v.substr(0, eq);
  if (size_t colon = l.category.find(':'); colon != std::string::npos) {
    l.phase = l.category.substr(0, colon);
    l.category = l.category.substr(colon + 1);
    if (l.phase.empty() || l.category.empty())
      throw UsageError("--limit: '" + v + "' is not PHASE:CATEGORY=SIZE (e.g. optimizer:optimizer_temporary=1GiB)");
  }
  l.text = v.substr(eq + 1);
  l.bytes = size_arg("--limit " + l.key(), l.text);
  return l;
}

// A run's figures; `truncation`, when given, gets why its history is
// truncated (none when it is not). `pair`: read as side `side` of two reads
// at once (their progress on one line).
PeakFigures analyze(const std::string& path, const LoadOptions& lo, const RuleSet& rules,
                    Truncation* truncation = nullptr, const std::string& kernels = "", PairProgress* pair = nullptr,
                    int side = 0) {
  // Its trace is gone before the function returns.
  Trace t = pair ? pair->load(side, path, lo) : load_input(path, lo);
  Joins joins;
  if (!kernels.empty()) {
    Joined<KernelJoin> j = join_kernels(std::move(t), path, kernels, lo);
    t = std::move(j.trace);
    joins.kernels = std::move(j.join);
  }
  ReportOptions ro;
  ro.top_sites = 16;
  ro.input_name = path;
  ro.rules = &rules;
  ro.threads = pair ? 1 : 2;  // two runs at once are the parallelism
  const Analysis a = analyze(t, ro, std::move(joins));
  if (truncation) *truncation = a.truncation;
  return peak_figures(a);
}

// Why a budget cannot be written from a run whose history is not complete,
// and how to record one that is: "its history is truncated (the ring buffer
// wrapped)" and "record with a larger max_entries".
std::pair<std::string, std::string> incomplete_history_words(const PeakFigures& run, Truncation truncation) {
  if (run.history == "none")
    return {"it has no allocation history", "record it with torch.cuda.memory._record_memory_history"};
  if (run.format == "chrome-trace")
    return {"the profiler started with memory already allocated", "profile from the start of the run"};
  switch (truncation) {
    case Truncation::LateStart:
      return {"its history is truncated (recording started late, after memory was already in use)",
              "call _record_memory_history before the model is built"};
    case Truncation::Wrapped:
      return {"its history is truncated (the ring buffer wrapped)", "record with a larger max_entries"};
    case Truncation::None:
    case Truncation::Unknown: break;
  }
  return {"its history is " + run.history + " (recording started late or the ring buffer wrapped)",
          "record from the start of the run with a larger max_entries"};
}

const char* kCheckHelpTail =
    "\nThresholds (at least one; a --budget file brings its own):\n"
    "  --max-increase 2% | 512MiB   the peak may rise this much over the baseline\n"
    "  --warn-increase 1%           warn (exit 0) above this, below --max-increase\n"
    "  --max-peak 60GiB             absolute ceiling on the peak, no baseline needed\n"
    "  --limit CATEGORY=SIZE        ceiling on a category's largest bytes over the run\n"
    "  --limit PHASE:CATEGORY=SIZE  ... within one phase kind (init, forward, backward,\n"
    "                               optimizer, other); --limit is repeatable\n"
    "  --max-growth 100MiB          ceiling on the memory growth per iteration\n"
    "Sizes: B, KiB, MiB, GiB, TiB (binary) or kB, MB, GB, TB (decimal), e.g. 1.5GB.\n"
    "\nExamples:\n"
    "  snapdiff check --max-increase 2% baseline.pickle run.pickle\n"
    "  snapdiff check --max-peak 60GiB --limit optimizer_temporary=1GiB run.pickle\n"
    "  snapdiff check --limit optimizer:optimizer_temporary=1GiB run.pickle\n"
    "  snapdiff check --write-budget memory-budget.json run.pickle\n"
    "  snapdiff check --budget memory-budget.json --junit check.xml run.pickle\n"
    "\nExit codes: 0 within budget (warnings included), 1 a threshold failed,\n"
    "2 usage error, 3 an input cannot be read. A late start (recording began after\n"
    "memory was in use) passes: its peak is the recorded window's, counting what was\n"
    "held at the window's start. Any other truncated history (a wrapped ring buffer)\n"
    "fails unless --allow-truncated. When GITHUB_ACTIONS=true, failures are also printed as\n"
    "::error:: annotations. JSON: snapdiff/check/1; budget files:\n"
    "schemas/budget.schema.json; a CI walkthrough: docs/ci.md.\n";

// The GitHub annotations beside a verdict: on stdout, unless a JSON verdict
// is there (then stderr, so it stays parseable).
void annotate(const std::string& ann, const std::string& fmt, const std::string& out) {
  const char* gha = std::getenv("GITHUB_ACTIONS");
  if (!gha || std::string(gha) != "true") return;
  const bool json_on_stdout = fmt != "text" && (out.empty() || out == "-");
  if (json_on_stdout) {
    std::fwrite(ann.data(), 1, ann.size(), stderr);
    std::fflush(stderr);
  } else {
    write_stdout(ann);
  }
}

// `snapdiff check [BASELINE] DIR`: every rank of DIR against the same rank
// of BASELINE (a folder), one baseline run or budget for all, or the
// absolute thresholds alone.
int check_ranks(const po::variables_map& vm, const std::vector<std::string>& inputs, const CheckRequest& req,
                const RuleSet& rules, const std::string& fmt) {
  const unsigned jobs = jobs_arg(vm);
  const LoadOptions lo = load_options(vm, vm.count("tensors") ? 2u : 1u);  // ranks: each its own list
  const bool skip_bad = vm.count("skip-bad-ranks") > 0;
  const int only = vm.count("rank") ? int(count_arg(vm, "rank", "--rank", 1u << 30)) : -1;
  auto figures_of = [&](const RankFileSet& set, std::vector<std::optional<PeakFigures>>& out,
                        std::vector<std::string>& errors) {
    std::vector<std::string> paths;
    for (const RankFile& f : set.files) paths.push_back(f.path);
    out.assign(paths.size(), std::nullopt);
    errors.assign(paths.size(), "");
    map_ranks(
        set.files, jobs, lo,
        [&](size_t i, Trace& t) {
          ReportOptions ro;
          ro.top_sites = 16;
          ro.input_name = paths[i];
          ro.rules = &rules;
          ro.threads = 1;  // the ranks are the parallelism (-j 1: one thread, never one started per rank)
          out[i] = peak_figures(analyze(t, ro));
          return uint64_t(sizeof(PeakFigures));
        },
        [&](size_t i, const InputError& e) { errors[i] = e.describe(); });
  };

  std::optional<PeakFigures> one_baseline;
  std::string baseline_kind;
  CheckOptions opts = check_options(req);
  if (vm.count("budget")) {
    const std::string file = vm["budget"].as<std::string>();
    Budget b = read_budget_file(file);
    opts = check_options(req, b, file, rules.categories);
    one_baseline = b.peak;
    baseline_kind = "budget";
  }
  // Baseline ranks, by rank.
  std::map<int, std::pair<std::string, std::optional<PeakFigures>>> base_ranks;
  std::map<int, std::string> base_errors;
  if (inputs.size() == 2) {
    baseline_kind = "snapshot";
    if (is_ranks_input({inputs[0]})) {
      RankFileSet bs = find_rank_files({inputs[0]}, RankInputs::Snapshots);
      std::vector<std::optional<PeakFigures>> figs;
      std::vector<std::string> errs;
      figures_of(bs, figs, errs);
      for (size_t i = 0; i < bs.files.size(); ++i) {
        if (bs.files[i].name.rank < 0) continue;  // an untold baseline file cannot be paired
        base_ranks[bs.files[i].name.rank] = {bs.files[i].path, figs[i]};
        if (!errs[i].empty()) base_errors[bs.files[i].name.rank] = errs[i];
      }
    } else {
      one_baseline = analyze(inputs[0], lo, rules);
    }
  }
  RankFileSet cs = find_rank_files({inputs.back()}, RankInputs::Snapshots);
  if (only >= 0) {
    std::vector<RankFile> kept;
    for (RankFile& f : cs.files)
      if (f.name.rank == only) kept.push_back(std::move(f));
    if (kept.empty()) throw UsageError("--rank " + std::to_string(only) + ": no file of that rank in " + inputs.back());
    cs.files = std::move(kept);
  }
  std::vector<std::optional<PeakFigures>> figs;
  std::vector<std::string> errs;
  figures_of(cs, figs, errs);
  std::vector<RankCheck> rows(cs.files.size());
  bool unreadable = false;
  for (size_t i = 0; i < cs.files.size(); ++i) {
    RankCheck& r = rows[i];
    r.rank = cs.files[i].name.rank;
    r.name = cs.files[i].path;
    if (!errs[i].empty()) {
      r.error = errs[i];
      r.input_error = true;
      unreadable = true;
      continue;
    }
    std::optional<PeakFigures> base = one_baseline;
    if (inputs.size() == 2 && !one_baseline) {
      auto it = base_ranks.find(r.rank);
      if (it == base_ranks.end()) {
        r.error = "the baseline " + inputs[0] + " has no file of " + (r.rank >= 0 ? "rank " + std::to_string(r.rank) : "this rank");
        continue;
      }
      r.baseline_name = it->second.first;
      if (!it->second.second) {
        r.error = base_errors[r.rank];
        r.input_error = true;
        unreadable = true;
        continue;
      }
      base = it->second.second;
    } else if (one_baseline && baseline_kind == "snapshot") {
      r.baseline_name = inputs[0];
    }
    r.result = evaluate_check(*figs[i], base, baseline_kind, opts);
  }
  RanksCheck c = combine_rank_checks(std::move(rows), skip_bad);
  const std::string out = vm.count("output") ? vm["output"].as<std::string>() : "";
  const std::string name = vm.count("name") ? vm["name"].as<std::string>() : inputs.back();
  if (vm.count("junit")) write_output(render_ranks_check_junit(c), vm["junit"].as<std::string>());
  if (vm.count("github-benchmark"))
    write_output(render_ranks_check_github_benchmark(c, name), vm["github-benchmark"].as<std::string>());
  write_output(fmt == "json"               ? render_ranks_check_json(c)
               : fmt == "github-benchmark" ? render_ranks_check_github_benchmark(c, name)
                                           : render_ranks_check_text(c, text_width(vm)),
               out);
  annotate(render_ranks_check_github(c), fmt, out);
  if (unreadable) {
    for (const RankCheck& r : c.ranks)
      if (r.input_error) print_error(r.error);
    if (!skip_bad) return kExitInput;
  }
  return c.status == CheckStatus::Fail ? kExitCheckFailed : kExitOk;
}

}  // namespace

int cmd_check(const std::vector<std::string>& args) {
  po::options_description d("snapdiff check [BASELINE] CANDIDATE [options]\n\nOptions");
  d.add_options()("help,h", "show this help")(
      "max-increase", po::value<std::string>(), "fail when the peak rises more than this over the baseline: 2% or 512MiB")(
      "warn-increase", po::value<std::string>(), "warn when the peak rises more than this (below --max-increase)")(
      "metric", po::value<std::string>(), "the peak checked: requested | allocated | reserved (default allocated)")(
      "max-peak", po::value<std::string>(), "fail when the peak is above this size (no baseline needed)")(
      "limit", po::value<std::vector<std::string>>(), "CATEGORY=SIZE: fail when the category's largest bytes over the run are above SIZE; PHASE:CATEGORY=SIZE: within that phase kind (repeatable)")(
      "max-growth", po::value<std::string>(), "fail when memory grows more than this per iteration (allocated bytes between iteration starts)")(
      "budget", po::value<std::string>(), "a budget file (schemas/budget.schema.json) instead of a BASELINE snapshot")(
      "write-budget", po::value<std::string>(), "write a budget file from CANDIDATE (its peaks, categories, phase peaks, the tolerances given) and exit")(
      "allow-truncated", "check a run whose history is truncated in any way (a wrapped ring buffer, a cut the file "
                         "cannot explain): a warning, the peak of the recorded window only. A late start needs no flag")(
      "allow-late-start", "the old spelling of the default: a history that started after memory was in use passes (the "
                          "window's peak, counting what was held at its start); a wrapped one still needs "
                          "--allow-truncated; see --max-entries")(
      "format,f", po::value<std::string>()->default_value("text"), "verdict format: text | json | github-benchmark "
                                                                   "(github-action-benchmark's customSmallerIsBetter JSON)")(
      "github-benchmark", po::value<std::string>(), "also write github-action-benchmark's customSmallerIsBetter JSON to this file")(
      "name", po::value<std::string>(), "the run's name in github-benchmark entries (default: CANDIDATE as given)")(
      "output,o", po::value<std::string>(), "write the verdict to this file instead of stdout")(
      "junit", po::value<std::string>(), "also write JUnit XML (one testcase per threshold) to this file")(
      "rules", po::value<std::vector<std::string>>(), "attribution rules file (repeatable; tried before the built-in rules)")(
      "kernels", po::value<std::string>(), "a kernel recording of CANDIDATE's run (snapcapture run -o FILE), joined "
                                           "before the check (a recording of another run fails, exit 3)");
  add_width_option(d);
  po::options_description ranks("Many ranks (CANDIDATE, and BASELINE, a folder or pattern: every threshold on every rank)");
  add_rank_options(ranks);
  d.add(ranks);
  add_input_options(d);
  add_tensors_option(d);
  po::variables_map vm = parse_command(args, d);
  if (vm.count("help")) {
    std::ostringstream help;
    help << d << kCheckHelpTail;
    write_stdout(help.str());
    return kExitOk;
  }

  // Everything the command line says is checked before any file is read.
  text_width(vm);  // a bad --width fails here
  std::string fmt = vm["format"].as<std::string>();
  if (fmt != "text" && fmt != "json" && fmt != "github-benchmark")
    throw UsageError("unknown --format '" + fmt + "' (text, json, github-benchmark)");
  std::vector<std::string> inputs;
  if (vm.count("input")) inputs = vm["input"].as<std::vector<std::string>>();
  bool budget_in = vm.count("budget") > 0, budget_out = vm.count("write-budget") > 0;
  if (budget_in && budget_out) throw UsageError("--budget and --write-budget cannot be combined");
  if (budget_out && inputs.size() != 1) throw UsageError("--write-budget needs exactly one run (CANDIDATE)");
  if (budget_in && inputs.size() != 1) throw UsageError("with --budget, give only the CANDIDATE");
  if (inputs.empty() || inputs.size() > 2) throw UsageError("check needs [BASELINE] CANDIDATE");

  CheckRequest req;
  if (vm.count("metric")) req.metric = parse_metric(vm["metric"].as<std::string>());
  if (vm.count("max-increase")) req.max_increase = amount_arg("--max-increase", vm["max-increase"].as<std::string>());
  if (vm.count("warn-increase")) req.warn_increase = amount_arg("--warn-increase", vm["warn-increase"].as<std::string>());
  if (vm.count("max-peak")) {
    req.max_peak_text = vm["max-peak"].as<std::string>();
    if (!req.max_peak_text.empty() && req.max_peak_text.back() == '%')
      throw UsageError("--max-peak takes a size (e.g. 60GiB), not a share");
    req.max_peak = size_arg("--max-peak", req.max_peak_text);
  }
  if (vm.count("limit"))
    for (const std::string& v : vm["limit"].as<std::vector<std::string>>()) add_limit(req.limits, limit_arg(v));
  req.allow_truncated = vm.count("allow-truncated") > 0;
  // A late start passes by default; --allow-late-start (its old spelling) is accepted and changes nothing.
  req.allow_late_start = true;
  if (vm.count("max-growth")) {
    req.max_growth_text = vm["max-growth"].as<std::string>();
    req.max_growth = size_arg("--max-growth", req.max_growth_text);
  }
  const bool increase_given = req.max_increase || req.warn_increase;
  const bool ceiling_given = req.max_peak || !req.limits.empty() || req.max_growth;
  if (!budget_in && !budget_out && inputs.size() == 1 && increase_given)
    throw UsageError("--max-increase and --warn-increase compare with a baseline: give BASELINE CANDIDATE or --budget FILE");
  if (!budget_in && !budget_out && inputs.size() == 2 && !increase_given && !ceiling_given)
    throw UsageError("no thresholds to check: give --max-increase (e.g. 2%), --warn-increase, --max-peak, --limit or --max-growth");
  if (!budget_in && !budget_out && inputs.size() == 1 && !ceiling_given)
    throw UsageError("nothing to compare CANDIDATE with: give BASELINE CANDIDATE, --budget FILE, --max-peak, --limit or --max-growth");

  // Rules first: they define the category names --limit may use.
  RuleSet rules = load_rules(rules_files(vm));
  check_limit_categories(req.limits, rules.categories);
  const bool many = is_ranks_input({inputs.back()});
  if (many && budget_out) throw UsageError("--write-budget writes one run's budget: give one rank's snapshot");
  if (!many && inputs.size() == 2 && is_ranks_input({inputs[0]}))
    throw UsageError("BASELINE is a folder of ranks but CANDIDATE is one file: give a folder for both");
  if (!many)
    for (const char* o : {"rank", "skip-bad-ranks"})
      if (vm.count(o)) throw UsageError(std::string("--") + o + " applies to many ranks: give a folder as CANDIDATE");
  if (!many && vm.count("jobs") && inputs.size() != 2)
    throw UsageError("--jobs applies to two runs (BASELINE CANDIDATE) or many ranks: one run is read alone");
  const std::string kernels = vm.count("kernels") ? vm["kernels"].as<std::string>() : "";
  if (many && !kernels.empty()) throw UsageError("--kernels reads one run: give one CANDIDATE snapshot, not many ranks");
  if (many) return check_ranks(vm, inputs, req, rules, fmt);
  const LoadOptions lo = load_options(vm, vm.count("tensors") ? unsigned(inputs.size()) : 1u);

  if (budget_out) {
    Truncation truncation = Truncation::None;
    PeakFigures run = analyze(inputs[0], lo, rules, &truncation, kernels);
    const bool late_ok = req.allow_late_start && run.truncation == "late_start" && run.format != "chrome-trace";
    if (run.history != "complete" && !req.allow_truncated && !late_ok) {
      const auto [why, remedy] = incomplete_history_words(run, truncation);
      std::fprintf(stderr, "snapdiff: check: cannot write a budget from %s: %s, so its peak cannot be established (%s, "
                   "or pass --allow-truncated)\n",
                   escape_for_terminal(inputs[0]).c_str(), escape_for_terminal(why).c_str(), remedy.c_str());
      return kExitCheckFailed;
    }
    const Budget b = budget_from_run(run, req);
    std::string out = vm["write-budget"].as<std::string>();
    write_output(write_budget_json(b), out);
    if (out != "-")
      write_stdout("snapdiff check: wrote " + escape_for_terminal(out) + ": " + metric_name(b.metric) + " peak " +
                   human_bytes(run.peak(b.metric)) + " (" + std::to_string(run.peak(b.metric)) + " B), tolerance +" +
                   escape_for_terminal(b.max_increase->text) + "\n");
    return kExitOk;
  }

  std::optional<PeakFigures> baseline;
  std::string baseline_kind;
  CheckOptions opts;
  if (budget_in) {
    // Read before the (long) snapshot load: a bad budget fails fast.
    const std::string file = vm["budget"].as<std::string>();
    Budget b = read_budget_file(file);
    opts = check_options(req, b, file, rules.categories);
    baseline = b.peak;
    baseline_kind = "budget";
  } else {
    opts = check_options(req);
  }

  std::optional<PeakFigures> figures[2];
  if (inputs.size() == 2) {
    // BASELINE and CANDIDATE on two threads (-j 1: one after the other),
    // each within half of the memory bound; a read refused under its half
    // is read again with the whole bound, the runs one after the other.
    auto both = [&](bool parallel) {
      LoadOptions share = lo;
      if (parallel) {
        share = pair_share(lo);
        share.max_memory_bytes = lo.max_memory_bytes / 2;
      }
      PairProgress progress(inputs[0], inputs[1]);
      run_pair(parallel, [&](int s, PairSide& side) {
        if (!side.step(0)) return;
        figures[s] = analyze(inputs[size_t(s)], share, rules, nullptr, s == 1 ? kernels : "",
                             parallel ? &progress : nullptr, s);
      });
    };
    const bool parallel = pair_in_parallel(vm);
    try {
      both(parallel);
    } catch (const InputError& e) {
      if (!parallel || lo.max_memory_bytes == 0 || !refused_for_memory(e)) throw;
      both(false);
    }
    baseline = figures[0];
    baseline_kind = "snapshot";
  } else {
    figures[1] = analyze(inputs.back(), lo, rules, nullptr, kernels);
  }
  const PeakFigures& candidate = *figures[1];
  CheckResult r = evaluate_check(candidate, baseline, baseline_kind, opts);

  std::string out = vm.count("output") ? vm["output"].as<std::string>() : "";
  const std::string name = vm.count("name") ? vm["name"].as<std::string>() : inputs.back();
  if (vm.count("junit")) write_output(render_check_junit(r), vm["junit"].as<std::string>());
  if (vm.count("github-benchmark")) write_output(render_check_github_benchmark(r, name), vm["github-benchmark"].as<std::string>());
  write_output(fmt == "json"               ? render_check_json(r)
               : fmt == "github-benchmark" ? render_check_github_benchmark(r, name)
                                           : render_check_text(r, text_width(vm)),
               out);
  annotate(render_check_github(r), fmt, out);
  return r.status == CheckStatus::Fail ? kExitCheckFailed : kExitOk;
}

}  // namespace snapdiff::cli
