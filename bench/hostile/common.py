"""Shared pieces for the probe modules: plain snapshot dicts (the documented
shape of torch.cuda.memory._snapshot(), nothing from PyTorch itself) and
small file helpers."""
import gzip
import os
import pickle

MiB = 1 << 20
SEG = 0x7F0000000000


def frame(name="forward", filename="/home/u/model.py", line=42):
    return {"name": name, "filename": filename, "line": line}


def event(action, addr, size, t, frames=None, stream=0):
    return {"action": action, "addr": addr, "size": size, "stream": stream, "time_us": t,
            "compile_context": "N/A", "user_metadata": "", "frames": frames or [frame()]}


def small_snapshot(frames=None):
    """One 20 MiB segment, one 1 MiB allocation alive, a full history."""
    fr = frames or [frame()]
    tr = [event("segment_alloc", SEG, 20 * MiB, 1_000_000, fr),
          event("alloc", SEG, MiB, 1_000_010, fr)]
    blocks = [{"address": SEG, "size": MiB, "requested_size": MiB, "state": "active_allocated", "frames": fr},
              {"address": SEG + MiB, "size": 19 * MiB, "requested_size": 0, "state": "inactive", "frames": []}]
    seg = {"device": 0, "address": SEG, "total_size": 20 * MiB, "allocated_size": MiB, "active_size": MiB,
           "requested_size": MiB, "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
           "is_expandable": False, "frames": fr, "blocks": blocks}
    return {"segments": [seg], "device_traces": [tr]}


def write(path, data, mode=0o644):
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, mode)


def dump(path, obj, protocol=4, compress=False):
    data = pickle.dumps(obj, protocol=protocol)
    write(path, gzip.compress(data) if compress else data)


def says(*needles):
    """A probe's check: the error line holds every needle."""
    def check(d, r):
        err = r.err.decode("utf-8", "backslashreplace")
        missing = [n for n in needles if n not in err]
        return "the error does not say %s: %r" % (" / ".join(missing), err[:300]) if missing else None
    return check
