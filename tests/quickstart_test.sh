#!/usr/bin/env bash
# The README's first command as a user meets it: `bash scripts/quickstart.sh`
# (here in the test's own, already configured build folder, so nothing is
# installed or compiled anew) exits 0, prints about 30 lines — one per stage,
# then the headline of a PyTorch snapshot's report and of the FP8 diff — none
# wider than 80 columns, and leaves the whole reports, text and HTML, in
# BUILD_DIR/quickstart/.
# Usage: quickstart_test.sh BUILD_DIR SOURCE_DIR
set -u
B=$1
SRC=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
source "$SRC/tests/cli_lib.sh"
# As a user runs it: the build folder named from the repository's root
# ("build"), so the lines that name it are as long as the user's.
rel=$(python3 -c 'import os, sys; print(os.path.relpath(sys.argv[1], sys.argv[2]))' "$B" "$SRC")
check "bash scripts/quickstart.sh exits 0" 0 env BUILD_DIR="$rel" bash "$SRC/scripts/quickstart.sh"
cat "$T/out" "$T/err" >"$T/all"
sed 's/^/  | /' "$T/all"
lines=$(wc -l <"$T/all")
if [[ $lines -gt 32 ]]; then fail "prints about 30 lines: printed $lines"; else echo "ok   prints $lines lines"; fi
for want in "build: compiling the snapdiff executable" "== report of a PyTorch snapshot: sample_snapshots/gpt2_run.pickle.gz" \
            "The peak, 943.7 MiB" "== why FP8 primary weights peak lower" "parameter_copy unchanged at the peak" \
            "== the whole reports, text and HTML"; do
  expect "prints '$want'" "$T/all" "$want"
done
wide=$(python3 -c 'import sys; print(max(len(l.rstrip("\n")) for l in open(sys.argv[1], encoding="utf-8")))' "$T/all")
if [[ $wide -gt 80 ]]; then fail "no line wider than 80 columns: the widest is $wide"; else echo "ok   widest line $wide columns"; fi
for f in gpt2_run.txt gpt2_run.html fp8.diff.txt fp8.diff.html; do
  [[ -s $B/quickstart/$f ]] || fail "writes $B/quickstart/$f"
done
# The README states these two commands as its quick start, and stays short.
python3 - "$SRC/README.md" <<'PY' || fail "README: the quick start's two commands, under 250 lines"
import re, sys
text = open(sys.argv[1], encoding="utf-8").read()
assert text.count("\n") < 250, f"README has {text.count(chr(10))} lines"
quick = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
block = re.search(r"```sh\n(.*?)```", quick, re.S).group(1)
cmds = [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]
assert cmds == ["bash scripts/quickstart.sh", "bash scripts/test.sh"], cmds
PY
echo "$fails failures"
[[ $fails -eq 0 ]]
