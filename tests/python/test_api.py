"""snapdiff.report() and snapdiff.diff() as a notebook or a script calls them,
on the real PyTorch recordings of tests/data/real: the fields against what
PyTorch itself counted (the .truth.json beside each), the text and HTML
reports, a snapshot dict, and the errors a user meets."""
from __future__ import annotations

import gzip
import html
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest

import snapdiff
from conftest import INSTALLED, STANDIN_DIR, allocated_peak, inner_pythonpath, real, reserved_peak

RUNS = ["ans_gpt2_py.pickle.gz", "cat_fp8_mlp.pickle.gz", "ddp_gpt2.pickle.gz"]


@pytest.fixture(autouse=True)
def the_tested_executable(monkeypatch, snapdiff_bin) -> None:
    """The API runs the executable the other tests run (installed: it finds it itself)."""
    if not INSTALLED:
        monkeypatch.setenv("SNAPDIFF_BIN", str(snapdiff_bin))


def cli(snapdiff_bin: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(snapdiff_bin), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)


@pytest.mark.parametrize("name", RUNS)
def test_report_fields_are_pytorchs_own_peaks(name) -> None:
    r = snapdiff.report(real(name))
    assert r.peak.allocated_bytes == allocated_peak(name)  # attribute access
    assert r["peak"]["reserved_bytes"] == reserved_peak(name)  # item access
    assert r.json["peak"]["allocated_bytes"] == allocated_peak(name)  # the plain dict
    assert type(r.json) is dict and r.schema == "snapdiff/report/1"
    assert r.input.name == str(real(name))
    assert isinstance(r.phases, list) and r.phases[0].phase  # objects in arrays read the same way
    with pytest.raises(AttributeError, match="no field 'no_such_field'"):
        r.no_such_field


def test_str_is_the_text_report_as_the_command_prints_it(snapdiff_bin) -> None:
    path = real("ans_gpt2_py.pickle.gz")
    r = snapdiff.report(path)
    text = str(r)
    assert text == cli(snapdiff_bin, "report", str(path)).stdout
    assert text.startswith(f"snapdiff report: {path}\n") and "\nPEAK " in text
    if "--width" in cli(snapdiff_bin, "report", "--help").stdout:  # text wrapped to the width
        assert max(len(line) for line in text.splitlines()) <= 80


def test_reports_are_made_once_and_only_when_asked_for(monkeypatch) -> None:
    runs = []
    real_run = subprocess.run

    def counting(argv, *args, **kwargs):
        runs.append(argv[argv.index("--format") + 1])
        return real_run(argv, *args, **kwargs)

    monkeypatch.setattr(subprocess, "run", counting)
    r = snapdiff.report(real("ans_gpt2_py.pickle.gz"))
    assert runs == ["json"]
    assert str(r) == str(r) and runs == ["json", "text"]
    page = r._repr_html_()
    assert r._repr_html_() == page and runs == ["json", "text", "html"]


def test_a_notebook_shows_the_html_report_inline() -> None:
    r = snapdiff.report(real("ans_gpt2_py.pickle.gz"))
    assert r.html.startswith("<!DOCTYPE html>") and "</html>" in r.html
    shown = r._repr_html_()
    # In an iframe, so that the report's styles do not restyle the notebook.
    found = re.fullmatch(r'<iframe [^>]*srcdoc="([^"]*)"></iframe>', shown)
    assert found, shown[:200]
    assert html.unescape(found.group(1)) == r.html


def test_options_are_the_commands_flags() -> None:
    path = real("ans_gpt2_py.pickle.gz")
    r = snapdiff.report(path, depth=5, explain="activation", no_tensors=True, rules=None)
    assert r.site_depth == 5
    assert r.explain.query == "activation" and r.explain["items"]  # "items" is a Mapping method
    assert all(item.category == "activation" for item in r.explain["items"])
    from snapdiff._api import _flags

    assert _flags({"top": 10, "n": 5, "explain": "activation", "no_tensors": True, "at": None,
                   "window": "-2s..", "rules": ["a.rules", Path("b.rules")], "allow_x": False}) == [
        "--top=10", "-n", "5", "--explain=activation", "--no-tensors", "--window=-2s..",
        "--rules=a.rules", "--rules=b.rules"]


@pytest.mark.parametrize("options, message", [
    ({"top": -1}, "snapdiff: error: "),
    ({"no_such_option": 1}, "unrecognised option '--no-such-option=1'"),
])
def test_options_snapdiff_refuses_are_a_usage_error(options, message) -> None:
    with pytest.raises(snapdiff.UsageError) as e:
        snapdiff.report(real("ans_gpt2_py.pickle.gz"), **options)
    assert isinstance(e.value, ValueError)
    assert e.value.exit_code == 2 and message in e.value.message
    assert "\n" not in e.value.message


def test_format_and_output_are_the_apis() -> None:
    with pytest.raises(snapdiff.UsageError, match="the API sets --format itself"):
        snapdiff.report(real("ans_gpt2_py.pickle.gz"), format="html")


def test_diff_of_two_real_recordings() -> None:
    a, b = "cat_autocast_cpp.pickle.gz", "cat_fp8_mlp.pickle.gz"
    d = snapdiff.diff(real(a), real(b), top=5)
    assert d.schema == "snapdiff/diff/1"
    assert d.a.peak.allocated_bytes == allocated_peak(a)
    assert d.b.peak.allocated_bytes == allocated_peak(b)
    assert d.delta.peak.allocated_bytes == allocated_peak(b) - allocated_peak(a)
    assert d.findings[0].kind == "peak" and "+27.5%" in d.findings[0].message
    text = str(d)
    assert text.startswith("snapdiff diff\n") and f"B: {real(b)}" in text
    assert d.html.startswith("<!DOCTYPE html>")


def _snapshot_dict(name: str) -> dict:
    with gzip.open(real(name), "rb") as f:
        return pickle.load(f)


def test_a_snapshot_dict_is_read_like_its_file(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))  # where the pickle is written
    name = "ans_gpt2_py.pickle.gz"
    snapshot = _snapshot_dict(name)  # what torch.cuda.memory._snapshot() returns
    r = snapdiff.report(snapshot)
    assert r.peak.allocated_bytes == allocated_peak(name)
    assert r.peak.json == snapdiff.report(real(name)).peak.json
    assert r.categories.json == snapdiff.report(real(name)).categories.json
    assert "PEAK " in str(r) and r.html.startswith("<!DOCTYPE html>")
    assert repr(r) == "<snapdiff.Report of 'the snapshot dict': snapdiff/report/1>"
    d = snapdiff.diff(real("ans_gpt2_cpp.pickle.gz"), snapshot)
    assert d.delta.peak.allocated_bytes == allocated_peak(name) - allocated_peak("ans_gpt2_cpp.pickle.gz")
    assert list(tmp_path.iterdir()) == []  # every temporary file removed


def test_a_dict_that_is_no_snapshot_is_an_input_error(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    with pytest.raises(snapdiff.InputError) as e:
        snapdiff.report({"segments": "not a list"})
    assert e.value.exit_code == 3 and e.value.path is None
    assert e.value.message.startswith("snapdiff: error: the snapshot dict: ")
    assert str(tmp_path) not in e.value.message
    assert list(tmp_path.iterdir()) == []


def test_a_corrupt_file_is_an_input_error_with_snapdiffs_line(tmp_path, snapdiff_bin) -> None:
    corrupt = tmp_path / "run.pickle"
    corrupt.write_bytes(b"\x80\x04" + b"\xff" * 64)  # a pickle's start, then garbage
    with pytest.raises(snapdiff.InputError) as e:
        snapdiff.report(corrupt)
    direct = cli(snapdiff_bin, "report", str(corrupt))
    assert direct.returncode == 3
    assert e.value.message == direct.stderr.strip()  # snapdiff's one line, as it is
    assert str(e.value) == e.value.message and e.value.message.startswith(f"snapdiff: error: {corrupt}: ")
    assert e.value.exit_code == 3 and e.value.path == str(corrupt)
    assert not isinstance(e.value, subprocess.CalledProcessError)


def test_a_truncated_real_recording_is_an_input_error(tmp_path) -> None:
    cut = tmp_path / "cut.pickle.gz"
    data = real("ans_gpt2_py.pickle.gz").read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(snapdiff.InputError) as e:
        snapdiff.diff(real("ans_gpt2_py.pickle.gz"), cut)
    assert e.value.exit_code == 3 and e.value.path == str(cut)  # which of the two


def test_a_missing_file_is_an_input_error(tmp_path) -> None:
    missing = tmp_path / "no_such_run.pickle"
    with pytest.raises(snapdiff.InputError) as e:
        snapdiff.report(missing)
    assert e.value.message == f"snapdiff: error: {missing}: cannot open: No such file or directory"
    assert e.value.exit_code == 3 and e.value.path == str(missing)


def test_an_unreadable_rules_file_is_named_not_the_snapshot(tmp_path) -> None:
    rules = tmp_path / "missing.rules"
    with pytest.raises(snapdiff.InputError) as e:
        snapdiff.report(real("ans_gpt2_py.pickle.gz"), rules=rules)
    assert e.value.message.startswith(f"snapdiff: error: {rules}: cannot open the rules file")
    assert e.value.path is None  # .path is an input snapdiff.report() was given, when it is the one


def test_not_a_path_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="expected a path or a snapshot dict"):
        snapdiff.report(42)


def _fake(path: Path, says: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho {says}\n")
    path.chmod(0o755)
    return path


def test_the_executable_is_found_where_pip_puts_it(tmp_path, monkeypatch) -> None:
    """SNAPDIFF_BIN, else beside the interpreter (a venv's bin/), else PATH,
    else the source tree's build/."""
    import snapdiff._binary as where

    venv = _fake(tmp_path / "venv" / "bin" / "snapdiff", "venv")
    on_path = _fake(tmp_path / "path" / "snapdiff", "path")
    source = _fake(tmp_path / "src" / "build" / "snapdiff", "source")
    (tmp_path / "src" / "CMakeLists.txt").write_text("project(snapdiff VERSION 9.9.9)\n")
    (tmp_path / "src" / "python" / "snapdiff").mkdir(parents=True)
    given = _fake(tmp_path / "given" / "snapdiff", "given")
    monkeypatch.setattr(sys, "executable", str(tmp_path / "venv" / "bin" / "python"))
    monkeypatch.setenv("PATH", str(on_path.parent))
    monkeypatch.setattr(where, "SOURCE_ROOT", tmp_path / "src")
    monkeypatch.setenv("SNAPDIFF_BIN", str(given))
    assert snapdiff.find_executable() == str(given)
    monkeypatch.delenv("SNAPDIFF_BIN")
    for expected in (venv, on_path, source):
        assert snapdiff.find_executable() == str(expected)
        expected.unlink()
    with pytest.raises(snapdiff.ExecutableNotFoundError) as e:
        snapdiff.report(real("ans_gpt2_py.pickle.gz"))
    assert isinstance(e.value, FileNotFoundError)
    assert "install it with `pip install .` in a clone of snapdiff" in str(e.value)


def test_snapdiff_bin_that_is_no_executable_is_named(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("SNAPDIFF_BIN", str(tmp_path / "nothing"))
    with pytest.raises(snapdiff.ExecutableNotFoundError, match=r"SNAPDIFF_BIN=.*nothing: not an executable file"):
        snapdiff.report(real("ans_gpt2_py.pickle.gz"))


def test_importing_snapdiff_imports_no_torch() -> None:
    # The stand-in torch is importable here, so an import would be seen.
    env = dict(os.environ, PYTHONPATH=inner_pythonpath())
    assert str(STANDIN_DIR) in env["PYTHONPATH"]
    probe = subprocess.run(
        [sys.executable, "-c", "import sys, snapdiff; print('torch' in sys.modules)"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert (probe.returncode, probe.stdout.strip()) == (0, "False"), probe.stderr


def test_the_version_is_the_executables(snapdiff_bin) -> None:
    assert cli(snapdiff_bin, "--version").stdout.strip() == f"snapdiff {snapdiff.__version__}"
