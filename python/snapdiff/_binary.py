"""Where the snapdiff executable is, for the API and the pytest plugin."""
from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path
from typing import Iterator, Optional, Tuple

from snapdiff._errors import ExecutableNotFoundError

ENV = "SNAPDIFF_BIN"
#: The repository root when the package runs from a source tree (python/snapdiff/ in it).
SOURCE_ROOT = Path(__file__).resolve().parents[2]
INSTALL_HINT = (
    "install it with `pip install .` in a clone of snapdiff (it builds the executable into the "
    "environment's bin/; the build tools: scripts/install-deps.sh), or build it "
    "(bash scripts/build.sh) and set SNAPDIFF_BIN=path/to/snapdiff"
)


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _in_source_tree() -> bool:
    return (SOURCE_ROOT / "CMakeLists.txt").is_file() and (SOURCE_ROOT / "python" / "snapdiff").is_dir()


def installed_candidates() -> Iterator[Tuple[Path, str]]:
    """Where an executable is looked for when SNAPDIFF_BIN is not set, in order:
    beside the Python interpreter (a virtual environment's bin/, where
    ``pip install .`` puts it), then PATH, then, when this package runs from
    a source tree, that tree's build/snapdiff and build-py/snapdiff."""
    if sys.executable:
        yield Path(sys.executable).parent / "snapdiff", "beside the Python interpreter"
    on_path = shutil.which("snapdiff")
    if on_path:
        yield Path(on_path), "on PATH"
    if _in_source_tree():
        for folder in ("build", "build-py"):
            yield SOURCE_ROOT / folder / "snapdiff", "in the source tree"


def find_installed() -> Optional[str]:
    """The first executable of installed_candidates(), or None."""
    for path, _ in installed_candidates():
        if _executable(path):
            return str(path)
    return None


def find_executable() -> str:
    """The snapdiff executable: $SNAPDIFF_BIN when set, else find_installed().

    Raises ExecutableNotFoundError, saying how to install one, when there is none."""
    given = os.environ.get(ENV)
    if given:
        found = shutil.which(given)
        if found is None:
            raise ExecutableNotFoundError(f"snapdiff: {ENV}={given}: not an executable file")
        return found
    found = find_installed()
    if found is None:
        raise ExecutableNotFoundError(
            "snapdiff: no snapdiff executable found (beside the Python interpreter, on PATH, or in "
            f"a source tree's build/): {INSTALL_HINT}"
        )
    return found


def package_version() -> str:
    """The installed distribution's version, else (a source tree) CMakeLists.txt's."""
    try:
        from importlib.metadata import PackageNotFoundError, version
    except ImportError:  # Python < 3.8
        pass
    else:
        if not _in_source_tree():
            try:
                return version("snapdiff")
            except PackageNotFoundError:
                pass
    try:
        text = (SOURCE_ROOT / "CMakeLists.txt").read_text(encoding="utf-8")
    except OSError:
        return "0+unknown"
    found = re.search(r"project\(\s*snapdiff\s+VERSION\s+([0-9][0-9.]*)", text)
    return found.group(1) if found else "0+unknown"
