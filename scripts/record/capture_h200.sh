#!/usr/bin/env bash
# Runs snapcapture on a GPU machine: the self-test, the three modes at the
# workload's full size, the recording-overhead comparison, small runs for the
# tests, out-of-memory runs, and PyTorch's own tools on the pickles.
# scripts/record/README.md says where each output goes in the repository.
# Usage: capture_h200.sh SNAPCAPTURE_BINARY OUTDIR
set -u
B=$1
O=$2
mkdir -p "$O"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$O/gpu.txt" 2>&1
nvcc --version | tail -1 >> "$O/gpu.txt" 2>&1
run() {  # name, then snapcapture's arguments
  local name=$1
  shift
  echo "== $name: snapcapture $*" | tee -a "$O/log.txt"
  local t0=$(date +%s%N)
  timeout 300 "$B" "$@" --summary "$O/$name.summary.json" >> "$O/log.txt" 2>&1
  echo "   exit $? wall $(( ($(date +%s%N) - t0) / 1000000 )) ms" | tee -a "$O/log.txt"
}
timeout 300 "$B" --selftest > "$O/selftest.txt" 2>&1; echo "selftest exit $?" >> "$O/selftest.txt"
for m in bf16 fp8 fp8_pw; do
  name=$m; [ $m = fp8 ] && name=fp8_no_pw
  run "$name" --mode $m --iters 3 -o "$O/$name.snap" --pickle "$O/$name.pickle"
done
run bf16_loop --mode bf16 --optimizer loop --iters 3 -o "$O/bf16_loop.snap"
for m in bf16 fp8 fp8_pw; do
  run "small_$m" --mode $m --layers 2 --heads 8 --seq 1024 --iters 3 -o "$O/small_$m.snap" --pickle "$O/small_$m.pickle"
done
run oom_fp8 --mode fp8 --memory-limit 40G --iters 2 -o "$O/oom_fp8.snap"
run small_oom_fp8 --mode fp8 --layers 2 --heads 8 --seq 1024 --memory-limit 150M --iters 2 -o "$O/small_oom_fp8.snap"
for r in 1 2; do
  run "overhead_rec_$r" --mode fp8 --iters 8
  run "overhead_norec_$r" --mode fp8 --iters 8 --no-record
done
python3 "$(dirname "$0")/check_pickle_torch.py" "$O"/*.pickle > "$O/torch_check.txt" 2>&1
echo "torch check exit $?" >> "$O/torch_check.txt"
