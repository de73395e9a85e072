#!/usr/bin/env python3
"""Records real training runs whose memory snapdiff must categorize, with
models written by others (transformers' Llama and GPT-2, torchvision's
ResNet-50, PyTorch's FSDP2), and the truth of every category at the peak
from PyTorch in the same process:

  cat_late_llama      LlamaForCausalLM, AdamW (foreach); recording starts after
                      the model, the optimizer and two warm-up steps
  cat_resnet50_sgd    ResNet-50, SGD momentum, 4 steps: steps 2-4 allocate
                      nothing in the optimizer
  cat_compiled_mlp    a torch.compile'd MLP, fused Adam, 4 steps
  cat_autocast_gpt2   GPT-2 (fp32 weights) under bf16 autocast: cached casts
  cat_fp8_mlp         plain-PyTorch FP8 linears (bf16 primary weights): each
                      forward casts W to FP8 E4M3 and keeps its transpose for
                      the backward; GEMMs with torch._scaled_mm
  cat_fsdp2_gpt2      fully_shard, bf16 mixed precision, world size 1
  cat_late_fsdp1      FullyShardedDataParallel, recording from the third step
  cat_graphed_mlp     make_graphed_callables training
  cat_late_keepgrad_gpt2  GPT-2, Adam, zero_grad(set_to_none=False): recording
                      after two warm-up steps, the gradients kept from before
  cat_autocast_cpp    GPT-2 under bf16 autocast, recorded with stacks="all"

Usage, on a CUDA machine:  python3 record_categories.py OUT_DIR [NAME ...]

Each scenario runs in its own process and writes OUT_DIR/NAME.pickle.gz (the
bytes _dump_snapshot writes, gzip-compressed) and OUT_DIR/NAME.truth.json:
memory_stats(), and `at_peak`, the bytes of each kind of tensor PyTorch holds
at the requested-bytes peak. The recorder notes every tensor it knows the
kind of (parameters and gradients after each backward, optimizer state after
each step, the input batch and the parameter copies it makes when they are
made: storage address, bytes, time); each is tied to the history's own alloc
event at that address before that time, and counts at the peak when that
alloc is at or before the peak and its free_completed after it (a tensor
whose address has no alloc was allocated before the recording and is live
throughout). The peak is the first maximum of the history's requested bytes
(alloc +size, free_completed -size).
"""
import gzip
import json
import os
import pickle
import sys
import time

import scenario_runner

SCENARIOS = ["cat_late_llama", "cat_resnet50_sgd", "cat_compiled_mlp", "cat_autocast_gpt2", "cat_fp8_mlp",
             "cat_fsdp2_gpt2", "cat_late_fsdp1", "cat_graphed_mlp", "cat_late_keepgrad_gpt2", "cat_autocast_cpp"]


def now_us():
    return time.time_ns() // 1000


class Known:
    """Tensors of known kind: (kind, storage address, bytes, time noted)."""

    def __init__(self):
        self.rows = []

    def note(self, kind, tensors):
        import torch
        t = now_us()
        for x in tensors:
            if x is None or not torch.is_tensor(x) or not x.is_cuda:
                continue
            if hasattr(x, "to_local"):
                x = x.to_local()
            st = x.untyped_storage()
            if st.nbytes() == 0:
                continue
            self.rows.append((kind, st.data_ptr(), st.nbytes(), t))

    def params(self, model):
        self.note("parameter", list(model.parameters()) + list(model.buffers()))

    def grads(self, model):
        self.note("gradient", [p.grad for p in model.parameters()])

    def state(self, opt):
        import torch
        self.note("optimizer_state", [v for s in opt.state.values() for v in s.values() if torch.is_tensor(v)])


K = Known()
STEPS = {"n": 0}


def at_peak(trace):
    """Bytes per kind live at the first requested-bytes maximum."""
    cur, best, peak = 0, None, -1
    for i, e in enumerate(trace):
        a = e["action"]
        if a == "alloc":
            cur += e["size"]
        elif a == "free_completed":
            cur -= e["size"]
        else:
            continue
        if best is None or cur > best:
            best, peak = cur, i
    allocs, frees = {}, {}
    for i, e in enumerate(trace):
        if e["action"] == "alloc":
            allocs.setdefault(e["addr"], []).append((i, e["time_us"], e["size"]))
        elif e["action"] == "free_completed":
            frees.setdefault(e["addr"], []).append(i)
    out, seen = {}, set()
    for kind, addr, nbytes, t in K.rows:
        cands = [x for x in allocs.get(addr, []) if x[1] <= t]
        if cands:
            ai, _, size = cands[-1]
        else:
            ai, size = -1, nbytes  # allocated before the recording
        fi = next((f for f in frees.get(addr, []) if f > ai), None)
        key = (addr, ai)
        if key in seen:
            continue
        seen.add(key)
        if ai <= peak and (fi is None or fi > peak):
            out[kind] = out.get(kind, 0) + size
    return peak, out


AT_PEAK_METHOD = ("tensors noted by the recorder (storage address, bytes, time), tied to the history's alloc at that "
                  "address; live when alloc <= peak < free_completed")


def common_truth(name, cfg, snap, ms):
    """The figures every recorder's truth holds, from PyTorch in this process."""
    import torch
    return {
        "config": dict(cfg, name=name),
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(),
        "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
        "max_entries": 1_000_000,
        "trace_entries": [len(t) for t in snap["device_traces"]],
        "peaks_since": "the start of the recording (reset_peak_memory_stats)",
        "memory_allocated_end": torch.cuda.memory_allocated(),
        "memory_reserved_end": torch.cuda.memory_reserved(),
        "memory_stats": dict(ms),
    }


def finish(name, out, cfg, steps, truncation="none", extra=None):
    import torch
    torch.cuda.synchronize()
    snap = torch.cuda.memory._snapshot()
    ms = torch.cuda.memory_stats()
    torch.cuda.memory._record_memory_history(enabled=None)
    with gzip.open(os.path.join(out, name + ".pickle.gz"), "wb") as f:
        pickle.dump(snap, f)
    trace = snap["device_traces"][0]
    peak, kinds = at_peak(trace)
    ann = [a for a in snap.get("external_annotations", []) if a.get("stage") == "START"]
    truth = dict(common_truth(name, cfg, snap, ms), **{
        "truncation": truncation,
        "steps": steps,
        "optimizer_step_annotations": sum(1 for a in ann if a["name"].startswith("Optimizer.step")),
        "at_peak": {"event_index": peak, **{k: kinds.get(k, 0) for k in
                                            ("parameter", "gradient", "optimizer_state", "input", "parameter_copy")}},
        "at_peak_method": AT_PEAK_METHOD,
    })
    if extra:
        truth.update(extra)
    with open(os.path.join(out, name + ".truth.json"), "w") as f:
        json.dump(truth, f, indent=1, sort_keys=True)


def start_recording(stacks="python"):
    import torch
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    torch.cuda.memory._record_memory_history(max_entries=1_000_000, stacks=stacks)


def lm_step(model, opt, batch, seq, vocab, note=True, zero=True):
    import torch
    if zero:
        opt.zero_grad(set_to_none=True)
    ids = torch.randint(0, vocab, (batch, seq), device="cuda")
    if note:
        K.note("input", [ids])
    out = model(input_ids=ids, labels=ids)
    out.loss.backward()
    if note:
        K.grads(model)
    opt.step()
    if note:
        K.state(opt)
        K.params(model)
    STEPS["n"] += 1


def run_late_llama(name, out):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(hidden_size=512, intermediate_size=1376, num_hidden_layers=4, num_attention_heads=8,
                      num_key_value_heads=4, vocab_size=8192, max_position_embeddings=512)
    model = LlamaForCausalLM(cfg).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        lm_step(model, opt, 8, 256, 8192, note=False)
    STEPS["n"] = 0
    start_recording()
    K.params(model)
    K.grads(model)
    K.state(opt)
    for _ in range(3):
        lm_step(model, opt, 8, 256, 8192)
    finish(name, out, {"model": "transformers LlamaForCausalLM 4x512", "batch": 8, "seq": 256, "optimizer": "AdamW",
                       "recording": "after model, optimizer and 2 warm-up steps"}, STEPS["n"], "late_start")


def run_resnet50(name, out):
    import torch
    import torchvision
    start_recording()
    model = torchvision.models.resnet50(num_classes=1000).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    K.params(model)
    for _ in range(4):
        x = torch.randn(32, 3, 128, 128, device="cuda")
        y = torch.randint(0, 1000, (32,), device="cuda")
        K.note("input", [x, y])
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        K.grads(model)
        opt.step()
        K.state(opt)
        K.params(model)
        STEPS["n"] += 1
    finish(name, out, {"model": "torchvision resnet50", "batch": 32, "image": 128, "optimizer": "SGD momentum"},
           STEPS["n"])


def run_compiled_mlp(name, out):
    import torch
    start_recording()
    model = torch.nn.Sequential(torch.nn.Linear(2048, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 4096),
                                torch.nn.GELU(), torch.nn.Linear(4096, 2048)).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, fused=True)
    cmodel = torch.compile(model)
    K.params(model)
    for _ in range(4):
        x = torch.randn(2048, 2048, device="cuda")
        y = torch.randn(2048, 2048, device="cuda")
        K.note("input", [x, y])
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.mse_loss(cmodel(x), y).backward()
        K.grads(model)
        opt.step()
        K.state(opt)
        STEPS["n"] += 1
    if os.environ.get("SNAPDIFF_SHOW_INDUCTOR"):
        snap = torch.cuda.memory._snapshot()
        files = {f["filename"] for e in snap["device_traces"][0] for f in e.get("frames", [])
                 if "torchinductor" in f["filename"]}
        for fn in sorted(files):
            print("==", fn)
            print(open(fn).read()[-9000:])
    finish(name, out, {"model": "MLP 2048-4096-4096-2048", "compile": True, "batch": 2048, "optimizer": "Adam fused"},
           STEPS["n"])


VIEWS = {"TBackward0", "TransposeBackward0", "ViewBackward0", "UnsafeViewBackward0", "PermuteBackward0",
         "ExpandBackward0", "AsStridedBackward0", "SliceBackward0", "ReshapeAliasBackward0", "AliasBackward0"}


def note_saved_casts(loss, params):
    """Autocast's cached casts of parameters that the autograd graph saved for
    the backward: saved tensors whose own grad_fn (through views) is a
    ToCopyBackward0 fed by a parameter's AccumulateGrad."""
    import torch
    ids = {id(p) for p in params}

    def cast_of_param(fn):
        while fn is not None and type(fn).__name__ in VIEWS and fn.next_functions:
            fn = fn.next_functions[0][0]
        if fn is None or type(fn).__name__ != "ToCopyBackward0" or not fn.next_functions:
            return False
        acc = fn.next_functions[0][0]
        return acc is not None and id(getattr(acc, "variable", None)) in ids

    seen, todo = set(), [loss.grad_fn]
    while todo:
        fn = todo.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        todo.extend(nf for nf, _ in fn.next_functions if nf is not None)
        for name in dir(fn):
            if not name.startswith("_saved_"):
                continue
            try:
                v = getattr(fn, name)
            except Exception:
                continue
            if torch.is_tensor(v) and v.is_cuda and cast_of_param(v.grad_fn):
                K.note("parameter_copy", [v])


def autocast_gpt2(name, out, layers, batch, steps, stacks):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    start_recording(stacks)
    cfg = GPT2Config(n_layer=layers, n_embd=512, n_head=8, vocab_size=8192, n_positions=512, resid_pdrop=0.0,
                     embd_pdrop=0.0, attn_pdrop=0.0)
    model = GPT2LMHeadModel(cfg).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    K.params(model)
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        ids = torch.randint(0, 8192, (batch, 256), device="cuda")
        K.note("input", [ids])
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        note_saved_casts(loss, list(model.parameters()))
        loss.backward()
        K.grads(model)
        opt.step()
        K.state(opt)
        STEPS["n"] += 1
    cfg = {"model": f"transformers GPT2LMHeadModel {layers}x512 fp32", "amp": "bf16 autocast", "batch": batch,
           "seq": 256, "optimizer": "AdamW"}
    if stacks != "python":
        cfg["stacks"] = stacks
    finish(name, out, cfg, STEPS["n"])


def run_autocast_gpt2(name, out):
    autocast_gpt2(name, out, layers=4, batch=8, steps=3, stacks="python")


def run_autocast_cpp(name, out):
    autocast_gpt2(name, out, layers=2, batch=4, steps=2, stacks="all")


def fp8_linear_fn():
    import torch
    E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2

    def quant(t, dtype):
        amax = t.abs().max().float().clamp(min=1e-12)
        scale = torch.finfo(dtype).max / amax
        return (t.float() * scale).to(dtype), scale.reciprocal()

    class FP8Linear(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            x2 = x.reshape(-1, x.shape[-1])
            xq, xs = quant(x2, E4M3)
            wq, ws = quant(w, E4M3)                 # (out, in) row-major
            wt = wq.t().contiguous()                # the FP8 transpose kept for the backward
            K.note("parameter_copy", [wq, wt])
            y = torch._scaled_mm(xq, wq.t(), scale_a=xs, scale_b=ws, out_dtype=torch.bfloat16)
            ctx.save_for_backward(xq, xs, wt, ws)
            ctx.shape = x.shape
            return y.reshape(*x.shape[:-1], w.shape[0])

        @staticmethod
        def backward(ctx, gy):
            xq, xs, wt, ws = ctx.saved_tensors
            g2 = gy.reshape(-1, gy.shape[-1])
            gq, gs = quant(g2, E5M2)
            # dX = gY @ W: W as the column-major (out, in) operand is wt.t()
            gx = torch._scaled_mm(gq, wt.t(), scale_a=gs, scale_b=ws, out_dtype=torch.bfloat16)
            gw = (g2.t().float() @ (xq.float() * xs)).to(torch.bfloat16)
            return gx.reshape(ctx.shape), gw
    return FP8Linear


def fp8_mlp_model(blocks=4, d=1024, h=4096):
    """The FP8 MLP of cat_fp8_mlp (record_capture.py's fp8_mlp too), on the GPU."""
    import torch
    FP8Linear = fp8_linear_fn()

    class Block(torch.nn.Module):
        def __init__(self, d, h):
            super().__init__()
            self.norm = torch.nn.LayerNorm(d, dtype=torch.bfloat16)
            self.up = torch.nn.Parameter(torch.randn(h, d, dtype=torch.bfloat16) * 0.02)
            self.down = torch.nn.Parameter(torch.randn(d, h, dtype=torch.bfloat16) * 0.02)

        def forward(self, x):
            y = FP8Linear.apply(self.norm(x), self.up)
            return x + FP8Linear.apply(torch.nn.functional.gelu(y), self.down)

    return torch.nn.Sequential(*[Block(d, h) for _ in range(blocks)]).cuda()


def run_fp8_mlp(name, out):
    import torch
    start_recording()
    model = fp8_mlp_model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    K.params(model)
    for _ in range(3):
        opt.zero_grad(set_to_none=True)
        x = torch.randn(4, 512, 1024, device="cuda", dtype=torch.bfloat16)
        K.note("input", [x])
        model(x).float().pow(2).mean().backward()
        K.grads(model)
        opt.step()
        K.state(opt)
        STEPS["n"] += 1
    finish(name, out, {"model": "4 blocks of FP8 linears 1024-4096-1024, bf16 primary weights", "tokens": 2048,
                       "optimizer": "AdamW"}, STEPS["n"])


def dist_init():
    import torch
    import torch.distributed as dist
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))


def note_unsharded(model):
    """Unsharded (all-gathered) parameters as each module sees them when it runs."""
    def hook(mod, *_):
        K.note("parameter_copy", [p for p in mod.parameters(recurse=False)])
    for m in model.modules():
        if any(True for _ in m.parameters(recurse=False)):
            m.register_forward_pre_hook(hook)
            if not any(True for _ in m.children()):
                m.register_full_backward_pre_hook(hook)


def note_fsdp1_unsharded(model):
    """FSDP1's unsharded flat parameters (its low-precision shard, or the
    padded all-gather output) as each wrapped module starts its forward."""
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    import torch
    for m in FSDP.fsdp_modules(model):
        def note(m=m):
            fp = m._handle.flat_param if m._handle is not None else None
            if fp is not None:
                K.note("parameter_copy", [getattr(fp, "_mp_shard", None), getattr(fp, "_full_param_padded", None)])

        def pre(_mod, _args, note=note):
            note()

        # On the outputs, after FSDP's own pre-backward hook (registered
        # first), which unshards again for the backward.
        def post(_mod, _args, out, note=note):
            outs = [out] if torch.is_tensor(out) else list(out) if isinstance(out, (tuple, list)) else list(out.values())
            for t in outs:
                if torch.is_tensor(t) and t.requires_grad:
                    t.register_hook(lambda g, note=note: (note(), None)[1])
        m.module.register_forward_pre_hook(pre)
        m.register_forward_hook(post)


def run_fsdp2(name, out):
    import torch
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from transformers import GPT2Config, GPT2LMHeadModel
    dist_init()
    start_recording()
    cfg = GPT2Config(n_layer=4, n_embd=512, n_head=8, vocab_size=8192, n_positions=512, resid_pdrop=0.0,
                     embd_pdrop=0.0, attn_pdrop=0.0)
    model = GPT2LMHeadModel(cfg).cuda()
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in model.transformer.h:
        fully_shard(block, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    note_unsharded(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    K.params(model)
    for _ in range(3):
        lm_step(model, opt, 8, 256, 8192)
    finish(name, out, {"model": "transformers GPT2LMHeadModel 4x512", "fsdp": "fully_shard bf16", "batch": 8,
                       "seq": 256, "optimizer": "AdamW"}, STEPS["n"])


def run_late_fsdp1(name, out):
    import torch
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, MixedPrecision
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.models.gpt2.modeling_gpt2 import GPT2Block
    dist_init()
    cfg = GPT2Config(n_layer=4, n_embd=512, n_head=8, vocab_size=8192, n_positions=512, resid_pdrop=0.0,
                     embd_pdrop=0.0, attn_pdrop=0.0)
    model = FSDP(GPT2LMHeadModel(cfg), auto_wrap_policy=ModuleWrapPolicy({GPT2Block}), device_id=0,
                 use_orig_params=True, mixed_precision=MixedPrecision(param_dtype=torch.bfloat16,
                                                                      reduce_dtype=torch.float32))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        lm_step(model, opt, 8, 256, 8192, note=False)
    STEPS["n"] = 0
    note_fsdp1_unsharded(model)
    start_recording()
    K.params(model)
    K.grads(model)
    K.state(opt)
    for _ in range(2):
        lm_step(model, opt, 8, 256, 8192)
    finish(name, out, {"model": "transformers GPT2LMHeadModel 4x512", "fsdp": "FullyShardedDataParallel bf16",
                       "batch": 8, "seq": 256, "optimizer": "AdamW", "recording": "from the third step"},
           STEPS["n"], "late_start")


def run_graphed_mlp(name, out):
    import torch
    start_recording()
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1024)).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    sample = torch.randn(512, 1024, device="cuda")
    gmodel = torch.cuda.make_graphed_callables(model, (sample,))
    K.params(model)
    for _ in range(4):
        x = torch.randn(512, 1024, device="cuda")
        K.note("input", [x])
        opt.zero_grad(set_to_none=True)
        gmodel(x).pow(2).mean().backward()
        K.grads(model)
        opt.step()
        K.state(opt)
        STEPS["n"] += 1
    finish(name, out, {"model": "MLP 1024-4096-1024", "graphs": "make_graphed_callables", "batch": 512,
                       "optimizer": "Adam"}, STEPS["n"])


def run_late_keepgrad(name, out):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(n_layer=4, n_embd=512, n_head=8, vocab_size=8192, n_positions=512, resid_pdrop=0.0,
                     embd_pdrop=0.0, attn_pdrop=0.0)
    model = GPT2LMHeadModel(cfg).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)

    def step(note):
        opt.zero_grad(set_to_none=False)
        ids = torch.randint(0, 8192, (8, 256), device="cuda")
        if note:
            K.note("input", [ids])
        model(input_ids=ids, labels=ids).loss.backward()
        if note:
            K.grads(model)
        opt.step()
        if note:
            K.state(opt)
    for _ in range(2):
        step(False)
    start_recording()
    K.params(model)
    K.grads(model)
    K.state(opt)
    for _ in range(2):
        step(True)
        STEPS["n"] += 1
    finish(name, out, {"model": "transformers GPT2LMHeadModel 4x512", "batch": 8, "seq": 256, "optimizer": "Adam",
                       "zero_grad": "set_to_none=False",
                       "recording": "after model, optimizer and 2 warm-up steps; gradients kept"}, STEPS["n"],
           "late_start")


RUNNERS = {"cat_late_keepgrad_gpt2": run_late_keepgrad, "cat_autocast_cpp": run_autocast_cpp,
           "cat_late_llama": run_late_llama, "cat_resnet50_sgd": run_resnet50, "cat_compiled_mlp": run_compiled_mlp,
           "cat_autocast_gpt2": run_autocast_gpt2, "cat_fp8_mlp": run_fp8_mlp, "cat_fsdp2_gpt2": run_fsdp2,
           "cat_late_fsdp1": run_late_fsdp1, "cat_graphed_mlp": run_graphed_mlp}


if __name__ == "__main__":
    sys.exit(scenario_runner.main(__file__, RUNNERS, SCENARIOS))
