"""The stand-in's call log: one JSON line per call to $STANDIN_TORCH_LOG."""
from __future__ import annotations

import json
import os
from typing import Any


def log(call: str, **args: Any) -> None:
    path = os.environ.get("STANDIN_TORCH_LOG")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"call": call, "args": args, "pid": os.getpid()}, default=str) + "\n")


def cuda_on() -> bool:
    return os.environ.get("STANDIN_TORCH_CUDA", "1") != "0"
