"""Folders of ranks and `snapdiff ranks` (issue 37): names read from
summaries, the memory bound over -j readers and the views kept, ranks that
are not regular files, quoted values, many small ranks, and the pytest
plugin's reading of a verdict with an unreadable rank.

Summaries are made at test time by the snapdiff under test (`report
--format json`, SNAPDIFF_PROBE_BIN, set by run.py) from a small snapshot,
then edited.
"""
import gzip
import json
import os
import subprocess
import sys

from common import MiB, SEG, dump, event, frame, says, small_snapshot, write
from run import Probe

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
GiB = 1 << 30


def _summary(d):
    """The summary (report JSON) of the small snapshot, as a dict."""
    snap = os.path.join(d, ".s.pickle")
    dump(snap, small_snapshot())
    out = subprocess.run([os.environ["SNAPDIFF_PROBE_BIN"], "report", snap, "--format", "json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=True).stdout
    os.unlink(snap)
    return json.loads(out)


def _write_summary(path, doc, compress=False):
    data = json.dumps(doc).encode()
    write(path, gzip.compress(data, 1) if compress else data)


# ---- 1: names matched by hand, bounded ----------------------------------------

def _named(*names):
    """Summaries whose snapshot names (input.name) are the given ones."""
    def make(d):
        doc = _summary(d)
        os.mkdir(os.path.join(d, "sums"))
        for k, n in enumerate(names):
            doc["input"]["name"] = n
            _write_summary(os.path.join(d, "sums", "s%d.json" % k), doc)
    return make


def _one_line_per_rank(n):
    def check(d, r):
        lines = r.err.decode("utf-8", "backslashreplace").splitlines()
        errs = [x for x in lines if x.startswith("snapdiff: error: ")]
        if len(errs) != n:
            return "expected %d error lines, got %d: %r" % (n, len(errs), lines[:4])
        if any(len(x) > 2000 for x in lines):
            return "an error line of %d bytes" % max(len(x) for x in lines)
        return None
    return check


# ---- 6: --max-memory on `snapdiff ranks` ---------------------------------------

def _big_summaries(count, text_bytes):
    """`count` gzip'd summaries whose text is about `text_bytes` (a frame name
    of the peak's site holds it: the view keeps it)."""
    def make(d):
        doc = _summary(d)
        os.mkdir(os.path.join(d, "sums"))
        for k in range(count):
            doc["input"]["name"] = "rank%d.pickle" % k
            doc["devices"][0]["live_at_peak"]["sites"][0]["stack"][0]["name"] = chr(ord("a") + k % 26) * text_bytes
            _write_summary(os.path.join(d, "sums", "rank%d.json.gz" % k), doc, compress=True)
    return make


# ---- 7: the views kept count against the bound ---------------------------------

def _many_sites_ranks(ranks, sites):
    """`ranks` copies of one snapshot with `sites` allocations live at the
    end, each from its own stack (a site row each in the report)."""
    def make(d):
        tr, blocks = [], []
        size = 512
        seg_size = max(2 * MiB, sites * size)
        tr.append(event("segment_alloc", SEG, seg_size, 1_000_000))
        for i in range(sites):
            fr = [frame("layer_%d" % i, "/home/u/model_%d.py" % (i % 97), 10 + i), frame("forward")]
            tr.append(event("alloc", SEG + i * size, size, 1_000_001 + i, fr))
            blocks.append({"address": SEG + i * size, "size": size, "requested_size": size,
                           "state": "active_allocated", "frames": fr})
        rest = seg_size - sites * size
        if rest:
            blocks.append({"address": SEG + sites * size, "size": rest, "requested_size": 0,
                           "state": "inactive", "frames": []})
        seg = {"device": 0, "address": SEG, "total_size": seg_size, "allocated_size": sites * size,
               "active_size": sites * size, "requested_size": sites * size, "stream": 0,
               "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": False,
               "frames": [], "blocks": blocks}
        os.mkdir(os.path.join(d, "ranks"))
        first = os.path.join(d, "ranks", "rank0.pickle")
        dump(first, {"segments": [seg], "device_traces": [tr]})
        for r in range(1, ranks):
            os.link(first, os.path.join(d, "ranks", "rank%d.pickle" % r))
    return make


# ---- 10: ranks that are not regular files --------------------------------------

def _rank_and(kind):
    def make(d):
        os.mkdir(os.path.join(d, "ranks"))
        dump(os.path.join(d, "ranks", "rank0.pickle"), small_snapshot())
        bad = os.path.join(d, "ranks", "rank1.pickle")
        if kind == "dangling":
            os.symlink("gone.pickle", bad)
        elif kind == "fifo":
            os.mkfifo(bad)
        elif kind == "loop":
            os.symlink("rank1.pickle", bad)
    return make


# ---- 12: quoted values cut ------------------------------------------------------

def _schema_string(n):
    def make(d):
        doc = _summary(d)
        doc["schema"] = "snapdiff/report/9" + "x" * n
        _write_summary(os.path.join(d, "s.json.gz"), doc, compress=True)
    return make


def _short_output(max_bytes):
    def check(d, r):
        p = os.path.join(d, "out.txt")
        if os.path.exists(p) and os.path.getsize(p) > max_bytes:
            return "the report holds %d bytes" % os.path.getsize(p)
        if len(r.err) > 2000:
            return "stderr holds %d bytes" % len(r.err)
        return None
    return check


# ---- 16: many small ranks ------------------------------------------------------

def _small_ranks(n):
    def make(d):
        os.mkdir(os.path.join(d, "ranks"))
        first = None
        for r in range(n):
            path = os.path.join(d, "ranks", "rank%d.pickle" % r)
            if r % 50_000 == 0:  # a file system allows some tens of thousands of links to one file
                first = path
                dump(first, small_snapshot())
            else:
                os.link(first, path)
    return make


# ---- 15: the pytest plugin -------------------------------------------------------

_PLUGIN_TEST = r"""
import os, pytest

@pytest.mark.gpu_memory(max_peak="512 KiB", ranks=True)
def test_ranks():
    d = os.environ["SNAPDIFF_RANKS_DIR"]
    with open(os.path.join(d, "rank0.pickle"), "wb") as f, open(SNAPSHOT, "rb") as g:
        f.write(g.read())
    os.symlink("gone.pickle", os.path.join(d, "rank1.pickle"))
"""


# pytest by this interpreter, or by the system's one where this has none.
_PYTEST = ("import importlib.util, os, sys; "
           "exe = sys.executable if importlib.util.find_spec('pytest') else '/usr/bin/python3'; "
           "os.execv(exe, [exe, '-m', 'pytest'] + sys.argv[1:])")


def _plugin_test(d):
    dump(os.path.join(d, "snap.pickle"), small_snapshot())
    with open(os.path.join(d, "test_ranks.py"), "w") as f:
        f.write("SNAPSHOT = %r\n" % os.path.join(d, "snap.pickle") + _PLUGIN_TEST)
    with open(os.path.join(d, "pytest.ini"), "w") as f:
        f.write("[pytest]\n")


def _plugin_says(d, r):
    out = r.out.decode("utf-8", "backslashreplace")
    problems = []
    if "snapdiff check failed" in out:
        problems.append("the plugin hid the verdict ('snapdiff check failed')")
    if "FAIL rank 0" not in out:
        problems.append("rank 0's failed threshold is not shown")
    if "ERROR rank 1" not in out:
        problems.append("rank 1's error is not shown")
    if "no HTML report" in out:
        problems.append("no HTML report")
    return "; ".join(problems) + (": %r" % out[-600:]) if problems else None


def probes(scale):
    full = scale == "full"
    long = 30_000
    p = []
    p.append(Probe("i37_01_ranks_regex_oom_folder", "names",
                   "a summary naming oom_rank-1_aaaa...(30,000)/x.pickle: recursive std::regex overflowed the stack",
                   _named("oom_rank-1_" + "a" * long + "/x.pickle"), ["ranks", "sums", "-o", "out.txt"],
                   exit=3, check=says("input.name", "longer than any path")))
    p.append(Probe("i37_01_ranks_regex_step_folder", "names",
                   "a summary naming step_9999...(30,000)/rank1.pickle",
                   _named("step_" + "9" * long + "/rank1.pickle"), ["ranks", "sums", "-o", "out.txt"],
                   exit=3, check=says("input.name", "longer than any path")))
    p.append(Probe("i37_01_ranks_regex_shared_base", "names",
                   "two summaries naming bbbb...(30,000)_1.pickle and _2.pickle",
                   _named("b" * long + "_1.pickle", "b" * long + "_2.pickle"), ["ranks", "sums", "-o", "out.txt"],
                   exit=3, one_line=False, check=_one_line_per_rank(2)))
    p.append(Probe("i37_01_ranks_long_names_in_bound", "names",
                   "two summaries naming bbbb...(4,000)_1.pickle and _2.pickle: matched in linear time",
                   _named("b" * 4000 + "_1.pickle", "b" * 4000 + "_2.pickle"), ["ranks", "sums", "-o", "out.txt"],
                   exit=0))
    # 6. Each summary needs about ten times its text to read: under the bound
    # -j 4 shares, every one is read again alone; all are kept within it.
    count, text = (64, 24 * MiB) if full else (4, 6 * MiB)
    bound = 1024 * MiB if full else 256 * MiB
    p.append(Probe("i37_06_ranks_max_memory", "bounds",
                   "%d gzip'd summaries of %d MiB text each, ranks -j %d --max-memory %d MiB (refused as unknown)"
                   % (count, text // MiB, 16 if full else 4, bound // MiB),
                   _big_summaries(count, text),
                   ["ranks", "sums", "-j", "16" if full else "4", "--max-memory", "%dMiB" % (bound // MiB),
                    "-o", "out.txt"],
                   exit=(0, 3), one_line=False, max_rss=bound))
    # 7. The views of many ranks with many sites each, every site shown.
    ranks, sites = (50, 50_000) if full else (48, 1_500)
    bound7 = 512 * MiB if full else 96 * MiB
    p.append(Probe("i37_07_ranks_views_counted", "bounds",
                   "%d ranks of %d live sites each, report DIR -n 10000000 -f json --max-memory %d MiB "
                   "(the kept views were not counted)" % (ranks, sites, bound7 // MiB),
                   _many_sites_ranks(ranks, sites),
                   ["report", "ranks", "-n", "10000000", "-f", "json", "-j", "2",
                    "--max-memory", "%dMiB" % (bound7 // MiB), "-o", "out.json"],
                   exit=(0, 3), one_line=False, max_rss=bound7))
    # 10. A rank that cannot be read fails the gate, FIFO or not.
    for kind in ("dangling", "fifo", "loop"):
        p.append(Probe("i37_10_ranks_%s" % kind, "misc",
                       "a folder of ranks whose rank1.pickle is a %s: dropped silently, check passed"
                       % {"dangling": "dangling link", "fifo": "FIFO", "loop": "link to itself"}[kind],
                       _rank_and(kind), ["check", "--max-peak", "1GiB", "ranks", "-o", "verdict.txt"],
                       exit=3, check=says("rank1.pickle", "cannot read this rank")))
    p.append(Probe("i37_10_ranks_fifo_skip_bad", "misc",
                   "the same FIFO rank with --skip-bad-ranks: listed, exit 0",
                   _rank_and("fifo"), ["check", "--max-peak", "1GiB", "ranks", "-o", "verdict.txt",
                                       "--skip-bad-ranks"],
                   exit=0))
    # 12. A summary whose schema is a huge string.
    n = 60 * MiB if full else 4 * MiB
    p.append(Probe("i37_12_ranks_schema_quoted", "names",
                   "a summary whose schema is a %d MiB string: the error line and the report held it whole"
                   % (n // MiB), _schema_string(n), ["ranks", "s.json.gz", "-o", "out.txt"],
                   exit=3, check=_short_output(64 << 10)))
    # 16. Many small ranks.
    n16 = 100_000 if full else 1_000
    p.append(Probe("i37_16_ranks_many_small", "time",
                   "a folder of %d small ranks, -j 1 (a thread started per rank; 1.2 GB at 100,000)" % n16,
                   _small_ranks(n16), ["report", "ranks", "-j", "1", "-o", "out.txt"],
                   exit=0, max_rss=(512 if full else 256) * MiB))
    # 15. The plugin's message for a verdict with an unreadable rank.
    p.append(Probe("i37_15_plugin_unreadable_rank", "misc",
                   "the pytest plugin on a test whose rank 1 is a dangling link and rank 0 fails its threshold "
                   "(snapdiff exits 3 by design: the plugin said 'check failed (exit 3)', no HTML report)",
                   _plugin_test, ["-c", _PYTEST, "-q", "-p", "no:cacheprovider", "-p", "pytest_snapdiff.plugin",
                                  "--snapdiff", "test_ranks.py"],
                   exit=1, program="python", check=_plugin_says,
                   env={"PYTHONPATH": os.pathsep.join([os.path.join(REPO, "python"),
                                                       os.path.join(REPO, "tests", "python", "standin")]),
                        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
                        "SNAPDIFF_BIN": os.environ.get("SNAPDIFF_PROBE_BIN", "snapdiff")}))
    return p
