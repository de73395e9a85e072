"""snapdiff's Python side: record a PyTorch run so that snapdiff can name
every byte of it.

:mod:`snapdiff.torch` records the CUDA memory history (PyTorch's
``_record_memory_history``/``_dump_snapshot``) and writes beside the snapshot
a tensor list, ``PATH.tensors.json``: every parameter, buffer, gradient and
optimizer-state storage with its qualified name, noted at the start, around
each optimizer step and at the dump. snapdiff reads it when present
(docs/tensors.md). Importing this package imports neither torch nor pytest.
"""
from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["__version__"]
