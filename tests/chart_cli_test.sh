#!/usr/bin/env bash
# `snapdiff chart` and `--format html` end to end: every kind in every format
# (SVG parses as XML, PNG has the size of the drawing, PDF and DOT look
# right), two-run charts, usage and input errors; the HTML report and diff
# reference nothing outside themselves and render in headless Chromium
# without a console message (checked to catch a real JavaScript error, too).
# Usage: chart_cli_test.sh path/to/snapdiff SOURCE_DIR
# Exits 77 (skipped) after the chart checks when Chromium is not installed.
set -u
BIN=$1
SRC=$2
DATA=$SRC/tests/data/real
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
source "$SRC/tests/cli_lib.sh"

check "chart --help" 0 "$BIN" chart --help
grep -q -- "--kind" "$T/out" || { echo "FAIL chart --help: no --kind"; fails=$((fails+1)); }
check "--help lists chart" 0 "$BIN" --help
grep -q "snapdiff chart" "$T/out" || { echo "FAIL --help: no chart command"; fails=$((fails+1)); }

A=$DATA/small_fp8.pickle
B=$DATA/small_fp8_pw.pickle
# Usage errors (exit 2) and input errors (exit 3), nothing written.
check "no --kind" 2 "$BIN" chart "$A" -o "$T/x.svg"
check "bad --kind" 2 "$BIN" chart "$A" --kind pie -o "$T/x.svg"
check "no -o" 2 "$BIN" chart "$A" --kind flame
check "unknown extension" 2 "$BIN" chart "$A" --kind flame -o "$T/x.jpg"
check "three inputs" 2 "$BIN" chart "$A" "$A" "$A" --kind flame -o "$T/x.svg"
check "--top over the cap" 2 "$BIN" chart "$A" --kind lifetime --top 100000 -o "$T/x.svg"
check "bad --group" 2 "$BIN" chart "$A" --kind lifetime --group color -o "$T/x.svg"
check "bad --x" 2 "$BIN" chart "$A" --kind timeline --x minutes -o "$T/x.svg"
check "no such device" 2 "$BIN" chart "$A" --kind flame --device 7 -o "$T/x.svg"
check "hostile input" 3 "$BIN" chart "$SRC/tests/data/evil_os_system.pickle" --kind flame -o "$T/x.svg"
[[ $(wc -l <"$T/err") -eq 1 ]] || { echo "FAIL hostile input: not one stderr line"; fails=$((fails+1)); }
# The input options every command takes.
check "chart --max-memory too small" 3 "$BIN" chart --max-memory 1KiB "$A" --kind flame -o "$T/x.svg"
expect "chart --max-memory too small" "$T/err" "raise it with --max-memory"
check "chart --max-memory bad" 2 "$BIN" chart --max-memory lots "$A" --kind flame -o "$T/x.svg"
[[ -e $T/x.svg || -e $T/x.jpg ]] && { echo "FAIL: a failed chart left a file"; fails=$((fails+1)); }

# Graphviz without its plugins (GVBINDIR naming an empty directory) cannot lay
# the chart out: exit 5, one line saying so, nothing written; the same in an
# HTML report. A .dot needs no plugin.
mkdir "$T/no-plugins"
nogv() { env GVBINDIR="$T/no-plugins" "$@"; }
nogv "$BIN" chart "$A" --kind flame -o "$T/gv.svg" >"$T/out" 2>"$T/err"; rc=$?
if [[ $rc -eq 0 ]]; then
  echo "skip Graphviz failure: this Graphviz draws without its plugin directory"
else
  [[ $rc -eq 5 ]] && echo "ok   Graphviz failure: exit 5" || fail "Graphviz failure: exit $rc, expected 5: $(cat "$T/err")"
  if [[ $(wc -l <"$T/err") -ne 1 ]] || ! grep -q '^snapdiff: error: cannot draw the chart: Graphviz: layout failed: ' "$T/err"; then
    fail "Graphviz failure: stderr is not one 'cannot draw the chart' line: $(cat "$T/err")"
  fi
  [[ -e $T/gv.svg ]] && fail "Graphviz failure: wrote $T/gv.svg"
  check "Graphviz failure in an HTML report" 5 nogv "$BIN" report --format html "$A" -o "$T/gv.html"
  expect "Graphviz failure in an HTML report" "$T/err" "^snapdiff: error: cannot draw the chart: Graphviz: "
  [[ -e $T/gv.html ]] && fail "Graphviz failure: wrote $T/gv.html"
fi
check "a .dot chart needs no Graphviz plugin" 0 nogv "$BIN" chart "$A" --kind flame -o "$T/gv.dot"

# Every kind in every format, one run and two.
for kind in flame lifetime timeline; do
  for ext in svg png pdf dot; do
    check "$kind .$ext" 0 "$BIN" chart "$A" --kind "$kind" -o "$T/$kind.$ext" && quiet "$kind .$ext"
  done
  check "$kind A B .svg" 0 "$BIN" chart "$A" "$B" --kind "$kind" -o "$T/${kind}_ab.svg"
  check "$kind A B .png" 0 "$BIN" chart "$A" "$B" --kind "$kind" -o "$T/${kind}_ab.png"
done
check "lifetime by site, events axis" 0 "$BIN" chart "$A" --kind lifetime --group site --x events -o "$T/site.svg"
check "narrow timeline" 0 "$BIN" chart "$A" --kind timeline --width 600 -o "$T/narrow.png"
check "snapcapture flame" 0 "$BIN" chart "$SRC/sample_snapshots/fp8_no_pw.snap" --kind flame -o "$T/snap_flame.svg"
grep -q "layer 0&#45;31" "$T/snap_flame.svg" || { echo "FAIL snapcapture flame: layers not grouped"; fails=$((fails+1)); }

"$BIN" report "$A" --format json -o "$T/a.json"
python3 - "$T" <<'PY' || fails=$((fails+1))
import re, struct, sys, xml.etree.ElementTree as ET
t = sys.argv[1]
bad = 0
for name in ["flame", "lifetime", "timeline", "flame_ab", "lifetime_ab", "timeline_ab", "site", "snap_flame"]:
    diff_flame = name == "flame_ab"  # colored by change, no categories
    root = ET.parse(f"{t}/{name}.svg").getroot()       # well-formed XML
    assert root.tag.endswith("svg"), name
    w, h = (float(root.get(k).rstrip("pt")) for k in ("width", "height"))
    classes = {c for e in root.iter() for c in (e.get("class") or "").split() if c.startswith("cat-")}
    legend = {e.get("class").split()[-1] for e in root.iter() if "legend" in (e.get("class") or "").split()
              and (e.get("class") or "").split()[-1].startswith("cat-")}
    if not diff_flame and (not legend or not classes <= legend):
        print(f"FAIL {name}.svg: category classes {sorted(classes)} not all in the legend {sorted(legend)}"); bad += 1
    if name in ("flame", "lifetime", "timeline"):
        png = open(f"{t}/{name}.png", "rb").read()
        assert png[:8] == b"\x89PNG\r\n\x1a\n", name
        pw, ph = struct.unpack(">II", png[16:24])
        if (pw, ph) != (round(w * 96 / 72), round(h * 96 / 72)):
            print(f"FAIL {name}.png is {pw}x{ph}, the drawing is {w}x{h} pt"); bad += 1
        assert open(f"{t}/{name}.pdf", "rb").read(5) == b"%PDF-", name
        dot = open(f"{t}/{name}.dot").read()
        assert dot.startswith("//") and "digraph snapdiff" in dot and "layout=nop2" in dot, name
    print(f"ok   {name}.svg: XML, {len(legend)} categories in the legend")
# The flame legend has one entry per category live at the peak of small_fp8
# (the report's categories with bytes there).
import json
want = sum(1 for v in json.load(open(f"{t}/a.json"))["devices"][0]["categories"].values() if v > 0)
root = ET.parse(f"{t}/flame.svg").getroot()
n = sum(1 for e in root.iter() if "legend" in (e.get("class") or "").split() and "cat-" in (e.get("class") or ""))
if n != want or want < 6: print(f"FAIL flame.svg: {n} legend entries, expected {want}"); bad += 1
sys.exit(1 if bad else 0)
PY

# HTML: report and diff, self-contained.
check "report --format html" 0 "$BIN" report --format html -o "$T/report.html" "$A" && quiet "report --format html"
check "diff --format html" 0 "$BIN" diff --format html -o "$T/diff.html" "$A" "$B"
check "A B --format html" 0 "$BIN" "$A" "$B" --format html -o "$T/diff2.html"
check "report html, a run that died of OOM" 0 "$BIN" report --format html -o "$T/oom.html" "$DATA/small_oom.pickle"
for page in report diff oom; do
  if grep -Eiq "(src|href)[[:space:]]*=[[:space:]]*[\"']?[[:space:]]*(https?:|//)" "$T/$page.html"; then
    echo "FAIL $page.html references something outside itself:"
    grep -Eio "(src|href)[[:space:]]*=[[:space:]]*[\"']?[[:space:]]*(https?:|//)[^\"' >]*" "$T/$page.html" | head -3
    fails=$((fails+1))
  else
    echo "ok   $page.html: no external references"
  fi
  [[ $(grep -c "<svg" "$T/$page.html") -eq 3 ]] || { echo "FAIL $page.html: not three inline charts"; fails=$((fails+1)); }
done

# Headless Chromium: the page renders (a screenshot of it) and logs nothing
# on the console (a JavaScript error would). A broken page must be caught.
CHROME=""
for c in chromium chromium-browser google-chrome; do command -v "$c" >/dev/null && { CHROME=$c; break; }; done
if [[ -z $CHROME ]]; then
  echo "skip: Chromium is not installed (scripts/install-deps.sh installs it); $fails failures so far"
  [[ $fails -eq 0 ]] && exit 77 || exit 1
fi
render() {  # render PAGE.html SHOT.png: 0 when it rendered without any console message
  local page=$1 shot=$2 log=$2.log
  rm -f "$shot"
  timeout 120 "$CHROME" --headless --no-sandbox --disable-gpu --no-first-run --hide-scrollbars \
    --user-data-dir="$T/profile-$(basename "$shot")" --enable-logging=stderr --v=0 \
    --window-size=1400,2400 --screenshot="$shot" "file://$page" >"$log" 2>&1
  [[ -s $shot ]] || { echo "  no screenshot; chromium said:"; tail -5 "$log"; return 2; }
  if grep -q ":CONSOLE" "$log"; then grep ":CONSOLE" "$log" | head -3 | sed 's/^/  console: /'; return 1; fi
  return 0
}
cat >"$T/broken.html" <<'HTML'
<!DOCTYPE html><html><head><meta charset="utf-8"><title>broken</title></head>
<body><p>deliberately broken</p><script>document.querySelector("#none").classList.add("x");</script></body></html>
HTML
render "$T/broken.html" "$T/broken.png"
if [[ $? -eq 1 ]]; then echo "ok   chromium check catches a JavaScript error"; else echo "FAIL chromium check missed the broken page's error"; fails=$((fails+1)); fi
for page in report diff; do
  if render "$T/$page.html" "$T/$page.png"; then
    size=$(stat -c %s "$T/$page.png")
    if [[ $size -lt 50000 ]]; then echo "FAIL $page.html: screenshot is only $size bytes (blank page?)"; fails=$((fails+1));
    else echo "ok   $page.html renders in $CHROME without console messages ($size-byte screenshot)"; fi
  else
    echo "FAIL $page.html: console messages or no rendering"; fails=$((fails+1))
  fi
done
echo "$fails failures"
[[ $fails -eq 0 ]]
