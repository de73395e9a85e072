#!/usr/bin/env python3
"""Writes a large snapshot pickle by repeating a real snapshot's trace,
streaming, without holding the copies in memory:

    python3 make_big_snapshot.py [--frames shared|unshared] [--events N]
                                 IN.pickle[.gz] TARGET_BYTES OUT.pickle

Copy k of a device's trace shifts every address by k * 2**46 and every time
past the previous copy; the source's external_annotations are repeated with
the same time shifts and its other top-level keys (allocator_settings, ...)
kept. Segments are left empty: after many copies the source's final state
would no longer describe the end of the history, and the history is the point.

The opcodes are written here, as PyTorch's C++ pickler
(torch::cuda::_memory_snapshot_pickled) writes a snapshot: protocol 2,
BINUNICODE strings, BININT1/BININT2/BININT/LONG1 (8 bytes) integers, dicts as
EMPTY_DICT MARK ... SETITEMS, lists as EMPTY_LIST MARK ... APPENDS (a trace's
entries in batches of 1000), no FRAME.

--frames shared (the default): like a real file, each distinct string (the
dict keys, actions, file and function names) and each distinct frame dict is
written once, followed by BINPUT/LONG_BINPUT, and referenced afterwards with
BINGET/LONG_BINGET; every entry's frames list is a new list of such
references. After the first copy an entry's bytes differ from one copy to the
next only in its address and time, so they are kept as templates.

--frames unshared: nothing is memoized, every string and frame dict is written
out in full where it occurs: the worst case for a reader (the 1,000,000-event
xxl_fp8 trace is about 4.4 GB per copy).

Copies are chained so that the live memory does not grow with them: a
trace that starts late frees blocks allocated before it; in copies after the
first such a free releases a block the previous copy left live (same size),
or, where there is none (xxl_fp8 frees everything by its end), a block that
the copy allocates at its start. The first copy is the source's, as is.

Single-device sources stop at the first 1000-entry boundary past
TARGET_BYTES (or after exactly N entries with --events N); with several
devices every device gets the same number of whole copies.
"""
import argparse
import gzip
import os
import pickle
import struct
import sys
import time

SHIFT = 1 << 46
BATCH = 1000
FLUSH = 1 << 24

_pack_I = struct.Struct("<I").pack
_pack_H = struct.Struct("<H").pack
_pack_i = struct.Struct("<i").pack
_pack_q = struct.Struct("<q").pack
_pack_d = struct.Struct(">d").pack


def enc_int(v):
    if v >= 2147483648:
        if v < 9223372036854775808:
            return b"\x8a\x08" + _pack_q(v)  # LONG1, 8 bytes as PyTorch's pickler
    elif v >= 0:
        if v < 256:
            return b"K" + bytes((v,))  # BININT1
        if v < 65536:
            return b"M" + _pack_H(v)  # BININT2
        return b"J" + _pack_i(v)  # BININT
    elif v >= -2147483648:
        return b"J" + _pack_i(v)
    elif v >= -9223372036854775808:
        return b"\x8a\x08" + _pack_q(v)
    n = (v.bit_length() >> 3) + 1  # beyond 64 bits: LONG1 of the needed length
    b = v.to_bytes(n, "little", signed=True)
    return b"\x8a" + bytes((len(b),)) + b


def get_op(i):
    return b"h" + bytes((i,)) if i < 256 else b"j" + _pack_I(i)  # BINGET / LONG_BINGET


def put_op(i):
    return b"q" + bytes((i,)) if i < 256 else b"r" + _pack_I(i)  # BINPUT / LONG_BINPUT


class Encoder:
    """Objects to opcodes. With memo on, strings are memoized by value and
    frame dicts by identity (the source's shared frame objects), as
    PyTorch's pickler does; with memo off everything is written in full."""

    def __init__(self, memo):
        self.memo = memo
        self.next = 0
        self.sget = {}  # str -> what stands for it now (a GET, or its bytes)
        self.frames = {}  # id(frame dict) -> memo index (memo on) or bytes (memo off)
        self.fbytes = {}  # id(frame dict) -> what stands for it now (a GET, or its bytes)
        self.keep = []  # the frame dicts whose ids are keys above

    def _put(self):
        i = self.next
        self.next += 1
        return i

    def str(self, s):
        b = self.sget.get(s)
        if b is not None:
            return b
        raw = s.encode("utf-8", "surrogatepass")
        b = b"X" + _pack_I(len(raw)) + raw  # BINUNICODE
        if not self.memo:
            self.sget[s] = b
            return b
        i = self._put()
        self.sget[s] = get_op(i)
        return b + put_op(i)

    def obj(self, o):
        if isinstance(o, bool):
            return b"\x88" if o else b"\x89"
        if isinstance(o, int):
            return enc_int(o)
        if isinstance(o, str):
            return self.str(o)
        if isinstance(o, float):
            return b"G" + _pack_d(o)
        if o is None:
            return b"N"
        if isinstance(o, dict):
            return b"}(" + b"".join(self.str(k) + self.obj(v) for k, v in o.items()) + b"u"
        if isinstance(o, list):
            return b"](" + b"".join(self.obj(x) for x in o) + b"e"
        if isinstance(o, tuple):
            body = b"".join(self.obj(x) for x in o)
            if len(o) == 0:
                return b")"
            if len(o) <= 3:
                return body + (b"\x85", b"\x86", b"\x87")[len(o) - 1]
            return b"(" + body + b"t"
        raise TypeError(f"unexpected {type(o).__name__} in the snapshot")

    def frame(self, f):
        x = self.frames.get(id(f))
        if x is not None:
            return get_op(x) if self.memo else x
        b = b"}(" + b"".join(self.str(k) + self.obj(v) for k, v in f.items()) + b"u"
        self.keep.append(f)
        if self.memo:
            i = self._put()
            self.frames[id(f)] = i
            self.fbytes[id(f)] = get_op(i)
            return b + put_op(i)
        self.frames[id(f)] = b
        self.fbytes[id(f)] = b
        return b

    def entry(self, e):
        """A trace entry as a template (p0, v1, s1, p1, v2, s2, p2): fixed
        bytes around two variable integers v1, v2 shifted by slot s (1 the
        address, 2 the time; v None when absent)."""
        parts, vals = [], []
        cur = [b"}("]
        sg = self.sget
        for k, v in e.items():
            kb = sg.get(k) or self.str(k)
            tv = type(v)
            if tv is int:
                if (k == "addr" or k == "time_us") and len(vals) < 2:
                    cur.append(kb)
                    parts.append(b"".join(cur))
                    vals.append((v, 1 if k == "addr" else 2))
                    cur = []
                else:
                    cur.append(kb + enc_int(v))
            elif tv is str:
                cur.append(kb + (sg.get(v) or self.str(v)))
            elif tv is list and k == "frames":
                try:  # every frame seen before: their bytes by identity
                    fb = self.fbytes
                    cur.append(kb + b"](" + b"".join([fb[i] for i in map(id, v)]) + b"e")
                except KeyError:
                    cur.append(kb + b"](" + b"".join([self.frame(f) if type(f) is dict else self.obj(f) for f in v]) + b"e")
            else:
                cur.append(kb + self.obj(v))
        cur.append(b"u")
        parts.append(b"".join(cur))
        while len(vals) < 2:  # absent values: empty parts before the tail
            parts.insert(len(parts) - 1, b"")
            vals.append((None, 0))
        return (parts[0], vals[0][0], vals[0][1], parts[1], vals[1][0], vals[1][1], parts[2])


def emit(buf, t, sh):
    p0, v1, s1, p1, v2, s2, p2 = t
    if v2 is not None:
        buf += p0
        buf += enc_int(v1 + sh[s1])
        buf += p1
        buf += enc_int(v2 + sh[s2])
        buf += p2
    elif v1 is not None:
        buf += p0
        buf += enc_int(v1 + sh[s1])
        buf += p1
        buf += p2
    else:
        buf += p0
        buf += p1
        buf += p2


class Out:
    def __init__(self, path):
        self.f = open(path, "wb")
        self.buf = bytearray()
        self.flushed = 0

    def size(self):
        return self.flushed + len(self.buf)

    def maybe_flush(self):
        if len(self.buf) >= FLUSH:
            self.f.write(self.buf)
            self.flushed += len(self.buf)
            self.buf = bytearray()

    def close(self):
        self.f.write(self.buf)
        self.flushed += len(self.buf)
        self.buf = bytearray()
        self.f.close()


def chain(tr):
    """Joins copy k-1 to copy k. A trace that starts late frees blocks
    allocated before it (no alloc in the trace), and ends with blocks still
    live. Repeated as is, every copy would free blocks from before the
    recording, and the live memory a reader infers grows with the copies.
    Instead, in copies after the first, each such free is pointed at a block
    the previous copy left live, of the same size (in order); where none is
    left, the copy starts by allocating the block (an alloc entry like the
    free's, without frames, at the trace's first time). Returns
    {entry index: address minus SHIFT}, those alloc entries, and counts."""
    live = {}  # addr -> (size, freed already requested)
    early = {}  # addr -> [entry indices] of frees of blocks from before the trace
    first_free = {}  # addr -> (size, order)
    for i, e in enumerate(tr):
        act, addr = e.get("action"), e.get("addr")
        if type(addr) is not int:
            continue
        if act == "alloc":
            live.pop(addr, None)  # order: by the last alloc
            live[addr] = [e.get("size"), False]
        elif act in ("free_requested", "free_completed"):
            b = live.get(addr)
            if b is not None:
                if act == "free_completed":
                    del live[addr]
                else:
                    b[1] = True
            else:
                early.setdefault(addr, []).append(i)
                first_free.setdefault(addr, (e.get("size"), i))
    left = {}
    for addr, (size, requested) in live.items():  # alloc order (dicts keep insertion order)
        if not requested:
            left.setdefault(size, []).append(addr)
    pre = {}
    for addr, (size, order) in sorted(first_free.items(), key=lambda x: x[1][1]):
        pre.setdefault(size, []).append(addr)
    moved = {}
    born = []
    paired = 0
    t_lo = min((e["time_us"] for e in tr if type(e.get("time_us")) is int), default=None)
    for size, addrs in pre.items():
        lv = left.get(size, [])
        for n, a in enumerate(addrs):
            if n < len(lv):
                paired += 1
                for i in early[a]:
                    moved[i] = lv[n] - SHIFT
            else:  # nothing left live to free: the copy allocates it first
                e = tr[first_free[a][1]]
                b = dict(e, action="alloc")
                if "frames" in b:
                    b["frames"] = []
                if t_lo is not None and "time_us" in b:
                    b["time_us"] = t_lo
                born.append(b)
    born.sort(key=lambda b: first_free[b["addr"]][1])
    return moved, born, len(first_free), sum(len(v) for v in left.values()), paired


def moved_tmpl(t, a):
    p0, v1, s1, p1, v2, s2, p2 = t
    if s1 == 1:
        return (p0, a, s1, p1, v2, s2, p2)
    if s2 == 1:
        return (p0, v1, s1, p1, a, s2, p2)
    return t


def span_of(tr):
    times = [e["time_us"] for e in tr if type(e.get("time_us")) is int]
    return (max(times) - min(times) + 1) if times else 0, (max(times) if times else None)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--frames", choices=("shared", "unshared"), default="shared")
    ap.add_argument("--events", type=int, default=0, help="stop after exactly N trace entries (one device only)")
    ap.add_argument("src")
    ap.add_argument("target", type=int)
    ap.add_argument("dst")
    a = ap.parse_args()
    t0 = time.monotonic()
    with open(a.src, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    with (gzip.open if gz else open)(a.src, "rb") as f:
        snap = pickle.load(f)
    if isinstance(snap, list) or "device_traces" not in snap:
        sys.exit(f"{a.src}: no device_traces to repeat")
    t_read = time.monotonic() - t0
    traces = snap["device_traces"]
    span = max((span_of(tr)[0] for tr in traces), default=0)
    all_t = [e["time_us"] for tr in traces for e in tr if type(e.get("time_us")) is int]
    t_lo, t_hi = (min(all_t), max(all_t)) if all_t else (0, -1)
    del all_t
    busy = [d for d, tr in enumerate(traces) if tr]
    if not busy:
        sys.exit(f"{a.src}: the trace is empty")
    if a.events and len(busy) > 1:
        sys.exit("--events needs a source with one device")
    memo = a.frames == "shared"
    enc = Encoder(memo)
    out = Out(a.dst)
    out.buf += b"\x80\x02}("  # PROTO 2, EMPTY_DICT, MARK
    out.buf += enc.str("segments") + b"](e"
    out.buf += enc.str("device_traces") + b"]("

    fill = len(busy) == 1
    copies_whole = 0
    if not fill:  # several devices: whole copies, as many as the size estimate asks
        per_copy = 0
        probe = Encoder(False)
        for tr in traces:
            per_copy += sum(len(t[0]) + len(t[3]) + len(t[6]) + 20 for t in map(probe.entry, tr))
        copies_whole = max(1, -(-a.target // per_copy))

    n_total, copies_done = 0, 0
    t_last = None
    chains = []
    for d, tr in enumerate(traces):
        moved, born, n_early, n_left, n_paired = chain(tr)
        if tr:
            chains.append(f"cuda:{d} {n_early} blocks freed before allocated, {n_paired} chained to "
                          f"blocks left live, {len(born)} allocated at each copy's start")
        born_tmpl = None
        out.buf += b"]"
        if not tr:
            out.buf += b"(e"
            continue
        k, n = 0, 0
        last_e, last_k = tr[0], 0
        tmpl = None
        stop = False
        while not stop:
            sh = (0, k * SHIFT, k * span)
            if k and born:
                if born_tmpl is None or not memo:
                    born_tmpl = [enc.entry(b) for b in born]
                bt = born_tmpl[:a.events - n] if a.events else born_tmpl
                out.buf += b"("
                for t in bt:
                    emit(out.buf, t, sh)
                out.buf += b"e"
                n += len(bt)
                if a.events and n >= a.events:
                    break
            if k == 0 or not memo:
                # The first copy defines the memo entries inline; it also
                # yields the templates of the next copies (shared frames).
                keep = [] if memo else None
                for i in range(0, len(tr), BATCH):
                    chunk = tr[i:i + BATCH]
                    if a.events:
                        chunk = chunk[:a.events - n]
                    out.buf += b"("
                    for j, e in enumerate(chunk, i):
                        before = enc.next
                        t = enc.entry(e)
                        if k and j in moved:
                            t = moved_tmpl(t, moved[j])
                        emit(out.buf, t, sh)
                        if keep is not None:
                            keep.append(t if enc.next == before else None)
                    out.buf += b"e"
                    n += len(chunk)
                    if chunk:
                        last_e, last_k = tr[i + len(chunk) - 1], k
                    out.maybe_flush()
                    if (a.events and n >= a.events) or (fill and not a.events and out.size() >= a.target):
                        stop = True
                        break
                if keep is not None and not stop:
                    # entries that defined memo entries: re-encode, now all GETs
                    tmpl = [t if t is not None else enc.entry(e) for t, e in zip(keep, tr)]
                    for j, a_ in moved.items():
                        tmpl[j] = moved_tmpl(tmpl[j], a_)
            else:
                for i in range(0, len(tmpl), BATCH):
                    chunk = tmpl[i:i + BATCH]
                    if a.events:
                        chunk = chunk[:a.events - n]
                    b = out.buf
                    b += b"("
                    for t in chunk:
                        p0, v1, s1, p1, v2, s2, p2 = t
                        if v2 is not None:
                            b += p0
                            b += enc_int(v1 + sh[s1])
                            b += p1
                            b += enc_int(v2 + sh[s2])
                            b += p2
                        else:
                            emit(b, t, sh)
                    b += b"e"
                    n += len(chunk)
                    if chunk:
                        last_e, last_k = tr[i + len(chunk) - 1], k
                    out.maybe_flush()
                    if (a.events and n >= a.events) or (fill and not a.events and out.size() >= a.target):
                        stop = True
                        break
            k += 1
            if not fill and k >= copies_whole:
                stop = True
        n_total += n
        copies_done = max(copies_done, k)
        # the time of the last entry written, for the annotations
        if type(last_e.get("time_us")) is int:
            tl = last_e["time_us"] + last_k * span
            t_last = tl if t_last is None else max(t_last, tl)
    out.buf += b"e"  # APPENDS: the device lists (each filled by its batches) into device_traces

    for key, val in snap.items():
        if key in ("segments", "device_traces"):
            continue
        out.buf += enc.str(key) if isinstance(key, str) else enc.obj(key)
        if key == "external_annotations" and isinstance(val, list):
            out.buf += b"]("
            for c in range(copies_done):
                for an in val:
                    if isinstance(an, dict) and type(an.get("time_us")) is int:
                        tt = an["time_us"] + c * span
                        if c > 0 and not (t_lo <= an["time_us"] <= t_hi and (t_last is None or tt <= t_last)):
                            continue
                        an = dict(an, time_us=tt)
                    elif c > 0:
                        continue
                    out.buf += enc.obj(an)
            out.buf += b"e"
        else:
            out.buf += enc.obj(val)
        out.maybe_flush()
    out.buf += b"u."  # SETITEMS, STOP
    out.close()
    dt = time.monotonic() - t0
    print(f"{a.dst}: {os.path.getsize(a.dst)} bytes, frames {a.frames}, {copies_done} copies, "
          f"{n_total} trace entries, {enc.next} memo entries ({'; '.join(chains)}); read {t_read:.1f} s, total {dt:.1f} s")


if __name__ == "__main__":
    main()
