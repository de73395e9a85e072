"""torch.cuda of the stand-in."""
from .._log import cuda_on, log
from . import memory


def is_available() -> bool:
    log("is_available")
    return cuda_on()


__all__ = ["is_available", "memory"]
