#!/usr/bin/env bash
# `report --at` / `--window` and `chart --at` / `--window` end to end: the
# moment's figures against PyTorch's memory_allocated() after each iteration
# (small_bf16.truth.json), the JSON `at` and `window` objects against the
# schema's required fields, phase boundaries in JSON against the replay's own
# counters at the same events, usage errors (exit 2) for bad and
# out-of-range moments.
# Usage: moment_cli_test.sh path/to/snapdiff SOURCE_DIR
set -u
BIN=$1
SRC=$2
DATA=$SRC/tests/data/real
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
source "$SRC/tests/cli_lib.sh"
A=$DATA/small_bf16.pickle

check "report --help lists --at" 0 "$BIN" report --help
expect "report --help" "$T/out" "--window"

# Bad specs and moments out of range: usage errors, one line, saying what is accepted or the range.
check "--at bad spec" 2 "$BIN" report "$A" --at "soon"
expect "--at bad spec" "$T/err" "a moment is an event index"
check "--at +4.7 without a unit" 2 "$BIN" report "$A" --at "+4.7"
check "--at past the last event" 2 "$BIN" report "$A" --at 99999999
expect "--at past the last event" "$T/err" "has events 0 to"
check "--at a missing iteration" 2 "$BIN" report "$A" --at "iteration 9"
expect "--at a missing iteration" "$T/err" "has iterations 1 to 3"
check "--window without .." 2 "$BIN" report "$A" --window "iteration 2"
check "--window backwards" 2 "$BIN" report "$A" --window "iteration 3..iteration 1"
expect "--window backwards" "$T/err" "comes before its start"
check "chart --at bad spec" 2 "$BIN" chart "$A" --kind timeline --at "iteration two" -o "$T/x.svg"
[[ -e $T/x.svg ]] && fail "chart --at bad spec: wrote a file"

# --at 'iteration N end' = PyTorch's memory_allocated() after iteration N.
for n in 1 2 3; do
  check "--at iteration $n end (json)" 0 "$BIN" report "$A" --format json --at "iteration $n end" -o "$T/at$n.json"
done
python3 - "$DATA/small_bf16.truth.json" "$T" "$SRC/schemas/report.schema.json" <<'PY' || fails=$((fails+1))
import json, sys
truth = json.load(open(sys.argv[1])); t = sys.argv[2]; schema = json.load(open(sys.argv[3]))
for it in truth["iters"]:
    r = json.load(open(f"{t}/at{it['iter']}.json"))
    at = r["at"]
    for k in schema["$defs"]["moment"]["required"]: assert k in at, k
    assert at["allocated_bytes"] == it["allocated"], (it, at)
    assert at["iteration"] == it["iter"], at
    d = r["devices"][0]
    assert d["at"] == at
    assert sum(r["categories"].values()) == at["requested_bytes"], (sum(r["categories"].values()), at)
    assert d["live_at_peak"]["requested_bytes"] == at["requested_bytes"]
    assert d["findings"] == []
    # The peak is still the run's.
    assert r["peak"]["allocated_bytes"] == truth["max_memory_allocated"]
print("ok   --at 'iteration N end' is memory_allocated() after iteration N")
PY
check "text --at" 0 "$BIN" report "$A" --at "iteration 2 optimizer"
expect "text --at" "$T/out" "^AT  cuda:0"
expect "text --at" "$T/out" "(iteration 2, optimizer, +"
expect "text --at" "$T/out" "^AT EVENT .* BY CATEGORY"
expect "text --at" "$T/out" "TOTAL (= requested then)"
expect_not "text --at" "$T/out" "^EXPLANATION"

# --window: the peaks up to each iteration's end are max_memory_allocated() then.
for n in 1 2 3; do
  check "--window ..iteration $n" 0 "$BIN" report "$A" --format json --window "..iteration $n" -o "$T/w$n.json"
done
python3 - "$DATA/small_bf16.truth.json" "$T" "$SRC/schemas/report.schema.json" <<'PY' || fails=$((fails+1))
import json, sys
truth = json.load(open(sys.argv[1])); t = sys.argv[2]; schema = json.load(open(sys.argv[3]))
for it in truth["iters"]:
    r = json.load(open(f"{t}/w{it['iter']}.json"))
    for k in schema["$defs"]["window"]["required"]: assert k in r["window"], k
    assert r["window"]["first_event"] == -1
    assert r["peak"]["allocated_bytes"] == it["max_allocated_so_far"], (it, r["peak"])
    assert all(p["iteration"] <= it["iter"] for p in r["phases"]), r["phases"]
print("ok   --window ..iteration N peaks are max_memory_allocated() after iteration N")
PY

# Phase boundaries: each span's start and end figures are the moments
# 'iteration N PHASE start' / 'end' resolve to.
check "phases json" 0 "$BIN" report "$A" --format json -o "$T/p.json"
check "--at iteration 2 backward start" 0 "$BIN" report "$A" --format json --at "iteration 2 backward start" -o "$T/s.json"
check "--at iteration 2 backward end" 0 "$BIN" report "$A" --format json --at "iteration 2 backward end" -o "$T/e.json"
python3 - "$T" "$SRC/schemas/report.schema.json" <<'PY' || fails=$((fails+1))
import json, sys
t = sys.argv[1]; schema = json.load(open(sys.argv[2]))
r = json.load(open(f"{t}/p.json")); s = json.load(open(f"{t}/s.json"))["at"]; e = json.load(open(f"{t}/e.json"))["at"]
ps = [p for p in r["phases"] if p["iteration"] == 2 and p["phase"] == "backward"]
assert len(ps) == 1, ps
p = ps[0]
for k in ("end_requested_bytes", "start_allocated_bytes", "end_allocated_bytes", "start_reserved_bytes", "end_reserved_bytes"):
    assert k in schema["$defs"]["phaseSpan"]["properties"], k
assert s["event_index"] == p["start_event"] - 1 and e["event_index"] == p["end_event"]
assert (p["start_requested_bytes"], p["start_allocated_bytes"], p["start_reserved_bytes"]) == (s["requested_bytes"], s["allocated_bytes"], s["reserved_bytes"]), (p, s)
assert (p["end_requested_bytes"], p["end_allocated_bytes"], p["end_reserved_bytes"]) == (e["requested_bytes"], e["allocated_bytes"], e["reserved_bytes"]), (p, e)
print("ok   phase boundaries in JSON are the moments --at resolves them to")
PY

# Charts: the moment marked, the window's x range.
check "chart --at" 0 "$BIN" chart "$A" --kind timeline --at "iteration 2 optimizer" -o "$T/at.svg"
expect "chart --at" "$T/at.svg" "the moment asked for (&#45;&#45;at)"
check "chart --window" 0 "$BIN" chart "$A" --kind timeline --window "iteration 2..iteration 2" -o "$T/w.dot"
check "chart whole" 0 "$BIN" chart "$A" --kind timeline -o "$T/all.dot"
cmp -s "$T/w.dot" "$T/all.dot" && fail "chart --window: the same drawing as without it"

[[ $fails -eq 0 ]] && echo "all moment CLI checks passed" || echo "$fails failed"
exit $((fails > 0))
