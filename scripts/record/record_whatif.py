#!/usr/bin/env python3
"""Records the same deterministic training runs under several
PYTORCH_CUDA_ALLOC_CONF settings, for `snapdiff whatif` (issue 23): each
run's request stream, replayed under another run's settings, must give that
run's counters. Models written by others:

  gpt2      transformers' GPT-2 (12 layers, 768 wide, vocab 50257), autocast
            bf16, AdamW; batch 8, 4, 12, 6 at sequence 512 (one per iteration)
  resnet50  torchvision's ResNet-50, autocast bf16, SGD momentum; batch 64, 32,
            96, 48 at 224x224

each under the settings in SETTINGS (names: MODEL__SETTING), and out-of-memory
cases under a cap (torch.cuda.set_per_process_memory_fraction):

  oomfrag__default, oomfrag__expandable   a 1 GiB cap; 20 MiB segments each keep
            one live 5 MiB block, then 96 MiB is asked
  gpt2cap__default, gpt2cap__expandable   gpt2 under a cap between the two
            settings' uncapped reserved peaks

Usage, on a CUDA machine:  python3 record_whatif.py OUT_DIR [NAME ...]
Each run is a process of its own (the allocator reads its settings once) and
writes OUT_DIR/NAME.pickle.gz and OUT_DIR/NAME.truth.json: memory_stats() (peaks
since the recording started), the settings, and for an OOM the exception's
text, the cap and the counters in the except block.
"""
import gzip
import json
import os
import pickle
import sys

import scenario_runner

SETTINGS = {
    "default": "",
    "expandable": "expandable_segments:True",
    "split128": "max_split_size_mb:128",
    "gc06split256": "garbage_collection_threshold:0.6,max_split_size_mb:256",
    "roundup4": "roundup_power2_divisions:4",
    "roundupmap": "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]",
}
MODELS = ["gpt2", "resnet50"]
SCENARIOS = [f"{m}__{s}" for m in MODELS for s in SETTINGS] + [
    "oomfrag__default", "oomfrag__expandable", "gpt2cap__default", "gpt2cap__expandable"]
ENV = {n: {"PYTORCH_CUDA_ALLOC_CONF": SETTINGS[n.split("__")[1]]} for n in SCENARIOS}
GPT2_CAP = 11_700_000_000  # bytes: between expandable's (11.33 GB) and the default's (12.04 GB) reserved peaks (H100)


def start():
    import torch
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    torch.cuda.memory._record_memory_history(max_entries=1_000_000, stacks="python")


def finish(name, out, cfg, extra=None):
    import torch
    torch.cuda.synchronize()
    snap = torch.cuda.memory._snapshot()
    ms = dict(torch.cuda.memory_stats())
    torch.cuda.memory._record_memory_history(enabled=None)
    with gzip.open(os.path.join(out, name + ".pickle.gz"), "wb") as f:
        pickle.dump(snap, f)
    truth = {
        "config": dict(cfg, name=name),
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(),
        "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
        "max_entries": 1_000_000,
        "trace_entries": [len(t) for t in snap["device_traces"]],
        "peaks_since": "the start of the recording (reset_peak_memory_stats)",
        "memory_allocated_end": torch.cuda.memory_allocated(),
        "memory_reserved_end": torch.cuda.memory_reserved(),
        "mem_get_info": list(torch.cuda.mem_get_info()),
        "memory_stats": ms,
        "oom": None,
    }
    if extra:
        truth.update(extra)
    with open(os.path.join(out, name + ".truth.json"), "w") as f:
        json.dump(truth, f, indent=1, sort_keys=True)


def oom_facts(e, cap):
    import torch
    return {"message": str(e).splitlines()[0] if str(e) else "", "text": str(e), "cap_bytes": cap,
            "memory_allocated": torch.cuda.memory_allocated(), "memory_reserved": torch.cuda.memory_reserved(),
            "memory_stats": dict(torch.cuda.memory_stats())}


def set_cap(cap):
    import torch
    free, total = torch.cuda.mem_get_info()
    torch.cuda.set_per_process_memory_fraction(cap / total)


def gpt2_run(name, out, cap=None):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    if cap:
        set_cap(cap)
    start()
    model = GPT2LMHeadModel(GPT2Config(n_layer=12, n_positions=1024)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    oom = None
    for i, batch in enumerate((8, 4, 12, 6)):
        try:
            ids = torch.randint(0, 50257, (batch, 512), device="cuda")
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            del loss, ids
        except torch.OutOfMemoryError as e:
            oom = oom_facts(e, cap)
            oom["iteration"], oom["batch"] = i, batch
            break
    finish(name, out, {"model": "transformers GPT2LMHeadModel 12x768", "seq": 512, "batches": [8, 4, 12, 6],
                       "autocast": "bf16", "optimizer": "AdamW", "cap_bytes": cap}, {"oom": oom})


def resnet50_run(name, out):
    import torch
    import torchvision
    start()
    model = torchvision.models.resnet50().cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for batch in (64, 32, 96, 48):
        x = torch.randn(batch, 3, 224, 224, device="cuda")
        y = torch.randint(0, 1000, (batch,), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del loss, x, y
    finish(name, out, {"model": "torchvision resnet50", "image": 224, "batches": [64, 32, 96, 48],
                       "autocast": "bf16", "optimizer": "SGD momentum"})


def oomfrag_run(name, out):
    import torch
    cap = 1 << 30
    set_cap(cap)
    start()
    kept, oom = [], None  # noqa: F841 (kept alive on purpose)
    try:
        # 48 segments of 20 MiB (960 MiB), each cut into four 5 MiB blocks;
        # then three of every four are freed: one live block per segment.
        blocks = [torch.empty(5 << 20, dtype=torch.uint8, device="cuda") for _ in range(48 * 4)]
        kept = blocks[1::4]
        del blocks
        big = torch.empty(96 << 20, dtype=torch.uint8, device="cuda")
        del big
    except torch.OutOfMemoryError as e:
        oom = oom_facts(e, cap)
        oom["asked"] = 96 << 20
    finish(name, out, {"model": "plain tensors: 5 MiB blocks, one kept per 20 MiB segment, then 96 MiB",
                       "cap_bytes": cap}, {"oom": oom})


RUNNERS = {}
for n in SCENARIOS:
    m = n.split("__")[0]
    RUNNERS[n] = {"gpt2": gpt2_run, "resnet50": resnet50_run, "oomfrag": oomfrag_run,
                  "gpt2cap": lambda name, out: gpt2_run(name, out, GPT2_CAP)}[m]


if __name__ == "__main__":
    sys.exit(scenario_runner.main(__file__, RUNNERS, SCENARIOS, ENV))
