#!/usr/bin/env bash
# Quick start: install the packages the executable needs, build only the
# snapdiff executable (tests, fuzzers and the CUDA capture are built by
# scripts/test.sh), and run the main job on the bundled samples:
#   1. a report of a real PyTorch snapshot (GPT-2 training, as
#      torch.cuda.memory._dump_snapshot wrote it);
#   2. the diff of the two full-size FP8 runs (bf16 primary weights against
#      FP8 primary weights): why one peaks where it does.
# Each full report is written under build/quickstart/ (text and HTML); the
# terminal gets the headline sections, so the whole run is about 30 lines.
# BUILD_DIR=DIR builds in DIR instead of build/.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUILD_DIR:-build}
bash scripts/build.sh --lean "$B"
out=$B/quickstart
mkdir -p "$out"
sd=$B/snapdiff
# The bullets of the section of a text report that starts with the line $2
# (all of them, or the first $3), without the section's title.
bullets() {  # FILE TITLE [N]
  awk -v h="$2" -v n="${3:-0}" 'index($0, h) == 1 { on = 1; next } on && /^$/ { exit }
    on && /^  \* / { k++ } on && (n == 0 || k <= n)' "$1"
}

echo "== report of a PyTorch snapshot: sample_snapshots/gpt2_run.pickle.gz"
"$sd" report sample_snapshots/gpt2_run.pickle.gz -o "$out/gpt2_run.txt"
"$sd" report sample_snapshots/gpt2_run.pickle.gz --format html -o "$out/gpt2_run.html"
bullets "$out/gpt2_run.txt" EXPLANATION 1
echo "== why FP8 primary weights peak lower: snapdiff diff fp8_no_pw.snap fp8_pw.snap"
"$sd" diff sample_snapshots/fp8_no_pw.snap sample_snapshots/fp8_pw.snap -o "$out/fp8.diff.txt"
"$sd" diff sample_snapshots/fp8_no_pw.snap sample_snapshots/fp8_pw.snap --format html -o "$out/fp8.diff.html"
bullets "$out/fp8.diff.txt" FINDINGS
echo "== the whole reports, text and HTML: $out/"
