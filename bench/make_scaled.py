#!/usr/bin/env python3
"""Writes a snapshot with K back-to-back copies of a real snapshot's trace.

    python3 make_scaled.py IN.pickle K OUT.pickle

Copy k has every address shifted by k * 2**46 (a separate address range, so
each copy replays on its own) and times shifted past the previous copy. The
segments of the dump are repeated the same way. Only for benchmarks: it shows
how snapdiff's cost grows with the number of events.

Each copy is pickled as PyTorch pickles a snapshot: its frame dicts, frame
lists and strings written once, where first used, and referenced through the
memo after that (the memo is cleared between copies, so each copy is as large
as the input's trace; protocol 3 where PyTorch writes 4: the same opcodes
but for explicit memo indices and no framing). The copies are streamed one at a time: generating a
2 GB file takes about as much memory as the input.
"""
import io
import pickle
import sys

# Protocol 3: its memo stores name their index (BINPUT), so the memo can be
# cleared between copies; protocol 4's MEMOIZE numbers by the reader's memo
# size, which a cleared writer memo no longer matches.
PROTO = 3


def shifted_trace(tr, c, shift):
    times = [e["time_us"] for e in tr if "time_us" in e]
    span = (max(times) - min(times) + 1) if times else 0
    for e in tr:
        e2 = dict(e)
        if "addr" in e2:
            e2["addr"] = e2["addr"] + c * shift
        if "time_us" in e2:
            e2["time_us"] = e2["time_us"] + c * span
        yield e2


def main():
    src, k, dst = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    with open(src, "rb") as f:
        snap = pickle.load(f)
    shift = 1 << 46
    segs = []
    for c in range(k):
        for s in snap["segments"]:
            s2 = dict(s)
            s2["address"] = s["address"] + c * shift
            s2["blocks"] = [dict(b, address=b["address"] + c * shift) for b in s["blocks"]]
            segs.append(s2)
    buf = io.BytesIO()
    pk = pickle.Pickler(buf, protocol=PROTO)

    def fragment(obj):
        # The pickle of obj without PROTO and STOP: bytes that push obj. Memo
        # indices continue from the previous fragment (one Pickler).
        buf.seek(0)
        buf.truncate()
        pk.dump(obj)
        return buf.getvalue()[2:-1]

    with open(dst, "wb") as out:
        out.write(bytes([0x80, PROTO]) + b"}(")  # PROTO, EMPTY_DICT, MARK
        out.write(fragment("segments") + fragment(segs))
        out.write(fragment("device_traces") + b"](")  # EMPTY_LIST, MARK
        for tr in snap["device_traces"]:
            out.write(b"](")  # this device's list, MARK
            for c in range(k):
                pk.clear_memo()
                for n, e2 in enumerate(shifted_trace(tr, c, shift), 1):
                    out.write(fragment(e2))
                    if n % 1000 == 0:
                        out.write(b"e(")  # APPENDS, MARK
                out.write(b"e(")
            out.write(b"e")  # APPENDS: this device's entries
        out.write(b"e")  # APPENDS: the devices' lists into device_traces
        pk.clear_memo()
        for key, val in snap.items():
            if key not in ("segments", "device_traces"):
                out.write(fragment(key) + fragment(val))
        out.write(b"u.")  # SETITEMS; STOP


if __name__ == "__main__":
    main()
