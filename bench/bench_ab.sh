#!/usr/bin/env bash
# A/B of two snapdiff binaries on the 1,000,000-event xxl_fp8 snapshot:
# instructions executed (valgrind --tool=callgrind: the same count for the
# same binary and input whatever else the machine does), then RUNS timed runs
# of each, interleaved, with wall time, user time and peak RSS.
# Usage: bench/bench_ab.sh OLD_BINARY NEW_BINARY [RUNS]   (default 5)
# AB_COMMAND sets the command measured (default "report --format json"),
# e.g. AB_COMMAND="check --limit optimizer_temporary=1GiB"; the input is the
# last argument. AB_TWICE=1 gives the input twice, for the commands of two
# runs: AB_COMMAND="diff --format json" AB_TWICE=1 diffs xxl_fp8 with itself.
set -euo pipefail
cd "$(dirname "$0")/.."
OLD=$1
NEW=$2
RUNS=${3:-5}
read -r -a CMD <<<"${AB_COMMAND:-report --format json}"
OUT=bench/out
mkdir -p "$OUT"
IN=$OUT/xxl_fp8.pickle
[[ -f $IN ]] || xz -dc tests/data/real/xxl_fp8.pickle.xz >"$IN"
INPUTS=("$IN")
[[ ${AB_TWICE:-0} == 1 ]] && INPUTS=("$IN" "$IN")
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
# AB_CALLGRIND=0 skips the instruction counts (a change of threads leaves them as they are).
[[ ${AB_CALLGRIND:-1} == 0 ]] || for b in "$OLD" "$NEW"; do
  valgrind --tool=callgrind --callgrind-out-file="$OUT/ab.callgrind" "$b" "${CMD[@]}" "${INPUTS[@]}" >/dev/null 2>"$OUT/ab.callgrind.log" || true
  echo "instructions  $(grep -m1 '^summary:' "$OUT/ab.callgrind" | cut -d' ' -f2)  $b"
done
for ((i = 0; i < RUNS; i++)); do
  for b in "$OLD" "$NEW"; do
    /usr/bin/time -f "run  %e s wall  %U s user  %M KiB RSS  $b" "$b" "${CMD[@]}" "${INPUTS[@]}" >/dev/null || true
  done
done 2>&1 | sort -k6 -k2n
rm -f "$OUT/ab.callgrind" "$OUT/ab.callgrind.log"
