#!/usr/bin/env python3
"""Writes a test page for the explorer: the page skeleton the C++ report
writes (styles in the head, <div id="sd-explorer"> near the top of the body,
static sections after it, the data container in
<script type="application/octet-stream" id="sd-explorer-data">, the script
last), with a synthetic trace packed exactly as docs/explorer.md says.

  make_fake_explorer.py [--events N] [--runs 1|2] [--devices 1|2] [--hostile]
                        [--partial] [--seed S] [--broken] -o PAGE.html

--runs 2 writes a diff page (runs "A" and "B"); --devices 2 a report page
with two devices (cuda:0 and cuda:1, each its own timeline); --hostile puts script-like
names into frame labels, site texts, categories, rules, kernels and the
input name; --partial keeps only the allocations of 1 MiB or more (so the
page has fewer allocations than the run); --broken writes a container that
does not decode. Pure Python (no numpy), deterministic for a seed.
"""
import argparse
import array
import base64
import gzip
import html
import json
import os
import random
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
EXPLORER = os.path.join(ROOT, "src", "report", "explorer")

ALIVE = 2147483647
MIB = 1 << 20

HOSTILE = [
    "</script><script>window.__pwned=1</script>",
    '"onmouseover=window.__pwned=2 x="',
    "${alert(1)}",
    "line\u2028sep\u2029para",
    "<img src=x onerror=window.__pwned=3>",
    "<!-- <script>window.__pwned=4</script>",
    "'); window.__pwned=5; ('",
]

CATEGORIES = [
    ("parameter", "#4e79a7"), ("gradient", "#f28e2b"), ("optimizer state", "#e15759"),
    ("activation", "#76b7b2"), ("temporary", "#59a14f"), ("autograd buffer", "#edc948"),
    ("other", "#b07aa1"),
]
PARAM, GRAD, OPT, ACT, TEMP, AUTOGRAD, OTHER = range(7)


class Packer:
    """Collects the arrays; each becomes {"array": K}."""

    def __init__(self):
        self.items = []  # (type, array.array)

    def add(self, typ, values):
        code = {"i8": "b", "u8": "B", "i16": "h", "u16": "H", "i32": "i", "u32": "I", "f64": "d"}[typ]
        a = values if isinstance(values, array.array) else array.array(code, values)
        assert a.typecode == code
        self.items.append((typ, a))
        return {"array": len(self.items) - 1}

    def container(self, header):
        rel, pos = [], 0
        for typ, a in self.items:
            rel.append(pos)
            pos += len(a) * a.itemsize
            pos = (pos + 7) // 8 * 8
        base = 0
        for _ in range(10):
            header["arrays"] = [{"type": t, "offset": base + r, "length": len(a)}
                                for (t, a), r in zip(self.items, rel)]
            hj = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
            nb = (8 + len(hj) + 7) // 8 * 8
            if nb == base:
                break
            base = nb
        out = bytearray(b"SDX1" + struct.pack("<I", len(hj)) + hj)
        out += b"\0" * (base - len(out))
        for (typ, a), r in zip(self.items, rel):
            assert len(out) <= base + r
            out += b"\0" * (base + r - len(out))
            if sys.byteorder != "little":
                a = array.array(a.typecode, a)
                a.byteswap()
            out += a.tobytes()
        return bytes(out)


def make_names(rng, hostile):
    """Frames, the stack tree, sites, per category a list of stack nodes."""
    frames = []
    parent, frame, site = [0], [0], [-1]
    sites = []
    by_cat = {c: [] for c in range(len(CATEGORIES))}

    def frame_index(label, kind):
        frames.append({"label": label, "kind": kind})
        return len(frames) - 1

    user_files = ["model/layers.py", "model/attention.py", "train.py", "model/embed.py", "data/loader.py"]
    lib = ["linear (torch/nn/modules/linear.py:125)", "forward (torch/nn/modules/module.py:1527)",
           "_call_impl (torch/nn/modules/module.py:1518)", "backward (torch/autograd/__init__.py:266)",
           "step (torch/optim/adam.py:166)", "_single_tensor_adam (torch/optim/adam.py:310)",
           "scaled_dot_product_attention (torch/nn/functional.py:5373)"]
    native = ["at::native::empty_cuda", "c10::cuda::CUDACachingAllocator::malloc", "at::TensorBase::mul",
              "torch::autograd::Engine::evaluate_function", "at::native::layer_norm_cuda"]
    internal = ["<built-in method run_backward>", "??"]
    lib_ix = [frame_index(l, "library") for l in lib]
    nat_ix = [frame_index(l, "native") for l in native]
    int_ix = [frame_index(l, "internal") for l in internal]
    scope_ix = [frame_index("## forward ##", "scope")]
    user_ix = []
    for k in range(40):
        f = user_files[k % len(user_files)]
        label = "fn_%d (%s:%d)" % (k, f, 10 + 7 * k)
        if hostile and k < len(HOSTILE):
            label = HOSTILE[k] + " (" + f + ":" + str(k) + ")"
        user_ix.append(frame_index(label, "user"))

    def node(p, f):
        parent.append(p)
        frame.append(f)
        site.append(-1)
        return len(parent) - 1

    roots = [node(0, user_ix[i]) for i in range(4)]
    for c in range(len(CATEGORIES)):
        for j in range(6 if c in (ACT, TEMP) else 3):
            n = rng.choice(roots)
            for _ in range(rng.randint(1, 3)):
                n = node(n, rng.choice(user_ix))
            if rng.random() < 0.5:
                n = node(n, rng.choice(scope_ix))
            top_user = frame[n]
            for _ in range(rng.randint(1, 3)):
                n = node(n, rng.choice(lib_ix))
            if rng.random() < 0.3:
                n = node(n, rng.choice(int_ix))
            for _ in range(rng.randint(1, 3)):
                n = node(n, rng.choice(nat_ix))
            text = frames[top_user]["label"] + " \u2190 " + CATEGORIES[c][0] + " #" + str(j)
            if hostile and j == 0:
                text = HOSTILE[(c + 3) % len(HOSTILE)] + " site " + str(c)
            site[n] = len(sites)
            sites.append(text)
            by_cat[c].append(n)
    return frames, parent, frame, site, sites, by_cat


def simulate(rng, n_events, by_cat, kernels):
    """The trace: per allocation (alloc, free, size, category, stack,
    kernel); the phases and iterations."""
    A_alloc, A_free, A_size, A_cat, A_stack, A_kernel = [], [], [], [], [], []

    def new(ev, cat, size):
        A_alloc.append(ev)
        A_free.append(ALIVE)
        A_size.append(size)
        A_cat.append(cat)
        A_stack.append(rng.choice(by_cat[cat]))
        A_kernel.append(rng.randrange(len(kernels)) if rng.random() < 0.6 else -1)
        return len(A_alloc) - 1

    def size_of(lo, hi):
        return rng.randint(lo // 512, hi // 512) * 512 + (rng.randint(0, 511) if rng.random() < 0.3 else 0)

    # allocations made before the recorded history
    for _ in range(3):
        new(-1, PARAM, size_of(4 * MIB, 16 * MIB))
    n_iter = max(2, min(12, n_events // 80000))
    pre = max(4, min(3000, n_events // 20))
    per = (n_events - pre) // n_iter
    phases, iterations = [], []
    phases.append({"start": 0, "end": pre, "phase": "setup", "iteration": 0})
    params = []
    ev = 0
    while ev < pre:
        params.append(new(ev, PARAM if rng.random() < 0.7 else OPT, size_of(256 * 1024, 2 * MIB)))
        ev += 1
    for it in range(1, n_iter + 1):
        start = ev
        end = n_events if it == n_iter else start + per
        f_end = start + (end - start) * 40 // 100
        b_end = start + (end - start) * 85 // 100
        iterations.append({"index": it, "start": start, "end": end})
        for s, e, ph in ((start, f_end, "forward"), (f_end, b_end, "backward"), (b_end, end, "optimizer")):
            phases.append({"start": s, "end": e, "phase": ph, "iteration": it})
        acts, temps, grads = [], [], []
        act_lo, act_hi = (256 * 1024, 3 * MIB) if it != 3 else (512 * 1024, 4 * MIB)
        while ev < end:
            r = rng.random()
            if ev < f_end:
                if temps and r < 0.4:
                    A_free[temps.pop(rng.randrange(len(temps)) if rng.random() < 0.3 else -1)] = ev
                elif r < 0.7:
                    acts.append(new(ev, ACT, size_of(act_lo, act_hi)))
                else:
                    temps.append(new(ev, TEMP if r < 0.9 else AUTOGRAD, size_of(4096, MIB)))
            elif ev < b_end:
                if temps and r < 0.3:
                    A_free[temps.pop()] = ev
                elif acts and r < 0.6:
                    A_free[acts.pop()] = ev
                elif r < 0.8:
                    grads.append(new(ev, GRAD, size_of(256 * 1024, 2 * MIB)))
                else:
                    temps.append(new(ev, TEMP if r < 0.95 else OTHER, size_of(4096, 2 * MIB)))
            else:
                if temps and r < 0.3:
                    A_free[temps.pop()] = ev
                elif grads and r < 0.9:
                    A_free[grads.pop(0)] = ev
                else:
                    temps.append(new(ev, TEMP, size_of(4096, MIB)))
            ev += 1
        # what is left of the iteration lives on: activations freed at the
        # next iteration's start are simply freed late (no event needed)
    return (A_alloc, A_free, A_size, A_cat, A_stack, A_kernel), phases, iterations


def build_run(rng, label, input_name, n_events, hostile, partial, pk):
    cats = [{"name": n, "color": c} for n, c in CATEGORIES]
    if hostile:
        cats[OTHER]["name"] = HOSTILE[0]
        cats[AUTOGRAD]["name"] = HOSTILE[1]
    C = len(cats)
    frames, parent, frame, site, sites, by_cat = make_names(rng, hostile)
    kernels = ["ampere_sgemm_128x64_nn", "void at::native::vectorized_elementwise_kernel<4>",
               "flash_fwd_kernel", "cutlass::Kernel<fp8_gemm>"]
    if hostile:
        kernels.append(HOSTILE[4])
    allocs, phases, iterations = simulate(rng, n_events, by_cat, kernels)
    a_alloc, a_free, a_size, a_cat, a_stack, a_kernel = allocs
    n = len(a_alloc)
    # per-event deltas: event e changes one category by +-size
    d_cat = [0] * n_events
    d_req = [0] * n_events
    d_alc = [0] * n_events
    for i in range(n):
        r = (a_size[i] + 511) // 512 * 512
        if a_alloc[i] >= 0:
            d_cat[a_alloc[i]] = a_cat[i]
            d_req[a_alloc[i]] += a_size[i]
            d_alc[a_alloc[i]] += r
        if a_free[i] != ALIVE:
            d_cat[a_free[i]] = a_cat[i]
            d_req[a_free[i]] -= a_size[i]
            d_alc[a_free[i]] -= r
    cat_now = [0] * C
    req = alc = res = 0
    for i in range(n):
        if a_alloc[i] < 0:
            cat_now[a_cat[i]] += a_size[i]
            req += a_size[i]
            alc += (a_size[i] + 511) // 512 * 512
    res = (alc + 20 * MIB - 1) // (20 * MIB) * (20 * MIB)
    B0 = min(n_events, 1 << 16)
    f_event = array.array("i", [-1] * B0)
    f_req = array.array("d", [0.0] * B0)
    f_alc = array.array("d", [0.0] * B0)
    f_res = array.array("d", [0.0] * B0)
    f_cat = array.array("d", [0.0] * (B0 * C))
    peak = None
    b = 0
    next_start = (1 * n_events) // B0
    for e in range(n_events):
        while e >= next_start:
            b += 1
            next_start = ((b + 1) * n_events) // B0
        cat_now[d_cat[e]] += d_req[e]
        req += d_req[e]
        alc += d_alc[e]
        if alc > res:
            res = (alc + 20 * MIB - 1) // (20 * MIB) * (20 * MIB)
        if f_event[b] < 0 or req > f_req[b]:
            f_event[b] = e
            f_req[b] = req
            f_cat[b * C:b * C + C] = array.array("d", cat_now)
        if alc > f_alc[b]:
            f_alc[b] = alc
        if res > f_res[b]:
            f_res[b] = res
        if peak is None or req > peak[1]:
            peak = (e, req, alc, res, list(cat_now))
    levels = [(f_event, f_cat, f_req, f_alc, f_res)]
    while len(levels[-1][0]) >= 1024 and len(levels[-1][0]) % 4 == 0:
        ev, ca, rq, al, rs = levels[-1]
        B = len(ev) // 4
        nev = array.array("i", [-1] * B)
        nca = array.array("d", [0.0] * (B * C))
        nrq, nal, nrs = (array.array("d", [0.0] * B) for _ in range(3))
        for k in range(B):
            best = -1
            for j in range(4 * k, 4 * k + 4):
                if ev[j] >= 0 and (best < 0 or rq[j] > rq[best]):
                    best = j
            if best >= 0:
                nev[k] = ev[best]
                nrq[k] = rq[best]
                nca[k * C:k * C + C] = ca[best * C:best * C + C]
            nal[k] = max(al[4 * k:4 * k + 4])
            nrs[k] = max(rs[4 * k:4 * k + 4])
        levels.append((nev, nca, nrq, nal, nrs))
    levels.reverse()
    lv = [{"buckets": len(l[0]), "event": pk.add("i32", l[0]), "by_category": pk.add("f64", l[1]),
           "requested": pk.add("f64", l[2]), "allocated": pk.add("f64", l[3]), "reserved": pk.add("f64", l[4])}
          for l in levels]
    times = array.array("d", [0.0] * B0)
    t = 0.0
    for k in range(B0):
        e = f_event[k] if f_event[k] >= 0 else (k * n_events) // B0
        times[k] = float(int(e * 3.7 + (e // 997) * 11))
    # evidence: one or two per category
    evidence = []
    ev_of_cat = {}
    for c in range(C):
        ev_of_cat[c] = len(evidence)
        rule = "rule-" + cats[c]["name"].replace(" ", "-")
        text = "%s: the allocation's stack passes %s" % (cats[c]["name"], "torch.nn" if c != PARAM else "Parameter")
        if hostile and c == TEMP:
            rule, text = HOSTILE[2], HOSTILE[3] + " " + HOSTILE[0]
        evidence.append({"category": c, "rule": rule, "text": text})
    keep = list(range(n))
    note = ""
    if partial:
        keep = [i for i in range(n) if a_size[i] >= MIB]
        note = "only the allocations of 1 MiB or more (%d of %d)" % (len(keep), n)
    index_in_page = {i: k for k, i in enumerate(keep)}
    a_alloc_k = array.array("i", (a_alloc[i] for i in keep))
    states = []
    pe = peak[0]
    for st_label, st_event in (("the peak", pe), ("end of iteration 1 forward", iterations[0]["start"] + (iterations[0]["end"] - iterations[0]["start"]) * 40 // 100 - 1)):
        live = [i for i in range(n) if a_alloc[i] <= st_event < a_free[i]]
        seg_addr, seg_size, seg_pool, seg_stream = [], [], [], []
        b_seg, b_addr, b_size, b_alloc = [], [], [], []
        addr = 0x7f0000000000
        cur_small = cur_large = None  # [segment index, used]

        def open_seg(size, pool):
            nonlocal addr
            seg_addr.append(addr)
            seg_size.append(size)
            seg_pool.append(pool)
            seg_stream.append(0)
            addr += size + 2 * MIB
            return [len(seg_addr) - 1, 0]

        for i in live:
            r = (a_size[i] + 511) // 512 * 512
            small = r < MIB
            cur = cur_small if small else cur_large
            if cur is None or cur[1] + r > seg_size[cur[0]]:
                cur = open_seg(2 * MIB if small else max(20 * MIB, (r + 2 * MIB - 1) // (2 * MIB) * (2 * MIB)), 1 if small else 0)
                if small:
                    cur_small = cur
                else:
                    cur_large = cur
            if rng.random() < 0.05 and cur[1] + r + 8192 <= seg_size[cur[0]]:
                b_seg.append(cur[0]); b_addr.append(seg_addr[cur[0]] + cur[1]); b_size.append(8192); b_alloc.append(-1)
                cur[1] += 8192
            b_seg.append(cur[0]); b_addr.append(seg_addr[cur[0]] + cur[1]); b_size.append(r)
            b_alloc.append(index_in_page.get(i, -2))
            cur[1] += r
        # the rest of each segment is one free block
        used = [0] * len(seg_addr)
        for s, z in zip(b_seg, b_size):
            used[s] += z
        for s in range(len(seg_addr)):
            if used[s] < seg_size[s]:
                b_seg.append(s); b_addr.append(seg_addr[s] + used[s]); b_size.append(seg_size[s] - used[s]); b_alloc.append(-1)
        order = sorted(range(len(b_seg)), key=lambda k: (b_seg[k], b_addr[k]))
        states.append({"label": st_label if not hostile else st_label + " " + HOSTILE[4], "event": st_event,
                       "segments": {"addr": pk.add("f64", map(float, seg_addr)), "size": pk.add("f64", map(float, seg_size)),
                                    "pool": pk.add("i32", seg_pool), "stream": pk.add("f64", map(float, seg_stream))},
                       "blocks": {"segment": pk.add("i32", [b_seg[k] for k in order]),
                                  "addr": pk.add("f64", [float(b_addr[k]) for k in order]),
                                  "size": pk.add("f64", [float(b_size[k]) for k in order]),
                                  "alloc": pk.add("i32", [b_alloc[k] for k in order])}})
    oom_event = iterations[-1]["start"] + 5
    run = {
        "label": label, "input": input_name, "device": 0, "events": n_events,
        "time_us": pk.add("f64", times), "categories": cats, "phases": phases, "iterations": iterations,
        "peak": {"event": peak[0], "requested": peak[1], "allocated": peak[2], "reserved": peak[3],
                 "by_category": peak[4]},
        "ooms": [{"event": oom_event, "requested": 3 * (1 << 30),
                  "label": "OOM: tried to allocate 3.00 GiB" + (" " + HOSTILE[0] if hostile else "")}],
        "levels": lv,
        "allocs": {"count": len(keep), "total": n, "note": note,
                   "alloc": pk.add("i32", a_alloc_k), "free": pk.add("i32", (a_free[i] for i in keep)),
                   "size": pk.add("f64", (float(a_size[i]) for i in keep)),
                   "addr": pk.add("f64", (float(0x7f0000000000 + 512 * i) for i in keep)),
                   "category": pk.add("u16", (a_cat[i] for i in keep)),
                   "stack": pk.add("i32", (a_stack[i] for i in keep)),
                   "evidence": pk.add("u16", (ev_of_cat[a_cat[i]] for i in keep)),
                   "kernel": pk.add("i32", (a_kernel[i] for i in keep))},
        "frames": frames,
        "stacks": {"parent": pk.add("i32", parent), "frame": pk.add("i32", frame), "site": pk.add("i32", site)},
        "sites": sites, "evidence": evidence, "kernels": kernels, "states": states,
    }
    # live bytes by site at the peak, for the static table
    by_site = {}
    for i in range(n):
        if a_alloc[i] <= pe < a_free[i]:
            s = site[a_stack[i]]
            by_site[s] = by_site.get(s, 0) + a_size[i]
    return run, sorted(by_site.items(), key=lambda kv: -kv[1])[:15]


def read(name):
    with open(os.path.join(EXPLORER, name), encoding="utf-8") as f:
        return f.read()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=20000)
    ap.add_argument("--runs", type=int, choices=(1, 2), default=1)
    ap.add_argument("--devices", type=int, choices=(1, 2), default=1)
    ap.add_argument("--hostile", action="store_true")
    ap.add_argument("--partial", action="store_true")
    ap.add_argument("--broken", action="store_true")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args()
    if a.events < 100:
        ap.error("--events must be at least 100")
    rng = random.Random(a.seed)
    pk = Packer()
    runs, tables = [], []
    names = ["run_a.pickle.gz", "run_b.pickle.gz"]
    if a.hostile:
        names = [HOSTILE[0] + ".pickle", HOSTILE[4] + ".pickle"]
    if a.runs == 2 and a.devices == 2:
        ap.error("--runs 2 and --devices 2 do not go together")
    for r in range(max(a.runs, a.devices)):
        label = "" if a.runs == 1 else "AB"[r]
        n_events = a.events if r == 0 else a.events * 4 // 5
        run, top = build_run(rng, label, names[r if a.runs == 2 else 0], n_events, a.hostile, a.partial, pk)
        if a.devices == 2:
            run["device"] = r
        runs.append(run)
        tables.append((run, top))
    kind = "report" if a.runs == 1 else "diff"
    title = ("snapdiff report: " if kind == "report" else "snapdiff diff: ") + " vs ".join(names[:a.runs])
    header = {"version": 1, "kind": kind, "title": title, "arrays": [], "runs": runs}
    data = pk.container(header)
    if a.broken:
        data = b"SDX9" + data[4:]
    b64 = base64.b64encode(gzip.compress(data, compresslevel=6, mtime=0)).decode("ascii")
    css, js = read("explorer.css"), read("explorer.js")
    for text, what in ((css, "explorer.css"), (js, "explorer.js")):
        low = text.lower()
        for bad in ("</script", "<!--", "</style", ')SDX"'):
            if bad in low if bad.islower() else bad in text:
                sys.exit("%s contains %r: it cannot be inlined" % (what, bad))
    esc = html.escape
    out = ["<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
           "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>",
           esc(title), "</title>\n<style>", css, "</style>\n</head>\n<body>\n<header><h1>snapdiff ",
           kind, "</h1>"]
    for r in runs[:a.runs]:
        out.append("<p class=\"input\">" + esc(r["input"]) + "</p>")
    out.append("</header>\n<div id=\"sd-explorer\"></div>\n<main>\n")
    for r, top in tables:
        which = r["label"] or ("cuda:%d" % r["device"] if a.devices == 2 else "")
        out.append("<section><h2>Largest sites at the peak" + (" (" + which + ")" if which else "") +
                   "</h2>\n<table class=\"sortable\"><thead><tr><th class=\"n\">bytes</th><th>site</th></tr></thead><tbody>\n")
        for s, v in top:
            text = r["sites"][s] if s >= 0 else ""
            out.append("<tr data-site=\"" + esc(text, quote=True) + "\"><td class=\"n\" data-v=\"" + str(v) + "\">" +
                       str(v) + "</td><td class=\"site\">" + esc(text) + "</td></tr>\n")
        out.append("</tbody></table></section>\n")
    out.append("</main>\n<script type=\"application/octet-stream\" id=\"sd-explorer-data\">" + b64 +
               "</script>\n<script>" + js + "</script>\n</body>\n</html>\n")
    with open(a.output, "w", encoding="utf-8") as f:
        f.write("".join(out))


if __name__ == "__main__":
    main()
