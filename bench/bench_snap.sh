#!/usr/bin/env bash
# .snap version 3 against the JSON form (version 1, gzip'd) and the pickle it
# came from, on the 1,000,000-event xxl_fp8 snapshot: file size, `convert`
# time and peak RSS, `report --format json` time and peak RSS, and the load
# stage alone (snapdiff_stage_bench). Medians of RUNS runs; state the load
# (`uptime`) with the figures. Usage: bench/bench_snap.sh [RUNS] [INPUT]
# Inputs and outputs live under bench/out/ (ignored by git).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-5}
BIN=build/snapdiff
STAGE=build/snapdiff_stage_bench
OUT=bench/out
mkdir -p "$OUT"
IN=${2:-$OUT/xxl_fp8.pickle}
[[ -f $IN ]] || xz -dc tests/data/real/xxl_fp8.pickle.xz >"$IN"
stem=$OUT/$(basename "${IN%%.*}")
echo "machine: $(nproc) cores; $(uptime | sed 's/.*load/load/')"
echo "snapdiff: $($BIN --version)"

# median of the first field over RUNS runs of a command, "wall user rss".
runs() {
  local what=$1
  shift
  for ((i = 1; i <= RUNS; i++)); do
    /usr/bin/time -f "%e %U %M" -o "$OUT/time.txt" "$@" >/dev/null
    cat "$OUT/time.txt"
  done | sort -n | awk -v w="$what" '{a[NR]=$0} END {split(a[int((NR+1)/2)], m, " ");
    printf "  %-34s wall %.2f s, user %.2f s, peak RSS %.0f MB (median of %d)\n", w, m[1], m[2], m[3] / 1024, NR}'
}

echo "convert $IN:"
runs "-> .snap v3" $BIN convert "$IN" -o "$stem.v3.snap"
runs "-> .snap JSON (convert --json)" $BIN convert --json "$IN" -o "$stem.v1.snap"
echo "sizes:"
for f in "$IN" "$stem.v1.snap" "$stem.v3.snap"; do
  printf '  %-34s %10d bytes\n' "$(basename "$f")" "$(stat -L -c %s "$f")"
done
echo "report --format json:"
for f in "$IN" "$stem.v1.snap" "$stem.v3.snap"; do
  runs "$(basename "$f")" $BIN report --format json "$f"
done
# The same report from all three (apart from the INPUT section).
for f in "$stem.v1.snap" "$stem.v3.snap"; do
  cmp -s <($BIN report --format json "$IN" | python3 -c 'import json,sys; d=json.load(sys.stdin); d.pop("input"); print(json.dumps(d))') \
    <($BIN report --format json "$f" | python3 -c 'import json,sys; d=json.load(sys.stdin); d.pop("input"); print(json.dumps(d))') ||
    { echo "FAIL: the report of $f differs from the pickle's"; exit 1; }
done
echo "stages (snapdiff_stage_bench, median of $RUNS):"
for f in "$IN" "$stem.v1.snap" "$stem.v3.snap"; do
  printf '  %-34s %s\n' "$(basename "$f")" "$($STAGE "$f" "$RUNS" 2>&1 | tail -1)"
done
