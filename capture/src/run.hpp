// snapcapture run / convert (run.cpp): the launcher of the injection library.
#pragma once

namespace snapcapture {

// `snapcapture run ...` and `snapcapture convert ...`: argv after the
// subcommand's name. Return the process's exit code.
int run_main(int argc, char** argv);
int convert_main(int argc, char** argv);

}  // namespace snapcapture
