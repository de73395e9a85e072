"""Names are bytes: frame names, file names, user metadata, budget names and
the input's own file name that try to act on a terminal or a CI runner, or
to break an output format (docs/reliability.md, "Names, messages and
terminals").

Each probe runs one command on a snapshot whose names hold every payload at
once and checks what it wrote: exit status, no ESC (or any other control
byte but the line breaks) on stdout, no line a name could forge ("FAKE
LINE", "::error::"), well-formed JSON, JUnit XML and SVG, a DOT file that
Graphviz read, and valid UTF-8 everywhere. CLI error messages (stderr) are
checked by the CLI's own probes; here only stdout and the files.
"""
import json
import os
import re
import xml.etree.ElementTree as ET

from common import MiB, SEG, dump, event, frame, write
from run import Probe

INT64_MAX = (1 << 63) - 1
INT64_MIN = -(1 << 63)

# The payloads, all in one name. "\u00ff" (two UTF-8 bytes) is a marker,
# patched in the pickle to a 0xFF byte and an 'A': a pickle str cannot hold
# invalid UTF-8, the file can.
PAYLOAD = ("\x1b[2J\x1b[H"             # clear the screen, cursor home
           "\x1b]0;pwned title\x07"     # OSC: set the terminal title
           "\nFAKE LINE: peak 0 B"      # a forged report line
           "\n::error::pwned"           # a GitHub Actions workflow command
           "\r\x00\x7f\u009b31m\u202e"  # CR, NUL, DEL, C1 CSI, a bidi override
           "<!--|`x` & <b>"             # Markdown/HTML breakers
           "&#27;&#0;"                  # entities Graphviz would decode into an ESC and a NUL
           "\u00ff")                    # -> a 0xFF byte
MARK, FF = "\u00ff".encode(), b"\xffA"


def _patch_ff(path):
    with open(path, "rb") as f:
        data = f.read()
    write(path, data.replace(MARK, FF))


def hostile_snapshot(payload=PAYLOAD, times=(1_000_000, 1_000_010, 1_000_020)):
    """Two allocations on hostile frames (names, file names, user metadata)."""
    bad = frame("forward" + payload, "/home/u/model" + payload + ".py", 42)
    lib = frame("linear" + payload, "/usr/lib/python3/site-packages/torch/nn/functional.py", 7)
    fr = [lib, bad]
    ev = [event("segment_alloc", SEG, 20 * MiB, times[0], fr),
          event("alloc", SEG, MiB, times[1], fr),
          event("alloc", SEG + MiB, 2 * MiB, times[2], [bad])]
    for e in ev:
        e["user_metadata"] = "meta" + payload
        e["compile_context"] = "ctx" + payload
    blocks = [{"address": SEG, "size": MiB, "requested_size": MiB, "state": "active_allocated", "frames": fr},
              {"address": SEG + MiB, "size": 2 * MiB, "requested_size": 2 * MiB, "state": "active_allocated",
               "frames": [bad]},
              {"address": SEG + 3 * MiB, "size": 17 * MiB, "requested_size": 0, "state": "inactive", "frames": []}]
    seg = {"device": 0, "address": SEG, "total_size": 20 * MiB, "allocated_size": 3 * MiB, "active_size": 3 * MiB,
           "requested_size": 3 * MiB, "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
           "is_expandable": False, "frames": fr, "blocks": blocks}
    return {"segments": [seg], "device_traces": [ev]}


def _make_hostile(name="h.pickle", **kw):
    def make(d):
        p = os.path.join(d, name)
        dump(p, hostile_snapshot(**kw))
        _patch_ff(p)
    return make


def _make_pair(d):
    _make_hostile("a.pickle")(d)
    # B: the same names, one allocation more (the diff has sites, new and changed).
    s = hostile_snapshot()
    s["device_traces"][0].append(event("alloc", SEG + 3 * MiB, 4 * MiB, 1_000_030,
                                       [frame("step" + PAYLOAD, "/home/u/train" + PAYLOAD + ".py", 9)]))
    s["segments"][0]["blocks"][2:] = [
        {"address": SEG + 3 * MiB, "size": 4 * MiB, "requested_size": 4 * MiB, "state": "active_allocated",
         "frames": s["device_traces"][0][-1]["frames"]},
        {"address": SEG + 7 * MiB, "size": 13 * MiB, "requested_size": 0, "state": "inactive", "frames": []}]
    p = os.path.join(d, "b.pickle")
    dump(p, s)
    _patch_ff(p)


def _make_profile(d):
    """A profiler trace: an op and a kernel whose names hold the payloads (a
    JSON string carries the controls as \\u escapes; the 0xFF byte raw)."""
    op, kernel = "aten::mm" + PAYLOAD, "gemm_kernel" + PAYLOAD
    ev = [{"ph": "X", "cat": "cpu_op", "name": op, "pid": 1, "tid": 1, "ts": 11.0, "dur": 5.0},
          {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 13.0, "dur": 1.0,
           "args": {"correlation": 7}},
          {"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7, "ts": 14.0, "dur": 1.0,
           "args": {"correlation": 7, "stream": 7, "device": 0}},
          {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 12.0, "s": "t",
           "args": {"Device Type": 1, "Device Id": 0, "Addr": 1024, "Bytes": 512, "Total Allocated": 512,
                    "Total Reserved": 2097152}}]
    text = json.dumps({"schemaVersion": 1, "baseTimeNanoseconds": 1700000000000000000, "traceEvents": ev},
                      ensure_ascii=False).encode()
    write(os.path.join(d, "p.json"), text.replace(MARK, FF))


# A file name with a line break, ESC and a 0xFF byte (bytes: not UTF-8).
EVIL_NAME = b"run\n::error::pwned\x1b[2J\xff.pickle"


def _make_evil_name(d):
    p = os.path.join(os.fsencode(d), EVIL_NAME)
    dump(p, hostile_snapshot(payload=""))


EVIL_TRACE = b"trace\n::error::pwned\x1b[2J\xff.json"


def _make_evil_trace(d):
    _make_hostile()(d)
    _make_profile(d)
    # At the snapshot's times (1.000000-1.000020 s): a trace of another run
    # (no allocation tied, no time in common) is an input error to --trace.
    p = os.path.join(d, "p.json")
    with open(p, "rb") as f:
        text = f.read()
    write(p, text.replace(b'"baseTimeNanoseconds": 1700000000000000000', b'"baseTimeNanoseconds": 1000000000'))
    os.rename(p, os.path.join(os.fsencode(d), EVIL_TRACE))


def _make_evil_name_bad(d):
    write(os.path.join(os.fsencode(d), EVIL_NAME), b"\x80\x04not a pickle")


def _make_budget(d):
    _make_hostile()(d)
    budget = {"schema": "snapdiff/budget/1", "metric": "allocated",
              "peak": {"requested_bytes": 1000, "allocated_bytes": 1000, "reserved_bytes": 1000},
              "categories": {"cat" + PAYLOAD.replace("\u00ff", "\u00e9"): 1000},
              "tolerance": {"max_increase": "1%"},
              "source": {"file": "base" + PAYLOAD.replace("\u00ff", "\u00e9") + ".pickle", "history": "complete",
                         "peak_phase": "forward" + PAYLOAD.replace("\u00ff", "\u00e9")}}
    write(os.path.join(d, "b.json"), json.dumps(budget).encode())


# --- what every output must hold -------------------------------------------

_FORGED = re.compile(rb"^(FAKE LINE|::|\s*::error::pwned)", re.M)


def _text_problems(data, what, annotations=0):
    """Terminal-safe text: valid UTF-8, no control byte but '\\n', no forged line.
    `annotations`: the number of '::error'/'::warning' workflow commands expected."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        return "%s is not UTF-8: %s" % (what, e)
    bad = sorted({hex(ord(c)) for c in text if (ord(c) < 0x20 and c != "\n") or 0x7f <= ord(c) <= 0x9f
                  or c in "\u2028\u2029\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"})
    if bad:
        return "%s holds control characters %s" % (what, ", ".join(bad))
    lines = text.split("\n")
    forged = [l for l in lines if l.startswith("FAKE LINE") or "::error::pwned" in l.split("::", 1)[0] or
              (l.startswith("::") and not re.match(r"^::(error|warning) title=[^:]*::", l))]
    if forged:
        return "%s has a line a name forged: %r" % (what, forged[0][:120])
    cmds = [l for l in lines if l.startswith("::")]
    if len(cmds) != annotations:
        return "%s has %d workflow commands, expected %d: %r" % (what, len(cmds), annotations, cmds[:3])
    return None


def _stdout_text(annotations=0):
    def check(d, r):
        if not r.out:
            return "nothing on stdout"
        return _text_problems(r.out, "stdout", annotations)
    return check


def _stdout_json(d, r):
    p = _text_problems(r.out, "the JSON")
    if p:
        return p
    try:
        doc = json.loads(r.out)
    except ValueError as e:
        return "stdout is not JSON: %s" % e
    strings = list(_strings(doc))
    if not any("\ufffdA" in x for x in strings):
        return "the 0xFF byte is not U+FFFD in the JSON"
    if not any("\x1b[2J" in x and "\nFAKE LINE" in x for x in strings):
        return "the names' bytes are not in the JSON as they are (ESC [2J, a line break)"
    return None


def _strings(doc):
    """Every string of a JSON document, keys included."""
    if isinstance(doc, str):
        yield doc
    elif isinstance(doc, list):
        for x in doc:
            yield from _strings(x)
    elif isinstance(doc, dict):
        for k, v in doc.items():
            yield k
            yield from _strings(v)


def _html(path_or_stdout):
    def check(d, r):
        data = r.out if path_or_stdout is None else open(os.path.join(d, path_or_stdout), "rb").read()
        p = _text_problems(data, "the HTML")
        if p:
            return p
        if b"<!--|" in data or b"& <b>" in data:
            return "a name's markup reached the HTML unescaped"
        if b"\\x1b[2J" not in data:
            return "the escaped name (\\x1b[2J) is not in the HTML"
        return None
    return check


def _markdown(d, r):
    p = _text_problems(r.out, "the Markdown")
    if p:
        return p
    text = r.out.decode()
    # Inside a code span `<!--` is text; outside, it would hide the rest of the comment.
    parsed = re.sub(r"(?<!`)(`+)(?!`).*?(?<!`)\1(?!`)", "CODE", text)
    if "<!--" in parsed or "<b>" in parsed:
        return "a name's markup reached the Markdown unescaped"
    if "`" in parsed:
        return "a code span is not closed"
    # Every row of a table has its header's number of (unescaped) pipes.
    lines = text.split("\n")
    pipes = lambda l: len(re.findall(r"(?<!\\)\|", l))
    want = None
    for i, l in enumerate(lines):
        if not l.startswith("|"):
            want = None
            continue
        if want is None:
            want = pipes(l)
        elif pipes(l) != want:
            return "a table row was broken: %r" % l[:160]
    return None


def _json_parses(d, r):
    p = _text_problems(r.out, "the JSON")
    if p:
        return p
    try:
        json.loads(r.out)
    except ValueError as e:
        return "stdout is not JSON: %s" % e
    return None


def _junit(d, r):
    data = open(os.path.join(d, "j.xml"), "rb").read()
    try:
        root = ET.fromstring(data)
    except ET.ParseError as e:
        return "the JUnit file is not well-formed XML: %s" % e
    if root.tag != "testsuites":
        return "the JUnit root is %s" % root.tag
    p = _text_problems(data.replace(b"\n", b" "), "the JUnit file")
    return p or _stdout_text()(d, r)


def _svg(name):
    def check(d, r):
        data = open(os.path.join(d, name), "rb").read()
        try:
            ET.fromstring(data)
        except ET.ParseError as e:
            return "%s is not well-formed XML: %s" % (name, e)
        return _text_problems(data, name) if b"\\x1b[2J" in data else "%s lacks the escaped name" % name
    return check


def _dot(d, r):
    data = open(os.path.join(d, "x.dot"), "rb").read()
    if b"\x00" in data or b"\x1b" in data or b"\xff" in data:
        return "the DOT holds a NUL, an ESC or a 0xFF byte"
    if re.search(rb"^(// )?(::|FAKE LINE)", data, re.M):
        return "a line of the DOT (or of its comment) starts where a name's line break put it"
    return _text_problems(data, "the DOT")


def _empty_stdout(d, r):
    return "printed %d bytes on stdout" % len(r.out) if r.out else None


def _times(expect):
    def check(d, r):
        p = _text_problems(r.out, "stdout")
        if p:
            return p
        text = r.out.decode()
        for bad in ("294247-", "292277-", "+ -", "+-"):
            if bad in text:
                return "an int64 time printed as %r" % bad
        for want in expect:
            if want not in text:
                return "%r is not in the report" % want
        return None
    return check


def probes(scale):
    gha = {"GITHUB_ACTIONS": "true"}
    P = []

    def add(name, what, make, args, **kw):
        P.append(Probe(name, "names", what, make, args, **kw))

    add("names-report-text", "frame names with ESC[2J, an OSC title, NUL, 0xFF, '\\nFAKE LINE', '\\n::error::': "
        "the text report", _make_hostile(), ["report", "h.pickle"], exit=0, check=_stdout_text())
    add("names-report-explain", "the same, --explain on a hostile frame", _make_hostile(),
        ["report", "h.pickle", "--explain", "forward"], exit=0, check=_stdout_text())
    add("names-report-json", "the same, --format json (invalid UTF-8 failed with exit 4)", _make_hostile(),
        ["report", "-f", "json", "h.pickle"], exit=0, check=_stdout_json)
    add("names-report-html", "the same, --format html to a file (a NUL broke Graphviz: exit 4)", _make_hostile(),
        ["report", "-f", "html", "-o", "h.html", "h.pickle"], exit=0, check=_html("h.html"))
    add("names-report-html-stdout", "the same, --format html on stdout", _make_hostile(),
        ["report", "-f", "html", "h.pickle"], exit=0, check=_html(None))
    add("names-chart-dot", "the same, chart --kind flame -o x.dot", _make_hostile(),
        ["chart", "--kind", "flame", "-o", "x.dot", "h.pickle"], exit=0, check=_dot)
    for kind in ("flame", "lifetime"):
        add("names-chart-%s-svg" % kind, "the same, chart --kind %s -o x.svg" % kind, _make_hostile(),
            ["chart", "--kind", kind, "-o", "x.svg", "h.pickle"], exit=0, check=_svg("x.svg"))
    # (The timeline names no sites: only its categories and phases.)
    add("names-chart-timeline-svg", "the same, chart --kind timeline -o x.svg", _make_hostile(),
        ["chart", "--kind", "timeline", "-o", "x.svg", "h.pickle"], exit=0, check=lambda d, r: _svg_ok(d, "x.svg"))
    add("names-diff-text", "two snapshots with hostile names: diff", _make_pair, ["diff", "a.pickle", "b.pickle"],
        exit=0, check=_stdout_text())
    add("names-diff-json", "the same, diff --format json", _make_pair, ["diff", "-f", "json", "a.pickle", "b.pickle"],
        exit=0, check=_stdout_json)
    add("names-diff-markdown", "the same, diff --format markdown ('<!--', '|' and newlines broke its tables)",
        _make_pair, ["diff", "-f", "markdown", "a.pickle", "b.pickle"], exit=0, check=_markdown)
    add("names-diff-html", "the same, diff --format html", _make_pair,
        ["diff", "-f", "html", "a.pickle", "b.pickle"], exit=0, check=_html(None))
    add("names-diff-chart-svg", "the same, chart --kind flame of A and B", _make_pair,
        ["chart", "--kind", "flame", "-o", "x.svg", "a.pickle", "b.pickle"], exit=0, check=_svg("x.svg"))
    add("names-profiler-text", "a profiler trace whose op and kernel names hold the payloads: the text report "
        "(by op, by kernel, the next kernel)", _make_profile, ["report", "p.json"], exit=0, check=_stdout_text())
    add("names-profiler-json", "the same, --format json", _make_profile, ["report", "-f", "json", "p.json"], exit=0,
        check=_json_parses)
    add("names-profiler-html", "the same, --format html", _make_profile, ["report", "-f", "html", "p.json"], exit=0,
        check=_html(None))
    # check: the names it prints are the inputs' and the budget's.
    add("names-check-budget-text", "a budget whose file, phase and category names hold the payloads: check's verdict",
        _make_budget, ["check", "--budget", "b.json", "h.pickle"], exit=1, check=_stdout_text())
    add("names-check-budget-junit", "the same, --junit j.xml (must be well-formed XML)", _make_budget,
        ["check", "--budget", "b.json", "--junit", "j.xml", "h.pickle"], exit=1, check=_junit)
    add("names-check-budget-json", "the same, --format json", _make_budget,
        ["check", "--budget", "b.json", "-f", "json", "h.pickle"], exit=1,
        check=_json_parses)
    add("names-check-github", "the same with GITHUB_ACTIONS=true: one ::error line per failed threshold, "
        "nothing a name forged", _make_budget, ["check", "--budget", "b.json", "h.pickle"], exit=1, env=gha,
        check=_stdout_text(annotations=1))
    # The input's own file name: a line break, ESC and 0xFF.
    add("names-filename-report", "an input named 'run\\n::error::pwned\\x1b[2J\\xff.pickle': the text report",
        _make_evil_name, ["report", EVIL_NAME], exit=0, check=_stdout_text())
    add("names-filename-json", "the same, --format json (the name's 0xFF failed with exit 4)", _make_evil_name,
        ["report", "-f", "json", EVIL_NAME], exit=0,
        check=lambda d, r: _text_problems(r.out, "the JSON") or
        (None if "\ufffd" in json.loads(r.out)["input"]["name"] else "no U+FFFD in the input's name"))
    add("names-filename-check-junit", "the same, check --max-peak 1B --junit j.xml", _make_evil_name,
        ["check", "--max-peak", "1B", "--junit", "j.xml", EVIL_NAME], exit=1, check=_junit)
    add("names-filename-check-github", "the same, check with GITHUB_ACTIONS=true", _make_evil_name,
        ["check", "--max-peak", "1B", EVIL_NAME], exit=1, env=gha, check=_stdout_text(annotations=1))
    add("names-filename-chart-dot", "the same, chart -o x.dot (the name is in the title and the comment lines)",
        _make_evil_name, ["chart", "--kind", "timeline", "-o", "x.dot", EVIL_NAME], exit=0, check=_dot)
    add("names-filename-chart-svg", "the same, chart -o x.svg (the name is in the chart's title)", _make_evil_name,
        ["chart", "--kind", "timeline", "-o", "x.svg", EVIL_NAME], exit=0,
        check=lambda d, r: _svg_ok(d, "x.svg"))
    add("names-filename-trace", "a --trace file named like it: the join's line in the text report",
        _make_evil_trace, ["report", "--trace", EVIL_TRACE, "h.pickle"], exit=0, check=_stdout_text())
    # (Its error line is the CLI's: only stdout is checked here.)
    add("names-filename-bad-input", "the same name on a file that is not a snapshot: exit 3, nothing on stdout",
        _make_evil_name_bad, ["report", EVIL_NAME], exit=3, one_line=False, check=_empty_stdout)
    # int64 time extremes.
    add("times-int64-extremes", "events at time_us INT64_MIN+1 and INT64_MAX (printed '294247-01-10 ... + "
        "-9223372036854.775 s')", _make_hostile(payload="", times=(INT64_MIN + 1, 0, INT64_MAX)),
        ["report", "h.pickle"], exit=0, check=_times(["time_us -9223372036854775807", "18446744073709.55"]))
    add("times-int64-backwards", "the first event at INT64_MAX, the last at 0", _make_hostile(
        payload="", times=(INT64_MAX, INT64_MAX, 0)), ["report", "h.pickle", "--width", "1000"], exit=0,
        check=_times(["time_us 9223372036854775807 - 9223372036854.77", "(the times go backwards)"]))
    add("times-int64-html", "the same times, --format html", _make_hostile(payload="", times=(INT64_MIN + 1, 0, INT64_MAX)),
        ["report", "-f", "html", "h.pickle"], exit=0, check=_times(["time_us -9223372036854775807"]))
    return P


def _svg_ok(d, name):
    data = open(os.path.join(d, name), "rb").read()
    try:
        ET.fromstring(data)
    except ET.ParseError as e:
        return "%s is not well-formed XML: %s" % (name, e)
    return _text_problems(data, name)
