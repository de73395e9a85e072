#!/usr/bin/env bash
# The cost of --kernels (docs/performance.md "Kernel recordings"): for each
# real recording of tests/data/real/capture/ and sample_snapshots/gpt2_run,
# `snapdiff report SNAPSHOT` against `snapdiff report SNAPSHOT --kernels
# RECORDING` (the join, the kernel of every allocation, BY KERNEL and the
# memory outside the allocator by caller): median wall time of RUNS runs
# (default 20) and the peak RSS. The overhead of recording itself is measured
# on the GPU by scripts/record/record_capture.py (its `overhead` check).
# Usage: bench/bench_kernels.sh [SNAPDIFF]
set -euo pipefail
cd "$(dirname "$0")/.."
SD=${1:-build/snapdiff}
RUNS=${RUNS:-20}
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
median() {  # the command's median wall seconds over RUNS runs
  local ts=()
  for _ in $(seq "$RUNS"); do
    local t0=$(date +%s%N)
    "$@" >/dev/null
    ts+=($(( $(date +%s%N) - t0 )))
  done
  printf '%s\n' "${ts[@]}" | sort -n | awk '{a[NR]=$1} END {printf "%.4f", a[int((NR+1)/2)]/1e9}'
}
rss() { /usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -1; }
printf '%-22s %8s %8s %10s %10s %10s\n' recording launches 'drv calls' 'plain s' 'kernels s' 'RSS KB'
for rec in tests/data/real/capture/*.kernels.snap sample_snapshots/gpt2_run.kernels.snap; do
  snap=${rec%.kernels.snap}.pickle.gz
  [[ -f $snap ]] || continue
  info=$("$SD" report "$snap" --kernels "$rec" --format json | python3 -c '
import json, sys
j = json.load(sys.stdin)["kernel_join"]
print(j.get("kernels", 0), j.get("driver_memory_events", 0))')
  plain=$(median "$SD" report "$snap")
  with=$(median "$SD" report "$snap" --kernels "$rec")
  printf '%-22s %8s %8s %10s %10s %10s\n' "$(basename "${rec%.kernels.snap}")" $info "$plain" "$with" \
    "$(rss "$SD" report "$snap" --kernels "$rec")"
done
