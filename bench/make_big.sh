#!/usr/bin/env bash
# The two ~2 GB snapshots of the benchmarks, made from the real 1,000,000-event
# xxl_fp8 recording by repeating its trace (bench/make_big_snapshot.py):
#   bench/out/big_shared.pickle    frame dicts and strings memoized and shared,
#                                  as PyTorch writes them (about 11 copies)
#   bench/out/big_unshared.pickle  nothing shared: the worst case for a reader
#                                  (a third of one copy)
# Prints each file's size, events and the time the generator took.
#   bash bench/make_big.sh            TARGET=bytes (default 2000000000), FORCE=1 remakes
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=bench/out
target=${TARGET:-2000000000}
mkdir -p $OUT
[[ -f $OUT/xxl_fp8.pickle ]] || xz -dc tests/data/real/xxl_fp8.pickle.xz >$OUT/xxl_fp8.pickle
for frames in shared unshared; do
  f=$OUT/big_$frames.pickle
  if [[ -f $f && ${FORCE:-0} != 1 ]]; then
    echo "$f: kept ($(stat -c %s "$f") bytes; FORCE=1 remakes it)"
    continue
  fi
  start=$(date +%s.%N)
  python3 bench/make_big_snapshot.py --frames $frames $OUT/xxl_fp8.pickle "$target" "$f.tmp"
  mv "$f.tmp" "$f"
  end=$(date +%s.%N)
  echo "$f: $(stat -c %s "$f") bytes, made in $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }') s"
done
