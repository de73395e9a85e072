#!/usr/bin/env bash
# snapdiff against the Python a user would write (bench/python_baseline.py:
# pickle.load and a plain replay loop), pair by pair: each round runs both on
# the same file one after the other, so both see the same load on the
# machine; the ratio of each pair is the figure that holds across machines.
#   bash bench/bench_vs_python.sh [ROUNDS] [FILE]   (default 5, bench/out/xxl_fp8.pickle; SNAPDIFF=path/to/snapdiff)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
f=${2:-bench/out/xxl_fp8.pickle}
BIN=${SNAPDIFF:-./build/snapdiff}
mkdir -p bench/out
[[ -f $f || $f != bench/out/xxl_fp8.pickle ]] || xz -dkc tests/data/real/xxl_fp8.pickle.xz >"$f"
wall() { /usr/bin/time -f "%e %M" "$@" 2>&1 >/dev/null | tail -1; }
echo "file: $f ($(stat -c %s "$f") bytes); machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-6s %12s %12s %10s %14s\n' round python_s snapdiff_s ratio snapdiff_rss_MB
ratios=()
for r in $(seq 1 "$rounds"); do
  read -r py _ < <(wall python3 bench/python_baseline.py "$f")
  read -r sd rss < <(wall "$BIN" report --format json "$f")
  ratio=$(python3 -c "print(f'{$py / $sd:.1f}')")
  ratios+=("$ratio")
  printf '%-6s %12s %12s %10s %14s\n' "$r" "$py" "$sd" "$ratio" "$((rss / 1024))"
done
echo "median ratio: $(printf '%s\n' "${ratios[@]}" | sort -g | sed -n "$(((rounds + 1) / 2))p")"
