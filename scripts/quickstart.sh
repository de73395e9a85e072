#!/usr/bin/env bash
# Quick start: install what is missing, build, and run the main job on the
# bundled samples: a report of the FP8 run, and the diff of the two FP8 runs
# (bf16 primary weights vs FP8 primary weights).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
./build/snapdiff report sample_snapshots/small_fp8.pickle
echo "================================================================================"
./build/snapdiff sample_snapshots/small_fp8.pickle sample_snapshots/small_fp8_pw.pickle
