#!/usr/bin/env python3
"""Records a torch.profiler Chrome trace *without* profile_memory (the way
many users profile: kernels and ops only, no `[memory]` events), for
snapdiff's "this trace holds no memory events" answer.

  noprofmem.trace.json.gz   transformers' GPT-2 (2 x 256), one AdamW step
                            profiled with activities CPU+CUDA, record_shapes
                            off, profile_memory off
  noprofmem.truth.json      PyTorch's own counts from the same profiler
                            object: CUDA kernel events and CPU ops

Usage, on a CUDA machine:  python3 record_noprofmem.py OUT_DIR
"""
import gzip
import json
import os
import shutil
import sys

import torch
from torch.profiler import ProfilerActivity, profile
from transformers import GPT2Config, GPT2LMHeadModel

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
torch.manual_seed(0)
model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=256, n_head=4, vocab_size=8192, n_positions=256)).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
ids = torch.randint(0, 8192, (4, 128), device="cuda")
model(input_ids=ids, labels=ids).loss.backward()  # warm-up, unprofiled
opt.step()
opt.zero_grad()
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
    model(input_ids=ids, labels=ids).loss.backward()
    opt.step()
    opt.zero_grad()
    torch.cuda.synchronize()
raw = os.path.join(out, "noprofmem.trace.json")
prof.export_chrome_trace(raw)
with open(raw, "rb") as f, gzip.open(raw + ".gz", "wb") as g:
    shutil.copyfileobj(f, g)
os.remove(raw)
ev = prof.events()
kernels = sum(1 for e in ev if str(e.device_type).endswith("CUDA"))
cpu_ops = sum(1 for e in ev if str(e.device_type).endswith("CPU"))
truth = {"config": {"name": "noprofmem", "model": "transformers GPT2LMHeadModel 2x256", "batch": 4, "seq": 128,
                    "profile_memory": False},
         "torch": torch.__version__, "gpu": torch.cuda.get_device_name(),
         "profiler_cuda_events": kernels, "profiler_cpu_events": cpu_ops,
         "memory_allocated_end": torch.cuda.memory_allocated()}
with open(os.path.join(out, "noprofmem.truth.json"), "w") as f:
    json.dump(truth, f, indent=1, sort_keys=True)
print("kernels", kernels, "cpu ops", cpu_ops)
