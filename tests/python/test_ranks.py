"""Multi-process tests: each process records itself with record_rank, the
plugin checks the folder of rank snapshots."""
from __future__ import annotations

from pathlib import Path

import pytest

import pytest_snapdiff
from conftest import real

RANKS = Path("ranks") / "fsdp_gpt2_uneven"  # rank 0 peaks at 907 MiB, rank 1 at 1.4 GiB


def inner_test(marker: str, children: str = "[0, 1]") -> str:
    snaps = [str(real(str(RANKS / f"snapshot_{r}.pickle.gz"))) for r in (0, 1)]
    return f"""
        import os, subprocess, sys, pytest

        CHILD = "import sys, pytest_snapdiff\\nwith pytest_snapdiff.record_rank(int(sys.argv[1])):\\n    pass\\n"
        SNAPSHOTS = {snaps!r}

        @pytest.mark.{marker}
        def test_two_ranks():
            procs = [
                subprocess.Popen([sys.executable, "-c", CHILD, str(rank)],
                                 env=dict(os.environ, STANDIN_TORCH_SNAPSHOT=SNAPSHOTS[rank]))
                for rank in {children}
            ]
            assert [p.wait() for p in procs] == [0] * len(procs)

        def test_environment_is_restored():
            assert "SNAPDIFF_RANKS_DIR" not in os.environ
    """


def test_two_ranks_fail_on_the_rank_over(inner) -> None:
    inner.pytester.makepyfile(test_a=inner_test("gpu_memory(max_peak='1 GiB', ranks=True)"))
    result = inner.run()
    result.assert_outcomes(failed=1, passed=1)
    out = result.stdout.str()
    assert "snapdiff: rank 1: allocated peak 1.4 GiB > 1.0 GiB" in out
    assert "FAIL rank 1 max_peak.allocated: the allocated peak is 1.4 GiB" in out
    assert "FAIL rank 0" not in out
    folder, report = inner.artifacts(result)
    assert sorted(p.name for p in folder.iterdir()) == ["rank0.pickle", "rank1.pickle"]
    assert report.is_file()

    calls = inner.memory_calls()
    parent_pids = {c["pid"] for c in inner.calls() if c["call"] == "is_available"}
    assert parent_pids and not parent_pids & {c["pid"] for c in calls}  # no in-process recording
    by_pid: dict = {}
    for c in calls:
        by_pid.setdefault(c["pid"], []).append(c)
    assert len(by_pid) == 2
    for seq in by_pid.values():
        assert [c["call"] for c in seq] == ["_record_memory_history", "_dump_snapshot", "_record_memory_history"]
        assert seq[0]["args"]["max_entries"] == 1_000_000 and seq[0]["args"]["stacks"] == "all"
        assert seq[2]["args"]["enabled"] is None
    dumped = sorted(Path(seq[1]["args"]["filename"]).name for seq in by_pid.values())
    assert dumped == ["rank0.pickle", "rank1.pickle"]


def test_ranks_option_and_marker_settings_reach_the_processes(inner) -> None:
    inner.pytester.makepyfile(test_a=inner_test("gpu_memory(max_peak='2 GiB', max_entries=555, stacks='python')"))
    result = inner.run("--snapdiff-ranks", "--snapdiff-keep=all")
    result.assert_outcomes(passed=2)
    folder, report = inner.artifacts(result, "test_a.py::test_two_ranks")
    assert folder.name == "ranks" and len(list(folder.iterdir())) == 2
    starts = [c["args"] for c in inner.memory_calls() if c["args"].get("enabled") == "all"]
    assert [(s["max_entries"], s["stacks"]) for s in starts] == [(555, "python")] * 2


def test_no_rank_snapshot_written_fails(inner) -> None:
    inner.pytester.makepyfile(test_a=inner_test("gpu_memory(max_peak='2 GiB', ranks=True)", children="[]"))
    result = inner.run()
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(["*snapdiff: the test wrote no rank snapshot into .snapdiff/test_a.py_test_two_ranks/ranks*"])


def test_rank_snapshot_path(monkeypatch, tmp_path) -> None:
    monkeypatch.delenv("SNAPDIFF_RANKS_DIR", raising=False)
    with pytest.raises(RuntimeError, match="SNAPDIFF_RANKS_DIR is not set"):
        pytest_snapdiff.rank_snapshot_path(0)
    monkeypatch.setenv("SNAPDIFF_RANKS_DIR", str(tmp_path))
    assert pytest_snapdiff.rank_snapshot_path(3) == tmp_path / "rank3.pickle"
    with pytest.raises(ValueError):
        pytest_snapdiff.rank_snapshot_path(-1)


def test_record_rank_outside_the_plugin_fails_before_recording(monkeypatch) -> None:
    monkeypatch.delenv("SNAPDIFF_RANKS_DIR", raising=False)
    with pytest.raises(RuntimeError, match="SNAPDIFF_RANKS_DIR is not set"):
        with pytest_snapdiff.record_rank(0):
            pass


def test_an_unreadable_rank_shows_the_verdict_and_its_error(inner) -> None:
    # Rank 0 records (its peak is over the threshold); rank 1's file is not a
    # snapshot. snapdiff writes the verdict and the report of rank 0, lists
    # rank 1 with its error and exits 3: the test's message shows both.
    test = inner_test("gpu_memory(max_peak='512 MiB', ranks=True)", children="[0]")
    test = test.replace(
        "            assert [p.wait() for p in procs] == [0] * len(procs)\n",
        "            assert [p.wait() for p in procs] == [0] * len(procs)\n"
        "            with open(os.path.join(os.environ['SNAPDIFF_RANKS_DIR'], 'rank1.pickle'), 'wb') as f:\n"
        "                f.write(b'not a snapshot')\n",
    )
    inner.pytester.makepyfile(test_a=test)
    result = inner.run()
    result.assert_outcomes(failed=1, passed=1)
    out = result.stdout.str()
    assert "snapdiff check failed" not in out, out
    assert "FAIL rank 0 max_peak.allocated" in out, out
    assert "ERROR rank 1: " in out and "rank1.pickle" in out, out
    assert "no HTML report" not in out, out
    folder, report = inner.artifacts(result)
    assert report.name == "report.html" and report.is_file()
