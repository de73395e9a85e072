#!/usr/bin/env python3
"""Writes a large snapshot pickle by repeating a real snapshot's trace,
streaming, without holding the copies in memory:

    python3 make_big_snapshot.py IN.pickle TARGET_BYTES OUT.pickle

Copy k shifts every address by k * 2**46 and every time past the previous
copy. Each trace entry is pickled on its own (its frames are not shared with
other entries, unlike PyTorch's output), so the file grows fast: the
1,000,000-event xxl_fp8 trace gives about 4.4 GB per copy, so the
file stops at the first thousand-entry boundary past TARGET_BYTES. For the memory-bound
benchmark (bench/bench_memory.sh) only.
"""
import os
import pickle
import struct
import sys


def body(obj):
    # A protocol-2 pickle of obj without PROTO and STOP: a fragment that
    # pushes obj. Its memo indices may reuse earlier fragments' — each
    # fragment reads only what it wrote itself, so that is harmless.
    return pickle.dumps(obj, protocol=2)[2:-1]


def main():
    src, target, dst = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    with open(src, "rb") as f:
        snap = pickle.load(f)
    shift = 1 << 46
    tr = snap["device_traces"][0]
    times = [e["time_us"] for e in tr if "time_us" in e]
    span = (max(times) - min(times) + 1) if times else 0
    with open(dst, "wb") as out:
        out.write(b"\x80\x02}")  # PROTO 2, EMPTY_DICT
        out.write(body("segments") + body([]) + b"s")  # no dump state: the history is the point
        out.write(body("device_traces") + b"](")  # EMPTY_LIST, MARK
        out.write(b"](")  # device 0's list, MARK
        k, n = 0, 0
        while True:
            for e in tr:
                e2 = dict(e)
                if "addr" in e2:
                    e2["addr"] = e2["addr"] + k * shift
                if "time_us" in e2:
                    e2["time_us"] = e2["time_us"] + k * span
                out.write(body(e2))
                n += 1
                if n % 1000 == 0:
                    out.write(b"e(")  # APPENDS, MARK
                    if out.tell() >= target:
                        break
            k += 1
            if out.tell() >= target:
                break
        out.write(b"e")  # APPENDS: device 0's entries
        out.write(b"e")  # APPENDS: device 0's list into device_traces
        out.write(b"s.")  # SETITEM device_traces; STOP
    print(f"{dst}: {os.path.getsize(dst)} bytes, {k} copies, {n} trace entries")


if __name__ == "__main__":
    main()
