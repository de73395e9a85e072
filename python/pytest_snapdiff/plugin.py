"""pytest plugin: record a CUDA memory snapshot around each test marked
``gpu_memory`` and fail the test when ``snapdiff check`` finds a threshold
over its limit.

Enabled with ``pytest --snapdiff``; without it marked tests run as usual and
nothing is recorded.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Generator, List, Mapping, Optional

import pytest

from pytest_snapdiff import (
    DEFAULT_MAX_ENTRIES,
    RANKS_DIR_ENV,
    RANKS_MAX_ENTRIES_ENV,
    RANKS_STACKS_ENV,
)

MARKER = "gpu_memory"
SKIP_REASON = "snapdiff: CUDA is not available (gpu_memory marker)"
METRICS = ("requested", "allocated", "reserved")
STACKS = ("python", "all")
KEEP = ("failed", "all")
MARKER_ARGS = (
    "max_peak", "metric", "limits", "max_growth", "budget", "max_increase",
    "max_entries", "stacks", "ranks", "allow_truncated",
)
MARKER_HELP = (
    "gpu_memory(max_peak=None, metric='allocated', limits=None, max_growth=None, "
    "budget=None, max_increase=None, max_entries=None, stacks='all', ranks=False, "
    "allow_truncated=False): with --snapdiff, record a CUDA memory snapshot of the "
    "test and fail it when snapdiff check finds a threshold over its limit"
)

_SPEC = pytest.StashKey["Spec"]()
_PROBLEM = pytest.StashKey[str]()


class MarkerError(Exception):
    """A gpu_memory marker that cannot be checked as written."""


class SnapdiffWarning(UserWarning):
    """snapdiff check passed with a warning (e.g. over --warn-increase of a budget)."""


@dataclass
class Spec:
    """A parsed gpu_memory marker."""

    max_peak: Optional[str] = None
    metric: Optional[str] = None
    limits: Dict[str, str] = field(default_factory=dict)
    max_growth: Optional[str] = None
    budget: Optional[Path] = None
    max_increase: Optional[str] = None
    max_entries: int = DEFAULT_MAX_ENTRIES
    stacks: str = "all"
    ranks: bool = False
    allow_truncated: bool = False

    def history_args(self) -> List[str]:
        """How the history is judged. The recording starts with the test, so
        memory earlier tests left allocated (cuBLAS workspaces, caches) makes
        a late start: accepted, its bytes counted in the test's peak. A ring
        buffer that wrapped (max_entries reached) still fails, unless
        allow_truncated."""
        args = ["--max-entries", str(self.max_entries), "--allow-late-start"]
        if self.allow_truncated:
            args.append("--allow-truncated")
        return args

    def check_args(self) -> List[str]:
        """The thresholds as ``snapdiff check`` options."""
        args: List[str] = []
        if self.max_peak is not None:
            args += ["--max-peak", self.max_peak]
        if self.metric is not None:
            args += ["--metric", self.metric]
        for key, size in self.limits.items():
            args += ["--limit", f"{key}={size}"]
        if self.max_growth is not None:
            args += ["--max-growth", self.max_growth]
        if self.budget is not None:
            args += ["--budget", str(self.budget)]
        if self.max_increase is not None:
            args += ["--max-increase", self.max_increase]
        return args + self.history_args()


def _size(name: str, value: Any) -> str:
    """A size as snapdiff reads it: '20 GiB' -> '20GiB', 2% stays, an int is bytes."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return f"{value}B"
    if isinstance(value, str) and value.strip():
        return "".join(value.split())
    raise MarkerError(f"{name}={value!r}: expected a size such as '20 GiB', '512MiB' or '2%'")


def parse_marker(
    mark: pytest.Mark, test_file: Path, default_max_entries: int, force_ranks: bool
) -> Spec:
    """Check a gpu_memory marker and turn it into a Spec (MarkerError when it is wrong)."""
    if mark.args:
        raise MarkerError("gpu_memory takes keyword arguments only, e.g. gpu_memory(max_peak='20 GiB')")
    kwargs = dict(mark.kwargs)
    unknown = sorted(set(kwargs) - set(MARKER_ARGS))
    if unknown:
        raise MarkerError(
            f"gpu_memory: unknown argument(s) {', '.join(unknown)}; known: {', '.join(MARKER_ARGS)}"
        )
    spec = Spec(max_entries=default_max_entries, ranks=force_ranks)
    if kwargs.get("max_peak") is not None:
        spec.max_peak = _size("max_peak", kwargs["max_peak"])
    if kwargs.get("max_growth") is not None:
        spec.max_growth = _size("max_growth", kwargs["max_growth"])
    if kwargs.get("max_increase") is not None:
        spec.max_increase = _size("max_increase", kwargs["max_increase"])
    limits = kwargs.get("limits") or {}
    if not isinstance(limits, Mapping):
        raise MarkerError("gpu_memory: limits must be a dict such as {'activation': '8 GiB'}")
    for key, size in limits.items():
        if not isinstance(key, str) or not key.strip() or "=" in key:
            raise MarkerError(f"gpu_memory: limits key {key!r}: expected CATEGORY or PHASE:CATEGORY")
        spec.limits["".join(key.split())] = _size(f"limits[{key!r}]", size)
    metric = kwargs.get("metric")
    if metric is not None:
        if metric not in METRICS:
            raise MarkerError(f"gpu_memory: metric={metric!r}: expected one of {', '.join(METRICS)}")
        spec.metric = metric
    stacks = kwargs.get("stacks", "all")
    if stacks not in STACKS:
        raise MarkerError(f"gpu_memory: stacks={stacks!r}: expected one of {', '.join(STACKS)}")
    spec.stacks = stacks
    max_entries = kwargs.get("max_entries")
    if max_entries is not None:
        if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 1:
            raise MarkerError(f"gpu_memory: max_entries={max_entries!r}: expected an int >= 1")
        spec.max_entries = max_entries
    spec.ranks = bool(kwargs.get("ranks", False)) or force_ranks
    spec.allow_truncated = bool(kwargs.get("allow_truncated", False))
    budget = kwargs.get("budget")
    if budget is not None:
        if not isinstance(budget, (str, os.PathLike)) or not str(budget):
            raise MarkerError(f"gpu_memory: budget={budget!r}: expected a path")
        spec.budget = (test_file.parent / budget).resolve()
    if spec.max_increase is not None and spec.budget is None:
        raise MarkerError("gpu_memory: max_increase needs a budget file (budget='...')")
    if spec.ranks and spec.budget is not None:
        raise MarkerError("gpu_memory: budget is not supported for multi-process (ranks) tests")
    if not (spec.max_peak or spec.limits or spec.max_growth or spec.budget):
        raise MarkerError(
            "gpu_memory sets no threshold: give max_peak, limits, max_growth or budget, "
            "e.g. @pytest.mark.gpu_memory(max_peak='20 GiB')"
        )
    return spec


def _failed(check: Mapping[str, Any]) -> List[Mapping[str, Any]]:
    return [t for t in check.get("thresholds") or [] if t.get("status") == "fail"]


def failure_message(verdict: Mapping[str, Any]) -> str:
    """The first lines of a failed test's message, from a snapdiff check JSON verdict.

    Reads snapdiff/check/1 (one snapshot) and snapdiff/check_ranks/1 (a folder
    of ranks); the headline is snapdiff's own when it gives one.
    """
    lines: List[str] = []
    messages: List[str] = []
    if verdict.get("schema") == "snapdiff/check_ranks/1":
        for entry in verdict.get("ranks") or []:
            rank = entry.get("rank")
            who = f"rank {rank}" if rank is not None else str(entry.get("name"))
            if entry.get("error"):
                lines.append(f"  ERROR {who}: {entry['error']}")
                messages.append(f"{who}: {entry['error']}")
            for t in _failed(entry.get("check") or {}):
                lines.append(f"  FAIL {who} {t.get('name')}: {t.get('message')}")
                messages.append(f"{who}: {t.get('message')}")
    else:
        for t in _failed(verdict):
            lines.append(f"  FAIL {t.get('name')}: {t.get('message')}")
            messages.append(str(t.get("message")))
    headline = verdict.get("headline") or "; ".join(messages) or f"check {verdict.get('status')}"
    return "\n".join([f"snapdiff: {headline}"] + lines)


def _sanitize(nodeid: str) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", nodeid).strip("._")
    return name[:150] or "test"


class SnapdiffPlugin:
    """The session's state: where snapshots go, what was kept, the benchmark entries."""

    def __init__(self, config: pytest.Config, binary: str) -> None:
        self.config = config
        self.binary = binary
        self.outdir = Path(config.rootpath, _option(config, "snapdiff_dir", ".snapdiff"))
        self.keep = _option(config, "snapdiff_keep", "failed")
        if self.keep not in KEEP:
            raise pytest.UsageError(f"snapdiff: keep={self.keep!r}: expected one of {', '.join(KEEP)}")
        self.update_budgets: bool = config.getoption("snapdiff_update_budgets")
        self.force_ranks: bool = config.getoption("snapdiff_ranks")
        try:
            self.max_entries = int(_option(config, "snapdiff_max_entries", DEFAULT_MAX_ENTRIES))
        except ValueError:
            raise pytest.UsageError("snapdiff: --snapdiff-max-entries: expected an int") from None
        benchmark = config.getoption("snapdiff_benchmark")
        self.benchmark_file = (
            Path(config.invocation_params.dir, benchmark) if benchmark else None
        )
        self.benchmark: List[Any] = []
        self.kept: List[tuple] = []  # (nodeid, [paths])
        self.budgets_written: List[Path] = []
        self._dirs: set = set()

    # -- hooks -------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        for key in (_SPEC, _PROBLEM):  # a rerun of the item starts afresh
            if key in item.stash:
                del item.stash[key]
        mark = item.get_closest_marker(MARKER)
        if mark is None:
            return
        try:
            spec = parse_marker(mark, Path(item.path), self.max_entries, self.force_ranks)
        except MarkerError as e:
            item.stash[_PROBLEM] = f"snapdiff: {e}"  # fails in the call phase, GPU or not
            return
        if not _cuda_available():
            pytest.skip(SKIP_REASON)
        if spec.budget is not None and not self.update_budgets and not spec.budget.is_file():
            item.stash[_PROBLEM] = (
                f"snapdiff: no budget file {self._show(spec.budget)}: "
                "run pytest --snapdiff --snapdiff-update-budgets to write it"
            )
            return
        item.stash[_SPEC] = spec

    # tryfirst: the outermost wrapper, so that failing after the yield
    # leaves every other wrapper's teardown done.
    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, Any, None]:
        problem = item.stash.get(_PROBLEM, None)
        if problem is not None:
            pytest.fail(problem, pytrace=False)  # before the yield: the test body does not run
        spec = item.stash.get(_SPEC, None)
        if spec is None:
            yield
            return
        workdir = self._workdir(item.nodeid)
        dump_error: Optional[str] = None
        if spec.ranks:
            target = workdir / "ranks"
            target.mkdir()
            env = {
                RANKS_DIR_ENV: str(target),
                RANKS_MAX_ENTRIES_ENV: str(spec.max_entries),
                RANKS_STACKS_ENV: spec.stacks,
            }
            saved = {k: os.environ.get(k) for k in env}
            os.environ.update(env)
            try:
                outcome = yield
            finally:
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
        else:
            # snapdiff.torch's recorder: the snapshot and, beside it, the
            # tensor list naming the parameters, gradients and optimizer
            # state of the modules and optimizers alive in the test
            # (snapshot.pickle.tensors.json, which snapdiff check reads).
            from snapdiff.torch import Recorder

            target = workdir / "snapshot.pickle"
            recorder = Recorder(target, stacks=spec.stacks, max_entries=spec.max_entries, discover=True)
            recorder.start()
            try:
                outcome = yield
            finally:
                try:
                    recorder.dump()
                except Exception as e:  # reported below unless the test failed anyway
                    dump_error = f"{type(e).__name__}: {e}"
                finally:
                    recorder.stop()

        if outcome.excinfo is not None:
            if isinstance(outcome.excinfo[1], pytest.skip.Exception):
                shutil.rmtree(workdir, ignore_errors=True)
            else:  # the test's own failure stays its own; keep what was recorded
                shown = self._keep(item, workdir, target)
                item.add_report_section("call", "snapdiff", f"artifacts: {', '.join(shown)}")
            return
        if dump_error is not None:
            failure = f"snapdiff: the snapshot could not be dumped: {dump_error}"
        elif spec.ranks and not any(target.iterdir()):
            failure = (
                f"snapdiff: the test wrote no rank snapshot into {self._show(target)}: call "
                "pytest_snapdiff.record_rank(rank) in each of its processes"
            )
        else:
            failure = self._check(item, spec, workdir, target)
        if failure is None and self.keep == "failed":
            shutil.rmtree(workdir, ignore_errors=True)
            return
        artifacts = self._keep(item, workdir, target)
        if failure is not None:
            pytest.fail(f"{failure}\n  artifacts: {', '.join(artifacts)}", pytrace=False)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.benchmark_file is not None:
            self.benchmark_file.parent.mkdir(parents=True, exist_ok=True)
            self.benchmark_file.write_text(json.dumps(self.benchmark, indent=2) + "\n")
        try:
            self.outdir.rmdir()  # only when nothing was kept
        except OSError:
            pass

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        tr = terminalreporter
        if self.kept:
            tr.write_sep("-", "snapdiff artifacts")
            for nodeid, paths in self.kept:
                tr.write_line(f"{nodeid}: {', '.join(paths)}")
        for budget in self.budgets_written:
            tr.write_line(f"snapdiff: wrote budget {self._show(budget)}")
        if self.benchmark_file is not None:
            tr.write_line(
                f"snapdiff: wrote {len(self.benchmark)} benchmark entries to "
                f"{self._show(self.benchmark_file)}"
            )

    # -- helpers -----------------------------------------------------------

    def _run(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [self.binary, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    def _check(self, item: pytest.Item, spec: Spec, workdir: Path, target: Path) -> Optional[str]:
        """Run snapdiff check (after writing the budget when asked); the failure text or None."""
        if self.update_budgets and spec.budget is not None:
            spec.budget.parent.mkdir(parents=True, exist_ok=True)
            args = ["check", "--write-budget", str(spec.budget)]
            if spec.max_increase is not None:
                args += ["--max-increase", spec.max_increase]
            if spec.metric is not None:
                args += ["--metric", spec.metric]
            done = self._run(*args, *spec.history_args(), str(target))
            if done.returncode != 0:
                return (
                    f"snapdiff: could not write the budget {self._show(spec.budget)} "
                    f"(exit {done.returncode}): {_text(done)}"
                )
            self.budgets_written.append(spec.budget)
        # With a budget just written, this checks the absolute thresholds and
        # the history, and gives the verdict and the benchmark entries.
        verdict_file = workdir / "verdict.json"
        benchmark_file = workdir / "benchmark.json"
        done = self._run(
            "check", *spec.check_args(), "-f", "json", "-o", str(verdict_file),
            "--github-benchmark", str(benchmark_file), "--name", item.nodeid, str(target),
        )
        if benchmark_file.is_file():
            try:
                entries = json.loads(benchmark_file.read_text())
                self.benchmark.extend(entries if isinstance(entries, list) else [entries])
            except ValueError:
                pass
        verdict: Optional[Mapping[str, Any]] = None
        if verdict_file.is_file():
            try:
                verdict = json.loads(verdict_file.read_text())
            except ValueError:
                verdict = None
        if done.returncode in (0, 1) and verdict is not None:
            if done.returncode == 0:
                if verdict.get("status") == "warn":
                    item.warn(SnapdiffWarning(f"snapdiff: {verdict.get('headline') or 'warning'}"))
                return None
            return failure_message(verdict)
        if done.returncode == 3 and verdict is not None and verdict.get("schema") == "snapdiff/check_ranks/1":
            # Some ranks could not be read: snapdiff still wrote the verdict
            # of the others (exit 3 by design, docs/ranks.md); it lists the
            # bad ranks with their errors and any threshold that failed.
            return failure_message(verdict)
        return f"snapdiff check failed (exit {done.returncode}): {_text(done)}"

    def _keep(self, item: pytest.Item, workdir: Path, target: Path) -> List[str]:
        """Keep the snapshot, write the HTML report beside it (the text report
        where the HTML one cannot be drawn, e.g. Graphviz without its layout
        plugins); the paths, as shown."""
        paths = [target] if target.exists() else []
        note = ""
        if paths:
            report = workdir / "report.html"
            done = self._run("report", "--format", "html", "-o", str(report), str(target))
            # A folder of ranks with an unreadable rank: the report of the
            # others is written and lists it, and snapdiff exits 3.
            ranks_written = target.is_dir() and done.returncode == 3
            if (done.returncode == 0 or ranks_written) and report.is_file():
                paths.append(report)
            else:
                text = workdir / "report.txt"
                again = self._run("report", "-o", str(text), str(target))
                if again.returncode == 0 and text.is_file():
                    paths.append(text)
                note = f" (no HTML report: snapdiff report exit {done.returncode}: {_text(done).splitlines()[0]})"
        shown = [self._show(p) for p in paths] or ["none (no snapshot was written)"]
        self.kept.append((item.nodeid, list(shown)))
        if note:
            shown[-1] += note
        return shown

    def _workdir(self, nodeid: str) -> Path:
        name = base = _sanitize(nodeid)
        n = 1
        while name in self._dirs:
            n += 1
            name = f"{base}-{n}"
        self._dirs.add(name)
        workdir = self.outdir / name
        shutil.rmtree(workdir, ignore_errors=True)  # a previous session's files
        workdir.mkdir(parents=True)
        return workdir

    def _show(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.config.invocation_params.dir))
        except ValueError:
            return str(path)


def _text(done: subprocess.CompletedProcess) -> str:
    return (done.stderr or done.stdout or "").strip() or "no output"


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    try:
        return bool(torch.cuda.is_available())
    except Exception:
        return False


def _option(config: pytest.Config, name: str, default: Any) -> Any:
    """A command-line option, else the ini option of the same name, else the default."""
    value = config.getoption(name)
    if value is None or value == "":
        value = config.getini(name) or default
    return value


def find_binary(config: pytest.Config) -> str:
    """--snapdiff-bin (or the ini option), else SNAPDIFF_BIN, else the executable
    beside the Python interpreter (where pip install puts it), on PATH, or in
    the source tree's build/ (UsageError when none)."""
    given = _option(config, "snapdiff_bin", None)
    source = "--snapdiff-bin"
    if not given and os.environ.get("SNAPDIFF_BIN"):
        given, source = os.environ["SNAPDIFF_BIN"], "SNAPDIFF_BIN"
    if given:
        found = shutil.which(str(Path(config.invocation_params.dir, given)))
        if found is None:
            raise pytest.UsageError(f"snapdiff: {source}={given}: not an executable file")
        return found
    from snapdiff._binary import INSTALL_HINT, find_installed

    found = find_installed()
    if found is None:
        raise pytest.UsageError(
            "snapdiff: --snapdiff is on but no snapdiff executable was found (beside the Python "
            f"interpreter, on PATH, or in a source tree's build/): {INSTALL_HINT}; "
            "or pass --snapdiff-bin=PATH"
        )
    return found


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("snapdiff", "peak GPU memory checks with snapdiff")
    group.addoption(
        "--snapdiff", action="store_true", default=False,
        help="record a CUDA memory snapshot of each test marked gpu_memory and check it with snapdiff",
    )
    group.addoption(
        "--snapdiff-bin", metavar="PATH", default=None,
        help="the snapdiff executable (default: $SNAPDIFF_BIN, else the one beside the Python interpreter, on PATH, or in a source tree's build/)",
    )
    group.addoption(
        "--snapdiff-dir", metavar="DIR", default=None,
        help="where snapshots, verdicts and reports go, relative to the rootdir (default .snapdiff/)",
    )
    group.addoption(
        "--snapdiff-keep", choices=KEEP, default=None,
        help="keep the snapshot and an HTML report of failed tests only (default) or of all",
    )
    group.addoption(
        "--snapdiff-update-budgets", action="store_true", default=False,
        help="write each marker's budget file from this run's snapshot",
    )
    group.addoption(
        "--snapdiff-ranks", action="store_true", default=False,
        help="treat every marked test as multi-process (its processes call pytest_snapdiff.record_rank)",
    )
    group.addoption(
        "--snapdiff-max-entries", metavar="N", type=int, default=None,
        help=f"history entries recorded when a marker gives no max_entries (default {DEFAULT_MAX_ENTRIES})",
    )
    group.addoption(
        "--snapdiff-benchmark", metavar="FILE", default=None,
        help="write every checked test's github-action-benchmark entries to FILE (customSmallerIsBetter)",
    )
    parser.addini("snapdiff_bin", "the snapdiff executable", default="")
    parser.addini("snapdiff_dir", "where snapdiff's files go (default .snapdiff/)", default="")
    parser.addini("snapdiff_keep", "failed or all (default failed)", default="")
    parser.addini("snapdiff_max_entries", "default max_entries of the marker", default="")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)
    if config.getoption("snapdiff"):
        config.pluginmanager.register(SnapdiffPlugin(config, find_binary(config)), "snapdiff-session")
