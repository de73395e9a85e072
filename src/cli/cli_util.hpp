// Internal: what every subcommand of the CLI needs — loading an input with a
// progress line on a terminal, loading rules files, writing output whole.
#pragma once

#include <boost/program_options.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "snapdiff/analysis/attribution.hpp"
#include "snapdiff/input/input.hpp"
#include "snapdiff/model/model.hpp"

namespace snapdiff::cli {

// The input options every command takes, added to `d`: --max-input-bytes
// (LoadOptions' 16 GiB) and --max-memory: "auto" (75% of the machine's
// physical memory: inputs predicted to need more are refused, exit 3, rather
// than killed by the kernel's OOM killer), "0"/"none" (no bound), or a size
// ("8GiB").
void add_input_options(boost::program_options::options_description& d);
// The LoadOptions they give (UsageError for a bad --max-memory).
// `held_at_once` inputs share the memory bound (a diff holds both runs: each
// gets half).
LoadOptions load_options(const boost::program_options::variables_map& vm, unsigned held_at_once = 1);

// Reads any input; shows "reading FILE: N%" on stderr when it is a terminal
// and the read takes more than a second (erased when done). opts.progress is
// replaced by that line.
Trace load_input(const std::string& path, LoadOptions opts);
// A SIGBUS while an input is read (a mapped file that shrank) becomes the
// one-line input error and exit code 3. Called once by main().
void install_input_fault_handler();

// The built-in rules plus each file, later files first.
RuleSet load_rules(const std::vector<std::string>& files);

// Writes the whole text at once: to stdout ("" or "-"), or to a file with
// write_output_file() (all or nothing; OutputError when it cannot).
void write_output(const std::string& text, const std::string& path);

// Parses a subcommand's arguments: the visible options plus any number of
// positional inputs (vm["input"]).
boost::program_options::variables_map parse_command(const std::vector<std::string>& args,
                                                    const boost::program_options::options_description& visible);
// The input files given (none: empty).
std::vector<std::string> inputs(const boost::program_options::variables_map& vm);
// The --rules files given (none: empty).
std::vector<std::string> rules_files(const boost::program_options::variables_map& vm);

}  // namespace snapdiff::cli
