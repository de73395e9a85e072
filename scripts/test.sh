#!/usr/bin/env bash
# Builds snapdiff and runs the whole test suite (unit, exactness against
# PyTorch's counters, robustness and the bad-input contract, CLI end to end)
# twice: the Release build (then the Python package installed as a user
# installs it: scripts/test_python_package.sh), then a build under AddressSanitizer and
# UndefinedBehaviorSanitizer (build-asan/, -DSNAPDIFF_SANITIZE=address,undefined),
# where any memory error, leak or undefined behaviour fails the run.
# Slices: ctest --test-dir build -L analysis (labels: input analysis report
# capture cli golden unit), or -R 'name regex'.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${JOBS:-$(nproc)}
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j"$jobs"

echo "== the Python package: wheel, pip install into fresh venvs, its tests there (build-py/)"
bash scripts/test_python_package.sh

echo "== the same tests under AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/)"
bash scripts/build.sh build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSNAPDIFF_BUILD_CAPTURE=OFF \
  -DSNAPDIFF_SANITIZE=address,undefined
LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0" \
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allow_user_segv_handler=1 \
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j"$jobs"
