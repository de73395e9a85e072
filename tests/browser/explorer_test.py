#!/usr/bin/env python3
"""The HTML explorer in a real browser: headless Chromium driven over the
DevTools pipe (cdp.py), on pages snapdiff writes, checked against snapdiff's
JSON report and the recordings' truth files.

Usage: explorer_test.py SNAPDIFF OUTPUT_DIR [--only NAME,...] [--timeout S]
       explorer_test.py --stub|--page PAGE.html [--search TEXT] OUTPUT_DIR
           (the input-driving parts alone, on stub_explorer.html or any explorer page)
Screenshots of each state go to OUTPUT_DIR. Exit 0 when every scenario
passes, 1 when one fails, 77 (skipped) when Chromium is not installed.

Scenarios (docs/explorer.md; the page's API is window.snapdiffExplorer):
  open      a bundled sample and a real recording open, `ready` resolves, no console error
            (every page opened: nothing fetched but the page itself)
  zoom      wheel events zoom run 0 to a narrow window; its drawn allocations are
            between the JSON report's live count at the window's middle and that
            count at its start plus the events in the window
  peak      "the peak" of #sd-jump: #sd-moment's bytes by category equal
            `report --format json --at peak`, the total the truth's requested peak
  pin       a click on a drawn allocation pins it; #sd-story holds a frame and the
            category that `report --explain ADDRESS` prints for it
  search    a file name typed into #sd-search: "N allocations match" with N the
            highlighted allocations summed over runs, > 0; a nonsense string: 0
  keys      keyboard only: Tab reaches a timeline, + zooms, arrows pan, Enter, Escape, Home
  diff      `snapdiff A B --format html`: two timelines; a click on a site row
            highlights allocations
  ranks     a rank folder's page opens and offers its ranks
  hostile   every bench/hostile probe input that `report --format html` accepts:
            no script of the names ran (window.__pwned), no dialog, no console error
  dark      prefers-color-scheme: dark gives a dark page (screenshot)
"""
import argparse
import glob
import gzip
import hashlib
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import traceback

sys.dont_write_bytecode = True  # it imports bench/hostile: nothing written into the sources

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import cdp  # noqa: E402

SKIP = 77
SAMPLE = os.path.join(SRC, "sample_snapshots", "gpt2_run.pickle.gz")
REAL = os.path.join(SRC, "tests", "data", "real", "cat_fp8_mlp.pickle.gz")
PAIR = (os.path.join(SRC, "tests", "data", "real", "small_fp8.pickle"),
        os.path.join(SRC, "tests", "data", "real", "small_fp8_pw.pickle"))
RANKS = os.path.join(SRC, "tests", "data", "real", "ranks", "fsdp_gpt2_uneven")
NONSENSE = "zq_no_such_frame_7f3e"


class Fail(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Fail(msg)


def truth_of(snapshot):
    base = re.sub(r"\.pickle(\.gz|\.xz)?$", "", snapshot)
    p = base + ".truth.json"
    return json.load(open(p)) if os.path.exists(p) else None


def truth_requested_peak(truth):
    """The truth file's requested-bytes peak where it has one (flat or nested memory_stats)."""
    if not truth:
        return None
    ms = truth.get("memory_stats", {})
    if "requested_bytes.all.peak" in ms:
        return ms["requested_bytes.all.peak"]
    return ms.get("requested_bytes", {}).get("all", {}).get("peak")


class Snapdiff:
    def __init__(self, binary, workdir):
        self.binary, self.workdir = binary, workdir
        self._json = {}

    def run(self, *args, timeout=120):
        r = subprocess.run([self.binary, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=timeout, cwd=self.workdir)
        return r

    def ok(self, *args):
        r = self.run(*args)
        check(r.returncode == 0, "snapdiff %s: exit %d: %s" % (" ".join(args), r.returncode,
                                                               r.stderr.decode(errors="replace")[-400:]))
        return r.stdout.decode(errors="replace")

    def json(self, *args):
        if args not in self._json:
            self._json[args] = json.loads(self.ok("report", "--format", "json", *args))
        return self._json[args]

    def html(self, name, *args):
        out = os.path.join(self.workdir, name)
        self.ok(*args, "--format", "html", "-o", out)
        return out


class Explorer:
    """A page of snapdiff's explorer in a tab, with the API's calls as methods."""

    def __init__(self, browser, path, outdir, shot, dark=False, timeout=60, require=True):
        self.outdir = outdir
        self.page = browser.new_page()
        if dark:
            self.page.color_scheme("dark")
        self.page.navigate(path, timeout=timeout)
        self.has = self.page.evaluate("typeof window.snapdiffExplorer === 'object' && window.snapdiffExplorer !== null")
        if not self.has and require:
            self.shot(shot + "-no-explorer")
            raise Fail("%s: the page has no window.snapdiffExplorer (no explorer in it)" % os.path.basename(path))
        if self.has:
            self.page.evaluate("window.snapdiffExplorer.ready.then(() => true)", timeout=timeout)
        self.no_errors("opening " + os.path.basename(path))
        # Self-contained: nothing fetched but the page itself (data: and blob: URLs are inside it).
        url = cdp.file_url(path)
        fetched = [u for u in self.page.requests() if u != url and not u.startswith(("data:", "blob:"))]
        check(not fetched, "%s fetched %s" % (os.path.basename(path), fetched[:5]))
        self.shot(shot)

    def js(self, expr):
        return self.page.evaluate(expr)

    def api(self, call):
        return self.page.evaluate("window.snapdiffExplorer." + call)

    def runs(self):
        return self.js("(r => typeof r === 'number' ? r : r.length)(window.snapdiffExplorer.runs)")

    def shot(self, name):
        self.page.screenshot(os.path.join(self.outdir, name + ".png"))

    def no_errors(self, when):
        errs = self.page.errors()
        check(not errs, "%s: the page reported %s" % (when, "; ".join("%s: %s" % e for e in errs[:5])))

    def scroll_to(self, selector):
        self.js("document.querySelector(%s).scrollIntoView({block: 'center'})" % json.dumps(selector))
        time.sleep(0.05)

    def center(self, selector, index=0):
        r = self.js("(e => { if (!e) return null; e.scrollIntoView({block: 'center'});"
                    " const b = e.getBoundingClientRect(); return [b.left + b.width / 2, b.top + b.height / 2]; })"
                    "(document.querySelectorAll(%s)[%d])" % (json.dumps(selector), index))
        check(r is not None, "no element %s" % selector)
        return r

    def settle(self):
        """Two animation frames: what the last input scheduled is drawn."""
        self.js("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))")


# --- the scenarios ---------------------------------------------------------------

def live_count(sd, snapshot, event):
    d = sd.json("--at", str(event), snapshot)
    return sum(d["devices"][0]["category_allocations"].values())


def zoom_in(ex, event, narrow, max_steps=80):
    """Wheel at event's x until run 0's window is at most `narrow` events wide.
    Tries plain wheel-up, then wheel-down, then with Ctrl: whichever narrows."""
    ex.scroll_to("canvas.sd-timeline")
    w0 = (lambda v: v["e1"] - v["e0"])(ex.api("view(0)"))
    for delta, mods in ((-120, 0), (120, 0), (-120, 2)):
        for _ in range(max_steps):
            x, y = ex.api("xOf(0, %d)" % event), ex.api("yMid(0)")
            ex.page.wheel(x, y, delta, modifiers=mods)
            ex.settle()
            v = ex.api("view(0)")
            w = v["e1"] - v["e0"]
            if w >= w0:
                break  # this way does not zoom in
            w0 = w
            if w <= narrow:
                return v
    raise Fail("wheel events did not zoom run 0 to %d events (the window is %s)" % (narrow, ex.api("view(0)")))


def scenario_open(b, sd, out, t):
    for name, snap in (("sample", SAMPLE), ("real", REAL)):
        page = sd.html(name + ".html", "report", snap)
        ex = Explorer(b, page, out, "open-" + name, timeout=t)
        check(ex.runs() >= 1, "%s: no runs" % name)
        check(ex.js("document.querySelectorAll('canvas.sd-timeline').length") >= 1, "%s: no timeline canvas" % name)
        ex.page.close()
    return "sample and %s open, ready, no console message of error" % os.path.basename(REAL)


def scenario_zoom(b, sd, out, t):
    ex = Explorer(b, sd.html("real.html", "report", REAL), out, "zoom-0", timeout=t)
    peak = sd.json(REAL)["peak"]["event_index"]
    v = zoom_in(ex, peak, narrow=200)
    ex.shot("zoom-1-narrow")
    e0, e1 = int(v["e0"]), int(v["e1"])
    drawn = ex.api("drawnAllocations(0)")
    check(drawn > 0, "zoomed to %s, no allocation drawn" % v)
    mid = (e0 + e1) // 2
    low = live_count(sd, REAL, mid)
    high = live_count(sd, REAL, max(e0 - 1, 0)) + (e1 - e0 + 1)
    check(low <= drawn <= high, "zoomed to [%d, %d): %d allocations drawn; the JSON report has %d live at event %d "
          "and at most %d overlap the window" % (e0, e1, drawn, low, mid, high))
    ex.no_errors("zooming")
    return "wheel to [%d, %d): %d drawn (JSON: %d live at %d, <= %d overlap)" % (e0, e1, drawn, low, mid, high)


def jump_to_peak(ex):
    value = ex.js("""(() => { const s = document.getElementById('sd-jump'); if (!s) return null;
        const o = [...s.options].find(o => /\\bthe peak\\b/i.test(o.textContent)) ||
                  [...s.options].find(o => /peak/i.test(o.textContent));
        if (!o) return null; s.focus(); s.value = o.value;
        s.dispatchEvent(new Event('input', {bubbles: true}));
        s.dispatchEvent(new Event('change', {bubbles: true})); return o.value; })()""")
    check(value is not None, "#sd-jump has no 'the peak' option")
    ex.settle()


def moment_table(ex):
    return ex.js("""[...document.querySelectorAll('#sd-moment tr[data-category]')].map(tr => {
        const td = tr.querySelector('td.n[data-v]');
        return [tr.getAttribute('data-category'), td ? td.getAttribute('data-v') : null,
                [...tr.querySelectorAll('td.n[data-v]')].map(x => x.getAttribute('data-v'))]; })""")


def check_peak(ex, sd, snap, what):
    jump_to_peak(ex)
    ex.shot("peak-" + what)
    want = sd.json("--at", "peak", snap)
    at, cats = want["at"], want["categories"]
    m = ex.api("moment()")
    check(m is not None, "%s: no moment after jumping to the peak" % what)
    check(m["event"] == at["event_index"], "%s: the moment is event %s, the JSON's peak %d" %
          (what, m["event"], at["event_index"]))
    check(m["total"] == at["requested_bytes"], "%s: moment total %s, JSON %d" % (what, m["total"], at["requested_bytes"]))
    got = {k: v for k, v in m["by_category"].items() if v}
    check(got == {k: v for k, v in cats.items() if v}, "%s: moment().by_category %s, JSON %s" % (what, got, cats))
    rows = moment_table(ex)
    check(rows, "%s: #sd-moment has no tr[data-category] row" % what)
    seen = set()
    for name, v, all_v in rows:
        check(v is not None, "%s: #sd-moment row %s has no td.n[data-v]" % (what, name))
        check(name in cats, "%s: #sd-moment row %r is not a category of the JSON report" % (what, name))
        check(int(float(v)) == cats[name], "%s: #sd-moment %s = %s (cells %s), JSON %d" %
              (what, name, v, all_v, cats[name]))
        seen.add(name)
    missing = [c for c, v in cats.items() if v and c not in seen]
    check(not missing, "%s: #sd-moment lacks the categories %s" % (what, missing))
    tp = truth_requested_peak(truth_of(snap))
    if tp is not None:
        check(m["total"] == tp, "%s: moment total %d, the truth's requested peak %d" % (what, m["total"], tp))
    ex.no_errors("jumping to the peak")
    return "%s: event %d, %d categories = JSON%s" % (what, m["event"], len(seen),
                                                    ", total = truth %d" % tp if tp is not None else "")


def scenario_peak(b, sd, out, t):
    res = []
    for name, snap in (("sample", SAMPLE), ("real", REAL)):
        ex = Explorer(b, sd.html(name + ".html", "report", snap), out, "peak-0-" + name, timeout=t)
        res.append(check_peak(ex, sd, snap, name))
        ex.page.close()
    return "; ".join(res)


def parse_explain(text):
    """The EXPLAIN section's entries: (category, alloc event or None, site frames)."""
    entries, cur = [], None
    part = text.split("\nEXPLAIN ", 1)
    check(len(part) == 2, "--explain printed no EXPLAIN section")
    for line in part[1].split("\n")[1:]:
        m = re.match(r"^  (\S+)\s+<- rule", line)
        if m:
            cur = {"category": m.group(1), "event": None, "frames": []}
            entries.append(cur)
        elif cur is not None:
            s = line.strip()
            m = re.match(r"allocated: event (\d+)", s)
            if m:
                cur["event"] = int(m.group(1))
            if s.startswith("site: "):
                cur["frames"] = [f.strip() for f in s[6:].split(" <- ") if f.strip() and "<no stack" not in f]
        if line and not line.startswith(" ") and entries:
            break
    return entries


def scenario_pin(b, sd, out, t):
    ex = Explorer(b, sd.html("real.html", "report", REAL), out, "pin-0", timeout=t)
    peak = sd.json(REAL)["peak"]["event_index"]
    v = zoom_in(ex, peak, narrow=200)
    how = None
    x = ex.api("xOf(0, %d)" % ((int(v["e0"]) + int(v["e1"])) // 2))
    top, height = ex.js("(b => [b.top, b.height])(document.querySelector('canvas.sd-timeline').getBoundingClientRect())")
    y_mid = ex.api("yMid(0)")
    for y in [y_mid] + [top + height * f for f in (0.9, 0.8, 0.7, 0.6, 0.4, 0.3, 0.2)]:
        ex.page.click(x, y)
        ex.settle()
        if ex.api("pinned()"):
            how = "a click at (%d, %d)" % (x, y)
            break
    if not how:
        ex.api("pin(0, 0)")  # could not hit one with the mouse: the hook
        ex.settle()
        how = "pin(0, 0) (no click hit an allocation)"
    p = ex.api("pinned()")
    check(p is not None, "nothing pinned after %s" % how)
    ex.shot("pin-1-story")
    story = ex.js("document.getElementById('sd-story') ? document.getElementById('sd-story').innerText : null")
    check(story, "#sd-story is empty after pinning %s" % p)
    addrs = re.findall(r"\b0x[0-9a-fA-F]{4,}\b", story)
    frames = re.findall(r"[^\s()]+ \([^()\n]*:\d+\)", story)
    check(addrs or frames, "#sd-story shows neither an address (0x...) nor a frame: %r" % story[:300])
    # --explain ADDRESS when the story shows it, else --explain SITE with a frame it shows.
    key = addrs[0] if addrs else frames[0]
    text = sd.ok("report", "--explain", key, "--width", "1000", REAL)
    entries = parse_explain(text)
    check(entries, "--explain %r matched no allocation" % key)
    numbers = set(int(n) for n in re.findall(r"\b\d+\b", story.replace(",", "")))
    # By address --explain lists each allocation (its alloc event is the story's); by site it
    # lists each stack and rule once (the event is its first allocation's): any of them.
    mine = [e for e in entries if e["event"] in numbers] if addrs else entries
    check(mine, "none of --explain %r's allocations (events %s) is allocated at an event #sd-story names: %r" %
          (key, sorted(set(e["event"] for e in entries))[:10], story[:300]))
    named = lambda c: c in story or c.replace("_", " ") in story
    good = [e for e in mine if named(e["category"]) and (not e["frames"] or any(f in story for f in e["frames"]))]
    check(good, "#sd-story (%r) has no category and frame of --explain %r's entries %s" %
          (story[:400], key, [(e["category"], e["event"], e["frames"][:2]) for e in mine[:4]]))
    e = good[0]
    ex.no_errors("pinning")
    return "%s pinned %s; --explain %s: category %s, frame %r as the story shows" % (
        how, p, key, e["category"], next((f for f in e["frames"] if f in story), "(no stack)"))


def search_count(ex):
    text = ex.js("(e => e ? e.textContent : null)(document.getElementById('sd-search-count'))")
    check(text is not None, "no #sd-search-count")
    m = re.search(r"([\d,]+)\s+allocations?\s+match", text) or re.search(r"\bno allocations? match", text)
    check(m, "#sd-search-count says %r, not 'N allocations match'" % text)
    return int(m.group(1).replace(",", "")) if m.groups() else 0


def type_search(ex, text):
    x, y = ex.center("#sd-search")
    ex.page.click(x, y)
    ex.js("document.getElementById('sd-search').select()")
    if text:
        ex.page.insert_text(text)
    else:
        ex.page.key("Backspace")
    ex.page.key("Enter")
    deadline = time.monotonic() + 5  # the box may wait a moment after typing
    while True:
        ex.settle()
        n = search_count(ex)
        hl = sum(ex.api("highlighted(%d)" % r) for r in range(ex.runs()))
        if n == hl or time.monotonic() > deadline:
            return n, hl
        time.sleep(0.1)


def scenario_search(b, sd, out, t):
    ex = Explorer(b, sd.html("real.html", "report", REAL), out, "search-0", timeout=t)
    sites = sd.json(REAL)["devices"][0]["live_at_peak"]["sites"]
    files = [os.path.basename(s["user_frame"]["file"]) for s in sites if s.get("user_frame")]
    check(files, "the JSON report has no site with a user frame")
    name = files[0]
    n, hl = type_search(ex, name)
    ex.shot("search-1-" + re.sub(r"\W", "_", name))
    check(n > 0, "searching %r: %d allocations match" % (name, n))
    check(n == hl, "searching %r: the box says %d allocations match, highlighted() sums to %d" % (name, n, hl))
    api_n = ex.api("search(%s)" % json.dumps(name))
    check(api_n == n, "search(%r) returns %s, the box said %d" % (name, api_n, n))
    z, zhl = type_search(ex, NONSENSE)
    check(z == 0 and zhl == 0, "searching %r: %d match, %d highlighted (want 0)" % (NONSENSE, z, zhl))
    ex.no_errors("searching")
    return "%r: %d match = highlighted; %r: 0" % (name, n, NONSENSE)


def scenario_diff(b, sd, out, t):
    page = os.path.join(sd.workdir, "diff.html")
    sd.ok(*PAIR, "--format", "html", "-o", page)
    ex = Explorer(b, page, out, "diff-0", timeout=t)
    n = ex.js("document.querySelectorAll('canvas.sd-timeline').length")
    check(n >= 2, "the two-run page has %d timeline canvases" % n)
    check(ex.runs() >= 2, "the two-run page has %d runs" % ex.runs())
    rows = ex.js("document.querySelectorAll('tr[data-site]').length")
    check(rows > 0, "the two-run page has no tr[data-site] row")
    hl = 0
    for i in range(min(rows, 5)):
        x, y = ex.center("tr[data-site]", i)
        ex.page.click(x, y)
        ex.settle()
        hl = ex.api("highlighted(0)") + ex.api("highlighted(1)")
        if hl > 0:
            break
    ex.shot("diff-1-site")
    check(hl > 0, "clicking site rows highlighted nothing in either run")
    ex.no_errors("the two-run page")
    return "%d timelines, a site row click highlights %d" % (n, hl)


def scenario_ranks(b, sd, out, t):
    """The ranks page picks a rank; the rank's explorer page (written beside it) opens
    and its peak is that rank's own (report --format json of the rank's file)."""
    page = sd.html("ranks.html", "report", RANKS)
    ranks = sorted(glob.glob(os.path.join(RANKS, "*.pickle*")))
    ex = Explorer(b, page, out, "ranks-0", timeout=t, require=False)
    options = ex.js("[...document.querySelectorAll('#sd-rank-pick option')].filter(o => o.value).map(o => o.value)")
    check(len(options) == len(ranks), "the rank picker offers %d ranks, want %d" % (len(options), len(ranks)))
    if not options:
        return "no rank picker"
    # Pick the last rank as a person does: the select, then its change event navigates.
    target = options[-1]
    # (the change is dispatched after this evaluation returns: the navigation it starts
    # would otherwise end the evaluation itself)
    ex.js("(s => { s.value = %s; setTimeout(() => s.dispatchEvent(new Event('change')), 0); return true; })"
          "(document.getElementById('sd-rank-pick'))" % json.dumps(target))
    # While the page navigates, an evaluation can fail (its context is gone): poll past that.
    deadline = time.monotonic() + t
    while True:
        try:
            if ex.page.evaluate("location.href.endsWith(%s) && document.readyState === 'complete' && "
                                "typeof window.snapdiffExplorer === 'object'" % json.dumps(target), timeout=t):
                break
        except Exception:
            pass
        if time.monotonic() > deadline:
            raise Fail("picking %s on the ranks page did not open it within %d s" % (target, t))
        time.sleep(0.1)
    ex.page.evaluate("window.snapdiffExplorer.ready.then(() => true)", timeout=t)
    ex.no_errors("opening the picked rank's page")
    ex.shot("ranks-1-picked")
    runs = ex.runs()
    rank_no = int(re.search(r"rank-(\d+)\.html$", target).group(1))
    rank_file = next(f for f in ranks if re.search(r"(^|[^0-9])%d\.pickle" % rank_no, os.path.basename(f)))
    want = sd.json(rank_file)
    dev = want["devices"][want.get("peak_device", 0)]
    got = ex.js("""(() => { const s = document.getElementById('sd-jump');
        const o = [...s.options].find(o => /peak/i.test(o.textContent));
        s.value = o.value; s.dispatchEvent(new Event('change'));
        return window.snapdiffExplorer.moment().total; })()""")
    check(runs >= 1 and got == dev["peak"]["requested_bytes"],
          "rank %d's page: %s runs, its peak %s bytes, want %s (report --format json %s)" %
          (rank_no, runs, got, dev["peak"]["requested_bytes"], os.path.basename(rank_file)))
    return "picker of %d ranks; rank %d's page opens with its peak %s bytes" % (len(options), rank_no, got)


def probe_pages(sd, p, d, work, n):
    """The pages a probe's own command writes (a probe of an HTML output that keeps exit 0:
    its options too, --rules' categories among them), as (name, page)."""
    exits = p.exit if isinstance(p.exit, tuple) else (p.exit,)
    if 0 not in exits or "html" not in p.args or p.stdin is not None or p.stdout is not None:
        return []
    before = set(os.listdir(d))
    env = dict(os.environ)
    env.update(p.env or {})
    try:
        r = subprocess.run([sd.binary, *p.args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                           stdin=subprocess.DEVNULL, timeout=30, cwd=d, env=env)
    except subprocess.TimeoutExpired:
        return []
    if r.returncode != 0:
        return []
    pages = []
    made = sorted(f for f in set(os.listdir(d)) - before if f.endswith(".html"))
    for i, f in enumerate(made):
        out = os.path.join(work, "hostile-%03d-%d.html" % (n, i))
        shutil.copyfile(os.path.join(d, f), out)
        pages.append(("%s: %s" % (p.name, f), out))
    if r.stdout.lstrip().lower().startswith((b"<!doctype html", b"<html")):
        out = os.path.join(work, "hostile-%03d-out.html" % n)
        with open(out, "wb") as f:
            f.write(r.stdout)
        pages.append(("%s: stdout" % p.name, out))
    return pages


def hostile_inputs(sd, work):
    """(name, page) for each distinct bench/hostile probe input that `report --format html` accepts."""
    sys.path.insert(0, os.path.join(SRC, "bench", "hostile"))
    import run as hostile  # noqa: E402
    pages, seen = [], set()
    for mod in hostile.load_modules():
        for p in mod.probes("test"):
            if getattr(p, "make_here", False):
                continue
            d = tempfile.mkdtemp(dir=work)
            try:
                pid = os.fork()
                if pid == 0:  # make() may chdir, umask, ...: in a child, as run.py does
                    try:
                        os.chdir(d)
                        p.make(d)
                        os._exit(0)
                    except BaseException:
                        os._exit(1)
                _, st = os.waitpid(pid, 0)
                if st != 0:
                    continue
                for name in sorted(os.listdir(os.fsencode(d))):
                    f = os.path.join(os.fsencode(d), name)
                    st_ = os.lstat(f)
                    if not stat.S_ISREG(st_.st_mode) or st_.st_size > 64 << 20 or not (st_.st_mode & 0o444):
                        continue
                    try:
                        digest = hashlib.sha256(open(f, "rb").read()).hexdigest()
                    except OSError:
                        continue
                    if digest in seen:
                        continue
                    seen.add(digest)
                    out = os.path.join(work, "hostile-%03d.html" % len(pages))
                    try:
                        r = subprocess.run([sd.binary, "report", "--format", "html", "--max-memory", "1GiB",
                                            f, "-o", out], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                           stdin=subprocess.DEVNULL, timeout=30, cwd=d)
                    except subprocess.TimeoutExpired:
                        continue
                    if r.returncode == 0 and os.path.exists(out):
                        pages.append(("%s/%s" % (p.name, ascii(os.fsdecode(name))[1:-1]), out))
                pages += probe_pages(sd, p, d, work, len(pages))
            finally:
                shutil.rmtree(d, ignore_errors=True)
    return pages


EXERCISE = """(async () => {
    const X = window.snapdiffExplorer;
    if (!X) return 0;
    await X.ready;
    const n = typeof X.runs === 'number' ? X.runs : X.runs.length;
    for (let r = 0; r < n; r++) {
        const v = X.view(r);
        X.setMoment(r, Math.floor((v.e0 + v.e1) / 2));
        for (let i = 0; i < 3; i++) try { X.pin(r, i); } catch (e) { /* fewer allocations */ }
    }
    const s = document.getElementById('sd-jump');
    if (s) for (const o of [...s.options]) { s.value = o.value; s.dispatchEvent(new Event('change', {bubbles: true})); }
    for (const q of ['<', 'script', 'pwned', '']) X.search(q);
    await new Promise(r => requestAnimationFrame(() => r()));
    return n; })()"""


def page_problems(b, path, t, shot=None, notes=None):
    """What a hostile page did: a script of its names ran (window.__pwned), a dialog, console errors."""
    page = b.new_page()
    try:
        page.navigate(path, timeout=t)
        # Not every page has data to explore (a profiler trace's report, an empty trace): where the
        # explorer does not start, the reason is noted (`notes`), not counted here.
        why = page.evaluate("window.snapdiffExplorer ? window.snapdiffExplorer.ready.then(() => null, e => String(e))"
                            " : null", timeout=t)
        if why is not None and notes is not None:
            notes.append(why.split("\n")[0])
        # Names reach the page's DOM when it shows them: pin, moments, every jump, search, hover.
        if why is None:
            page.evaluate(EXERCISE, timeout=t)
        for x, y in page.evaluate("[...document.querySelectorAll('canvas.sd-timeline')].flatMap(c => {"
                                  " const b = c.getBoundingClientRect(); return [0.2, 0.5, 0.8].map(f =>"
                                  " [b.left + b.width * f, b.top + b.height * 0.7]); })") or []:
            page.mouse_move(x, y)
        page.evaluate("new Promise(r => setTimeout(() => requestAnimationFrame(() => r(true)), 100))", timeout=t)
        pwned = page.evaluate("typeof window.__pwned === 'undefined' ? null : String(window.__pwned)")
        problems = []
        if pwned is not None:
            problems.append("window.__pwned = %s" % pwned)
        if page.dialogs:
            problems.append("a dialog opened: %s" % page.dialogs[0].get("message", "")[:80])
        problems += ["%s: %s" % e for e in page.errors() if not e[0].startswith("dialog.")]
        if shot and problems:
            page.screenshot(shot)
        return problems
    except cdp.CDPError as e:
        return [str(e)]
    finally:
        page.close()


def scenario_hostile(b, sd, out, t):
    # The check itself: a page whose script runs is caught.
    control = os.path.join(sd.workdir, "control.html")
    with open(control, "w") as f:
        f.write("<!doctype html><title>c</title><script>window.__pwned = 1; alert('x'); console.error('e')</script>")
    got = page_problems(b, control, t)
    check(len(got) == 3, "the check missed a page that ran script, alerted and logged an error: %s" % got)
    pages = hostile_inputs(sd, sd.workdir)
    check(pages, "no hostile probe input was accepted by report --format html")
    bad, unstarted = [], []
    for i, (name, path) in enumerate(pages):
        notes = []
        problems = page_problems(b, path, t, os.path.join(out, "hostile-%03d.png" % i), notes)
        if problems:
            bad.append("%s: %s" % (name, "; ".join(p[:200] for p in problems)))
        unstarted += ["%s: %s" % (name, n[:120]) for n in notes]
    check(not bad, "%d of %d hostile pages: %s" % (len(bad), len(pages), " | ".join(bad[:5])))
    return ("%d distinct pages of probe inputs and probes' HTML commands: no script of theirs ran, no dialog, "
            "no console error (a control page that does is caught)%s" %
            (len(pages), "" if not unstarted else "\n     NOTE the explorer did not start (ready rejected) on %d: %s"
             % (len(unstarted), "\n       ".join(unstarted))))


def scenario_dark(b, sd, out, t):
    ex = Explorer(b, sd.html("real.html", "report", REAL), out, "dark", dark=True, timeout=t)
    check(ex.js("matchMedia('(prefers-color-scheme: dark)').matches"), "the dark scheme is not emulated")
    # The explorer's effective background (its own, or the first ancestor's that is not transparent)
    # is dark and its text light; the rest of the page's is reported.
    lum = ex.js("""(() => {
        const L = c => { const m = c.match(/[\\d.]+/g); return m && (m.length < 4 || +m[3] > 0) ?
                         (0.2126 * m[0] + 0.7152 * m[1] + 0.0722 * m[2]) / 255 : null; };
        const bg = e => { for (; e; e = e.parentElement) { const l = L(getComputedStyle(e).backgroundColor);
                                                          if (l !== null) return l; } return 1; };
        const x = document.getElementById('sd-explorer');
        return x && [bg(x), L(getComputedStyle(x).color), bg(document.body)]; })()""")
    check(lum, "no #sd-explorer")
    check(lum[0] < 0.4 and lum[1] is not None and lum[1] > 0.6,
          "in the dark scheme the explorer's background luminance is %.2f and its text's %s" % (lum[0], lum[1]))
    ex.shot("dark-explorer")
    return "explorer background luminance %.2f, text %.2f (the page body's %.2f); dark.png" % tuple(lum)


def scenario_keys(b, sd, out, t):
    """Keyboard only: Tab reaches a timeline; + zooms, an arrow pans, Home resets, Enter takes
    the moment (or pins), Escape unpins."""
    ex = Explorer(b, sd.html("real.html", "report", REAL), out, "keys-0", timeout=t)
    ex.js("document.activeElement && document.activeElement.blur(), window.scrollTo(0, 0), true")
    for tabs in range(1, 61):
        ex.page.key("Tab")
        if ex.js("!!(document.activeElement && document.activeElement.matches('canvas.sd-timeline'))"):
            break
    else:
        raise Fail("60 Tabs did not reach a timeline (canvas.sd-timeline)")
    width = lambda v: v["e1"] - v["e0"]
    v0 = ex.api("view(0)")
    for _ in range(3):
        ex.page.key("+")
    ex.settle()
    v1 = ex.api("view(0)")
    check(width(v1) < width(v0), "+ x3 on the focused timeline: the window went from %s to %s" % (v0, v1))
    ex.page.key("ArrowRight")
    ex.settle()
    v2 = ex.api("view(0)")
    check(v2["e0"] > v1["e0"], "ArrowRight: the window went from %s to %s" % (v1, v2))
    ex.page.key("Enter")
    ex.settle()
    took = ex.api("moment()") or ex.api("pinned()")
    check(took, "Enter on the timeline took no moment and pinned nothing")
    ex.shot("keys-1")
    ex.api("pin(0, 0)")
    ex.page.key("Escape")
    ex.settle()
    check(ex.api("pinned()") is None, "Escape did not unpin")
    ex.page.key("Home")
    ex.settle()
    v3 = ex.api("view(0)")
    check(abs(width(v3) - width(v0)) < 1e-6 * max(1, width(v0)), "Home: the window is %s, not the whole %s" % (v3, v0))
    ex.no_errors("the keyboard")
    return "Tab x%d reaches the timeline; + zooms, ArrowRight pans, Enter takes %s, Escape unpins, Home resets" % (
        tabs, "the moment" if ex.api("moment()") else "a pin")


SCENARIOS = [("open", scenario_open), ("zoom", scenario_zoom), ("peak", scenario_peak), ("pin", scenario_pin),
             ("search", scenario_search), ("keys", scenario_keys), ("diff", scenario_diff), ("ranks", scenario_ranks),
             ("hostile", scenario_hostile), ("dark", scenario_dark)]


def run_page(b, out, t, path, search):
    """The input-driving parts on any explorer page (no snapdiff, no JSON to compare with):
    wheel zoom at the middle, a click that pins, "the peak" in #sd-jump, typed search."""
    ex = Explorer(b, path, out, "page-0", timeout=t)
    v = ex.api("view(0)")
    mid = int((v["e0"] + v["e1"]) // 2)
    v = zoom_in(ex, mid, narrow=max(50, int((v["e1"] - v["e0"]) // 50)))
    check(ex.api("drawnAllocations(0)") > 0, "zoomed to %s: nothing drawn" % v)
    x = ex.api("xOf(0, %d)" % ((v["e0"] + v["e1"]) // 2))
    top, height = ex.js("(b => [b.top, b.height])(document.querySelector('canvas.sd-timeline').getBoundingClientRect())")
    for y in [ex.api("yMid(0)")] + [top + height * f for f in (0.9, 0.8, 0.7, 0.6, 0.4, 0.3, 0.2)]:
        ex.page.click(x, y)
        ex.settle()
        if ex.api("pinned()"):
            break
    check(ex.api("pinned()"), "no click pinned an allocation")
    ex.shot("page-1-pinned")
    jump_to_peak(ex)
    check(moment_table(ex), "no #sd-moment rows after jumping to the peak")
    m = ex.api("moment()")
    rows = {n: int(float(v)) for n, v, _ in moment_table(ex)}
    check({k: v for k, v in m["by_category"].items() if v} == {k: v for k, v in rows.items() if v},
          "moment() %s and the #sd-moment table %s differ" % (m["by_category"], rows))
    n, hl = type_search(ex, search)
    check(n > 0 and n == hl, "search %r: %d match, %d highlighted" % (search, n, hl))
    check(type_search(ex, NONSENSE) == (0, 0), "nonsense matched")
    ex.shot("page-2")
    ex.no_errors("driving the page")
    return "zoom to [%d, %d), pinned %s, peak at event %s (%d rows), search %r: %d" % (
        v["e0"], v["e1"], ex.api("pinned()"), m["event"], len(rows), search, n)


def safe(text):
    """Text for a terminal or a CI log: names from hostile inputs hold controls and workflow
    commands; each control becomes an escape, and no line starts with '::'."""
    lines = []
    for line in str(text).split("\n"):
        line = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in line)
        lines.append(" " + line if line.lstrip().startswith("::") else line)
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("snapdiff", nargs="?")
    ap.add_argument("outdir")
    ap.add_argument("--stub", action="store_true", help="drive stub_explorer.html (no snapdiff)")
    ap.add_argument("--page", help="drive this explorer page (no snapdiff; for the page's developers)")
    ap.add_argument("--search", default="model.py", help="what --stub/--page search for")
    ap.add_argument("--only", help="comma-separated scenario names")
    ap.add_argument("--timeout", type=float, default=60, help="seconds per browser step (default 60)")
    a = ap.parse_args()
    if not cdp.find_chromium():
        print("skip: Chromium is not installed (scripts/install-deps.sh installs it)")
        return SKIP
    os.makedirs(a.outdir, exist_ok=True)
    # Killed on a timeout (SIGTERM): unwind, so that the browser closes and the temporary files go.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("FAIL killed (SIGTERM)"))
    work = tempfile.mkdtemp(prefix="sd-explorer-test-")
    fails = 0
    try:
        with cdp.Browser(width=1280, height=900, timeout=a.timeout) as b:
            if a.stub or a.page:
                try:
                    print("ok   " + safe(run_page(b, a.outdir, a.timeout, a.page or os.path.join(HERE, "stub_explorer.html"),
                                             a.search)))
                    return 0
                except (Fail, cdp.CDPError) as e:
                    print(safe("FAIL %s" % e))
                    return 1
            sd = Snapdiff(os.path.abspath(a.snapdiff), work)
            only = set(a.only.split(",")) if a.only else None
            for name, fn in SCENARIOS:
                if only and name not in only:
                    continue
                t0 = time.monotonic()
                try:
                    msg = fn(b, sd, a.outdir, a.timeout)
                    print(safe("ok   %-8s %s" % (name, msg)))
                except (Fail, cdp.CDPError, subprocess.TimeoutExpired) as e:
                    fails += 1
                    print(safe("FAIL %-8s %s" % (name, e)))
                except Exception:
                    fails += 1
                    print(safe("FAIL %-8s %s" % (name, traceback.format_exc().strip().replace("\n", "\n     "))))
                sys.stdout.flush()
                if time.monotonic() - t0 > 10 * a.timeout:
                    print("     (%s took %.0f s)" % (name, time.monotonic() - t0))
    except cdp.CDPError as e:
        print(safe("FAIL the browser: %s" % e))
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("%d scenario(s) failed; screenshots in %s" % (fails, a.outdir) if fails else
          "all scenarios passed; screenshots in %s" % a.outdir)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
