#!/usr/bin/env bash
# End-to-end checks of the snapdiff executable: exit codes, the one-line
# error contract, stdout hygiene. Usage: cli_test.sh path/to/snapdiff SOURCE_DIR
set -u
BIN=$1
SRC=$2
DATA=$SRC/tests/data/real
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
source "$SRC/tests/cli_lib.sh"
input_error() {  # input_error NAME FILE : exit 3, one stderr line naming the file, empty stdout
  local name=$1 file=$2
  check "$name" 3 "$BIN" report "$file" || return
  local lines; lines=$(wc -l <"$T/err")
  if [[ $lines -ne 1 ]] || ! grep -q "^snapdiff: error: $file: " "$T/err"; then
    echo "FAIL $name: stderr is not one 'snapdiff: error: FILE: ...' line:"; cat "$T/err"; fails=$((fails+1))
  fi
  if [[ -s $T/out ]]; then echo "FAIL $name: printed to stdout on error"; fails=$((fails+1)); fi
}

check "--help" 0 "$BIN" --help
grep -q "Exit codes" "$T/out" || { echo "FAIL --help lacks exit codes"; fails=$((fails+1)); }
check "--version" 0 "$BIN" --version
check "report --help" 0 "$BIN" report --help
check "convert --help" 0 "$BIN" convert --help
check "no arguments" 2 "$BIN"
check "bad option" 2 "$BIN" report --no-such-option "$DATA/small_bf16.pickle"
check "bad format" 2 "$BIN" report --format yaml "$DATA/small_bf16.pickle"
# Two or more files to report are ranks of one run (docs/ranks.md).
check "two inputs to report: many ranks" 0 "$BIN" report "$DATA/small_bf16.pickle" "$DATA/small_fp8.pickle"
expect "two inputs to report: many ranks" "$T/out" "2 ranks read"

input_error "missing file" "$T/does-not-exist.pickle"
input_error "directory" "$T"
: >"$T/empty.pickle"; input_error "empty file" "$T/empty.pickle"
head -c 4096 /dev/urandom >"$T/random.bin"; printf 'Z' | dd of="$T/random.bin" bs=1 count=1 conv=notrunc 2>/dev/null
input_error "random bytes" "$T/random.bin"
input_error "os.system pickle" "$SRC/tests/data/evil_os_system.pickle"
grep -q "refused pickle opcode" "$T/err" || { echo "FAIL os.system: no refusal message"; fails=$((fails+1)); }
head -c 5000 "$DATA/small_bf16.pickle" >"$T/trunc.pickle"; input_error "truncated pickle" "$T/trunc.pickle"
grep -q "offset" "$T/err" || { echo "FAIL truncated: no offset"; fails=$((fails+1)); }
input_error "/dev/null" /dev/null

check "report text" 0 "$BIN" report "$DATA/small_bf16.pickle"
grep -q "^PEAK" "$T/out" || { echo "FAIL report text: no PEAK section"; fails=$((fails+1)); }
[[ -s $T/err ]] && { echo "FAIL report text: wrote to stderr"; fails=$((fails+1)); }
check "bare FILE = report" 0 "$BIN" "$DATA/small_bf16.pickle"
check "report json" 0 "$BIN" report --format json "$DATA/small_bf16.pickle"
python3 - "$T/out" "$DATA/small_bf16.truth.json" "$SRC" <<'PY' || fails=$((fails+1))
import json, sys
r = json.load(open(sys.argv[1])); t = json.load(open(sys.argv[2]))["memory_stats"]
assert r["schema"] == "snapdiff/report/1"
assert r["input"]["format"] == "torch-pickle" and r["input"]["history"] == "complete"
assert r["peak"]["allocated_bytes"] == t["allocated_bytes.all.peak"], r["peak"]
assert r["peak"]["requested_bytes"] == t["requested_bytes.all.peak"]
assert r["peak"]["reserved_bytes"] == t["reserved_bytes.all.peak"]
assert isinstance(r["devices"], list) and r["devices"][0]["device"] == 0
for k in ("event_index", "time_us", "phase", "iteration"): assert k in r["peak"]
# Every field the schema marks required is present.
import os
s = json.load(open(os.path.join(sys.argv[3], "schemas/report.schema.json")))
for k in s["required"]: assert k in r, k
for k in s["$defs"]["devicePeak"]["required"]: assert k in r["peak"], k
for d in r["devices"]:
    for k in s["$defs"]["device"]["required"]: assert k in d, k
for k in s["$defs"]["categories"]["required"]: assert k in r["categories"], k
for ph in r["phases"]:
    for k in s["$defs"]["phaseSpan"]["required"]: assert k in ph, k
assert sum(r["categories"].values()) == r["peak"]["requested_bytes"]
print("ok   json fields")
PY
check "report -o" 0 "$BIN" report --format json -o "$T/r.json" "$DATA/small_bf16.pickle"
[[ -s $T/out ]] && { echo "FAIL -o: stdout not empty"; fails=$((fails+1)); }
[[ -s $T/r.json ]] || { echo "FAIL -o: no file"; fails=$((fails+1)); }

check "convert" 0 "$BIN" convert "$DATA/small_fp8.pickle" -o "$T/x.snap"
check "report .snap" 0 "$BIN" report "$T/x.snap"
"$BIN" report "$DATA/small_fp8.pickle" | sed '/^INPUT$/,/^$/d; /^snapdiff report:/d' >"$T/a.txt"
"$BIN" report "$T/x.snap" | sed '/^INPUT$/,/^$/d; /^snapdiff report:/d' >"$T/b.txt"
if cmp -s "$T/a.txt" "$T/b.txt"; then echo "ok   pickle and .snap reports identical"; else
  echo "FAIL pickle and .snap reports differ"; diff "$T/a.txt" "$T/b.txt" | head; fails=$((fails+1)); fi
check "convert needs -o" 2 "$BIN" convert "$DATA/small_fp8.pickle"

check "--explain" 0 "$BIN" report --explain _multi_tensor_adam "$DATA/small_bf16.pickle"
grep -q "optimizer_temporary  <- rule optimizer-temporary" "$T/out" || { echo "FAIL --explain: no rule shown"; fails=$((fails+1)); }
check "--explain CATEGORY" 0 "$BIN" report --explain kv_cache "$DATA/i36_generate_kv.pickle.gz"
grep -q "kv_cache  <- rule kv-cache-frames" "$T/out" || { echo "FAIL --explain kv_cache: no rule shown"; fails=$((fails+1)); }
grep -q "256.0 KiB per generated" "$T/out" || { echo "FAIL --explain kv_cache: no bytes per token"; fails=$((fails+1)); }
printf '{"format": "snapdiff.rules", "version": 1, "rules": [{"name": "x", "category": "c", "when": {"colour": 1}}]}' >"$T/bad.rules"
check "bad rules file" 3 "$BIN" report --rules "$T/bad.rules" "$DATA/small_bf16.pickle"
grep -q "bad.rules: \$.rules\[0\].when.colour" "$T/err" || { echo "FAIL bad rules: no JSON path"; cat "$T/err"; fails=$((fails+1)); }
printf '{"format": "snapdiff.rules", "version": 1, "rules": [{"name": "scales", "category": "fp8_scale", "when": {"frame_name": "^_scale$"}}]}' >"$T/good.rules"
check "--rules" 0 "$BIN" report --format json --rules "$T/good.rules" "$DATA/small_fp8.pickle"
grep -q '"fp8_scale"' "$T/out" || { echo "FAIL --rules: category missing"; fails=$((fails+1)); }

check "diff A B" 0 "$BIN" "$DATA/small_fp8.pickle" "$DATA/small_fp8_pw.pickle"
grep -q "^FINDINGS" "$T/out" || { echo "FAIL diff: no FINDINGS"; fails=$((fails+1)); }
check "diff .snap vs pickle, json" 0 "$BIN" diff --format json "$T/x.snap" "$DATA/small_fp8_pw.pickle"
python3 - "$T/out" "$DATA" "$SRC" <<'PY' || fails=$((fails+1))
import json, sys, os
d = json.load(open(sys.argv[1]))
ta = json.load(open(os.path.join(sys.argv[2], "small_fp8.truth.json")))["memory_stats"]
tb = json.load(open(os.path.join(sys.argv[2], "small_fp8_pw.truth.json")))["memory_stats"]
s = json.load(open(os.path.join(sys.argv[3], "schemas/diff.schema.json")))
for k in s["required"]: assert k in d, k
assert d["schema"] == "snapdiff/diff/1"
assert d["delta"]["peak"]["requested_bytes"] == tb["requested_bytes.all.peak"] - ta["requested_bytes.all.peak"]
assert sum(d["delta"]["categories"].values()) == d["delta"]["peak"]["requested_bytes"]
print("ok   diff json")
PY
check "diff markdown" 0 "$BIN" diff --format markdown "$DATA/small_bf16.pickle" "$DATA/small_fp8.pickle"
grep -q "^| peak | A | B" "$T/out" || { echo "FAIL diff markdown: no table"; fails=$((fails+1)); }
check "diff needs two inputs" 2 "$BIN" diff "$DATA/small_bf16.pickle"
check "diff of a bad input" 3 "$BIN" diff "$DATA/small_bf16.pickle" "$T/random.bin"

# --- outputs that cannot be written -----------------------------------------
# Every file snapdiff writes goes through one writer: exit 2, one line
# "snapdiff: error: cannot write PATH: reason", no temporary file left, and
# what was there before is unchanged. W holds directories named like
# outputs, each with a file inside, and an old report.
W=$T/w
mkdir -p "$W"
for d in out.txt out.snap out.pickle out.pickle.gz out.svg; do mkdir "$W/$d"; echo old >"$W/$d/keep"; done
echo old >"$W/old.json"
(cd "$W" && find . | sort) >"$T/w.before"
S=$DATA/small_bf16.pickle
unwritable() {  # unwritable NAME TARGET CMD... : the failure above, W as it was
  local name=$1 target=$2; shift 2
  check "$name" 2 "$@" || return
  if [[ $(wc -l <"$T/err") -ne 1 ]] || ! grep -q "^snapdiff: error: cannot write $target: " "$T/err"; then
    fail "$name: stderr is not one 'cannot write $target: ...' line: $(cat "$T/err")"
  fi
  (cd "$W" && find . | sort) | cmp -s - "$T/w.before" || fail "$name: left $(cd "$W" && find . -name '.snapdiff-*')"
  for f in "$W"/*/keep "$W/old.json"; do [[ $(cat "$f") == old ]] || fail "$name: $f changed"; done
}
for where in dir missing; do
  out=$W/out; [[ $where == missing ]] && out=$W/no/such/dir/out
  unwritable "report -o ($where)" "$out.txt" "$BIN" report "$S" -o "$out.txt"
  unwritable "report --format html -o ($where)" "$out.txt" "$BIN" report --format html "$S" -o "$out.txt"
  unwritable "diff -o ($where)" "$out.txt" "$BIN" diff "$S" "$S" -o "$out.txt"
  unwritable "check -o ($where)" "$out.txt" "$BIN" check --max-peak 100GiB "$S" -o "$out.txt"
  unwritable "check --junit ($where)" "$out.txt" "$BIN" check --max-peak 100GiB "$S" --junit "$out.txt"
  unwritable "check --write-budget ($where)" "$out.txt" "$BIN" check --write-budget "$out.txt" "$S"
  unwritable "convert .snap ($where)" "$out.snap" "$BIN" convert "$S" -o "$out.snap"
  unwritable "convert .pickle ($where)" "$out.pickle" "$BIN" convert "$S" -o "$out.pickle"
  unwritable "convert .pickle.gz ($where)" "$out.pickle.gz" "$BIN" convert "$S" -o "$out.pickle.gz"
  unwritable "chart -o ($where)" "$out.svg" "$BIN" chart "$S" --kind flame -o "$out.svg"
done
# A write cut short (the file size limit, 1 KiB) keeps the old file.
unwritable "short write" "$W/old.json" bash -c 'trap "" XFSZ; ulimit -f 1; exec "$0" "$@"' \
  "$BIN" report --format json "$S" -o "$W/old.json"
grep -q "File too large" "$T/err" || fail "short write: no reason: $(cat "$T/err")"
# Character devices are written in place, not replaced.
check "report -o /dev/null" 0 "$BIN" report "$S" -o /dev/null
quiet "report -o /dev/null"
[[ -c /dev/null ]] || fail "report -o /dev/null replaced /dev/null"

# A tensor list beside a snapshot (docs/tensors.md): read by default,
# --no-tensors ignores it, a broken one is the input error of that file.
NAMED=$DATA/i36_input_opt_named.pickle.gz
check "tensor list beside" 0 "$BIN" report "$NAMED" --width 1000
expect "tensor list beside" "$T/out" "parameter .* tensors: "
check "--no-tensors" 0 "$BIN" report --no-tensors "$NAMED"
if grep -q " tensors: " "$T/out"; then echo "FAIL --no-tensors: rows still named"; fails=$((fails+1)); fi
printf '{"format":"snapdiff-tensors","version":1,"tensors":[],"moments":[{"time_us":1,"storages":[[0,1,2]]}]}' >"$T/bad.tensors.json"
check "broken tensor list" 3 "$BIN" report --tensors "$T/bad.tensors.json" "$NAMED"
expect "broken tensor list" "$T/err" "^snapdiff: error: $T/bad.tensors.json: [$][.]moments\[0\][.]storages\[0\]\[0\]: "
[[ -s $T/out ]] && { echo "FAIL broken tensor list: printed to stdout"; fails=$((fails+1)); }
check "--tensors with --no-tensors" 2 "$BIN" report --tensors "$T/bad.tensors.json" --no-tensors "$NAMED"

if ((fails)); then echo "$fails CLI check(s) failed"; exit 1; fi
echo "all CLI checks passed"
