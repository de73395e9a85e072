#!/usr/bin/env python3
"""Writes the small hand-made pickle fixtures the tests read.

Run from this directory with any Python 3 (stdlib only):
    python3 make_fixtures.py
The outputs are committed; rerun only to change them. Nothing here is
copied from PyTorch: the dicts mimic the documented snapshot shape
(shared/reference/torch_formats.md, section 1).
"""
import gzip
import pickle
import pickletools

SEG = 0x7F0000000000
MiB = 1 << 20


def frame(name, filename, line):
    return {"name": name, "filename": filename, "line": line}


def tiny_snapshot():
    user = frame("forward", "/home/u/model.py", 42)
    lib = frame("linear", "/usr/lib/python3/site-packages/torch/nn/functional.py", 7)
    unknown_line = frame("fake", "/x/fake_tensor.py", 2**64 - 1)
    stack_a = [lib, user]          # shared list object, referenced twice
    stack_b = [unknown_line, user]
    tr = [
        {"action": "segment_alloc", "addr": SEG, "size": 20 * MiB, "stream": 0, "time_us": 1_000_000,
         "compile_context": "N/A", "user_metadata": "", "frames": stack_a},
        {"action": "alloc", "addr": SEG, "size": 3 * MiB + 5, "stream": 0, "time_us": 1_000_010,
         "compile_context": "N/A", "user_metadata": "", "frames": stack_a},
        {"action": "alloc", "addr": SEG + 3 * MiB + 512, "size": 100, "stream": 0, "time_us": 1_000_020,
         "compile_context": "N/A", "user_metadata": "phase=fwd", "frames": stack_b},
        {"action": "free_requested", "addr": SEG, "size": 3 * MiB + 5, "stream": 0, "time_us": 1_000_030,
         "frames": stack_a},
        {"action": "free_completed", "addr": SEG, "size": 3 * MiB + 5, "stream": 0, "time_us": 1_000_031,
         "frames": stack_a},
    ]
    blocks = [
        {"address": SEG, "size": 3 * MiB + 512, "requested_size": 0, "state": "inactive", "frames": []},
        {"address": SEG + 3 * MiB + 512, "size": 17 * MiB - 512, "requested_size": 100,
         "state": "active_allocated", "frames": stack_b},
    ]
    # Note: after the free the first block merges back; the dump reflects the
    # layout the allocator reports, which the tests cross-check loosely.
    seg = {"device": 0, "address": SEG, "total_size": 20 * MiB, "allocated_size": 17 * MiB - 512,
           "active_size": 17 * MiB - 512, "requested_size": 100, "stream": 0, "segment_type": "large",
           "segment_pool_id": (0, 0), "is_expandable": False, "frames": stack_a, "blocks": blocks}
    return {"segments": [seg], "device_traces": [tr],
            "allocator_settings": {"expandable_segments": False, "max_split_size": -1,
                                   "garbage_collection_threshold": 0.5,
                                   "roundup_power2_divisions": {"1": 0, "2": 0}},
            "external_annotations": [{"stage": "START", "name": "step", "device": 0, "time_us": 1_000_000}]}


class Evil:
    """Unpickling this would call os.system."""
    def __reduce__(self):
        import os
        return (os.system, ("echo snapdiff-pwned > /tmp/snapdiff_pwned",))


def main():
    snap = tiny_snapshot()
    for proto in range(0, 6):
        with open(f"tiny_p{proto}.pickle", "wb") as f:
            pickle.dump(snap, f, protocol=proto)
    with open("tiny_p4.pickle.gz", "wb") as f:
        f.write(gzip.compress(pickle.dumps(snap, protocol=4)))
    # Bytes after STOP must be ignored (trace_plot HTML pads with NULs).
    with open("tiny_trailing.pickle", "wb") as f:
        f.write(pickle.dumps(snap, protocol=4) + b"\x00\x00garbage")
    # Legacy: a bare list of segments (torch.cuda.memory_snapshot()).
    with open("legacy_segment_list.pickle", "wb") as f:
        pickle.dump(snap["segments"], f, protocol=2)
    # Legacy: PyTorch <= 2.0 blocks with `history`, no frames/requested_size.
    old_blocks = [
        {"size": 2 * MiB - 1024, "state": "active_allocated",
         "history": [{"addr": SEG, "real_size": 1000, "frames": [frame("f", "/a.py", 1)]}]},
        {"size": 1024, "state": "inactive"},
    ]
    old_seg = {"device": 0, "address": SEG, "total_size": 2 * MiB, "allocated_size": 2 * MiB - 1024,
               "active_size": 2 * MiB - 1024, "stream": 0, "segment_type": "small", "blocks": old_blocks}
    with open("legacy_history.pickle", "wb") as f:
        pickle.dump({"segments": [old_seg], "device_traces": [[]]}, f, protocol=2)
    # Hostile: a REDUCE of os.system.
    with open("evil_os_system.pickle", "wb") as f:
        pickle.dump({"segments": [], "device_traces": [[Evil()]]}, f, protocol=2)
    with open("evil_os_system_p4.pickle", "wb") as f:
        pickle.dump(Evil(), f, protocol=4)
    # Deeply nested lists (depth 100000) must not overflow any stack.
    depth = 30000
    with open("deep_nesting.pickle", "wb") as f:
        f.write(b"\x80\x02" + b"]" * depth + b"a" * (depth - 1) + b".")
    for name in ["tiny_p0.pickle", "tiny_p2.pickle"]:
        with open(name, "rb") as f:
            pickletools.dis(f.read(), out=open("/dev/null", "w"))


if __name__ == "__main__":
    main()
