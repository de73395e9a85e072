#!/usr/bin/env bash
# Golden outputs: the text, JSON, Markdown and HTML that snapdiff writes for
# the bundled samples and the real recordings, byte for byte. The goldens in
# tests/golden/ were written by the commit before the analysis/report layers
# were rebuilt (issue 13); a change that alters an output on purpose
# regenerates them (--update) in the same commit and says why.
#
# Usage: golden_test.sh path/to/snapdiff SOURCE_DIR UNPACKED_DATA_DIR [--update]
# Each line of tests/golden/commands.txt is "NAME EXIT_CODE ARGS...", run in a
# folder where s/ is the source tree and xxl_fp8.pickle the unpacked xxl run,
# so that the paths the outputs print are the same on every machine.
set -u
BIN=$(realpath "$1")
SRC=$(realpath "$2")
UNPACKED=$3
UPDATE=${4:-}
GOLDEN=$SRC/tests/golden
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
source "$SRC/tests/cli_lib.sh"
need "$UNPACKED/xxl_fp8.pickle" "$GOLDEN/commands.txt"
ln -s "$SRC" "$T/s"
ln -s "$(realpath "$UNPACKED/xxl_fp8.pickle")" "$T/xxl_fp8.pickle"
cd "$T" || exit 1
n=0
while read -r name rc args; do
  [[ -z $name || $name == \#* ]] && continue
  n=$((n+1))
  # shellcheck disable=SC2086
  "$BIN" $args >"$T/out" 2>"$T/err"
  got=$?
  if [[ $got -ne $rc ]]; then fail "$name: exit $got, expected $rc: $(head -c 300 "$T/err")"; continue; fi
  if [[ $UPDATE == --update ]]; then
    xz -9e -c "$T/out" >"$GOLDEN/$name.xz"
    continue
  fi
  if [[ ! -f $GOLDEN/$name.xz ]]; then fail "$name: no golden $GOLDEN/$name.xz"; continue; fi
  if ! xz -dc "$GOLDEN/$name.xz" | cmp -s - "$T/out"; then
    fail "$name: output differs from the golden (snapdiff $args)"
    xz -dc "$GOLDEN/$name.xz" | diff - "$T/out" | head -20 | sed 's/^/  /'
  fi
done <"$GOLDEN/commands.txt"
[[ $n -ge 50 ]] || fail "only $n golden commands"
echo "$n golden outputs compared, $fails failures"
[[ $fails -eq 0 ]]
