#!/usr/bin/env bash
# Times the trace reader alone (snapdiff_read_bench: load_trace()) and the
# whole `snapdiff report --format json` on a large torch.profiler Chrome
# trace, uncompressed and gzip'd, printing wall time, MB/s of JSON text and
# peak RSS per run. Usage: bench/bench_trace.sh [RUNS] [TRACE.json]
#
# The input, in order of preference:
#   1. TRACE.json given on the command line;
#   2. bench/out/profile/resnet50.trace.json, the real trace recorded on an
#      H200 by scripts/record/record_profile.py (torchvision ResNet-50
#      training, batch 64, AdamW foreach, 60 profiled steps with
#      profile_memory, record_shapes and with_stack; about 300 MB):
#        python3 scripts/record/record_profile.py bench/out/profile 60
#      (bench/out is not in git);
#   3. otherwise a synthetic one, generated once by bench/make_big_trace.py
#      from tests/data/real/small_profile.trace.json.gz (its events repeated with
#      shifted times and ids, about 300 MB): its figures are SYNTHETIC.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-5}
BIN=${SNAPDIFF:-build/snapdiff}
READ_BENCH=$(dirname "$BIN")/snapdiff_read_bench
OUT=bench/out/profile
mkdir -p "$OUT"
[[ -x $BIN ]] || bash scripts/build.sh >/dev/null
label=real
if [[ $# -ge 2 ]]; then
  f=$2
elif [[ -f $OUT/resnet50.trace.json ]]; then
  f=$OUT/resnet50.trace.json
else
  f=$OUT/synthetic.trace.json
  label=SYNTHETIC
  [[ -f $f ]] || python3 bench/make_big_trace.py "$f" 300
fi
gz=$OUT/$(basename "$f").gz
[[ -f $gz && $gz -nt $f ]] || gzip -c -6 "$f" >"$gz"
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "snapdiff: $($BIN --version)"
bytes=$(stat -c %s "$f")
events=$($BIN report --format json "$f" | python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["input"]["events"], "memory events,", r["input"]["kernel_launches"], "kernels,", r["input"]["profiler"]["ops"], "ops")')
echo "input ($label): $f ($((bytes / 1000000)) MB of JSON; $events)"
for input in "$f" "$gz"; do
  echo "$input ($(($(stat -c %s "$input") / 1000000)) MB on disk):"
  if [[ -x $READ_BENCH ]]; then
    # The reader alone (load_trace), with the default threads and with one.
    "$READ_BENCH" "$input" "$RUNS"
    echo "  (one thread:)"
    "$READ_BENCH" "$input" "$RUNS" 0 | tail -1
  fi
  echo "  snapdiff report --format json (read, replay, analysis, JSON out):"
  walls=()
  for ((i = 1; i <= RUNS; i++)); do
    /usr/bin/time -f "%e %U %S %M" -o "$OUT/time.txt" "$BIN" report --format json "$input" >/dev/null
    read -r wall user sys rss <"$OUT/time.txt"
    walls+=("$wall")
    awk -v w="$wall" -v u="$user" -v s="$sys" -v r="$rss" -v b="$bytes" -v i="$i" \
      'BEGIN { printf "  run %d: %.2f s wall (%.2f s user, %.2f s sys), %.0f MB/s of JSON, peak RSS %.0f MB\n", i, w, u, s, b / 1e6 / (w > 0 ? w : 0.001), r / 1024 }'
  done
  printf '%s\n' "${walls[@]}" | sort -n | awk -v b="$bytes" '{a[NR]=$1} END {m=a[int((NR+1)/2)]; printf "  median: %.2f s wall, %.0f MB/s of JSON\n", m, b/1e6/m}'
done
