#!/usr/bin/env python3
"""snapdiff's read against the machine's floor (issue 40): for each input,
in rounds of pairs (the commands interleaved, so a change of the machine's
load hits all of them alike), the wall time of

  cat FILE >/dev/null          reading the bytes from the page cache
  skim FILE                    the opcode walk that builds nothing (bench/skim.c)
  snapdiff report FILE         the text report
  snapdiff report FILE.snap    the same run in snapdiff's own format
  snapdiff diff FILE FILE      two runs at once (issue 40: <= 1.2x one report)

and the ratios report/skim, snap/skim, diff/report (medians).
Usage: bench_floor.py --bin SNAPDIFF --skim SKIM [--rounds 5] FILE.pickle...
"""
import argparse
import os
import statistics
import subprocess
import sys
import time


# command name -> peak resident set sizes (bytes), one per run: the child's
# ru_maxrss, which starts from this Python process's ~15 MB at the fork, so
# figures below that are this script's, not the command's.
RSS = {}


def wall(cmd, name=None):
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = p.stderr.read()
    _, status, usage = os.wait4(p.pid, 0)
    dt = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit("%s: exit %d: %s" % (" ".join(cmd), p.returncode, err.decode(errors="replace")[-300:]))
    if name:
        RSS.setdefault(name, []).append(usage.ru_maxrss * 1024)  # Linux: KiB
    return dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--skim", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("inputs", nargs="+")
    a = ap.parse_args()
    print("machine: %d cores, load %.2f" % (os.cpu_count(), os.getloadavg()[0]))
    for f in a.inputs:
        snap = os.path.splitext(f)[0] + ".snap"
        if not os.path.exists(snap) or os.path.getmtime(snap) < os.path.getmtime(f):
            subprocess.run([a.bin, "convert", f, "-o", snap], check=True, stdout=subprocess.DEVNULL)
        cmds = {
            "cat": ["cat", f],
            "skim": [a.skim, f],
            "report": [a.bin, "report", f],
            "report .snap": [a.bin, "report", snap],
            "diff A A": [a.bin, "diff", f, f],
        }
        for c in cmds.values():  # warm the page cache
            wall(c)
        times = {k: [] for k in cmds}
        RSS.clear()
        for _ in range(a.rounds):
            for k, c in cmds.items():
                times[k].append(wall(c, k))
        med = {k: statistics.median(v) for k, v in times.items()}
        ops = subprocess.run([a.skim, f], capture_output=True, text=True).stdout.split()[0]
        print("\n%s: %.1f MB, %s opcodes; .snap %.1f MB; median of %d rounds" %
              (os.path.basename(f), os.path.getsize(f) / 1e6, format(int(ops), ","), os.path.getsize(snap) / 1e6, a.rounds))
        for k in cmds:
            print("  %-14s %8.3f s   (min %.3f, max %.3f)   peak RSS %7.1f MB" %
                  (k, med[k], min(times[k]), max(times[k]), max(RSS[k]) / 1e6))
        print("  report / skim        %.2fx   (issue 40: <= 1.5x)" % (med["report"] / med["skim"]))
        print("  report .snap / skim  %.2fx   (<= 1.0x)" % (med["report .snap"] / med["skim"]))
        print("  diff A A / report    %.2fx   (<= 1.2x)" % (med["diff A A"] / med["report"]))
        print("  skim / cat           %.2fx" % (med["skim"] / med["cat"]))


if __name__ == "__main__":
    main()
