#!/usr/bin/env bash
# The bad-input contract at the command line, for inputs that are not plain
# files or that change under the reader: FIFOs, endless inputs (/dev/zero,
# a pipe from yes) as the input, rules or budget, a file that shrinks while
# it is read, and inputs predicted to need more memory than allowed. Each must
# end in exit 3 with one 'snapdiff: error: FILE: ...' line and nothing on
# stdout — never a crash, a hang, or the kernel's OOM killer.
# Usage: contract_cli_test.sh path/to/snapdiff SOURCE_DIR UNPACKED_DATA_DIR
set -u
BIN=$1
SRC=$2
DATA=$SRC/tests/data/real
UNPACKED=${3:-}
T=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$T"' EXIT
source "$SRC/tests/cli_lib.sh"
one_error_line() {  # NAME FILE: the error contract on $T/out, $T/err
  local lines; lines=$(wc -l <"$T/err")
  [[ $lines -eq 1 ]] && grep -q "^snapdiff: error: $2: " "$T/err" || { fail "$1: stderr is not one error line:"; cat "$T/err"; }
  [[ -s $T/out ]] && fail "$1: printed to stdout"
}

# A FIFO nobody writes to: end of input at once, an input error (no hang).
mkfifo "$T/nowriter.fifo"
timeout 20 "$BIN" report "$T/nowriter.fifo" >"$T/out" 2>"$T/err"; rc=$?
[[ $rc -eq 3 ]] && echo "ok   FIFO without a writer" || fail "FIFO without a writer: exit $rc"
one_error_line "FIFO without a writer" "$T/nowriter.fifo"

# A writer for a FIFO that is connected before the reader starts: opened
# read-write (which never waits for a partner), so snapdiff cannot open the
# FIFO before any writer exists and read an empty pipe; bounded, so a reader
# that stops early never leaves it blocked.
feed_fifo() {  # FIFO COMMAND...
  local fifo=$1; shift
  rm -f "$fifo.ready"
  (exec 3<>"$fifo"; : >"$fifo.ready"; timeout 20 "$@" >&3) &
  for _ in $(seq 200); do [[ -e "$fifo.ready" ]] && return; sleep 0.05; done
}

# A FIFO fed junk.
mkfifo "$T/junk.fifo"
feed_fifo "$T/junk.fifo" head -c 100000 /dev/urandom
timeout 20 "$BIN" report "$T/junk.fifo" >"$T/out" 2>"$T/err"; rc=$?
[[ $rc -eq 3 ]] && echo "ok   FIFO with junk" || fail "FIFO with junk: exit $rc"
one_error_line "FIFO with junk" "$T/junk.fifo"
wait

# A FIFO fed a real snapshot still works (process substitution, pipes).
mkfifo "$T/good.fifo"
feed_fifo "$T/good.fifo" cat "$DATA/small_bf16.pickle"
timeout 20 "$BIN" report "$T/good.fifo" >"$T/out" 2>"$T/err"; rc=$?
[[ $rc -eq 0 ]] && grep -q "^PEAK" "$T/out" && echo "ok   FIFO with a snapshot" || fail "FIFO with a snapshot: exit $rc"
wait

# Endless inputs and FIFOs for every file a command reads: bounded, never
# read until memory runs out, never a hang (peak RSS against the bound is
# measured by bench/hostile/probes_bounds.py, the hostile_probes test).
yes | timeout 20 "$BIN" report --max-input-bytes 1000000 /dev/stdin >"$T/out" 2>"$T/err"; rc=$?
[[ $rc -eq 3 ]] && grep -q -- "more than 1000000 bytes" "$T/err" && echo "ok   endless stdin" || fail "endless stdin: exit $rc"
one_error_line "endless stdin" /dev/stdin
timeout 20 "$BIN" report --max-memory 128MiB /dev/zero >"$T/out" 2>"$T/err"; rc=$?
[[ $rc -eq 3 ]] && grep -q -- "--max-memory" "$T/err" && echo "ok   /dev/zero" || fail "/dev/zero: exit $rc"
one_error_line "/dev/zero" /dev/zero
timeout 20 "$BIN" report --rules /dev/zero "$DATA/small_bf16.pickle" >"$T/out" 2>"$T/err"; rc=$?
[[ $rc -eq 3 ]] && echo "ok   --rules /dev/zero" || fail "--rules /dev/zero: exit $rc"
one_error_line "--rules /dev/zero" /dev/zero
timeout 20 "$BIN" check --budget /dev/zero "$DATA/small_bf16.pickle" >"$T/out" 2>"$T/err"; rc=$?
[[ $rc -eq 3 ]] && echo "ok   --budget /dev/zero" || fail "--budget /dev/zero: exit $rc"
one_error_line "--budget /dev/zero" /dev/zero
timeout 20 "$BIN" report --rules "$T/nowriter.fifo" "$DATA/small_bf16.pickle" >"$T/out" 2>"$T/err"; rc=$?
[[ $rc -eq 3 ]] && echo "ok   --rules FIFO without a writer" || fail "--rules FIFO without a writer: exit $rc"
one_error_line "--rules FIFO without a writer" "$T/nowriter.fifo"
timeout 20 "$BIN" check --budget "$T/nowriter.fifo" "$DATA/small_bf16.pickle" >"$T/out" 2>"$T/err"; rc=$?
[[ $rc -eq 3 ]] && echo "ok   --budget FIFO without a writer" || fail "--budget FIFO without a writer: exit $rc"
one_error_line "--budget FIFO without a writer" "$T/nowriter.fifo"
# --max-input-bytes holds for plain files too; bytes after a gzip stream are refused.
"$BIN" report --max-input-bytes 1000 "$DATA/small_bf16.pickle" >"$T/out" 2>"$T/err"; rc=$?
[[ $rc -eq 3 ]] && grep -q -- "--max-input-bytes" "$T/err" && echo "ok   --max-input-bytes on a plain file" \
  || fail "--max-input-bytes on a plain file: exit $rc"
{ gzip -c "$DATA/small_bf16.pickle"; printf 'junk'; } >"$T/trailing.gz"
"$BIN" report "$T/trailing.gz" >"$T/out" 2>"$T/err"; rc=$?
[[ $rc -eq 3 ]] && grep -q "4 bytes after the end of the gzip stream" "$T/err" && echo "ok   bytes after a gzip stream" \
  || fail "bytes after a gzip stream: exit $rc"
one_error_line "bytes after a gzip stream" "$T/trailing.gz"
{ head -c 50000 "$DATA/small_bf16.pickle" | gzip -c; tail -c +50001 "$DATA/small_bf16.pickle" | gzip -c; } >"$T/members.gz"
"$BIN" report "$T/members.gz" >"$T/out" 2>"$T/err"; rc=$?
[[ $rc -eq 0 ]] && grep -q "^PEAK" "$T/out" && echo "ok   two gzip members" || fail "two gzip members: exit $rc"

# A file that shrinks while it is read: the memory-mapped gzip path faults
# (SIGBUS) and the plain-pickle path reads short. Either way exit 3 and one
# line, or exit 0 when the reader was done before the file changed — never a
# crash. Retried so that at least one run really races.
need "$UNPACKED/xxl_fp8.pickle"  # unpacked by the build from tests/data/real/xxl_fp8.pickle.xz
{
  cp "$UNPACKED/xxl_fp8.pickle" "$T/big.src"
  gzip -1 -c "$T/big.src" >"$T/big.gz.src"
  raced=0
  for kind in gz plain; do
    for try in 1 2 3 4 5; do
      if [[ $kind == gz ]]; then cp "$T/big.gz.src" "$T/shrink"; else cp "$T/big.src" "$T/shrink"; fi
      "$BIN" report "$T/shrink" >"$T/out" 2>"$T/err" &
      pid=$!
      sleep 0.$((1 + try))
      truncate -s 4096 "$T/shrink"
      wait $pid; rc=$?
      if [[ $rc -eq 3 ]]; then
        one_error_line "shrinking $kind file" "$T/shrink"
        raced=$((raced+1))
        break
      elif [[ $rc -ne 0 ]]; then
        fail "shrinking $kind file: exit $rc"; cat "$T/err"; break
      fi
    done
  done
  [[ $raced -ge 1 ]] && echo "ok   file shrinking while read ($raced of 2 kinds raced)" || fail "shrinking file: never raced"
  # More memory than allowed: refused before reading, with the bound and the option.
  "$BIN" report --max-memory 64MiB "$T/big.src" >"$T/out" 2>"$T/err"; rc=$?
  [[ $rc -eq 3 ]] && grep -q -- "--max-memory" "$T/err" && grep -q "64 MiB" "$T/err" \
    && echo "ok   memory bound refuses a large input" || fail "memory bound: exit $rc: $(cat "$T/err")"
  one_error_line "memory bound" "$T/big.src"
  "$BIN" report --max-memory 64MiB "$T/big.gz.src" >"$T/out" 2>"$T/err"; rc=$?
  [[ $rc -eq 3 ]] && grep -q -- "--max-memory" "$T/err" && echo "ok   memory bound refuses a large gzip input" \
    || fail "memory bound (gzip): exit $rc: $(cat "$T/err")"
  "$BIN" diff --max-memory 64MiB "$T/big.src" "$T/big.src" >"$T/out" 2>"$T/err"; rc=$?
  [[ $rc -eq 3 ]] && echo "ok   memory bound in diff" || fail "memory bound (diff): exit $rc"
}

[[ $fails -eq 0 ]] && echo "contract_cli: all passed" || echo "contract_cli: $fails failed"
exit $((fails > 0))
