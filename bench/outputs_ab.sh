#!/usr/bin/env bash
# Writes every output snapdiff gives for the bundled samples and every file in
# tests/data/real/ (report as text, JSON and HTML; the sample pairs' diffs in
# every format; rank folders; capture recordings) into OUT_DIR, one file per
# command, so that two builds can be compared byte for byte:
#   bash bench/outputs_ab.sh OLD_BIN /tmp/a; bash bench/outputs_ab.sh NEW_BIN /tmp/b; diff -r /tmp/a /tmp/b
# Paths are printed relative to the repository root (run from anywhere).
# A refactoring that must not change any output is checked this way against
# the build of the commit before it (issue 35's acceptance).
set -u
BIN=$(realpath "$1")
OUT=$(mkdir -p "$2" && realpath "$2")
cd "$(dirname "$0")/.."
run() {  # NAME ARGS...
  local name=$1; shift
  "$BIN" "$@" >"$OUT/$name" 2>"$OUT/$name.err"
  echo "exit $?" >>"$OUT/$name.err"
}
inputs=(sample_snapshots/*.snap sample_snapshots/*.pickle sample_snapshots/*.pickle.gz
        tests/data/real/*.pickle tests/data/real/*.pickle.gz tests/data/real/*.trace.json.gz
        tests/data/real/capture/*.snap tests/data/real/capture/*.pickle.gz tests/data/real/whatif/*.pickle.gz
        tests/data/capture/*.snap)
n=0
for f in "${inputs[@]}"; do
  [[ -f $f ]] || continue
  k=${f//\//_}
  for fmt in text json html; do run "report.$k.$fmt" report --format "$fmt" "$f"; n=$((n+1)); done
done
for d in tests/data/real/ranks/*/; do
  k=$(basename "$d")
  for fmt in text json markdown html; do run "ranks.$k.$fmt" report --format "$fmt" "$d"; n=$((n+1)); done
done
pairs=("sample_snapshots/fp8_no_pw.snap sample_snapshots/fp8_pw.snap"
       "sample_snapshots/small_fp8.pickle sample_snapshots/small_fp8_pw.pickle"
       "sample_snapshots/small_bf16.pickle sample_snapshots/small_fp8.pickle"
       "tests/data/real/ans_gpt2_py.pickle.gz tests/data/real/ans_gpt2_cpp.pickle.gz")
i=0
for p in "${pairs[@]}"; do
  i=$((i+1))
  # shellcheck disable=SC2086
  for fmt in text json markdown html; do run "diff.$i.$fmt" diff --format "$fmt" $p; n=$((n+1)); done
done
run explain.text report --explain _multi_tensor_adam sample_snapshots/small_bf16.pickle
run explain.json report --format json --explain _multi_tensor_adam sample_snapshots/small_bf16.pickle
run atphase.text report --at "iteration 2 backward" sample_snapshots/small_fp8.pickle
run atphase.json report --format json --at "iteration 2 backward" sample_snapshots/small_fp8.pickle
run memtl.json report --format json tests/data/real/small_profile.trace.json.gz --memory-timeline tests/data/real/small_profile.memtl.raw.json.gz
run memtl.text report tests/data/real/small_profile.trace.json.gz --memory-timeline tests/data/real/small_profile.memtl.raw.json.gz
run joint.json report --format json tests/data/profile/joint.snapshot.pickle --trace tests/data/profile/joint.trace.json.gz
for k in gpt2_train fsdp_gpt2 fp8_mlp; do
  for fmt in text json html; do
    run "kernels.$k.$fmt" report --format "$fmt" tests/data/real/capture/$k.pickle.gz --kernels tests/data/real/capture/$k.kernels.snap
  done
done
run whatif.text whatif --sweep tests/data/real/whatif/gpt2__default.pickle.gz
run whatif.json whatif --format json --sweep tests/data/real/whatif/gpt2__default.pickle.gz
run check.text check --max-increase 2% sample_snapshots/small_bf16.pickle sample_snapshots/small_fp8.pickle
run check.json check --format json --max-peak 300MiB --limit activation=10MiB sample_snapshots/small_fp8_pw.pickle
echo "$n+ outputs in $OUT"
