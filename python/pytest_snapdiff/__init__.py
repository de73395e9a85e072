"""pytest-snapdiff: gate tests on peak GPU memory with snapdiff.

The pytest plugin lives in :mod:`pytest_snapdiff.plugin`. This module holds
the helpers a multi-process test calls in each of its processes; it imports
neither pytest nor torch until they are needed.
"""
from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterator, Optional

from snapdiff import __version__  # one version: the distribution's (CMakeLists.txt's)
__all__ = ["record_rank", "rank_snapshot_path", "RANKS_DIR_ENV", "__version__"]

#: The folder the plugin creates for a multi-process test; each process
#: writes its snapshot there as ``rank{R}.pickle``.
RANKS_DIR_ENV = "SNAPDIFF_RANKS_DIR"
# Set by the plugin from the marker so that record_rank's defaults follow it.
RANKS_MAX_ENTRIES_ENV = "SNAPDIFF_RANKS_MAX_ENTRIES"
RANKS_STACKS_ENV = "SNAPDIFF_RANKS_STACKS"
DEFAULT_MAX_ENTRIES = 1_000_000


def rank_snapshot_path(rank: int) -> Path:
    """Where the process of ``rank`` writes its snapshot: ``$SNAPDIFF_RANKS_DIR/rank{rank}.pickle``."""
    folder = os.environ.get(RANKS_DIR_ENV)
    if not folder:
        raise RuntimeError(
            f"{RANKS_DIR_ENV} is not set: rank snapshots are recorded only inside a test "
            "marked gpu_memory(ranks=True) (or run with --snapdiff-ranks) under pytest --snapdiff"
        )
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
        raise ValueError(f"rank must be an int >= 0, not {rank!r}")
    return Path(folder) / f"rank{rank}.pickle"


@contextlib.contextmanager
def record_rank(
    rank: int, max_entries: Optional[int] = None, stacks: Optional[str] = None
) -> Iterator[Path]:
    """Record this process's CUDA memory history; on exit dump it for ``rank`` and stop.

    Use it in each process of a multi-process test::

        with pytest_snapdiff.record_rank(rank):
            train_step()

    ``max_entries`` and ``stacks`` default to the test's marker (passed on by
    the plugin), else 1000000 and ``"all"``. The snapshot is dumped even when
    the block raises, so an out-of-memory error can be examined.
    """
    path = rank_snapshot_path(rank)  # fail before recording anything
    if max_entries is None:
        max_entries = int(os.environ.get(RANKS_MAX_ENTRIES_ENV) or DEFAULT_MAX_ENTRIES)
    if stacks is None:
        stacks = os.environ.get(RANKS_STACKS_ENV) or "all"
    import torch

    memory = torch.cuda.memory
    memory._record_memory_history(max_entries=max_entries, stacks=stacks, context="all")
    try:
        yield path
    finally:
        try:
            memory._dump_snapshot(str(path))
        finally:
            memory._record_memory_history(enabled=None)
