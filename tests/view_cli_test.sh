#!/usr/bin/env bash
# `snapdiff view FILE [B]` (docs/explorer.md): the explorer page written to a
# new folder under $TMPDIR (or -o), its path printed, opened with $BROWSER;
# --format refused; a bad input leaves no folder behind.
# Usage: view_cli_test.sh path/to/snapdiff SOURCE_DIR
set -u
BIN=$1
SRC=$2
DATA=$SRC/tests/data/real
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
source "$SRC/tests/cli_lib.sh"
A=$DATA/cat_fp8_mlp.pickle.gz
B=$DATA/ans_gpt2_py.pickle.gz
need "$A" "$B"
mkdir "$T/tmp"
export TMPDIR=$T/tmp

kind() {  # kind PAGE: the explorer data's kind and number of runs
  python3 - "$1" <<'PY'
import base64, gzip, json, re, struct, sys
s = open(sys.argv[1], encoding="utf-8").read()
raw = gzip.decompress(base64.b64decode(re.search(r'id="sd-explorer-data">([^<]*)<', s).group(1)))
h = json.loads(raw[8:8 + struct.unpack("<I", raw[4:8])[0]])
print(h["kind"], len(h["runs"]), "div" if '<div id="sd-explorer"></div>' in s else "nodiv")
PY
}

unset BROWSER
check "view FILE" 0 "$BIN" view "$A"
page=$(cat "$T/out")
[[ $page == "$T/tmp/snapdiff-view-"*/cat_fp8_mlp.html && -s $page ]] || fail "view FILE printed '$page'"
[[ $(kind "$page") == "report 1 div" ]] || fail "view FILE: page holds $(kind "$page")"

export BROWSER="touch %s.opened"
check "view A B opens with \$BROWSER" 0 "$BIN" view "$A" "$B"
page=$(cat "$T/out")
[[ -f $page.opened ]] || fail "\$BROWSER was not run on $page"
[[ $(kind "$page") == "diff 2 div" ]] || fail "view A B: page holds $(kind "$page")"

check "view --no-open -o" 0 "$BIN" view "$A" --no-open -o "$T/v.html"
[[ $(cat "$T/out") == "$T/v.html" && ! -e $T/v.html.opened ]] || fail "view -o --no-open: $(cat "$T/out")"

# A folder of ranks: the ranks page, and each rank's explorer beside it.
R=$DATA/ranks/fsdp_gpt2_uneven
check "view DIR (ranks)" 0 "$BIN" view --no-open "$R"
page=$(cat "$T/out")
expect "the ranks page has a rank picker" "$page" '<select id="sd-rank-pick">'
for r in 0 1 2; do
  expect "rank $r's page is linked" "$page" "value=\"fsdp_gpt2_uneven_ranks/rank-$r.html\""
  f=$(dirname "$page")/fsdp_gpt2_uneven_ranks/rank-$r.html
  [[ -s $f && $(kind "$f") == "report 1 div" ]] || fail "rank $r's explorer page: $(kind "$f" 2>&1 | tail -1)"
done
check "report DIR -f html to stdout" 0 "$BIN" report --format html "$R"
expect "says where the rank pages go" "$T/out" "written beside this page when it goes to a file"

unset BROWSER
n=$(ls "$T/tmp" | wc -l)
check "view --format json refused" 2 "$BIN" view -f json "$A"
expect "says why" "$T/err" "view always writes HTML"
check "view of a missing file" 3 "$BIN" view "$T/none.pickle"
[[ $(ls "$T/tmp" | wc -l) -eq $n ]] || fail "a failed view left a folder in \$TMPDIR"
echo "$fails failures"
[[ $fails -eq 0 ]]
