#!/usr/bin/env bash
# `snapdiff convert` to .snap version 3 (binary) end to end: the file starts
# with the magic, reports as the pickle did (text and JSON, apart from the
# INPUT section), converts back to the same pickle; --json writes the JSON
# form; a truncated or corrupt file is one line on stderr with the file and
# a byte offset, exit 3.
# Usage: snap_cli_test.sh path/to/snapdiff SOURCE_DIR
set -u
BIN=$1
SRC=$2
DATA=$SRC/tests/data/real
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
source "$SRC/tests/cli_lib.sh"
strip_input() { sed '/^INPUT$/,/^$/d; /^snapdiff report:/d'; }
no_input_json() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d.pop("input"); print(json.dumps(d, sort_keys=True))' "$1"; }

for stem in small_bf16 small_oom small_fp8_pw; do
  check "convert $stem -> v3" 0 "$BIN" convert "$DATA/$stem.pickle" -o "$T/$stem.snap"
  quiet "convert $stem -> v3"
  [[ $(head -c 8 "$T/$stem.snap" | od -An -tx1 | tr -d ' \n') == 89534e415044460a ]] || fail "$stem.snap: not version 3"
  check "report $stem.snap" 0 "$BIN" report "$T/$stem.snap" -o "$T/v3.txt"
  check "report $stem.pickle" 0 "$BIN" report "$DATA/$stem.pickle" -o "$T/p.txt"
  cmp -s <(strip_input <"$T/v3.txt") <(strip_input <"$T/p.txt") || fail "$stem: the v3 report differs from the pickle's"
  expect "INPUT names version 3" "$T/v3.txt" "version 3"
  check "report --format json $stem.snap" 0 "$BIN" report --format json "$T/$stem.snap" -o "$T/v3.json"
  check "report --format json $stem.pickle" 0 "$BIN" report --format json "$DATA/$stem.pickle" -o "$T/p.json"
  cmp -s <(no_input_json "$T/v3.json") <(no_input_json "$T/p.json") || fail "$stem: the v3 JSON report differs from the pickle's"
  # v3 -> pickle: the objects PyTorch dumped.
  check "convert $stem.snap -> .pickle" 0 "$BIN" convert "$T/$stem.snap" -o "$T/back.pickle"
  python3 -c 'import pickle,sys; assert pickle.load(open(sys.argv[1],"rb")) == pickle.load(open(sys.argv[2],"rb"))' \
    "$T/back.pickle" "$DATA/$stem.pickle" || fail "$stem: v3 -> pickle is not the pickle PyTorch dumped"
done

# --json: the JSON form, gzip'd; with --no-gzip plain.
check "convert --json" 0 "$BIN" convert --json "$DATA/small_oom.pickle" -o "$T/j.snap"
python3 -c 'import gzip,json,sys; d=json.load(gzip.open(sys.argv[1])); assert d["format"]=="snapdiff.snap" and d["version"]==1' "$T/j.snap" ||
  fail "--json: not the gzip'd JSON form"
check "convert --json --no-gzip" 0 "$BIN" convert --json --no-gzip "$DATA/small_oom.pickle" -o "$T/jp.snap"
[[ $(head -c 1 "$T/jp.snap") == "{" ]] || fail "--json --no-gzip: not plain JSON"
check "--json with .pickle" 2 "$BIN" convert --json "$DATA/small_oom.pickle" -o "$T/x.pickle"
expect "--json with .pickle" "$T/err" "json"

# Truncated and corrupt: exit 3, one line naming the file and an offset.
size=$(stat -c %s "$T/small_oom.snap")
for cut in 12 16 40 $((size / 2)) $((size - 1)); do
  head -c "$cut" "$T/small_oom.snap" >"$T/cut.snap"
  check "truncated at $cut" 3 "$BIN" report "$T/cut.snap"
  [[ $(wc -l <"$T/err") -eq 1 ]] || fail "truncated at $cut: not one line"
  expect "truncated at $cut" "$T/err" "cut.snap: offset [0-9]"
done
python3 - "$T/small_oom.snap" "$T/bad.snap" <<'PY'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
b[len(b) // 2] ^= 0xFF  # inside a compressed section
open(sys.argv[2], "wb").write(b)
PY
check "corrupt section" 3 "$BIN" report "$T/bad.snap"
expect "corrupt section" "$T/err" "bad.snap: offset [0-9]*: section"

[[ $fails -eq 0 ]] && echo "all snap_cli checks passed"
exit $((fails > 0))
