#!/usr/bin/env bash
# Times `snapdiff report --format json` on the 1,000,000-event xxl_fp8
# snapshot (and on 2x and 4x scaled copies), printing wall time, MB/s and peak
# RSS per run. Usage: bench/bench_report.sh [RUNS] [SCALES...]
#   RUNS    runs per input (default 5)
#   SCALES  e.g. "1 2 4" (default 1; 2 and 4 need ~6 GB RAM once to generate)
# Inputs are generated under bench/out/ (ignored by git).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-5}
shift || true
SCALES=${*:-1}
BIN=build/snapdiff
DATA=tests/data/real
OUT=bench/out
mkdir -p "$OUT"
[[ -x $BIN ]] || bash scripts/build.sh >/dev/null
[[ -f $OUT/xxl_fp8.pickle ]] || xz -dc "$DATA/xxl_fp8.pickle.xz" >"$OUT/xxl_fp8.pickle"
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "snapdiff: $($BIN --version)"
for s in $SCALES; do
  if [[ $s == 1 ]]; then f=$OUT/xxl_fp8.pickle; else
    f=$OUT/xxl_fp8_x$s.pickle
    [[ -f $f ]] || python3 bench/make_scaled.py "$OUT/xxl_fp8.pickle" "$s" "$f"
  fi
  bytes=$(stat -c %s "$f")
  events=$($BIN report --format json "$f" | python3 -c 'import json,sys; print(json.load(sys.stdin)["input"]["events"])')
  echo "input: $f ($((bytes / 1000000)) MB, $events events)"
  walls=()
  for ((i = 1; i <= RUNS; i++)); do
    /usr/bin/time -f "%e %M" -o "$OUT/time.txt" $BIN report --format json "$f" >/dev/null
    read -r wall rss <"$OUT/time.txt"
    walls+=("$wall")
    awk -v w="$wall" -v r="$rss" -v b="$bytes" -v i="$i" \
      'BEGIN { printf "  run %d: %.2f s wall, %.0f MB/s, peak RSS %.0f MB\n", i, w, b / 1e6 / (w > 0 ? w : 0.001), r / 1024 }'
  done
  printf '%s\n' "${walls[@]}" | sort -n | awk -v b="$bytes" '{a[NR]=$1} END {m=a[int((NR+1)/2)]; printf "  median: %.2f s wall, %.0f MB/s\n", m, b/1e6/m}'
done
