#!/usr/bin/env python3
"""Makes a large synthetic torch.profiler Chrome trace for the reader benchmark.

The events of a small real trace (default: tests/data/real/small_profile.trace.json.gz,
3 iterations of a 2-layer transformer on an H200) are written COPIES times,
each copy shifted in time by the trace's span and given fresh correlation,
External and Python ids. Memory events keep their addresses and get their
totals shifted by what each copy leaves allocated, so every copy replays
like the original; the frees of allocations made before the original trace
began repeat in every copy, so the replay reports them as inconsistent. The
figures it gives are labelled synthetic: the real benchmark input is a
recorded trace (scripts/record/record_profile.py, bench/bench_trace.sh).

Usage: make_big_trace.py OUT.json [TARGET_MB] [SOURCE.json[.gz]]
"""
import gzip
import json
import os
import sys

out = sys.argv[1]
target_mb = float(sys.argv[2]) if len(sys.argv) > 2 else 300
here = os.path.dirname(os.path.abspath(__file__))
src = sys.argv[3] if len(sys.argv) > 3 else os.path.join(here, "..", "tests", "data", "real", "small_profile.trace.json.gz")

opener = gzip.open if src.endswith(".gz") else open
with opener(src, "rt") as f:
    doc = json.load(f)
events = doc.pop("traceEvents")
header = {k: v for k, v in doc.items() if k != "traceName"}

ts = [e["ts"] for e in events if isinstance(e.get("ts"), (int, float))]
span = (max(ts) - min(ts)) + 1000.0
mem = [e for e in events if e.get("name") == "[memory]" and e.get("args", {}).get("Device Type") == 1]
first = min(mem, key=lambda e: e["ts"])
last = max(mem, key=lambda e: e["ts"])
delta = last["args"]["Total Allocated"] - (first["args"]["Total Allocated"] - first["args"]["Bytes"])
ID_KEYS = ("External id", "correlation", "Python id", "Python parent id")


def dumps(e):
    return "  " + json.dumps(e, separators=(", ", ": "))


one = sum(len(dumps(e)) + 2 for e in events)
copies = max(1, int(target_mb * 1e6 / one))
print(f"{src}: {len(events)} events, {one / 1e6:.1f} MB per copy; writing {copies} copies", file=sys.stderr)
id_step = 10 ** 7
with open(out, "w") as f:
    f.write("{\n")
    for k, v in header.items():
        f.write(f"  {json.dumps(k)}: {json.dumps(v)},\n")
    f.write('  "traceEvents": [\n')
    sep = ""
    for c in range(copies):
        for e in events:
            e2 = dict(e)
            if isinstance(e2.get("ts"), (int, float)):
                e2["ts"] = round(e2["ts"] + c * span, 3)
            if "id" in e2 and isinstance(e2["id"], int):
                e2["id"] += c * id_step
            a = e2.get("args")
            if isinstance(a, dict):
                a = dict(a)
                for key in ID_KEYS:
                    if isinstance(a.get(key), int):
                        a[key] += c * id_step
                if e2.get("name") == "[memory]" and a.get("Device Type") == 1:
                    a["Total Allocated"] += c * delta
                e2["args"] = a
            f.write(sep + dumps(e2))
            sep = ",\n"
    f.write('\n  ],\n  "traceName": "synthetic"\n}\n')
print(f"{out}: {os.path.getsize(out) / 1e6:.0f} MB", file=sys.stderr)
