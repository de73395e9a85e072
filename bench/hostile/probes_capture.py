"""snapcapture's surfaces (issue 37): `snapcapture convert` on crafted
injection-library logs (capture/inject/log_format.hpp, built here byte by
byte), on things that are not logs (a FIFO, a link to /dev/zero), on names
that try to act on a terminal or a CI runner, and `snapcapture run` when a
signal reaches it (docs/reliability.md, "snapcapture").

`run` needs no GPU for these: the commands it runs never use CUDA.
"""
import gzip
import json
import os
import struct

from common import MiB, says, write
from run import Probe

T0 = 1_700_000_000_000_000  # CLOCK_REALTIME microseconds

# snapcapture's own footprint: it links cuBLASLt and the CUDA runtime, about
# 210 MiB resident before it reads a byte. Bounds are that plus what the
# input may take.
CAP_RSS = 400 * MiB

# The payloads of probes_names.py, in a file name: clear the screen, retitle
# the terminal, a forged line and a GitHub Actions workflow command.
EVIL = "\x1b[2J\x1b[H\x1b]0;pwned title\x07\n::error::pwned\r\x7f"


# ---- logs, byte by byte ------------------------------------------------------

def _rec(rtype, body):
    n = 8 + len(body)
    pad = (-n) % 8
    return struct.pack("<HHI", rtype, 0, n + pad) + body + b"\0" * pad


def _string(sid, text):
    b = text.encode() if isinstance(text, str) else text
    return _rec(1, struct.pack("<II", sid, len(b)) + b)


def _kernel(t, name_id):
    return _rec(2, struct.pack("<qQIiIHH3I3I", t, 0, 1, 0, name_id, 1, 0, 1, 1, 1, 32, 1, 1))


def _log(records, pid=4242):
    return b"SCAPLOG1" + struct.pack("<IIIIq", 1, pid, 1, 32, T0) + b"".join(records)


def _nested_name(levels):
    """A mangled name of `levels` nested templates, each A<previous, previous>
    through two back-references: about 12 bytes a level, and a demangled text
    that doubles with each (`levels` = 26: 1.1 GB)."""
    def seq(i):  # the <seq-id> of substitution i: S_, S0_, ..., S9_, SA_, ..., SZ_, S10_
        if i == 0:
            return "S_"
        i -= 1
        digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
        s = ""
        while True:
            s = digits[i % 36] + s
            i //= 36
            if i == 0:
                break
        return "S" + s + "_"
    # A<B, B> spells candidates A (0), B (1) and A<B, B> (2); level k,
    # A<level k-1, level k-1>, is candidate k + 1.
    name = "_Z6kernel"
    spelled = "1AI1BS0_E"
    for k in range(2, levels + 1):
        spelled += "S_I" + seq(k) + seq(k) + "E"  # a parameter of each level
    return name + spelled


def _nested_log(levels):
    def make(d):
        name = _nested_name(levels)
        write(os.path.join(d, "1.sclog"), _log([_string(1, name), _kernel(T0 + 10, 1)]))
    return make


def _kept_mangled(levels):
    def check(d, r):
        try:
            doc = json.load(gzip.open(os.path.join(d, "out.snap")))
            names = [doc["strings"][i] for i in doc["kernels"]["name"]]
        except Exception as e:  # noqa: BLE001 - any failure to read is the probe's finding
            return "no readable recording: %r" % e
        if names != [_nested_name(levels)]:
            return "the kernel's name is not the mangled name kept (%d bytes)" % len(names[0]) if names else "no kernel"
        return None
    return check


# ---- not logs: a FIFO, a link to /dev/zero -----------------------------------

def _fifo(d):
    os.mkfifo(os.path.join(d, "7.sclog"))


def _fifo_in_folder(d):
    os.mkdir(os.path.join(d, "logs"))
    os.mkfifo(os.path.join(d, "logs", "7.sclog"))


def _zero(d):
    os.symlink("/dev/zero", os.path.join(d, "8.sclog"))


# ---- names -------------------------------------------------------------------

def _evil_log(d):
    write(os.path.join(d, EVIL + ".sclog"), b"not a log at all, but a name that acts on a terminal")


def _clean_stderr(d, r):
    bad = [c for c in r.err if (c < 0x20 and c != 0x0A) or c == 0x7F]
    if bad:
        return "stderr holds control bytes %r: %r" % (sorted(set(bad)), r.err[:300])
    if any(line.startswith(b"::") for line in r.err.split(b"\n")):
        return "stderr holds a workflow command line: %r" % r.err[:300]
    return None


def _tmp(d):
    os.mkdir(os.path.join(d, "tmp"))


# ---- signals to `snapcapture run` --------------------------------------------
# The command sends the signal to its parent (snapcapture, the way `kill` or
# a job scheduler would), then waits: exit 42 when the signal reaches it,
# 9 when it never does (bounded: no orphan outlives the probe).

def _signal_cmd(sig):
    return ["run", "-o", "out.snap", "--", "/bin/sh", "-c",
            'trap "exit 42" %s; kill -%s $PPID; i=0; while [ $i -lt 1000 ]; do sleep 0.02; i=$((i+1)); done; exit 9'
            % (sig, sig)]


def _signal_done(d, r):
    left = os.listdir(os.path.join(d, "tmp"))
    if left:
        return "the temporary log folder was left behind: %s" % left
    if not os.path.exists(os.path.join(d, "out.snap")):
        return "no recording written"
    return _clean_stderr(d, r)


def probes(scale):
    full = scale == "full"
    levels = 26 if full else 23
    probes = [
        Probe("i37_02_convert_nested_substitutions", "time",
              "a %d-level kernel name whose demangled text doubles with each substitution level" % levels,
              _nested_log(levels), ["convert", "1.sclog", "-o", "out.snap"], exit=0, max_rss=CAP_RSS,
              check=_kept_mangled(levels), program="snapcapture"),
        Probe("i37_03_convert_fifo", "bounds", "convert of a FIFO named 7.sclog with no writer (it used to hang)",
              _fifo, ["convert", "7.sclog", "-o", "out.snap"], exit=3, check=says("7.sclog"),
              program="snapcapture"),
        Probe("i37_03_convert_fifo_in_folder", "bounds", "convert of a folder whose 7.sclog is a FIFO",
              _fifo_in_folder, ["convert", "logs", "-o", "out.snap"], exit=3, check=says("7.sclog"),
              program="snapcapture"),
        Probe("i37_03_convert_dev_zero", "bounds", "convert of 8.sclog, a link to /dev/zero (read until memory ran out)",
              _zero, ["convert", "8.sclog", "-o", "out.snap"], exit=3, max_rss=CAP_RSS, check=says("8.sclog"),
              program="snapcapture"),
        Probe("i37_03_convert_dev_zero_bounded", "bounds", "convert of a link to /dev/zero under --max-memory 64MiB",
              _zero, ["convert", "--max-memory", "64MiB", "8.sclog", "-o", "out.snap"], exit=3, max_rss=CAP_RSS,
              program="snapcapture"),
        Probe("i37_03_convert_max_input_bytes", "bounds", "convert of a 64 KiB log under --max-input-bytes 4KiB",
              lambda d: write(os.path.join(d, "9.sclog"), _log([_string(1, "x" * 65536)])),
              ["convert", "--max-input-bytes", "4KiB", "9.sclog", "-o", "out.snap"], exit=3,
              check=says("9.sclog", "--max-input-bytes"), program="snapcapture"),
        Probe("i37_09_convert_escape_name", "names",
              "convert of a bad log whose name holds ESC sequences, a newline and ::error::",
              _evil_log, ["convert", EVIL + ".sclog", "-o", "out.snap"], exit=3, check=_clean_stderr,
              program="snapcapture"),
        Probe("i37_09_convert_escape_output_name", "names",
              "convert of an empty folder to an output whose name holds ESC sequences and ::error::",
              lambda d: os.mkdir(os.path.join(d, "logs")), ["convert", "logs", "-o", EVIL + ".snap"], exit=0,
              check=_clean_stderr, program="snapcapture"),
        Probe("i37_09_run_keep_logs_escape", "names",
              "run --keep-logs into a folder named with ESC sequences and ::error::, a bad log in it",
              lambda d: None,
              ["run", "--keep-logs", EVIL, "-o", "out.snap", "--", "/bin/sh", "-c",
               'printf "not a log" > "$SNAPCAPTURE_LOG_DIR/5.sclog"'],
              exit=3, check=_clean_stderr, program="snapcapture"),
        Probe("i37_09_run_missing_command_escape", "names",
              "run of a command that does not exist, named with ESC sequences and ::error::",
              _tmp, ["run", "-o", "out.snap", "--", "./" + EVIL], exit=127, check=_clean_stderr,
              env={"TMPDIR": "tmp"}, program="snapcapture"),
    ]
    for sig in ("HUP", "INT", "QUIT", "TERM", "USR1", "USR2", "ALRM", "WINCH", "PIPE"):
        probes.append(Probe("i37_13_run_forwards_sig%s" % sig.lower(), "misc",
                            "SIG%s sent to snapcapture run: it reaches the command, the recording is written and "
                            "the temporary log folder removed" % sig,
                            _tmp, _signal_cmd(sig), exit=42, check=_signal_done, env={"TMPDIR": "tmp"},
                            program="snapcapture"))
    return probes
