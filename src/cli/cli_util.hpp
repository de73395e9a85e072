// Internal: what every subcommand of the CLI needs — loading an input with a
// progress line on a terminal, loading rules files, writing output whole.
#pragma once

#include <boost/program_options.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "snapdiff/attribution.hpp"
#include "snapdiff/model.hpp"

namespace snapdiff::cli {

// Reads any input; shows "reading FILE: N%" on stderr when it is a terminal
// and the read takes more than a second (erased when done).
// 75% of the machine's physical memory: inputs predicted to need more are
// refused (exit 3) rather than killed by the kernel's OOM killer.
uint64_t default_max_memory();
// --max-memory: "auto" (default_max_memory()), "0"/"none" (no bound), or a size ("8GiB").
uint64_t parse_max_memory(const std::string& text);
Trace load_input(const std::string& path, uint64_t max_decoded_bytes, uint64_t max_memory_bytes = default_max_memory());
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
