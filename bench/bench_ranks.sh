#!/usr/bin/env bash
# Many ranks (docs/ranks.md, docs/performance.md "Many ranks"):
#  1. the direct read: `snapdiff report DIR -j P` over 2, 8 and 32 generated
#     ranks (copies of one real rank) against one rank's time, with the
#     bound of the issue: N ranks on P cores within 1.3 x N/P x one rank;
#  2. the reduce step: `snapdiff ranks DIR` over 100 and 1,000 generated
#     map-step summaries, the size of one summary, and the cost at 10,000
#     ranks extrapolated from the two (the reduce is linear in the ranks).
# Usage: bench/bench_ranks.sh [SNAPDIFF] [SRC]   (defaults: build/snapdiff,
# sample_snapshots/fp8_no_pw.snap, a 5.37 B-parameter FP8 run). RUNS=N timed runs each (default 3;
# the median is reported).
set -euo pipefail
cd "$(dirname "$0")/.."
SD=${1:-build/snapdiff}
SRC=${2:-sample_snapshots/fp8_no_pw.snap}
RUNS=${RUNS:-3}
OUT=bench/out/ranks
rm -rf "$OUT"
mkdir -p "$OUT"
P=$(nproc)
echo "machine: $P cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "one rank: $SRC ($(stat -c %s "$SRC") bytes)"

# Median wall seconds of RUNS runs of the command.
median() {
  local t=()
  for ((i = 0; i < RUNS; i++)); do
    local s e
    s=$(date +%s.%N)
    "$@" >/dev/null 2>&1 || true
    e=$(date +%s.%N)
    t+=("$(echo "$e - $s" | bc -l)")
  done
  printf '%s\n' "${t[@]}" | sort -n | awk '{a[NR]=$1} END {printf "%.3f", a[int((NR+1)/2)]}'
}

one=$(median "$SD" report "$SRC" --format json)
echo "one rank: $one s"
for n in 2 8 32; do
  python3 bench/gen_ranks.py snapshots "$SRC" "$n" "$OUT/snap$n" >/dev/null
  j=$((n < P ? n : P))
  t=$(median "$SD" report "$OUT/snap$n" -j "$P" --format json)
  bound=$(echo "1.3 * $n / $j * $one" | bc -l)
  ok=$(echo "$t <= $bound" | bc -l)
  printf 'direct  %3d ranks  -j %d  %7.3f s   bound 1.3 x %d/%d x %.3f = %7.3f s  %s\n' "$n" "$P" "$t" "$n" "$j" "$one" "$bound" \
    "$([[ $ok == 1 ]] && echo within || echo OVER)"
done

"$SD" report "$SRC" --format json -o "$OUT/one.json"
size=$(stat -c %s "$OUT/one.json")
echo "summary of one rank: $size bytes ($(gzip -c "$OUT/one.json" | wc -c) gzip'd)"
declare -A tr
for n in 100 1000; do
  python3 bench/gen_ranks.py summaries "$OUT/one.json" "$n" "$OUT/sum$n" >/dev/null
  tr[$n]=$(median "$SD" ranks "$OUT/sum$n" -j "$P" --format json)
  rss=$( { /usr/bin/time -f '%M' "$SD" ranks "$OUT/sum$n" -j "$P" --format json >/dev/null; } 2>&1 | tail -1)
  printf 'reduce %5d summaries  -j %d  %7.3f s  peak RSS %s KiB\n' "$n" "$P" "${tr[$n]}" "$rss"
done
per=$(echo "(${tr[1000]} - ${tr[100]}) / 900" | bc -l)
est=$(echo "${tr[1000]} + 9000 * $per" | bc -l)
printf 'reduce 10000 summaries, extrapolated: %.1f s (%.2f ms per summary)\n' "$est" "$(echo "$per * 1000" | bc -l)"
