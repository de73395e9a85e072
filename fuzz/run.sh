#!/usr/bin/env bash
# Extra libFuzzer flags in FUZZ_ARGS (e.g. FUZZ_ARGS=-max_len=4096 for faster runs).
# SECONDS=0 builds the target and lays out its seeds without running it
# (fuzz/run_all.sh then runs many targets in parallel, here or on a bigger machine).
# Builds the libFuzzer targets with AddressSanitizer and UBSan (clang) and
# runs one for a while, seeded from real files. Findings land in
# bench/out/fuzz/TARGET/findings; the growing corpus in bench/out/fuzz/TARGET/corpus.
#   bash fuzz/run.sh TARGET SECONDS   (TARGET: fuzz_load fuzz_pickle fuzz_snap fuzz_rules fuzz_budget
#                                       fuzz_chrome_trace fuzz_memtl fuzz_sclog fuzz_tensors fuzz_whatif fuzz_ranks_summary)
set -euo pipefail
cd "$(dirname "$0")/.."
target=$1
secs=${2:-60}
shared=tests/data/real
B=build-fuzz
if [ ! -f $B/CMakeCache.txt ]; then
  CC=clang CXX=clang++ cmake -S . -B $B -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSNAPDIFF_FUZZ=ON \
    -DSNAPDIFF_BUILD_TESTS=OFF -DSNAPDIFF_BUILD_CAPTURE=OFF \
    -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer" >/dev/null
fi
cmake --build $B -j2 --target "$target" >/dev/null
out=bench/out/fuzz/$target
mkdir -p "$out/corpus" "$out/findings" "$out/seeds"
seed() { for f in "$@"; do [ -f "$f" ] && cp -f "$f" "$out/seeds/" || true; done; }
case $target in
  fuzz_load|fuzz_pickle)
    seed tests/data/*.pickle tests/data/*.pickle.gz "$shared/small_oom.pickle" tests/data/fuzz_regressions/pickle_* ;;
  fuzz_snap)
    for f in tests/data/capture/small_fp8.snap tests/data/capture/small_oom_fp8.snap; do
      [ -f "$f" ] && gzip -dc "$f" > "$out/seeds/$(basename "$f").json"
    done
    seed fuzz/seeds/snap_*.snap tests/data/fuzz_regressions/snap_* ;;  # version 3 (binary) and JSON
  fuzz_rules) seed rules/builtin.json fuzz/seeds/rules_*.json tests/data/fuzz_regressions/rules_* ;;
  fuzz_budget) seed fuzz/seeds/budget_*.json tests/data/fuzz_regressions/budget_* ;;
  fuzz_tensors) seed fuzz/seeds/tensors_*.json ;;
  fuzz_whatif) seed fuzz/seeds/whatif_* tests/data/fuzz_regressions/whatif_* ;;
  fuzz_ranks_summary) seed fuzz/seeds/summary_* tests/data/fuzz_regressions/summary_* ;;
  fuzz_chrome_trace)
    # Small real traces, and the first events of a large one cut to size.
    gzip -dc "$shared/small_profile.trace.json.gz" >"$out/seeds/small_profile.trace.json" 2>/dev/null || true
    gzip -dc tests/data/profile/joint.trace.json.gz >"$out/seeds/joint.trace.json" 2>/dev/null || true
    seed tests/data/profile/*.json tests/data/fuzz_regressions/trace_* ;;
  fuzz_memtl)
    seed "$shared/small_profile.memtl.json" "$shared/small_profile.memtl.raw.json.gz" tests/data/fuzz_regressions/memtl_* ;;
  fuzz_sclog) seed fuzz/seeds/sclog_*.sclog tests/data/fuzz_regressions/sclog_* ;;
  *) seed tests/data/fuzz_regressions/* ;;
esac
[ "$target" = fuzz_load ] && seed tests/data/capture/small_oom_fp8.snap
[ "$secs" = 0 ] && exit 0
echo "fuzz: $target for ${secs}s; corpus $out/corpus, findings $out/findings"
"$B/fuzz/$target" "$out/corpus" "$out/seeds" -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 ${FUZZ_ARGS:-} \
  -artifact_prefix="$out/findings/" -print_final_stats=1 2>&1 | tee "$out/last.log" | grep -E "^#[0-9]+ *(INITED|DONE)|stat::|ERROR|SUMMARY|Test unit written" || true
