#!/usr/bin/env bash
# Memory under load: snapdiff report on a ~2 GB snapshot made by repeating
# the real 1,000,000-event xxl_fp8 trace (bench/make_big_snapshot.py, frames
# unshared: the worst case), with
# the default memory bound (75% of RAM) and with a bound it does not fit in.
# Prints wall time, peak RSS, the predicted bound and the refusal message.
#   bash bench/bench_memory.sh [TARGET_BYTES]   (default 2147483648; SNAPDIFF=path/to/snapdiff)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=bench/out
SHARED=tests/data/real
target=${1:-2147483648}
BIN=${SNAPDIFF:-./build/snapdiff}
mkdir -p $OUT
[[ -f $OUT/xxl_fp8.pickle ]] || xz -dkc "$SHARED/xxl_fp8.pickle.xz" >$OUT/xxl_fp8.pickle
big=$OUT/big_$((target >> 20))M.pickle
[[ -f $big ]] || python3 bench/make_big_snapshot.py --frames unshared $OUT/xxl_fp8.pickle "$target" "$big"
ls -l "$big"
echo "== report, default bound"
/usr/bin/time -f "wall %e s, peak RSS %M KB" "$BIN" report "$big" >/dev/null
echo "== report --format json, default bound"
/usr/bin/time -f "wall %e s, peak RSS %M KB" "$BIN" report --format json "$big" >/dev/null
echo "== report --max-memory 1GiB (must refuse, exit 3)"
set +e
/usr/bin/time -f "wall %e s, peak RSS %M KB" "$BIN" report --max-memory 1GiB "$big" >/dev/null
echo "exit $?"
