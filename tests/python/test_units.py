"""The plugin's pure parts: the marker's arguments as snapdiff options, and
the failure message from a verdict (also one from a binary without headline)."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_snapdiff.plugin import MarkerError, failure_message, parse_marker


def spec_of(tmp_path: Path, **kwargs):
    mark = SimpleNamespace(name="gpu_memory", args=(), kwargs=kwargs)  # what parse_marker reads of a Mark
    return parse_marker(mark, tmp_path / "test_x.py", 1_000_000, False)


def test_marker_to_check_options(tmp_path) -> None:
    spec = spec_of(
        tmp_path, max_peak="20 GiB", metric="reserved", max_growth=0,
        limits={"activation": "8 GiB", "optimizer: optimizer_temporary": " 1 GiB"},
        budget="budgets/b.json", max_increase="2 %",
    )
    assert spec.check_args() == [
        "--max-peak", "20GiB", "--metric", "reserved",
        "--limit", "activation=8GiB", "--limit", "optimizer:optimizer_temporary=1GiB",
        "--max-growth", "0B", "--budget", str(tmp_path / "budgets" / "b.json"),
        "--max-increase", "2%", "--max-entries", "1000000", "--allow-late-start",
    ]
    assert spec.max_entries == 1_000_000 and spec.stacks == "all" and not spec.ranks


def test_absolute_budget_path_stays(tmp_path) -> None:
    absolute = tmp_path / "elsewhere" / "b.json"
    assert spec_of(tmp_path / "sub", budget=str(absolute)).budget == absolute


def test_boolean_is_not_a_size(tmp_path) -> None:
    with pytest.raises(MarkerError, match="expected a size"):
        spec_of(tmp_path, max_peak=True)


def test_message_without_headline_is_built_from_the_failed_thresholds() -> None:
    verdict = {
        "schema": "snapdiff/check/1",
        "status": "fail",
        "thresholds": [
            {"name": "history", "kind": "history", "status": "pass", "message": "complete"},
            {"name": "max_peak.allocated", "kind": "max_peak", "status": "fail", "message": "over by 1 B"},
            {"name": "limit.activation", "kind": "category_limit", "status": "fail", "message": "over by 2 B"},
        ],
    }
    assert failure_message(verdict).splitlines() == [
        "snapdiff: over by 1 B; over by 2 B",
        "  FAIL max_peak.allocated: over by 1 B",
        "  FAIL limit.activation: over by 2 B",
    ]
    verdict["headline"] = "allocated peak 2 B > 1 B"
    assert failure_message(verdict).splitlines()[0] == "snapdiff: allocated peak 2 B > 1 B"


def test_ranks_message_names_the_failing_ranks() -> None:
    failing = {"thresholds": [{"name": "max_peak.allocated", "status": "fail", "message": "too big"}]}
    verdict = {
        "schema": "snapdiff/check_ranks/1",
        "status": "fail",
        "ranks": [
            {"rank": 0, "status": "pass", "error": None, "check": {"thresholds": []}},
            {"rank": 1, "status": "fail", "error": None, "check": failing},
            {"rank": None, "name": "odd.pickle", "status": "fail", "error": "cannot read", "check": None},
        ],
    }
    assert failure_message(verdict).splitlines() == [
        "snapdiff: rank 1: too big; odd.pickle: cannot read",
        "  FAIL rank 1 max_peak.allocated: too big",
        "  ERROR odd.pickle: cannot read",
    ]
