"""Records torch.profiler traces for snapdiff's trace reader, on a GPU.

1. `resnet50`: a large real trace — torchvision ResNet-50 training (batch 64,
   AdamW foreach) under torch.profiler with profile_memory, record_shapes and
   with_stack, 1 unprofiled warm-up step, then ACTIVE profiled steps: export_chrome_trace, both
   export_memory_timeline outputs, and PyTorch's counters (truth).
2. `joint`: a small run recorded twice at once — a memory snapshot
   (_record_memory_history / _dump_snapshot) and a profiler trace of the same
   iterations — for `snapdiff report SNAPSHOT --trace TRACE`.

Usage: python3 record_profile.py OUTDIR [ACTIVE]
"""
import gzip
import json
import os
import sys
import time

import torch
import torch.nn.functional as F
import torchvision
from torch.profiler import ProfilerActivity, profile

out = sys.argv[1]
active = int(sys.argv[2]) if len(sys.argv) > 2 else 6
os.makedirs(out, exist_ok=True)
dev = torch.device("cuda:0")
acts = [ProfilerActivity.CPU, ProfilerActivity.CUDA]


def truth(name, extra):
    s = torch.cuda.memory_stats()
    t = {
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(0),
        "max_memory_allocated": torch.cuda.max_memory_allocated(),
        "max_memory_reserved": torch.cuda.max_memory_reserved(),
        "memory_stats": {k: v for k, v in s.items() if k.endswith(".all.peak") or k.endswith(".all.current")},
    }
    t.update(extra)
    with open(os.path.join(out, name + ".truth.json"), "w") as f:
        json.dump(t, f, indent=1)


def train_steps(model, opt, x, y, n):
    for _ in range(n):
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()


# 1. The large trace.
torch.manual_seed(0)
model = torchvision.models.resnet50().to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
x = torch.randn(64, 3, 224, 224, device=dev)
y = torch.randint(0, 1000, (64,), device=dev)
torch.cuda.reset_peak_memory_stats()
t0 = time.time()
train_steps(model, opt, x, y, 1)  # warm-up: optimizer state, cuDNN/cuBLAS setup
with profile(activities=acts, profile_memory=True, record_shapes=True, with_stack=True) as prof:
    train_steps(model, opt, x, y, active)
torch.cuda.synchronize()
run_s = time.time() - t0
t0 = time.time()
prof.export_chrome_trace(os.path.join(out, "resnet50.trace.json"))
export_s = time.time() - t0
prof.export_memory_timeline(os.path.join(out, "resnet50.memtl.json"), device="cuda:0")
prof.export_memory_timeline(os.path.join(out, "resnet50.memtl.raw.json.gz"), device="cuda:0")
truth("resnet50", {"config": {"model": "torchvision resnet50", "batch": 64, "optimizer": "AdamW foreach",
                              "warmup_unprofiled": 1, "profiled_steps": active, "profile_memory": True, "record_shapes": True,
                              "with_stack": True},
                   "run_seconds": run_s, "export_chrome_trace_seconds": export_s,
                   "trace_bytes": os.path.getsize(os.path.join(out, "resnet50.trace.json"))})
del model, opt, x, y, prof
torch.cuda.empty_cache()

# 2. Snapshot and trace of the same small run.
torch.manual_seed(0)
torch.cuda.reset_peak_memory_stats()
torch.cuda.memory._record_memory_history(max_entries=1000000)
model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)).to(dev)
opt = torch.optim.Adam(model.parameters(), lr=1e-4)
x = torch.randn(2048, 1024, device=dev)
yy = torch.randn(2048, 1024, device=dev)
with profile(activities=acts, profile_memory=True, record_shapes=True, with_stack=True) as prof:
    for _ in range(3):
        loss = F.mse_loss(model(x), yy)
        loss.backward()
        opt.step()
        opt.zero_grad()
    torch.cuda.synchronize()
torch.cuda.memory._dump_snapshot(os.path.join(out, "joint.snapshot.pickle"))
torch.cuda.memory._record_memory_history(enabled=None)
prof.export_chrome_trace(os.path.join(out, "joint.trace.json"))
truth("joint", {"config": {"model": "Linear(1024,4096)-GELU-Linear(4096,1024)", "batch": 2048, "iters": 3,
                           "optimizer": "Adam foreach", "zero_grad": "set_to_none"}})
print("done")
