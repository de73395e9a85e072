#!/usr/bin/env bash
# Golden outputs: the text, JSON, Markdown and HTML that snapdiff writes for
# the bundled samples and the real recordings. The goldens in tests/golden/
# are plain text, so that a review sees what changed:
#   NAME                  the text, JSON or Markdown output, compared byte
#                         for byte (the text and Markdown are what users read;
#                         the JSON is what programs read)
#   NAME.structure        for an HTML output (NAME ending in .html): its
#                         headings, table rows, list items and other text,
#                         one a line, with the charts' SVG left out
#                         (tests/html_structure.py); the page's markup and
#                         drawing are not compared
# They were written by the commit before issue 35 (the view declared once);
# a change that alters an output on purpose regenerates them (--update) in
# the same commit and says why.
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
need "$UNPACKED/xxl_fp8.pickle" "$GOLDEN/commands.txt" "$SRC/tests/html_structure.py"
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
  # The recorders in scripts/record/ ran from a checkout whose absolute path
  # the recordings' frames keep: it names the recording machine, not this
  # one, so it is compared as "<recorder checkout>/scripts/record/...".
  sed -E -i 's#"/[^"]*/(scripts/record/)#"<recorder checkout>/\1#g' "$T/out"
  golden=$GOLDEN/$name
  if [[ $name == *.html ]]; then
    golden=$golden.structure
    if ! python3 "$SRC/tests/html_structure.py" "$T/out" >"$T/structure"; then
      fail "$name: the HTML's structure cannot be read"
      continue
    fi
    mv "$T/structure" "$T/out"
  fi
  if [[ $UPDATE == --update ]]; then
    cp "$T/out" "$golden"
    continue
  fi
  if [[ ! -f $golden ]]; then fail "$name: no golden ${golden#"$SRC/"}"; continue; fi
  if ! cmp -s "$golden" "$T/out"; then
    fail "$name: output differs from the golden ${golden#"$SRC/"} (snapdiff $args)"
    diff -u "$golden" "$T/out" | sed -n '3,42p' | sed 's/^/  /'
  fi
done <"$GOLDEN/commands.txt"
[[ $n -ge 50 ]] || fail "only $n golden commands"
echo "$n golden outputs $([[ $UPDATE == --update ]] && echo written || echo compared), $fails failures"
[[ $fails -eq 0 ]]
