#!/usr/bin/env bash
# End-to-end checks of `snapdiff whatif`: help, usage errors (exit 2, one
# line), unreadable input (exit 3, nothing written), the JSON against its
# schema and against PyTorch's peaks of the run recorded under the setting
# asked, Markdown, --sweep's ranking, -o.
# Usage: whatif_cli_test.sh path/to/snapdiff SOURCE_DIR
set -u
BIN=$1
SRC=$2
W=$SRC/tests/data/real/whatif
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
source "$SRC/tests/cli_lib.sh"

check "whatif --help" 0 "$BIN" whatif --help
expect "whatif --help" "$T/out" "--alloc-conf"
check "no run" 2 "$BIN" whatif -a expandable_segments:True
check "nothing to predict" 2 "$BIN" whatif "$W/gpt2__default.pickle.gz"
expect "nothing to predict" "$T/err" "give --alloc-conf"
check "a setting not modelled" 2 "$BIN" whatif -a backend:cudaMallocAsync "$W/gpt2__default.pickle.gz"
expect "a setting not modelled" "$T/err" "backend:cudaMallocAsync is not modelled"
check "bad limit" 2 "$BIN" whatif -a "" --memory-limit lots "$W/gpt2__default.pickle.gz"
check "bad format" 2 "$BIN" whatif -a "" -f yaml "$W/gpt2__default.pickle.gz"
head -c 3000 "$W/gpt2__default.pickle.gz" | gzip -dc >"$T/cut.pickle" 2>/dev/null
echo "keep" >"$T/keep.json"
check "truncated input" 3 "$BIN" whatif -a "" -f json -o "$T/keep.json" "$T/cut.pickle"
[[ $(cat "$T/keep.json") == keep ]] || { echo "FAIL truncated input: the output file was changed"; fails=$((fails+1)); }
check "a private pool" 2 "$BIN" whatif -a "" "$SRC/tests/data/real/graph_step.pickle.gz"
expect "a private pool" "$T/err" "private memory pool"

check "json" 0 "$BIN" whatif -a expandable_segments:True -a max_split_size_mb:128 -f json "$W/resnet50__default.pickle.gz"
cp "$T/out" "$T/w.json"
check "sweep" 0 "$BIN" whatif --sweep -f json "$W/gpt2__default.pickle.gz"
cp "$T/out" "$T/sweep.json"
python3 - "$T" "$W" "$SRC/schemas/whatif.schema.json" <<'PY' || fails=$((fails+1))
import json, sys
T, W, S = sys.argv[1:4]
s = json.load(open(S))
r = json.load(open(f"{T}/w.json"))
for k in s["required"]: assert k in r, k
for sc in r["scenarios"] + [r["calibration"]]:
    for k in s["$defs"]["scenario"]["required"]: assert k in sc, k
truth = lambda n: json.load(open(f"{W}/{n}.truth.json"))["memory_stats"]
rec = truth("resnet50__default")
assert r["recorded"]["peak"]["allocated_bytes"] == rec["allocated_bytes.all.peak"]
assert r["recorded"]["peak"]["reserved_bytes"] == rec["reserved_bytes.all.peak"]
for sc, run in zip(r["scenarios"], ["resnet50__expandable", "resnet50__split128"]):
    t = truth(run)
    for k in ("allocated", "reserved"):
        got, want = sc["peak"][k + "_bytes"], t[k + "_bytes.all.peak"]
        assert abs(got - want) <= 0.005 * want, (run, k, got, want)
    assert sc["oom"] is None
    assert sc["change_vs_recorded"]["reserved_bytes"] == sc["peak"]["reserved_bytes"] - rec["reserved_bytes.all.peak"]
w = json.load(open(f"{T}/sweep.json"))
res = [w["scenarios"][i]["peak"]["reserved_bytes"] for i in w["ranking"]]
assert res == sorted(res) and len(res) == len(w["scenarios"]) >= 8, res
print("ok   json: schema keys; predictions within 0.5% of the runs recorded under those settings; sweep ranked")
PY
check "oom under a cap" 0 "$BIN" whatif -a "" -a expandable_segments:True --memory-limit 1GiB "$W/oomfrag__default.pickle.gz" --width 1000
expect "oom under a cap" "$T/out" "expandable_segments:True .* at event 528 (96.0 MiB)"
check "markdown" 0 "$BIN" whatif --sweep -f markdown -o "$T/w.md" "$W/gpt2__default.pickle.gz"
expect "markdown" "$T/w.md" "^| \`expandable_segments:True\` |"
[[ -s $T/out ]] && { echo "FAIL markdown -o: printed to stdout"; fails=$((fails+1)); }

if ((fails)); then echo "$fails whatif CLI test(s) failed"; exit 1; fi
echo "all whatif CLI tests passed"
