"""Budget files: --snapdiff-update-budgets writes them, later runs check against them."""
from __future__ import annotations

import json
import subprocess

from conftest import allocated_peak, real

BASE = "small_bf16.pickle"  # the baseline run
LARGER = "small_fp8.pickle"  # the same workload in FP8: a higher allocated peak

MARKED = """
    import pathlib, pytest

    @pytest.mark.gpu_memory(budget="budgets/train_step.json", max_increase="2 %")
    def test_train_step():
        pathlib.Path("body_ran").write_text("yes")
"""


def test_larger_candidate_is_really_larger() -> None:
    base, larger = allocated_peak(BASE), allocated_peak(LARGER)
    assert 1.02 * base < larger < 1.05 * base  # over the 2% below, under 5%


def test_update_budgets_writes_then_checks_against_it(inner) -> None:
    inner.pytester.makepyfile(test_a=MARKED)
    budget = inner.path / "budgets" / "train_step.json"

    inner.use(real(BASE))
    result = inner.run("--snapdiff-update-budgets")
    result.assert_outcomes(passed=1)
    assert "snapdiff: wrote budget budgets/train_step.json" in result.stdout.str()
    written = json.loads(budget.read_text())
    assert written["schema"].startswith("snapdiff/budget/")
    assert written["peak"]["allocated_bytes"] == allocated_peak(BASE)
    assert written["tolerance"]["max_increase"] == "2%"

    result = inner.run()  # the same run against its own budget
    result.assert_outcomes(passed=1)
    assert "wrote budget" not in result.stdout.str()

    inner.use(real(LARGER))
    result = inner.run()
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "FAIL increase.allocated: the allocated peak rose by" in out
    assert "over the allowed +2%" in out
    assert json.loads(budget.read_text()) == written  # a check never rewrites the budget


def test_max_increase_of_the_marker_is_the_tolerance(inner) -> None:
    inner.pytester.makepyfile(test_a=MARKED.replace('"2 %"', '"5%"'))
    inner.use(real(BASE))
    inner.run("--snapdiff-update-budgets").assert_outcomes(passed=1)
    inner.use(real(LARGER))
    inner.run().assert_outcomes(passed=1)


def test_update_budgets_still_checks_absolute_thresholds(inner) -> None:
    inner.pytester.makepyfile(test_a="""
        import pytest

        @pytest.mark.gpu_memory(budget="b.json", max_peak="100 MiB")
        def test_step():
            pass
    """)
    inner.use(real(BASE))
    result = inner.run("--snapdiff-update-budgets")
    result.assert_outcomes(failed=1)
    assert (inner.path / "b.json").is_file()
    result.stdout.fnmatch_lines(["*FAIL max_peak.allocated: *", "*snapdiff: wrote budget b.json*"])


def test_missing_budget_fails_with_the_hint_and_does_not_run(inner) -> None:
    inner.pytester.makepyfile(test_a=MARKED)
    inner.use(real(BASE))
    result = inner.run()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*snapdiff: no budget file budgets/train_step.json: "
        "run pytest --snapdiff --snapdiff-update-budgets to write it*"
    ])
    assert not (inner.path / "body_ran").exists()
    assert inner.memory_calls() == []


def test_budget_warning_passes_with_a_warning(inner, snapdiff_bin) -> None:
    budget = inner.path / "warn.json"
    subprocess.run([str(snapdiff_bin), "check", "--write-budget", str(budget), "--max-increase", "5%",
                    "--warn-increase", "1%", str(real(BASE))], check=True, capture_output=True)
    inner.pytester.makepyfile(test_a="""
        import pytest

        @pytest.mark.gpu_memory(budget="warn.json")
        def test_step():
            pass
    """)
    inner.use(real(LARGER))
    result = inner.run()
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(["*SnapdiffWarning: snapdiff: *"])
