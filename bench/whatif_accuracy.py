#!/usr/bin/env python3
"""How close `snapdiff whatif` comes to PyTorch's own peaks: every run of a
model in tests/data/real/whatif/ (MODEL__SETTING.pickle.gz, recorded by
scripts/record/record_whatif.py) predicted from every other run of the same
model, against the recorded run's memory_stats(). Prints one row per pair and
the worst error per model; --markdown prints the table docs/whatif.md holds.

    python3 bench/whatif_accuracy.py build/snapdiff [--markdown]
"""
import glob
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIR = os.path.join(ROOT, "tests", "data", "real", "whatif")


def main():
    binary, markdown = sys.argv[1], "--markdown" in sys.argv
    runs = {}
    for f in sorted(glob.glob(os.path.join(DIR, "*__*.pickle.gz"))):
        stem = os.path.basename(f)[: -len(".pickle.gz")]
        truth = json.load(open(os.path.join(DIR, stem + ".truth.json")))
        if truth["config"].get("cap_bytes") or truth["oom"]:
            continue
        runs.setdefault(stem.split("__")[0], []).append((stem, f, truth))
    worst = {}
    rows = []
    for model, group in runs.items():
        confs = [t["alloc_conf"] for _, _, t in group]
        for src, path, _ in group:
            args = [binary, "whatif", "-f", "json", path]
            for c in confs:
                args += ["--alloc-conf", c]
            out = json.loads(subprocess.run(args, capture_output=True, text=True, check=True).stdout)
            for (dst, _, truth), sc in zip(group, out["scenarios"]):
                ms = truth["memory_stats"]
                err = {k: (sc["peak"][k + "_bytes"] - ms[k + "_bytes.all.peak"]) / ms[k + "_bytes.all.peak"] * 100
                       for k in ("allocated", "reserved")}
                rows.append((model, src, dst, truth["alloc_conf"], ms, sc, err))
                w = worst.setdefault(model, [0.0, 0.0, 0])
                w[0] = max(w[0], abs(err["allocated"]))
                w[1] = max(w[1], abs(err["reserved"]))
                w[2] += 1
    if markdown:
        print("| model | setting | recorded allocated | predicted from `default` | recorded reserved | predicted from `default` | worst error from any run (allocated, reserved) |")
        print("|---|---|---:|---:|---:|---:|---|")
        for model, src, dst, conf, ms, sc, err in rows:
            if not src.endswith("__default"):
                continue
            pair = [r for r in rows if r[0] == model and r[2] == dst]
            wa = max(abs(r[6]["allocated"]) for r in pair)
            wr = max(abs(r[6]["reserved"]) for r in pair)
            print(f"| {model} | `{conf or '(default)'}` | {ms['allocated_bytes.all.peak']:,} | {sc['peak']['allocated_bytes']:,} "
                  f"| {ms['reserved_bytes.all.peak']:,} | {sc['peak']['reserved_bytes']:,} | {wa:.3f}%, {wr:.3f}% |")
    else:
        for model, src, dst, conf, ms, sc, err in rows:
            print(f"{src:26} -> {dst:26} allocated {err['allocated']:+.3f}%  reserved {err['reserved']:+.3f}%")
    for model, (wa, wr, n) in worst.items():
        print(f"{model}: {n} pairs, worst allocated {wa:.3f}%, worst reserved {wr:.3f}%", file=sys.stderr)


if __name__ == "__main__":
    main()
