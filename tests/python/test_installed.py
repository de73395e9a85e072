"""What `pip install .` (or the wheel) installed, as scripts/test.sh checks it in
a fresh virtual environment: run with SNAPDIFF_TEST_INSTALLED=1 by that
environment's Python (skipped otherwise)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import INSTALLED, PACKAGE_DIR, real

pytestmark = pytest.mark.skipif(
    not INSTALLED, reason="checks an installed snapdiff: SNAPDIFF_TEST_INSTALLED=1 (scripts/test.sh)")


def test_the_packages_are_the_installed_ones() -> None:
    import pytest_snapdiff
    import pytest_snapdiff.plugin
    import snapdiff
    import snapdiff.torch

    for module in (snapdiff, snapdiff.torch, pytest_snapdiff, pytest_snapdiff.plugin):
        assert PACKAGE_DIR not in Path(module.__file__).resolve().parents, module.__file__


def test_the_executable_is_in_the_environments_bin(monkeypatch) -> None:
    import snapdiff

    monkeypatch.delenv("SNAPDIFF_BIN", raising=False)
    found = Path(snapdiff.find_executable())
    assert found == Path(sys.executable).parent / "snapdiff"
    done = subprocess.run([str(found), "--version"], stdout=subprocess.PIPE, text=True)
    assert done.stdout.strip() == f"snapdiff {snapdiff.__version__}"
    assert snapdiff.report(real("ans_gpt2_py.pickle.gz")).tool.version == snapdiff.__version__


def test_the_plugin_is_a_pytest11_entry_point() -> None:
    from importlib.metadata import entry_points

    found = entry_points()
    group = found.select(group="pytest11") if hasattr(found, "select") else found.get("pytest11", [])
    assert {ep.name: ep.value for ep in group}.get("snapdiff") == "pytest_snapdiff.plugin"
