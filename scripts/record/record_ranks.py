#!/usr/bin/env python3
"""Records per-rank snapshots of runs whose ranks genuinely differ, one
process per rank, one after another on a single GPU, each with its own
rank's share of the work, in the file layouts real launchers write:

  pp_resnet50       torchvision's ResNet-50 cut into 4 pipeline stages
                    (stem+layer1 | layer2 | layer3 | layer4+head), a 1F1B
                    schedule with 6 micro-batches: rank r keeps 4-r
                    micro-batches' activations in flight; Adam; 2 steps.
                    torchtitan's current layout:
                    pp_resnet50/step_000000000002/{R:06d}_step_2.pickle.gz
  fsdp_gpt2_uneven  transformers' GPT-2 6x512 under fully_shard (FSDP2,
                    bf16 mixed precision, world size 1 in each process), 3
                    ranks with uneven data: sequences of 256, 512 and 384
                    tokens; AdamW; 3 steps. Megatron-LM's layout:
                    fsdp_gpt2_uneven/snapshot_{R}.pickle.gz
  oom_rank_gpt2     GPT-2 4x512 on 3 ranks under a 3 GiB memory cap, batches
                    of 2, 16 and 3 sequences of 1024 tokens; rank 1 runs out
                    of memory in its first step (the error caught, the
                    snapshot after it). Megatron-Bridge's layout:
                    oom_rank_gpt2/memsnap_0.pickle.gz, memsnap_2.pickle.gz,
                    memsnap_oom_rank-1.pickle.gz

Usage, on a CUDA machine:  python3 record_ranks.py OUT_DIR [NAME ...]

Each rank's process writes its snapshot (gzip-compressed) and, beside it,
NAME.truth.json (NAME without .pickle.gz): its rank, memory_stats() at the
end (peaks since the start of the recording), `iterations` (memory_allocated,
memory_reserved and time_us at each iteration's start and end) and, for an
OOM, `oom` (the exception's text and memory_stats() in the except block).
"""
import gzip
import json
import os
import pickle
import subprocess
import sys
import time

import record_answers as ra
import record_categories as rc

SCENARIOS = {"pp_resnet50": 4, "fsdp_gpt2_uneven": 3, "oom_rank_gpt2": 3}
ITERS = ra.ITERS  # memory_allocated/reserved and time_us at each iteration's start and end
mark = ra.mark


def finish(path, name, rank, world, cfg, extra=None):
    import torch
    torch.cuda.synchronize()
    snap = torch.cuda.memory._snapshot()
    ms = torch.cuda.memory_stats()
    torch.cuda.memory._record_memory_history(enabled=None)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with gzip.open(path, "wb") as f:
        pickle.dump(snap, f)
    truth = dict(rc.common_truth(name, cfg, snap, ms), **{"rank": rank, "world_size": world, "iterations": ITERS})
    if extra:
        truth.update(extra)
    base = path[: -len(".pickle.gz")]
    with open(base + ".truth.json", "w") as f:
        json.dump(truth, f, indent=1, sort_keys=True)


def run_pp_resnet50(out, rank, world):
    import torch
    import torchvision
    m = torchvision.models.resnet50(num_classes=1000)
    stages = [torch.nn.Sequential(m.conv1, m.bn1, m.relu, m.maxpool, m.layer1), m.layer2, m.layer3,
              torch.nn.Sequential(m.layer4, m.avgpool, torch.nn.Flatten(), m.fc)]
    shapes = [(3, 128, 128), (256, 32, 32), (512, 16, 16), (1024, 8, 8)]
    mb, micro = 8, 6
    rc.start_recording()
    stage = stages[rank].cuda()
    opt = torch.optim.Adam(stage.parameters(), lr=1e-4)
    last = rank == world - 1
    for step in range(2):
        mark(step, "start")
        opt.zero_grad(set_to_none=True)
        inflight = []

        def fwd():
            x = torch.randn(mb, *shapes[rank], device="cuda", requires_grad=rank > 0)
            y = stage(x)
            if last:
                y = torch.nn.functional.cross_entropy(y, torch.randint(0, 1000, (mb,), device="cuda"))
            inflight.append(y)

        def bwd():
            y = inflight.pop(0)
            if last:
                y.backward()
            else:
                y.backward(torch.randn_like(y))  # the gradient the next stage would send

        warm = min(world - rank - 1, micro)
        for _ in range(warm):
            fwd()
        for _ in range(micro - warm):
            fwd()
            bwd()
        while inflight:
            bwd()
        opt.step()
        mark(step, "end")
    path = os.path.join(out, "pp_resnet50", "step_000000000002", f"{rank:06d}_step_2.pickle.gz")
    finish(path, "pp_resnet50", rank, world,
           {"model": "torchvision resnet50, 4 pipeline stages", "stage": rank, "schedule": "1F1B",
            "micro_batches": micro, "micro_batch": mb, "image": 128, "optimizer": "Adam", "steps": 2,
            "in_flight": world - rank})


def gpt2(layers, embd, vocab=8192, positions=1024):
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(n_layer=layers, n_embd=embd, n_head=max(1, embd // 64), vocab_size=vocab, n_positions=positions,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    return GPT2LMHeadModel(cfg)


def dist_init():
    import torch
    import torch.distributed as dist
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))


def run_fsdp_gpt2_uneven(out, rank, world):
    import torch
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    dist_init()
    seq = [256, 512, 384][rank]
    rc.start_recording()
    model = gpt2(6, 512).cuda()
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in model.transformer.h:
        fully_shard(block, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for step in range(3):
        mark(step, "start")
        opt.zero_grad(set_to_none=True)
        ids = torch.randint(0, 8192, (8, seq), device="cuda")
        model(input_ids=ids, labels=ids).loss.backward()
        opt.step()
        mark(step, "end")
    finish(os.path.join(out, "fsdp_gpt2_uneven", f"snapshot_{rank}.pickle.gz"), "fsdp_gpt2_uneven", rank, world,
           {"model": "transformers GPT2LMHeadModel 6x512", "fsdp": "fully_shard", "batch": 8, "seq": seq,
            "optimizer": "AdamW", "steps": 3})


def run_oom_rank_gpt2(out, rank, world):
    import torch
    cap = 3 << 30
    total = torch.cuda.mem_get_info()[1]
    torch.cuda.set_per_process_memory_fraction(cap / total)
    batch = [2, 16, 3][rank]
    rc.start_recording()
    model = gpt2(4, 512).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    oom = None
    for step in range(2):
        mark(step, "start")
        try:
            opt.zero_grad(set_to_none=True)
            ids = torch.randint(0, 8192, (batch, 1024), device="cuda")
            model(input_ids=ids, labels=ids).loss.backward()
            opt.step()
        except torch.OutOfMemoryError as e:
            oom = {"message": str(e).splitlines()[0], "step": step, "memory_stats": dict(torch.cuda.memory_stats()),
                   "mem_get_info": list(torch.cuda.mem_get_info()), "cap_bytes": cap}
            ITERS[-1]["oom"] = True
            break
        mark(step, "end")
    name = f"memsnap_oom_rank-{rank}.pickle.gz" if oom else f"memsnap_{rank}.pickle.gz"
    finish(os.path.join(out, "oom_rank_gpt2", name), "oom_rank_gpt2", rank, world,
           {"model": "transformers GPT2LMHeadModel 4x512", "batch": batch, "seq": 1024, "optimizer": "AdamW",
            "cap_bytes": cap}, {"oom": oom} if oom else None)


RUNNERS = {"pp_resnet50": run_pp_resnet50, "fsdp_gpt2_uneven": run_fsdp_gpt2_uneven,
           "oom_rank_gpt2": run_oom_rank_gpt2}


def main():
    if len(sys.argv) >= 6 and sys.argv[1] == "--one":
        out, name, rank, world = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
        import torch
        torch.manual_seed(rank)
        RUNNERS[name](out, rank, world)
        import torch.distributed as dist
        if dist.is_initialized():
            dist.destroy_process_group()
        return 0
    out = sys.argv[1]
    names = sys.argv[2:] or list(SCENARIOS)
    code = 0
    for name in names:
        world = SCENARIOS[name]
        for rank in range(world):
            t0 = time.time()
            env = dict(os.environ)
            p = subprocess.run([sys.executable, sys.argv[0], "--one", out, name, str(rank), str(world)], env=env,
                               capture_output=True, text=True, timeout=300)
            print(f"== {name} rank {rank}: exit {p.returncode} in {time.time() - t0:.1f} s", flush=True)
            if p.returncode != 0:
                code = 1
                print(p.stdout[-3000:], p.stderr[-6000:], flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
