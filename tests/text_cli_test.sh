#!/usr/bin/env bash
# Readable text, as a user meets it (issue 38): every line of every text
# output fits the width (80 when standard output is not a terminal,
# --width N otherwise; prose wrapped, table rows cut with "…"), counted in
# characters, not bytes.
# Usage: text_cli_test.sh path/to/snapdiff SOURCE_DIR
set -u
BIN=$1
SRC=$2
R=$SRC/tests/data/real
S=$SRC/sample_snapshots
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
source "$SRC/tests/cli_lib.sh"
need "$R/ans_gpt2_py.pickle.gz" "$R/ans_gpt2_cpp.pickle.gz" "$R/capture/gpt2_train.pickle.gz" "$S/bf16.snap" "$S/fp8_pw.snap"

# The longest line of a file in characters (UTF-8 decoded), and how many
# lines are longer than N.
longest() { python3 -c 'import sys; print(max((len(l.rstrip("\n")) for l in open(sys.argv[1], encoding="utf-8")), default=0))' "$1"; }
over() { python3 -c 'import sys; print(sum(len(l.rstrip("\n")) > int(sys.argv[2]) for l in open(sys.argv[1], encoding="utf-8")))' "$1" "$2"; }

# Every text-producing command on real recordings; stdout is a file here.
run_all() {  # run_all EXTRA_ARGS... : each command's stdout appended to $T/all
  : >"$T/all"
  check "report $*" 0 "$BIN" report "$R/ans_gpt2_py.pickle.gz" "$@" && cat "$T/out" >>"$T/all"
  check "report late start $*" 0 "$BIN" report "$R/cat_late_llama.pickle.gz" "$@" && cat "$T/out" >>"$T/all"
  check "report capture $*" 0 "$BIN" report "$R/capture/gpt2_train.pickle.gz" "$@" && cat "$T/out" >>"$T/all"
  check "report snap $*" 0 "$BIN" report "$S/fp8_pw.snap" "$@" && cat "$T/out" >>"$T/all"
  check "diff $*" 0 "$BIN" diff "$S/bf16.snap" "$S/fp8_pw.snap" "$@" && cat "$T/out" >>"$T/all"
  check "diff real $*" 0 "$BIN" diff "$R/ans_gpt2_py.pickle.gz" "$R/capture/gpt2_train.pickle.gz" "$@" && cat "$T/out" >>"$T/all"
  check "check $*" 1 "$BIN" check "$R/ans_gpt2_py.pickle.gz" "$R/capture/gpt2_train.pickle.gz" --max-increase 1% \
    --allow-late-start "$@" && cat "$T/out" >>"$T/all"
  check "whatif $*" 0 "$BIN" whatif "$R/ans_gpt2_py.pickle.gz" --sweep "$@" && cat "$T/out" >>"$T/all"
  check "ranks $*" 0 "$BIN" report "$R/capture" "$@" && cat "$T/out" >>"$T/all"
}

run_all
n=$(over "$T/all" 80)
[[ $n -eq 0 ]] || { echo "FAIL default width: $n lines over 80 columns"; python3 -c 'import sys
for l in open(sys.argv[1], encoding="utf-8"):
  if len(l.rstrip("\n")) > 80: print("  ", l.rstrip("\n"))' "$T/all" | head -5; fails=$((fails+1)); }
# Cut table cells end with the one-column ellipsis; the prose is wrapped.
expect "default width: a cut cell" "$T/all" "…$"
expect "default width: wrapped warning" "$T/all" "^  \[history_truncated\] device 0: recording started after memory was already"

run_all --width 120
n=$(over "$T/all" 120)
[[ $n -eq 0 ]] || { echo "FAIL --width 120: $n lines over 120 columns"; fails=$((fails+1)); }
n=$(over "$T/all" 80)
[[ $n -gt 0 ]] || { echo "FAIL --width 120: no line longer than 80 columns"; fails=$((fails+1)); }

run_all --width 40
n=$(over "$T/all" 40)
[[ $n -eq 0 ]] || { echo "FAIL --width 40: $n lines over 40 columns"; fails=$((fails+1)); }

# A width outside 40..1000 is a usage error (exit 2, one line), for every command.
for cmd in "report $R/ans_gpt2_py.pickle.gz" "diff $S/bf16.snap $S/fp8_pw.snap" "check $R/ans_gpt2_py.pickle.gz --max-peak 1GiB" \
           "whatif $R/ans_gpt2_py.pickle.gz --sweep" "report $R/capture"; do
  for w in 10 1001 abc; do
    # shellcheck disable=SC2086
    check "$cmd --width $w" 2 "$BIN" $cmd --width $w
    expect "$cmd --width $w" "$T/err" "^snapdiff: error: --width: '$w' is not a width from 40 to 1000 columns"
  done
done
# The terminal's width applies only to a terminal: $COLUMNS does not widen a pipe.
COLUMNS=200 "$BIN" report "$R/capture/gpt2_train.pickle.gz" >"$T/piped"
[[ $(longest "$T/piped") -le 80 ]] || { echo "FAIL COLUMNS=200 widened a pipe"; fails=$((fails+1)); }
if ((fails)); then echo "$fails text CLI test(s) failed"; exit 1; fi
echo "all text CLI tests passed"
