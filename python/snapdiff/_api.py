"""snapdiff.report() and snapdiff.diff(): the executable run on a snapshot (or
two), its JSON report returned as an object, the text and HTML reports made
when first asked for."""
from __future__ import annotations

import html
import os
import pickle
import reprlib
import signal
import subprocess
import tempfile
from collections.abc import Mapping
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from snapdiff._binary import find_executable
from snapdiff._errors import InputError, SnapdiffError, UsageError

#: What report()/diff() take as a run: a path (file or, for report, a folder of
#: ranks), or the dict torch.cuda.memory._snapshot() returns.
Run = Union[str, "os.PathLike[str]", Mapping]

# Options the API sets itself.
_RESERVED = {"format": "--format", "f": "-f", "output": "--output", "o": "-o"}
_DICT_NAME = "the snapshot dict"


def _flags(options: Mapping[str, Any]) -> List[str]:
    """Keyword options as snapdiff's flags: top=10 -> --top=10, n=5 -> -n 5,
    explain="activation" -> --explain=activation, no_tensors=True ->
    --no-tensors (False or None: left out), rules=[a, b] -> --rules=a --rules=b."""
    args: List[str] = []
    for key, value in options.items():
        if key in _RESERVED:
            raise UsageError(f"snapdiff: {key}=: the API sets {_RESERVED[key]} itself "
                             "(str() is the text report, .html the HTML one, .json the JSON one)",
                             exit_code=None)
        if value is None or value is False:
            continue
        if not key or not key.replace("_", "").isalnum():
            raise UsageError(f"snapdiff: {key!r}: not an option name", exit_code=None)
        values = value if isinstance(value, (list, tuple)) else [value]
        for item in values:
            if len(key) == 1:
                args += [f"-{key}"] if item is True else [f"-{key}", _text(item)]
            else:
                flag = "--" + key.replace("_", "-")
                args.append(flag if item is True else f"{flag}={_text(item)}")
    return args


def _text(value: Any) -> str:
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return str(value)


class _Inputs:
    """The runs as paths for one invocation: a snapshot dict is pickled to a
    temporary file, removed on exit."""

    def __init__(self, runs: Sequence[Run]) -> None:
        self.runs = runs
        self.paths: List[str] = []
        self.temporary: Dict[str, int] = {}  # temporary path -> index of the run

    def __enter__(self) -> "_Inputs":
        try:
            for i, run in enumerate(self.runs):
                if isinstance(run, Mapping):
                    self.paths.append(self._pickle(run, i))
                else:
                    path = os.fspath(run)
                    if isinstance(path, bytes):
                        path = os.fsdecode(path)
                    self.paths.append(path)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _pickle(self, snapshot: Mapping, index: int) -> str:
        # A fresh folder, so that the reports name a file the reader recognises.
        folder = tempfile.mkdtemp(prefix="snapdiff-")
        path = os.path.join(folder, "snapshot.pickle" if len(self.runs) == 1 else f"snapshot_{'ab'[index]}.pickle")
        self.temporary[path] = index
        with open(path, "wb") as out:
            try:
                # Protocol 4, what torch.cuda.memory._dump_snapshot writes.
                pickle.dump(dict(snapshot), out, protocol=4)
            except (pickle.PicklingError, TypeError, AttributeError, RecursionError) as e:
                raise TypeError(f"snapdiff: the snapshot dict cannot be pickled: {e}") from None
        return path

    def __exit__(self, *exc: Any) -> None:
        for path in self.temporary:
            for remove, name in ((os.unlink, path), (os.rmdir, os.path.dirname(path))):
                try:
                    remove(name)
                except OSError:
                    pass

    def shown(self, index: int) -> str:
        return _DICT_NAME if isinstance(self.runs[index], Mapping) else self.paths[index]

    def explain(self, message: str) -> Tuple[str, Optional[str]]:
        """snapdiff's message with a temporary file's name replaced, and the
        input it names (a path given by the caller; None for a dict)."""
        for path, index in self.temporary.items():
            message = message.replace(path, _DICT_NAME if len(self.runs) == 1 else f"{_DICT_NAME} ({'ab'[index]})")
        given = [path for path in self.paths if path not in self.temporary]
        for path in given:  # the bad-input line: "snapdiff: error: FILE: ..."
            if message.startswith(f"snapdiff: error: {path}:"):
                return message, path
        mentioned = [path for path in given if path in message]
        return message, (mentioned[0] if len(mentioned) == 1 else None)


def _error_line(stderr: bytes) -> str:
    lines = [line.strip() for line in stderr.decode("utf-8", "replace").splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("snapdiff: error:")]
    return (errors or lines or [""])[-1]


def _run(command: str, runs: Sequence[Run], flags: Sequence[str]) -> bytes:
    """snapdiff COMMAND FLAGS -- PATHS; its stdout, or the error it exited with."""
    __tracebackhide__ = True  # IPython and pytest show the caller's line, not this one
    executable = find_executable()
    with _Inputs(runs) as inputs:
        argv = [executable, command, *flags, "--", *inputs.paths]
        try:
            done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)
        except OSError as e:
            raise SnapdiffError(f"snapdiff: cannot run {executable}: {e.strerror or e}") from None
        if done.returncode == 0:
            return done.stdout
        message, path = inputs.explain(_error_line(done.stderr))
    code = done.returncode
    if code == 3:
        raise InputError(message or "snapdiff: error: an input could not be read", code, path)
    if code == 2:
        raise UsageError(message or "snapdiff: error: usage error", code)
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        raise SnapdiffError(f"snapdiff: {executable} was killed by {name}"
                            + (f" ({message})" if message else ""), code)
    raise SnapdiffError(message or f"snapdiff: {command} exited {code}", code)


def _wrap(value: Any) -> Any:
    if isinstance(value, dict):
        return Fields(value)
    if isinstance(value, list):
        return [_wrap(item) for item in value]
    return value


_short = reprlib.Repr()
_short.maxdict = 8
_short.maxlist = 6
_short.maxlevel = 2
_short.maxstring = 60
_short.maxother = 60


class Fields(Mapping):
    """A JSON object whose fields read as attributes (``r.peak.allocated_bytes``)
    or items (``r["peak"]["allocated_bytes"]``); objects inside are Fields too,
    arrays are lists. ``.json`` is the plain dict. A field named like a
    Mapping method (``keys``, ``items``, ``get``, ``values``) reads as an item."""

    __slots__ = ("_data",)

    def __init__(self, data: Dict[str, Any]) -> None:
        object.__setattr__(self, "_data", data)

    @property
    def json(self) -> Dict[str, Any]:
        """The JSON object as a plain dict (not a copy)."""
        return self._data

    def __getitem__(self, key: str) -> Any:
        return _wrap(self._data[key])

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return _wrap(self._data[name])
        except KeyError:
            known = ", ".join(sorted(self._data)) or "none"
            raise AttributeError(f"no field {name!r} (fields: {known})") from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only")

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __dir__(self) -> List[str]:
        return sorted(set(super().__dir__()) | {k for k in self._data if k.isidentifier()})

    def __repr__(self) -> str:
        return f"{type(self).__name__}({_short.repr(self._data)})"


class _Result(Fields):
    """A report: the JSON one's fields, str() the text one, .html the HTML one."""

    __slots__ = ("_command", "_runs", "_flags", "_text", "_html")

    def __init__(self, command: str, runs: Sequence[Run], flags: List[str]) -> None:
        __tracebackhide__ = True
        raw = _run(command, runs, ["--format", "json", *flags])
        import json

        try:
            data = json.loads(raw.decode("utf-8", "replace"))
        except ValueError as e:
            raise SnapdiffError(f"snapdiff: {command} printed no JSON report ({e})") from None
        if not isinstance(data, dict):
            raise SnapdiffError(f"snapdiff: {command} printed JSON that is not an object")
        super().__init__(data)
        for name, value in (("_command", command), ("_runs", list(runs)), ("_flags", flags),
                            ("_text", None), ("_html", None)):
            object.__setattr__(self, name, value)

    def _format(self, fmt: str) -> str:
        __tracebackhide__ = True
        return _run(self._command, self._runs, ["--format", fmt, *self._flags]).decode("utf-8", "replace")

    @property
    def text(self) -> str:
        """The text report (snapdiff's default output), made on first use."""
        if self._text is None:
            object.__setattr__(self, "_text", self._format("text"))
        return self._text

    @property
    def html(self) -> str:
        """The HTML report, one self-contained page, made on first use."""
        if self._html is None:
            object.__setattr__(self, "_html", self._format("html"))
        return self._html

    def __str__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        """A notebook shows the HTML report inline: in an iframe, so that its
        styles do not restyle the notebook; the text report where the HTML one
        cannot be made (e.g. Graphviz without its layout plugins)."""
        try:
            page = self.html
        except SnapdiffError as e:
            return (f"<p>no HTML report: {html.escape(e.message)}</p>"
                    f"<pre>{html.escape(self.text)}</pre>")
        return ('<iframe title="snapdiff report" style="width:100%;height:720px;border:1px solid #d8dee4;'
                f'resize:vertical" srcdoc="{html.escape(page, quote=True)}"></iframe>')

    def _names(self) -> str:
        return ", ".join(repr(_DICT_NAME if isinstance(r, Mapping) else os.fspath(r)) for r in self._runs)

    def __repr__(self) -> str:
        return f"<snapdiff.{type(self).__name__} of {self._names()}: {self._data.get('schema')}>"


class Report(_Result):
    """snapdiff.report()'s result: the fields of ``snapdiff report --format json``
    (schemas/report.schema.json; a folder of ranks: schemas/ranks.schema.json)."""

    __slots__ = ()


class Diff(_Result):
    """snapdiff.diff()'s result: the fields of ``snapdiff diff --format json``
    (schemas/diff.schema.json)."""

    __slots__ = ()


def _check_run(run: Any, name: str) -> None:
    if not isinstance(run, (str, bytes, os.PathLike, Mapping)):
        raise TypeError(f"snapdiff: {name}: expected a path or a snapshot dict "
                        f"(torch.cuda.memory._snapshot()), not {type(run).__name__}")


def report(run: Run, **options: Any) -> Report:
    """Run ``snapdiff report`` on a snapshot file, a folder of ranks, or the dict
    ``torch.cuda.memory._snapshot()`` returns, and return its report.

    Options are snapdiff report's, by name: ``top=20`` (``--top``), ``depth=0``,
    ``explain="activation"``, ``at="iteration 3"``, ``rules=["a.rules", ...]``,
    ``no_tensors=True``. The result has the JSON report's fields (``r.peak``,
    ``r["categories"]``, ``r.json``), ``str(r)`` is the text report and a
    notebook shows the HTML report.

    Raises InputError (exit 3) for an input snapdiff cannot read, UsageError
    (exit 2) for options it refuses, ExecutableNotFoundError when there is no
    snapdiff executable.
    """
    __tracebackhide__ = True
    _check_run(run, "report")
    return Report("report", [run], _flags(options))


def diff(a: Run, b: Run, **options: Any) -> Diff:
    """Run ``snapdiff diff A B`` (B against the baseline A) and return the diff:
    its JSON fields (``d.delta``, ``d.findings``), ``str(d)`` the text diff, the
    HTML diff in a notebook. Options as for report() (``top=``, ``depth=``,
    ``tensors_a=``, ...); errors as for report()."""
    __tracebackhide__ = True
    _check_run(a, "diff: a")
    _check_run(b, "diff: b")
    return Diff("diff", [a, b], _flags(options))
