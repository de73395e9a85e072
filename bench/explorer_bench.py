#!/usr/bin/env python3
"""The explorer's figures (issue 39's budgets), measured, never typed in.

  explorer_bench.py --bin SNAPDIFF --input SNAPSHOT [--loads 5] [--steps 20] [--runs 5] [--out DIR]
      snapdiff report -f json vs -f html (hyperfine when installed, else RUNS
      runs each, median), the page's size, and in headless Chromium: the first
      render (the page's 'sd-first-render' mark, median of LOADS fresh
      browsers) and STEPS zoom/pan steps made with Input events (wheel, then
      drags), from the page's own 'sd-step' performance measures (median, max)
      and, the same ruler for any page, input-to-frame latency: from the input
      event's timeStamp to the end of the next animation frame.
  explorer_bench.py --page FILE.html [--loads 5] [--steps 20]
      the browser figures alone, of an explorer page already written.
  explorer_bench.py --memory-viz FILE.html [--loads 5] [--steps 20]
      a memory_viz page (torch.cuda._memory_viz trace_plot's HTML): the time
      from navigation to its first canvas/svg (median of LOADS fresh
      browsers) and the input-to-frame latency of STEPS wheel/drag steps on it.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "browser"))
import cdp  # noqa: E402

# Injected before any script of the page: when the first canvas/svg appears,
# and per wheel/mouse event, the time to the end of the next frame.
PROBE = r"""
(() => {
  window.__sdFirstDrawing = null;
  window.__sdLatency = [];
  const seen = () => {
    if (window.__sdFirstDrawing === null && document.querySelector('canvas, svg'))
      window.__sdFirstDrawing = performance.now();
  };
  new MutationObserver(seen).observe(document, {childList: true, subtree: true});
  const lat = e => {
    const t = e.timeStamp;
    requestAnimationFrame(() => setTimeout(() => window.__sdLatency.push(performance.now() - t), 0));
  };
  addEventListener('wheel', lat, {capture: true, passive: true});
  addEventListener('mouseup', lat, {capture: true, passive: true});
})();
"""


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def time_cli(cmd, runs):
    """Median wall seconds of cmd (stdout discarded): hyperfine when installed."""
    hf = shutil.which("hyperfine")
    if hf:
        with tempfile.NamedTemporaryFile(suffix=".json") as f:
            subprocess.run([hf, "--style", "none", "--warmup", "1", "--runs", str(runs), "--export-json", f.name,
                            "--output", "null", " ".join(_quote(c) for c in cmd)], check=True,
                           stdout=subprocess.DEVNULL)
            return json.load(open(f.name))["results"][0]["median"], "hyperfine"
    subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)  # warm the file cache
    xs = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)
        xs.append(time.perf_counter() - t)
    return median(xs), "median of %d runs" % runs


def _quote(s):
    return "'" + s.replace("'", "'\\''") + "'" if any(c in s for c in " '\"$\\") else s


def open_fresh(path, timeout, width=1280, height=900):
    """A fresh browser and tab with PROBE installed, at path."""
    b = cdp.Browser(width=width, height=height, timeout=timeout)
    p = b.new_page()
    p.send("Page.addScriptToEvaluateOnNewDocument", {"source": PROBE})
    p.navigate(path, timeout=timeout)
    return b, p


def first_render(path, loads, timeout):
    xs = []
    for _ in range(loads):
        b, p = open_fresh(path, timeout)
        try:
            p.evaluate("window.snapdiffExplorer.ready.then(() => true)", timeout=timeout)
            t = p.wait_for("(e => e && e.startTime)(performance.getEntriesByName('sd-first-render')[0])",
                           timeout=timeout)
            xs.append(t)
            errs = p.errors()
            if errs:
                print("  the page reported: %s" % errs[:3], file=sys.stderr)
        finally:
            b.close()
    return xs


def settle(p):
    p.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))")


def steps_on(p, steps, x, y, w, in_out=False):
    """steps/2 wheel turns at (x, y) (all in, or in and out by turns), then drags of w/8 px
    left and right by turns."""
    n_wheel = steps // 2
    for i in range(n_wheel):
        p.wheel(x, y, 120 if in_out and i % 2 else -120)
        settle(p)
    for i in range(steps - n_wheel):
        dx = w / 8 * (1 if i % 2 == 0 else -1)
        p.drag(x, y, x + dx, y, steps=4)
        settle(p)
    time.sleep(0.1)
    return p.evaluate("window.__sdLatency.slice()")


def explorer_steps(path, steps, timeout):
    """Two series of `steps` steps on run 0: from the whole run (the level-of-detail summary),
    then from the widest window around the peak where allocations are drawn.
    Returns [(label, sd-step durations, input-to-frame latencies, view after, drawn after)]."""
    b, p = open_fresh(path, timeout)
    try:
        p.evaluate("window.snapdiffExplorer.ready.then(() => true)", timeout=timeout)
        p.evaluate("document.querySelector('canvas.sd-timeline').scrollIntoView({block: 'center'})")
        settle(p)
        X = "window.snapdiffExplorer"
        v = p.evaluate(X + ".view(0)")
        n = v["e1"] - v["e0"]
        peak = p.evaluate("""(() => { const s = document.getElementById('sd-jump');
            const o = s && [...s.options].find(o => /peak/i.test(o.textContent));
            const m = o && o.textContent.replace(/,/g, '').match(/event (\\d+)/);
            return m ? +m[1] : null; })()""")
        if peak is None:
            peak = (v["e0"] + v["e1"]) // 2
        w = p.evaluate("document.querySelector('canvas.sd-timeline').getBoundingClientRect().width")
        out = []
        for label in ("whole run", "allocations drawn"):
            if label != "whole run":
                width = n / 10
                while width >= 4:
                    p.evaluate("%s.setView(0, %f, %f), true" % (X, peak - width / 2, peak + width / 2))
                    settle(p)
                    if p.evaluate(X + ".drawnAllocations(0)") > 0:
                        break
                    width /= 4
            x, y = p.evaluate("[%s.xOf(0, %d), %s.yMid(0)]" % (X, peak, X))
            p.evaluate("performance.clearMeasures('sd-step'), window.__sdLatency.length = 0, true")
            lat = steps_on(p, steps, x, y, w, in_out=label != "whole run")
            measures = p.evaluate("performance.getEntriesByName('sd-step').map(e => e.duration)")
            out.append((label, measures, lat, p.evaluate(X + ".view(0)"), p.evaluate(X + ".drawnAllocations(0)")))
        errs = p.errors()
        if errs:
            print("  the page reported: %s" % errs[:3], file=sys.stderr)
        return out
    finally:
        b.close()


def memory_viz(path, loads, steps, timeout):
    xs = []
    lat = []
    for i in range(loads):
        b, p = open_fresh(path, timeout)
        try:
            xs.append(p.wait_for("window.__sdFirstDrawing", timeout=timeout))
            if i == loads - 1 and steps:
                x, y, w = p.evaluate("""(() => { const e = [...document.querySelectorAll('canvas, svg')]
                    .sort((a, b) => b.getBoundingClientRect().width * b.getBoundingClientRect().height -
                                    a.getBoundingClientRect().width * a.getBoundingClientRect().height)[0];
                    e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();
                    return [r.left + r.width / 2, r.top + r.height / 2, r.width]; })()""")
                settle(p)
                lat = steps_on(p, steps, x, y, w)
            for k, t in p.errors():
                print("  memory_viz page: %s: %s" % (k, t[:200]), file=sys.stderr)
        finally:
            b.close()
    return xs, lat


def ms(x):
    return "%.1f ms" % x if x == x else "-"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin")
    ap.add_argument("--input")
    ap.add_argument("--memory-viz", metavar="FILE.html")
    ap.add_argument("--page", metavar="FILE.html", help="the browser figures of an explorer page already written")
    ap.add_argument("--loads", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", default=None, help="where the page is written (default a temporary folder)")
    ap.add_argument("--timeout", type=float, default=120)
    a = ap.parse_args()
    if not cdp.find_chromium():
        print("Chromium is not installed", file=sys.stderr)
        return 2
    ver = subprocess.run([cdp.find_chromium(), "--version"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         text=True).stdout.strip()
    print("machine: %d cores, load %s; %s" % (os.cpu_count(), open("/proc/loadavg").read().split()[0], ver))
    rows = []
    fr = None
    if a.memory_viz:
        xs, lat = memory_viz(a.memory_viz, a.loads, a.steps, a.timeout)
        rows += [("memory_viz page size", "%.1f MB" % (os.path.getsize(a.memory_viz) / 1e6)),
                 ("first canvas/svg (median of %d loads)" % len(xs), ms(median(xs))),
                 ("  all loads", " ".join("%.0f" % x for x in xs)),
                 ("input-to-frame, %d steps: median" % len(lat), ms(median(lat))),
                 ("input-to-frame, %d steps: max" % len(lat), ms(max(lat) if lat else float("nan")))]
    elif a.page:
        fr = first_render(a.page, a.loads, a.timeout)
        series = explorer_steps(a.page, a.steps, a.timeout)
        rows += [("page", "%s (%.1f MB)" % (os.path.basename(a.page), os.path.getsize(a.page) / 1e6))]
    else:
        if not (a.bin and a.input):
            ap.error("--bin and --input (or --memory-viz)")
        work = a.out or tempfile.mkdtemp(prefix="sd-explorer-bench-")
        os.makedirs(work, exist_ok=True)
        page = os.path.join(work, "explorer.html")
        try:
            tj, how = time_cli([a.bin, "report", "-f", "json", a.input], a.runs)
            th, _ = time_cli([a.bin, "report", "-f", "html", a.input, "-o", page], a.runs)
            size = os.path.getsize(page)
            rows += [("input", "%s (%.1f MB)" % (os.path.basename(a.input), os.path.getsize(a.input) / 1e6)),
                     ("report -f json (%s)" % how, "%.2f s" % tj),
                     ("report -f html (%s)" % how, "%.2f s (+%.2f s)" % (th, th - tj)),
                     ("page size", "%.1f MB" % (size / 1e6))]
            try:
                fr = first_render(page, a.loads, a.timeout)
                series = explorer_steps(page, a.steps, a.timeout)
            except cdp.CDPError as e:
                rows.append(("in Chromium", "failed: %s" % str(e).split("\n")[0]))
                fr = None
        finally:
            if not a.out:
                shutil.rmtree(work, ignore_errors=True)
    if not a.memory_viz and fr is not None:
        rows += [("first render, sd-first-render (median of %d loads)" % len(fr), ms(median(fr))),
                 ("  all loads", " ".join("%.0f" % x for x in fr))]
        for label, measures, lat, view, drawn in series:
            rows += [("%s: %d steps" % (label, a.steps),
                      "view(0) after: [%d, %d), %d allocations drawn" % (view["e0"], view["e1"], drawn)),
                     ("  sd-step measures (%d): median / max" % len(measures),
                      "%s / %s" % (ms(median(measures)), ms(max(measures) if measures else float("nan")))),
                     ("  input-to-frame (%d): median / max" % len(lat),
                      "%s / %s" % (ms(median(lat)), ms(max(lat) if lat else float("nan"))))]
    wid = max(len(r[0]) for r in rows)
    for k, v in rows:
        print("  %-*s  %s" % (wid, k, v))
    return 0


if __name__ == "__main__":
    sys.exit(main())
