"""Record a PyTorch run for snapdiff: the CUDA memory snapshot and, beside
it, the run's own names for its tensors.

    import snapdiff.torch

    with snapdiff.torch.record("run.pickle", model=model, optimizer=opt):
        for batch in loader:
            train_step(batch)

writes ``run.pickle`` (PyTorch's snapshot, ``_dump_snapshot``) and
``run.pickle.tensors.json``: every parameter, buffer, gradient and
optimizer-state storage on a CUDA device (address, bytes, dtype, shape,
``requires_grad``, its qualified name such as ``model.layers.3.mlp.fc1.weight``
or ``optimizer.state[model.layers.3.mlp.fc1.weight].exp_avg``), noted when
recording starts, before and after each optimizer step (the first
``max_step_notes`` steps) and at the dump. ``snapdiff report run.pickle``
reads the list when it is there: parameters, gradients and optimizer state
then come from the run itself, and frozen weights are parameters.

Where the model is built inside the ``with`` block, call ``rec.watch(model,
optimizer)`` once it exists; without any model the recorder finds the
modules and optimizers alive in the process (``discover=True``). Steps of
any ``torch.optim`` optimizer are seen through PyTorch's global step hooks;
an optimizer written by hand (not a ``torch.optim.Optimizer``) is noted at
the start, at the dump and at each ``rec.note()``.

The format is ``snapdiff-tensors`` version 1 (docs/tensors.md,
schema/tensors.schema.json). Both files are written whole or not at all.
"""
from __future__ import annotations

import gc
import json
import os
import time
import weakref
from typing import Any, Dict, Iterable, List, Optional, Tuple

FORMAT = "snapdiff-tensors"
VERSION = 1
DEFAULT_MAX_ENTRIES = 1_000_000
DEFAULT_MAX_STEP_NOTES = 256

__all__ = ["Recorder", "record", "sidecar_path", "FORMAT", "VERSION"]


def sidecar_path(snapshot_path: "os.PathLike[str] | str") -> str:
    """Where the tensor list of a snapshot goes: ``PATH.tensors.json``."""
    return os.fspath(snapshot_path) + ".tensors.json"


def _now_us() -> int:
    # The clock of the snapshot's trace entries (time_us: Unix-epoch
    # microseconds), so that snapdiff ties a note to the allocation live then.
    return time.time_ns() // 1000


def _local(t):
    # DTensor (FSDP2, tensor parallel): the rank's own shard.
    to_local = getattr(t, "to_local", None)
    return to_local() if callable(to_local) else t


def _optimizer_of(obj):
    # Wrappers that hold a torch optimizer: Lightning's LightningOptimizer,
    # accelerate's AcceleratedOptimizer.
    import torch
    optimizer = getattr(getattr(torch, "optim", None), "Optimizer", ())
    for _ in range(4):
        if isinstance(obj, optimizer):
            break
        inner = getattr(obj, "_optimizer", None) or getattr(obj, "optimizer", None)
        if inner is None or inner is obj:
            break
        obj = inner
    return obj


class Recorder:
    """Records the memory history and notes the run's named tensors.

    ``start()`` begins (``_record_memory_history``), ``dump()`` writes the
    snapshot and its tensor list and stops; as a context manager the two
    wrap the block (the dump also happens when the block raises, e.g. on an
    out-of-memory error, and the exception goes on).
    """

    def __init__(self, path, model=None, optimizer=None, *, stacks: str = "all",
                 max_entries: int = DEFAULT_MAX_ENTRIES, discover: bool = True,
                 max_step_notes: int = DEFAULT_MAX_STEP_NOTES):
        if stacks not in ("python", "all"):
            raise ValueError(f"stacks must be 'python' or 'all', not {stacks!r}")
        self.path = os.fspath(path)
        self.stacks = stacks
        self.max_entries = int(max_entries)
        self.discover = bool(discover)
        self.max_step_notes = int(max_step_notes)
        self._models: List[Tuple[str, Any]] = []      # (prefix, weakref to module)
        self._optimizers: List[Any] = []              # weakrefs, in the order first seen
        self._tensors: List[Dict[str, Any]] = []
        self._index: Dict[Tuple[str, str], int] = {}
        self._moments: List[Dict[str, Any]] = []
        self._hooks: List[Any] = []
        self._steps = 0
        self._started = False
        if model is not None or optimizer is not None:
            self.watch(model, optimizer)

    # -- what is watched ---------------------------------------------------

    def watch(self, model=None, optimizer=None, prefix: Optional[str] = None) -> "Recorder":
        """Name the tensors of ``model`` (a module, or a dict of name -> module)
        and ``optimizer`` (one or a list) from now on."""
        if model is not None:
            models = model.items() if isinstance(model, dict) else [(prefix, model)]
            for name, m in models:
                if name is None:
                    name = "model" if not self._models else f"model{len(self._models)}"
                self._models.append((name, weakref.ref(m)))
        if optimizer is not None:
            for o in optimizer if isinstance(optimizer, (list, tuple)) else [optimizer]:
                self._add_optimizer(_optimizer_of(o))
        return self

    def _add_optimizer(self, opt) -> None:
        for r in self._optimizers:
            if r() is opt:
                return
        self._optimizers.append(weakref.ref(opt))

    def _live_models(self) -> List[Tuple[str, Any]]:
        out = [(n, r()) for n, r in self._models]
        out = [(n, m) for n, m in out if m is not None]
        if out or not self.discover:
            return out
        return self._discovered_models()

    @staticmethod
    def _discovered_models() -> List[Tuple[str, Any]]:
        import torch
        module = getattr(getattr(torch, "nn", None), "Module", None)
        if module is None:
            return []
        mods = [o for o in gc.get_objects() if isinstance(o, module)]
        children = set()
        for m in mods:
            for c in m.children():
                children.add(id(c))
        roots, names = [], {}
        for m in mods:
            if id(m) in children:
                continue
            if not any(t.is_cuda for t in list(m.parameters()) + list(m.buffers())):
                continue
            base = type(m).__name__
            names[base] = names.get(base, 0) + 1
            roots.append((base if names[base] == 1 else f"{base}{names[base] - 1}", m))
        return roots

    def _live_optimizers(self) -> List[Any]:
        out = [r() for r in self._optimizers]
        out = [o for o in out if o is not None]
        if out or not self.discover:
            return out
        import torch
        optimizer = getattr(getattr(torch, "optim", None), "Optimizer", None)
        if optimizer is None:
            return []
        return [o for o in gc.get_objects() if isinstance(o, optimizer)]

    # -- notes -------------------------------------------------------------

    def _row(self, rows, name: str, kind: str, t, requires_grad: Optional[bool] = None) -> None:
        import torch
        if t is None or not torch.is_tensor(t):
            return
        t = _local(t)
        if not t.is_cuda:
            return
        st = t.untyped_storage()
        nbytes = st.nbytes()
        if nbytes == 0:
            return
        key = (name, kind)
        i = self._index.get(key)
        if i is None:
            i = len(self._tensors)
            self._index[key] = i
            self._tensors.append({
                "name": name,
                "kind": kind,
                "dtype": str(t.dtype).replace("torch.", ""),
                "shape": list(t.shape),
                "requires_grad": bool(t.requires_grad if requires_grad is None else requires_grad),
                "device": t.device.index if t.device.index is not None else 0,
            })
        rows.append([i, st.data_ptr(), nbytes])

    def note(self, what: str = "note") -> None:
        """Note where every watched tensor is now (a moment of the list)."""
        rows: List[List[int]] = []
        t_us = _now_us()
        names: Dict[int, str] = {}
        for prefix, m in self._live_models():
            for n, p in m.named_parameters(remove_duplicate=False):
                qn = f"{prefix}.{n}"
                names.setdefault(id(p), qn)
                self._row(rows, qn, "parameter", p)
                self._row(rows, qn + ".grad", "gradient", p.grad, requires_grad=False)
            for n, b in m.named_buffers(remove_duplicate=False):
                self._row(rows, f"{prefix}.{n}", "buffer", b, requires_grad=False)
        opts = self._live_optimizers()
        for k, opt in enumerate(opts):
            oname = "optimizer" if len(opts) == 1 else f"optimizer{k}"
            groups = getattr(opt, "param_groups", None)
            if groups is None:  # written by hand: a list of parameters and a state dict, if any
                groups = [{"params": list(getattr(opt, "params", []) or [])}]
            for gi, group in enumerate(groups):
                for pi, p in enumerate(group.get("params", [])):
                    pn = names.get(id(p))
                    if pn is None:  # a trained tensor that is no watched module's parameter
                        pn = f"{oname}.param_groups[{gi}].params[{pi}]"
                        self._row(rows, pn, "parameter", p)
                        self._row(rows, pn + ".grad", "gradient", getattr(p, "grad", None), requires_grad=False)
                    state = getattr(opt, "state", {}).get(p, None) or {}
                    for sk, sv in state.items():
                        self._row(rows, f"{oname}.state[{pn}].{sk}", "optimizer_state", sv, requires_grad=False)
        self._moments.append({"what": what, "time_us": t_us, "storages": rows})

    def _step_pre(self, opt, args, kwargs) -> None:
        self._add_optimizer(opt)
        if self._steps < self.max_step_notes:
            self.note(f"step {self._steps} before")

    def _step_post(self, opt, args, kwargs) -> None:
        if self._steps < self.max_step_notes:
            self.note(f"step {self._steps} after")
        self._steps += 1

    # -- start and dump ----------------------------------------------------

    def start(self) -> "Recorder":
        import torch
        if self._started:
            raise RuntimeError("snapdiff.torch: this recorder has already started")
        torch.cuda.memory._record_memory_history(max_entries=self.max_entries, stacks=self.stacks,
                                                 context="all")
        self._started = True
        try:  # PyTorch 2.0 and later: every torch.optim optimizer's steps
            from torch.optim.optimizer import (register_optimizer_step_post_hook,
                                               register_optimizer_step_pre_hook)
        except ImportError:
            pass
        else:
            self._hooks = [register_optimizer_step_pre_hook(self._step_pre),
                           register_optimizer_step_post_hook(self._step_post)]
        self.note("start")
        return self

    def stop(self) -> None:
        """Stop recording without writing anything."""
        import torch
        for h in self._hooks:
            h.remove()
        self._hooks = []
        if self._started:
            torch.cuda.memory._record_memory_history(enabled=None)
            self._started = False

    def document(self) -> Dict[str, Any]:
        """The tensor list as written to ``PATH.tensors.json``."""
        import torch
        return {
            "format": FORMAT,
            "version": VERSION,
            "snapshot": os.path.basename(self.path),
            "torch": getattr(torch, "__version__", ""),
            "clock": "unix_us",
            "steps_noted": min(self._steps, self.max_step_notes),
            "steps": self._steps,
            "tensors": self._tensors,
            "moments": self._moments,
        }

    def dump(self) -> str:
        """Write the snapshot and its tensor list, stop recording; returns the
        snapshot's path."""
        import torch
        try:
            self.note("dump")
            snap_tmp = self.path + ".partial"
            side = sidecar_path(self.path)
            side_tmp = side + ".partial"
            torch.cuda.memory._dump_snapshot(snap_tmp)
            with open(side_tmp, "w", encoding="utf-8") as f:
                json.dump(self.document(), f, separators=(",", ":"))
            os.replace(snap_tmp, self.path)
            os.replace(side_tmp, side)
        finally:
            self.stop()
        return self.path

    def __enter__(self) -> "Recorder":
        return self.start()

    def __exit__(self, exc_type, exc, tb) -> None:
        self.dump()


def record(path, model=None, optimizer=None, **kwargs) -> Recorder:
    """``with snapdiff.torch.record(path, model=..., optimizer=...) as rec:``
    records the block (see :class:`Recorder` for the keyword arguments)."""
    return Recorder(path, model, optimizer, **kwargs)
