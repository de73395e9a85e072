#!/usr/bin/env bash
# Quick start: install what is missing, build, and run the main job on the
# bundled samples (a report of each run).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
for f in sample_snapshots/small_bf16.pickle sample_snapshots/small_fp8.pickle sample_snapshots/small_fp8_pw.pickle; do
  echo "================================================================================"
  ./build/snapdiff report "$f"
done
