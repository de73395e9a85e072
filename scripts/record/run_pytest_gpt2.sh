#!/usr/bin/env bash
# pytest-snapdiff on a real model (issue 21's provenance): GPT-2 training
# steps from Hugging Face transformers, gated on an NVIDIA GPU. Needs
# python3 with torch, transformers and pytest; SNAPDIFF_BIN names the binary.
# Usage: run_pytest_gpt2.sh OUT_DIR
#   1. writes the budget at batch 8 (--snapdiff-update-budgets);
#   2. checks at batch 8: the budget passes, the tight ceilings fail, no_grad
#      passes, the two uneven ranks fail on rank 1;
#   3. checks the budget at batch 12: fails by the increase.
# Every pytest's output goes to OUT_DIR/stepN.log; verdicts, JUnit, the
# github-benchmark JSON and PyTorch's own peaks (truth/) beside them.
set -u
OUT=$(realpath "$1")
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
export PYTHONPATH="$ROOT/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
mkdir -p "$OUT"
W=$(mktemp -d)
cp "$HERE/pytest_gpt2/"*.py "$W/"
cd "$W" || exit 1
py() {  # step, batch, pytest args...
  local step=$1 batch=$2; shift 2
  echo "== $step: GPT2_BATCH=$batch pytest $*" | tee "$OUT/$step.log"
  GPT2_BATCH=$batch TRUTH_DIR="$OUT/truth_$step" python3 -m pytest -p pytest_snapdiff.plugin -rA -v "$@" 2>&1 | tee -a "$OUT/$step.log"
  echo "== exit ${PIPESTATUS[0]}" | tee -a "$OUT/$step.log"
}
py step1 8 --snapdiff --snapdiff-update-budgets -k "test_train_step and not tight"
py step2 8 --snapdiff --snapdiff-benchmark="$OUT/step2.bench.json" --junitxml="$OUT/step2.junit.xml"
py step3 12 --snapdiff --snapdiff-keep=all --snapdiff-dir="$W/.snapdiff3" -k "test_train_step and not tight"
mkdir -p "$OUT/budgets" "$OUT/verdicts"
cp budgets/*.json "$OUT/budgets/" 2>/dev/null
find "$W" -name "verdict.json" | while read -r v; do
  d=$(basename "$(dirname "$v")"); cp "$v" "$OUT/verdicts/$(basename "$(dirname "$(dirname "$v")")")-$d.json"; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$OUT/gpu.txt" 2>&1
python3 -c "import torch, transformers, pytest; print('torch', torch.__version__, 'transformers', transformers.__version__, 'pytest', pytest.__version__)" >>"$OUT/gpu.txt"
