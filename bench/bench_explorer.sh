#!/usr/bin/env bash
# The HTML explorer's figures (issue 39's budgets) on one snapshot, default the
# 1,000,000-event xxl_fp8: snapdiff report -f json vs -f html (hyperfine when
# installed, else the median of RUNS runs), the page's size, and in headless
# Chromium the first render (the page's 'sd-first-render' mark, median of 5
# fresh loads) and 20 zoom/pan steps made with Input events (the page's
# 'sd-step' measures: median and max; and input-to-frame latency).
# Usage: bench/bench_explorer.sh [SNAPDIFF] [SNAPSHOT] [RUNS]   (build/snapdiff, xxl_fp8, 5)
#        bench/bench_explorer.sh --memory-viz FILE.html
#   the same browser figures for a memory_viz page (torch.cuda._memory_viz
#   trace_plot's HTML): time to its first canvas/svg, input-to-frame latency.
# LOADS and STEPS override 5 and 20. The page is kept in bench/out/.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ${1:-} == --memory-viz ]]; then
  exec python3 bench/explorer_bench.py --memory-viz "$2" --loads "${LOADS:-5}" --steps "${STEPS:-20}"
fi
BIN=${1:-build/snapdiff}
OUT=bench/out
mkdir -p "$OUT"
IN=${2:-}
if [[ -z $IN ]]; then
  IN=$OUT/xxl_fp8.pickle
  [[ -f $IN ]] || xz -dc tests/data/real/xxl_fp8.pickle.xz >"$IN"
fi
python3 bench/explorer_bench.py --bin "$BIN" --input "$IN" --runs "${3:-5}" \
  --loads "${LOADS:-5}" --steps "${STEPS:-20}" --out "$OUT/explorer"
