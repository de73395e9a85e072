"""GPU memory tests of a GPT-2 training step (Hugging Face transformers),
gated by pytest-snapdiff on the H200 (scripts/record/run_pytest_gpt2.sh).

GPT2_BATCH sets the batch size (default 8): the run script writes the
budget at 8, checks it at 8 (passes) and at 12 (fails by the increase).
"""
import os
import subprocess
import sys

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

BATCH = int(os.environ.get("GPT2_BATCH", "8"))
SEQ = 512


def train_steps(batch: int, steps: int = 3, layers: int = 12) -> float:
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=layers, n_positions=1024)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    loss = None
    for _ in range(steps):
        ids = torch.randint(0, model.config.vocab_size, (batch, SEQ), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    return float(loss)


# The committed budget: written with --snapdiff-update-budgets, then checked.
@pytest.mark.gpu_memory(budget="budgets/test_train_step.json", max_increase="2%")
def test_train_step():
    assert train_steps(BATCH) > 0


# Ceilings the step does not fit: this test fails on purpose, to show the
# failure message and the artifacts kept.
@pytest.mark.gpu_memory(max_peak="2 GiB", limits={"activation": "1 GiB"})
def test_train_step_tight():
    assert train_steps(BATCH) > 0


# Inference under no_grad within a ceiling: passes.
@pytest.mark.gpu_memory(max_peak="4 GiB", limits={"gradient": "0 B", "optimizer_state": "0 B"})
def test_forward_no_grad():
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=12, n_positions=1024)).cuda().eval()
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        for _ in range(3):
            ids = torch.randint(0, model.config.vocab_size, (BATCH, SEQ), device="cuda")
            model(input_ids=ids).logits.float().sum().item()


CHILD = r"""
import sys
sys.path.insert(0, {here!r})
import pytest_snapdiff, torch
from test_gpt2_memory import train_steps
rank, batch = int(sys.argv[1]), int(sys.argv[2])
with pytest_snapdiff.record_rank(rank):
    train_steps(batch, layers=6)
"""


# Two processes (ranks 0 and 1, uneven batches) record themselves; the
# plugin checks the folder of ranks: rank 1 (batch 16) is far over the
# ceiling, rank 0 (batch 4) just over it.
@pytest.mark.gpu_memory(ranks=True, max_peak="3 GiB")
def test_two_ranks_uneven():
    code = CHILD.format(here=os.path.dirname(os.path.abspath(__file__)))
    for rank, batch in ((0, 4), (1, 16)):
        subprocess.run([sys.executable, "-c", code, str(rank), str(batch)], check=True)
