"""Issue 37, the lead's items: outputs that would replace an input (14),
the view and rendering counted against --max-memory (7), quoted values cut
in messages (12)."""
import json
import os
import shutil

from common import MiB, SEG, event, frame, says
from run import Probe

HERE = os.path.dirname(os.path.abspath(__file__))
REAL = os.path.normpath(os.path.join(HERE, "..", "..", "tests", "data", "real"))
SNAP = "small_bf16.pickle"


def _copy(d, as_name="s.pickle"):
    shutil.copyfile(os.path.join(REAL, SNAP), os.path.join(d, as_name))


def _digest(path):
    with open(path, "rb") as f:
        return f.read()


def _input_intact(*names):
    """check(): each name still holds the snapshot byte for byte."""
    def check(d, r):
        want = _digest(os.path.join(REAL, SNAP))
        for n in names:
            p = os.path.join(d, n)
            if not os.path.isfile(p) or _digest(p) != want:
                return "%s was replaced (the input is lost)" % n
        return None
    return check


def _both(a, b):
    def check(d, r):
        return a(d, r) or b(d, r)
    return check


def _hard_link(d):
    _copy(d)
    os.link(os.path.join(d, "s.pickle"), os.path.join(d, "h.pickle"))


def _sym_link(d):
    _copy(d)
    os.symlink("s.pickle", os.path.join(d, "l.pickle"))


def _sites_snapshot(n):
    """n live allocations, each from its own frame: n sites."""
    import pickle
    size = 512
    tr = [event("segment_alloc", SEG, n * size + 2 * MiB, 1000)]
    blocks = []
    for i in range(n):
        fr = [frame("layer_%d_forward" % i, "/home/u/models/block_%d.py" % i, i + 1),
              frame("train_step", "/home/u/train.py", 10)]
        tr.append(event("alloc", SEG + i * size, size, 2000 + i, fr))
        blocks.append({"address": SEG + i * size, "size": size, "requested_size": size,
                       "state": "active_allocated", "frames": fr})
    blocks.append({"address": SEG + n * size, "size": 2 * MiB, "requested_size": 0, "state": "inactive",
                   "frames": []})
    seg = {"device": 0, "address": SEG, "total_size": n * size + 2 * MiB, "allocated_size": n * size,
           "active_size": n * size, "requested_size": n * size, "stream": 0, "segment_type": "large",
           "segment_pool_id": (0, 0), "is_expandable": False, "frames": [frame()], "blocks": blocks}
    return pickle.dumps({"segments": [seg], "device_traces": [tr]}, protocol=4)


def _write_sites(n, names=("s.pickle",)):
    def make(d):
        data = _sites_snapshot(n)
        for nm in names:
            with open(os.path.join(d, nm), "wb") as f:
                f.write(data)
    return make


def _short_line(limit):
    def check(d, r):
        n = len(r.err)
        return "the error line is %d bytes (at most %d expected)" % (n, limit) if n > limit else None
    return check


def _budget_with_phase(n):
    def make(d):
        _copy(d)
        with open(os.path.join(d, "b.json"), "w") as f:
            json.dump({"schema": "snapdiff/budget/2", "metric": "x" * n}, f)
    return make


def _rules_with_condition(n):
    def make(d):
        _copy(d)
        with open(os.path.join(d, "r.json"), "w") as f:
            json.dump({"format": "snapdiff.rules", "version": 1, "rules": [{"name": "r", "category": "activation",
                                                "when": {"c" * n: True}}]}, f)
    return make


def probes(scale):
    full = scale == "full"
    o, b, n = "outputs", "bounds", "names"
    sites = 50000 if full else 20000
    big = (12 if full else 4) * MiB  # under the 16 MiB bound of rules and budget files
    mem = "256MiB" if full else "128MiB"
    mem2 = "512MiB" if full else "256MiB"  # a diff gives each run half
    return [
        # 14. Outputs that are an input.
        Probe("i37_14_report_o_input", o, "`report s.pickle -o s.pickle` (used to replace the snapshot, exit 0)",
              _copy, ["report", "s.pickle", "-o", "s.pickle"], exit=2, one_line=True,
              check=_both(_input_intact("s.pickle"), says("cannot write s.pickle", "input"))),
        Probe("i37_14_report_o_hardlink", o, "`report s.pickle -o h.pickle`, h a hard link to s",
              _hard_link, ["report", "s.pickle", "-o", "h.pickle"], exit=2, one_line=True,
              check=_input_intact("s.pickle", "h.pickle")),
        Probe("i37_14_report_o_symlink", o, "`report l.pickle -o s.pickle`, l a symlink to s",
              _sym_link, ["report", "l.pickle", "-o", "s.pickle"], exit=2, one_line=True,
              check=_input_intact("s.pickle")),
        Probe("i37_14_write_budget_input", o, "`check --write-budget s.pickle s.pickle` (used to replace it)",
              _copy, ["check", "--write-budget", "s.pickle", "s.pickle"], exit=2, one_line=True,
              check=_input_intact("s.pickle")),
        Probe("i37_14_convert_o_input", o, "`convert s.pickle -o s.pickle` (used to replace it)",
              _copy, ["convert", "s.pickle", "-o", "s.pickle"], exit=2, one_line=True,
              check=_input_intact("s.pickle")),
        Probe("i37_14_diff_o_input", o, "`diff s.pickle t.pickle -o t.pickle`",
              lambda d: (_copy(d), _copy(d, "t.pickle")), ["diff", "s.pickle", "t.pickle", "-o", "t.pickle"],
              exit=2, one_line=True, check=_input_intact("s.pickle", "t.pickle")),
        Probe("i37_14_write_budget_empty", o, "`check --write-budget '' s.pickle` (used to write to stdout)",
              _copy, ["check", "--write-budget", "", "s.pickle"], exit=2, one_line=True,
              check=says("--write-budget", "empty")),
        Probe("i37_14_output_empty", o, "`report s.pickle -o ''`", _copy, ["report", "s.pickle", "-o", ""],
              exit=2, one_line=True, check=says("--output", "empty")),
        # 7. The view and the rendering within --max-memory.
        Probe("i37_07_render_json_bound", b, "%d live sites, `-n 10000000 -f json --max-memory %s` "
              "(used to take 935 MB under 256 MiB)" % (sites, mem), _write_sites(sites),
              ["report", "s.pickle", "-n", "10000000", "-f", "json", "--max-memory", mem, "-o", "out.json"],
              exit=(0, 3), max_rss=int(mem[:-3]) * MiB),
        Probe("i37_07_render_text_bound", b, "%d live sites, `-n 10000000 --max-memory %s`" % (sites, mem),
              _write_sites(sites), ["report", "s.pickle", "-n", "10000000", "--max-memory", mem, "-o", "out.txt"],
              exit=(0, 3), max_rss=int(mem[:-3]) * MiB),
        Probe("i37_07_render_diff_bound", b, "two runs of %d live sites, `diff -n 10000000 -f json --max-memory %s`"
              % (sites, mem2), _write_sites(sites, ("a.pickle", "b.pickle")),
              ["diff", "a.pickle", "b.pickle", "-n", "10000000", "-f", "json", "--max-memory", mem2, "-o", "d.json"],
              exit=(0, 3), max_rss=int(mem2[:-3]) * MiB),
        Probe("i37_07_render_refused_says", b, "the refusal names the file and the way out",
              _write_sites(sites), ["report", "s.pickle", "-n", "10000000", "-f", "json", "--max-memory", mem],
              exit=3, max_rss=int(mem[:-3]) * MiB, check=says("s.pickle", "--max-memory", "-n")),
        # 12. Quoted values cut.
        Probe("i37_12_budget_metric", n, "a budget whose metric is %d MB (used to be echoed whole)"
              % (big // MiB), _budget_with_phase(big), ["check", "--budget", "b.json", "s.pickle"], exit=3,
              check=_both(_short_line(5000), says("more bytes"))),
        Probe("i37_12_rules_condition", n, "a rules file whose condition name is %d MB" % (big // MiB),
              _rules_with_condition(big), ["report", "s.pickle", "--rules", "r.json"], exit=3,
              check=_both(_short_line(5000), says("more bytes"))),
        Probe("i37_12_at_value", n, "`--at` given 100 KB", _copy, ["report", "s.pickle", "--at", "y" * 100000],
              exit=2, one_line=True, check=_both(_short_line(5000), says("more bytes"))),
    ]
