#!/usr/bin/env python3
"""Records real runs for the questions users bring to snapdiff (leaks and
growth, out-of-memory errors, the live set at a moment, diffs across stack
modes), with PyTorch's own figures from the same process:

  ans_leak_logits_gpt2  transformers' GPT-2 (vocab 50257), AdamW, 6 iterations;
                        the loop keeps each iteration's `out.logits` in a list
                        (batch 8 x seq 512 x 50257 fp32 = 785 MiB a step)
  ans_leak_resnet       torchvision's ResNet-18, SGD, 8 iterations; a helper
                        keeps a 48 MiB buffer of each batch's statistics
  ans_oom_cap_gpt2      GPT-2 under torch.cuda.set_per_process_memory_fraction;
                        the batch doubles each iteration until the allocator
                        raises OutOfMemoryError (caught; the snapshot after it)
  ans_oom_frag          variable-length requests that split one cached
                        segment into 20 MiB pieces; every other piece is freed,
                        then a 400 MiB request fails under a memory cap though
                        the cache holds more than that in free blocks
  ans_gpt2_py           transformers' GPT-2, AdamW, 2 iterations, stacks="python"
  ans_gpt2_cpp          the same run (same seed, same shapes), stacks="all"

Usage, on a CUDA machine:  python3 record_answers.py OUT_DIR [NAME ...]

Each scenario runs in its own process and writes OUT_DIR/NAME.pickle.gz (the
snapshot, gzip-compressed) and OUT_DIR/NAME.truth.json: memory_stats() at the
end, `iterations` (memory_allocated(), memory_reserved() and time_us at each
iteration's start and end, the clock of the snapshot's time_us), `at_peak`
(tensors the recorder knows the kind of, tied to the history's allocs as in
record_categories.py; `retained` = what the loop keeps) and, for OOMs, `oom`:
the exception's text, memory_stats(), mem_get_info() and the cap, taken in the
except block.
"""
import gzip
import json
import os
import pickle
import sys

import record_categories as rc
import scenario_runner

SCENARIOS = ["ans_leak_logits_gpt2", "ans_leak_resnet", "ans_oom_cap_gpt2", "ans_oom_frag", "ans_gpt2_py",
             "ans_gpt2_cpp"]
K = rc.K
ITERS = []


def mark(i, where):
    import torch
    torch.cuda.synchronize()
    row = {"memory_allocated": torch.cuda.memory_allocated(), "memory_reserved": torch.cuda.memory_reserved(),
           "time_us": rc.now_us()}
    if where == "start":
        ITERS.append({"iteration": i, "start": row})
    else:
        ITERS[-1]["end"] = row


def finish(name, out, cfg, extra=None):
    import torch
    torch.cuda.synchronize()
    snap = torch.cuda.memory._snapshot()
    ms = torch.cuda.memory_stats()
    torch.cuda.memory._record_memory_history(enabled=None)
    with gzip.open(os.path.join(out, name + ".pickle.gz"), "wb") as f:
        pickle.dump(snap, f)
    peak, kinds = rc.at_peak(snap["device_traces"][0])
    truth = dict(rc.common_truth(name, cfg, snap, ms), **{
        "iterations": ITERS,
        "at_peak": {"event_index": peak, **{k: kinds.get(k, 0) for k in
                                            ("parameter", "gradient", "optimizer_state", "input", "retained")}},
        "at_peak_method": rc.AT_PEAK_METHOD,
    })
    if extra:
        truth.update(extra)
    with open(os.path.join(out, name + ".truth.json"), "w") as f:
        json.dump(truth, f, indent=1, sort_keys=True)


def gpt2(layers, embd, vocab, positions=1024):
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(n_layer=layers, n_embd=embd, n_head=max(1, embd // 64), vocab_size=vocab, n_positions=positions,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    return GPT2LMHeadModel(cfg).cuda()


def run_leak_logits(name, out):
    import torch
    rc.start_recording()
    model = gpt2(2, 256, 50257)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    K.params(model)
    all_logits = []  # the bug: keeps every iteration's logits (and nothing frees them)
    retained = []
    for i in range(6):
        mark(i, "start")
        opt.zero_grad(set_to_none=True)
        ids = torch.randint(0, 50257, (8, 512), device="cuda")
        K.note("input", [ids])
        out_ = model(input_ids=ids, labels=ids)
        out_.loss.backward()
        all_logits.append(out_.logits)
        K.note("retained", [out_.logits])
        retained.append(out_.logits.untyped_storage().nbytes())
        K.grads(model)
        opt.step()
        K.state(opt)
        mark(i, "end")
    finish(name, out, {"model": "transformers GPT2LMHeadModel 2x256, vocab 50257", "batch": 8, "seq": 512,
                       "optimizer": "AdamW", "leak": "all_logits.append(out.logits) every iteration"},
           {"retained_per_iteration": retained})


def record_batch_stats(store, x):
    import torch
    # A per-batch statistics buffer kept "for later": 48 MiB that is never freed.
    buf = torch.empty(48 << 20, dtype=torch.uint8, device="cuda")
    buf[: x.numel()].copy_(x.flatten().to(torch.uint8)[: buf.numel()])
    store.append(buf)
    return buf


def run_leak_resnet(name, out):
    import torch
    import torchvision
    rc.start_recording()
    model = torchvision.models.resnet18(num_classes=100).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    K.params(model)
    store, retained = [], []
    for i in range(8):
        mark(i, "start")
        x = torch.randn(32, 3, 96, 96, device="cuda")
        y = torch.randint(0, 100, (32,), device="cuda")
        K.note("input", [x, y])
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        buf = record_batch_stats(store, x)
        K.note("retained", [buf])
        retained.append(buf.untyped_storage().nbytes())
        K.grads(model)
        opt.step()
        K.state(opt)
        mark(i, "end")
    finish(name, out, {"model": "torchvision resnet18", "batch": 32, "image": 96, "optimizer": "SGD momentum",
                       "leak": "record_batch_stats keeps a 48 MiB buffer per iteration"},
           {"retained_per_iteration": retained})


def oom_facts(e, cap_fraction):
    import torch
    free, total = torch.cuda.mem_get_info()
    return {"message": str(e).splitlines()[0] if str(e) else "", "text": str(e),
            "memory_allocated": torch.cuda.memory_allocated(), "memory_reserved": torch.cuda.memory_reserved(),
            "max_memory_allocated": torch.cuda.max_memory_allocated(),
            "max_memory_reserved": torch.cuda.max_memory_reserved(),
            "memory_stats": dict(torch.cuda.memory_stats()), "mem_get_info": [free, total],
            "fraction": cap_fraction, "cap_bytes": int(total * cap_fraction)}


def run_oom_cap(name, out):
    import torch
    free, total = torch.cuda.mem_get_info()
    cap = 3 << 30
    fraction = cap / total
    torch.cuda.set_per_process_memory_fraction(fraction)
    rc.start_recording()
    model = gpt2(4, 512, 8192)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    K.params(model)
    facts = None
    batch = 4
    for i in range(8):
        mark(i, "start")
        try:
            opt.zero_grad(set_to_none=True)
            ids = torch.randint(0, 8192, (batch, 512), device="cuda")
            K.note("input", [ids])
            model(input_ids=ids, labels=ids).loss.backward()
            K.grads(model)
            opt.step()
            K.state(opt)
        except torch.OutOfMemoryError as e:
            facts = oom_facts(e, fraction)
            facts["iteration"] = i
            facts["batch"] = batch
            ITERS[-1]["oom"] = True
            break
        mark(i, "end")
        batch *= 2
    finish(name, out, {"model": "transformers GPT2LMHeadModel 4x512", "seq": 512, "optimizer": "AdamW",
                       "batch": "4, doubling each iteration", "cap": "set_per_process_memory_fraction(3 GiB / total)"},
           {"oom": facts})


def run_oom_frag(name, out):
    import torch
    free, total = torch.cuda.mem_get_info()
    cap = (1 << 30) + (200 << 20)
    fraction = cap / total
    torch.cuda.set_per_process_memory_fraction(fraction)
    rc.start_recording()
    facts = None
    mark(0, "start")
    # One 1000 MiB segment, cached after its first tenant is gone.
    first = torch.empty(1000 << 20, dtype=torch.uint8, device="cuda")
    del first
    # Requests of 20 MiB each are carved out of it; every other one ends.
    pieces = [torch.empty(20 << 20, dtype=torch.uint8, device="cuda") for _ in range(50)]
    kept = pieces[1::2]
    del pieces
    try:
        big = torch.empty(400 << 20, dtype=torch.uint8, device="cuda")
        del big
    except torch.OutOfMemoryError as e:
        facts = oom_facts(e, fraction)
        facts["asked"] = 400 << 20
        ITERS[-1]["oom"] = True
    mark(0, "end")
    del kept
    finish(name, out, {"model": "plain tensors: one 1000 MiB segment split into 50 x 20 MiB, every other freed",
                       "cap": "set_per_process_memory_fraction(1200 MiB / total)"}, {"oom": facts})


def gpt2_pair(name, out, stacks):
    import torch
    rc.start_recording(stacks)
    model = gpt2(2, 512, 8192)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    K.params(model)
    for i in range(2):
        mark(i, "start")
        opt.zero_grad(set_to_none=True)
        ids = torch.randint(0, 8192, (4, 256), device="cuda")
        K.note("input", [ids])
        model(input_ids=ids, labels=ids).loss.backward()
        K.grads(model)
        opt.step()
        K.state(opt)
        mark(i, "end")
    finish(name, out, {"model": "transformers GPT2LMHeadModel 2x512", "batch": 4, "seq": 256, "optimizer": "AdamW",
                       "stacks": stacks, "pair": "ans_gpt2_py and ans_gpt2_cpp are the same run"})


RUNNERS = {"ans_leak_logits_gpt2": run_leak_logits, "ans_leak_resnet": run_leak_resnet,
           "ans_oom_cap_gpt2": run_oom_cap, "ans_oom_frag": run_oom_frag,
           "ans_gpt2_py": lambda n, o: gpt2_pair(n, o, "python"), "ans_gpt2_cpp": lambda n, o: gpt2_pair(n, o, "all")}


if __name__ == "__main__":
    sys.exit(scenario_runner.main(__file__, RUNNERS, SCENARIOS))
