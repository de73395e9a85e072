"""The gpu_memory marker on one process: pass, each kind of failure, the
artifacts, and the test's own outcome, against real PyTorch snapshots."""
from __future__ import annotations

import gzip
import json
import subprocess
from pathlib import Path

from conftest import allocated_peak, real, reserved_peak, truth

GPT2 = "ans_gpt2_py.pickle.gz"
MiB = 1024 * 1024


def test_pass_records_dumps_and_stops_in_order(inner) -> None:
    inner.use(real(GPT2))
    peak = allocated_peak(GPT2)
    inner.pytester.makepyfile(test_a=f"""
        import pytest

        @pytest.mark.gpu_memory(max_peak="{peak + MiB} B")
        def test_step():
            pass
    """)
    result = inner.run()
    result.assert_outcomes(passed=1)
    calls = inner.memory_calls()
    assert [c["call"] for c in calls] == ["_record_memory_history", "_dump_snapshot", "_record_memory_history"]
    start, dump, stop = calls
    assert start["args"]["max_entries"] == 1_000_000
    assert start["args"]["stacks"] == "all"
    assert start["args"]["context"] == "all"
    assert start["args"]["enabled"] == "all"
    # snapdiff.torch's recorder dumps beside the target and renames it whole
    # (with its tensor list, snapshot.pickle.tensors.json).
    assert Path(dump["args"]["filename"]).name == "snapshot.pickle.partial"
    assert stop["args"]["enabled"] is None
    # a pass keeps nothing by default
    assert not Path(dump["args"]["filename"]).exists()
    assert not (inner.path / ".snapdiff").exists()


def test_marker_and_option_set_max_entries_and_stacks(inner) -> None:
    inner.use(real(GPT2))
    inner.pytester.makepyfile(test_a="""
        import pytest

        @pytest.mark.gpu_memory(max_peak="100 GiB", max_entries=1234, stacks="python")
        def test_marker():
            pass

        @pytest.mark.gpu_memory(max_peak="100 GiB")
        def test_option():
            pass
    """)
    inner.run("--snapdiff-max-entries=777").assert_outcomes(passed=2)
    starts = [c["args"] for c in inner.memory_calls() if c["args"].get("enabled") == "all"]
    assert [(s["max_entries"], s["stacks"]) for s in starts] == [(1234, "python"), (777, "all")]


def test_max_peak_below_the_peak_fails_with_headline_and_artifacts(inner) -> None:
    inner.use(real(GPT2))
    peak = allocated_peak(GPT2)
    inner.pytester.makepyfile(test_a=f"""
        import pytest

        @pytest.mark.gpu_memory(max_peak="{peak - 1} B")
        def test_step():
            pass
    """)
    result = inner.run()
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    snapshot, report = inner.artifacts(result)
    assert snapshot.name == "snapshot.pickle" and snapshot.is_file()
    assert report.name == "report.html" and report.is_file()
    assert snapshot.read_bytes() == gzip.decompress(real(GPT2).read_bytes())  # what was dumped
    verdict = json.loads((snapshot.parent / "verdict.json").read_text())
    assert verdict["status"] == "fail"
    first_line = "snapdiff: " + (verdict.get("headline") or "")
    assert first_line in out
    assert "FAIL max_peak.allocated: the allocated peak is" in out
    assert f"({peak:,} B)" in out
    assert "snapdiff artifacts" in out  # the terminal summary section


def test_metric_reserved(inner) -> None:
    inner.use(real(GPT2))
    between = (allocated_peak(GPT2) + reserved_peak(GPT2)) // 2
    inner.pytester.makepyfile(test_a=f"""
        import pytest

        @pytest.mark.gpu_memory(max_peak="{between}B", metric="allocated")
        def test_allocated():
            pass

        @pytest.mark.gpu_memory(max_peak="{between}B", metric="reserved")
        def test_reserved():
            pass
    """)
    result = inner.run()
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*FAIL max_peak.reserved: *"])
    assert "FAILED test_a.py::test_reserved" in result.stdout.str()


def test_category_limit_fails_only_the_category_over(inner) -> None:
    inner.use(real(GPT2))
    inner.pytester.makepyfile(test_a="""
        import pytest

        @pytest.mark.gpu_memory(limits={"activation": "100 MiB", "optimizer:optimizer_temporary": "1 GiB"})
        def test_step():
            pass
    """)
    result = inner.run()
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "FAIL limit.activation: activation reaches 157.1 MiB" in out
    assert "FAIL limit.optimizer" not in out
    verdict = json.loads((inner.artifacts(result)[0].parent / "verdict.json").read_text())
    limits = {t["name"]: t["status"] for t in verdict["thresholds"] if t["kind"] != "history"}
    assert limits["limit.activation"] == "fail"
    assert [s for n, s in limits.items() if "optimizer_temporary" in n] == ["pass"]


def test_max_growth_fails_on_a_leak(inner) -> None:
    inner.use(real("ans_leak_resnet.pickle.gz"))
    inner.pytester.makepyfile(test_a="""
        import pytest

        @pytest.mark.gpu_memory(max_growth="0 B")
        def test_leaky_loop():
            pass
    """)
    result = inner.run()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*FAIL max_growth: memory grows +* per iteration*"])


def test_a_late_start_passes_a_wrapped_history_fails_unless_allowed(inner) -> None:
    # late_gpt2: recording started after the model was built (its truth says
    # late_start), with fewer entries than max_entries. Under the plugin every
    # test's recording starts late in that way (memory earlier tests left
    # allocated), so a late start is accepted; a marker's max_entries at or
    # below the entry count means the ring buffer wrapped, which fails.
    t = truth("late_gpt2.pickle.gz")
    assert t["truncation"] == "late_start"
    entries = t["trace_entries"][0]
    inner.use(real("late_gpt2.pickle.gz"))
    peak = allocated_peak("late_gpt2.pickle.gz")
    inner.pytester.makepyfile(test_a=f"""
        import pytest

        @pytest.mark.gpu_memory(max_peak="{peak * 2}B")
        def test_late_start():
            pass

        @pytest.mark.gpu_memory(max_peak="{peak * 2}B", max_entries={entries})
        def test_wrapped():
            pass

        @pytest.mark.gpu_memory(max_peak="{peak * 2}B", max_entries={entries}, allow_truncated=True)
        def test_wrapped_allowed():
            pass
    """)
    result = inner.run()
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*FAIL history: *ring buffer wrapped*"])
    assert "FAILED test_a.py::test_wrapped" in result.stdout.lines
    calls = [c["args"] for c in inner.calls()
             if c["call"] == "_record_memory_history" and c["args"].get("enabled") is not None]
    assert [c["max_entries"] for c in calls] == [1000000, entries, entries]


def test_the_tests_own_failure_stays_its_own(inner) -> None:
    inner.use(real(GPT2))
    inner.pytester.makepyfile(test_a="""
        import pytest

        @pytest.mark.gpu_memory(max_peak="1 MiB")
        def test_step():
            assert 1 + 1 == 3
    """)
    result = inner.run()
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "assert (1 + 1) == 3" in out
    assert "FAIL max_peak" not in out  # not checked: the test failed by itself
    snapshot, report = inner.artifacts(result, "test_a.py::test_step")
    assert snapshot.is_file() and report.is_file()
    result.stdout.fnmatch_lines(["*Captured snapdiff call*", "artifacts: .snapdiff/test_a.py_test_step/snapshot.pickle, *"])
    assert [c["call"] for c in inner.memory_calls()][-1] == "_record_memory_history"


def test_a_test_that_stops_recording_fails_on_the_dump(inner) -> None:
    inner.use(real(GPT2))
    inner.pytester.makepyfile(test_a="""
        import pytest, torch

        @pytest.mark.gpu_memory(max_peak="100 GiB")
        def test_step():
            torch.cuda.memory._record_memory_history(enabled=None)
    """)
    result = inner.run()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*snapdiff: the snapshot could not be dumped: RuntimeError: *"])


def test_keep_all_keeps_a_passing_tests_artifacts(inner) -> None:
    inner.use(real(GPT2))
    inner.pytester.makepyfile(test_a="""
        import pytest

        @pytest.mark.gpu_memory(max_peak="100 GiB")
        def test_step():
            pass
    """)
    result = inner.run("--snapdiff-keep=all", "--snapdiff-dir=mem")
    result.assert_outcomes(passed=1)
    snapshot, report = inner.artifacts(result, "test_a.py::test_step")
    assert snapshot == inner.path / "mem" / "test_a.py_test_step" / "snapshot.pickle"
    assert snapshot.is_file() and report.is_file()
    assert "<html" in report.read_text()[:2000].lower()
    assert "snapdiff artifacts" in result.stdout.str()

    result = inner.run()  # default: keep failed only
    result.assert_outcomes(passed=1)
    assert "snapdiff artifacts" not in result.stdout.str()
    assert not (inner.path / ".snapdiff").exists()


def test_unreadable_snapshot_fails_with_snapdiffs_error(inner, tmp_path, snapdiff_bin) -> None:
    corrupt = tmp_path / "corrupt.pickle"
    corrupt.write_bytes(real("small_bf16.pickle").read_bytes()[:5000])
    direct = subprocess.run([str(snapdiff_bin), "check", "--max-peak", "1GiB", str(corrupt)],
                            capture_output=True, text=True)
    assert direct.returncode == 3
    error = direct.stderr.strip().splitlines()[-1].split(".pickle: ", 1)[1]  # after the path
    inner.use(corrupt)
    inner.pytester.makepyfile(test_a="""
        import pytest

        @pytest.mark.gpu_memory(max_peak="1 GiB")
        def test_step():
            pass
    """)
    result = inner.run()
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "snapdiff check failed (exit 3):" in out
    assert error in out


def test_junitxml_carries_the_snapdiff_failure(inner) -> None:
    inner.use(real(GPT2))
    inner.pytester.makepyfile(test_a="""
        import pytest

        @pytest.mark.gpu_memory(max_peak="100 MiB")
        def test_step():
            pass
    """)
    inner.run("--junitxml=junit.xml").assert_outcomes(failed=1)
    import xml.etree.ElementTree as ET

    failures = ET.parse(inner.path / "junit.xml").getroot().findall(".//testcase/failure")
    assert len(failures) == 1
    text = (failures[0].get("message") or "") + (failures[0].text or "")
    assert "snapdiff: allocated peak 411.3 MiB > 100.0 MiB" in text
    assert "FAIL max_peak.allocated" in text
    assert "artifacts: " in text


def test_benchmark_file_holds_every_checked_test(inner) -> None:
    inner.use(real(GPT2))
    inner.pytester.makepyfile(test_a="""
        import pytest

        @pytest.mark.gpu_memory(max_peak="100 GiB")
        def test_pass():
            pass

        @pytest.mark.gpu_memory(max_peak="100 MiB")
        def test_fail():
            pass

        def test_unmarked():
            pass
    """)
    result = inner.run("--snapdiff-benchmark=out/bench.json")
    result.assert_outcomes(passed=2, failed=1)
    entries = json.loads((inner.path / "out" / "bench.json").read_text())
    assert isinstance(entries, list) and entries
    for e in entries:
        assert isinstance(e["name"], str) and e["unit"] == "bytes" and isinstance(e["value"], int)
    peaks = {e["name"]: e["value"] for e in entries if e["name"].endswith("allocated peak")}
    assert peaks == {
        "test_a.py::test_pass: allocated peak": allocated_peak(GPT2),
        "test_a.py::test_fail: allocated peak": allocated_peak(GPT2),
    }
    assert f"snapdiff: wrote {len(entries)} benchmark entries to out/bench.json" in result.stdout.str()


def test_truth_is_what_the_marker_numbers_assume() -> None:
    # The message texts above quote GPT-2's peak; they hold for this recording only.
    assert allocated_peak(GPT2) == 431_254_528
    assert truth(GPT2)["config"]["model"].startswith("transformers GPT2LMHeadModel")


def test_a_test_that_skips_itself_keeps_nothing(inner) -> None:
    inner.use(real(GPT2))
    inner.pytester.makepyfile(test_a="""
        import pytest

        @pytest.mark.gpu_memory(max_peak="1 MiB")
        def test_step():
            pytest.skip("not today")
    """)
    result = inner.run("--snapdiff-keep=all")
    result.assert_outcomes(skipped=1)
    assert "snapdiff artifacts" not in result.stdout.str()
    assert not (inner.path / ".snapdiff").exists()
    assert [c["call"] for c in inner.memory_calls()] == [
        "_record_memory_history", "_dump_snapshot", "_record_memory_history"]


def test_marker_on_a_class_applies_to_its_tests(inner) -> None:
    inner.use(real(GPT2))
    inner.pytester.makepyfile(test_a="""
        import pytest

        @pytest.mark.gpu_memory(max_peak="100 MiB")
        class TestModel:
            def test_one(self):
                pass

            @pytest.mark.gpu_memory(max_peak="1 GiB")  # the closest marker wins
            def test_two(self):
                pass
    """)
    result = inner.run()
    result.assert_outcomes(failed=1, passed=1)
    assert "FAILED test_a.py::TestModel::test_one" in result.stdout.str()
