#!/usr/bin/env bash
# snapdiff's read against the floor (issue 40): builds bench/skim.c (the
# pickle opcode walk that builds nothing) and times, pair by pair, cat, the
# walk, `snapdiff report` of the pickle and of its .snap, and a diff, on
# xxl_fp8 and on the 2 GB snapshots when bench/make_big.sh has made them.
# Usage: bench/bench_floor.sh [SNAPDIFF] [ROUNDS]     (build/snapdiff, 5)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-build/snapdiff}
OUT=bench/out
mkdir -p "$OUT"
cc -O2 -o "$OUT/skim" bench/skim.c
[[ -f $OUT/xxl_fp8.pickle ]] || xz -dc tests/data/real/xxl_fp8.pickle.xz >"$OUT/xxl_fp8.pickle"
inputs=("$OUT/xxl_fp8.pickle")
for f in "$OUT/big_shared.pickle" "$OUT/big_unshared.pickle"; do [[ -f $f ]] && inputs+=("$f"); done
python3 bench/bench_floor.py --bin "$BIN" --skim "$OUT/skim" --rounds "${2:-5}" "${inputs[@]}"
