#!/usr/bin/env python3
"""Records the runs of issue 36 ("every byte named on the runs people actually
record"): models and training loops written by others (transformers, peft,
timm, torchvision, Lightning, the transformers Trainer, FSDP2), each with the
truth of every kind of tensor at the peak from PyTorch in the same process.

  i36_autocast_bf16_cpp     transformers Qwen2ForCausalLM (fp32 weights) under
                            bf16 autocast, stacks="all"
  i36_autocast_bf16_py      the same with stacks="python"
  i36_frozen_timm           timm convnext_tiny, every parameter frozen but the
                            classifier head, AdamW on the head; recording after
                            the model is on the GPU
  i36_amp_fp16_scaler       transformers BertForMaskedLM under fp16 autocast
                            with torch.amp.GradScaler, stacks="python"
  i36_amp_fp16_scaler_cpp   the same, smaller, stacks="all"
  i36_late_hand_adamw       transformers MistralForCausalLM with an AdamW
                            written out in Python (not a torch.optim class):
                            state["m"], state["v"] replaced by new tensors in
                            every step; recording after the model, the
                            optimizer and 2 steps
  i36_late_lora_fp32        peft LoRA (r=8, all linear layers) on transformers
                            LlamaForCausalLM, fp32 base; recording after the
                            model, the optimizer and 2 steps
  i36_lora_bf16             peft LoRA on transformers GPT2LMHeadModel with a
                            bf16 base (Conv1D layers, fan_in_fan_out); the
                            adapters fp32 (peft's autocast_adapter_dtype);
                            recording from before the model is built
  i36_frozen_backbone       torchvision ResNet-34, the backbone frozen, a new
                            head trained with AdamW; recording after the model
                            is on the GPU
  i36_input_opt             feature visualisation: a batch of images optimised
                            with Adam through torchvision's VGG-16 features
                            (frozen, eval); no module parameter is trained
  i36_adafactor             transformers T5ForConditionalGeneration with
                            torch.optim.Adafactor (factored second moments)
  i36_sgd_momentum          torchvision EfficientNet-B0, SGD momentum (Nesterov)
  i36_late_vit_fused_ckpt   timm ViT (vit_small_patch16_224, 6 blocks, 128 px),
                            activation checkpointing (set_grad_checkpointing),
                            AdamW(fused=True), zero_grad(set_to_none=False);
                            recording after the model, the optimizer and 2 steps
  i36_late_fsdp2_ws2        fully_shard (FSDP2, bf16 parameters) on transformers
                            LlamaForCausalLM at world size 2 through the fake
                            process group: rank 1's process; recording after 2
                            steps; sequence lengths differ per rank and step
  i36_late_fsdp2_ws4        the same at world size 4, rank 3's process
  i36_late_fsdp2_ws8        the same at world size 8, rank 5's process
  i36_lightning_bf16_accum  a LightningModule around LlamaForCausalLM,
                            Trainer(precision="bf16-mixed",
                            accumulate_grad_batches=2), AdamW
  i36_hf_trainer_gc         transformers Trainer on LlamaForCausalLM with
                            gradient checkpointing (use_reentrant=False)
  i36_generate_kv           transformers LlamaForCausalLM (bf16) generate(),
                            greedy, 160 new tokens: a DynamicCache grown token by
                            token
  i36_generate_static       the same with cache_implementation="static" (the
                            cache allocated once, at its full length)

Usage, on a CUDA machine:  python3 record_issue36.py OUT_DIR [NAME ...]

With SNAPDIFF_NAMED=1 the run is recorded through snapdiff's own recorder
(python/snapdiff/torch.py, watching the model; torch.optim optimizers are
seen through their step hooks) and written as NAME_named.pickle.gz with
NAME_named.pickle.tensors.json, the tensor list a user gets from
snapdiff.torch.record().

Each scenario runs in a process of its own (at most 180 s; the whole run stops
starting scenarios after SNAPDIFF_RECORD_BUDGET_S seconds, default 520) and
writes OUT_DIR/NAME.pickle.gz and OUT_DIR/NAME.truth.json; a scenario that
fails is reported and the others go on (exit 1 at the end if any failed).

The truth is record_categories.py's method, with its code (imported): the
recorder notes every tensor whose kind it knows (storage address, bytes, time)
and ties it to the history's own alloc at that address; `at_peak` holds the
bytes of each kind live at the first requested-bytes maximum. Kinds:
parameter (every module parameter and buffer, frozen or not, and a trainable
tensor that is not a module parameter: the optimised images), gradient,
optimizer_state, input, parameter_copy (autocast's cached casts the autograd
graph saved; FSDP2's unsharded parameters), kv_cache (generate()'s cache
tensors after each forward). Parts of `parameter`, given beside it in
`at_peak` and named in `at_peak_parts`: frozen_parameter (requires_grad
False), buffer, optimized_input. Rows are only noted from the moment
recording starts (notes taken before it are dropped), so a late start never
ties a tensor to an address reused in the window.
"""
import gzip
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_categories as rc  # noqa: E402

K, STEPS = rc.K, rc.STEPS
SUB = rc.Known()        # the parts of `parameter` (frozen_parameter, buffer, optimized_input)
PARTS = {"frozen_parameter": "parameter", "buffer": "parameter", "optimized_input": "parameter"}
KINDS = ("parameter", "gradient", "optimizer_state", "input", "parameter_copy")
START = {}
EXTRA = {}
# SNAPDIFF_NAMED=1: record through the Python package's recorder
# (snapdiff.torch.Recorder), which writes NAME_named.pickle.tensors.json
# beside the snapshot; the truth is taken the same way as without it.
NAMED = os.environ.get("SNAPDIFF_NAMED") in ("1", "discover")
# SNAPDIFF_NAMED=discover: the recorder is told of nothing and finds the
# modules and optimizers alive at each note itself (as the pytest plugin
# records), written as NAME_discovered.*.
DISCOVER = os.environ.get("SNAPDIFF_NAMED") == "discover"
REC = {}  # "r": the Recorder, "path": the snapshot it writes

SCENARIOS = ["i36_autocast_bf16_cpp", "i36_amp_fp16_scaler", "i36_amp_fp16_scaler_cpp", "i36_late_hand_adamw",
             "i36_late_lora_fp32", "i36_lora_bf16", "i36_frozen_backbone", "i36_input_opt", "i36_adafactor",
             "i36_sgd_momentum", "i36_late_vit_fused_ckpt", "i36_late_fsdp2_ws2", "i36_late_fsdp2_ws4",
             "i36_late_fsdp2_ws8",
             "i36_lightning_bf16_accum", "i36_hf_trainer_gc", "i36_generate_kv", "i36_generate_static",
             "i36_autocast_bf16_py", "i36_frozen_timm"]


# --- recording and truth --------------------------------------------------

def start(stacks="python"):
    """reset_peak_memory_stats, then _record_memory_history; drops notes
    taken before (they could tie to an address the window reuses)."""
    import torch
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    ms = torch.cuda.memory_stats()
    START["requested"] = ms.get("requested_bytes.all.current", 0)
    START["allocated"] = ms.get("allocated_bytes.all.current", 0)
    START["stacks"] = stacks
    K.rows.clear()
    SUB.rows.clear()
    STEPS["n"] = 0
    if NAMED:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
        import snapdiff.torch as sdt
        REC["r"] = sdt.Recorder(REC["path"], stacks=stacks, discover=DISCOVER).start()
    else:
        torch.cuda.memory._record_memory_history(max_entries=1_000_000, stacks=stacks)


def note_model(model):
    import torch
    if "r" in REC and not REC.get("watched") and not DISCOVER:
        REC["r"].watch(model)
        REC["watched"] = True
    ps = [p for p in model.parameters()]
    bs = [b for b in model.buffers() if torch.is_tensor(b)]
    K.note("parameter", ps + bs)
    SUB.note("frozen_parameter", [p for p in ps if not p.requires_grad])
    SUB.note("buffer", bs)


def window_peak(trace):
    cur, best = 0, 0
    for e in trace:
        if e["action"] == "alloc":
            cur += e["size"]
        elif e["action"] == "free_completed":
            cur -= e["size"]
        else:
            continue
        best = max(best, cur)
    return best


def at_peak_of(trace, rows):
    """record_categories.at_peak over other rows (it reads K.rows)."""
    saved = K.rows
    K.rows = rows
    try:
        return rc.at_peak(trace)
    finally:
        K.rows = saved


def finish(name, out, cfg, truncation="none"):
    import torch
    torch.cuda.synchronize()
    if "r" in REC:
        ms = torch.cuda.memory_stats()
        path = REC["r"].dump()
        with open(path, "rb") as f:
            snap = pickle.load(f)
        os.remove(path)
    else:
        snap = torch.cuda.memory._snapshot()
        ms = torch.cuda.memory_stats()
        torch.cuda.memory._record_memory_history(enabled=None)
    with gzip.open(os.path.join(out, name + ".pickle.gz"), "wb") as f:
        pickle.dump(snap, f)
    trace = snap["device_traces"][0]
    peak, kinds = rc.at_peak(trace)
    _, parts = at_peak_of(trace, SUB.rows)
    at = {"event_index": peak}
    for k in KINDS:
        at[k] = kinds.get(k, 0)
    for k, v in kinds.items():
        at.setdefault(k, v)
    for k in sorted({r[0] for r in SUB.rows}):
        at[k] = parts.get(k, 0)
    ann = [a for a in snap.get("external_annotations", []) if a.get("stage") == "START"]
    wp = window_peak(trace)
    cfg = dict(cfg)
    if START.get("stacks", "python") != "python":
        cfg["stacks"] = START["stacks"]
    truth = dict(rc.common_truth(name, cfg, snap, ms), **{
        "truncation": truncation,
        "optimizer_step_annotations": sum(1 for a in ann if a["name"].startswith("Optimizer.step")),
        "at_peak": at,
        "at_peak_parts": {k: PARTS[k] for k in at if k in PARTS},
        "at_peak_method": rc.AT_PEAK_METHOD,
        "requested_at_recording_start": START.get("requested", 0),
        "requested_at_peak": START.get("requested", 0) + wp,
        "recorder": "scripts/record/record_issue36.py",
    })
    if STEPS["n"] is not None:  # training steps taken (optimizer steps); none for inference
        truth["steps"] = STEPS["n"]
    truth.update(EXTRA)
    with open(os.path.join(out, name + ".truth.json"), "w") as f:
        json.dump(truth, f, indent=1, sort_keys=True)


def tensors_in(obj, depth=0, seen=None):
    """The CUDA tensors an object holds (lists, dicts, attributes), a few levels down."""
    import torch
    seen = set() if seen is None else seen
    if obj is None or id(obj) in seen or depth > 4:
        return []
    seen.add(id(obj))
    if torch.is_tensor(obj):
        return [obj] if obj.is_cuda else []
    if isinstance(obj, torch.nn.Module) or isinstance(obj, (str, bytes, int, float, bool)):
        return []
    if isinstance(obj, dict):
        items = list(obj.values())
    elif isinstance(obj, (list, tuple, set)):
        items = list(obj)
    elif hasattr(obj, "__dict__"):
        items = list(vars(obj).values())
    else:
        return []
    res = []
    for x in items:
        res.extend(tensors_in(x, depth + 1, seen))
    return res


def unwrap_opt(opt):
    """The torch optimizer inside a wrapper (accelerate's AcceleratedOptimizer,
    Lightning's LightningOptimizer)."""
    for _ in range(4):
        inner = getattr(opt, "optimizer", None) or getattr(opt, "_optimizer", None)
        if inner is None or inner is opt:
            break
        opt = inner
    return opt


# --- models ----------------------------------------------------------------

def llama_cfg(**kw):
    from transformers import LlamaConfig
    args = dict(hidden_size=512, intermediate_size=1376, num_hidden_layers=4, num_attention_heads=8,
                num_key_value_heads=4, vocab_size=8192, max_position_embeddings=1024)
    args.update(kw)
    return LlamaConfig(**args)


def lm_step(model, opt, ids, zero=True, set_to_none=True, note=True, amp=None, scaler=None):
    import torch
    if zero:
        opt.zero_grad(set_to_none=set_to_none)
    if note:
        K.note("input", [ids])
    if amp is not None:
        with torch.autocast("cuda", dtype=amp):
            loss = model(input_ids=ids, labels=ids).loss
        if note:
            rc.note_saved_casts(loss, list(model.parameters()))
    else:
        loss = model(input_ids=ids, labels=ids).loss
    (scaler.scale(loss) if scaler is not None else loss).backward()
    if note:
        K.grads(model)
    if scaler is not None:
        scaler.step(opt)
        scaler.update()
    else:
        opt.step()
    if note:
        K.state(opt)
        note_model(model)
        STEPS["n"] += 1


def run_autocast_bf16_cpp(name, out):
    autocast_bf16(name, out, "all")


def run_autocast_bf16_py(name, out):
    autocast_bf16(name, out, "python")


def autocast_bf16(name, out, stacks):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM
    start(stacks)
    cfg = Qwen2Config(hidden_size=512, intermediate_size=1408, num_hidden_layers=2, num_attention_heads=8,
                      num_key_value_heads=4, vocab_size=8192, max_position_embeddings=512, tie_word_embeddings=False)
    model = Qwen2ForCausalLM(cfg).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    note_model(model)
    for _ in range(2):
        lm_step(model, opt, torch.randint(0, 8192, (4, 256), device="cuda"), amp=torch.bfloat16)
    finish(name, out, {"model": "transformers Qwen2ForCausalLM 2x512 fp32", "amp": "bf16 autocast", "batch": 4,
                       "seq": 256, "optimizer": "AdamW"})


def amp_fp16_bert(name, out, layers, batch, steps, stacks):
    import torch
    from transformers import BertConfig, BertForMaskedLM
    start(stacks)
    cfg = BertConfig(hidden_size=256, num_hidden_layers=layers, num_attention_heads=4, intermediate_size=1024,
                     vocab_size=8192, max_position_embeddings=512)
    model = BertForMaskedLM(cfg).cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    scaler = torch.amp.GradScaler("cuda")
    note_model(model)
    skipped = 0
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        ids = torch.randint(5, 8192, (batch, 256), device="cuda")
        labels = torch.where(torch.rand(batch, 256, device="cuda") < 0.15, ids, torch.full_like(ids, -100))
        mask = torch.ones_like(ids)
        K.note("input", [ids, labels, mask])
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        rc.note_saved_casts(loss, list(model.parameters()))
        scaler.scale(loss).backward()
        K.grads(model)
        before = scaler.get_scale()
        scaler.step(opt)
        scaler.update()
        skipped += int(scaler.get_scale() < before)
        K.state(opt)
        note_model(model)
        STEPS["n"] += 1
    EXTRA["grad_scaler"] = {"scale_end": scaler.get_scale(), "steps_skipped": skipped}
    finish(name, out, {"model": f"transformers BertForMaskedLM {layers}x256 fp32", "amp": "fp16 autocast + GradScaler",
                       "batch": batch, "seq": 256, "optimizer": "AdamW"})


def run_amp_fp16_scaler(name, out):
    amp_fp16_bert(name, out, layers=4, batch=8, steps=3, stacks="python")


def run_amp_fp16_scaler_cpp(name, out):
    amp_fp16_bert(name, out, layers=2, batch=4, steps=2, stacks="all")


class HandAdamW:
    """AdamW written out in Python, as people write their own: not a
    torch.optim.Optimizer (no step annotation, no hooks); the moments are
    replaced by new tensors each step rather than updated in place."""

    def __init__(self, params, lr=3e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1):
        self.params = [p for p in params if p.requires_grad]
        self.lr, self.betas, self.eps, self.wd = lr, betas, eps, weight_decay
        self.state = {}

    def zero_grad(self, set_to_none=True):
        for p in self.params:
            p.grad = None

    def step(self):
        import torch
        b1, b2 = self.betas
        with torch.no_grad():
            for p in self.params:
                g = p.grad
                if g is None:
                    continue
                state = self.state.get(p)
                if state is None:
                    state = self.state[p] = {"t": 0, "m": torch.zeros_like(p), "v": torch.zeros_like(p)}
                state["t"] += 1
                t = state["t"]
                state["m"] = b1 * state["m"] + (1 - b1) * g
                state["v"] = b2 * state["v"] + (1 - b2) * g * g
                mhat = state["m"] / (1 - b1 ** t)
                vhat = state["v"] / (1 - b2 ** t)
                p.mul_(1 - self.lr * self.wd)
                p.sub_(self.lr * mhat / (vhat.sqrt() + self.eps))


def run_late_hand_adamw(name, out):
    import torch
    from transformers import MistralConfig, MistralForCausalLM
    cfg = MistralConfig(hidden_size=512, intermediate_size=1376, num_hidden_layers=4, num_attention_heads=8,
                        num_key_value_heads=4, vocab_size=8192, max_position_embeddings=1024, sliding_window=None)
    model = MistralForCausalLM(cfg).cuda()
    opt = HandAdamW(model.parameters())
    for _ in range(2):
        lm_step(model, opt, torch.randint(0, 8192, (8, 256), device="cuda"), note=False)
    start()
    if "r" in REC and not DISCOVER:  # not a torch.optim optimizer: the recorder is told of it
        REC["r"].watch(optimizer=opt)
    note_model(model)
    K.grads(model)
    K.state(opt)
    for _ in range(3):
        lm_step(model, opt, torch.randint(0, 8192, (8, 256), device="cuda"))
    finish(name, out, {"model": "transformers MistralForCausalLM 4x512", "batch": 8, "seq": 256,
                       "optimizer": "hand-written AdamW (a Python loop; state m, v replaced each step)",
                       "recording": "after model, optimizer and 2 warm-up steps"}, "late_start")


LORA_LLAMA = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def run_late_lora_fp32(name, out):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaForCausalLM
    model = LlamaForCausalLM(llama_cfg()).cuda()
    model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, target_modules=LORA_LLAMA,
                                             task_type="CAUSAL_LM"))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    for _ in range(2):
        lm_step(model, opt, torch.randint(0, 8192, (8, 256), device="cuda"), note=False)
    start()
    note_model(model)
    K.grads(model)
    K.state(opt)
    for _ in range(3):
        lm_step(model, opt, torch.randint(0, 8192, (8, 256), device="cuda"))
    EXTRA["trainable_parameters"] = sum(p.numel() for p in model.parameters() if p.requires_grad)
    EXTRA["frozen_parameters"] = sum(p.numel() for p in model.parameters() if not p.requires_grad)
    finish(name, out, {"model": "transformers LlamaForCausalLM 4x512 fp32 + peft LoRA r=8 on all linear layers",
                       "batch": 8, "seq": 256, "optimizer": "AdamW (adapters)",
                       "recording": "after model, optimizer and 2 warm-up steps"}, "late_start")


def run_lora_bf16(name, out):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import GPT2Config, GPT2LMHeadModel
    start()
    cfg = GPT2Config(n_layer=4, n_embd=512, n_head=8, vocab_size=8192, n_positions=512, resid_pdrop=0.0,
                     embd_pdrop=0.0, attn_pdrop=0.0)
    model = GPT2LMHeadModel(cfg).to(device="cuda", dtype=torch.bfloat16)
    model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.05, fan_in_fan_out=True,
                                             target_modules=["c_attn", "c_proj", "c_fc"], task_type="CAUSAL_LM"))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    note_model(model)
    for _ in range(3):
        lm_step(model, opt, torch.randint(0, 8192, (8, 256), device="cuda"))
    EXTRA["adapter_dtype"] = str(next(p for p in model.parameters() if p.requires_grad).dtype)
    EXTRA["trainable_parameters"] = sum(p.numel() for p in model.parameters() if p.requires_grad)
    EXTRA["frozen_parameters"] = sum(p.numel() for p in model.parameters() if not p.requires_grad)
    finish(name, out, {"model": "transformers GPT2LMHeadModel 4x512 bf16 + peft LoRA r=16 (c_attn, c_proj, c_fc)",
                       "batch": 8, "seq": 256, "optimizer": "AdamW (adapters)"})


def run_frozen_backbone(name, out):
    import torch
    import torchvision
    model = torchvision.models.resnet34(weights=None)
    for p in model.parameters():
        p.requires_grad_(False)
    model.fc = torch.nn.Linear(model.fc.in_features, 37)
    model = model.cuda().train()
    start()
    opt = torch.optim.AdamW(model.fc.parameters(), lr=1e-3)
    note_model(model)
    for _ in range(4):
        x = torch.randn(64, 3, 160, 160, device="cuda")
        y = torch.randint(0, 37, (64,), device="cuda")
        K.note("input", [x, y])
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        K.grads(model)
        opt.step()
        K.state(opt)
        note_model(model)
        STEPS["n"] += 1
    finish(name, out, {"model": "torchvision resnet34, backbone frozen (requires_grad False), new fc head (37)",
                       "batch": 64, "image": 160, "optimizer": "AdamW (head)",
                       "recording": "after the model is on the GPU"}, "late_start")


def run_frozen_timm(name, out):
    import timm
    import torch
    model = timm.create_model("convnext_tiny", pretrained=False, num_classes=10).cuda().train()
    for p in model.parameters():
        p.requires_grad_(False)
    for p in model.get_classifier().parameters():
        p.requires_grad_(True)
    start()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    note_model(model)
    for _ in range(3):
        x = torch.randn(32, 3, 128, 128, device="cuda")
        y = torch.randint(0, 10, (32,), device="cuda")
        K.note("input", [x, y])
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        K.grads(model)
        opt.step()
        K.state(opt)
        note_model(model)
        STEPS["n"] += 1
    EXTRA["trainable_parameters"] = sum(p.numel() for p in model.parameters() if p.requires_grad)
    EXTRA["frozen_parameters"] = sum(p.numel() for p in model.parameters() if not p.requires_grad)
    finish(name, out, {"model": "timm convnext_tiny, backbone frozen, head (10 classes) trained",
                       "batch": 32, "image": 128, "optimizer": "AdamW (head)",
                       "recording": "after the model is on the GPU"}, "late_start")


def run_input_opt(name, out):
    import torch
    import torchvision
    vgg = torchvision.models.vgg16(weights=None).features[:23].cuda().eval()
    vgg.requires_grad_(False)
    start()
    note_model(vgg)
    img = (torch.rand(4, 3, 256, 256, device="cuda") * 0.2 + 0.4).requires_grad_(True)
    opt = torch.optim.Adam([img], lr=0.05)
    K.note("parameter", [img])
    SUB.note("optimized_input", [img])
    for _ in range(5):
        opt.zero_grad(set_to_none=True)
        feats = vgg(img)
        tv = (img[:, :, 1:, :] - img[:, :, :-1, :]).abs().mean() + (img[:, :, :, 1:] - img[:, :, :, :-1]).abs().mean()
        loss = -feats[:, 42].mean() + 0.1 * tv
        loss.backward()
        K.note("gradient", [img.grad])
        opt.step()
        K.state(opt)
        K.note("parameter", [img])
        SUB.note("optimized_input", [img])
        with torch.no_grad():
            img.clamp_(0, 1)
        STEPS["n"] += 1
    finish(name, out, {"model": "torchvision vgg16 features[:23] (frozen, eval)",
                       "optimised": "a 4x3x256x256 image batch (requires_grad), Adam lr 0.05",
                       "loss": "-mean activation of channel 42 + 0.1 total variation",
                       "recording": "after the network is on the GPU"}, "late_start")


def run_adafactor(name, out):
    import torch
    from transformers import T5Config, T5ForConditionalGeneration
    start()
    cfg = T5Config(d_model=256, d_kv=32, d_ff=1024, num_layers=3, num_decoder_layers=3, num_heads=8,
                   vocab_size=8192, dropout_rate=0.0, decoder_start_token_id=0, pad_token_id=0)
    model = T5ForConditionalGeneration(cfg).cuda()
    opt = torch.optim.Adafactor(model.parameters(), lr=1e-2)
    note_model(model)
    for _ in range(3):
        opt.zero_grad(set_to_none=True)
        src = torch.randint(1, 8192, (16, 256), device="cuda")
        tgt = torch.randint(1, 8192, (16, 128), device="cuda")
        K.note("input", [src, tgt])
        model(input_ids=src, labels=tgt).loss.backward()
        K.grads(model)
        opt.step()
        K.state(opt)
        note_model(model)
        STEPS["n"] += 1
    finish(name, out, {"model": "transformers T5ForConditionalGeneration 3+3 x 256", "batch": 16, "src": 256,
                       "tgt": 128, "optimizer": "torch.optim.Adafactor"})


def run_sgd_momentum(name, out):
    import torch
    import torchvision
    start()
    model = torchvision.models.efficientnet_b0(num_classes=100).cuda().train()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=4e-5)
    note_model(model)
    for _ in range(4):
        x = torch.randn(48, 3, 160, 160, device="cuda")
        y = torch.randint(0, 100, (48,), device="cuda")
        K.note("input", [x, y])
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        K.grads(model)
        opt.step()
        K.state(opt)
        note_model(model)
        STEPS["n"] += 1
    finish(name, out, {"model": "torchvision efficientnet_b0 (100 classes)", "batch": 48, "image": 160,
                       "optimizer": "SGD momentum 0.9 nesterov"})


def run_late_vit_fused_ckpt(name, out):
    import timm
    import torch
    model = timm.create_model("vit_small_patch16_224", pretrained=False, num_classes=100, depth=6,
                              img_size=128).cuda().train()
    model.set_grad_checkpointing(True)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)

    def step(note):
        opt.zero_grad(set_to_none=False)
        x = torch.randn(48, 3, 128, 128, device="cuda")
        y = torch.randint(0, 100, (48,), device="cuda")
        if note:
            K.note("input", [x, y])
        torch.nn.functional.cross_entropy(model(x), y).backward()
        if note:
            K.grads(model)
        opt.step()
        if note:
            K.state(opt)
            note_model(model)
            STEPS["n"] += 1
    for _ in range(2):
        step(False)
    start()
    note_model(model)
    K.grads(model)
    K.state(opt)
    for _ in range(3):
        step(True)
    finish(name, out, {"model": "timm vit_small_patch16_224, depth 6, img 128, 100 classes",
                       "checkpointing": "model.set_grad_checkpointing(True)", "batch": 48,
                       "optimizer": "AdamW fused", "zero_grad": "set_to_none=False",
                       "recording": "after model, optimizer and 2 warm-up steps; gradients kept"}, "late_start")


def fsdp2_fake(name, out, ws, rank):
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from torch.testing._internal.distributed.fake_pg import FakeStore
    from transformers import LlamaForCausalLM
    torch.cuda.set_device(0)
    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=ws)
    mesh = init_device_mesh("cuda", (ws,))
    model = LlamaForCausalLM(llama_cfg(num_hidden_layers=4, vocab_size=8003))
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in model.model.layers:
        fully_shard(layer, mesh=mesh, mp_policy=mp)
    fully_shard(model, mesh=mesh, mp_policy=mp)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    seqs = [256, 192, 320, 224]

    def ids_for(step):
        return torch.randint(0, 8003, (4, seqs[(rank + step) % 4]), device="cuda")
    for i in range(2):
        lm_step(model, opt, ids_for(i), note=False)
    start()
    rc.note_unsharded(model)
    note_model(model)
    K.grads(model)
    K.state(opt)
    used = []
    for i in range(2, 5):
        ids = ids_for(i)
        used.append(list(ids.shape))
        lm_step(model, opt, ids)
    EXTRA["rank"], EXTRA["world_size"] = rank, ws
    EXTRA["local_shard_bytes_end"] = {
        "parameter": sum(p.to_local().untyped_storage().nbytes() for p in model.parameters()),
        "optimizer_state": sum(v.to_local().untyped_storage().nbytes() if hasattr(v, "to_local")
                               else v.untyped_storage().nbytes()
                               for s in opt.state.values() for v in s.values()
                               if torch.is_tensor(v) and v.is_cuda)}
    finish(name, out, {"model": "transformers LlamaForCausalLM 4x512, vocab 8003",
                       "fsdp": f"fully_shard per layer and root, bf16 params, fp32 reduce; fake process group, "
                               f"world size {ws}, this process rank {rank}",
                       "batches": used, "optimizer": "AdamW",
                       "recording": "after model, optimizer and 2 warm-up steps"}, "late_start")


def run_late_fsdp2_ws2(name, out):
    fsdp2_fake(name, out, 2, 1)


def run_late_fsdp2_ws4(name, out):
    fsdp2_fake(name, out, 4, 3)


def run_late_fsdp2_ws8(name, out):
    fsdp2_fake(name, out, 8, 5)


def run_lightning(name, out):
    import lightning as L
    import torch
    from transformers import LlamaForCausalLM

    class LitLM(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = LlamaForCausalLM(llama_cfg())

        def training_step(self, batch, batch_idx):
            ids = batch[0]
            K.note("input", [ids])
            loss = self.model(input_ids=ids, labels=ids).loss
            rc.note_saved_casts(loss, list(self.model.parameters()))
            return loss

        def on_train_start(self):
            note_model(self.model)

        def on_after_backward(self):
            K.grads(self.model)

        def on_before_optimizer_step(self, optimizer):
            K.grads(self.model)

        def on_train_batch_end(self, outputs, batch, batch_idx):
            for o in self.trainer.optimizers:
                K.state(unwrap_opt(o))
            note_model(self.model)
            EXTRA["micro_batches"] = EXTRA.get("micro_batches", 0) + 1

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-4)

    data = torch.utils.data.TensorDataset(torch.randint(0, 8192, (24, 256)))
    loader = torch.utils.data.DataLoader(data, batch_size=4, shuffle=False)
    lit = LitLM()
    root = tempfile.mkdtemp()
    start()
    trainer = L.Trainer(accelerator="gpu", devices=1, precision="bf16-mixed", accumulate_grad_batches=2, max_steps=3,
                        logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, num_sanity_val_steps=0, default_root_dir=root)
    trainer.fit(lit, loader)
    EXTRA["lightning"] = L.__version__
    STEPS["n"] = trainer.global_step  # optimizer steps: one per two micro-batches
    finish(name, out, {"model": "transformers LlamaForCausalLM 4x512 in a LightningModule",
                       "trainer": "lightning Trainer(precision='bf16-mixed', accumulate_grad_batches=2, max_steps=3)",
                       "batch": 4, "seq": 256, "optimizer": "AdamW",
                       "recording": "before Trainer.fit (model on the CPU)"})


def run_hf_trainer_gc(name, out):
    import torch
    import transformers
    from transformers import LlamaForCausalLM, Trainer, TrainerCallback, TrainingArguments

    model = LlamaForCausalLM(llama_cfg())
    ids = torch.randint(0, 8192, (24, 256))
    ds = [{"input_ids": t, "labels": t} for t in ids]

    def pre(mod, args, kwargs):
        K.note("input", [v for v in kwargs.values() if torch.is_tensor(v)] + [a for a in args if torch.is_tensor(a)])
    model.register_forward_pre_hook(pre, with_kwargs=True)

    class Notes(TrainerCallback):
        def on_train_begin(self, args, state, control, model=None, **kw):
            note_model(model)

        def on_pre_optimizer_step(self, args, state, control, model=None, **kw):
            K.grads(model)

        def on_optimizer_step(self, args, state, control, model=None, optimizer=None, **kw):
            K.state(unwrap_opt(optimizer))
            note_model(model)

        def on_step_end(self, args, state, control, model=None, optimizer=None, **kw):
            K.state(unwrap_opt(optimizer))
            note_model(model)
            STEPS["n"] += 1

    args = TrainingArguments(output_dir=tempfile.mkdtemp(), per_device_train_batch_size=8, max_steps=3,
                             gradient_checkpointing=True, gradient_checkpointing_kwargs={"use_reentrant": False},
                             learning_rate=1e-4, optim="adamw_torch", report_to="none", save_strategy="no",
                             logging_strategy="no", disable_tqdm=True, dataloader_num_workers=0, seed=0)
    start()
    trainer = Trainer(model=model, args=args, train_dataset=ds, callbacks=[Notes()])
    trainer.train()
    EXTRA["transformers"] = transformers.__version__
    finish(name, out, {"model": "transformers LlamaForCausalLM 4x512",
                       "trainer": "transformers Trainer, gradient_checkpointing=True (use_reentrant False), "
                                  "optim adamw_torch, max_steps 3",
                       "batch": 8, "seq": 256, "recording": "before Trainer() (model on the CPU)"})


def generate_kv(name, out, static):
    import torch
    import transformers
    from transformers import LlamaForCausalLM
    start()
    cfg = llama_cfg(num_key_value_heads=8, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    model = LlamaForCausalLM(cfg).to(device="cuda", dtype=torch.bfloat16).eval()
    note_model(model)
    seen = {"len": 0}

    def after(mod, args, kwargs, output):
        pkv = getattr(output, "past_key_values", None)
        ts = tensors_in(pkv)
        K.note("kv_cache", ts)
        seen["len"] += 1
        seen["bytes"] = sum(t.untyped_storage().nbytes() for t in ts)
    model.register_forward_hook(after, with_kwargs=True)
    batch, prompt, new = 32, 32, 160
    ids = torch.randint(3, 8192, (batch, prompt), device="cuda")
    mask = torch.ones_like(ids)
    K.note("input", [ids, mask])
    kw = dict(max_new_tokens=new, min_new_tokens=new, do_sample=False, use_cache=True, pad_token_id=0)
    if static:
        kw.update(cache_implementation="static", disable_compile=True)
    with torch.no_grad():
        gen = model.generate(input_ids=ids, attention_mask=mask, **kw)
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    STEPS["n"] = None  # inference: no training steps
    EXTRA["transformers"] = transformers.__version__
    EXTRA["kv_cache"] = {
        "bytes_per_token": 2 * cfg.num_hidden_layers * batch * cfg.num_key_value_heads * head_dim * 2,
        "bytes_per_token_per_sequence": 2 * cfg.num_hidden_layers * cfg.num_key_value_heads * head_dim * 2,
        "forwards": seen["len"], "bytes_after_last_forward": seen.get("bytes", 0),
        "generated_shape": list(gen.shape),
        "implementation": "static" if static else "dynamic"}
    finish(name, out, {"model": "transformers LlamaForCausalLM 4x512 (8 KV heads) bf16, eval",
                       "generate": f"greedy, batch {batch}, prompt {prompt}, {new} new tokens, "
                                   + ("cache_implementation='static'" if static else "DynamicCache (default)"),
                       "recording": "before the model is built"})


def run_generate_kv(name, out):
    generate_kv(name, out, static=False)


def run_generate_static(name, out):
    generate_kv(name, out, static=True)


RUNNERS = {"i36_autocast_bf16_cpp": run_autocast_bf16_cpp, "i36_amp_fp16_scaler": run_amp_fp16_scaler,
           "i36_amp_fp16_scaler_cpp": run_amp_fp16_scaler_cpp, "i36_late_hand_adamw": run_late_hand_adamw,
           "i36_late_lora_fp32": run_late_lora_fp32, "i36_lora_bf16": run_lora_bf16,
           "i36_frozen_backbone": run_frozen_backbone, "i36_input_opt": run_input_opt,
           "i36_adafactor": run_adafactor, "i36_sgd_momentum": run_sgd_momentum,
           "i36_late_vit_fused_ckpt": run_late_vit_fused_ckpt, "i36_late_fsdp2_ws2": run_late_fsdp2_ws2,
           "i36_late_fsdp2_ws4": run_late_fsdp2_ws4,
           "i36_late_fsdp2_ws8": run_late_fsdp2_ws8, "i36_lightning_bf16_accum": run_lightning,
           "i36_hf_trainer_gc": run_hf_trainer_gc, "i36_generate_kv": run_generate_kv,
           "i36_generate_static": run_generate_static, "i36_autocast_bf16_py": run_autocast_bf16_py,
           "i36_frozen_timm": run_frozen_timm}
ENV = {"TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
       "WANDB_DISABLED": "true", "PYTHONUNBUFFERED": "1"}


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "--one":
        out, name = sys.argv[2], sys.argv[3]
        import torch
        torch.manual_seed(0)
        written = name + ("_discovered" if DISCOVER else "_named") if NAMED else name
        REC["path"] = os.path.join(out, written + ".pickle")
        RUNNERS[name](written, out)
        try:
            import torch.distributed as dist
            if dist.is_initialized():
                dist.destroy_process_group()
        except Exception:
            pass
        return 0
    out = sys.argv[1]
    names = sys.argv[2:] or SCENARIOS
    os.makedirs(out, exist_ok=True)
    budget = float(os.environ.get("SNAPDIFF_RECORD_BUDGET_S", "520"))
    t_all = time.time()
    failed = []
    for name in names:
        left = budget - (time.time() - t_all)
        if left < 20:
            print(f"== {name}: not started (budget spent)", flush=True)
            failed.append(name)
            continue
        t0 = time.time()
        try:
            p = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", out, name],
                               env=dict(os.environ, **ENV), capture_output=True, text=True,
                               timeout=min(180, left))
            rc_, so, se = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            rc_ = "timeout"
            so = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            se = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        print(f"== {name}: exit {rc_} in {time.time() - t0:.1f} s", flush=True)
        if rc_ != 0:
            failed.append(name)
            print(so[-2000:], se[-5000:], flush=True)
    print("failed:", " ".join(failed) if failed else "none", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
