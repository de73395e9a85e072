#!/usr/bin/env bash
# `snapdiff convert` end to end: every real snapshot converted to a pickle
# loads with Python's stdlib pickle (C and pure-Python unpicklers) as the very
# same object PyTorch dumped, uses only plain-data opcodes, and reports the
# same; .pickle.gz and .snap -> .pickle too; usage and input errors.
# Usage: convert_cli_test.sh path/to/snapdiff SOURCE_DIR
set -u
BIN=$1
SRC=$2
DATA=$SRC/tests/data/real
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
source "$SRC/tests/cli_lib.sh"
one_line_error() {  # one_line_error NAME PATTERN: one stderr line matching, nothing on stdout
  local name=$1 pat=$2
  if [[ $(wc -l <"$T/err") -ne 1 ]] || ! grep -q -- "$pat" "$T/err"; then
    echo "FAIL $name: stderr is not one line matching '$pat':"; cat "$T/err"; fails=$((fails+1))
  fi
  if [[ -s $T/out ]]; then echo "FAIL $name: printed to stdout"; fails=$((fails+1)); fi
}
strip_input() { sed '/^INPUT$/,/^$/d; /^snapdiff report:/d'; }

check "convert --help" 0 "$BIN" convert --help
grep -q "pickle.gz" "$T/out" || { echo "FAIL convert --help: no .pickle.gz"; fails=$((fails+1)); }

# Every real snapshot -> .pickle: silent, and equal to what PyTorch dumped.
names=()
for f in "$DATA"/*.pickle; do
  n=$(basename "$f" .pickle)
  check "convert $n.pickle" 0 "$BIN" convert "$f" -o "$T/$n.pickle" || continue
  [[ -s $T/out || -s $T/err ]] && { echo "FAIL convert $n: printed something"; fails=$((fails+1)); }
  names+=("$n")
done
check "convert small_fp8.pickle.gz" 0 "$BIN" convert "$DATA/small_fp8.pickle" -o "$T/small_fp8.pickle.gz"
check "convert small_oom.snap" 0 "$BIN" convert "$DATA/small_oom.pickle" -o "$T/small_oom.snap"
check "convert .snap -> .pickle" 0 "$BIN" convert "$T/small_oom.snap" -o "$T/small_oom_via_snap.pickle"
check "convert .pickle.gz -> .pickle" 0 "$BIN" convert "$T/small_fp8.pickle.gz" -o "$T/small_fp8_again.pickle"

python3 - "$DATA" "$T" "${names[@]}" <<'PY' || fails=$((fails+1))
import gzip, io, pickle, pickletools, sys, os
data, tmp, names = sys.argv[1], sys.argv[2], sys.argv[3:]
assert names, "nothing converted"
PLAIN = {"PROTO", "FRAME", "STOP", "MARK", "EMPTY_DICT", "EMPTY_LIST", "SETITEM", "SETITEMS", "APPEND", "APPENDS",
         "TUPLE2", "BINPUT", "LONG_BINPUT", "BINGET", "LONG_BINGET", "BININT1", "BININT2", "BININT", "LONG1",
         "SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "BINFLOAT", "NEWTRUE", "NEWFALSE", "NONE"}
def load(path):
    raw = open(path, "rb").read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return raw
for n in names:
    orig = pickle.load(open(os.path.join(data, n + ".pickle"), "rb"))
    raw = load(os.path.join(tmp, n + ".pickle"))
    ops = [op for op, arg, pos in pickletools.genops(raw)]
    assert ops[0].name == "PROTO" and raw[1] == 4, n
    bad = {op.name for op in ops} - PLAIN
    assert not bad, (n, bad)
    mine = pickle.load(io.BytesIO(raw))          # the C unpickler, from a file object (framed reads)
    assert mine == orig, n + ": differs from what PyTorch dumped"
    assert pickle._loads(raw) == orig, n + ": pure-Python unpickler"   # strict about frames
    assert list(mine) == ["segments", "device_traces", "allocator_settings", "external_annotations"], list(mine)
print("ok   %d converted pickles load as the objects PyTorch dumped, plain opcodes only" % len(names))

# A few fields as PyTorch 2.11 writes them.
d = pickle.load(open(os.path.join(tmp, "small_oom.pickle"), "rb"))
seg = d["segments"][0]
assert list(seg)[:10] == ["device", "address", "total_size", "allocated_size", "active_size", "requested_size",
                          "stream", "segment_type", "segment_pool_id", "is_expandable"], list(seg)
assert seg["segment_pool_id"] == (0, 0) and isinstance(seg["segment_pool_id"], tuple)
assert isinstance(seg["is_expandable"], bool) and seg["segment_type"] in ("large", "small")
blk = seg["blocks"][0]
assert list(blk) == ["address", "size", "requested_size", "state", "frames"], list(blk)
tr = d["device_traces"]
assert isinstance(tr, list) and len(tr) == 1
e = tr[0][0]
assert list(e) == ["action", "addr", "size", "stream", "time_us", "compile_context", "user_metadata", "frames"], list(e)
assert e["compile_context"] == "N/A" and e["user_metadata"] == ""
assert all(set(f) == {"name", "filename", "line"} for f in e["frames"])
oom = [x for x in tr[0] if x["action"] == "oom"]
assert len(oom) == 1 and "device_free" in oom[0] and "addr" not in oom[0]
st = d["allocator_settings"]
assert isinstance(st["garbage_collection_threshold"], float) and st["max_split_size"] == -1
assert st["expandable_segments"] is False and st["PYTORCH_CUDA_ALLOC_CONF"] == ""
assert list(st["roundup_power2_divisions"])[:3] == ["1", "2", "4"]
# A stack shared by many events is one list object after loading (memo).
d = pickle.load(open(os.path.join(tmp, "small_fp8.pickle"), "rb"))
stacks = [x["frames"] for x in d["device_traces"][0] if x["frames"]]
assert len({id(s) for s in stacks}) < len(stacks)
ann = d["external_annotations"][0]
assert list(ann) == ["stage", "name", "device", "time_us"] and ann["stage"] == "START"
print("ok   fields, key order and types as PyTorch 2.11 writes them")

orig = pickle.load(open(os.path.join(data, "small_fp8.pickle"), "rb"))
assert pickle.loads(load(os.path.join(tmp, "small_fp8.pickle.gz"))) == orig
with gzip.open(os.path.join(tmp, "small_fp8.pickle.gz"), "rb") as f:
    assert pickle.load(f) == orig
assert pickle.load(open(os.path.join(tmp, "small_fp8_again.pickle"), "rb")) == orig
orig = pickle.load(open(os.path.join(data, "small_oom.pickle"), "rb"))
assert pickle.load(open(os.path.join(tmp, "small_oom_via_snap.pickle"), "rb")) == orig
print("ok   .pickle.gz, .pickle.gz -> .pickle and .snap -> .pickle give the same objects")
PY

"$BIN" report "$DATA/small_fp8.pickle" | strip_input >"$T/a.txt"
"$BIN" report "$T/small_fp8.pickle" | strip_input >"$T/b.txt"
"$BIN" report "$T/small_fp8.pickle.gz" | strip_input >"$T/c.txt"
if cmp -s "$T/a.txt" "$T/b.txt" && cmp -s "$T/a.txt" "$T/c.txt"; then echo "ok   reports of the original and the converted pickles identical"
else echo "FAIL reports differ"; diff "$T/a.txt" "$T/b.txt" | head; fails=$((fails+1)); fi
cmp -s "$T/small_fp8.pickle" "$T/small_fp8_again.pickle" && echo "ok   converting the converted pickle again gives the same bytes" ||
  { echo "FAIL second conversion differs"; fails=$((fails+1)); }

check "convert --no-gzip .snap" 0 "$BIN" convert --no-gzip "$DATA/small_oom.pickle" -o "$T/plain.snap"
[[ $(head -c 1 "$T/plain.snap") == "{" ]] || { echo "FAIL --no-gzip .snap is not plain JSON"; fails=$((fails+1)); }

# Usage errors: exit 2, one line; nothing written.
check "unknown output extension" 2 "$BIN" convert "$DATA/small_oom.pickle" -o "$T/x.txt"
one_line_error "unknown output extension" "OUT.pickle.gz"
[[ -e $T/x.txt ]] && { echo "FAIL unknown extension: wrote a file"; fails=$((fails+1)); }
check "--no-gzip with .pickle.gz" 2 "$BIN" convert --no-gzip "$DATA/small_oom.pickle" -o "$T/x.pickle.gz"
one_line_error "--no-gzip with .pickle.gz" "no-gzip"
check "convert needs -o" 2 "$BIN" convert "$DATA/small_oom.pickle"
check "convert needs one input" 2 "$BIN" convert "$DATA/small_oom.pickle" "$DATA/small_fp8.pickle" -o "$T/y.pickle"
check "unwritable output" 2 "$BIN" convert "$DATA/small_oom.pickle" -o "$T/no/such/dir/x.pickle"
one_line_error "unwritable output" "cannot write"

# Input errors: exit 3, the one-line contract; nothing written.
check "missing input" 3 "$BIN" convert "$T/does-not-exist.pickle" -o "$T/z.pickle"
one_line_error "missing input" "^snapdiff: error: $T/does-not-exist.pickle: "
head -c 5000 "$DATA/small_bf16.pickle" >"$T/trunc.pickle"
check "truncated input" 3 "$BIN" convert "$T/trunc.pickle" -o "$T/z.pickle"
one_line_error "truncated input" "^snapdiff: error: $T/trunc.pickle: offset "
check "hostile input" 3 "$BIN" convert "$SRC/tests/data/evil_os_system.pickle" -o "$T/z.pickle"
one_line_error "hostile input" "refused pickle opcode GLOBAL"
[[ -e $T/z.pickle || -e $T/z.pickle.tmp ]] && { echo "FAIL input errors: wrote a file"; fails=$((fails+1)); }

if ((fails)); then echo "$fails convert check(s) failed"; exit 1; fi
echo "all convert checks passed"
