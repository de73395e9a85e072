#!/usr/bin/env bash
# End-to-end: a recording made from a notebook, where a cell is the innermost
# frame of the user's code, labels each site by the model frame outside the
# cell and names the cell as context ("gpt2 (record/record_answers.py:94)
# [in cell ipykernel_114/3105878423.py:21]"); a cell with no other frame of
# the user's code around it stays the label; categories do not change; a diff
# of two such runs matches its sites.
# The fixtures are a real recording rewritten at test time (plain pickle, no
# torch).
# Usage: notebook_cli_test.sh path/to/snapdiff SOURCE_DIR
set -u
BIN=$1
SRC=$2
DATA=$SRC/tests/data/real
GPT2=$DATA/ans_gpt2_py.pickle.gz
LEAK=$DATA/ans_leak_logits_gpt2.pickle.gz
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
unset GITHUB_ACTIONS
source "$SRC/tests/cli_lib.sh"
need "$GPT2" "$LEAK"
command -v python3 >/dev/null || { echo "FAIL python3 needed to write the fixtures"; exit 1; }

# Every stack's innermost frame of the user's code (a file outside the
# libraries) gets a notebook cell just inside it: the cell calls the library
# code, the user's function calls the cell ("inside" = the model's code runs a
# function defined in the notebook). mode=only: every user frame replaced by
# one cell (a model from a library called from a cell).
rewrite() {  # rewrite IN OUT MODE
  python3 - "$1" "$2" "$3" <<'PY'
import gzip, pickle, sys
src, dst, mode = sys.argv[1:4]
snap = pickle.load(gzip.open(src))
CELL = {"name": "<module>", "filename": "/var/folders/5x/T/ipykernel_114/3105878423.py", "line": 21}
LIB = ("/site-packages/", "/dist-packages/", "/lib/python3", "<frozen")
def user(f):
    n = f.get("filename", "")
    return n.endswith(".py") and not any(x in n for x in LIB)
def fix(frames):
    i = next((k for k, f in enumerate(frames) if user(f)), None)
    if i is None:
        return frames
    if mode == "only":
        return frames[:i] + [dict(CELL)] + [f for f in frames[i:] if not user(f)]
    return frames[:i] + [dict(CELL)] + frames[i:]
def walk(x):
    if isinstance(x, dict):
        for k, v in x.items():
            if k == "frames" and isinstance(v, list):
                x[k] = fix(v)
            else:
                walk(v)
    elif isinstance(x, list):
        for v in x:
            walk(v)
walk(snap)
with gzip.open(dst, "wb") as out:
    pickle.dump(snap, out)
PY
}
rewrite "$GPT2" "$T/nb.pickle.gz" inside || { echo "FAIL fixture"; exit 1; }
rewrite "$GPT2" "$T/only.pickle.gz" only || { echo "FAIL fixture"; exit 1; }

# --- the model frame leads, the cell is the context -------------------------
CELL='cell ipykernel_114/3105878423.py:21'
check "report notebook" 0 "$BIN" report --width 1000 "$T/nb.pickle.gz"
expect "model frame leads (activation)" "$T/out" "  activation  *gpt2_pair (record/record_answers.py:246) <- .*\[in $CELL, in forward (transformers/activations.py:66)\]"
expect "model frame leads (parameter)" "$T/out" "  parameter  *gpt2 (record/record_answers.py:94) <- .*\[in $CELL, in <lambda> (modules/module.py:1097)\]"
expect_not "the cell leads no row" "$T/out" "  <module> (ipykernel_114/3105878423.py:21)"
check "report plain" 0 "$BIN" report --width 1000 "$GPT2"
expect_not "plain: no cell" "$T/out" "ipykernel"
expect "plain: as before" "$T/out" "  activation  *gpt2_pair (record/record_answers.py:246) <- .*\[in forward (transformers/activations.py:66)\]"
check "json notebook" 0 "$BIN" report --format json "$T/nb.pickle.gz"
expect "json: callee names the cell" "$T/out" "\"callee\": \"$CELL, in "
# Categories are the same as the recording's without the cell: the totals
# and every row's category and rule, with its bytes.
cats() {
  python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
dev = d["devices"][0]
rows = sorted((r["category"], r["rule"], r["requested_bytes"], r["count"]) for r in dev["live_at_peak"]["sites"])
print(json.dumps([d["categories"], dev["categories"], dev["category_allocations"], rows]))' "$1"
}
cats "$T/out" >"$T/cats_nb"
check "json plain" 0 "$BIN" report --format json "$GPT2"
cats "$T/out" >"$T/cats_plain"
if cmp -s "$T/cats_nb" "$T/cats_plain" && [[ -s $T/cats_nb ]]; then echo "ok   categories unchanged"; else
  echo "FAIL categories changed"; head -c 600 "$T/cats_nb" "$T/cats_plain"; fails=$((fails+1)); fi

# --- no other user frame: a library's model frame inside the cell's call
# leads (transformers' forward), the cell is the context; with PyTorch's own
# frames alone inside (the optimizer), the cell stays the label -------------
check "report cell only" 0 "$BIN" report --width 1000 "$T/only.pickle.gz"
expect "library model frame leads" "$T/out" "  activation  *forward (transformers/activations.py:66)  \[in $CELL\]"
expect "cell stays the label (optimizer)" "$T/out" "  optimizer_state  *<module> (ipykernel_114/3105878423.py:21)  \[in _init_group (optim/adam.py:178)\]"

# --- a diff of two notebook runs: rows labelled by the model frame, sites
# matched exactly as the same runs' without the cell -------------------------
rewrite "$LEAK" "$T/nb2.pickle.gz" inside || { echo "FAIL fixture"; exit 1; }
check "diff notebook" 0 "$BIN" diff --width 1000 "$T/nb.pickle.gz" "$T/nb2.pickle.gz"
expect "diff: model frame leads (A)" "$T/out" "activation  *\[GONE\] gpt2_pair (record/record_answers.py:246)  \[in $CELL, in forward (transformers/activations.py:66)\]"
expect "diff: model frame leads (B)" "$T/out" "leaked  *\[NEW\] run_leak_logits (record/record_answers.py:110)  \[in $CELL, in forward (modules/linear.py:134)\]"
expect_not "diff: the cell leads no row" "$T/out" "<module> (ipykernel_114/3105878423.py:21)"
check "diff notebook --depth 3" 0 "$BIN" diff --width 1000 --depth 3 "$T/nb.pickle.gz" "$T/nb2.pickle.gz"
expect "diff --depth 3: model frame leads" "$T/out" "gpt2_pair (record/record_answers.py:246) <- .*\[in $CELL, in "
matching() {
  python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
print(json.dumps(sorted((s["status"], s["matched_by"], s["category"], s["a_bytes"], s["b_bytes"]) for s in d["sites"])))' "$1"
}
check "diff notebook json" 0 "$BIN" diff --format json "$T/nb.pickle.gz" "$T/nb2.pickle.gz"
matching "$T/out" >"$T/match_nb"
check "diff plain json" 0 "$BIN" diff --format json "$GPT2" "$LEAK"
matching "$T/out" >"$T/match_plain"
if cmp -s "$T/match_nb" "$T/match_plain" && grep -q '"changed"' "$T/match_nb"; then
  echo "ok   sites matched as without the cell"
else
  echo "FAIL sites matched differently"; head -c 600 "$T/match_nb" "$T/match_plain"; fails=$((fails+1))
fi

echo "$fails failure(s)"
exit $((fails > 0))
