#!/usr/bin/env bash
# End-to-end: many ranks (docs/ranks.md) on the real per-rank recordings in
# tests/data/real/ranks/: `snapdiff report DIR` in every format, a corrupt
# rank (its one-line error in the table and on stderr, exit 3 unless
# --skip-bad-ranks), the map step (`report FILE --format json`, run by GNU
# parallel as docs/ranks.md shows) and the reduce step (`snapdiff ranks`)
# giving byte for byte the direct read's report, rank-by-rank diffs, `check`
# over ranks with JUnit, -j and --max-memory.
# Usage: ranks_cli_test.sh path/to/snapdiff SOURCE_DIR
set -u
BIN=$1
SRC=$2
DATA=$SRC/tests/data/real
R=$DATA/ranks
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
unset GITHUB_ACTIONS
source "$SRC/tests/cli_lib.sh"
need "$R/pp_resnet50/step_000000000002/000000_step_2.pickle.gz" "$R/fsdp_gpt2_uneven/snapshot_1.pickle.gz" \
  "$R/oom_rank_gpt2/memsnap_oom_rank-1.pickle.gz"
# Paths relative to the source tree: the names the reports show.
cd "$SRC" || exit 1
PP=tests/data/real/ranks/pp_resnet50
FS=tests/data/real/ranks/fsdp_gpt2_uneven
OO=tests/data/real/ranks/oom_rank_gpt2

# --- the direct read ----------------------------------------------------------
check "report pp" 0 "$BIN" report "$PP"
expect "report pp" "$T/out" "000003_step_2.pickle.gz"
expect "report pp: worst rank is the first stage" "$T/out" "WORST RANK 0"
expect "report pp: the truth files are not read" "$T/err" "not snapshots by their name"
check "snapdiff DIR is report DIR" 0 "$BIN" "$PP"
check "report oom folder" 0 "$BIN" report "$OO"
expect "report oom folder" "$T/out" "memsnap_oom_rank-1"
check "report json" 0 "$BIN" report "$FS" --format json -o "$T/fs.json"
python3 - "$T/fs.json" "$R/fsdp_gpt2_uneven" <<'PY' || fail "report json: peaks against the truth"
import json, sys
v = json.load(open(sys.argv[1]))
assert v["schema"] == "snapdiff/ranks/1", v["schema"]
truth = {r: json.load(open(f"{sys.argv[2]}/snapshot_{r}.truth.json")) for r in range(3)}
rows = v["ranks"]
assert [r["rank"] for r in rows] == [0, 1, 2], rows
peaks = {r: t["memory_stats"]["requested_bytes.all.peak"] for r, t in truth.items()}
worst = max(peaks, key=peaks.get)
assert rows[v["worst"]]["rank"] == worst, (v["worst"], worst)
assert v["shown_report"]["input"]["name"].endswith(f"snapshot_{worst}.pickle.gz")
PY
check "report markdown" 0 "$BIN" report "$FS" --format markdown
expect "report markdown" "$T/out" "| 1 |"
check "report html" 0 "$BIN" report "$FS" --format html -o "$T/fs.html"
[[ $(grep -o '<svg' "$T/fs.html" | wc -l) -ge 3 ]] || fail "report html: one timeline per rank"
check "report --rank 2" 0 "$BIN" report "$FS" --rank 2
expect "report --rank 2" "$T/out" "RANK 2"
check "report --rank 9: no such rank" 2 "$BIN" report "$FS" --rank 9
expect "report --rank 9" "$T/err" "no rank of that number"
check "report -j on one file" 2 "$BIN" report "$FS/snapshot_0.pickle.gz" -j 2
check "report several files" 0 "$BIN" report "$FS/snapshot_0.pickle.gz" "$FS/snapshot_2.pickle.gz" "$FS/snapshot_1.pickle.gz"
expect "report several files" "$T/out" "snapshot_2.pickle.gz"
check "report a pattern" 0 "$BIN" report "$FS/snapshot_*.pickle.gz"
check "report a pattern matching nothing" 3 "$BIN" report "$FS/nothing_*.pickle"
expect "report a pattern matching nothing" "$T/err" "matches no file"
check "report --explain on many ranks" 2 "$BIN" report "$FS" --explain forward

# --- -j: every thread count gives the same report ------------------------------
"$BIN" report "$PP" -j 1 --format json >"$T/j1.json" 2>/dev/null
"$BIN" report "$PP" -j 4 --format json >"$T/j4.json" 2>/dev/null
cmp -s "$T/j1.json" "$T/j4.json" || fail "-j 1 and -j 4 differ"
check "-j 0" 2 "$BIN" report "$PP" -j 0
# --max-memory bounds the whole command: each of these ranks needs about 64
# MiB; under 100 MiB two threads get 50 MiB each, so every rank is read again
# alone with the whole bound, and the report is the same as -j 1's.
check "--max-memory shared by -j 2" 0 "$BIN" report "$FS" -j 2 --max-memory 100MiB --format json
"$BIN" report "$FS" -j 1 --format json >"$T/fs_j1.json" 2>/dev/null
cmp -s "$T/out" "$T/fs_j1.json" || fail "--max-memory 100MiB -j 2 differs from -j 1"
check "--max-memory below one rank" 3 "$BIN" report "$FS" -j 2 --max-memory 60MiB
expect "--max-memory below one rank: the whole bound named" "$T/err" "more than the limit of 60 MiB"

# --- a corrupt rank -------------------------------------------------------------
mkdir -p "$T/bad"
cp "$FS"/snapshot_*.pickle.gz "$T/bad/"
head -c 3000 "$FS/snapshot_1.pickle.gz" >"$T/bad/snapshot_1.pickle.gz"
check "corrupt rank: exit 3" 3 "$BIN" report "$T/bad"
expect "corrupt rank: the others are reported" "$T/out" "snapshot_2.pickle.gz"
expect "corrupt rank: its row shows the error" "$T/out" "gzip data is truncated"
[[ $(grep -c 'snapdiff: error:' "$T/err") -eq 1 ]] || fail "corrupt rank: one error line on stderr"
expect "corrupt rank: the line names the file" "$T/err" "snapshot_1.pickle.gz: offset"
check "corrupt rank --skip-bad-ranks" 0 "$BIN" report "$T/bad" --skip-bad-ranks
check "corrupt rank json" 3 "$BIN" report "$T/bad" --format json -o "$T/bad.json"
python3 - "$T/bad.json" <<'PY' || fail "corrupt rank json"
import json, sys
v = json.load(open(sys.argv[1]))
bad = [r for r in v["ranks"] if r["error"]]
assert len(bad) == 1 and bad[0]["rank"] == 1, bad
assert len([r for r in v["ranks"] if not r["error"]]) == 2
PY

# --- map and reduce: the same report --------------------------------------------
for dir in "$PP" "$FS" "$OO"; do
  name=$(basename "$dir")
  mkdir -p "$T/map/$name"
  i=0
  while IFS= read -r f; do
    i=$((i + 1))
    "$BIN" report "$f" --format json -o "$T/map/$name/$i.json" || fail "map $f"
  done < <(find "$dir" -name '*.pickle.gz' | sort)
  for fmt in text json markdown html; do
    "$BIN" report "$dir" --format "$fmt" >"$T/direct.$fmt" 2>/dev/null
    "$BIN" ranks "$T/map/$name" --format "$fmt" >"$T/reduce.$fmt" 2>"$T/reduce.err" || fail "reduce $name $fmt: $(head -1 "$T/reduce.err")"
    cmp -s "$T/direct.$fmt" "$T/reduce.$fmt" || { fail "reduce $name $fmt differs from the direct read"; diff "$T/direct.$fmt" "$T/reduce.$fmt" | head -10; }
  done
done
echo "ok   map and reduce give the direct read's report (3 runs, 4 formats)"
check "report on a folder of summaries" 3 "$BIN" report "$T/map/fsdp_gpt2_uneven"
expect "report on a folder of summaries: says what reads them" "$T/err" "snapdiff ranks"
check "ranks: a summary that is not JSON" 3 "$BIN" ranks "$T/bad/snapshot_0.pickle.gz"
echo '{"schema": "snapdiff/diff/1"}' >"$T/notreport.json"
check "ranks: a JSON that is not a report" 3 "$BIN" ranks "$T/notreport.json"
expect "ranks: not a report" "$T/err" "notreport.json"

# --- the map step under GNU parallel, as docs/ranks.md shows -----------------------
if command -v parallel >/dev/null; then
  mkdir -p "$T/par"
  find "$PP" -name '*.pickle.gz' | sort |
    parallel --will-cite -j 2 "$BIN" report {} --format json -o "$T/par/{#}.json" || fail "parallel map step"
  "$BIN" ranks "$T/par" >"$T/par.txt" 2>/dev/null || fail "reduce after parallel"
  "$BIN" report "$PP" >"$T/direct.txt" 2>/dev/null
  cmp -s "$T/par.txt" "$T/direct.txt" && echo "ok   GNU parallel map + reduce = direct read" || fail "GNU parallel map + reduce differs"
else
  fail "GNU parallel is not installed (scripts/install-deps.sh installs it)"
fi

# --- rank r against rank r ------------------------------------------------------
check "diff DIR DIR" 0 "$BIN" "$FS" "$OO"
expect "diff DIR DIR" "$T/out" "rank 1"
check "diff DIR DIR json" 0 "$BIN" diff "$FS" "$OO" --format json
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['schema']=='snapdiff/ranks_diff/1'" "$T/out" || fail "diff json schema"
check "diff DIR FILE" 2 "$BIN" diff "$FS" "$OO/memsnap_0.pickle.gz"

# --- check over ranks --------------------------------------------------------------
# The truth: rank 1 of the uneven FSDP run peaks at 1,528,469,608 requested bytes, the others below 1.3 GB.
check "check ranks: fail" 1 "$BIN" check --metric requested --max-peak 1400000000 "$FS" --junit "$T/j.xml"
expect "check ranks: names the failing rank" "$T/out" "1 failed: rank 1"
# Two thresholds (the history, the ceiling) on each of three ranks.
[[ $(grep -c '<testcase' "$T/j.xml") -eq 6 ]] || fail "check ranks: one testcase per rank and threshold"
expect "check ranks junit" "$T/j.xml" 'name="rank 1: max_peak.requested"'
check "check ranks: pass" 0 "$BIN" check --metric requested --max-peak 2GiB "$FS"
check "check ranks against ranks" 1 "$BIN" check --metric requested --max-increase 10% "$FS" "$OO"
check "check ranks json" 1 "$BIN" check --metric requested --max-peak 1400000000 "$FS" --format json
python3 -c "
import json,sys; d=json.load(open(sys.argv[1])); assert d['schema']=='snapdiff/check_ranks/1'; assert d['failing_ranks']==[1], d['failing_ranks']" "$T/out" || fail "check ranks json"
check "check --rank 0" 0 "$BIN" check --metric requested --max-peak 1400000000 "$FS" --rank 0
check "check corrupt rank" 3 "$BIN" check --max-peak 2GiB "$T/bad"
check "check corrupt rank --skip-bad-ranks" 0 "$BIN" check --max-peak 2GiB "$T/bad" --skip-bad-ranks

# --- every JSON output against its schema (the schemas it refers to loaded beside it) --
"$BIN" report "$FS" --format json >"$T/v_ranks.json" 2>/dev/null
"$BIN" diff "$FS" "$OO" --format json >"$T/v_ranks_diff.json" 2>/dev/null
"$BIN" check --metric requested --max-peak 1400000000 "$FS" --format json >"$T/v_check_ranks.json" 2>/dev/null
python3 - "$SRC/schemas" "$T" <<'PY' || fail "ranks JSON against the schemas"
import json, os, sys
try:
    import jsonschema
    from referencing import Registry, Resource
except ImportError:
    print("skip schema validation (no jsonschema module)"); sys.exit(0)
d, t = sys.argv[1], sys.argv[2]
schemas = {f: json.load(open(os.path.join(d, f))) for f in os.listdir(d) if f.endswith(".schema.json")}
reg = Registry().with_resources([(s["$id"], Resource.from_contents(s)) for s in schemas.values() if "$id" in s])
for out, schema in [("v_ranks.json", "ranks.schema.json"), ("v_ranks_diff.json", "ranks_diff.schema.json"),
                    ("v_check_ranks.json", "check_ranks.schema.json")]:
    jsonschema.Draft202012Validator(schemas[schema], registry=reg).validate(json.load(open(os.path.join(t, out))))
print("ok   ranks, ranks_diff and check_ranks JSON match their schemas")
PY

[[ $fails -eq 0 ]] && echo "all ranks CLI checks passed" || { echo "$fails failed"; exit 1; }
