"""JSON nested far deeper than any budget, rules or .snap file is: refused
at the byte that crosses the bound (util/json_depth.hpp), never a stack
overflow in the JSON library's recursive copy (exit 139 before)."""
import gzip
import os

from common import dump, small_snapshot, write
from run import Probe


def _deep(d, name, depth, gz=False):
    text = (b"[" * depth) + (b"]" * depth)
    write(os.path.join(d, name), gzip.compress(text) if gz else text)


def _inputs(depth, target, gz=False):
    def make(d):
        dump(os.path.join(d, "s.pickle"), small_snapshot())
        _deep(d, target, depth, gz)
    return make


def _says_nested(d, r):
    return None if b"nested deeper than 256 levels" in r.err else "the error does not name the nesting bound: %r" % r.err[:200]


def probes(scale):
    depth = 200_000 if scale == "test" else 2_000_000
    return [
        Probe("budget-nested", "misc", "a budget file nested %d deep (a stack overflow, exit 139, before)" % depth,
              _inputs(depth, "b.json"), ["check", "--budget", "b.json", "s.pickle"], max_rss=64 << 20,
              check=_says_nested),
        Probe("rules-nested", "misc", "a rules file nested %d deep" % depth, _inputs(depth, "r.json"),
              ["report", "--rules", "r.json", "s.pickle"], max_rss=64 << 20, check=_says_nested),
        Probe("snap-nested", "misc", "a gzip'd .snap document nested %d deep" % depth,
              _inputs(depth, "x.snap", gz=True), ["report", "x.snap"], max_rss=128 << 20, check=_says_nested),
    ]
