"""PyTorch's own figures beside each test, for the provenance log.

Before a test: every cached block is returned (empty_cache) and the peak
counters are reset, so the recording the plugin starts right after covers
everything the test allocates; after it, memory_stats()' peaks go to
$TRUTH_DIR/<test>.json, to compare with the peaks snapdiff's verdict gives.
"""
import json
import os

import pytest
import torch


@pytest.fixture(autouse=True)
def truth(request):
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    yield
    torch.cuda.synchronize()
    stats = torch.cuda.memory_stats()
    out = os.environ.get("TRUTH_DIR")
    if out:
        os.makedirs(out, exist_ok=True)
        keep = {k: v for k, v in stats.items() if k.endswith(".all.peak") or k.endswith(".all.current")}
        with open(os.path.join(out, request.node.name + ".json"), "w") as f:
            json.dump({"test": request.node.nodeid, "memory_stats": keep,
                       "max_memory_allocated": torch.cuda.max_memory_allocated(),
                       "max_memory_reserved": torch.cuda.max_memory_reserved()}, f, indent=1)
