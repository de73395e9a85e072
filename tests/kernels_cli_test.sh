#!/usr/bin/env bash
# End-to-end checks of --kernels: a snapshot joined with a kernel recording
# (hand-written .snap files), BY KERNEL in text and JSON, the refusal of
# another run's recording (exit 3, naming both files), and the usage errors.
# Usage: kernels_cli_test.sh BIN SOURCE_DIR
set -u
BIN=$1
SRC=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
source "$SRC/tests/cli_lib.sh"

# The snapshot: a 2 MiB segment cudaMalloc'd at 1,000 us, two 1 MiB tensors
# in it at 1,500 and 2,500 us on stream 7, both alive at the end. The
# recording: a device-memory sample at 1,200 us (its start), two launches
# on stream 7, at 1,600 us and at 2,500 us (the second at the same
# microsecond as the second allocation: it counts as after it), and a
# sample at 3,000 us. A second recording is the same
# shifted by 100 s: another run.
python3 - "$T" <<'PY'
import json, sys
d = sys.argv[1]
def snap(devices, kernels=None, memory=None):
    j = {"format": "snapdiff.snap", "version": 1,
         "strings": ["", "gemm_kernel", "relu_kernel", "train.py", "forward"],
         "frames": [[4, 3, 10]], "stacks": [[0, 0]], "devices": devices}
    if kernels: j["kernels"] = kernels
    if memory: j["device_memory"] = memory
    return j
ev = {"count": 3, "kind": [3, 0, 0], "time_us_delta": [1000, 500, 1000],
      "addr": [268435456, 268435456, 269484032], "size": [2097152, 1048576, 1048576],
      "stream": [0, 0, 0], "stack": [0, 1, 1], "compile_context": [0, 0, 0], "user_metadata": [0, 0, 0],
      "action": [0, 0, 0]}
dev = {"device": 0, "has_trace": True, "streams": [7], "events": ev, "segments": [], "blocks": []}
json.dump(snap([dev]), open(d + "/run.snap", "w"))
def rec(shift):
    k = {"count": 2, "streams": [7], "device": [0, 0], "time_us_delta": [1600 + shift, 900], "name": [1, 2],
         "stack": [0, 0], "stream": [0, 0]}
    m = {"count": 2, "device": [0, 0], "time_us_delta": [1200 + shift, 1800], "free_bytes": [79 << 30, 70 << 30],
         "total_bytes": [80 << 30, 80 << 30], "reserved_bytes": [0, 0], "label": [0, 0]}
    return snap([], k, m)
json.dump(rec(0), open(d + "/run.kernels.snap", "w"))
json.dump(rec(100_000_000), open(d + "/other.kernels.snap", "w"))
PY

check "report --kernels" 0 "$BIN" report "$T/run.snap" --kernels "$T/run.kernels.snap" --width 1000
expect "report --kernels: the INPUT line" "$T/out" "recording   $T/run.kernels.snap: process 0, 2 launches"
expect "report --kernels: offset" "$T/out" "clock offset not measured"
expect "report --kernels: section" "$T/out" "BY KERNEL AT THE PEAK  cuda:0"
expect "report --kernels: coverage" "$T/out" "2 of the 2 allocations live at the peak (100%) have a kernel, holding 100% of their bytes"
expect "report --kernels: the launch after" "$T/out" "gemm_kernel"
expect "report --kernels: the launch at the same microsecond" "$T/out" "relu_kernel"
expect "report --kernels: the site" "$T/out" "forward (train.py:10)"
expect_not "report --kernels: no BY OP" "$T/out" "BY OP AT THE PEAK"

check "report --kernels --explain" 0 "$BIN" report "$T/run.snap" --kernels "$T/run.kernels.snap" --explain 0x10000000 --width 1000
expect "report --kernels --explain: the kernel" "$T/out" "kernel: made for gemm_kernel; 2 launches on its stream while it lived, the last relu_kernel"
check "report --kernels --explain -f json" 0 "$BIN" report "$T/run.snap" --kernels "$T/run.kernels.snap" --explain 0x10100000 -f json
python3 - "$T/out" <<'PY' || fail "report --kernels --explain -f json: the kernels"
import json, sys
k = json.load(open(sys.argv[1]))["explain"]["items"][0]["kernels"]
assert k == {"kernel": "relu_kernel", "while_live": 1, "last": "relu_kernel"}, k
PY

check "report --kernels -f json" 0 "$BIN" report "$T/run.snap" --kernels "$T/run.kernels.snap" -f json
python3 - "$T/out" <<'PY' || fail "report --kernels -f json: contents"
import json, sys
r = json.load(open(sys.argv[1]))
k = r["kernel_join"]
assert k["kernels"] == 2 and k["samples"] == 2 and k["offset_measured"] is False, k
assert k["recording_first_us"] == 1200 and k["allocations_before_kernels"] == 0, k
assert k["allocations"] == 2 and k["allocations_with_kernel"] == 2, k
d = r["devices"][0]
c = d["kernel_coverage"]
assert c["allocations"] == 2 and c["allocations_with_kernel"] == 2 and c["allocations_percent"] == 100.0, c
rows = {x["kernel"]: x for x in d["by_kernel"]}
assert set(rows) == {"gemm_kernel", "relu_kernel"}, rows
assert rows["gemm_kernel"]["requested_bytes"] == 1048576 and rows["gemm_kernel"]["site"] == "forward (train.py:10)", rows
assert "by_op" not in d
PY
if python3 -c 'import jsonschema' 2>/dev/null; then
  python3 - "$T/out" "$SRC/schemas/report.schema.json" <<'PY' || fail "report --kernels -f json: schema"
import json, sys, jsonschema
jsonschema.validate(json.load(open(sys.argv[1])), json.load(open(sys.argv[2])))
PY
fi

check "report --kernels of another run" 3 "$BIN" report "$T/run.snap" --kernels "$T/other.kernels.snap"
expect "another run: names the recording" "$T/err" "snapdiff: error: $T/other.kernels.snap: not a kernel recording of the run of $T/run.snap"
expect "another run: why" "$T/err" "not recorded at the same time"
[[ $(wc -l <"$T/err") -eq 1 ]] || fail "another run: more than one stderr line"
[[ -s $T/out ]] && fail "another run: printed to stdout"

check "--kernels given a snapshot" 2 "$BIN" report "$T/run.snap" --kernels "$T/run.snap"
expect "--kernels given a snapshot: says so" "$T/err" "allocator events"
check "diff --kernels-a/--kernels-b" 0 "$BIN" diff "$T/run.snap" "$T/run.snap" --kernels-a "$T/run.kernels.snap" --kernels-b "$T/run.kernels.snap"
check "diff --kernels-b of another run" 3 "$BIN" diff "$T/run.snap" "$T/run.snap" --kernels-b "$T/other.kernels.snap"
check "diff --kernels" 2 "$BIN" diff "$T/run.snap" "$T/run.snap" --kernels "$T/run.kernels.snap"
check "check --kernels" 0 "$BIN" check "$T/run.snap" --max-peak 1GiB --kernels "$T/run.kernels.snap"
check "check --kernels of another run" 3 "$BIN" check "$T/run.snap" --max-peak 1GiB --kernels "$T/other.kernels.snap"

[[ $fails -eq 0 ]] && echo "all kernels_cli checks passed"
exit $((fails > 0))
