"""Loads snapcapture's pickles with PyTorch's own tools: pickle.load, then
torch.cuda._memory_viz's segment and trace plots and its text summaries.
Usage: python3 check_pickle_torch.py FILE.pickle..."""
import pickle
import sys

import torch
from torch.cuda import _memory_viz as mv

failed = 0
for path in sys.argv[1:]:
    with open(path, "rb") as f:
        snap = pickle.load(f)
    n_events = sum(len(t) for t in snap["device_traces"])
    print(f"{path}: torch {torch.__version__}: {len(snap['segments'])} segments, {n_events} trace entries")
    for name in ("segment_plot", "trace_plot", "segsum", "trace"):
        fn = getattr(mv, name, None)
        if fn is None:
            print(f"  {name}: not in this torch")
            continue
        try:
            out = fn(snap)
            print(f"  {name}: ok ({len(out)} characters)")
            if name == "segsum":
                print("    " + out.splitlines()[0][:200])
        except Exception as e:  # report, keep checking the rest
            failed += 1
            print(f"  {name}: FAILED: {type(e).__name__}: {e}")
sys.exit(1 if failed else 0)
