#!/usr/bin/env bash
# Every subcommand `snapdiff --help` lists takes the shared input options
# (--max-memory, --max-input-bytes; docs/reliability.md, "Bounds"): its help
# names them, and a command line giving them is not refused as unknown. The
# commands come from the help itself, so a new command without them fails.
# Usage: input_options_cli_test.sh path/to/snapdiff SOURCE_DIR
set -u
BIN=$1
SRC=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
source "$SRC/tests/cli_lib.sh"

"$BIN" --help >"$T/help" || fail "snapdiff --help"
mapfile -t cmds < <(sed -n 's/^  snapdiff \([a-z][a-z-]*\) .*/\1/p' "$T/help" | sort -u)
[[ ${#cmds[@]} -ge 7 ]] || fail "only ${#cmds[@]} commands found in snapdiff --help: ${cmds[*]}"
for c in "${cmds[@]}"; do
  "$BIN" "$c" --help >"$T/out" 2>"$T/err" || fail "$c --help: exit $?"
  for o in --max-memory --max-input-bytes; do
    expect "$c --help names $o" "$T/out" "$o"
  done
  # A missing input: refused for that (exit 3) or for another option the
  # command needs (exit 2), never for the input options.
  "$BIN" "$c" --max-memory 1GiB --max-input-bytes 1GiB "$T/missing.pickle" >"$T/out" 2>"$T/err"
  rc=$?
  if grep -q "unrecognised option\|unknown option" "$T/err" || [[ $rc -ne 2 && $rc -ne 3 ]]; then
    fail "$c --max-memory: exit $rc: $(head -1 "$T/err")"
  else
    echo "ok   $c takes --max-memory and --max-input-bytes"
  fi
done

[[ $fails -eq 0 ]] && echo "all input-option checks passed (${cmds[*]})" || { echo "$fails failed"; exit 1; }
