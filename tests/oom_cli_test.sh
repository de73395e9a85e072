#!/usr/bin/env bash
# `snapdiff report` on runs that died of OOM (docs/cli.md, "OUT OF MEMORY"):
# the section first in the text, the `oom` object in JSON (valid against
# schemas/report.schema.json where python3-jsonschema is installed) with
# PyTorch's own numbers, the HTML section first in the page.
# Usage: oom_cli_test.sh path/to/snapdiff SOURCE_DIR
set -u
BIN=$1
SRC=$2
DATA=$SRC/tests/data/real
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
source "$SRC/tests/cli_lib.sh"
FRAG=$DATA/ans_oom_frag.pickle.gz
CAP=$DATA/ans_oom_cap_gpt2.pickle.gz
need "$FRAG" "$CAP" "$DATA/ans_oom_frag.truth.json" "$DATA/ans_oom_cap_gpt2.truth.json"

check "report text, fragmentation" 0 "$BIN" report "$FRAG"
# The title, a blank line, then the section.
[[ $(sed -n 3p "$T/out") == "OUT OF MEMORY  cuda:0  ("* ]] || fail "OUT OF MEMORY is not the first section: $(sed -n 3p "$T/out")"
expect "fragmentation named" "$T/out" "^  cause         fragmentation$"
expect "expandable segments" "$T/out" "With expandable_segments:True it would likely have fit"
expect "live by site" "$T/out" "live at the OOM by site"

for f in "$FRAG" "$CAP"; do
  stem=$(basename "$f" .pickle.gz)
  check "report json, $stem" 0 "$BIN" report --format json "$f"
  python3 - "$T/out" "$DATA/$stem.truth.json" "$SRC/schemas/report.schema.json" <<'PY' || fails=$((fails+1))
import json, sys
r = json.load(open(sys.argv[1])); t = json.load(open(sys.argv[2]))["oom"]
o = r["oom"]
assert list(r)[:4] == ["schema", "tool", "input", "oom"], list(r)[:4]
want = "fragmentation" if "frag" in sys.argv[2] else "process_cap"
assert o["cause"] == want, o["cause"]
assert o["allocator"]["reserved_bytes"] == t["memory_reserved"], (o["allocator"], t["memory_reserved"])
assert o["device_free_bytes"] == t["mem_get_info"][0]
assert o["cap"]["at_least_bytes"] <= t["cap_bytes"] < o["cap"]["below_bytes"], (o["cap"], t["cap_bytes"])
assert o["errors"] == t["memory_stats"]["num_ooms"]
assert sum(o["live"]["categories"].values()) == o["live"]["requested_bytes"]
try:
    import jsonschema
except ImportError:
    print("skip schema validation (no jsonschema module)"); sys.exit(0)
jsonschema.validate(r, json.load(open(sys.argv[3])))
print("ok   oom json:", o["cause"])
PY
done

check "report html" 0 "$BIN" report --format html -o "$T/oom.html" "$CAP"
python3 - "$T/oom.html" <<'PY' || fails=$((fails+1))
import sys
h = open(sys.argv[1]).read()
assert 0 <= h.index('<section id="oom">') < h.index('<section id="d0-peak">')
assert '<a href="#oom">Out of memory</a>' in h
print("ok   html: the OOM section first")
PY

# A run without an OOM has no section and no `oom`.
check "report, no OOM" 0 "$BIN" report --format json "$DATA/small_bf16.pickle"
python3 -c 'import json,sys; assert "oom" not in json.load(open(sys.argv[1]))' "$T/out" || fail "oom in a run without one"
check "report text, no OOM" 0 "$BIN" report "$DATA/small_bf16.pickle"
expect_not "no OOM section" "$T/out" "OUT OF MEMORY"

[[ $fails -eq 0 ]] || { echo "$fails failed"; exit 1; }
