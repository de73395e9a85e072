#!/usr/bin/env bash
# Small inputs, whole process: `snapdiff report --format json FILE` on a
# ~5 MB snapshot (bench/make_small.py: the first 27,000 trace entries of
# bench/out/xxl_fp8.pickle), on sample_snapshots/small_fp8.pickle and on
# each tests/data/real/*.pickle.gz; then the fixed costs alone (`--version`:
# process start and dynamic linking). Prints the median wall time of RUNS
# runs of each (default 21; hyperfine when installed, else a loop of
# `date +%s%N`), and the instructions one run executes (valgrind
# --tool=callgrind, the same count whatever else the machine does) for the
# 5 MB input. docs/performance.md, "Fixed costs on small inputs".
# Usage: bench/bench_small.sh [SNAPDIFF]   (default build/snapdiff)
set -euo pipefail
cd "$(dirname "$0")/.."
SD=${1:-build/snapdiff}
RUNS=${RUNS:-21}
OUT=bench/out
mkdir -p "$OUT"
XXL=$OUT/xxl_fp8.pickle
SMALL=$OUT/small_5mb.pickle
[[ -f $XXL ]] || xz -dc tests/data/real/xxl_fp8.pickle.xz >"$XXL"
[[ -f $SMALL ]] || python3 bench/make_small.py "$XXL" "$SMALL" 27000 >/dev/null
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "binary: $SD, $(ldd "$SD" | grep -c '=>') shared libraries"

# Median wall milliseconds of RUNS runs of the command.
median_ms() {
  if command -v hyperfine >/dev/null; then
    hyperfine -N -w 3 -r "$RUNS" --export-json "$OUT/small.hf.json" -- "$(printf '%q ' "$@")" >/dev/null 2>&1
    python3 -c 'import json,sys; print("%.1f" % (json.load(open(sys.argv[1]))["results"][0]["median"] * 1000))' "$OUT/small.hf.json"
    rm -f "$OUT/small.hf.json"
    return
  fi
  local t=() i s e
  "$@" >/dev/null 2>&1 || true  # warm the page cache
  for ((i = 0; i < RUNS; i++)); do
    s=$(date +%s%N)
    "$@" >/dev/null 2>&1 || true
    e=$(date +%s%N)
    t+=("$(((e - s) / 1000))")
  done
  printf '%s\n' "${t[@]}" | sort -n | awk '{a[NR]=$1} END {printf "%.1f\n", a[int((NR+1)/2)] / 1000}'
}

row() {  # row FILE: size, events, median ms
  local f=$1
  printf '%-44s %10s B  %7s ms\n' "$f" "$(stat -L -c %s "$f")" "$(median_ms "$SD" report --format json "$f")"
}
printf '%-44s %12s  %10s\n' "input" "size" "median"
row "$SMALL"
row sample_snapshots/small_fp8.pickle
for f in tests/data/real/*.pickle.gz; do row "$f"; done
printf '%-44s %12s  %7s ms\n' "(snapdiff --version)" "" "$(median_ms "$SD" --version)"
if command -v valgrind >/dev/null; then
  valgrind --tool=callgrind --callgrind-out-file="$OUT/small.callgrind" "$SD" report --format json "$SMALL" >/dev/null 2>/dev/null || true
  echo "instructions, report --format json $SMALL: $(grep -m1 '^summary:' "$OUT/small.callgrind" | cut -d' ' -f2)"
  valgrind --tool=callgrind --callgrind-out-file="$OUT/small.callgrind" "$SD" --version >/dev/null 2>/dev/null || true
  echo "instructions, --version: $(grep -m1 '^summary:' "$OUT/small.callgrind" | cut -d' ' -f2)"
  rm -f "$OUT/small.callgrind"
fi
