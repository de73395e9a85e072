#!/usr/bin/env bash
# Builds snapdiff and runs the whole test suite (unit, exactness against
# PyTorch's counters, robustness, CLI end to end).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
ctest --test-dir build --output-on-failure
