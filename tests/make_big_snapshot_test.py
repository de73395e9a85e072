#!/usr/bin/env python3
"""bench/make_big_snapshot.py: both --frames modes load with pickle to the
same data, equal to the source's trace repeated (addresses shifted by
k * 2**46, times by the trace's span, copies chained); the shared file
memoizes strings and frame dicts (BINPUT once, BINGET after) and is smaller.

    python3 make_big_snapshot_test.py REPO_ROOT OUT_DIR
"""
import gzip
import os
import pickle
import pickletools
import subprocess
import sys

SHIFT = 1 << 46


def expected(tr, n):
    """The source repeated, built here independently of the generator: in
    copies after the first, the frees of blocks from before the trace free
    the previous copy's leftover block of the same size (frees in order of
    first free, leftovers in order of alloc), or else a block the copy
    allocates at its start (the free's entry as an alloc, no frames, at the
    trace's first time)."""
    times = [e["time_us"] for e in tr if "time_us" in e]
    lo, span = min(times), max(times) - min(times) + 1
    live, pending, early, order = {}, set(), {}, []
    for i, e in enumerate(tr):
        a = e.get("addr")
        if a is None or e["action"] not in ("alloc", "free_requested", "free_completed"):
            continue
        if e["action"] == "alloc":
            live.pop(a, None)
            live[a] = e["size"]
            pending.discard(a)
        elif a in live:
            if e["action"] == "free_completed":
                del live[a]
                pending.discard(a)
            else:
                pending.add(a)
        else:
            if a not in early:
                order.append(a)
            early.setdefault(a, []).append(i)
    left = {}
    for a, size in live.items():
        if a not in pending:
            left.setdefault(size, []).append(a)
    partner, born = {}, []
    for a in order:
        e = tr[early[a][0]]
        pool = left.get(e["size"], [])
        if pool:
            partner[a] = pool.pop(0)
        else:
            born.append(dict(e, action="alloc", frames=[], time_us=lo))

    def shifted(e, k, addr=None):
        e = dict(e)
        if "addr" in e:
            e["addr"] = (e["addr"] if addr is None else addr) + k * SHIFT
        if "time_us" in e:
            e["time_us"] += k * span
        return e

    out, k = list(tr), 1
    while len(out) < n:
        out += [shifted(b, k) for b in born]
        for i, e in enumerate(tr):
            a = e.get("addr")
            if a in partner and i in early[a]:
                out.append(shifted(e, k, partner[a] - SHIFT))
            else:
                out.append(shifted(e, k))
        k += 1
    return out[:n], len(partner), len(born)


def opcodes(path):
    with open(path, "rb") as f:
        return [op.name for op, _, _ in pickletools.genops(f)]


def synthetic(path):
    """A trace that starts late: blocks 100 and 300 are freed before any
    alloc; 200 (the size of 100) and 400 are left live at the end; an OOM
    entry has no address."""
    fr = [{"name": "step", "filename": "train.py", "line": 7}, {"name": "<module>", "filename": "train.py", "line": 1}]
    ev = [("free_requested", 100, 512, 10), ("free_completed", 100, 512, 11), ("free_requested", 300, 64, 11),
          ("free_completed", 300, 64, 12), ("alloc", 200, 512, 12), ("alloc", 500, 64, 13),
          ("free_requested", 500, 64, 14), ("free_completed", 500, 64, 14), ("alloc", 400, 1024, 15)]
    tr = [{"action": a, "addr": x, "size": sz, "stream": 0, "time_us": t, "frames": list(fr)} for a, x, sz, t in ev]
    tr.insert(5, {"action": "oom", "device_free": 0, "size": 1 << 40, "stream": 0, "time_us": 13, "frames": fr})
    with open(path, "wb") as f:
        pickle.dump({"segments": [], "device_traces": [tr], "allocator_settings": {"expandable_segments": False}}, f)


def run(gen, src, snap, out, name, check, joins):
    tr = snap["device_traces"][0]
    n = 2 * len(tr) + len(tr) // 3  # two whole copies and part of a third
    files = {}
    for mode in ("shared", "unshared"):
        files[mode] = os.path.join(out, f"{name}_{mode}.pickle")
        subprocess.run([sys.executable, gen, "--frames", mode, "--events", str(n), src, "0", files[mode]],
                       check=True, stdout=subprocess.DEVNULL)
    loaded = {}
    for mode, path in files.items():
        with open(path, "rb") as f:
            loaded[mode] = pickle.load(f)
    s, u = loaded["shared"], loaded["unshared"]
    check(s == u, f"{name}: shared and unshared load to the same data")
    exp, chained, born = expected(tr, n)
    if joins:
        check(chained > 0 and born > 0, f"{name}: both joins met ({chained} chained, {born} allocated)")
    check(s["device_traces"][0] == exp, f"{name}: the trace is the source's repeated ({n} entries)")
    check(s["segments"] == [], f"{name}: segments empty")
    check(s.get("allocator_settings") == snap.get("allocator_settings"), f"{name}: allocator_settings kept")
    frames = [f for e in s["device_traces"][0] for f in e.get("frames", [])]
    check(len({id(f) for f in frames}) < len(frames) // 2, f"{name}: frame dicts shared after loading the shared file")
    uf = [f for e in u["device_traces"][0] for f in e.get("frames", [])]
    check(len({id(f) for f in uf}) == len(uf), f"{name}: no frame dict shared in the unshared file")
    ops = {m: opcodes(p) for m, p in files.items()}
    for m in ops:
        check(ops[m][:1] == ["PROTO"] and "FRAME" not in ops[m] and "MEMOIZE" not in ops[m],
              f"{name} {m}: protocol 2 opcodes, no FRAME or MEMOIZE")
    gets = ops["shared"].count("BINGET") + ops["shared"].count("LONG_BINGET")
    puts = ops["shared"].count("BINPUT") + ops["shared"].count("LONG_BINPUT")
    check(gets > 2 * puts > 0, f"{name} shared: memo references dominate ({gets} GETs, {puts} PUTs)")
    check(not any(o.endswith("GET") or o.endswith("PUT") for o in ops["unshared"]), f"{name} unshared: no memo")
    check(os.path.getsize(files["shared"]) < os.path.getsize(files["unshared"]), f"{name}: the shared file is smaller")


def main():
    root, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    gen = os.path.join(root, "bench", "make_big_snapshot.py")
    fails = []

    def check(ok, what):
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            fails.append(what)

    real = os.path.join(root, "tests", "data", "real", "ans_oom_cap_gpt2.pickle.gz")
    with gzip.open(real, "rb") as f:
        run(gen, real, pickle.load(f), out, "real", check, False)
    syn = os.path.join(out, "synthetic_source.pickle")
    synthetic(syn)
    with open(syn, "rb") as f:
        run(gen, syn, pickle.load(f), out, "synthetic", check, True)
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
