#!/usr/bin/env python3
"""bench/skim.c, the floor snapdiff's pickle read is measured against
(bench/bench_floor.sh): built with the system's C compiler, its opcode count
equals pickletools' on pickles of every protocol and on a real snapshot, and
a cut or foreign file is one line on stderr, exit 3.
Usage: skim_test.py SOURCE_DIR   (exit 77, skipped, without a C compiler)"""
import gzip
import os
import pickle
import pickletools
import shutil
import subprocess
import sys
import tempfile

src = sys.argv[1]
cc = shutil.which("cc") or shutil.which("gcc")
if not cc:
    print("skip: no C compiler")
    sys.exit(77)
fails = 0


def check(ok, what):
    global fails
    print(("ok   " if ok else "FAIL ") + what)
    fails += 0 if ok else 1


with tempfile.TemporaryDirectory() as t:
    skim = os.path.join(t, "skim")
    subprocess.run([cc, "-O2", "-o", skim, os.path.join(src, "bench", "skim.c")], check=True)
    files = [os.path.join(src, "tests", "data", "tiny_p%d.pickle" % p) for p in range(6)]
    real = os.path.join(t, "real.pickle")
    with gzip.open(os.path.join(src, "tests", "data", "real", "cat_fp8_mlp.pickle.gz")) as g, open(real, "wb") as o:
        o.write(g.read())
    files.append(real)
    obj = {"a": [1, 2.5, -3, 2 ** 70, "x" * 300, b"y" * 300, (1, 2), {3}, frozenset([4]), bytearray(b"z"), None, True]}
    for p in range(6):
        f = os.path.join(t, "made_p%d.pickle" % p)
        with open(f, "wb") as o:
            pickle.dump(obj, o, protocol=p)
        files.append(f)
    for f in files:
        with open(f, "rb") as h:
            ops = list(pickletools.genops(h))
        want = len(ops)
        end = ops[-1][2] + 1
        r = subprocess.run([skim, f], capture_output=True, text=True)
        got = r.stdout.split()
        check(r.returncode == 0 and got == [str(want), str(end)],
              "%s: %s opcodes to byte %d (skim: %s)" % (os.path.basename(f), want, end, r.stdout.strip() or r.stderr.strip()))
    cut = os.path.join(t, "cut.pickle")
    with open(real, "rb") as h, open(cut, "wb") as o:
        o.write(h.read()[:5000])
    for name, path in (("cut", cut), ("text", os.path.join(src, "README.md"))):
        r = subprocess.run([skim, path], capture_output=True, text=True)
        check(r.returncode == 3 and r.stderr.count("\n") == 1 and r.stdout == "",
              "a %s file: exit %d, %r" % (name, r.returncode, r.stderr.strip()))
print("%d failures" % fails)
sys.exit(1 if fails else 0)
