#!/usr/bin/env python3
"""Derives a profiler trace recorded as without profile_memory=True.

    python3 tests/data/derived/strip_profile_memory.py \
        tests/data/real/small_profile.trace.json.gz \
        tests/data/derived/small_profile_nomem.trace.json.gz

The input is a real torch.profiler Chrome trace (tests/data/real/README.md).
The output is the same trace less what profile_memory=True adds: the
"[memory]" and "[OutOfMemory]" instant events (allocations and frees of the
CUDA and CPU allocators) are removed and the top-level "profile_memory" flag
reads 0. Everything else (ops, kernels, Python calls, flows, metadata) is
kept as PyTorch wrote it. The gzip header carries no name and no time, so the
output is the same bytes on every run.
"""
import gzip
import json
import sys

MEMORY_EVENTS = {"[memory]", "[OutOfMemory]"}


def main(src, dst):
    with gzip.open(src, "rt") as f:
        doc = json.load(f)
    events = doc["traceEvents"]
    kept = [e for e in events if e.get("name") not in MEMORY_EVENTS]
    doc["traceEvents"] = kept
    if "profile_memory" in doc:
        doc["profile_memory"] = 0
    data = json.dumps(doc, separators=(",", ":")).encode()
    with open(dst, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as out:
        out.write(data)
    print(f"{dst}: {len(kept)} of {len(events)} events kept ({len(events) - len(kept)} memory events removed)")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: strip_profile_memory.py IN.trace.json.gz OUT.trace.json.gz")
    main(sys.argv[1], sys.argv[2])
