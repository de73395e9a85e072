#!/usr/bin/env bash
# End-to-end checks of `snapdiff check`: every threshold kind passing and
# failing, exit codes (0 within budget, 1 failed, 2 usage, 3 input), JUnit XML
# (well-formed, counts right), GitHub annotations, budget files (round trip,
# bad files), truncated histories.
# Usage: check_cli_test.sh path/to/snapdiff SOURCE_DIR
set -u
BIN=$1
SRC=$2
DATA=$SRC/tests/data/real
BF16=$DATA/small_bf16.pickle
FP8=$DATA/small_fp8.pickle
PW=$DATA/small_fp8_pw.pickle
SEED_FP8=$SRC/sample_snapshots/fp8_no_pw.snap
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
unset GITHUB_ACTIONS
source "$SRC/tests/cli_lib.sh"
one_error_line() {  # stderr is one 'snapdiff: error: ...' line, stdout empty
  local lines; lines=$(wc -l <"$T/err")
  if [[ $lines -ne 1 ]] || ! grep -q "^snapdiff: error: " "$T/err"; then
    echo "FAIL $1: stderr is not one 'snapdiff: error:' line:"; cat "$T/err"; fails=$((fails+1)); fi
  if [[ -s $T/out ]]; then echo "FAIL $1: printed to stdout on error"; fails=$((fails+1)); fi
}

# --- help and usage errors (exit 2) -----------------------------------------
check "check --help" 0 "$BIN" check --help
expect "check --help" "$T/out" "--max-increase"
expect "check --help" "$T/out" "Exit codes"
check "no inputs" 2 "$BIN" check --max-peak 1GiB
one_error_line "no inputs"
check "three inputs" 2 "$BIN" check --max-increase 2% "$BF16" "$FP8" "$PW"
check "increase without baseline" 2 "$BIN" check --max-increase 2% "$FP8"
expect "increase without baseline" "$T/err" "baseline"
check "no thresholds" 2 "$BIN" check "$BF16" "$FP8"
check "nothing to compare" 2 "$BIN" check "$FP8"
check "bad size" 2 "$BIN" check --max-peak 60GB2 "$FP8"
expect "bad size" "$T/err" "not a size"
check "share as --max-peak" 2 "$BIN" check --max-peak 5% "$FP8"
check "bad share" 2 "$BIN" check --max-increase 2pc "$BF16" "$FP8"
check "bad metric" 2 "$BIN" check --metric peak --max-peak 1GiB "$FP8"
check "bad --limit" 2 "$BIN" check --limit optimizer_temporary "$FP8"
check "unknown category" 2 "$BIN" check --limit optimiser_state=1GiB "$FP8"
expect "unknown category" "$T/err" "optimizer_state"
check "unknown phase" 2 "$BIN" check --limit optimiser:optimizer_temporary=1GiB "$FP8"
one_error_line "unknown phase"
expect "unknown phase" "$T/err" "unknown phase 'optimiser' (init, forward, backward, optimizer, other)"
check "empty phase" 2 "$BIN" check --limit :optimizer_temporary=1GiB "$FP8"
check "unknown category in a phase" 2 "$BIN" check --limit optimizer:optimiser_temporary=1GiB "$FP8"
expect "unknown category in a phase" "$T/err" "optimizer_temporary"
check "bad format" 2 "$BIN" check --format yaml --max-peak 1GiB "$FP8"
check "warn above max" 2 "$BIN" check --max-increase 1% --warn-increase 2% "$BF16" "$FP8"
check "budget and write-budget" 2 "$BIN" check --budget "$T/a.json" --write-budget "$T/b.json" "$FP8"
check "budget with baseline" 2 "$BIN" check --budget "$T/a.json" "$BF16" "$FP8"
check "unknown option" 2 "$BIN" check --max-increse 2% "$BF16" "$FP8"

# --- input errors (exit 3) ---------------------------------------------------
check "missing candidate" 3 "$BIN" check --max-peak 1GiB "$T/nope.pickle"
one_error_line "missing candidate"
check "missing baseline" 3 "$BIN" check --max-increase 2% "$T/nope.pickle" "$FP8"
check "hostile candidate" 3 "$BIN" check --max-peak 1GiB "$SRC/tests/data/evil_os_system.pickle"
check "missing budget" 3 "$BIN" check --budget "$T/nope.json" "$FP8"
one_error_line "missing budget"
printf '{"schema": "snapdiff/budget/1", "peak": {"requested_bytes": 1, "allocated_bytes": 2, "reserved_bytes": 3}, "tolerance": {"max_increase": "two percent"}}' >"$T/bad.json"
check "bad budget" 3 "$BIN" check --budget "$T/bad.json" "$FP8"
one_error_line "bad budget"
expect "bad budget" "$T/err" "bad.json: \$.tolerance.max_increase: "
printf '{"schema": "snapdiff/budget/1", "peak": {"requested_bytes": 1, "allocated_bytes": -2, "reserved_bytes": 3}}' >"$T/bad2.json"
check "bad budget peak" 3 "$BIN" check --budget "$T/bad2.json" "$FP8"
expect "bad budget peak" "$T/err" "\$.peak.allocated_bytes"
printf '{"schema": ' >"$T/bad3.json"
check "budget not JSON" 3 "$BIN" check --budget "$T/bad3.json" "$FP8"
expect "budget not JSON" "$T/err" "bad3.json: offset"

# --- increase ----------------------------------------------------------------
# small_fp8 over small_bf16: allocated +8,395,776 B (+2.57%), reserved +3.59%.
check "increase 2% fails" 1 "$BIN" check --max-increase 2% "$BF16" "$FP8"
expect "increase 2% fails" "$T/out" "^snapdiff check: FAIL"
expect "increase 2% fails" "$T/out" "increase.allocated .* FAIL$"
[[ -s $T/err ]] && { echo "FAIL increase 2%: wrote to stderr"; fails=$((fails+1)); }
check "increase 3% passes" 0 "$BIN" check --max-increase 3% "$BF16" "$FP8"
expect "increase 3% passes" "$T/out" "^snapdiff check: PASS"
check "increase 8MiB fails" 1 "$BIN" check --max-increase 8MiB "$BF16" "$FP8"
check "increase 8.4MB passes" 0 "$BIN" check --max-increase 8.4MB "$BF16" "$FP8"
check "reserved 3% fails" 1 "$BIN" check --metric reserved --max-increase 3% "$BF16" "$FP8"
check "smaller candidate 0% passes" 0 "$BIN" check --max-increase 0% "$FP8" "$PW"
check "warn-increase warns" 0 "$BIN" check --max-increase 3% --warn-increase 1% "$BF16" "$FP8"
expect "warn-increase warns" "$T/out" "PASS (with warnings)"
expect "warn-increase warns" "$T/out" "WARN$"
check "json" 1 "$BIN" check --format json --max-increase 1% --metric requested "$BF16" "$FP8"
python3 - "$T/out" "$DATA" "$SRC/schemas/check.schema.json" <<'PY' || fails=$((fails+1))
import json, sys
r = json.load(open(sys.argv[1]))
s = json.load(open(sys.argv[3]))
for k in s["required"]: assert k in r, k
for t in r["thresholds"]:
    for k in s["properties"]["thresholds"]["items"]["required"]: assert k in t, k
ms = lambda stem: json.load(open(f"{sys.argv[2]}/{stem}.truth.json"))["memory_stats"]
a, b = ms("small_bf16"), ms("small_fp8")
assert r["schema"] == "snapdiff/check/1" and r["status"] == "fail" and r["metric"] == "requested", r
inc = [t for t in r["thresholds"] if t["kind"] == "increase"][0]
assert inc["measured_bytes"] == b["requested_bytes.all.peak"] - a["requested_bytes.all.peak"], inc
assert inc["baseline_bytes"] == a["requested_bytes.all.peak"]
assert inc["limit_bytes"] == a["requested_bytes.all.peak"] // 100
assert inc["margin_bytes"] == inc["limit_bytes"] - inc["measured_bytes"]
assert r["candidate"]["peak"]["allocated_bytes"] == b["allocated_bytes.all.peak"]
assert r["summary"] == {"thresholds": 3, "passed": 2, "warned": 0, "failed": 1}, r["summary"]
print("ok   json: measured increase is the truth difference")
PY

# --- headline, findings, github-action-benchmark output ---------------------
check "findings vs a baseline" 1 "$BIN" check --format json --max-increase 1% --github-benchmark "$T/gb.json" --name run \
  "$BF16" "$FP8"
check "github-benchmark on stdout" 1 "$BIN" check --format github-benchmark --max-increase 1% --name run "$BF16" "$FP8"
cp "$T/out" "$T/gb_stdout.json"
check "findings alone" 1 "$BIN" check --format json --max-peak 100MiB --limit activation=1MiB "$FP8"
cp "$T/out" "$T/alone.json"
"$BIN" check --format json --max-increase 1% "$BF16" "$FP8" >"$T/base.json" 2>/dev/null
python3 - "$T" "$DATA" "$SRC/schemas" <<'PY' || fails=$((fails+1))
import json, sys
T, D, S = sys.argv[1:4]
ms = lambda stem: json.load(open(f"{D}/{stem}.truth.json"))["memory_stats"]
a, b = ms("small_bf16"), ms("small_fp8")
r = json.load(open(f"{T}/base.json"))
cand, base = r["candidate"], r["baseline"]
# Categories at the peak sum to PyTorch's requested peak, so the changes do too.
assert sum(cand["categories"].values()) == b["requested_bytes.all.peak"]
change = {k: v - max(base["categories"].get(k, 0), 0) for k, v in cand["categories"].items()}
f = r["findings"]
assert 1 <= len(f) <= 3, f
assert f[0]["category"] == max(change, key=change.get), (f, change)
for x in f:
    assert x["change_bytes"] == change[x["category"]] > 0, x
    assert x["bytes"] == cand["categories"][x["category"]]
    first = [s for s in cand["sites"] if s["category"] == x["category"]]
    if first:
        assert x["site_bytes"] == first[0]["bytes"] and x["site"] == first[0]["site"], (x, first[0])
    assert x["text"].startswith(x["category"] + " +"), x
assert r["headline"].startswith("allocated peak +"), r["headline"]
assert "over the baseline > +1%" in r["headline"], r["headline"]
assert r["headline"].endswith(f[0]["text"]), r["headline"]
assert [s["bytes"] for s in cand["sites"]] == sorted((s["bytes"] for s in cand["sites"]), reverse=True)
# Without a baseline: the failed limit's category first, no change.
al = json.load(open(f"{T}/alone.json"))
assert al["findings"][0]["category"] == "activation" and al["findings"][0]["change_bytes"] is None, al["findings"]
assert al["headline"].startswith("allocated peak ") and "; activation " in al["headline"], al["headline"]
# github-action-benchmark: the file and stdout agree; values are PyTorch's peaks.
gb = json.load(open(f"{T}/gb.json"))
assert gb == json.load(open(f"{T}/gb_stdout.json"))
sch = json.load(open(f"{S}/github_benchmark.schema.json"))
for e in gb:
    assert set(e) <= set(sch["items"]["properties"]) and set(sch["items"]["required"]) <= set(e), e
    assert e["unit"] == "bytes" and isinstance(e["value"], int) and e["name"].startswith("run: ")
v = {e["name"]: e for e in gb}
assert v["run: allocated peak"]["value"] == b["allocated_bytes.all.peak"]
assert v["run: reserved peak"]["value"] == b["reserved_bytes.all.peak"]
assert v["run: allocated peak"]["range"].endswith("(+1% over the baseline)"), v
print("ok   headline, findings and github-benchmark against the truth")
PY
check "github-benchmark, many ranks" 1 "$BIN" check --format github-benchmark --metric requested --max-peak 1400000000 \
  "$DATA/ranks/fsdp_gpt2_uneven"
python3 - "$T/out" "$DATA/ranks/fsdp_gpt2_uneven" <<'PY' || fails=$((fails+1))
import json, sys, glob, os, re
gb = json.load(open(sys.argv[1]))
truth = {}
for t in glob.glob(os.path.join(sys.argv[2], "**", "*.truth.json"), recursive=True):
    j = json.load(open(t))
    truth[j["rank"]] = j["memory_stats"]["requested_bytes.all.peak"]
got = {}
for e in gb:
    m = re.search(r" rank (\d+): requested peak$", e["name"])
    if m: got[int(m.group(1))] = e["value"]
assert got == truth, (got, truth)
print("ok   github-benchmark: one requested peak per rank, PyTorch's")
PY

# --- absolute peak and category limits ---------------------------------------
check "max-peak passes" 0 "$BIN" check --max-peak 60GiB "$FP8"
check "max-peak fails" 1 "$BIN" check --max-peak 300MiB "$FP8"
expect "max-peak fails" "$T/out" "max_peak.allocated .* FAIL$"
check "max-peak exact passes" 0 "$BIN" check --max-peak 334807552 "$FP8"
check "max-peak 1 B below fails" 1 "$BIN" check --max-peak 334807551B "$FP8"
check "limit passes" 0 "$BIN" check --limit optimizer_temporary=1GiB --limit optimizer_state=80.1MiB "$FP8"
check "limit fails" 1 "$BIN" check --limit optimizer_temporary=1GiB --limit optimizer_state=80MiB "$FP8"
expect "limit fails" "$T/out" "limit.optimizer_state .* FAIL$"
expect "limit fails" "$T/out" "limit.optimizer_temporary .* pass$"

# The seed's FP8 run (snapcapture, 5.37 B parameters, foreach Adam): the
# optimizer steps hold one bf16 temporary per parameter (the run's parameter
# bytes, snapcapture's summary) while the peak, a backward, holds none.
check "limit over the run fails" 1 "$BIN" check --limit optimizer_temporary=1GiB "$SEED_FP8" --width 1000
expect "limit over the run fails" "$T/out" "limit.optimizer_temporary .* FAIL$"
expect "limit over the run fails" "$T/out" "in iteration 1 optimizer, over the limit 1.0 GiB"
check "phase limit fails" 1 "$BIN" check --format json --limit optimizer:optimizer_temporary=1GiB \
  --limit forward:optimizer_temporary=1MiB "$SEED_FP8"
python3 - "$T/out" "${SEED_FP8%.snap}.summary.json" <<'PY' || fails=$((fails+1))
import json, sys
r = json.load(open(sys.argv[1])); s = json.load(open(sys.argv[2]))
t = {x["name"]: x for x in r["thresholds"]}
opt, fwd = t["limit.optimizer:optimizer_temporary"], t["limit.forward:optimizer_temporary"]
assert opt["status"] == "fail" and opt["phase"] == "optimizer" and opt["category"] == "optimizer_temporary", opt
assert opt["measured_bytes"] == s["classes"]["param_bytes"], opt
assert opt["at"]["phase"] == "optimizer", opt
assert fwd["status"] == "pass" and fwd["measured_bytes"] == 0, fwd
c = r["candidate"]
assert c["categories"]["optimizer_temporary"] == 0  # at the peak: none
assert c["phases"]["optimizer"]["allocated"]["bytes"] == s["iters"][0]["peak_so_far"]
assert max(p["allocated"]["bytes"] for p in c["phases"].values()) == s["peak_allocated"]
print("ok   phase limit: the optimizer steps' temporaries are the parameter bytes")
PY

# --- JUnit XML ---------------------------------------------------------------
junit_ok() {  # junit_ok NAME FILE TESTS FAILURES
  python3 - "$2" "$3" "$4" <<'PY' && echo "ok   $1: JUnit well-formed, counts right" || { echo "FAIL $1: JUnit"; fails=$((fails+1)); }
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
want_tests, want_fail = int(sys.argv[2]), int(sys.argv[3])
assert root.tag == "testsuites", root.tag
suites = root.findall("testsuite")
assert len(suites) == 1
s = suites[0]
cases = s.findall("testcase")
failed = [c for c in cases if c.find("failure") is not None]
assert len(cases) == want_tests == int(s.get("tests")) == int(root.get("tests")), (len(cases), s.get("tests"))
assert len(failed) == want_fail == int(s.get("failures")) == int(root.get("failures")), (len(failed), s.get("failures"))
assert int(s.get("errors")) == 0 and int(s.get("skipped")) == 0
names = [c.get("name") for c in cases]
assert len(set(names)) == len(names), names
for c in failed:
    f = c.find("failure")
    assert f.get("message") and f.get("type"), c
PY
}
check "junit on failure" 1 "$BIN" check --junit "$T/j.xml" --max-increase 2% --max-peak 60GiB --limit optimizer_state=1MiB "$BF16" "$FP8"
junit_ok "junit on failure" "$T/j.xml" 5 2
check "junit on pass" 0 "$BIN" check --junit "$T/j2.xml" --max-increase 3% "$BF16" "$FP8"
junit_ok "junit on pass" "$T/j2.xml" 3 0
cp "$FP8" "$T/run <&> \"q\" 'x'.pickle"
check "junit escaping" 1 "$BIN" check --junit "$T/j3.xml" --max-peak 1MiB "$T/run <&> \"q\" 'x'.pickle"
junit_ok "junit escaping" "$T/j3.xml" 2 1
python3 -c "import sys,xml.etree.ElementTree as ET; r=ET.parse(sys.argv[1]).getroot(); assert 'run <&> \"q\" ' in r.find('testsuite').get('name')" "$T/j3.xml" \
  || { echo "FAIL junit escaping: name not round-tripped"; fails=$((fails+1)); }

# --- GitHub Actions annotations ----------------------------------------------
check "no annotations outside Actions" 1 "$BIN" check --max-peak 1MiB "$FP8"
expect_not "no annotations outside Actions" "$T/out" "^::error"
check "annotations" 1 env GITHUB_ACTIONS=true "$BIN" check --max-increase 3% --warn-increase 1% --max-peak 1MiB "$BF16" "$FP8"
expect "annotations" "$T/out" "^::error title=snapdiff check max_peak.allocated::"
expect "annotations" "$T/out" "^::warning title=snapdiff check increase.allocated::.*+2.57%25"
check "annotations with json" 1 env GITHUB_ACTIONS=true "$BIN" check --format json --max-peak 1MiB "$FP8"
python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$T/out" || { echo "FAIL annotations broke JSON on stdout"; fails=$((fails+1)); }
expect "annotations with json" "$T/err" "^::error "

# --- -o ----------------------------------------------------------------------
check "-o" 1 "$BIN" check -o "$T/v.txt" --max-peak 1MiB "$FP8"
[[ -s $T/out ]] && { echo "FAIL -o: stdout not empty"; fails=$((fails+1)); }
expect "-o" "$T/v.txt" "^snapdiff check: FAIL"

# --- budget files ------------------------------------------------------------
check "write-budget" 0 "$BIN" check --write-budget "$T/budget.json" "$FP8"
python3 - "$T/budget.json" "$DATA/small_fp8.truth.json" "$SRC/schemas/budget.schema.json" <<'PY' || fails=$((fails+1))
import json, sys
b = json.load(open(sys.argv[1])); ms = json.load(open(sys.argv[2]))["memory_stats"]; s = json.load(open(sys.argv[3]))
assert b["schema"] == "snapdiff/budget/2" and b["metric"] == "allocated"
for k in ("requested", "allocated", "reserved"):
    assert b["peak"][k + "_bytes"] == ms[k + "_bytes.all.peak"], k
assert sum(b["categories"].values()) == b["peak"]["requested_bytes"]
assert b["tolerance"] == {"max_increase": "2%"}
for k in s["required"]: assert k in b, k
for k in b: assert k in s["properties"], k
for k in s["properties"]["peak"]["required"]: assert k in b["peak"], k
for k in b["source"]: assert k in s["properties"]["source"]["properties"], k
assert b["schema"] in s["properties"]["schema"]["enum"]
assert b["category_max"]["optimizer_state"] == json.load(open(sys.argv[2]))["optimizer_state_bytes"]
for k, v in b["category_max"].items(): assert v >= b["categories"][k], k
assert set(b["phases"]) <= set(s["properties"]["phases"]["propertyNames"]["enum"]), b["phases"]
assert max(p["allocated_bytes"] for p in b["phases"].values()) == ms["allocated_bytes.all.peak"]
for p in b["phases"].values():
    for k in p: assert k in s["properties"]["phases"]["additionalProperties"]["properties"], k
print("ok   budget fields (schema)")
PY
check "run against its own budget passes" 0 "$BIN" check --budget "$T/budget.json" "$FP8" --width 1000
expect "own budget" "$T/out" "\[budget\]"
check "smaller run passes the budget" 0 "$BIN" check --budget "$T/budget.json" "$BF16"
check "write tight budget" 0 "$BIN" check --write-budget "$T/tight.json" --max-increase 1% --warn-increase 0.5% \
  --limit optimizer_temporary=1GiB "$BF16"
check "bigger run fails a tight budget" 1 "$BIN" check --budget "$T/tight.json" --junit "$T/bj.xml" "$FP8"
expect "bigger run fails" "$T/out" "increase.allocated .* FAIL$"
expect "bigger run fails" "$T/out" "limit.optimizer_temporary .* pass$"
junit_ok "budget junit" "$T/bj.xml" 3 1
check "command line overrides the budget" 0 "$BIN" check --budget "$T/tight.json" --max-increase 3% "$FP8"
expect "override" "$T/out" "WARN$"
check "budget max-peak override" 1 "$BIN" check --budget "$T/budget.json" --max-peak 1MiB "$FP8"
check "write-budget to stdout" 0 "$BIN" check --write-budget - --metric reserved "$PW"
python3 -c "import json,sys; b=json.load(open(sys.argv[1])); assert b['metric']=='reserved' and b['peak']['reserved_bytes']==343932928" "$T/out" \
  || { echo "FAIL write-budget -: not a budget"; fails=$((fails+1)); }
cp "$T/out" "$T/pw.json"
check "reserved budget: bigger run fails" 1 "$BIN" check --budget "$T/pw.json" "$FP8"
expect "reserved budget" "$T/out" "increase.reserved"
# Phase limits in a budget; the verdict's phase table against the budget's.
check "write budget with a phase limit" 0 "$BIN" check --write-budget "$T/ph.json" --limit optimizer:optimizer_temporary=1GiB "$FP8"
python3 -c "import json,sys; b=json.load(open(sys.argv[1])); assert b['limits']['phases']=={'optimizer': {'optimizer_temporary': '1GiB'}}, b['limits']" "$T/ph.json" \
  || { echo "FAIL budget phase limit not written"; fails=$((fails+1)); }
check "phase limit from a budget" 1 "$BIN" check --budget "$T/ph.json" "$SEED_FP8" --width 1000
expect "phase limit from a budget" "$T/out" "limit.optimizer:optimizer_temporary .* FAIL$"
expect "phase limit from a budget" "$T/out" "peak of each phase kind, over all of its spans (vs the baseline):"
# A version 1 budget (no phase peaks) still reads.
python3 - "$T/budget.json" "$T/v1.json" <<'PY'
import json, sys
b = json.load(open(sys.argv[1])); b["schema"] = "snapdiff/budget/1"; del b["phases"]; del b["category_max"]
json.dump(b, open(sys.argv[2], "w"))
PY
check "version 1 budget" 0 "$BIN" check --budget "$T/v1.json" "$FP8"
expect_not "version 1 budget" "$T/out" "(vs the baseline)"
printf '{"schema": "snapdiff/budget/2", "peak": {"requested_bytes": 1, "allocated_bytes": 2, "reserved_bytes": 3}, "limits": {"phases": {"step": {"optimizer_temporary": "1GiB"}}}}' >"$T/badph.json"
check "budget with an unknown phase" 3 "$BIN" check --budget "$T/badph.json" "$FP8"
expect "budget with an unknown phase" "$T/err" "badph.json: \$.limits.phases.step: unknown phase"

# --- truncated history -------------------------------------------------------
"$BIN" convert --no-gzip "$BF16" -o "$T/full.snap" >/dev/null 2>&1
python3 - "$T/full.snap" "$T/wrapped.snap" <<'PY' || fails=$((fails+1))
import json, sys
d = json.load(open(sys.argv[1])); ev = d["devices"][0]["events"]; n = 200
for k, v in ev.items():
    if isinstance(v, list): ev[k] = v[n:]
ev["count"] -= n
json.dump(d, open(sys.argv[2], "w"))
PY
check "truncated candidate fails" 1 "$BIN" check --max-peak 60GiB "$T/wrapped.snap"
expect "truncated candidate" "$T/out" "history .* truncated .* FAIL$"
expect "truncated candidate" "$T/out" "peak cannot be established"
expect "truncated candidate" "$T/out" "allow-truncated"
check "truncated candidate allowed" 0 "$BIN" check --allow-truncated --max-peak 60GiB "$T/wrapped.snap"
expect "truncated allowed" "$T/out" "WARN$"
check "truncated vs baseline" 1 "$BIN" check --max-increase 50% "$BF16" "$T/wrapped.snap"
check "truncated baseline fails" 1 "$BIN" check --max-increase 50% "$T/wrapped.snap" "$BF16"
expect "truncated baseline" "$T/out" "baseline_history .* FAIL$"
check "no budget from a truncated run" 1 "$BIN" check --write-budget "$T/w.json" "$T/wrapped.snap"
[[ -e $T/w.json ]] && { echo "FAIL budget written from a truncated run"; fails=$((fails+1)); }
check "budget from a truncated run when allowed" 0 "$BIN" check --allow-truncated --write-budget "$T/w.json" "$T/wrapped.snap"

# --- a late start told from a wrap by --max-entries; a late start passes ------
# late_gpt2: recording started after the model was built (its truth says
# late_start), 2,082 entries with max_entries=1,000,000.
LATE=$DATA/late_gpt2.pickle.gz
check "late start passes by default" 0 "$BIN" check --max-peak 100GiB --max-entries 1000000 "$LATE" --width 1000
expect "late start passes by default" "$T/out" "history starts after memory was already in use"
check "late start accepted" 0 "$BIN" check --max-peak 100GiB --max-entries 1000000 --allow-late-start "$LATE"
expect "late start accepted" "$T/out" "^  history .* pass$"
check "a wrap is not a late start" 1 "$BIN" check --max-peak 100GiB --max-entries 2082 --allow-late-start "$LATE"
expect "a wrap is not a late start" "$T/out" "ring buffer wrapped"
check "budget from a late start" 0 "$BIN" check --write-budget "$T/late.json" --max-entries 1000000 --allow-late-start "$LATE"
check "no budget from a wrap" 1 "$BIN" check --write-budget "$T/wrap.json" --max-entries 100 --allow-late-start "$LATE"
check "bad --max-entries" 2 "$BIN" check --max-peak 1GiB --max-entries -5 "$LATE"
one_error_line "bad --max-entries"

if ((fails)); then echo "$fails check CLI test(s) failed"; exit 1; fi
echo "all check CLI tests passed"
