#!/usr/bin/env python3
"""The README's pictures of the explorer, made in headless Chromium from the
bundled samples (paths as the README's commands give them):

  docs/img/explorer-peak.png   `snapdiff view sample_snapshots/gpt2_run.pickle.gz`,
                               the moment set to the peak (live bytes by category)
  docs/img/explorer-diff.png   `snapdiff view bf16.snap fp8_no_pw.snap`, zoomed on
                               the peak's iteration, an allocation of B pinned

Usage: scripts/explorer_screenshots.py [SNAPDIFF]   (build/snapdiff; run from anywhere)"""
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "browser"))
import cdp  # noqa: E402


def page_of(binary, out, *inputs):
    subprocess.run([binary, "view", "--no-open", "-o", out, *inputs], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return out


def main():
    binary = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "snapdiff"))
    img = os.path.join(ROOT, "docs", "img")
    with tempfile.TemporaryDirectory() as tmp, cdp.Browser(width=1280, height=1280) as b:
        p = b.new_page()
        p.navigate(page_of(binary, os.path.join(tmp, "r.html"), "sample_snapshots/gpt2_run.pickle.gz"))
        p.evaluate("window.snapdiffExplorer.ready")
        p.evaluate("""(() => { const s = document.getElementById('sd-jump');
            s.value = [...s.options].find(o => /peak/i.test(o.textContent)).value;
            s.dispatchEvent(new Event('change')); window.scrollTo(0, 0); return true; })()""")
        p.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        p.screenshot(os.path.join(img, "explorer-peak.png"))

        p = b.new_page()
        p.navigate(page_of(binary, os.path.join(tmp, "d.html"), "sample_snapshots/bf16.snap", "sample_snapshots/fp8_no_pw.snap"))
        p.evaluate("window.snapdiffExplorer.ready")
        p.evaluate("""(async () => { const X = window.snapdiffExplorer;
            const s = document.getElementById('sd-jump');
            const o = [...s.options].find(o => /peak/i.test(o.textContent) && o.value.startsWith('1:'));
            const e = parseInt(o.value.split(':').pop(), 10);
            await X.setView(1, Math.max(0, e - 150), e + 150); return true; })()""")
        p.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        x, y = p.evaluate("(() => { const X = window.snapdiffExplorer; const v = X.view(1);"
                          " return [X.xOf(1, (v.e0 + v.e1) / 2), X.yMid(1) + 30]; })()")
        p.click(x, y)
        p.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        p.evaluate("(() => { document.getElementById('sd-explorer').scrollIntoView(); return true; })()")
        p.screenshot(os.path.join(img, "explorer-diff.png"))
    print("wrote docs/img/explorer-peak.png, docs/img/explorer-diff.png")


if __name__ == "__main__":
    main()
