#!/usr/bin/env bash
# End-to-end: `snapdiff report` states the growth of a leaking run in every
# format, and `snapdiff check --max-growth` gates on it (exit 1 over the
# limit, 0 within; JSON and JUnit items; a run too short to measure warns).
# Usage: growth_cli_test.sh path/to/snapdiff SOURCE_DIR
set -u
BIN=$1
SRC=$2
DATA=$SRC/tests/data/real
LEAK=$DATA/ans_leak_logits_gpt2.pickle.gz
RESNET=$DATA/ans_leak_resnet.pickle.gz
GPT2=$DATA/ans_gpt2_py.pickle.gz
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
unset GITHUB_ACTIONS
source "$SRC/tests/cli_lib.sh"
need "$LEAK" "$RESNET" "$GPT2" "$DATA/small_bf16.pickle"

# --- report: the finding in text, JSON, HTML --------------------------------
check "report leak" 0 "$BIN" report "$LEAK"
expect "report leak" "$T/out" "Memory grows 786.0 MiB per iteration"
expect "report leak" "$T/out" "modeling_gpt2.py:697"
expect "report leak" "$T/out" "leaked"
check "report leak json" 0 "$BIN" report -f json "$LEAK"
python3 - "$T/out" <<'PY' || fail "report json: growth"
import json, sys
d = json.load(open(sys.argv[1]))["devices"][0]
g = d["growth"]
assert g["per_iteration_bytes"] == 824180736, g["per_iteration_bytes"]
assert g["sites"][0]["bytes_per_iteration"] == 823410688
assert d["categories"]["leaked"] == g["leaked_at_peak_bytes"] > 0
assert any(f["kind"] == "growth" for f in d["findings"])
PY
check "report leak html" 0 "$BIN" report -f html -o "$T/r.html" "$LEAK"
expect "report leak html" "$T/r.html" "Memory grows 786.0 MiB per iteration"
check "report resnet" 0 "$BIN" report "$RESNET"
expect "report resnet" "$T/out" "record_batch_stats"
check "report no leak" 0 "$BIN" report "$GPT2"
expect_not "report no leak" "$T/out" "Memory grows"

# --- check --max-growth -----------------------------------------------------
check "max-growth fails on the leak" 1 "$BIN" check --max-growth 100MiB --junit "$T/j.xml" "$LEAK"
expect "max-growth fails" "$T/out" "max_growth .* FAIL$"
expect "max-growth fails" "$T/out" "memory grows +786.0 MiB per iteration"
expect "max-growth junit" "$T/j.xml" 'name="max_growth"'
expect "max-growth junit" "$T/j.xml" '<failure type="max_growth"'
check "max-growth json" 1 "$BIN" check --max-growth 100MiB -f json "$LEAK"
python3 - "$T/out" <<'PY' || fail "check json: max_growth item"
import json, sys
j = json.load(open(sys.argv[1]))
it = [t for t in j["thresholds"] if t["kind"] == "max_growth"]
assert len(it) == 1 and it[0]["status"] == "fail" and it[0]["measured_bytes"] == 824180736, it
assert j["status"] == "fail"
PY
check "max-growth passes a large limit" 0 "$BIN" check --max-growth 1GiB "$LEAK"
expect "max-growth passes" "$T/out" "max_growth .* pass$"
check "max-growth on a run that does not leak" 0 "$BIN" check --max-growth 100MiB "$GPT2"
expect "max-growth short run" "$T/out" "cannot be measured"
check "max-growth bad size" 2 "$BIN" check --max-growth lots "$LEAK"
expect "max-growth bad size" "$T/err" "not a size"

if ((fails)); then echo "$fails growth CLI test(s) failed"; exit 1; fi
echo "all growth CLI tests passed"
