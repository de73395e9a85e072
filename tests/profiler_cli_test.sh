#!/usr/bin/env bash
# End-to-end checks of torch.profiler inputs: report on a Chrome trace,
# --memory-timeline, --trace, diff/check on traces, and the error contract
# for truncated and malformed traces. Usage: profiler_cli_test.sh BIN SOURCE_DIR
set -u
BIN=$1
SRC=$2
DATA=$SRC/tests/data/real
PROF=$SRC/tests/data/profile
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
source "$SRC/tests/cli_lib.sh"
has() {  # has NAME FILE TEXT
  grep -qF -- "$3" "$2" || { echo "FAIL $1: no '$3' in output"; fails=$((fails+1)); }
}
input_error() {  # input_error NAME FILE WHERE : exit 3, one stderr line naming the file and WHERE, empty stdout
  local name=$1 file=$2 where=$3
  check "$name" 3 "$BIN" report "$file" || return
  local lines; lines=$(wc -l <"$T/err")
  if [[ $lines -ne 1 ]] || ! grep -qF "snapdiff: error: $file: $where" "$T/err"; then
    echo "FAIL $name: stderr is not one 'snapdiff: error: FILE: $where...' line:"; cat "$T/err"; fails=$((fails+1))
  fi
  if [[ -s $T/out ]]; then echo "FAIL $name: printed to stdout on error"; fails=$((fails+1)); fi
}

TRACE=$DATA/small_profile.trace.json.gz
check "report trace" 0 "$BIN" report "$TRACE" --width 1000
has "report trace" "$T/out" "format      chrome-trace"
has "report trace" "$T/out" "BY OP AT THE PEAK"
has "report trace" "$T/out" "BY KERNEL AT THE PEAK"
has "report trace" "$T/out" "exact: the largest Total Allocated the trace reports"
[[ -s $T/err ]] && { echo "FAIL report trace: wrote to stderr"; fails=$((fails+1)); }

check "report trace json" 0 "$BIN" report --format json "$TRACE"
python3 - "$T/out" "$DATA/small_profile.truth.json" "$SRC" <<'PY' || fails=$((fails+1))
import json, os, sys
r = json.load(open(sys.argv[1])); t = json.load(open(sys.argv[2]))
assert r["input"]["format"] == "chrome-trace", r["input"]
assert r["input"]["history"] == "truncated"           # the profiler started after the model was built
assert r["peak"]["allocated_bytes"] == t["max_memory_allocated"], r["peak"]
assert r["peak"]["requested_bytes"] == r["peak"]["allocated_bytes"]
assert sum(r["categories"].values()) == r["peak"]["requested_bytes"]
s = json.load(open(os.path.join(sys.argv[3], "schemas/report.schema.json")))
for k in s["required"]: assert k in r, k
for k in s["$defs"]["devicePeak"]["required"]: assert k in r["peak"], k
d = r["devices"][0]
for k in s["$defs"]["device"]["required"]: assert k in d, k
assert d["counters"] == "reported"
assert sum(x["requested_bytes"] for x in d["by_op"]) + d["by_op_other"]["requested_bytes"] == r["peak"]["requested_bytes"]
assert sum(x["requested_bytes"] for x in d["by_kernel"]) + d["by_kernel_other"]["requested_bytes"] == r["peak"]["requested_bytes"]
assert r["input"]["profiler"]["ops"] == 1450
print("ok   trace json fields")
PY

for tl in small_profile.memtl.json small_profile.memtl.raw.json.gz; do
  check "--memory-timeline $tl" 0 "$BIN" report "$TRACE" --memory-timeline "$DATA/$tl"
  has "--memory-timeline $tl" "$T/out" "PYTORCH'S MEMORY TIMELINE"
  has "--memory-timeline $tl" "$T/out" "PyTorch's memory timeline calls"
done
check "--memory-timeline json" 0 "$BIN" report --format json "$TRACE" --memory-timeline "$DATA/small_profile.memtl.raw.json.gz"
python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["memory_timeline"]; p=m["moments"][0]; u=m["moments"][1]; assert m["raw"] and p["placed_bytes"] + p["before_profiler_bytes"] == p["unknown_bytes"], m; assert u["placements"][0]["op"] == "aten::_foreach_sqrt", u; print("ok   memory_timeline json")' "$T/out" || fails=$((fails+1))

cp "$T/out" "$T/timeline.json"
check "snapshot --trace" 0 "$BIN" report "$PROF/joint.snapshot.pickle" --trace "$PROF/joint.trace.json.gz" --width 1000
has "snapshot --trace" "$T/out" "joint.trace.json.gz: cuda:0"
has "snapshot --trace" "$T/out" "BY OP AT THE PEAK"
check "bare --trace" 0 "$BIN" --trace "$PROF/joint.trace.json.gz" "$PROF/joint.snapshot.pickle"
has "bare --trace" "$T/out" "snapdiff report:"
check "snapshot --trace json" 0 "$BIN" report --format json "$PROF/joint.snapshot.pickle" --trace "$PROF/joint.trace.json.gz"
python3 -c 'import json,sys; j=json.load(open(sys.argv[1]))["trace_join"]["devices"][0]; assert j["method"] == "time" and j["matched"] > 0, j; print("ok   trace_join json")' "$T/out" || fails=$((fails+1))

cp "$T/out" "$T/join.json"
# The whole documents against the schema, where python3-jsonschema is installed.
python3 - "$SRC/schemas/report.schema.json" "$T/timeline.json" "$T/join.json" <<'PY' || fails=$((fails+1))
import json, sys
try:
    import jsonschema
except ImportError:
    print("skip schema validation (no jsonschema module)"); sys.exit(0)
s = json.load(open(sys.argv[1]))
for f in sys.argv[2:]:
    jsonschema.validate(json.load(open(f)), s)
print("ok   trace reports valid against schemas/report.schema.json")
PY

check "--trace on a trace" 2 "$BIN" report "$TRACE" --trace "$PROF/joint.trace.json.gz"
check "--trace of a snapshot" 2 "$BIN" report "$PROF/joint.snapshot.pickle" --trace "$PROF/joint.snapshot.pickle"
check "--memory-timeline on a snapshot" 2 "$BIN" report "$PROF/joint.snapshot.pickle" --memory-timeline "$DATA/small_profile.memtl.json"
check "--memory-timeline not a timeline" 3 "$BIN" report "$TRACE" --memory-timeline "$TRACE"
check "convert a trace" 2 "$BIN" convert "$TRACE" -o "$T/x.snap"
[[ -e $T/x.snap ]] && { echo "FAIL convert a trace: wrote output"; fails=$((fails+1)); }

check "diff two traces" 0 "$BIN" "$TRACE" "$PROF/joint.trace.json.gz"
has "diff two traces" "$T/out" "snapdiff diff"
check "check a trace (window)" 1 "$BIN" check --max-peak 1GiB "$TRACE"
check "check a trace --allow-truncated" 0 "$BIN" check --allow-truncated --max-peak 1GiB "$TRACE"

# The error contract on traces: the JSON path (and byte offset) of the problem.
zcat "$TRACE" >"$T/trace.json"
head -c 800000 "$T/trace.json" >"$T/cut.json"
input_error "truncated trace" "$T/cut.json" '$.traceEvents['
has "truncated trace" "$T/err" "truncated input"
gzip -c "$T/cut.json" >"$T/cut.json.gz"
input_error "truncated trace, gzip" "$T/cut.json.gz" '$.traceEvents['
head -c 100000 "$TRACE" >"$T/cutgz.json.gz"
input_error "truncated gzip stream" "$T/cutgz.json.gz" 'offset '
python3 - "$T/trace.json" "$T/bad.json" <<'PY'
import sys
s = open(sys.argv[1]).read()
i = s.index('"Bytes": ')
open(sys.argv[2], "w").write(s[:i] + '"Bytes": "many"' + s[s.index(",", i):])
PY
input_error "malformed trace" "$T/bad.json" '$.traceEvents['
has "malformed trace" "$T/err" '.args.Bytes: expected an integer'
input_error "memory timeline as the input" "$DATA/small_profile.memtl.json" 'offset 0'
has "memory timeline as the input" "$T/err" "--memory-timeline"

# --trace with a trace of another run: an input error naming both files and
# the evidence (almost nothing tied, no time in common), one line, exit 3.
check "--trace of another run" 3 "$BIN" report "$PROF/joint.snapshot.pickle" --trace "$TRACE"
if [[ $(wc -l <"$T/err") -ne 1 ]] || ! grep -qF "snapdiff: error: $TRACE: not a trace of the run of $PROF/joint.snapshot.pickle" "$T/err"; then
  echo "FAIL --trace of another run: stderr is not one line naming both files:"; cat "$T/err"; fails=$((fails+1))
fi
has "--trace of another run" "$T/err" "of its 266 allocations tie to the snapshot's"
has "--trace of another run" "$T/err" "before the snapshot's first event"
[[ -s $T/out ]] && { echo "FAIL --trace of another run: printed to stdout"; fails=$((fails+1)); }

# The raw memory timeline gives the tensors from before profiling PyTorch's categories.
check "--memory-timeline raw: pre-profile categories" 0 "$BIN" report --format json "$TRACE" --memory-timeline "$DATA/small_profile.memtl.raw.json.gz"
cp "$T/out" "$T/tl_raw.json"
check "no timeline" 0 "$BIN" report --format json "$TRACE"
python3 - "$T/tl_raw.json" "$T/out" <<'PY' || fails=$((fails+1))
import json, sys
w = json.load(open(sys.argv[1])); wo = json.load(open(sys.argv[2]))
assert w["categories"]["unknown"] < wo["categories"]["unknown"], (w["categories"], wo["categories"])
assert sum(w["categories"].values()) == w["peak"]["requested_bytes"] == wo["peak"]["requested_bytes"]
m = w["memory_timeline"]["moments"][0]["pytorch_categories"]
for c in ("parameter", "optimizer_state", "gradient"):
    assert abs(w["categories"].get(c, 0) - m[c]) <= m[c] // 100, (c, w["categories"], m)
print("ok   pre-profile tensors take the timeline's categories")
PY
check "--explain a pre-profile tensor" 0 "$BIN" report "$TRACE" --memory-timeline "$DATA/small_profile.memtl.raw.json.gz" --explain "allocated before the profiler started"
has "--explain a pre-profile tensor" "$T/out" "pytorch_memory_timeline"
has "--explain a pre-profile tensor" "$T/out" "PyTorch's memory timeline"

# A trace recorded without profile_memory=True (derived from small_profile by
# tests/data/derived/strip_profile_memory.py): says so, shows its ops and kernels.
NOMEM=$SRC/tests/data/derived/small_profile_nomem.trace.json.gz
check "trace without memory events" 0 "$BIN" report "$NOMEM"
has "trace without memory events" "$T/out" "The trace holds no memory events"
has "trace without memory events" "$T/out" "torch.profiler.profile(profile_memory=True)"
has "trace without memory events" "$T/out" "TOP OPS BY TIME"
has "trace without memory events" "$T/out" "TOP KERNELS BY LAUNCHES"
tr '\n' ' ' <"$T/out" | tr -s ' ' >"$T/flat"
has "trace without memory events" "$T/flat" "It holds 1,450 ops"
expect_not "trace without memory events" "$T/out" "dump-time state only"
check "trace without memory events json" 0 "$BIN" report --format json "$NOMEM"
cp "$T/out" "$T/nomem.json"
python3 - "$T/nomem.json" "$SRC/schemas/report.schema.json" <<'PY' || fails=$((fails+1))
import json, sys
r = json.load(open(sys.argv[1]))
a = r["profiler_activity"]
assert a["memory_events"] == 0 and a["ops"] == 1450 and a["kernel_launches"] == r["input"]["kernel_launches"], a
assert "profile_memory=True" in a["message"]
assert a["top_ops"] and a["top_kernels"], a
assert all(x["total_ns"] >= y["total_ns"] for x, y in zip(a["top_ops"], a["top_ops"][1:]))
assert sum(k["launches"] for k in a["top_kernels"]) <= a["kernel_launches"]
try:
    import jsonschema
    # (The document's peak and categories for an input with no devices do
    # not meet the schema yet; the new member is checked against its own.)
    jsonschema.validate(a, json.load(open(sys.argv[2]))["properties"]["profiler_activity"])
except ImportError:
    pass
print("ok   profiler_activity json")
PY

# A snapshot against a trace: no "0.00x" parameter ratio.
check "diff snapshot vs trace" 0 "$BIN" diff "$DATA/small_bf16.pickle" "$TRACE"
tr '\n' ' ' <"$T/out" | tr -s ' ' >"$T/flat"
expect_not "diff snapshot vs trace" "$T/flat" "0.00x"
has "diff snapshot vs trace" "$T/flat" "B has no tensors known as parameters at its peak (24 in A)"

if ((fails)); then echo "$fails profiler CLI check(s) failed"; exit 1; fi
echo "all profiler CLI checks passed"
