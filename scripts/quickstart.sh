#!/usr/bin/env bash
# Quick start: install what is missing, build, and run the main job on the
# bundled samples: the diff of the two full-size FP8 runs (bf16 primary
# weights vs FP8 primary weights), then a report of a PyTorch snapshot, and
# one joined with its kernel recording (snapcapture run).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
# The question snapdiff exists for: why does FP8 with bf16 primary weights
# peak where it does, against FP8 primary weights? (Full-size H200 runs.)
./build/snapdiff sample_snapshots/fp8_no_pw.snap sample_snapshots/fp8_pw.snap
echo "================================================================================"
# A PyTorch snapshot, exactly as torch.cuda.memory._dump_snapshot wrote it.
./build/snapdiff report sample_snapshots/small_fp8.pickle
echo "================================================================================"
# A real GPT-2 training run's snapshot joined with the kernel recording
# `snapcapture run` made of the same process: the kernel behind every byte at
# the peak, and the device memory held outside the allocator.
./build/snapdiff report sample_snapshots/gpt2_run.pickle.gz --kernels sample_snapshots/gpt2_run.kernels.snap
