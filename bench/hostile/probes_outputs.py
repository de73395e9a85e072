"""Outputs: safe, atomic, checked (docs/reliability.md, "Outputs").

Every place snapdiff writes — `-o` of report/diff/check/chart, `check
--write-budget` and `--junit`, convert's .snap/.pickle/.pickle.gz, stdout —
against hostile surroundings: devices and FIFOs as targets, planted
symlinks, directories in the way, a full disk (RLIMIT_FSIZE, SIGXFSZ
ignored: writes fail with EFBIG), stdout on /dev/full, closed, or a pipe
whose reader goes away; and the command-line counts that used to wrap.
Each probe is one small real snapshot from tests/data/real/.
"""
import os
import shutil
import stat
import threading

from common import dump, small_snapshot
from run import Probe

HERE = os.path.dirname(os.path.abspath(__file__))
REAL = os.path.normpath(os.path.join(HERE, "..", "..", "tests", "data", "real"))
SNAP = "small_bf16.pickle"  # 114 KB, complete history
BIG_OUT = "med_bf16_cpp.pickle"  # its JSON report with every site: 0.5 MB, far more than a pipe holds

OLD = b"the old good contents, which must survive byte for byte\n" * 8


def _copy(d, name=SNAP, as_name="s.pickle"):
    shutil.copyfile(os.path.join(REAL, name), os.path.join(d, as_name))


def _with_old(*names):
    """make(): the snapshot, and each name holding OLD."""
    def make(d):
        _copy(d)
        for n in names:
            with open(os.path.join(d, n), "wb") as f:
                f.write(OLD)
    return make


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _unchanged(*names):
    def check(d, r):
        for n in names:
            p = os.path.join(d, n)
            if not os.path.isfile(p) or os.path.islink(p):
                return "%s is gone or no longer a regular file" % n
            if _read(p) != OLD:
                return "%s changed (%d bytes now)" % (n, os.path.getsize(p))
        if b"wrote" in r.out:
            return "said it wrote: %r" % r.out[:200]
        return None
    return check


def _err_is(text):
    def check(d, r):
        want = ("snapdiff: error: " + text + "\n").encode()
        return None if r.err == want else "stderr %r, expected %r" % (r.err[:300], want)
    return check


def _all(*checks):
    def check(d, r):
        for c in checks:
            msg = c(d, r)
            if msg:
                return msg
        return None
    return check


def _names(d):
    return sorted(os.listdir(d))


# --- devices, FIFOs, sockets -------------------------------------------------

def _dev_null_intact(d, r):
    st = os.lstat("/dev/null")
    if not stat.S_ISCHR(st.st_mode) or (os.major(st.st_rdev), os.minor(st.st_rdev)) != (1, 3):
        return "/dev/null is no longer the character device 1,3 (restore: rm -f /dev/null; mknod -m 666 /dev/null c 1 3)"
    return None


def _make_fifo(d):
    _copy(d)
    os.mkfifo(os.path.join(d, "out.fifo"))


def _fifo_intact(d, r):
    return None if stat.S_ISFIFO(os.lstat(os.path.join(d, "out.fifo")).st_mode) else "the FIFO was replaced"


class _FifoReader:
    """A reader already on the FIFO when snapdiff opens it; collects what
    comes until the writer closes."""

    def __init__(self):
        self.got = b""
        self.done = threading.Event()

    def make(self, d):
        _make_fifo(d)
        fd = os.open(os.path.join(d, "out.fifo"), os.O_RDONLY | os.O_NONBLOCK)

        def loop():
            import select
            seen_writer = False
            try:
                for _ in range(20000):  # 20 s at most
                    select.select([fd], [], [], 0.001)
                    try:
                        b = os.read(fd, 65536)
                    except BlockingIOError:
                        seen_writer = True  # a writer is connected, nothing yet
                        continue
                    if b:
                        seen_writer = True
                        self.got += b
                    elif seen_writer or self.got:
                        break  # EOF after a writer came and went
            finally:
                os.close(fd)
                self.done.set()

        threading.Thread(target=loop, daemon=True).start()

    def check(self, d, r):
        self.done.wait(20)
        if not self.got.startswith(b"snapdiff report"):
            return "the reader got %r, not the report" % self.got[:80]
        return _fifo_intact(d, r)


def _make_socket(d):
    import socket
    _copy(d)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(os.path.join(d, "out.sock"))
    _make_socket.keep = s  # open until the probe is judged


def _socket_intact(d, r):
    return None if stat.S_ISSOCK(os.lstat(os.path.join(d, "out.sock")).st_mode) else "the socket was replaced"


# --- symlinks ----------------------------------------------------------------

PLANTED = ["out.txt.tmp", ".out.txt.tmp", "out.txt~", ".snapdiff.tmp", ".snapdiff-XXXXXX.tmp",
           ".snapdiff-000000.tmp"] + [".snapdiff-%d-%d.tmp" % (pid, n) for pid in range(2, 40) for n in range(3)]


def _make_planted(d):
    _copy(d)
    with open(os.path.join(d, "victim"), "wb") as f:
        f.write(OLD)
    for n in PLANTED:
        os.symlink("victim", os.path.join(d, n))


def _planted_intact(d, r):
    if _read(os.path.join(d, "victim")) != OLD:
        return "victim was written through a planted symlink"
    for n in PLANTED:
        p = os.path.join(d, n)
        if not os.path.islink(p) or os.readlink(p) != "victim":
            return "the planted link %s was replaced" % n
    if not _read(os.path.join(d, "out.txt")).startswith(b"snapdiff report"):
        return "out.txt does not hold the report"
    extra = set(_names(d)) - set(PLANTED) - {"victim", "out.txt", "s.pickle"}
    if extra:
        return "left behind: %s" % ", ".join(sorted(extra))
    for n in PLANTED:  # the runner counts *.tmp names as leftovers: these were ours
        os.unlink(os.path.join(d, n))
    return None


def _make_link_target(d):
    _copy(d)
    os.mkdir(os.path.join(d, "real"))
    with open(os.path.join(d, "real", "report.txt"), "wb") as f:
        f.write(OLD)
    os.chmod(os.path.join(d, "real", "report.txt"), 0o640)
    os.symlink("real/report.txt", os.path.join(d, "out.txt"))
    os.symlink("real/new.txt", os.path.join(d, "dangling.txt"))


def _link_followed(name, target):
    def check(d, r):
        if not os.path.islink(os.path.join(d, name)):
            return "the link %s was replaced" % name
        p = os.path.join(d, "real", target)
        if not os.path.isfile(p) or not _read(p).startswith(b"snapdiff report"):
            return "real/%s does not hold the report" % target
        if target == "report.txt" and stat.S_IMODE(os.stat(p).st_mode) != 0o640:
            return "real/report.txt lost its mode: %o" % stat.S_IMODE(os.stat(p).st_mode)
        left = [n for n in os.listdir(os.path.join(d, "real")) if n not in ("report.txt", "new.txt")]
        return "left behind in real/: %s" % left if left else None
    return check


# --- directories in the way ----------------------------------------------------

def _make_dir(name):
    def make(d):
        _copy(d)
        os.mkdir(os.path.join(d, name))
        with open(os.path.join(d, name, "inside"), "wb") as f:
            f.write(OLD)
    return make


def _dir_intact(name):
    def check(d, r):
        p = os.path.join(d, name)
        if not os.path.isdir(p) or os.listdir(p) != ["inside"] or _read(os.path.join(p, "inside")) != OLD:
            return "%s/ changed: %s" % (name, os.listdir(p) if os.path.isdir(p) else "gone")
        if _names(d) != sorted(["s.pickle", name]):
            return "left behind: %s" % _names(d)
        return None
    return check


def _nothing_created(d, r):
    return None if _names(d) == ["s.pickle"] else "left behind: %s" % _names(d)


# --- stdout --------------------------------------------------------------------

def _quiet_sigpipe(d, r):
    return "printed on stderr: %r" % r.err[:200] if r.err else None


def _stdout_ok_file(d, r):
    p = os.path.join(d, "out.txt")
    return None if os.path.isfile(p) and _read(p).startswith(b"snapdiff report") else "out.txt not written"


# --- names in messages -----------------------------------------------------------

def _escaped(*needles):
    def check(d, r):
        if b"\xff" in r.err or b"\x1b" in r.err:
            return "raw bytes in the message: %r" % r.err[:300]
        for n in needles:
            if n.encode() not in r.err:
                return "no %r in %r" % (n, r.err[:300])
        return None
    return check


def _make_no_history(d):
    s = small_snapshot()
    s["device_traces"] = [[]]
    dump(os.path.join(d, "evil\x1b]0;pwned\x07\n::error::x.pickle"), s)


FULL = "No space left on device"
EFBIG = "File too large"


def probes(scale):
    reader = _FifoReader()
    o = "outputs"
    return [
        # Targets that are not regular files.
        Probe("out-dev-null", o, "`report -o /dev/null` as root (used to replace the device by a regular file)",
              _copy, ["report", "s.pickle", "-o", "/dev/null"], exit=0, check=_dev_null_intact),
        Probe("convert-dev-null", o, "`convert -o /dev/null.snap`-style: convert onto a device through a symlink",
              lambda d: (_copy(d), os.symlink("/dev/null", os.path.join(d, "x.snap"))),
              ["convert", "s.pickle", "-o", "x.snap"], exit=0,
              check=_all(_dev_null_intact, lambda d, r: None if os.path.islink(os.path.join(d, "x.snap")) else
                         "the link x.snap was replaced")),
        Probe("out-fifo-no-reader", o, "`-o FIFO` with no reader: an error at once, not a hang", _make_fifo,
              ["report", "s.pickle", "-o", "out.fifo"], exit=2, one_line=True,
              check=_all(_err_is("cannot write out.fifo: no process is reading the named pipe"), _fifo_intact)),
        Probe("out-fifo-reader", o, "`-o FIFO` with a reader: written in place, the FIFO stays", reader.make,
              ["report", "s.pickle", "-o", "out.fifo"], exit=0, check=reader.check, make_here=True),
        Probe("out-socket", o, "`-o SOCKET`: refused, the socket stays", _make_socket,
              ["report", "s.pickle", "-o", "out.sock"], exit=2, one_line=True,
              check=_all(_err_is("cannot write out.sock: it is a socket"), _socket_intact)),
        # Symlinks.
        Probe("out-planted-symlinks", o, "symlinks planted at `out.txt.tmp` and `.snapdiff-*` names, all to a "
              "victim (used to overwrite it)", _make_planted, ["report", "s.pickle", "-o", "out.txt"], exit=0,
              check=_planted_intact),
        Probe("out-symlink-target", o, "`-o LINK` to a file: the file is replaced (its mode kept), the link stays",
              _make_link_target, ["report", "s.pickle", "-o", "out.txt"], exit=0,
              check=_link_followed("out.txt", "report.txt")),
        Probe("out-dangling-symlink", o, "`-o LINK` naming no file: the named file is created, the link stays",
              _make_link_target, ["report", "s.pickle", "-o", "dangling.txt"], exit=0,
              check=_link_followed("dangling.txt", "new.txt")),
        # Directories in the way, missing directories.
        Probe("out-dir", o, "`-o DIR`: an error, nothing left behind (used to leave OUT.tmp)", _make_dir("outdir"),
              ["report", "s.pickle", "-o", "outdir"], exit=2, one_line=True,
              check=_all(_err_is("cannot write outdir: Is a directory"), _dir_intact("outdir"))),
        Probe("out-missing-dir", o, "`-o no/such/dir/x`: an error, nothing created", _copy,
              ["report", "s.pickle", "-o", "no/such/x.txt"], exit=2, one_line=True,
              check=_all(_err_is("cannot write no/such/x.txt: No such file or directory"), _nothing_created)),
        Probe("convert-onto-dir", o, "`convert -o X.snap` where X.snap is a directory (used to leave a temp file)",
              _make_dir("X.snap"), ["convert", "s.pickle", "-o", "X.snap"], exit=2, one_line=True,
              check=_all(_err_is("cannot write X.snap: Is a directory"), _dir_intact("X.snap"))),
        Probe("convert-pickle-gz-onto-dir", o, "`convert -o X.pickle.gz` where it is a directory",
              _make_dir("X.pickle.gz"), ["convert", "s.pickle", "-o", "X.pickle.gz"], exit=2, one_line=True,
              check=_all(_err_is("cannot write X.pickle.gz: Is a directory"), _dir_intact("X.pickle.gz"))),
        # A full disk (RLIMIT_FSIZE) with an old good file in place.
        Probe("full-disk-o", o, "`report -o out.txt` on a full disk, an old out.txt in place", _with_old("out.txt"),
              ["report", "s.pickle", "-o", "out.txt"], exit=2, one_line=True, rlimit_fsize=1024,
              check=_all(_err_is("cannot write out.txt: " + EFBIG), _unchanged("out.txt"))),
        Probe("full-disk-write-budget", o, "`check --write-budget b.json` on a full disk (used to exit 0, say "
              "\"wrote\" and leave b.json empty)", _with_old("b.json"),
              ["check", "--write-budget", "b.json", "s.pickle"], exit=2, one_line=True, rlimit_fsize=100,
              check=_all(_err_is("cannot write b.json: " + EFBIG), _unchanged("b.json"))),
        Probe("full-disk-junit", o, "`check --junit j.xml` on a full disk, an old j.xml in place", _with_old("j.xml"),
              ["check", "--max-peak", "100GiB", "--junit", "j.xml", "s.pickle"], exit=2, one_line=True,
              rlimit_fsize=100, check=_all(_err_is("cannot write j.xml: " + EFBIG), _unchanged("j.xml"))),
        Probe("full-disk-check-o", o, "`check -o v.txt` on a full disk, an old v.txt in place", _with_old("v.txt"),
              ["check", "--max-peak", "100GiB", "-o", "v.txt", "s.pickle"], exit=2, one_line=True, rlimit_fsize=64,
              check=_all(_err_is("cannot write v.txt: " + EFBIG), _unchanged("v.txt"))),
        Probe("full-disk-convert-snap", o, "`convert -o X.snap` on a full disk, an old X.snap in place",
              _with_old("X.snap"), ["convert", "s.pickle", "-o", "X.snap"], exit=2, one_line=True,
              rlimit_fsize=4096, check=_all(_err_is("cannot write X.snap: " + EFBIG), _unchanged("X.snap"))),
        Probe("full-disk-convert-pickle-gz", o, "`convert -o X.pickle.gz` on a full disk, an old one in place",
              _with_old("X.pickle.gz"), ["convert", "s.pickle", "-o", "X.pickle.gz"], exit=2, one_line=True,
              rlimit_fsize=4096, check=_all(_err_is("cannot write X.pickle.gz: " + EFBIG), _unchanged("X.pickle.gz"))),
        Probe("full-disk-diff-o", o, "`diff -o d.md` on a full disk, an old d.md in place", _with_old("d.md"),
              ["diff", "s.pickle", "s.pickle", "-f", "markdown", "-o", "d.md"], exit=2, one_line=True,
              rlimit_fsize=64, check=_all(_err_is("cannot write d.md: " + EFBIG), _unchanged("d.md"))),
        # Standard output.
        Probe("stdout-full-report", o, "`report > /dev/full` (used to exit 0)", _copy, ["report", "s.pickle"],
              exit=2, one_line=True, stdout="full", check=_err_is("cannot write to standard output: " + FULL)),
        Probe("stdout-full-check", o, "`check ... > /dev/full` (used to exit 0)", _copy,
              ["check", "--max-peak", "100GiB", "s.pickle"], exit=2, one_line=True, stdout="full",
              check=_err_is("cannot write to standard output: " + FULL)),
        Probe("stdout-full-write-budget", o, "`check --write-budget - > /dev/full` (used to exit 0)", _copy,
              ["check", "--write-budget", "-", "s.pickle"], exit=2, one_line=True, stdout="full",
              check=_err_is("cannot write to standard output: " + FULL)),
        Probe("stdout-full-said-wrote", o, "`check --write-budget b.json > /dev/full`: the file is written, the "
              "line saying so is not", _copy, ["check", "--write-budget", "b.json", "s.pickle"], exit=2,
              one_line=True, stdout="full",
              check=_all(_err_is("cannot write to standard output: " + FULL),
                         lambda d, r: None if _read(os.path.join(d, "b.json")).startswith(b"{") else "no b.json")),
        Probe("stdout-full-help", o, "`--help > /dev/full` and `report --help > /dev/full`", lambda d: None,
              ["report", "--help"], exit=2, one_line=True, stdout="full",
              check=_err_is("cannot write to standard output: " + FULL)),
        Probe("stdout-full-version", o, "`--version > /dev/full`", lambda d: None, ["--version"], exit=2,
              one_line=True, stdout="full", check=_err_is("cannot write to standard output: " + FULL)),
        Probe("stdout-closed", o, "`report >&-` (used to exit 0)", _copy, ["report", "s.pickle"], exit=2,
              one_line=True, stdout="closed", check=_err_is("cannot write to standard output: Bad file descriptor")),
        Probe("stdout-closed-o", o, "`report -o out.txt >&-`: nothing goes to stdout, so all is well (the file is "
              "not opened as descriptor 1)", _copy, ["report", "s.pickle", "-o", "out.txt"], exit=0,
              stdout="closed", check=_stdout_ok_file),
        Probe("stdout-pipe-close", o, "`report --format json BIG | head -c 65536`: ends by SIGPIPE, nothing on "
              "stderr", lambda d: _copy(d, BIG_OUT), ["report", "--format", "json", "-n", "100000", "s.pickle"], exit=-13,
              stdout="pipe-close", check=_quiet_sigpipe),
        # Counts and bounds on the command line.
        Probe("usage-n-negative", o, "`report -n -1` (used to wrap to 2^64 - 1)", _copy,
              ["report", "-n", "-1", "s.pickle"], exit=2, one_line=True,
              check=_err_is("-n/--top: '-1' is not a count from 0 to 10000000 (see snapdiff --help)")),
        Probe("usage-n-huge", o, "`diff -n 18446744073709551616`", _copy,
              ["diff", "-n", "18446744073709551616", "s.pickle", "s.pickle"], exit=2, one_line=True),
        Probe("usage-chart-n-negative", o, "`chart -n -1` (used to wrap, then 'at most 5000')", _copy,
              ["chart", "s.pickle", "--kind", "lifetime", "-n", "-1", "-o", "c.svg"], exit=2, one_line=True,
              check=_all(_err_is("-n/--top: '-1' is not a count from 0 to 5000 (see snapdiff --help)"),
                         _nothing_created)),
        Probe("usage-chart-device-negative", o, "`chart --device -1` (used to mean: the default device)", _copy,
              ["chart", "s.pickle", "--kind", "flame", "--device", "-1", "-o", "c.svg"], exit=2, one_line=True),
        Probe("usage-max-input-bytes-0", o, "`--max-input-bytes 0` (used to be ignored for plain files)", _copy,
              ["report", "--max-input-bytes", "0", "s.pickle"], exit=2, one_line=True,
              check=_err_is("--max-input-bytes must be at least 1 (a size such as 16GiB) (see snapdiff --help)")),
        Probe("usage-max-input-bytes-negative", o, "`--max-input-bytes -1` (used to wrap to 2^64 - 1)", _copy,
              ["check", "--max-peak", "1GiB", "--max-input-bytes", "-1", "s.pickle"], exit=2, one_line=True),
        # Names in messages: one line, control bytes and invalid UTF-8 visible.
        Probe("msg-name-control-bytes", o, "a missing input named with ESC, BEL, a newline and `::error::`",
              lambda d: None, ["report", "evil\x1b[2J\nFAKE LINE\x07.pickle"], exit=3,
              check=_escaped("evil\\x1b[2J\\nFAKE LINE\\x07.pickle")),
        Probe("msg-name-invalid-utf8", o, "a missing input whose name is not UTF-8 (0xFF) but has a valid é",
              lambda d: None, ["report", os.fsdecode(b"bad\xff\xfe-\xc3\xa9.pickle")], exit=3,
              check=_escaped("bad\\xff\\xfe-\u00e9.pickle")),
        Probe("msg-output-name", o, "`-o` into a missing directory named with a newline: one line",
              _copy, ["report", "s.pickle", "-o", "no\ndir/x\x1b.txt"], exit=2, one_line=True,
              check=_err_is("cannot write no\\ndir/x\\x1b.txt: No such file or directory")),
        Probe("msg-warning-name", o, "`check --write-budget` on a run without history, named with an OSC title "
              "sequence and a newline: the warning is one line", _make_no_history,
              ["check", "--write-budget", "b.json", "evil\x1b]0;pwned\x07\n::error::x.pickle"], exit=1,
              one_line=False,
              check=_all(_escaped("evil\\x1b]0;pwned\\x07\\n::error::x.pickle"),
                         lambda d, r: None if r.err.count(b"\n") == 1 else "the warning is %d lines" %
                         r.err.count(b"\n"))),
    ]
