#!/usr/bin/env python3
"""Records real training runs in the allocator modes users run, with models
written by others (Hugging Face transformers' GPT-2, torchvision's ResNets,
PyTorch's own FSDP), for snapdiff's exact replay:

  fsdp2_gpt2       fully_shard (FSDP2), bf16 mixed precision, world size 1
  fsdp1_gpt2       FullyShardedDataParallel (FSDP1), bf16 mixed precision
  side_stream      ResNet-18 with a side-stream input prefetcher and
                   record_stream: frees complete late, after the other stream
  expandable_gpt2  expandable_segments:True, batch sizes 8, 4, 12,
                   empty_cache(), batch 6, empty_cache()
  graphed_resnet   torch.cuda.make_graphed_callables training
  graph_step       a whole training step captured in one torch.cuda.graph
  late_gpt2        recording starts after model, optimizer and 2 warm-up steps
  late_resnet      recording starts after the model and optimizer exist
  wrapped_gpt2     max_entries well below the run's events: the ring wraps
  late_expandable_gpt2     expandable segments, recording after warm-up, then
                           batch sizes 4, 12, empty_cache(), 6
  wrapped_expandable_gpt2  expandable segments, empty_cache() after every step,
                           a ring that wraps
  ddp_gpt2         DistributedDataParallel, world size 1 (gradient buckets)
  fsdp2_late_gpt2  fully_shard, recording from the third step
  compile_amp_gpt2 torch.compile and bf16 autocast
  mempool_resnet   a torch.cuda.MemPool holding buffers beside training
  oom_expandable   expandable segments, a step that runs out of memory
  late_side_stream the side-stream run, recording from the third step

Each scenario runs in its own process (allocator settings are read once per
process). Usage, on a CUDA machine:

    python3 record_allocator_modes.py OUT_DIR [NAME ...]

Writes OUT_DIR/NAME.pickle.gz (the bytes _dump_snapshot would write,
gzip-compressed) and OUT_DIR/NAME.truth.json with PyTorch's own figures from
the same process: torch.cuda.memory_stats() at the end (peaks since the
recording started: reset_peak_memory_stats() is called right before
_record_memory_history), the byte totals of parameters, gradients and
optimizer state, and what the history covers (`truncation`: none, late_start
or wrapped).
"""
import gzip
import json
import os
import pickle
import sys

import scenario_runner

SCENARIOS = ["fsdp2_gpt2", "fsdp1_gpt2", "side_stream", "expandable_gpt2", "graphed_resnet", "graph_step",
             "late_gpt2", "late_resnet", "wrapped_gpt2"]
SCENARIOS += ["late_expandable_gpt2", "wrapped_expandable_gpt2", "ddp_gpt2", "fsdp2_late_gpt2", "compile_amp_gpt2",
              "mempool_resnet", "oom_expandable", "late_side_stream"]
EXPANDABLE = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
ENV = {"expandable_gpt2": EXPANDABLE, "late_expandable_gpt2": EXPANDABLE, "wrapped_expandable_gpt2": EXPANDABLE,
       "oom_expandable": EXPANDABLE}


def tensor_bytes(ts):
    seen, total = set(), 0
    for t in ts:
        if t is None or not t.is_cuda:
            continue
        key = (t.untyped_storage().data_ptr(), t.untyped_storage().nbytes())
        if key in seen:
            continue
        seen.add(key)
        total += t.untyped_storage().nbytes()
    return total


def opt_state(opt):
    import torch
    return [v for s in opt.state.values() for v in s.values() if torch.is_tensor(v)]


def gpt2(layers=4, embd=512, heads=8, vocab=8192, positions=1024):
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(n_layer=layers, n_embd=embd, n_head=heads, vocab_size=vocab, n_positions=positions,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    return GPT2LMHeadModel(cfg)


def lm_step(model, opt, batch, seq=256, vocab=8192, zero_first=True):
    import torch
    if zero_first:
        opt.zero_grad(set_to_none=True)
    ids = torch.randint(0, vocab, (batch, seq), device="cuda")
    out = model(input_ids=ids, labels=ids)
    out.loss.backward()
    opt.step()


def start_recording(max_entries=1_000_000):
    import torch
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    torch.cuda.memory._record_memory_history(max_entries=max_entries, stacks="python")


def finish(name, out, cfg, params, grads, state, truncation, max_entries=1_000_000, extra=None):
    import torch
    torch.cuda.synchronize()
    snap = torch.cuda.memory._snapshot()
    ms = torch.cuda.memory_stats()
    torch.cuda.memory._record_memory_history(enabled=None)
    with gzip.open(os.path.join(out, name + ".pickle.gz"), "wb") as f:
        pickle.dump(snap, f)
    entries = [len(t) for t in snap["device_traces"]]
    truth = {
        "config": dict(cfg, name=name),
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(),
        "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
        "truncation": truncation,
        "max_entries": max_entries,
        "trace_entries": entries,
        "peaks_since": "the start of the recording (reset_peak_memory_stats)",
        "param_bytes": tensor_bytes(params),
        "grad_bytes": tensor_bytes(grads),
        "optimizer_state_bytes": tensor_bytes(state),
        "memory_allocated_end": torch.cuda.memory_allocated(),
        "memory_reserved_end": torch.cuda.memory_reserved(),
        "memory_stats": {k: v for k, v in ms.items()},
    }
    if extra:
        truth.update(extra)
    with open(os.path.join(out, name + ".truth.json"), "w") as f:
        json.dump(truth, f, indent=1, sort_keys=True)


def dist_init():
    import torch
    import torch.distributed as dist
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))


def run_fsdp2(name, out):
    import torch
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    dist_init()
    start_recording()
    model = gpt2().cuda()
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in model.transformer.h:
        fully_shard(block, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(3):
        lm_step(model, opt, batch=8)
    params = [p.to_local() if hasattr(p, "to_local") else p for p in model.parameters()]
    grads = [p.grad.to_local() if hasattr(p.grad, "to_local") else p.grad for p in model.parameters() if p.grad is not None]
    state = [s.to_local() if hasattr(s, "to_local") else s for s in opt_state(opt)]
    finish(name, out, {"model": "transformers GPT2LMHeadModel 4x512", "fsdp": "fully_shard", "batch": 8, "seq": 256,
                       "steps": 3, "optimizer": "AdamW"}, params, grads, state, "none")


def run_fsdp1(name, out):
    import torch
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, MixedPrecision
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy
    from transformers.models.gpt2.modeling_gpt2 import GPT2Block
    dist_init()
    start_recording()
    model = FSDP(gpt2(), auto_wrap_policy=ModuleWrapPolicy({GPT2Block}), device_id=0, use_orig_params=True,
                 mixed_precision=MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.float32))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(3):
        lm_step(model, opt, batch=8)
    params = list(model.parameters())
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    finish(name, out, {"model": "transformers GPT2LMHeadModel 4x512", "fsdp": "FullyShardedDataParallel", "batch": 8,
                       "seq": 256, "steps": 3, "optimizer": "AdamW"}, params, grads, opt_state(opt), "none")


def run_side_stream(name, out):
    import torch
    import torchvision
    start_recording()
    model = torchvision.models.resnet18(num_classes=100).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    side = torch.cuda.Stream()
    main = torch.cuda.current_stream()

    def prefetch():
        with torch.cuda.stream(side):
            x = torch.randn(64, 3, 96, 96, device="cuda")
            x = (x - x.mean()) / x.std()
            y = torch.randint(0, 100, (64,), device="cuda")
        return x, y

    nxt = prefetch()
    for _ in range(4):
        main.wait_stream(side)
        x, y = nxt
        x.record_stream(main)
        y.record_stream(main)
        nxt = prefetch()
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        # A scratch buffer made on the main stream and used on the side
        # stream, freed while the side stream still runs: its free completes
        # only once the side stream is past it.
        scratch = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
        with torch.cuda.stream(side):
            torch.cuda._sleep(20_000_000)
            scratch.add_(1)
        scratch.record_stream(side)
        del scratch, x, y
        opt.step()
    finish(name, out, {"model": "torchvision resnet18", "batch": 64, "image": 96, "steps": 4, "optimizer": "SGD momentum",
                       "streams": "prefetch side stream, record_stream"},
           list(model.parameters()), [p.grad for p in model.parameters() if p.grad is not None], opt_state(opt), "none")


def run_expandable(name, out):
    import torch
    start_recording()
    model = gpt2(layers=4, embd=768, heads=12).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for b in (8, 4, 12):
        lm_step(model, opt, batch=b, seq=512)
    torch.cuda.empty_cache()
    lm_step(model, opt, batch=6, seq=512)
    torch.cuda.empty_cache()
    finish(name, out, {"model": "transformers GPT2LMHeadModel 4x768", "batches": [8, 4, 12, "empty_cache", 6, "empty_cache"],
                       "seq": 512, "optimizer": "AdamW"},
           list(model.parameters()), [p.grad for p in model.parameters() if p.grad is not None], opt_state(opt), "none")


def run_graphed(name, out):
    import torch
    import torchvision
    start_recording()
    model = torchvision.models.resnet18(num_classes=10).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    sample = torch.randn(32, 3, 64, 64, device="cuda")
    gmodel = torch.cuda.make_graphed_callables(model, (sample,))
    for _ in range(4):
        x = torch.randn(32, 3, 64, 64, device="cuda")
        y = torch.randint(0, 10, (32,), device="cuda")
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(gmodel(x), y)
        loss.backward()
        opt.step()
    torch.cuda.empty_cache()
    finish(name, out, {"model": "torchvision resnet18", "graphs": "make_graphed_callables", "batch": 32, "image": 64,
                       "steps": 4, "optimizer": "Adam"},
           list(model.parameters()), [p.grad for p in model.parameters() if p.grad is not None], opt_state(opt), "none")


def run_graph_step(name, out):
    import torch
    import torchvision
    start_recording()
    model = torchvision.models.resnet18(num_classes=10).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, capturable=True)
    static_x = torch.randn(32, 3, 64, 64, device="cuda")
    static_y = torch.randint(0, 10, (32,), device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            torch.nn.functional.cross_entropy(model(static_x), static_y).backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(g):
        static_loss = torch.nn.functional.cross_entropy(model(static_x), static_y)
        static_loss.backward()
        opt.step()
    for _ in range(5):
        static_x.copy_(torch.randn(32, 3, 64, 64, device="cuda"))
        g.replay()
    torch.cuda.empty_cache()
    finish(name, out, {"model": "torchvision resnet18", "graphs": "whole step in torch.cuda.graph", "batch": 32,
                       "image": 64, "replays": 5, "optimizer": "Adam capturable"},
           list(model.parameters()), [p.grad for p in model.parameters() if p.grad is not None], opt_state(opt), "none")


def run_late_gpt2(name, out):
    import torch
    model = gpt2().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        lm_step(model, opt, batch=8)
    start_recording()
    for _ in range(2):
        lm_step(model, opt, batch=8)
    finish(name, out, {"model": "transformers GPT2LMHeadModel 4x512", "warmup_steps": 2, "recorded_steps": 2, "batch": 8,
                       "seq": 256, "optimizer": "AdamW", "recording": "after model, optimizer and warm-up"},
           list(model.parameters()), [p.grad for p in model.parameters() if p.grad is not None], opt_state(opt), "late_start")


def run_late_resnet(name, out):
    import torch
    import torchvision
    model = torchvision.models.resnet50(num_classes=100).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    start_recording()
    for _ in range(3):
        x = torch.randn(32, 3, 128, 128, device="cuda")
        y = torch.randint(0, 100, (32,), device="cuda")
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    finish(name, out, {"model": "torchvision resnet50", "batch": 32, "image": 128, "recorded_steps": 3, "amp": "bf16",
                       "optimizer": "SGD momentum", "recording": "after model and optimizer"},
           list(model.parameters()), [p.grad for p in model.parameters() if p.grad is not None], opt_state(opt), "late_start")


def run_wrapped(name, out):
    import torch
    model = gpt2(layers=2).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    # Count one step's events, then record with a ring well below the run.
    torch.cuda.memory._record_memory_history(max_entries=1_000_000, stacks="python")
    lm_step(model, opt, batch=4)
    n0 = len(torch.cuda.memory._snapshot()["device_traces"][0])
    lm_step(model, opt, batch=4)
    per_step = len(torch.cuda.memory._snapshot()["device_traces"][0]) - n0
    torch.cuda.memory._record_memory_history(enabled=None)
    max_entries = next(m for m in (1000, 2000, 5000, 10000, 20000, 50000, 100000, 200000) if m >= 2.6 * per_step)
    torch.cuda.memory._record_memory_history(max_entries=max_entries, stacks="python", clear_history=True)
    for _ in range(6):
        lm_step(model, opt, batch=4)
    torch.cuda.synchronize()
    # The last two steps lie wholly inside the recorded window (the ring holds
    # more than 2.6 steps); every step is alike, so the window's peaks are the
    # peaks since this reset.
    torch.cuda.reset_peak_memory_stats()
    for _ in range(2):
        lm_step(model, opt, batch=4)
    finish(name, out, {"model": "transformers GPT2LMHeadModel 2x512", "steps": 10, "batch": 4, "seq": 256,
                       "optimizer": "AdamW", "events_per_step": per_step,
                       "recording": "ring buffer of max_entries, wrapped; peaks reset before the last two steps"},
           list(model.parameters()), [p.grad for p in model.parameters() if p.grad is not None], opt_state(opt), "wrapped",
           max_entries=max_entries)


def run_late_expandable(name, out):
    import torch
    model = gpt2(layers=4, embd=768, heads=12).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for b in (8, 8):
        lm_step(model, opt, batch=b, seq=512)
    start_recording()
    for b in (4, 12):
        lm_step(model, opt, batch=b, seq=512)
    torch.cuda.empty_cache()
    lm_step(model, opt, batch=6, seq=512)
    finish(name, out, {"model": "transformers GPT2LMHeadModel 4x768", "warmup": [8, 8],
                       "recorded": [4, 12, "empty_cache", 6], "seq": 512, "optimizer": "AdamW",
                       "recording": "after model, optimizer and warm-up"},
           list(model.parameters()), [p.grad for p in model.parameters() if p.grad is not None], opt_state(opt),
           "late_start")


def run_wrapped_expandable(name, out):
    import torch
    model = gpt2(layers=2).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def two_steps():
        for b in (4, 8):
            lm_step(model, opt, batch=b)
            torch.cuda.empty_cache()

    torch.cuda.memory._record_memory_history(max_entries=1_000_000, stacks="python")
    two_steps()
    n0 = len(torch.cuda.memory._snapshot()["device_traces"][0])
    two_steps()
    per_pair = len(torch.cuda.memory._snapshot()["device_traces"][0]) - n0
    torch.cuda.memory._record_memory_history(enabled=None)
    max_entries = next(m for m in (1000, 2000, 5000, 10000, 20000, 50000, 100000) if m >= 1.5 * per_pair)
    torch.cuda.memory._record_memory_history(max_entries=max_entries, stacks="python", clear_history=True)
    for _ in range(4):
        two_steps()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    two_steps()
    finish(name, out, {"model": "transformers GPT2LMHeadModel 2x512", "batches": "4, 8 repeated, empty_cache after each",
                       "seq": 256, "optimizer": "AdamW", "events_per_pair": per_pair,
                       "recording": "ring buffer of max_entries, wrapped; peaks reset before the last pair of steps"},
           list(model.parameters()), [p.grad for p in model.parameters() if p.grad is not None], opt_state(opt), "wrapped",
           max_entries=max_entries)


def run_ddp(name, out):
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP
    dist_init()
    start_recording()
    model = DDP(gpt2().cuda(), device_ids=[0], bucket_cap_mb=4)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(3):
        lm_step(model, opt, batch=8)
    finish(name, out, {"model": "transformers GPT2LMHeadModel 4x512", "ddp": "DistributedDataParallel bucket_cap_mb=4",
                       "batch": 8, "seq": 256, "steps": 3, "optimizer": "AdamW"},
           list(model.parameters()), [p.grad for p in model.parameters() if p.grad is not None], opt_state(opt), "none")


def run_fsdp2_late(name, out):
    import torch
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    dist_init()
    model = gpt2(layers=6, embd=768, heads=12).cuda()
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in model.transformer.h:
        fully_shard(block, mp_policy=mp, reshard_after_forward=True)
    fully_shard(model, mp_policy=mp)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        lm_step(model, opt, batch=8)
    start_recording()
    for _ in range(2):
        lm_step(model, opt, batch=8)
    params = [p.to_local() for p in model.parameters()]
    grads = [p.grad.to_local() for p in model.parameters() if p.grad is not None]
    state = [s.to_local() if hasattr(s, "to_local") else s for s in opt_state(opt)]
    finish(name, out, {"model": "transformers GPT2LMHeadModel 6x768", "fsdp": "fully_shard", "batch": 8, "seq": 256,
                       "warmup_steps": 2, "recorded_steps": 2, "optimizer": "AdamW",
                       "recording": "from the third step"}, params, grads, state, "late_start")


def run_compile_amp(name, out):
    import torch
    start_recording()
    model = gpt2().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    cmodel = torch.compile(model)
    for _ in range(3):
        opt.zero_grad(set_to_none=True)
        ids = torch.randint(0, 8192, (8, 256), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = cmodel(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
    finish(name, out, {"model": "transformers GPT2LMHeadModel 4x512", "compile": True, "amp": "bf16", "batch": 8,
                       "seq": 256, "steps": 3, "optimizer": "AdamW fused"},
           list(model.parameters()), [p.grad for p in model.parameters() if p.grad is not None], opt_state(opt), "none")


def run_mempool(name, out):
    import torch
    import torchvision
    start_recording()
    model = torchvision.models.resnet18(num_classes=10).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    pool = torch.cuda.MemPool()
    with torch.cuda.use_mem_pool(pool):
        cache = [torch.empty(3 << 20, dtype=torch.uint8, device="cuda") for _ in range(4)]
        tmp = torch.empty(5 << 20, dtype=torch.uint8, device="cuda")
        del tmp
    for _ in range(3):
        x = torch.randn(32, 3, 64, 64, device="cuda")
        y = torch.randint(0, 10, (32,), device="cuda")
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    torch.cuda.empty_cache()
    finish(name, out, {"model": "torchvision resnet18", "mempool": "4 x 3 MiB buffers in a torch.cuda.MemPool",
                       "batch": 32, "image": 64, "steps": 3, "optimizer": "SGD"},
           list(model.parameters()), [p.grad for p in model.parameters() if p.grad is not None], opt_state(opt), "none",
           extra={"mempool_id": list(pool.id), "cache_bytes": sum(c.numel() for c in cache)})


def run_oom_expandable(name, out):
    import torch
    torch.cuda.set_per_process_memory_fraction(0.012)  # about 1.7 GB of an H200
    start_recording()
    model = gpt2(layers=4, embd=768, heads=12).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    oom = None
    for b in (2, 4, 64):
        try:
            lm_step(model, opt, batch=b, seq=512)
        except torch.OutOfMemoryError as e:
            oom = {"batch": b, "message": str(e).splitlines()[0][:300]}
            break
    finish(name, out, {"model": "transformers GPT2LMHeadModel 4x768", "batches": [2, 4, 64], "seq": 512,
                       "memory_fraction": 0.012, "optimizer": "AdamW"},
           list(model.parameters()), [p.grad for p in model.parameters() if p.grad is not None], opt_state(opt), "none",
           extra={"oom": oom})


def run_late_side_stream(name, out):
    import torch
    import torchvision
    model = torchvision.models.resnet18(num_classes=100).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    side = torch.cuda.Stream()
    main = torch.cuda.current_stream()

    def prefetch():
        with torch.cuda.stream(side):
            x = torch.randn(64, 3, 96, 96, device="cuda")
            y = torch.randint(0, 100, (64,), device="cuda")
        return x, y

    nxt = prefetch()
    for step in range(5):
        if step == 2:
            start_recording()
        main.wait_stream(side)
        x, y = nxt
        x.record_stream(main)
        y.record_stream(main)
        nxt = prefetch()
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        scratch = torch.empty(32 << 20, dtype=torch.uint8, device="cuda")
        with torch.cuda.stream(side):
            torch.cuda._sleep(20_000_000)
            scratch.add_(1)
        scratch.record_stream(side)
        del scratch, x, y
        opt.step()
    finish(name, out, {"model": "torchvision resnet18", "batch": 64, "image": 96, "steps": 5, "recorded_from_step": 3,
                       "optimizer": "SGD momentum", "streams": "prefetch side stream, record_stream"},
           list(model.parameters()), [p.grad for p in model.parameters() if p.grad is not None], opt_state(opt),
           "late_start")


RUNNERS = {"fsdp2_gpt2": run_fsdp2, "fsdp1_gpt2": run_fsdp1, "side_stream": run_side_stream,
           "expandable_gpt2": run_expandable, "graphed_resnet": run_graphed, "graph_step": run_graph_step,
           "late_gpt2": run_late_gpt2, "late_resnet": run_late_resnet, "wrapped_gpt2": run_wrapped,
           "late_expandable_gpt2": run_late_expandable, "wrapped_expandable_gpt2": run_wrapped_expandable,
           "ddp_gpt2": run_ddp, "fsdp2_late_gpt2": run_fsdp2_late, "compile_amp_gpt2": run_compile_amp,
           "mempool_resnet": run_mempool, "oom_expandable": run_oom_expandable, "late_side_stream": run_late_side_stream}


if __name__ == "__main__":
    sys.exit(scenario_runner.main(__file__, RUNNERS, SCENARIOS, ENV))
