#!/usr/bin/env bash
# Configures and builds snapdiff (Release) into build/. Idempotent.
#   bash scripts/build.sh [BUILD_DIR [CMAKE_ARGS...]]   everything: the executable, the tests, the
#                                  fuzz-free tools and the CUDA capture where a toolkit is found
#                                  (e.g. build-asan -DSNAPDIFF_SANITIZE=address,undefined)
#   bash scripts/build.sh --lean [BUILD_DIR]   only the snapdiff executable, with only the
#                                  packages it needs (the quick start)
# Prints one line per stage; the whole configure and compiler output goes to
# BUILD_DIR/build.log and is shown only when something fails.
# JOBS=N sets the parallel jobs (default: all cores).
set -euo pipefail
cd "$(dirname "$0")/.."
lean=0
if [[ ${1:-} == --lean ]]; then lean=1; shift; fi
B=${1:-build}
shift || true
jobs=${JOBS:-$(nproc)}
start=$SECONDS

keep=0  # a lean build in a folder already configured keeps all its settings
if ((lean)); then
  bash scripts/install-deps.sh
  # A new build folder leaves out the tests and the capture (no Catch2 or CUDA
  # needed); one already configured (by this script, the test suite, an
  # AddressSanitizer build) keeps its settings, build type and compiler
  # launcher included: only the target differs, so nothing is recompiled.
  if [[ -f $B/CMakeCache.txt ]]; then keep=1; else set -- -DSNAPDIFF_BUILD_TESTS=OFF -DSNAPDIFF_BUILD_CAPTURE=OFF "$@"; fi
else
  bash scripts/install-deps.sh --test
  set -- -DSNAPDIFF_BUILD_TESTS=ON -DSNAPDIFF_BUILD_CAPTURE=ON "$@"
fi
# ccache, where installed, makes rebuilds after a pull cheap.
if ((!keep)) && command -v ccache >/dev/null; then set -- -DCMAKE_CXX_COMPILER_LAUNCHER=ccache "$@"; fi
((keep)) || set -- -DCMAKE_BUILD_TYPE=Release "$@"

mkdir -p "$B"
log=$B/build.log
: >"$log"
failed() {  # $1: stage
  echo "build: $1 failed ($log):" >&2
  # The errors and what leads to them, else the end of the log.
  if grep -qE 'error:|Error [0-9]+|CMake Error|undefined reference|ld returned' "$log"; then
    grep -E -B3 -A8 'error:|Error [0-9]+|CMake Error|undefined reference|ld returned' "$log" | head -n 200 >&2
  else
    tail -n 60 "$log" >&2
  fi
  exit 1
}

((lean)) || echo "build: configuring $B/"
cmake -S . -B "$B" "$@" >>"$log" 2>&1 || failed configure

if ((lean)); then
  echo "build: compiling the snapdiff executable (-j$jobs)…"
  cmake --build "$B" -j"$jobs" --target snapdiff >>"$log" 2>&1 || failed build
else
  # The project's own targets (the build tool's "help" lists them, with its own).
  targets=$(cmake --build "$B" --target help 2>/dev/null | sed -n 's/^\.\.\. \([A-Za-z0-9_]*\)$/\1/p' |
    grep -cvxE 'all|clean|depend|edit_cache|rebuild_cache|test|install|install/local|install/strip|list_install_components|package|package_source' || true)
  echo "build: compiling ($targets targets, -j$jobs)…"
  cmake --build "$B" -j"$jobs" >>"$log" 2>&1 || failed build
fi
msg="build: done in $((SECONDS - start)) s"
warnings=$(grep -c 'warning:' "$log" || true)
if [ "$warnings" -gt 0 ]; then msg+=" ($warnings compiler warnings: $log)"; fi
echo "$msg"
