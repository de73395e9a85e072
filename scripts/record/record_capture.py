#!/usr/bin/env python3
"""Records real runs under libsnapcapture_inject.so (the CUDA injection
library), each with PyTorch's memory snapshot of the same process, and
checks the library on programs that try to break it.

Usage, on a CUDA machine:
    python3 record_capture.py LIB OUT_DIR [NAME ...]

LIB is libsnapcapture_inject.so. Each recording scenario runs in a process of
its own with CUDA_INJECTION64_PATH=LIB, LD_PRELOAD=LIB (as `snapcapture run`
sets them) and SNAPCAPTURE_LOG_DIR=OUT/NAME.logs,
and writes:
  OUT/NAME.pickle.gz      the snapshot (_dump_snapshot's bytes, gzip'd)
  OUT/NAME.logs/*.sclog   the injection library's raw logs (one per process);
                          `snapcapture convert OUT/NAME.logs -o NAME.kernels.snap`
  OUT/NAME.truth.json     PyTorch's figures from the same process, at the end:
                          memory_stats(), memory_reserved(), memory_allocated(),
                          torch.cuda.mem_get_info() (free, total), the time
Then the same scenario runs once more without the library under
torch.profiler (the library records nothing while a profiler owns CUPTI),
and OUT/NAME.profiler_kernels.json lists the kernel names the profiler saw
with their counts, for the comparison of names.

Scenarios:
  fp8_mlp       the reference question in PyTorch: FP8 linears with bf16
                primary weights (the FP8 weight and its transpose kept for
                the backward, torch._scaled_mm), foreach AdamW, 3 steps
  gpt2_train    transformers' GPT-2 (4 layers x 512), AdamW, 3 steps
  fsdp_gpt2     GPT-2 under PyTorch's FSDP2 (fully_shard, bf16 mixed
                precision) at world size 1: NCCL's own buffers appear

Checks (each under the library, with a timeout; the line printed says how
it went): overhead (GPT-2 12x768 steps with and without the library),
fork, nogpu, cuda_error, os_exit, threads, profiler.
"""
import gzip
import json
import os
import pickle
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

RECORDINGS = ["fp8_mlp", "gpt2_train", "fsdp_gpt2"]
CHECKS = ["overhead", "fork", "nogpu", "cuda_error", "os_exit", "threads", "profiler"]


def now_us():
    return time.time_ns() // 1000


# ---- workloads -------------------------------------------------------------

def fp8_setup():
    import torch
    import record_categories
    model = record_categories.fp8_mlp_model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)

    def step():
        opt.zero_grad(set_to_none=True)
        x = torch.randn(4, 512, 1024, device="cuda", dtype=torch.bfloat16)
        model(x).float().pow(2).mean().backward()
        opt.step()
    return step, {"model": "4 blocks of FP8 linears 1024-4096-1024, bf16 primary weights", "tokens": 2048,
                  "optimizer": "AdamW foreach"}


def gpt2(**kw):
    import record_allocator_modes
    return record_allocator_modes.gpt2(**kw)


def lm_setup(model, batch, seq, vocab=8192):
    import torch
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step():
        opt.zero_grad(set_to_none=True)
        ids = torch.randint(0, vocab, (batch, seq), device="cuda")
        model(input_ids=ids, labels=ids).loss.backward()
        opt.step()
    return step


def gpt2_setup():
    return lm_setup(gpt2().cuda(), 8, 256), {"model": "transformers GPT2LMHeadModel 4x512", "batch": 8, "seq": 256,
                                              "optimizer": "AdamW"}


def dist_init():
    import record_allocator_modes
    record_allocator_modes.dist_init()


def fsdp_setup():
    import torch
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    dist_init()
    model = gpt2().cuda()
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in model.transformer.h:
        fully_shard(block, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    return lm_setup(model, 8, 256), {"model": "transformers GPT2LMHeadModel 4x512", "fsdp": "fully_shard bf16",
                                     "world_size": 1, "batch": 8, "seq": 256, "optimizer": "AdamW"}


SETUPS = {"fp8_mlp": fp8_setup, "gpt2_train": gpt2_setup, "fsdp_gpt2": fsdp_setup}


# ---- one recording, in this process ----------------------------------------

def record_one(name, out):
    import torch
    torch.manual_seed(0)
    torch.cuda.memory._record_memory_history(max_entries=1_000_000, stacks="python")
    step, cfg = SETUPS[name]()
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    snap = torch.cuda.memory._snapshot()
    ms = torch.cuda.memory_stats()
    torch.cuda.memory._record_memory_history(enabled=None)
    with gzip.open(os.path.join(out, name + ".pickle.gz"), "wb") as f:
        pickle.dump(snap, f)
    free, total = torch.cuda.mem_get_info()
    truth = {
        "config": dict(cfg, name=name, steps=3),
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(),
        "pid": os.getpid(),
        "memory_stats": dict(ms),
        "memory_allocated_end": torch.cuda.memory_allocated(),
        "memory_reserved_end": torch.cuda.memory_reserved(),
        "at_snapshot": {"free": free, "total": total, "reserved": torch.cuda.memory_reserved(), "time_us": now_us(),
                        "outside_allocator": (total - free) - torch.cuda.memory_reserved()},
        "outside_method": "torch.cuda.mem_get_info() used bytes (total - free) minus memory_reserved(), in the "
                          "recorded process: at_snapshot right after the snapshot, at_exit as the process's last "
                          "statement (after destroy_process_group, which gives NCCL's buffers back)",
    }
    try:
        import torch.distributed as dist
        if dist.is_initialized():
            dist.destroy_process_group()
    except Exception:
        pass
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    truth["at_exit"] = {"free": free, "total": total, "reserved": torch.cuda.memory_reserved(), "time_us": now_us(),
                        "outside_allocator": (total - free) - torch.cuda.memory_reserved()}
    with open(os.path.join(out, name + ".truth.json"), "w") as f:
        json.dump(truth, f, indent=1, sort_keys=True)


def profile_one(name, out):
    import torch
    from torch.profiler import ProfilerActivity, profile
    torch.manual_seed(0)
    step, _ = SETUPS[name]()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            step()
        torch.cuda.synchronize()
    path = os.path.join(out, name + ".profile.json")
    prof.export_chrome_trace(path)
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    os.remove(path)
    counts = {}
    for e in events:
        if e.get("cat") == "kernel":  # not memcpy, memset or GPU-side annotations
            counts[e["name"]] = counts.get(e["name"], 0) + 1
    with open(os.path.join(out, name + ".profiler_kernels.json"), "w") as f:
        json.dump({"steps": 3, "note": "torch.profiler's kernel events (cat \"kernel\") of 3 steps of the same "
                   "workload in another process, name -> count", "kernels": counts}, f, indent=1, sort_keys=True)
    try:
        import torch.distributed as dist
        if dist.is_initialized():
            dist.destroy_process_group()
    except Exception:
        pass


# ---- checks ----------------------------------------------------------------

def overhead_one(out, tag):
    import torch
    torch.manual_seed(0)
    step = lm_setup(gpt2(layers=12, embd=768, heads=12, vocab=50257).cuda(), 8, 512, vocab=50257)
    for _ in range(5):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(30):
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    with open(os.path.join(out, "overhead_" + tag + ".json"), "w") as f:
        json.dump({"model": "transformers GPT-2 12x768, vocab 50257, batch 8 x 512 tokens, AdamW",
                   "step_seconds": times}, f, indent=1)


def check_one(name, out):
    import torch
    if name == "fork":
        x = torch.ones(1 << 20, device="cuda")
        pid = os.fork()
        if pid == 0:
            s = sum(range(100000))  # CPU work only: CUDA is not usable after fork
            os._exit(0 if s > 0 else 1)
        _, status = os.waitpid(pid, 0)
        from torch.utils.data import DataLoader, TensorDataset
        dl = DataLoader(TensorDataset(torch.arange(64.0)), batch_size=8, num_workers=2,
                        multiprocessing_context="fork")
        total = sum(float(b[0].sum()) for b in dl)
        y = (x * 2).sum().item()
        print("child status", status, "loader sum", total, "gpu", y)
        sys.exit(0 if status == 0 else 1)
    if name == "cuda_error":
        try:
            torch.empty(1 << 50, dtype=torch.uint8, device="cuda")
        except torch.OutOfMemoryError as e:
            print("caught OOM:", str(e)[:60])
        t = torch.zeros(4, device="cuda")
        idx = torch.tensor([7], device="cuda")
        t[idx] = 1.0  # device-side assert: the context is lost
        torch.cuda.synchronize()
        return
    if name == "os_exit":
        x = torch.randn(1024, 1024, device="cuda")
        (x @ x).sum().item()
        sys.stdout.flush()
        os._exit(3)
    if name == "threads":
        import threading

        def work(i):
            s = torch.cuda.Stream()
            with torch.cuda.stream(s):
                a = torch.randn(512, 512, device="cuda")
                for _ in range(200):
                    a = torch.tanh(a @ a * 1e-3)
            s.synchronize()
        ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        print("threads done")
        return
    if name == "profiler":
        from torch.profiler import ProfilerActivity, profile
        a = torch.randn(256, 256, device="cuda")
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(10):
                a = torch.tanh(a @ a)
            torch.cuda.synchronize()
        n = sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
        print("profiler kernel events:", n)
        return


# ---- the driver ------------------------------------------------------------

def run(cmd, env, timeout=300):
    t0 = time.time()
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        return p.returncode, time.time() - t0, p.stdout[-2000:], p.stderr[-4000:]
    except subprocess.TimeoutExpired as e:
        return "timeout", time.time() - t0, str(e.stdout)[-2000:], str(e.stderr)[-4000:]


def logs_in(d):
    if not os.path.isdir(d):
        return []
    return sorted((f, os.path.getsize(os.path.join(d, f))) for f in os.listdir(d))


def main():
    if len(sys.argv) >= 4 and sys.argv[1] in ("--record", "--profile", "--check", "--overhead"):
        mode, out, name = sys.argv[1], sys.argv[2], sys.argv[3]
        if mode == "--record":
            record_one(name, out)
        elif mode == "--profile":
            profile_one(name, out)
        elif mode == "--overhead":
            overhead_one(out, name)
        else:
            check_one(name, out)
        return 0
    lib, out = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    names = sys.argv[3:] or RECORDINGS + CHECKS
    os.makedirs(out, exist_ok=True)
    me = os.path.abspath(__file__)
    base = dict(os.environ)
    for k in ("CUDA_INJECTION64_PATH", "SNAPCAPTURE_LOG_DIR", "LD_PRELOAD"):
        base.pop(k, None)

    def injected(name):
        d = os.path.join(out, name + ".logs")
        os.makedirs(d, exist_ok=True)
        # What `snapcapture run` sets: the preload lets the library step aside
        # when a profiler subscribes to CUPTI (the `profiler` check).
        return dict(base, CUDA_INJECTION64_PATH=lib, LD_PRELOAD=lib, SNAPCAPTURE_LOG_DIR=d), d

    rc = 0
    summary = {}
    for name in names:
        if name in RECORDINGS:
            env, d = injected(name)
            r = run([sys.executable, me, "--record", out, name], env)
            p = run([sys.executable, me, "--profile", out, name], base)
            summary[name] = {"record": r[:2], "profile": p[:2], "logs": logs_in(d)}
            print(f"== {name}: record exit {r[0]} in {r[1]:.1f} s, profile exit {p[0]}, logs {logs_in(d)}", flush=True)
            for x in (r, p):
                if x[0] != 0:
                    rc = 1
                    print(x[2], x[3], flush=True)
        elif name == "overhead":
            res = []
            for rep in range(3):
                env, _ = injected("overhead")
                a = run([sys.executable, me, "--overhead", out, f"with_{rep}"], env)
                b = run([sys.executable, me, "--overhead", out, f"without_{rep}"], base)
                res.append((a[:2], b[:2]))
                for x in (a, b):
                    if x[0] != 0:
                        rc = 1
                        print(x[2], x[3], flush=True)
            summary[name] = res
            print(f"== overhead: {res}", flush=True)
        elif name in CHECKS:
            env, d = injected(name)
            cmd = [sys.executable, "-c", "print('no GPU here')"] if name == "nogpu" else \
                [sys.executable, me, "--check", out, name]
            r = run(cmd, env, timeout=120)
            summary[name] = {"exit": r[0], "seconds": r[1], "stdout": r[2], "stderr": r[3], "logs": logs_in(d)}
            print(f"== {name}: exit {r[0]} in {r[1]:.1f} s, logs {logs_in(d)}\n   stdout: {r[2][-300:]!r}\n"
                  f"   stderr: {r[3][-600:]!r}", flush=True)
            if r[0] == "timeout":
                rc = 1
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1, default=str)
    return rc


if __name__ == "__main__":
    sys.exit(main())
