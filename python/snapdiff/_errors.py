"""The exceptions of snapdiff's Python API: one per way snapdiff fails."""
from __future__ import annotations

from typing import Optional


class SnapdiffError(Exception):
    """snapdiff failed. ``message`` is its error line (``snapdiff: error: ...``),
    ``exit_code`` its exit status (None when it did not run), ``path`` the
    input concerned when one is (None otherwise, and for a snapshot dict)."""

    def __init__(self, message: str, exit_code: Optional[int] = None, path: Optional[str] = None) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code
        self.path = path

    def __str__(self) -> str:
        return self.message


class InputError(SnapdiffError):
    """An input snapdiff cannot read (exit 3): missing, unreadable, truncated,
    corrupt, or not a snapshot. ``message`` is snapdiff's one line naming the
    file and what is wrong, e.g. ``snapdiff: error: run.pickle: offset 0:
    unrecognised input ...``."""


class UsageError(SnapdiffError, ValueError):
    """snapdiff refused the options (exit 2): an unknown option, a value out
    of range. Also a ValueError."""


class ExecutableNotFoundError(SnapdiffError, FileNotFoundError):
    """No snapdiff executable was found (or SNAPDIFF_BIN names none); the
    message says how to install one. Also a FileNotFoundError."""
