"""torch.cuda.memory of the stand-in: history recording that replays a real snapshot."""
from __future__ import annotations

import gzip
import os
import sys
from pathlib import Path
from typing import Any

from .._log import cuda_on, log

_recording = False


def _record_memory_history(
    enabled: Any = "all",
    context: Any = "all",
    stacks: str = "all",
    max_entries: int = sys.maxsize,
    device: Any = None,
    clear_history: bool = False,
) -> None:
    global _recording
    log("_record_memory_history", enabled=enabled, context=context, stacks=stacks,
        max_entries=max_entries)
    if enabled is not None and not cuda_on():
        raise RuntimeError("CUDA is not available")
    _recording = enabled is not None


def _dump_snapshot(filename: str = "dump_snapshot.pickle") -> None:
    log("_dump_snapshot", filename=filename)
    if not _recording:
        raise RuntimeError("_dump_snapshot: memory history recording is not enabled")
    source = os.environ.get("STANDIN_TORCH_SNAPSHOT")
    if not source:
        raise RuntimeError("stand-in torch: STANDIN_TORCH_SNAPSHOT names no snapshot to replay")
    data = Path(source).read_bytes()
    if source.endswith(".gz"):
        data = gzip.decompress(data)
    Path(filename).write_bytes(data)
