// Internal: the one escaper of everything snapdiff's executables print
// (snapdiff's error lines, snapcapture's messages, the injection library's
// notes on a program's stderr): a message becomes one visible line that can
// neither act on a terminal nor start a line of its own (a forged report
// line, a CI runner's "::error::" command). Plain C++, no dependency: the
// injection library compiles it in (capture/CMakeLists.txt).
#pragma once

#include <string>
#include <string_view>

namespace snapdiff {

// C0 controls and DEL as \n, \t, \r or \xNN, bytes that are not UTF-8 as
// \xNN, and the valid code points that act on a terminal or break a line
// (C1 controls, U+2028/U+2029, bidirectional overrides) as \uXXXX; all
// else unchanged.
std::string escape_for_terminal(std::string_view text);

}  // namespace snapdiff
