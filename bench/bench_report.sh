#!/usr/bin/env bash
# Times `snapdiff report --format json` on the 1,000,000-event xxl_fp8
# snapshot (and on scaled copies), printing wall time, MB/s and peak RSS per
# run, then a table of how time and memory grow with the input (medians, and
# each as a multiple of the first scale's).
# Usage: bench/bench_report.sh [RUNS] [SCALES...]
#   RUNS    runs per input (default 5)
#   SCALES  e.g. "1 2 4 8 16" (default 1); copies are written by
#           bench/make_scaled.py, 170 MB per copy, about 1.2 GB of RAM to
#           generate whatever the scale
# Inputs are generated under bench/out/ (ignored by git; delete the large
# ones when done).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-5}
shift || true
SCALES=${*:-1}
rows=()
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
  bytes=$(stat -L -c %s "$f")
  events=$($BIN report --format json "$f" | python3 -c 'import json,sys; print(json.load(sys.stdin)["input"]["events"])')
  echo "input: $f ($((bytes / 1000000)) MB, $events events)"
  walls=()
  rsss=()
  for ((i = 1; i <= RUNS; i++)); do
    /usr/bin/time -f "%e %M" -o "$OUT/time.txt" $BIN report --format json "$f" >/dev/null
    read -r wall rss <"$OUT/time.txt"
    walls+=("$wall")
    rsss+=("$rss")
    awk -v w="$wall" -v r="$rss" -v b="$bytes" -v i="$i" \
      'BEGIN { printf "  run %d: %.2f s wall, %.0f MB/s, peak RSS %.0f MB\n", i, w, b / 1e6 / (w > 0 ? w : 0.001), r / 1024 }'
  done
  med_wall=$(printf '%s\n' "${walls[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  med_rss=$(printf '%s\n' "${rsss[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  awk -v m="$med_wall" -v b="$bytes" 'BEGIN {printf "  median: %.2f s wall, %.0f MB/s\n", m, b/1e6/(m > 0 ? m : 0.001)}'
  rows+=("$s $events $bytes $med_wall $med_rss")
done
echo
echo "growth (medians; x = multiple of the first scale's; load: $(cut -d' ' -f1-3 /proc/loadavg))"
echo "| scale | events | file | wall | x | MB/s | peak RSS | x | RSS / file |"
echo "|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}" | awk 'NR == 1 {w0 = $4; r0 = $5}
  {printf "| %sx | %d | %.0f MB | %.2f s | %.1f | %.0f MB/s | %.0f MB | %.1f | %.2f |\n",
     $1, $2, $3 / 1e6, $4, $4 / (w0 > 0 ? w0 : 0.001), $3 / 1e6 / ($4 > 0 ? $4 : 0.001), $5 / 1024, $5 / r0,
     $5 * 1024 / $3}'
