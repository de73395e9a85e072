#!/usr/bin/env python3
"""Writes a snapshot with K back-to-back copies of a real snapshot's trace.

    python3 make_scaled.py IN.pickle K OUT.pickle

Copy k has every address shifted by k * 2**46 (a separate address range, so
each copy replays on its own) and times shifted past the previous copy. The
segments of the dump are repeated the same way. Only for benchmarks: it shows
how snapdiff's cost grows with the number of events.
"""
import pickle
import sys


def main():
    src, k, dst = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    with open(src, "rb") as f:
        snap = pickle.load(f)
    shift = 1 << 46
    traces = snap["device_traces"]
    out_traces = []
    for tr in traces:
        times = [e["time_us"] for e in tr if "time_us" in e]
        span = (max(times) - min(times) + 1) if times else 0
        new = []
        for c in range(k):
            for e in tr:
                e2 = dict(e)
                if "addr" in e2:
                    e2["addr"] = e2["addr"] + c * shift
                if "time_us" in e2:
                    e2["time_us"] = e2["time_us"] + c * span
                new.append(e2)
        out_traces.append(new)
    segs = []
    for c in range(k):
        for s in snap["segments"]:
            s2 = dict(s)
            s2["address"] = s["address"] + c * shift
            s2["blocks"] = [dict(b, address=b["address"] + c * shift) for b in s["blocks"]]
            segs.append(s2)
    snap["device_traces"] = out_traces
    snap["segments"] = segs
    with open(dst, "wb") as f:
        pickle.dump(snap, f, protocol=4)


if __name__ == "__main__":
    main()
