#!/usr/bin/env bash
# A new user's first commands, as they meet them (issue 38): `check` on a
# late-start recording (the normal case: passes, saying what its peak is)
# and on a wrapped ring buffer (fails, naming --allow-truncated); a folder of
# unrelated runs (a table of runs, not a rank imbalance) beside a folder of
# true ranks (unchanged); `report --format markdown FILE`; a mistyped command
# ("did you mean").
# Usage: first_use_cli_test.sh path/to/snapdiff SOURCE_DIR
set -u
BIN=$1
SRC=$2
DATA=$SRC/tests/data/real
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
unset GITHUB_ACTIONS
source "$SRC/tests/cli_lib.sh"
LATE=$DATA/late_gpt2.pickle.gz        # recording started after the model was built: late_start
WRAP=$DATA/wrapped_gpt2.pickle.gz     # max_entries reached: the ring buffer wrapped
need "$LATE" "$WRAP" "$DATA/graphed_resnet.pickle.gz" "$DATA/cat_fp8_mlp.pickle.gz" \
  "$DATA/ranks/fsdp_gpt2_uneven/snapshot_0.pickle.gz"
one_error_line() {  # NAME: stderr is one 'snapdiff: error: ...' line, stdout empty
  local lines; lines=$(wc -l <"$T/err")
  if [[ $lines -ne 1 ]] || ! grep -q "^snapdiff: error: " "$T/err"; then
    echo "FAIL $1: stderr is not one 'snapdiff: error:' line:"; cat "$T/err"; fails=$((fails+1)); fi
  if [[ -s $T/out ]]; then echo "FAIL $1: printed to stdout on error"; fails=$((fails+1)); fi
}

# --- a late start is the normal case --------------------------------------------
"$BIN" report --format json "$LATE" | python3 -c '
import json, sys; d = json.load(sys.stdin)["input"]
assert (d["history"], d["truncation"]) == ("truncated", "late_start"), d' || fail "the late recording is a late start"
check "check passes a late start by default" 0 "$BIN" check --max-peak 1TiB "$LATE" --width 1000
expect "late start: the history row" "$T/out" "^  history  *complete  *late start .* pass$"
expect "late start: what its peak is" "$T/out" "peak is the recorded window's, counting the memory held at the window's start"
check "--allow-late-start is still accepted" 0 "$BIN" check --max-peak 1TiB --allow-late-start "$LATE" --width 1000
check "a budget from a late start" 0 "$BIN" check --write-budget "$T/late.json" "$LATE" --width 1000
check "check a wrapped ring buffer fails" 1 "$BIN" check --max-peak 1TiB "$WRAP" --width 1000
expect "wrapped: why" "$T/out" "ring buffer wrapped"
expect "wrapped: the one flag" "$T/out" "pass --allow-truncated"
expect_not "wrapped: no other flag named" "$T/out" "allow-late-start"
check "--allow-late-start does not pass a wrap" 1 "$BIN" check --max-peak 1TiB --allow-late-start "$WRAP" --width 1000
check "--allow-truncated passes a wrap (a warning)" 0 "$BIN" check --max-peak 1TiB --allow-truncated "$WRAP" --width 1000
expect "wrapped allowed" "$T/out" "WARN$"
check "no budget from a wrap" 1 "$BIN" check --write-budget "$T/wrap.json" "$WRAP" --width 1000
expect "no budget from a wrap" "$T/err" "allow-truncated"

# --- folders that are not ranks ----------------------------------------------------
mkdir -p "$T/runs" "$T/ranks"
cp "$LATE" "$DATA/graphed_resnet.pickle.gz" "$DATA/cat_fp8_mlp.pickle.gz" "$T/runs/"
echo "notes" >"$T/runs/notes.txt"
check "a folder of unrelated runs" 0 "$BIN" report "$T/runs" --width 1000
expect "runs: the one line" "$T/out" "^snapdiff report: these 3 files do not look like ranks of one job (.*): reporting them as separate runs$"
expect "runs: the table" "$T/out" "^RUNS"
expect "runs: a paragraph per run" "$T/out" "^  \* .*late_gpt2.pickle.gz: requested .*; history late start; largest "
expect "runs: a paragraph per run" "$T/out" "^  \* .*graphed_resnet.pickle.gz: requested .*; history complete; largest "
expect_not "runs: no rank imbalance" "$T/out" "rank ?"
expect_not "runs: no rank imbalance" "$T/out" "WORST RANK"
expect "runs: what was skipped" "$T/err" "^snapdiff: note: skipped 1 file: 1 is not snapshots by its name"
check "snapdiff DIR of runs" 0 "$BIN" "$T/runs" --width 1000
expect "snapdiff DIR of runs" "$T/out" "separate runs"
check "runs as JSON" 0 "$BIN" report "$T/runs" --format json -o "$T/runs.json"
python3 - "$T/runs.json" "$SRC/schemas/runs.schema.json" <<'PY' || fail "runs JSON"
import json, sys
v = json.load(open(sys.argv[1]))
try:
    import jsonschema
    jsonschema.validate(v, json.load(open(sys.argv[2])))
except ImportError:
    pass
assert v["schema"] == "snapdiff/runs/1" and v["kind"] == "separate_runs", v["schema"]
assert len(v["runs"]) == 3 and all(r["peak_requested_bytes"] > 0 for r in v["runs"]), v["runs"]
assert "do not look like ranks of one job" in v["message"]
PY
# The reduce step decides the same from the summaries.
mkdir -p "$T/sums"
for f in "$T"/runs/*.pickle.gz; do "$BIN" report "$f" --format json -o "$T/sums/$(basename "$f").json" || fail "summary of $f"; done
check "runs from summaries" 0 "$BIN" ranks "$T/sums" --width 1000
expect "runs from summaries" "$T/out" "these 3 files do not look like ranks of one job"
check "runs as Markdown" 0 "$BIN" report "$T/runs" --format markdown
expect "runs markdown" "$T/out" "^| \`.*late_gpt2.pickle.gz\` | "
# True ranks (their names tell them) stay a rank report.
cp "$DATA"/ranks/fsdp_gpt2_uneven/snapshot_*.pickle.gz "$T/ranks/"
check "a folder of true ranks" 0 "$BIN" report "$T/ranks"
expect "ranks: the rank report" "$T/out" "WORST RANK"
expect_not "ranks: not runs" "$T/out" "separate runs"

# --- report --format markdown FILE --------------------------------------------------
check "report markdown" 0 "$BIN" report --format markdown "$LATE"
expect "markdown: title" "$T/out" "^### snapdiff report: \`"
expect "markdown: peak table" "$T/out" "^| requested | "
expect "markdown: categories" "$T/out" "^#### Categories at the peak"
expect "markdown: a category row" "$T/out" "^| activation | "
expect "markdown: top sites" "$T/out" "^#### Top sites"
expect "markdown: phases" "$T/out" "<summary>Phases"
expect "markdown: findings" "$T/out" "^#### Findings"
# A hostile file name: a pipe, backticks and a line break stay in their cell.
H=$T/$'a|b``c\nd.pickle.gz'
cp "$LATE" "$H"
check "markdown: hostile name" 0 "$BIN" report --format markdown "$H"
head -1 "$T/out" >"$T/title"
expect "markdown: the pipe escaped" "$T/title" 'a\\|b'
expect "markdown: the line break shown, not kept" "$T/title" 'd\.pickle\.gz'
expect "markdown: a fence longer than the backticks" "$T/title" '^### snapdiff report: ```'
check "unknown format names markdown" 2 "$BIN" report --format pdf "$LATE"
expect "unknown format" "$T/err" "markdown"

# --- did you mean ----------------------------------------------------------------------
check "a mistyped command" 2 "$BIN" repotr "$LATE"
one_error_line "a mistyped command"
expect "did you mean" "$T/err" "^snapdiff: error: 'repotr' is neither a file nor a command; did you mean 'report'?$"
check "a prefix of two commands" 2 "$BIN" ch "$LATE"
expect "a prefix" "$T/err" "did you mean 'check' or 'chart'?"
check "a missing file keeps the file error" 3 "$BIN" repotr.pickle
one_error_line "a missing file"
expect "a missing file" "$T/err" "repotr.pickle: cannot open"
check "a missing path keeps the file error" 3 "$BIN" runs/repotr
cp "$LATE" "$T/repotr"
(cd "$T" && "$BIN" repotr >out 2>err); rc=$?
[[ $rc -eq 0 ]] || fail "a file named like a mistyped command is read (exit $rc)"

if ((fails)); then echo "$fails first-use CLI test(s) failed"; exit 1; fi
echo "all first-use CLI tests passed"
