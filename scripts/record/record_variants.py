#!/usr/bin/env python3
"""Records small real PyTorch memory snapshots of training-loop variants that
snapdiff's attribution must handle beyond the reference workload: other
optimizers (SGD with momentum, AdamW fused, Adam per-parameter), AMP autocast,
torch.compile, a torchvision model. Run on a CUDA machine:

    python3 record_variants.py OUT_DIR

Writes OUT_DIR/<name>.pickle (gzip) and OUT_DIR/<name>.truth.json with
PyTorch's own figures: memory_stats peaks and exact byte totals of
parameters, gradients and optimizer state at the end.
"""
import gzip
import json
import os
import pickle
import sys

import torch
import torch.nn as nn


def mlp(h=1024, layers=3):
    mods = []
    for _ in range(layers):
        mods += [nn.Linear(h, 4 * h), nn.GELU(), nn.Linear(4 * h, h)]
    return nn.Sequential(*mods)


def run(name, make_model, make_opt, out, iters=3, amp=False, compile_=False, input_shape=(512, 1024),
        stacks="python", loss_fn=None, set_to_none=False, micro_batches=1):
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    torch.cuda.memory._record_memory_history(max_entries=1_000_000, stacks=stacks)
    model = make_model().cuda()
    opt = make_opt(model.parameters())
    fwd = torch.compile(model) if compile_ else model
    for _ in range(iters):
        for _ in range(micro_batches):
            x = torch.rand(*input_shape, device="cuda")
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
                y = fwd(x)
                loss = loss_fn(y) if loss_fn else y.float().pow(2).mean()
            loss.backward()
        opt.step()
        if set_to_none:
            # Gradients are freed here: measure them while they exist.
            grad_bytes_at_step = sum(p.grad.numel() * p.grad.element_size() for p in model.parameters())
        opt.zero_grad(set_to_none=set_to_none)
    torch.cuda.synchronize()
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    with gzip.open(os.path.join(out, name + ".pickle.gz"), "wb") as f:
        pickle.dump(snap, f)
    ms = torch.cuda.memory_stats()
    nbytes = lambda t: t.numel() * t.element_size()
    params = list(model.parameters())
    state = [v for s in opt.state.values() for v in s.values() if torch.is_tensor(v) and v.is_cuda]
    truth = {
        "config": {"name": name, "amp": amp, "compile": compile_, "optimizer": type(opt).__name__,
                   "zero_grad_set_to_none": set_to_none, "micro_batches": micro_batches,
                   "defaults": {k: str(v) for k, v in opt.defaults.items()}, "iters": iters, "stacks": stacks},
        "torch": torch.__version__,
        "memory_stats": {k: ms[k] for k in ("requested_bytes.all.peak", "allocated_bytes.all.peak",
                                             "reserved_bytes.all.peak")},
        "param_bytes": sum(nbytes(p) for p in params),
        "grad_bytes": grad_bytes_at_step if set_to_none else sum(nbytes(p.grad) for p in params if p.grad is not None),
        "optimizer_state_bytes": sum(nbytes(v) for v in state),
    }
    with open(os.path.join(out, name + ".truth.json"), "w") as f:
        json.dump(truth, f, indent=1)
    del model, opt, fwd
    print(name, truth["param_bytes"], truth["grad_bytes"], truth["optimizer_state_bytes"],
          truth["memory_stats"]["requested_bytes.all.peak"], flush=True)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    only = sys.argv[2:]  # optional: names to record
    if only:
        if "adam_set_to_none" in only:
            run("adam_set_to_none", mlp, lambda p: torch.optim.Adam(p, lr=1e-3), out, set_to_none=True)
        if "adamw_grad_accum" in only:
            run("adamw_grad_accum", mlp, lambda p: torch.optim.AdamW(p, lr=1e-3), out, micro_batches=2)
        return
    run("sgd_momentum", mlp, lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9), out)
    run("adamw_fused", mlp, lambda p: torch.optim.AdamW(p, lr=1e-3, fused=True), out)
    run("adam_loop", mlp, lambda p: torch.optim.Adam(p, lr=1e-3, foreach=False), out)
    run("amp_adam", mlp, lambda p: torch.optim.Adam(p, lr=1e-3), out, amp=True)
    run("compiled_adamw", mlp, lambda p: torch.optim.AdamW(p, lr=1e-3), out, compile_=True)
    try:
        import torchvision
        run("resnet18_sgd", lambda: torchvision.models.resnet18(num_classes=100),
            lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9), out, input_shape=(16, 3, 128, 128))
    except ImportError as e:
        print("torchvision not available:", e)


if __name__ == "__main__":
    main()
