// Internal: what every subcommand of the CLI needs — loading an input with a
// progress line on a terminal, loading rules files, writing output whole.
#pragma once

#include <boost/program_options.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "snapdiff/analysis/attribution.hpp"
#include "snapdiff/analysis/kernel_join.hpp"
#include "snapdiff/input/input.hpp"
#include "snapdiff/model/model.hpp"
#include "util/terminal_text.hpp"

namespace snapdiff::cli {

// The input options every command takes, added to `d`: --max-input-bytes
// (a size of at least 1 byte; LoadOptions' 16 GiB by default: 0 is a usage
// error, not "no bound") and --max-memory: "auto" (75% of the machine's
// physical memory: inputs predicted to need more are refused, exit 3, rather
// than killed by the kernel's OOM killer), "0"/"none" (no bound), or a size
// ("8GiB").
void add_input_options(boost::program_options::options_description& d);
// --tensors FILE: the tensor list of a command's single input.
void add_tensors_option(boost::program_options::options_description& d);
// The LoadOptions they give (UsageError for a bad --max-memory or
// --max-input-bytes).
// --max-memory as given (auto: 75% of RAM; none: 0), in bytes.
uint64_t parse_max_memory(const std::string& text);

// `held_at_once` inputs share the memory bound (a diff holds both runs: each
// gets half).

LoadOptions load_options(const boost::program_options::variables_map& vm, unsigned held_at_once = 1);

// Reads any input; shows "reading FILE: N%" on stderr when it is a terminal
// and the read takes more than a second (erased when done). opts.progress is
// replaced by that line.
Trace load_input(const std::string& path, LoadOptions opts);
// The file the calling thread reads, named by the error line of a SIGBUS
// (install_input_fault_handler); load_input() calls it.
void mark_reading(const std::string& path);
// --kernels RECORDING: loads the kernel recording (any input snapdiff reads:
// a .snap of snapcapture run) and joins it into the snapshot `t` read from
// `snapshot_path` (join_kernel_recording(): `t` is moved in and comes back
// joined; InputError naming both files for another run's). UsageError when
// `t` is a profiler trace or the recording has allocator events (a
// snapshot, not a recording).
Joined<KernelJoin> join_kernels(Trace t, const std::string& snapshot_path, const std::string& recording_path,
                                const LoadOptions& opts);

// The recordings --kernels, --kernels-a and --kernels-b name, one per input
// ("" for none): --kernels with one input, --kernels-a/-b with two (what
// else is given is a UsageError). Options the command lacks count as absent.
std::vector<std::string> kernels_args(const boost::program_options::variables_map& vm, size_t inputs);

// A SIGBUS while an input is read (a mapped file that shrank) becomes the
// one-line input error and exit code 3. Called once by main().
void install_input_fault_handler();

// The built-in rules plus each file, later files first.
RuleSet load_rules(const std::vector<std::string>& files);

// Writes the whole text at once: to stdout ("", "-", /dev/stdout, /dev/fd/1:
// write_stdout()), or to a file with write_output_file() (all or nothing;
// OutputError when it cannot).
void write_output(const std::string& text, const std::string& path);

// Standard output (docs/cli.md "Standard output"). Everything snapdiff
// prints there goes through write_stdout(): a failed write is an
// OutputError ("cannot write to standard output: No space left on
// device", exit 2); a reader that went away (EPIPE, with SIGPIPE ignored by
// the parent) ends the process by SIGPIPE, silently, as with SIGPIPE at its
// default.
void write_stdout(std::string_view text);
// Called first by main(): descriptors 0-2 are open (a closed stdout becomes
// /dev/null opened read-only, so writes to it fail with EBADF instead of
// landing in the next file opened), and SIGXFSZ at its default is ignored
// (a file size limit fails the write with EFBIG, which is reported and
// cleaned up, instead of killing the process mid-write).
void prepare_standard_streams();
// Called last by main() with the exit code: anything still buffered on
// stdout is flushed and the stream checked; a write error turns exit 0 or 1
// into 2 with its one line (an error already reported keeps its code).
int finish_stdout(int rc);

// A message for stderr (or a name on stdout) as one visible line: the
// project's one escaper (src/util/terminal_text.hpp).
using snapdiff::escape_for_terminal;
// Prints "snapdiff: error: MESSAGE[SUFFIX]" on stderr, MESSAGE escaped.
void print_error(const std::string& message, const char* suffix = "");

// A count option (declared as a string value): a whole number from 0 to
// `max`, anything else (-1, 1e3, 2^64) a UsageError naming `option`.
uint64_t count_arg(const boost::program_options::variables_map& vm, const std::string& name, const std::string& option,
                   uint64_t max);

// --depth N (frames per site row; 0: the whole stack, up to 1,000 frames):
// `fallback` when not given.
constexpr uint64_t kMaxDepth = 1000;
size_t depth_arg(const boost::program_options::variables_map& vm, size_t fallback);

// --width N: the columns every line of text output fits (docs/cli.md,
// "Width"), from kMinTextWidth to kMaxTextWidth (else a UsageError). Not
// given: the terminal's width when standard output is a terminal and the
// output goes there (TIOCGWINSZ, else $COLUMNS), 80 otherwise.
void add_width_option(boost::program_options::options_description& d);
size_t text_width(const boost::program_options::variables_map& vm);

// Parses a subcommand's arguments: the visible options plus any number of
// positional inputs (vm["input"]).
boost::program_options::variables_map parse_command(const std::vector<std::string>& args,
                                                    const boost::program_options::options_description& visible);
// The input files given (none: empty).
std::vector<std::string> inputs(const boost::program_options::variables_map& vm);
// The --rules files given (none: empty).
std::vector<std::string> rules_files(const boost::program_options::variables_map& vm);

}  // namespace snapdiff::cli
