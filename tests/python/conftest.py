"""Fixtures for pytest-snapdiff's tests: inner pytest sessions (pytester) that
load the plugin with the stand-in torch (standin/torch) replaying real snapshots."""
from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest

pytest_plugins = ["pytester"]

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PACKAGE_DIR = REPO / "python"
STANDIN_DIR = HERE / "standin"
DATA = REPO / "tests" / "data" / "real"

#: SNAPDIFF_TEST_INSTALLED=1 tests what `pip install .` (or the wheel) installed
#: into the running interpreter's environment (scripts/test.sh): python/ is not
#: put on the path, inner sessions load the plugin through its pytest11 entry
#: point, and the plugin and the API find the executable themselves (neither
#: SNAPDIFF_BIN nor --snapdiff-bin). Otherwise the tests import python/ and run
#: $SNAPDIFF_BIN, else build/snapdiff.
INSTALLED = os.environ.get("SNAPDIFF_TEST_INSTALLED") == "1"

if not INSTALLED and str(PACKAGE_DIR) not in sys.path:  # the unit tests import the package itself
    sys.path.insert(0, str(PACKAGE_DIR))


def inner_pythonpath(standin: bool = True) -> str:
    """PYTHONPATH of an inner session: python/ (unless INSTALLED) and the stand-in torch."""
    parts = ([] if INSTALLED else [str(PACKAGE_DIR)]) + ([str(STANDIN_DIR)] if standin else [])
    return os.pathsep.join(parts)


def real(name: str) -> Path:
    """A committed real snapshot (tests/data/real); fails when it is missing."""
    path = DATA / name
    if not path.is_file():
        pytest.fail(f"missing test data {path}")
    return path


def truth(name: str) -> Dict[str, Any]:
    """The truth file beside a real snapshot: what PyTorch itself reported for the run."""
    stem = re.sub(r"\.pickle(\.gz)?$", "", name)
    return json.loads(real(f"{stem}.truth.json").read_text())


def allocated_peak(name: str) -> int:
    return int(truth(name)["memory_stats"]["allocated_bytes.all.peak"])


def reserved_peak(name: str) -> int:
    return int(truth(name)["memory_stats"]["reserved_bytes.all.peak"])


@pytest.fixture(scope="session")
def snapdiff_bin() -> Path:
    if INSTALLED:
        import snapdiff

        return Path(snapdiff.find_executable())
    path = Path(os.environ.get("SNAPDIFF_BIN") or REPO / "build" / "snapdiff").resolve()
    if not os.access(path, os.X_OK):
        pytest.fail(f"no snapdiff executable at {path}: build it, or set SNAPDIFF_BIN")
    return path


class Inner:
    """Runs pytest in a subprocess, in pytester's folder, with the plugin and the stand-in torch."""

    def __init__(self, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, log: Path) -> None:
        self.pytester = pytester
        self.monkeypatch = monkeypatch
        self.log = log
        self.path = pytester.path

    def use(self, snapshot: Path) -> None:
        """The snapshot the stand-in's _dump_snapshot replays."""
        self.monkeypatch.setenv("STANDIN_TORCH_SNAPSHOT", str(snapshot))

    def run(self, *args: str, snapdiff: bool = True) -> pytest.RunResult:
        # Installed, the plugin comes through its entry point (autoload on).
        base = ([] if INSTALLED else ["-p", "pytest_snapdiff.plugin"]) + (["--snapdiff"] if snapdiff else [])
        return self.pytester.runpytest_subprocess(*base, *args)

    def calls(self) -> List[Dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def memory_calls(self) -> List[Dict[str, Any]]:
        return [c for c in self.calls() if c["call"] != "is_available"]

    def artifacts(self, result: pytest.RunResult, nodeid: str = "") -> List[Path]:
        """The paths of the failure message's 'artifacts: A, B' line, or with
        nodeid, of the test's line in the 'snapdiff artifacts' summary."""
        prefix = f"{nodeid}: " if nodeid else "  artifacts: "
        for line in result.outlines:
            if line.startswith(prefix):
                return [self.path / p for p in line[len(prefix):].split(", ")]
        raise AssertionError(f"no {prefix!r} line in the output:\n" + result.stdout.str())


@pytest.fixture
def inner(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, snapdiff_bin: Path) -> Inner:
    log = pytester.path.parent / f"{pytester.path.name}-torch-calls.jsonl"
    monkeypatch.setenv("PYTHONPATH", inner_pythonpath())
    if INSTALLED:  # the plugin finds the executable beside the interpreter
        monkeypatch.delenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", raising=False)
        monkeypatch.delenv("SNAPDIFF_BIN", raising=False)
    else:
        monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
        monkeypatch.setenv("SNAPDIFF_BIN", str(snapdiff_bin))
    monkeypatch.setenv("STANDIN_TORCH_LOG", str(log))
    for name in ("STANDIN_TORCH_CUDA", "STANDIN_TORCH_SNAPSHOT", "SNAPDIFF_RANKS_DIR",
                 "GITHUB_ACTIONS"):
        monkeypatch.delenv(name, raising=False)
    pytester.makeini("[pytest]\n")
    return Inner(pytester, monkeypatch, log)
