"""The committed run of the plugin on a real model (docs/provenance/pytest_gpt2/,
made by scripts/record/run_pytest_gpt2.sh on an NVIDIA GPU): what the plugin
reported agrees with PyTorch's own counters from the same tests."""
from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

from conftest import REPO

RUN = REPO / "docs" / "provenance" / "pytest_gpt2"


def truth(step: str, test: str) -> dict:
    return json.loads((RUN / f"truth_{step}" / f"{test}.json").read_text())


def test_benchmark_peaks_are_pytorchs() -> None:
    entries = json.loads((RUN / "step2.bench.json").read_text())
    peaks = {}
    for e in entries:
        m = re.fullmatch(r"test_gpt2_memory\.py::(\w+): (allocated|reserved) peak", e["name"])
        if m:
            peaks[(m.group(1), m.group(2))] = e["value"]
    checked = 0
    for test in ("test_train_step", "test_train_step_tight", "test_forward_no_grad"):
        t = truth("step2", test)
        assert peaks[(test, "allocated")] == t["max_memory_allocated"], test
        assert peaks[(test, "reserved")] == t["max_memory_reserved"], test
        checked += 1
    assert checked == 3


def test_the_budget_is_the_first_runs_peak_and_the_larger_batch_fails_it() -> None:
    budget = json.loads((RUN / "budgets" / "test_train_step.json").read_text())
    first = truth("step1", "test_train_step")
    assert budget["peak"]["allocated_bytes"] == first["max_memory_allocated"]
    assert budget["peak"]["reserved_bytes"] == first["max_memory_reserved"]
    log = (RUN / "step3.log").read_text()
    larger = truth("step3", "test_train_step")["max_memory_allocated"]
    rose = f"{first['max_memory_allocated']:,} B -> {larger:,} B"
    assert "FAILED test_gpt2_memory.py::test_train_step" in log
    assert rose in log, rose


def test_junit_carries_the_failures() -> None:
    root = ET.parse(RUN / "step2.junit.xml").getroot()
    failed = {tc.get("name") for tc in root.iter("testcase") if tc.find("failure") is not None}
    assert failed == {"test_train_step_tight", "test_two_ranks_uneven"}
    for tc in root.iter("testcase"):
        f = tc.find("failure")
        if f is not None:
            assert f.get("message", "").startswith("Failed: snapdiff: "), f.get("message")
