#!/usr/bin/env python3
"""The HTML explorer's data (docs/explorer.md) against the JSON report and
PyTorch's own counters: for real recordings, `snapdiff report --format html`,
its container decoded here, and

  - the peak (event, requested, allocated, reserved, bytes by category) equal
    to `report --format json`'s, and the requested peak to the truth file's;
  - the bytes live by category after an event, summed from the allocations in
    the page (alloc <= e < free), equal to `report --at e --format json` at
    several events, and to every level-of-detail column's figures;
  - the allocator state at the peak: live blocks sum to the allocated bytes,
    segments to the reserved bytes (both the JSON report's);
  - the stack tree, sites and frames consistent (parents before children).

Usage: explorer_data_test.py SNAPDIFF TESTS_DATA_REAL_DIR"""
import base64
import gzip
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

TYPES = {"i8": "b", "u8": "B", "i16": "h", "u16": "H", "i32": "i", "u32": "I", "f64": "d"}
SIZES = {"i8": 1, "u8": 1, "i16": 2, "u16": 2, "i32": 4, "u32": 4, "f64": 8}
fails = 0


def check(ok, what):
    global fails
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        fails += 1


def decode(page):
    m = re.search(r'<script type="application/octet-stream" id="sd-explorer-data">([A-Za-z0-9+/=]*)</script>', page)
    raw = gzip.decompress(base64.b64decode(m.group(1)))
    assert raw[:4] == b"SDX1", "magic"
    hl = struct.unpack("<I", raw[4:8])[0]
    head = json.loads(raw[8:8 + hl].decode("utf-8"))
    arrays = []
    for a in head["arrays"]:
        assert a["offset"] % 8 == 0 and a["offset"] >= 8 + hl
        n, t = a["length"], a["type"]
        arrays.append(struct.unpack_from("<%d%s" % (n, TYPES[t]), raw, a["offset"]))
        assert a["offset"] + n * SIZES[t] <= len(raw)

    def resolve(x):
        if isinstance(x, dict):
            if set(x) == {"array"}:
                return arrays[x["array"]]
            return {k: resolve(v) for k, v in x.items()}
        if isinstance(x, list):
            return [resolve(v) for v in x]
        return x
    return resolve(head)


def live_by_category(run, e):
    al = run["allocs"]
    sums = [0] * len(run["categories"])
    for a, f, s, c in zip(al["alloc"], al["free"], al["size"], al["category"]):
        if a <= e < f:
            sums[c] += int(s)
    return {cat["name"]: sums[i] for i, cat in enumerate(run["categories"])}


def snapdiff(binary, *args):
    return subprocess.run([binary, *args], check=True, capture_output=True, text=True).stdout


def main():
    binary, real = sys.argv[1], sys.argv[2]
    names = ["cat_fp8_mlp", "ans_gpt2_py", "cat_fsdp2_gpt2", "ans_oom_frag"]
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            snap = os.path.join(real, name + ".pickle.gz")
            page = os.path.join(tmp, name + ".html")
            snapdiff(binary, "report", "--format", "html", snap, "-o", page)
            with open(page, encoding="utf-8") as f:
                data = decode(f.read())
            rep = json.loads(snapdiff(binary, "report", "--format", "json", snap))
            run = data["runs"][rep["peak_device"]] if "peak_device" in rep else data["runs"][0]
            dev = next(d for d in rep["devices"] if d["device"] == run["device"])
            pk = run["peak"]
            check(pk["event"] == dev["peak"]["event_index"] and pk["requested"] == dev["peak"]["requested_bytes"]
                  and pk["allocated"] == dev["peak"]["allocated_bytes_at_peak"],
                  f"{name}: the page's peak is the JSON report's (event {pk['event']}, {pk['requested']} bytes)")
            names_ = [c["name"] for c in run["categories"]]
            check(dict(zip(names_, pk["by_category"])) == dev["categories"], f"{name}: peak bytes by category = JSON's")
            with open(os.path.join(real, name + ".truth.json")) as f:
                truth = json.load(f)
            tp = truth.get("memory_stats", {}).get("requested_bytes.all.peak")
            if tp is not None and dev.get("history") == "complete":
                check(pk["requested"] == tp, f"{name}: requested peak = PyTorch's requested_bytes.all.peak ({tp})")
            al = run["allocs"]
            check(al["count"] == al["total"] and al["note"] == "", f"{name}: every allocation is in the page ({al['count']})")
            check(live_by_category(run, pk["event"]) == dev["categories"], f"{name}: allocations live at the peak sum to its categories")
            n = run["events"]
            for e in sorted({0, n // 7, n // 3, n // 2, (2 * n) // 3, n - 1}):
                at = json.loads(snapdiff(binary, "report", "--format", "json", "--at", str(e), snap))
                atd = next(d for d in at["devices"] if d["device"] == run["device"])
                check(live_by_category(run, e) == atd["categories"], f"{name}: live after event {e} = report --at {e}")
            # Level-of-detail columns: exact at their events.
            bad = 0
            for lv in run["levels"]:
                C = len(names_)
                for b in range(0, lv["buckets"], max(1, lv["buckets"] // 16)):
                    e = lv["event"][b]
                    if e < 0:
                        continue
                    col = dict(zip(names_, [int(x) for x in lv["by_category"][b * C:(b + 1) * C]]))
                    if col != live_by_category(run, e) or int(lv["requested"][b]) != sum(col.values()):
                        bad += 1
            check(bad == 0 and len(run["levels"]) > 0, f"{name}: level columns equal the allocations' sums ({len(run['levels'])} levels)")
            finest = run["levels"][-1]
            check(finest["buckets"] == n or finest["buckets"] == 65536, f"{name}: finest level has one column per event when it can")
            # Stack tree.
            st = run["stacks"]
            ok = all(p < i for i, p in enumerate(st["parent"]) if i > 0) and all(
                0 <= fr < len(run["frames"]) for fr in st["frame"][1:])
            ok = ok and all(-1 <= s < len(run["sites"]) for s in st["site"]) and all(st["site"][s] >= 0 for s in al["stack"])
            check(ok, f"{name}: stack tree ({len(st['parent'])} nodes, {len(run['frames'])} frames, {len(run['sites'])} sites)")
            # The allocator at the peak.
            states = [s for s in run["states"] if s["event"] == pk["event"]]
            if states:
                s = states[0]
                used = sum(int(sz) for sz, a in zip(s["blocks"]["size"], s["blocks"]["alloc"]) if a != -1)
                resv = sum(int(x) for x in s["segments"]["size"])
                check(used == dev["peak"]["allocated_bytes_at_peak"], f"{name}: live blocks at the peak = allocated ({used})")
                atp = json.loads(snapdiff(binary, "report", "--format", "json", "--at", str(pk["event"]), snap))
                rsv = next(d for d in atp["devices"] if d["device"] == run["device"])["at"]["reserved_bytes"]
                check(resv == rsv, f"{name}: segments at the peak = reserved after that event ({resv})")
                inside = all(s["segments"]["addr"][g] <= a and a + z <= s["segments"]["addr"][g] + s["segments"]["size"][g]
                             for g, a, z in zip(s["blocks"]["segment"], s["blocks"]["addr"], s["blocks"]["size"]) if g >= 0)
                check(inside, f"{name}: every block lies inside its segment")
        # The report's and the diff's site rows name sites of the page's data
        # (a click on a row searches that exact text in every run).
        import html as htmlmod
        pairs = [("cat_fp8_mlp", None), ("cat_fp8_mlp", "cat_autocast_gpt2"), ("ans_gpt2_py", "ans_gpt2_cpp")]
        for a, b in pairs:
            page = os.path.join(tmp, "rows.html")
            args = [os.path.join(real, a + ".pickle.gz")] + ([os.path.join(real, b + ".pickle.gz")] if b else [])
            snapdiff(binary, "report" if not b else "diff", "--format", "html", *args, "-o", page)
            with open(page, encoding="utf-8") as f:
                text = f.read()
            data = decode(text)
            sites = {x for r in data["runs"] for x in r["sites"]}
            rows = [htmlmod.unescape(x) for x in re.findall(r'<tr data-site="([^"]*)"', text)]
            missing = [r for r in rows if r not in sites]
            check(rows and not missing, f"{'diff ' + a + ' ' + b if b else 'report ' + a}: every site row ({len(rows)}) is a site of the data"
                  + (f"; not: {missing[:2]}" if missing else ""))
    print(f"{fails} failures")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
