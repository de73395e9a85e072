"""Session-level behaviour: enabling, skipping without CUDA, finding the
binary, marker usage errors, ini options."""
from __future__ import annotations

import os

import pytest

from conftest import inner_pythonpath, real

BODY_WRITES = """
    import pathlib, pytest

    @pytest.mark.gpu_memory(max_peak="100 MiB")
    def test_step():
        pathlib.Path("body_ran").write_text("yes")
"""


def test_without_snapdiff_nothing_is_recorded(inner) -> None:
    inner.use(real("ans_gpt2_py.pickle.gz"))
    inner.pytester.makepyfile(test_a=BODY_WRITES)
    result = inner.run("--strict-markers", snapdiff=False)
    result.assert_outcomes(passed=1)  # over max_peak, but not checked
    assert (inner.path / "body_ran").exists()
    assert inner.calls() == []  # torch was not even asked about CUDA
    assert not (inner.path / ".snapdiff").exists()


@pytest.mark.parametrize("how", ["cuda_off", "no_torch"])
def test_skipped_without_cuda_and_body_not_run(inner, monkeypatch, how) -> None:
    if how == "cuda_off":
        monkeypatch.setenv("STANDIN_TORCH_CUDA", "0")
    else:
        monkeypatch.setenv("PYTHONPATH", inner_pythonpath(standin=False))  # import torch fails
    inner.use(real("ans_gpt2_py.pickle.gz"))
    inner.pytester.makepyfile(test_a=BODY_WRITES + """
    def test_unmarked():
        pass
    """)
    result = inner.run("-rs")
    result.assert_outcomes(skipped=1, passed=1)
    result.stdout.fnmatch_lines(["SKIPPED *snapdiff: CUDA is not available (gpu_memory marker)"])
    assert not (inner.path / "body_ran").exists()
    assert inner.memory_calls() == []


def test_marker_is_registered(inner) -> None:
    result = inner.run("--markers", snapdiff=False)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["@pytest.mark.gpu_memory(max_peak=*"])


def test_no_binary_is_a_usage_error_saying_how_to_install(inner, monkeypatch) -> None:
    monkeypatch.delenv("SNAPDIFF_BIN", raising=False)
    monkeypatch.setenv("PATH", os.path.dirname(os.__file__))  # no snapdiff there
    # Nor beside the interpreter (a venv's bin/ has one) nor in a source tree.
    nowhere = inner.path / "nowhere"
    inner.pytester.makeconftest(f"""
        import sys
        from pathlib import Path
        import snapdiff._binary

        snapdiff._binary.SOURCE_ROOT = Path({str(nowhere)!r})
        sys.executable = {str(nowhere / "bin" / "python")!r}
    """)
    inner.pytester.makepyfile(test_a=BODY_WRITES)
    result = inner.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*snapdiff: --snapdiff is on but no snapdiff executable was found*"
                                 "install it with `pip install .` in a clone of snapdiff*"])
    assert not (inner.path / "body_ran").exists()


def test_bad_binary_option_is_a_usage_error(inner) -> None:
    inner.pytester.makepyfile(test_a=BODY_WRITES)
    result = inner.run("--snapdiff-bin=no/such/snapdiff")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*snapdiff: --snapdiff-bin=no/such/snapdiff: not an executable file*"])


def test_binary_option_beats_the_environment(inner, monkeypatch, snapdiff_bin) -> None:
    monkeypatch.setenv("SNAPDIFF_BIN", "/no/such/snapdiff")
    inner.use(real("ans_gpt2_py.pickle.gz"))
    inner.pytester.makepyfile(test_a=BODY_WRITES)
    result = inner.run(f"--snapdiff-bin={snapdiff_bin}")  # '=': pytest finds its rootdir before
    result.assert_outcomes(failed=1)                      # it knows plugin options
    result.stdout.fnmatch_lines(["*FAIL max_peak.allocated*"])
    assert (inner.path / ".snapdiff" / "test_a.py_test_step" / "snapshot.pickle").is_file()


def test_ini_options(inner, snapdiff_bin, monkeypatch) -> None:
    monkeypatch.delenv("SNAPDIFF_BIN", raising=False)
    inner.pytester.makeini(f"""
        [pytest]
        snapdiff_bin = {snapdiff_bin}
        snapdiff_dir = out/mem
        snapdiff_keep = all
        snapdiff_max_entries = 4321
    """)
    inner.use(real("ans_gpt2_py.pickle.gz"))
    inner.pytester.makepyfile(test_a="""
        import pytest

        @pytest.mark.gpu_memory(max_peak="100 GiB")
        def test_step():
            pass
    """)
    inner.run().assert_outcomes(passed=1)
    assert (inner.path / "out" / "mem" / "test_a.py_test_step" / "snapshot.pickle").is_file()
    assert inner.memory_calls()[0]["args"]["max_entries"] == 4321


@pytest.mark.parametrize(
    "marker, message",
    [
        ("gpu_memory()", "gpu_memory sets no threshold: give max_peak, limits, max_growth or budget"),
        ("gpu_memory(max_peek='1 GiB')", "gpu_memory: unknown argument(s) max_peek"),
        ("gpu_memory('1 GiB')", "gpu_memory takes keyword arguments only"),
        ("gpu_memory(max_peak='1 GiB', metric='peak')", "gpu_memory: metric='peak': expected one of"),
        ("gpu_memory(max_peak='1 GiB', stacks='cpp')", "gpu_memory: stacks='cpp': expected one of"),
        ("gpu_memory(max_peak=[1])", "max_peak=[1]: expected a size"),
        ("gpu_memory(max_peak='1 GiB', max_increase='2%')", "gpu_memory: max_increase needs a budget file"),
        ("gpu_memory(budget='b.json', ranks=True)", "gpu_memory: budget is not supported for multi-process"),
        ("gpu_memory(limits=['activation'])", "gpu_memory: limits must be a dict"),
    ],
)
def test_marker_usage_errors_fail_without_running_the_body(inner, monkeypatch, marker, message) -> None:
    monkeypatch.setenv("STANDIN_TORCH_CUDA", "0")  # caught even where the test would be skipped
    inner.pytester.makepyfile(test_a=f"""
        import pathlib, pytest

        @pytest.mark.{marker}
        def test_step():
            pathlib.Path("body_ran").write_text("yes")
    """)
    result = inner.run()
    result.assert_outcomes(failed=1)
    assert "snapdiff: " + message in result.stdout.str()
    assert not (inner.path / "body_ran").exists()


def test_snapdiff_usage_error_fails_the_test(inner) -> None:
    # a size the marker passes on but snapdiff refuses: exit 2, its message
    inner.use(real("ans_gpt2_py.pickle.gz"))
    inner.pytester.makepyfile(test_a="""
        import pytest

        @pytest.mark.gpu_memory(max_peak="lots")
        def test_step():
            pass
    """)
    result = inner.run()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*snapdiff check failed (exit 2): *lots*"])
