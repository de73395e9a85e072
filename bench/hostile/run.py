#!/usr/bin/env python3
"""Hostile-input probes: builds each crafted input, runs snapdiff on it and
checks the contract (docs/reliability.md, "Hostile probes").

Every probe module beside this file (probes_*.py) defines
    def probes(scale: str) -> list[Probe]
where scale is "test" (sizes CI runs: each probe must finish in well under a
second when snapdiff is linear, and would run for minutes when it is not) or
"full" (the sizes of the original reports, for measuring).

Usage:
  python3 bench/hostile/run.py --bin build/snapdiff [--scale test|full]
      [--only REGEX] [--no-rss] [--timeout S] [--markdown FILE] [-v]
Exit status 0 when every probe keeps its contract, 1 otherwise.
"""
import argparse
import dataclasses
import importlib.util
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Callable, Optional, Union

HERE = os.path.dirname(os.path.abspath(__file__))
MiB = 1 << 20


@dataclasses.dataclass
class Probe:
    """One crafted case.

    name     short identifier (unique across modules)
    area     outputs | bounds | time | names | misc
    what     one sentence: the input and what used to go wrong
    make     make(dir) -> None: writes the probe's files into `dir` (the
             working directory of the run); may make FIFOs, symlinks, ...
    args     snapdiff's arguments (run with cwd = dir)
    exit     the expected exit status (int, or a tuple of accepted ones;
             -N means killed by signal N)
    stdin    None (/dev/null), bytes, "yes" (an endless "y\\n" stream),
             or "closed" (stdin closed)
    stdout   None (captured), "full" (/dev/full), "closed", or "pipe-close"
             (a pipe whose reader closes after the first read)
    one_line the exit-3 contract: exactly one stderr line, starting with
             "snapdiff: error: " (default: True when exit is 3)
    max_rss  bound on the child's peak RSS in bytes (usually the
             --max-memory given), or None
    check    check(dir, result) -> None or a string saying what is wrong;
             result has .rc, .out (bytes), .err (bytes), .wall, .rss
    env      extra environment variables
    rlimit_fsize  set RLIMIT_FSIZE in the child (simulates a full disk;
             SIGXFSZ is ignored there so writes fail with EFBIG)
    make_here  run make() in the runner's process, not in a child (for a
             make() that starts a thread the run talks to; keep it small)
    program  which executable runs: "snapdiff" (--bin), "snapcapture"
             (--snapcapture; the probe is skipped, and said so, when that was
             not built: it needs the CUDA toolkit) or "python" (this
             interpreter; args start with the script or "-m"). The one-line
             check expects "<program>: error: " (snapdiff, snapcapture).
    """
    name: str
    area: str
    what: str
    make: Callable[[str], None]
    args: list
    exit: Union[int, tuple] = 3
    stdin: Optional[Union[bytes, str]] = None
    stdout: Optional[str] = None
    one_line: Optional[bool] = None
    max_rss: Optional[int] = None
    check: Optional[Callable] = None
    env: Optional[dict] = None
    rlimit_fsize: Optional[int] = None
    make_here: bool = False  # build the input in the runner itself (it starts a thread the run needs)
    program: str = "snapdiff"


@dataclasses.dataclass
class Result:
    rc: int
    out: bytes
    err: bytes
    wall: float
    rss: int  # bytes
    timed_out: bool = False


def load_modules():
    sys.modules.setdefault("run", sys.modules[__name__])  # probe modules import Probe from here
    sys.path.insert(0, HERE)
    mods = []
    for fn in sorted(os.listdir(HERE)):
        if fn.startswith("probes_") and fn.endswith(".py"):
            spec = importlib.util.spec_from_file_location(fn[:-3], os.path.join(HERE, fn))
            m = importlib.util.module_from_spec(spec)
            sys.modules[fn[:-3]] = m
            spec.loader.exec_module(m)
            mods.append(m)
    return mods


def _feed_yes(fd):
    chunk = b"y\n" * 32768
    try:
        while True:
            os.write(fd, chunk)
    except OSError:
        pass
    finally:
        try:
            os.close(fd)
        except OSError:
            pass


def run_probe(binary, p: Probe, workdir, timeout):
    env = dict(os.environ)
    env.update(p.env or {})
    # stdin
    stdin_fd = None
    feeder = None
    close_fds = []
    if p.stdin is None:
        stdin_fd = os.open(os.devnull, os.O_RDONLY)
        close_fds.append(stdin_fd)
    elif p.stdin == "closed":
        stdin_fd = None
    elif p.stdin == "yes":
        r, w = os.pipe()
        stdin_fd = r
        close_fds.append(r)
        feeder = threading.Thread(target=_feed_yes, args=(w,), daemon=True)
    else:
        path = os.path.join(workdir, ".probe-stdin")
        with open(path, "wb") as f:
            f.write(p.stdin)
        stdin_fd = os.open(path, os.O_RDONLY)
        close_fds.append(stdin_fd)
    # stdout
    out_r = None
    out_w = None
    pipe_close = False
    if p.stdout is None:
        out_r, out_w = os.pipe()
    elif p.stdout == "full":
        out_w = os.open("/dev/full", os.O_WRONLY)
    elif p.stdout == "closed":
        out_w = None
    elif p.stdout == "pipe-close":
        out_r, out_w = os.pipe()
        pipe_close = True
    err_r, err_w = os.pipe()

    def child_setup():
        # The conventional surroundings of a shell: SIGPIPE at its default.
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        if p.rlimit_fsize is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (p.rlimit_fsize, p.rlimit_fsize))
        os.dup2(err_w, 2)
        if stdin_fd is not None:
            os.dup2(stdin_fd, 0)
        else:
            os.close(0)
        if out_w is not None:
            os.dup2(out_w, 1)
        else:
            os.close(1)

    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        try:
            os.chdir(workdir)
            child_setup()
            os.execve(binary, [binary] + list(p.args), env)
        except BaseException as e:
            os.write(2, ("probe runner: exec failed: %s\n" % e).encode())
        os._exit(127)
    for fd in close_fds:
        os.close(fd)
    if out_w is not None:
        os.close(out_w)
    os.close(err_w)
    if feeder:
        feeder.start()

    out_chunks, err_chunks = [], []

    def drain(fd, sink, close_after_first):
        try:
            while True:
                b = os.read(fd, 65536)
                if not b:
                    break
                sink.append(b)
                if close_after_first:
                    break
        finally:
            os.close(fd)

    threads = []
    if out_r is not None:
        threads.append(threading.Thread(target=drain, args=(out_r, out_chunks, pipe_close), daemon=True))
    threads.append(threading.Thread(target=drain, args=(err_r, err_chunks, False), daemon=True))
    for t in threads:
        t.start()
    timed_out = False
    deadline = start + timeout
    while True:
        wpid, status, ru = os.wait4(pid, os.WNOHANG)
        if wpid == pid:
            break
        if time.monotonic() > deadline:
            timed_out = True
            os.kill(pid, signal.SIGKILL)
            wpid, status, ru = os.wait4(pid, 0)
            break
        time.sleep(0.005)
    wall = time.monotonic() - start
    for t in threads:
        t.join(5)
    rc = os.waitstatus_to_exitcode(status)
    return Result(rc=rc, out=b"".join(out_chunks), err=b"".join(err_chunks), wall=wall,
                  rss=ru.ru_maxrss * 1024, timed_out=timed_out)


def judge(p: Probe, r: Result, workdir, check_rss):
    problems = []
    if r.timed_out:
        problems.append("did not finish within the time limit (killed)")
    expected = p.exit if isinstance(p.exit, tuple) else (p.exit,)
    if r.rc not in expected and not r.timed_out:
        problems.append("exit %d, expected %s" % (r.rc, " or ".join(map(str, expected))))
    one_line = p.one_line if p.one_line is not None else (3 in expected and len(expected) == 1)
    if one_line and not r.timed_out:
        lines = r.err.split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        prefix = ("%s: error: " % p.program).encode()
        if len(lines) != 1 or not lines[0].startswith(prefix):
            problems.append("stderr is not one %r line: %r" % (prefix.decode().strip(), r.err[:300]))
        elif any(c < 0x20 or c == 0x7f for c in lines[0]):
            problems.append("the error line holds control bytes: %r" % lines[0][:300])
        if 3 in expected and r.out:
            problems.append("printed %d bytes on stdout before failing" % len(r.out))
    if check_rss and p.max_rss is not None and r.rss > p.max_rss:
        problems.append("peak RSS %.1f MiB above the bound %.1f MiB" % (r.rss / MiB, p.max_rss / MiB))
    if p.check is not None and not r.timed_out:
        msg = p.check(workdir, r)
        if msg:
            problems.append(msg)
    leftovers = [f for f in os.listdir(workdir) if ".snapdiff-" in f or f.endswith(".tmp")]
    if leftovers:
        problems.append("temporary files left behind: %s" % ", ".join(sorted(leftovers)))
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--snapcapture", default=None,
                    help="snapcapture executable (default: capture/snapcapture beside --bin, when built)")
    ap.add_argument("--scale", default="test", choices=["test", "full"])
    ap.add_argument("--only", default=None, help="regex on probe names")
    ap.add_argument("--no-rss", action="store_true", help="do not check RSS bounds (sanitizers)")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds before a probe counts as hung")
    ap.add_argument("--markdown", default=None, help="write the results as a Markdown table")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()
    binary = os.path.abspath(a.bin)
    capture = os.path.abspath(a.snapcapture) if a.snapcapture else \
        os.path.join(os.path.dirname(binary), "capture", "snapcapture")
    os.environ["SNAPDIFF_PROBE_BIN"] = binary  # for make()s that build inputs with snapdiff itself (summaries)
    programs = {"snapdiff": binary, "python": sys.executable,
                "snapcapture": capture if os.access(capture, os.X_OK) else None}
    probes = []
    for m in load_modules():
        probes.extend(m.probes(a.scale))
    names = [p.name for p in probes]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        print("duplicate probe names: %s" % ", ".join(sorted(dup)))
        return 1
    if a.only:
        probes = [p for p in probes if re.search(a.only, p.name)]
    failed = 0
    skipped = 0
    rows = []
    root = tempfile.mkdtemp(prefix="snapdiff-hostile-")
    try:
        for p in probes:
            if programs.get(p.program) is None:
                print("SKIP %-34s %s was not built" % (p.name, p.program))
                skipped += 1
                continue
            d = os.path.join(root, p.name)
            os.mkdir(d)
            # Inputs are built in a child process: Linux carries a process's
            # peak RSS across fork and exec, so the runner must stay small.
            pid = 0 if p.make_here else os.fork()
            if p.make_here:
                p.make(d)
            elif pid == 0:
                code = 0
                try:
                    p.make(d)
                except BaseException as e:
                    sys.stderr.write("probe %s: make failed: %r\n" % (p.name, e))
                    code = 1
                os._exit(code)
            st = 0 if p.make_here else os.waitpid(pid, 0)[1]
            if os.waitstatus_to_exitcode(st) != 0:
                print("FAIL %-34s could not build its input" % p.name)
                failed += 1
                shutil.rmtree(d, ignore_errors=True)
                continue
            r = run_probe(programs[p.program], p, d, a.timeout)
            problems = judge(p, r, d, not a.no_rss)
            status = "ok" if not problems else "FAIL"
            failed += bool(problems)
            first_err = r.err.decode("utf-8", "backslashreplace").strip().split("\n")[0][:160]
            rows.append((p, r, status, first_err))
            print("%-4s %-34s exit %-4d %6.2f s %7.1f MiB  %s" % (status, p.name, r.rc, r.wall, r.rss / MiB,
                                                               "; ".join(problems) if problems else first_err[:90]))
            if a.verbose and problems:
                sys.stdout.write(r.err.decode("utf-8", "backslashreplace")[:2000])
            shutil.rmtree(d, ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write("| probe | area | input | exit | wall | peak RSS | result |\n|---|---|---|---|---|---|---|\n")
            for p, r, status, first in rows:
                f.write("| `%s` | %s | %s | %d | %.2f s | %.0f MiB | %s |\n" % (
                    p.name, p.area, p.what.replace("|", "\\|"), r.rc, r.wall, r.rss / MiB,
                    status if status != "ok" else ("`" + first.replace("|", "\\|").replace("`", "'")[:100] + "`" if first else "ok")))
    print("%d probes, %d failed%s" % (len(rows), failed, ", %d skipped" % skipped if skipped else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
