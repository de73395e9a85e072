"""snapdiff from Python: reports and diffs of PyTorch CUDA memory snapshots,
and a recorder that names every byte of a run.

:func:`report` and :func:`diff` run the ``snapdiff`` executable (installed
beside the interpreter by ``pip install .``) and return its JSON report as an
object: the fields as attributes or items, ``str()`` the text report, and in
a notebook the HTML report::

    import snapdiff
    r = snapdiff.report("run.pickle", top=5)      # or the dict of torch.cuda.memory._snapshot()
    r.peak.allocated_bytes
    print(r)                                      # the text report
    r                                             # a notebook cell: the HTML report
    snapdiff.diff("before.pickle", "after.pickle")

A file snapdiff cannot read raises :class:`InputError` (``.message``,
``.exit_code`` 3, ``.path``).

:mod:`snapdiff.torch` records the CUDA memory history (PyTorch's
``_record_memory_history``/``_dump_snapshot``) and writes beside the snapshot
a tensor list, ``PATH.tensors.json``: every parameter, buffer, gradient and
optimizer-state storage with its qualified name, noted at the start, around
each optimizer step and at the dump. snapdiff reads it when present
(docs/tensors.md). Importing this package imports neither torch nor pytest.
"""
from __future__ import annotations

from snapdiff._api import Diff, Fields, Report, diff, report
from snapdiff._binary import find_executable, package_version
from snapdiff._errors import ExecutableNotFoundError, InputError, SnapdiffError, UsageError

__version__ = package_version()

for _public in (Diff, Fields, Report, ExecutableNotFoundError, InputError, SnapdiffError, UsageError):
    _public.__module__ = __name__  # shown as snapdiff.InputError, not snapdiff._errors.InputError
del _public
__all__ = [
    "report", "diff", "Report", "Diff", "Fields", "find_executable",
    "SnapdiffError", "InputError", "UsageError", "ExecutableNotFoundError", "__version__",
]
