#!/usr/bin/env python3
"""Writes a small snapshot: the first N trace entries of a real snapshot.

    python3 make_small.py IN.pickle OUT.pickle [N]

N is 27000 by default: from bench/out/xxl_fp8.pickle (1,000,000 entries,
170 MB) that is a 4.9 MB snapshot (37,000 entries make 6.8 MB), the size
bench_small.sh times to see what a report costs besides its work (process
start, rules, rendering). The segments of the dump are kept as they are:
the snapshot ends with the allocator's state at the end of the whole run,
which the first N entries do not reach. Written with pickle protocol 4, as
torch.cuda.memory._dump_snapshot writes; frames shared by several entries
stay shared (pickle's memo), as in PyTorch's own dumps.
"""
import pickle
import sys


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    src, dst = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) == 4 else 27000
    with open(src, "rb") as f:
        snap = pickle.load(f)
    snap["device_traces"] = [tr[:n] for tr in snap["device_traces"]]
    with open(dst, "wb") as f:
        pickle.dump(snap, f, protocol=4)
    events = sum(len(tr) for tr in snap["device_traces"])
    print(f"{dst}: {events} trace entries, {len(snap['segments'])} segments")


if __name__ == "__main__":
    main()
