#!/usr/bin/env bash
# Runs several libFuzzer targets at once, each with WORKERS parallel jobs of
# SECONDS each, and prints one summary line per target (executions summed
# over its jobs, coverage, corpus size, findings). Build and seed first with
# `bash fuzz/run.sh TARGET 0` for each target.
#   bash fuzz/run_all.sh SECONDS WORKERS [TARGET[=WORKERS] ...]
# FUZZ_BIN: the directory holding the targets (default build-fuzz/fuzz);
# FUZZ_WORK: seeds, corpora and findings (default bench/out/fuzz), laid out
# as fuzz/run.sh makes them. Extra libFuzzer flags in FUZZ_ARGS, and for one
# target in FUZZ_ARGS_<target> (e.g. FUZZ_ARGS_fuzz_chrome_trace=-max_len=65536).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=$1
workers=$2
shift 2
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_load fuzz_pickle fuzz_snap fuzz_rules fuzz_budget fuzz_chrome_trace fuzz_memtl fuzz_sclog fuzz_tensors)
bin=$(realpath "${FUZZ_BIN:-build-fuzz/fuzz}")
work=$(realpath "${FUZZ_WORK:-bench/out/fuzz}")
declare -A jobs
names=()
for spec in "${targets[@]}"; do
  t=${spec%%=*}
  jobs[$t]=$workers
  [[ $spec == *=* ]] && jobs[$t]=${spec#*=}
  names+=("$t")
done
for t in "${names[@]}"; do
  d=$work/$t
  extra="FUZZ_ARGS_$t"
  mkdir -p "$d/corpus" "$d/seeds" "$d/findings" "$d/logs"
  rm -f "$d/logs"/fuzz-*.log
  (cd "$d/logs" && "$bin/$t" "$d/corpus" "$d/seeds" -jobs="${jobs[$t]}" -workers="${jobs[$t]}" \
    -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 ${FUZZ_ARGS:-} ${!extra:-} \
    -artifact_prefix="$d/findings/" >/dev/null 2>&1) &
done
wait
# Summary: executed units summed over the jobs (also when one stopped on a finding); the largest "cov:" reached by any job.
for t in "${names[@]}"; do
  d=$work/$t
  execs=$(cat "$d/logs"/fuzz-*.log 2>/dev/null | sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' | awk '{s += $1} END {print s + 0}')
  cov=$(cat "$d/logs"/fuzz-*.log 2>/dev/null | sed -n 's/.* cov: \([0-9]*\) .*/\1/p' | sort -n | tail -1)
  ft=$(cat "$d/logs"/fuzz-*.log 2>/dev/null | sed -n 's/.* ft: \([0-9]*\) .*/\1/p' | sort -n | tail -1)
  crashes=$(cat "$d/logs"/fuzz-*.log 2>/dev/null | grep -c -E "^==[0-9]+==ERROR|^SUMMARY: |deadly signal|Test unit written" || true)
  printf '%s: %d jobs x %ss, %s executions, cov %s, ft %s, corpus %s files, findings %s files, %s error lines\n' \
    "$t" "${jobs[$t]}" "$secs" "$execs" "${cov:-?}" "${ft:-?}" "$(ls "$d/corpus" | wc -l)" "$(ls "$d/findings" | wc -l)" "$crashes"
done
