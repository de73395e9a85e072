"""Tensor lists beside a snapshot (PATH.tensors.json, docs/tensors.md): the
input kind issue 36 added. Read by default when present, so a hostile list
next to a good snapshot must be an input error of that list (exit 3, one
line naming it), within --max-memory, in time linear in its size, and never
a hang (a FIFO in its place)."""
import json
import os

from common import MiB, SEG, dump, says as _says, small_snapshot, write
from run import Probe


def _snap(d):
    dump(os.path.join(d, "s.pickle"), small_snapshot())


def _with_list(text):
    def make(d):
        _snap(d)
        write(os.path.join(d, "s.pickle.tensors.json"), text if isinstance(text, bytes) else text.encode())
    return make


def _list(tensors, moments):
    return json.dumps({"format": "snapdiff-tensors", "version": 1, "tensors": tensors, "moments": moments})


def _fifo(d):
    _snap(d)
    os.mkfifo(os.path.join(d, "s.pickle.tensors.json"))


def _big(rows):
    def make(d):
        _snap(d)
        t = [{"name": "model.w%d" % i, "kind": "parameter"} for i in range(1000)]
        per = [[i, SEG + i * 4096, 4096] for i in range(1000)]
        with open(os.path.join(d, "s.pickle.tensors.json"), "w") as f:
            f.write('{"format":"snapdiff-tensors","version":1,"tensors":%s,"moments":[' % json.dumps(t))
            for m in range(rows // 1000):
                f.write((',' if m else '') + json.dumps({"time_us": 1_000_000 + m, "storages": per}))
            f.write(']}')
    return make


def _named(d, r):
    out = r.out.decode("utf-8", "replace")
    return None if "{model.fc.weight}" in out else "the row is not named: %r" % out[-600:]


def probes(scale):
    rows = 6_000_000 if scale == "full" else 1_200_000
    good = _list([{"name": "model.fc.weight", "kind": "parameter"}],
                 [{"time_us": 1_000_020, "storages": [[0, SEG, MiB]]}])
    return [
        Probe("tensors-good", "misc", "a good list beside the snapshot names its allocation", _with_list(good),
              ["report", "s.pickle", "--width", "1000"], exit=0, max_rss=64 << 20, check=_named),
        Probe("tensors-truncated", "misc", "a list cut in the middle: the list's input error, at its offset",
              _with_list(good[:-7]), ["report", "s.pickle"], check=_says("s.pickle.tensors.json: offset")),
        Probe("tensors-deep", "bounds", "a list nested 200,000 deep (a tree library recurses on it)",
              _with_list("[" * 200_000), ["report", "s.pickle"], max_rss=64 << 20,
              check=_says("s.pickle.tensors.json")),
        Probe("tensors-index", "misc", "a storage row pointing past the tensors: refused at its JSON path",
              _with_list(_list([], [{"time_us": 1, "storages": [[7, SEG, 1]]}])), ["report", "s.pickle"],
              check=_says("$.moments[0].storages[0][0]")),
        Probe("tensors-escape-name", "names", "a tensor named with ESC and a newline + ::error:: (it reaches rows)",
              _with_list(_list([{"name": "\x1b]0;pwn\x07\n::error::x", "kind": "parameter"}],
                               [{"time_us": 1_000_020, "storages": [[0, SEG, MiB]]}])),
              ["report", "s.pickle"], exit=0,
              check=lambda d, r: "raw ESC or forged line in the output" if (b"\x1b" in r.out or
                                                                             b"\n::error::" in r.out) else None),
        Probe("tensors-fifo-beside", "time", "a FIFO where the list would be: not a list, not read, no hang",
              _fifo, ["report", "s.pickle"], exit=0),
        Probe("tensors-fifo-named", "time", "--tensors FIFO: an input error at once, no hang", _fifo,
              ["report", "--tensors", "s.pickle.tensors.json", "s.pickle"], check=_says("s.pickle.tensors.json")),
        Probe("tensors-memory", "bounds", "%d storage rows under --max-memory 128MiB: refused before the tree "
              "is built" % rows, _big(rows), ["report", "--max-memory", "128MiB", "s.pickle"],
              max_rss=128 << 20, check=_says("s.pickle.tensors.json")),
        Probe("tensors-no-list", "misc", "--no-tensors: a broken list beside the snapshot is not read",
              _with_list("{"), ["report", "--no-tensors", "s.pickle"], exit=0, max_rss=64 << 20),
    ]
