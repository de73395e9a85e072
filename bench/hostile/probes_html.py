"""Names that are script: the HTML report and explorer (issue 39) with frame
names, file names, user metadata, rule names, evidence and categories (from
--rules), the input's file name and a rank folder's names all holding markup
and script meant for each context a name can land in (HTML text, an
attribute, a JavaScript string or template, embedded JSON, a URL).

Each probe checks the page statically here (no payload's markup is in the
HTML as markup); tests/browser/explorer_test.py opens every page these
probes write in Chromium and checks that no script of theirs ran
(window.__pwned stays undefined) and no dialog opened.
"""
import json
import os

from common import MiB, SEG, dump, event, frame, write
from run import Probe

XSS = ("</script><script>window.__pwned='script';alert('script')</script>"
       "<img src=x onerror=\"window.__pwned='img';alert('img')\">"
       "<svg onload=\"window.__pwned='svg'\">"
       "\" onmouseover=\"window.__pwned='attr'\" autofocus onfocus=\"window.__pwned='attr'\" x=\""
       "' onfocus='window.__pwned=1' autofocus x='"
       "\";window.__pwned='js';//"
       "';window.__pwned='js';//"
       "`;window.__pwned='tpl';`${window.__pwned='tpl'}"
       "<!--<script>"
       "javascript:window.__pwned='url'"
       "{{constructor.constructor('window.__pwned=1')()}}")

# What may never be in the page as it is (markup a browser would act on).
MARKUP = [b"<script>window.__pwned", b"<img src=x", b"<svg onload", b"<!--<script>",
          b"onmouseover=\"window.__pwned", b"onfocus='window.__pwned"]


def xss_snapshot(tag=""):
    """Three allocations whose frames, files and metadata hold XSS; one per site."""
    user = frame("forward" + tag + XSS, "/home/u/model" + XSS + ".py", 42)
    lib = frame("linear" + XSS, "/usr/lib/python3/site-packages/torch/nn/functional.py", 7)
    step = frame("step" + XSS, "/home/u/train" + XSS + ".py", 9)
    ev = [event("segment_alloc", SEG, 20 * MiB, 1_000_000, [lib, user]),
          event("alloc", SEG, MiB, 1_000_010, [lib, user]),
          event("alloc", SEG + MiB, 2 * MiB, 1_000_020, [user]),
          event("alloc", SEG + 3 * MiB, 4 * MiB, 1_000_030, [step]),
          event("free_requested", SEG + 3 * MiB, 4 * MiB, 1_000_040, [step]),
          event("free_completed", SEG + 3 * MiB, 4 * MiB, 1_000_041, [step])]
    for e in ev:
        e["user_metadata"] = "meta" + XSS
        e["compile_context"] = "ctx" + XSS
    blocks = [{"address": SEG, "size": MiB, "requested_size": MiB, "state": "active_allocated", "frames": [lib, user]},
              {"address": SEG + MiB, "size": 2 * MiB, "requested_size": 2 * MiB, "state": "active_allocated",
               "frames": [user]},
              {"address": SEG + 3 * MiB, "size": 17 * MiB, "requested_size": 0, "state": "inactive", "frames": []}]
    seg = {"device": 0, "address": SEG, "total_size": 20 * MiB, "allocated_size": 3 * MiB, "active_size": 3 * MiB,
           "requested_size": 3 * MiB, "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
           "is_expandable": False, "frames": [lib, user], "blocks": blocks}
    return {"segments": [seg], "device_traces": [ev]}


def _rules(d):
    rules = {"format": "snapdiff.rules", "version": 1,
             "rules": [{"name": "rule" + XSS, "category": "cat" + XSS, "evidence": "because" + XSS,
                        "when": {"frame_name": "^forward"}}]}
    write(os.path.join(d, "r.json"), json.dumps(rules).encode())


def _make_one(d):
    dump(os.path.join(d, "x.pickle"), xss_snapshot())
    _rules(d)


def _make_pair(d):
    dump(os.path.join(d, "a.pickle"), xss_snapshot())
    s = xss_snapshot("B")
    s["device_traces"][0].append(event("alloc", SEG + 7 * MiB, 3 * MiB, 1_000_050,
                                       [frame("extra" + XSS, "/home/u/extra" + XSS + ".py", 3)]))
    dump(os.path.join(d, "b.pickle"), s)
    _rules(d)


EVIL_NAME = "x\"><img src=x onerror=\"window.__pwned='name'\">'<script>window.__pwned=1<\\script>.pickle"


def _make_name(d):
    dump(os.path.join(d, EVIL_NAME), xss_snapshot())


def _make_ranks(d):
    os.mkdir(os.path.join(d, "ranks"))
    for r in range(2):
        dump(os.path.join(d, "ranks", "snapshot_%d.pickle" % r), xss_snapshot(str(r)))
    _rules(d)


def _page(name):
    def check(d, r):
        data = r.out if name is None else open(os.path.join(d, name), "rb").read()
        if not data.lstrip().lower().startswith((b"<!doctype html", b"<html")):
            return "not an HTML page: %r" % data[:60]
        found = [m.decode() for m in MARKUP if m in data]
        return "a name's markup is in the page as markup: %s" % found if found else None
    return check


def probes(scale):
    return [
        Probe("xss-report-html", "names", "report -f html: frames, files, metadata, rules and categories hold script",
              _make_one, ["report", "-f", "html", "--rules", "r.json", "-o", "x.html", "x.pickle"], exit=0,
              check=_page("x.html")),
        Probe("xss-report-html-stdout", "names", "the same, the page on stdout", _make_one,
              ["report", "-f", "html", "--rules", "r.json", "x.pickle"], exit=0, check=_page(None)),
        Probe("xss-diff-html", "names", "diff -f html: both runs' names hold script", _make_pair,
              ["diff", "-f", "html", "--rules", "r.json", "-o", "d.html", "a.pickle", "b.pickle"], exit=0,
              check=_page("d.html")),
        Probe("xss-file-name-html", "names", "report -f html: the input's file name holds markup and script",
              _make_name, ["report", "-f", "html", "-o", "n.html", EVIL_NAME], exit=0, check=_page("n.html")),
        Probe("xss-ranks-html", "names", "report -f html on a rank folder whose names hold script", _make_ranks,
              ["report", "-f", "html", "--rules", "r.json", "-o", "k.html", "ranks"], exit=0, check=_page("k.html")),
    ]
