#!/usr/bin/env bash
# `diff A B` and `check BASELINE CANDIDATE` read their two runs on two
# threads (-j 2, the default on two cores) or one after the other (-j 1):
# the outputs are the same byte for byte, and when inputs cannot be read the
# error is the one the one-after-the-other order meets first.
# Usage: pair_cli_test.sh path/to/snapdiff SOURCE_DIR
set -u
BIN=$1
SRC=$2
DATA=$SRC/tests/data/real
BF16=$DATA/small_bf16.pickle
FP8=$DATA/small_fp8.pickle
PW=$DATA/small_fp8_pw.pickle
GPT2=$SRC/sample_snapshots/gpt2_run.pickle.gz
GPT2_KERNELS=$SRC/sample_snapshots/gpt2_run.kernels.snap
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
unset GITHUB_ACTIONS
source "$SRC/tests/cli_lib.sh"
need "$FP8" "$PW" "$GPT2" "$GPT2_KERNELS"
same() {  # same NAME FILE_A FILE_B
  if cmp -s "$2" "$3"; then echo "ok   $1"; else echo "FAIL $1: outputs differ"; diff "$2" "$3" | head -10; fails=$((fails+1)); fi
}
one_error_line() {  # stderr is one 'snapdiff: error: ...' line naming $2, stdout empty
  local lines; lines=$(wc -l <"$T/err")
  if [[ $lines -ne 1 ]] || ! grep -q "^snapdiff: error: .*$2" "$T/err"; then
    echo "FAIL $1: stderr is not one error line naming $2:"; cat "$T/err"; fails=$((fails+1)); fi
  if [[ -s $T/out ]]; then echo "FAIL $1: printed to stdout on error"; fails=$((fails+1)); fi
}

# --- the same output on one thread and on two -------------------------------
for fmt in json text markdown html; do
  check "diff -j 1 -f $fmt" 0 "$BIN" diff "$BF16" "$FP8" -j 1 -f "$fmt"; cp "$T/out" "$T/one.$fmt"
  check "diff -j 2 -f $fmt" 0 "$BIN" diff "$BF16" "$FP8" -j 2 -f "$fmt"; cp "$T/out" "$T/two.$fmt"
  same "diff -f $fmt: -j 1 and -j 2" "$T/one.$fmt" "$T/two.$fmt"
done
expect "the diff is of both runs" "$T/one.json" "small_fp8.pickle"
check "diff (default -j)" 0 "$BIN" diff "$BF16" "$FP8" -f json
same "diff: the default and -j 1" "$T/one.json" "$T/out"
check "diff --kernels-b -j 1" 0 "$BIN" diff "$GPT2" "$GPT2" --kernels-b "$GPT2_KERNELS" -j 1 -f json; cp "$T/out" "$T/k1"
check "diff --kernels-b -j 2" 0 "$BIN" diff "$GPT2" "$GPT2" --kernels-b "$GPT2_KERNELS" -j 2 -f json
same "diff --kernels-b: -j 1 and -j 2" "$T/k1" "$T/out"
check "check -j 1" 1 "$BIN" check --max-increase 1% "$PW" "$BF16" -j 1 -f json; cp "$T/out" "$T/c1"
check "check -j 2" 1 "$BIN" check --max-increase 1% "$PW" "$BF16" -j 2 -f json
same "check: -j 1 and -j 2" "$T/c1" "$T/out"
expect "check compares the two runs" "$T/c1" "\"fail\""
# Each run needs about 65 MiB: half of 100 MiB refuses one of them, which is
# then read again with the whole bound, the runs one after the other.
check "check -j 2 --max-memory 100MiB" 1 "$BIN" check --max-increase 1% "$PW" "$BF16" -j 2 -f json --max-memory 100MiB
same "check --max-memory 100MiB: -j 2 and -j 1" "$T/c1" "$T/out"
check "check --max-memory below one run" 3 "$BIN" check --max-increase 1% "$PW" "$BF16" -j 2 --max-memory 60MiB
one_error_line "check --max-memory below one run" "small_fp8_pw.pickle"
check "-j 0" 2 "$BIN" diff "$BF16" "$FP8" -j 0
check "check -j with one run" 2 "$BIN" check --max-peak 1GiB "$FP8" -j 2

# --- errors: the first one reading A then B meets ----------------------------
printf 'not a snapshot' >"$T/bad_a.pickle"
head -c 1000 "$FP8" >"$T/bad_b.pickle"
for j in 1 2; do
  for k in 1 2 3; do
    check "both bad, -j $j ($k)" 3 "$BIN" diff "$T/bad_a.pickle" "$T/bad_b.pickle" -j "$j"
    one_error_line "both bad, -j $j ($k): A's error" "bad_a.pickle"
  done
  check "B bad, -j $j" 3 "$BIN" diff "$FP8" "$T/bad_b.pickle" -j "$j"
  one_error_line "B bad, -j $j" "bad_b.pickle"
  check "check, both bad, -j $j" 3 "$BIN" check --max-increase 1% "$T/bad_b.pickle" "$T/bad_a.pickle" -j "$j"
  one_error_line "check, both bad, -j $j: BASELINE's error" "bad_b.pickle"
  # A's kernel recording is of another run (a step after the reads) and B
  # cannot be read: reading B comes first.
  check "A's join and B's read fail, -j $j" 3 "$BIN" diff "$FP8" "$T/bad_b.pickle" --kernels-a "$GPT2_KERNELS" -j "$j"
  one_error_line "A's join and B's read fail, -j $j: B's read" "bad_b.pickle"
  check "A's join fails, -j $j" 3 "$BIN" diff "$FP8" "$BF16" --kernels-a "$GPT2_KERNELS" -j "$j"
  one_error_line "A's join fails, -j $j" "gpt2_run.kernels.snap"
done

echo "$fails failure(s)"
[[ $fails -eq 0 ]]
