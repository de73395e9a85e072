#!/usr/bin/env python3
"""The baseline snapdiff's speed is judged against: what a user would write in
Python to get the peak out of a snapshot -- pickle.load() and a plain loop
over the trace that keeps the running requested bytes per device.

    python3 bench/python_baseline.py SNAPSHOT.pickle

Prints the peak per device (so the loop is not optimised away) and the
seconds of each part. bench/bench_vs_python.sh times it beside snapdiff.
"""
import pickle
import sys
import time


def main():
    t0 = time.perf_counter()
    with open(sys.argv[1], "rb") as f:
        snap = pickle.load(f)
    t1 = time.perf_counter()
    peaks = []
    for trace in snap.get("device_traces", []):
        cur = peak = 0
        for e in trace:
            a = e["action"]
            if a == "alloc":
                cur += e["size"]
                if cur > peak:
                    peak = cur
            elif a == "free_completed":
                cur -= e["size"]
        peaks.append(peak)
    t2 = time.perf_counter()
    print(f"load {t1 - t0:.3f} s, replay {t2 - t1:.3f} s, peaks {peaks}")


if __name__ == "__main__":
    main()
