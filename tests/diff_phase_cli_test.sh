#!/usr/bin/env bash
# `snapdiff diff A B`: a kind of phase whose peak moves (5% of the larger
# phase peak and 64 MiB or more) while the overall peak stays in its phase
# is a finding of its own, in every format; a run against itself has none.
# Usage: diff_phase_cli_test.sh path/to/snapdiff SOURCE_DIR
set -u
BIN=$1
SRC=$2
NO_PW=$SRC/sample_snapshots/fp8_no_pw.snap
PW=$SRC/sample_snapshots/fp8_pw.snap
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
unset GITHUB_ACTIONS
source "$SRC/tests/cli_lib.sh"
need "$NO_PW" "$PW"

# Both peaks in iteration 2's backward; the optimizer step's peak falls 14.7 GiB.
check "diff: fp8 without and with primary weights" 0 "$BIN" diff "$NO_PW" "$PW" --width 1000
expect "the peak finding" "$T/out" "^  \* The peak moves -5.0 GiB .*(iteration 2, backward) against .*(iteration 2, backward)\.$"
expect "the optimizer phase's finding" "$T/out" \
  "^  \* Optimizer phase peak -14.7 GiB (iteration 1: 50.1 GiB in A, 35.4 GiB in B): mostly optimizer_temporary -9.7 GiB, parameter -5.0 GiB\.$"
expect_not "the peak's phase is not repeated" "$T/out" "Backward phase peak"
n=$(grep -c "^  \* [A-Z][a-z-]* phase peak " "$T/out")
[[ $n -ge 1 && $n -le 3 ]] && echo "ok   at most 3 phase findings ($n)" || fail "phase findings: $n, expected 1 to 3"
for fmt in json markdown html; do
  check "diff -f $fmt" 0 "$BIN" diff "$NO_PW" "$PW" -f "$fmt"
  expect "-f $fmt: the optimizer phase's finding" "$T/out" "Optimizer phase peak -14.7 GiB (iteration 1: 50.1 GiB in A, 35.4 GiB in B)"
done
check "diff -f json (kind)" 0 "$BIN" diff "$NO_PW" "$PW" -f json
expect "-f json: its kind is phase" "$T/out" '"kind": *"phase"'

check "diff: a run against itself" 0 "$BIN" diff "$PW" "$PW" --width 1000
expect_not "no phase finding" "$T/out" "phase peak"

echo "$fails failure(s)"
[[ $fails -eq 0 ]]
