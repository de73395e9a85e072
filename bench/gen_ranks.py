#!/usr/bin/env python3
"""Writes the files of a pretend run on N ranks, for timing the many-ranks paths.

    python3 gen_ranks.py snapshots SRC N OUT_DIR
        N copies of the snapshot SRC (any input snapdiff reads, e.g.
        tests/data/real/fsdp2_gpt2.pickle.gz) named in torchtitan's current
        layout: OUT_DIR/step_000000000002/{R:06d}_step_2.pickle.gz. A SRC that
        is not gzip is compressed once first, so the names tell the truth.
        The copies are identical: enough for timing, not for imbalance.

    python3 gen_ranks.py summaries SRC_JSON N OUT_DIR
        N map-step summaries OUT_DIR/rank{R}.json from one real
        `snapdiff report FILE --format json` output: every integer byte
        figure under "devices" (a key "bytes", "size" or ending in "_bytes",
        and the values of "categories") is scaled by 1 + (R*37 % 100)/1000,
        so that the ranks differ, and "input"."name" is set to rank R's file
        name in torchtitan's layout. Counts, event indices, times and
        addresses are left as they are; the figures outside "devices" too.

Python's standard library only.
"""
import gzip
import json
import os
import shutil
import sys

STEP = 2


def titan_name(rank):
    return f"step_{STEP:012d}/{rank:06d}_step_{STEP}.pickle.gz"


def write_snapshots(src, n, out_dir):
    with open(src, "rb") as f:
        head = f.read(2)
    source = src
    packed = None
    if head != b"\x1f\x8b":
        packed = os.path.join(out_dir, ".gen_ranks_source.gz")
        os.makedirs(out_dir, exist_ok=True)
        with open(src, "rb") as f, gzip.open(packed, "wb", compresslevel=6) as g:
            shutil.copyfileobj(f, g)
        source = packed
    for rank in range(n):
        dst = os.path.join(out_dir, titan_name(rank))
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copyfile(source, dst)
    if packed:
        os.remove(packed)


def is_byte_key(key):
    return key in ("bytes", "size") or key.endswith("_bytes")


def scale(node, factor, byte_figure=False):
    """A copy of node with its byte figures scaled; byte_figure: node is one."""
    if isinstance(node, bool):
        return node
    if isinstance(node, int):
        return int(round(node * factor)) if byte_figure else node
    if isinstance(node, list):
        return [scale(v, factor, byte_figure) for v in node]
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            if k == "categories" and isinstance(v, dict):
                out[k] = {c: scale(b, factor, True) for c, b in v.items()}
            else:
                out[k] = scale(v, factor, is_byte_key(k))
        return out
    return node


def write_summaries(src, n, out_dir):
    with open(src, encoding="utf-8") as f:
        report = json.load(f)
    if not isinstance(report, dict) or "devices" not in report:
        sys.exit(f"{src}: not a `snapdiff report --format json` output (no \"devices\")")
    os.makedirs(out_dir, exist_ok=True)
    for rank in range(n):
        factor = 1 + (rank * 37 % 100) / 1000
        out = dict(report)
        out["devices"] = scale(report["devices"], factor)
        out["input"] = dict(report.get("input", {}))
        out["input"]["name"] = titan_name(rank)
        with open(os.path.join(out_dir, f"rank{rank}.json"), "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1)
            f.write("\n")


def main():
    if len(sys.argv) != 5 or sys.argv[1] not in ("snapshots", "summaries"):
        sys.exit(__doc__)
    mode, src, n, out_dir = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    if n < 1:
        sys.exit("N must be at least 1")
    (write_snapshots if mode == "snapshots" else write_summaries)(src, n, out_dir)


if __name__ == "__main__":
    main()
