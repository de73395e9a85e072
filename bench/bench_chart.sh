#!/usr/bin/env bash
# Times `snapdiff chart` (every kind, SVG and PNG) and `snapdiff report
# --format html` on the 1,000,000-event xxl_fp8 snapshot, next to `snapdiff
# report --format json` (the same read and analysis without pictures):
# median wall time, peak RSS, output size and, for SVG, the elements drawn.
# Usage: bench/bench_chart.sh [RUNS]        (default 5 runs of each)
#   SNAPDIFF=path/to/snapdiff   the binary to time (default build/snapdiff)
# Inputs and outputs go to bench/out/ (ignored by git).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-5}
BIN=${SNAPDIFF:-build/snapdiff}
DATA=tests/data/real
OUT=bench/out
mkdir -p "$OUT"
[[ -x $BIN ]] || bash scripts/build.sh >/dev/null
IN=$OUT/xxl_fp8.pickle
[[ -f $IN ]] || xz -dc "$DATA/xxl_fp8.pickle.xz" >"$IN"
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "snapdiff: $($BIN --version)"
echo "input: $IN ($(($(stat -c %s "$IN") / 1000000)) MB)"
printf '%-34s %9s %10s %10s %9s\n' "command" "wall" "peak RSS" "output" "elements"
bench() {  # bench LABEL OUTFILE ARGS...
  local label=$1 out=$2; shift 2
  local walls=() rss=0
  for ((i = 1; i <= RUNS; i++)); do
    /usr/bin/time -f "%e %M" -o "$OUT/time.txt" "$BIN" "$@" >/dev/null
    read -r wall kb <"$OUT/time.txt"
    walls+=("$wall")
    ((kb > rss)) && rss=$kb
  done
  local median; median=$(printf '%s\n' "${walls[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  local size="-" elements="-"
  if [[ $out != - ]]; then
    size=$(awk -v b="$(stat -c %s "$out")" 'BEGIN { if (b >= 1e6) printf("%.1f MB", b / 1e6); else printf("%.0f KB", b / 1e3) }')
    [[ $out == *.svg ]] && elements=$(grep -c 'class="node' "$out" || true)
  fi
  printf '%-34s %7.2f s %7.0f MB %10s %9s\n' "$label" "$median" "$((rss / 1024))" "$size" "$elements"
}
bench "report --format json" "$OUT/xxl.json" report --format json -o "$OUT/xxl.json" "$IN"
for kind in timeline flame lifetime; do
  for ext in svg png; do
    bench "chart --kind $kind -o .$ext" "$OUT/chart_$kind.$ext" chart "$IN" --kind "$kind" -o "$OUT/chart_$kind.$ext"
  done
done
bench "chart --kind lifetime --group site" "$OUT/chart_site.svg" chart "$IN" --kind lifetime --group site -o "$OUT/chart_site.svg"
bench "chart --kind lifetime --top 5000" "$OUT/chart_5000.svg" chart "$IN" --kind lifetime --top 5000 -o "$OUT/chart_5000.svg"
bench "report --format html" "$OUT/xxl.html" report --format html -o "$OUT/xxl.html" "$IN"
