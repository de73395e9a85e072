"""Time: small inputs that used to run for minutes (issue 14, "Time: linear,
or refused"). Each shape is made at test time; at --scale test it is large
enough that a superlinear path takes tens of seconds (so the 30 s hang limit
catches a regression) while the linear code finishes in well under a second;
--scale full makes the sizes of the original reports.

Stdlib only: pickle, json, gzip."""
import gzip
import json
import os
import pickle

from common import SEG, MiB, dump, event, frame, small_snapshot, write
from run import Probe


# ---- pickles ---------------------------------------------------------------

def _empty_traces(n):
    def make(d):
        # Protocol 2: EMPTY_LIST + BINPUT/LONG_BINPUT per trace (about 5 bytes).
        dump(os.path.join(d, "t.pickle"), {"segments": [], "device_traces": [[] for _ in range(n)]}, protocol=2)
    return make


def _segment_devices(n):
    def make(d):
        segs = []
        for i in range(n):
            segs.append({"device": i, "address": SEG, "total_size": 2 * MiB, "allocated_size": 0,
                         "active_size": 0, "requested_size": 0, "stream": 0, "segment_type": "large",
                         "blocks": [{"address": SEG, "size": 2 * MiB, "state": "inactive"}]})
        dump(os.path.join(d, "s.pickle"), {"segments": segs, "device_traces": []}, protocol=4)
    return make


# ---- .snap files -------------------------------------------------------------

def _snap(depth, events_at, path, size_of=lambda node: 1 << 16):
    """A .snap with one chain of `depth` frames (node i+1 = frame i under node
    i) and, for each stack node in events_at, an allocation there alive at
    the end: every depth is a distinct live site."""
    strings = [""]
    index = {}

    def s(x):
        if x not in index:
            index[x] = len(strings)
            strings.append(x)
        return index[x]

    fname = s("/home/u/model.py")
    frames = [[s("f%d" % i), fname, i + 1] for i in range(depth)]
    stacks = [[i, i] for i in range(depth)]  # entry i is node i+1: parent i, frame i
    kinds, dt, addr, size, stack = [], [], [], [], []
    total = sum(size_of(node) for node in events_at)
    # One segment, then an allocation (alive at the end) at each stack.
    kinds.append(3), dt.append(0), addr.append(SEG), size.append(total), stack.append(events_at[0] if events_at else 0)
    a = SEG
    for node in events_at:
        kinds.append(0), dt.append(1), addr.append(a), size.append(size_of(node)), stack.append(node)
        a += size_of(node)
    cnt = len(kinds)
    zeros = [0] * cnt
    dev = {"device": 0, "has_trace": True, "streams": [0],
           "events": {"count": cnt, "kind": kinds, "time_us_delta": dt, "addr": addr, "size": size,
                      "stream": zeros, "stack": stack, "compile_context": zeros, "user_metadata": zeros,
                      "action": zeros},
           "segments": [], "blocks": []}
    doc = {"format": "snapdiff.snap", "version": 1, "strings": strings, "frames": frames, "stacks": stacks,
           "devices": [dev]}
    data = json.dumps(doc, separators=(",", ":")).encode()
    write(path, gzip.compress(data, 6))


def _deep_snap(depth, every, name="s.snap"):
    """Allocations at every `every`-th depth of one `depth`-deep chain."""
    def make(d):
        _snap(depth, list(range(every, depth + 1, every)), os.path.join(d, name))
    return make


def _deep_pair(depth, every):
    """Two runs of the same deep stacks; in B every third site holds twice
    the bytes (sites are matched by their whole symbolic stack)."""
    def make(d):
        nodes = list(range(every, depth + 1, every))
        _snap(depth, nodes, os.path.join(d, "a.snap"))
        _snap(depth, nodes, os.path.join(d, "b.snap"), size_of=lambda node: (2 << 16) if node % 3 == 0 else 1 << 16)
    return make


# ---- profiler traces -------------------------------------------------------

def _nested_trace(depth, path, kernels=False):
    """torch.profiler Chrome trace: `depth` cpu_ops each inside the previous,
    with a [memory] allocation in each (kept alive); with `kernels`, each op
    also launches a kernel after its allocation."""
    ev = []
    base = 1_000_000
    end = base + 4 * depth + 10
    for i in range(depth):
        ts = base + 4 * i
        ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::op%d" % i, "pid": 1, "tid": 1, "ts": ts,
                   "dur": end - ts - i, "args": {"External id": i + 1}})
        ev.append({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1,
                   "ts": ts + 1, "args": {"Total Reserved": 1 << 40, "Total Allocated": 4096 * (i + 1), "Bytes": 4096,
                                          "Device Id": 0, "Device Type": 1, "Addr": SEG + 4096 * i}})
        if kernels:
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                       "ts": ts + 2, "dur": 1, "args": {"External id": i + 1, "correlation": i + 1}})
            ev.append({"ph": "X", "cat": "kernel", "name": "k%d" % i, "pid": 0, "tid": 7, "ts": ts + 3, "dur": 1,
                       "args": {"External id": i + 1, "device": 0, "stream": 7, "correlation": i + 1}})
    doc = {"schemaVersion": 1, "displayTimeUnit": "ms", "traceEvents": ev}
    data = json.dumps(doc, separators=(",", ":")).encode()
    write(path, gzip.compress(data, 6) if path.endswith(".gz") else data)


# ---- rules -------------------------------------------------------------------

def _many_rules(n_rules, n_stacks):
    def make(d):
        # Patterns that no frame matches, each read to its end against every
        # frame: the work was rules x distinct frames.
        rules = [{"name": "r%d" % i, "category": "c%d" % (i % 50), "when": {"frame_name": "(forward|site)_%d_x" % i}}
                 for i in range(n_rules)]
        write(os.path.join(d, "r.json"), json.dumps({"format": "snapdiff.rules", "version": 1, "rules": rules}).encode())
        # n_stacks distinct stacks (two frames of their own each), one alive allocation each.
        tr = []
        a = SEG
        per = 4096
        tr.append(event("segment_alloc", SEG, n_stacks * per, 1, [frame()]))
        for i in range(n_stacks):
            fr = [frame("site_%d" % i, "/home/u/model.py", i + 1), frame("helper_%d" % i, "/home/u/util.py", 7),
                  frame("forward", "/home/u/model.py", 1)]
            tr.append(event("alloc", a, per, 2 + i, fr))
            a += per
        dump(os.path.join(d, "s.pickle"), {"segments": [], "device_traces": [tr]})
    return make


def _long_pattern(n_bytes):
    def make(d):
        words = "|".join("w%d" % i for i in range(n_bytes // 6))
        rules = [{"name": "long", "category": "c", "when": {"frame_name": "^(%s)$" % words}}]
        write(os.path.join(d, "r.json"), json.dumps({"format": "snapdiff.rules", "version": 1, "rules": rules}).encode())
        dump(os.path.join(d, "s.pickle"), {"segments": [], "device_traces": [[event("alloc", SEG, 4096, 1)]]})
    return make


def _repetition_rules(n_rules, width):
    def make(d):
        # Patterns each within RE2's own limits (a repetition of 1000 compiles
        # to some 2,000 instructions), too many together; matched against a
        # long frame name, each used to cost milliseconds.
        rules = [{"name": "r%d" % i, "category": "c", "when": {"frame_name": "[a-z%d]{%d}y" % (i % 10, width)}}
                 for i in range(n_rules)]
        write(os.path.join(d, "r.json"), json.dumps({"format": "snapdiff.rules", "version": 1, "rules": rules}).encode())
        s = {"segments": [], "device_traces": [[event("alloc", SEG, 4096, 1, [frame("q" * 2000)])]]}
        dump(os.path.join(d, "s.pickle"), s)
    return make


def _many_categories(n):
    def make(d):
        rules = [{"name": "r%d" % i, "category": "c%d" % i} for i in range(n)]
        write(os.path.join(d, "r.json"), json.dumps({"format": "snapdiff.rules", "version": 1, "rules": rules}).encode())
        dump(os.path.join(d, "s.pickle"), small_snapshot())
    return make


def _json_path(d, r):
    line = r.err.decode("utf-8", "replace")
    return None if "$.rules[" in line else "the error does not name the rule's JSON path: %r" % line[:200]


def _names_limit(d, r):
    line = r.err.decode("utf-8", "replace")
    return None if "at most 1024" in line else "the error does not name the limit: %r" % line[:200]


def _refused_pickle(d, r):
    line = r.err.decode("utf-8", "replace")
    if os.path.exists(os.path.join(d, "x.pickle")):
        return "x.pickle was written"
    return None if "convert to .snap" in line else "the error does not say why: %r" % line[:200]


def probes(scale):
    G = 1 << 30
    full = scale == "full"

    def sz(test, full_size):
        return full_size if full else test

    return [
        Probe("time-empty-device-traces", "time",
              "a 5 MB pickle with a million empty device traces (used to take > 60 s)",
              _empty_traces(sz(200_000, 1_000_000)), ["report", "t.pickle"], exit=0),
        Probe("time-segment-devices", "time",
              "200,000 segments, each on its own device index (used to take > 60 s): refused after reading, "
              "at most 1,024 devices",
              _segment_devices(sz(150_000, 200_000)), ["report", "s.pickle"], exit=3, check=_names_limit),
        Probe("time-nested-trace", "time",
              "a profiler trace of ops nested 100,000 deep, an allocation in each (39 MB: 77 s)",
              lambda d: _nested_trace(sz(70_000, 100_000), os.path.join(d, "t.json")), ["report", "t.json"], exit=0),
        Probe("time-nested-trace-kernels", "time",
              "ops nested 60,000 deep, each launching a kernel: an allocation's kernel among its op's subtree",
              lambda d: _nested_trace(60_000, os.path.join(d, "t.json.gz"), kernels=True),
              ["report", "t.json.gz"], exit=0),
        Probe("time-deep-snap", "time",
              "a .snap whose stacks are 100,000 frames deep, a live allocation at every depth (4.8 MB: 23 s)",
              _deep_snap(100_000, 1), ["report", "s.snap"], exit=0),
        Probe("time-deep-snap-json", "time",
              "the same as JSON: every site's frames written out (cut to 1,000 per stack)",
              _deep_snap(sz(80_000, 100_000), 1), ["report", "s.snap", "--format", "json"], exit=0),
        Probe("time-deep-snap-explain", "time",
              "--explain SITE on stacks 60,000 frames deep, the frame near the outermost end",
              _deep_snap(60_000, 1), ["report", "s.snap", "--explain", "f3"], exit=0),
        Probe("time-convert-deep-pickle", "time",
              "convert of a .snap whose 30,000 stacks share one chain to a PyTorch pickle (which lists every "
              "stack's frames: 450 M of them): refused, nothing written",
              _deep_snap(30_000, 1), ["convert", "s.snap", "-o", "x.pickle"], exit=2, check=_refused_pickle),
        Probe("time-flame-deep-snap", "time",
              "chart --kind flame on a .snap with 30,000-deep stacks (1.4 MB: > 120 s)",
              _deep_snap(sz(20_000, 30_000), 1), ["chart", "s.snap", "--kind", "flame", "-o", "f.dot"], exit=0),
        Probe("time-flame-nested-trace", "time",
              "chart --kind flame on a trace of ops nested 10,000 deep (3.9 MB: 94 s)",
              lambda d: _nested_trace(sz(12_000, 10_000), os.path.join(d, "t.json")),
              ["chart", "t.json", "--kind", "flame", "-o", "f.dot"], exit=0),
        Probe("time-diff-deep-snap", "time",
              "diff of two .snap files with 10,000-deep stacks (17 s, 3.7 GB under --max-memory 1GiB)",
              _deep_pair(10_000, 1), ["diff", "a.snap", "b.snap", "--max-memory", "1GiB"],
              exit=0, max_rss=G),
        Probe("time-many-rules", "time",
              "5,000 rules against 20,000 distinct stacks (> 120 s)",
              _many_rules(sz(3_000, 5_000), sz(12_000, 20_000)),
              ["report", "s.pickle", "--rules", "r.json"], exit=0),
        Probe("time-repetition-rules", "time",
              "a rules file of large repetitions, each within RE2's limits (4 MB: 110 s, 3.2 GB): refused, "
              "counted repetitions make at most 100 copies",
              _repetition_rules(sz(2_000, 40_000), 1000), ["report", "s.pickle", "--rules", "r.json"],
              exit=3, check=_json_path, max_rss=G),
        Probe("time-rules-program-size", "time",
              "5,000 rules of 100-copy repetitions, each allowed: refused at 250,000 RE2 instructions in all",
              _repetition_rules(5_000, 100), ["report", "s.pickle", "--rules", "r.json"],
              exit=3, check=_json_path, max_rss=G),
        Probe("time-long-pattern", "time",
              "one rule pattern of 1 MB: refused beyond 4,096 bytes",
              _long_pattern(1 << 20), ["report", "s.pickle", "--rules", "r.json"], exit=3, check=_json_path),
        Probe("time-many-categories", "time",
              "1,000 rules each naming its own category (every phase span keeps bytes per category): refused "
              "beyond 256 categories",
              _many_categories(1_000), ["report", "s.pickle", "--rules", "r.json"], exit=3, check=_json_path),
    ]
