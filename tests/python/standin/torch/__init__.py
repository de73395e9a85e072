"""A stand-in for the parts of PyTorch that pytest-snapdiff calls, for CI without a GPU.

It replays snapshots PyTorch really wrote: ``torch.cuda.memory._dump_snapshot(path)``
writes the bytes of the file named by ``STANDIN_TORCH_SNAPSHOT`` (gunzipped when
it ends in ``.gz``). ``STANDIN_TORCH_CUDA=0`` makes ``torch.cuda.is_available()``
False. Every call is appended as one JSON line to ``STANDIN_TORCH_LOG`` when set.
"""
from . import cuda

__version__ = "0.0.0+standin"
__all__ = ["cuda"]
