"""`snapdiff whatif` (the caching-allocator model) on hostile recordings
(issue 37): its cost must follow what each allocator call frees or examines,
not the whole cache; figures must stay possible whatever the sizes; recorded
settings are quoted, never echoed whole.

Each recording is built by a small recorder (_Rec) that keeps the segments'
blocks as PyTorch's would be listed at the end, so the exact replay agrees
with the history; the model is then free to decide for itself.
"""
import os

from common import MiB, dump
from run import Probe

GiB = 1 << 30


class _Rec:
    """A recorded run: events, and the segments alive at the end (blocks by
    start and by end, so a free merges with its neighbours in O(1))."""

    def __init__(self, base=0x7F0000000000):
        self.ev = []
        self.t = 1_000_000
        self.next = base
        self.segs = {}  # addr -> [size, {block start: [size, state]}, segment_type]
        self.ends = {}  # block end -> block start (all segments)

    def _e(self, action, addr, size):
        self.t += 1
        self.ev.append({"action": action, "addr": addr, "size": size, "stream": 0, "time_us": self.t,
                        "frames": []})

    def _put(self, blocks, start, size, state):
        blocks[start] = [size, state]
        self.ends[start + size] = start

    def segment(self, size, small=False):
        addr = self.next
        self.next += max(size, 2 * MiB)
        self.segs[addr] = [size, {}, "small" if small else "large"]
        self._put(self.segs[addr][1], addr, size, "inactive")
        self._e("segment_alloc", addr, size)
        return addr

    def alloc(self, seg, addr, size):
        """At the start of a free block (as the generators here ask)."""
        blocks = self.segs[seg][1]
        bsize, state = blocks[addr]
        assert state == "inactive" and size <= bsize
        self._put(blocks, addr, size, "active_allocated")
        if bsize > size:
            self._put(blocks, addr + size, bsize - size, "inactive")
        self._e("alloc", addr, size)

    def free(self, seg, addr):
        blocks = self.segs[seg][1]
        size = blocks[addr][0]
        self._e("free_requested", addr, size)
        self._e("free_completed", addr, size)
        blocks[addr][1] = "inactive"
        nxt = addr + size
        if nxt in blocks and blocks[nxt][1] == "inactive":
            self._put(blocks, addr, size + blocks.pop(nxt)[0], "inactive")
        prev = self.ends.get(addr) if addr != seg else None
        if prev is not None and prev in blocks and blocks[prev][1] == "inactive":
            self._put(blocks, prev, blocks[prev][0] + blocks.pop(addr)[0], "inactive")

    def release(self, seg):
        size, blocks, _ = self.segs.pop(seg)
        assert len(blocks) == 1 and list(blocks.values())[0][1] == "inactive"
        self._e("segment_free", seg, size)

    def snapshot(self, settings=None):
        segs = []
        for addr in sorted(self.segs):
            size, blocks, kind = self.segs[addr]
            bl = [{"address": a, "size": s, "requested_size": s if st != "inactive" else 0, "state": st,
                   "frames": []} for a, (s, st) in sorted(blocks.items())]
            used = sum(b["size"] for b in bl if b["state"] != "inactive")
            segs.append({"device": 0, "address": addr, "total_size": size, "allocated_size": used,
                         "active_size": used, "requested_size": used, "stream": 0, "segment_type": kind,
                         "segment_pool_id": (0, 0), "is_expandable": False, "frames": [], "blocks": bl})
        snap = {"segments": segs, "device_traces": [self.ev]}
        if settings is not None:
            snap["allocator_settings"] = settings
        return snap


def _fragments_and_empty_cache(fragments, calls):
    """`fragments` free 1 KiB blocks kept between live ones in small-pool
    segments (none of them whole: nothing empty_cache() can release), then
    `calls` empty_cache() calls, each releasing one segment made for it."""
    def make(d):
        r = _Rec()
        per = 1024  # fragments per 2 MiB segment
        segs = []
        for _ in range((fragments + per - 1) // per):  # every block first, then the frees: none reused
            s = r.segment(2 * MiB, small=True)
            segs.append(s)
            for k in range(2 * per):
                r.alloc(s, s + k * 1024, 1024)
        for s in segs:
            for k in range(0, 2 * per, 2):
                r.free(s, s + k * 1024)
        p = r.segment(20 * MiB)
        for _ in range(calls):
            s = r.segment(20 * MiB)
            r.alloc(s, s, 2 * MiB)
            r.free(s, s)
            r.release(s)
            r.alloc(p, p, 2 * MiB)  # not a segment_alloc next: the release was empty_cache(), not a retry
            r.free(p, p)
        dump(os.path.join(d, "w.pickle"), r.snapshot())
    return make


def _large_segments(fragments):
    return (fragments + 8) // 9


def _gc_limit(fragments):
    """A limit whose garbage-collection threshold (0.6) lies below what the
    fragments' segments reserve, and which leaves room for the misses."""
    return "%dMiB" % (_large_segments(fragments) * 20 * 5 // 4 + 1024)


def _fragments_and_misses(fragments, misses):
    """`fragments` free blocks of 1 MiB + 512 in large-pool segments (none
    whole), then `misses` requests of 300 and 340 MiB in turn: under
    max_split_size_mb:256 neither cached block serves the other, so each is a
    cache miss, and under a memory fraction each runs garbage collection."""
    def make(d):
        r = _Rec()
        fs = MiB + 512
        per = 9  # fragments per 20 MiB segment
        segs = []
        for _ in range(_large_segments(fragments)):
            s = r.segment(20 * MiB)
            segs.append(s)
            for k in range(2 * per):
                r.alloc(s, s + k * fs, fs)
            r.alloc(s, s + 2 * per * fs, 20 * MiB - 2 * per * fs)
        for s in segs:
            for k in range(0, 2 * per, 2):
                r.free(s, s + k * fs)
        a = r.segment(300 * MiB)
        b = r.segment(340 * MiB)
        for i in range(misses):
            s, size = (a, 300 * MiB) if i % 2 == 0 else (b, 340 * MiB)
            r.alloc(s, s, size)
            r.free(s, s)
        dump(os.path.join(d, "w.pickle"), r.snapshot())
    return make


TiB = 1 << 40


def _huge_request(d):
    """A run whose one request (1.5 TiB) is larger than an expandable
    segment's whole address range (1 TiB in the model)."""
    r = _Rec()
    s = r.segment(2 * MiB, small=True)
    r.alloc(s, s, 512)
    big = r.segment(3 * TiB // 2)
    r.alloc(big, big, 3 * TiB // 2)
    r.free(big, big)
    dump(os.path.join(d, "w.pickle"), r.snapshot())


def _possible_figures(d, res):
    """Every scenario's figures are possible: allocated within reserved,
    nothing negative, and the 1.5 TiB request an out-of-memory error of the
    expandable model (it cannot be mapped in one range)."""
    import json
    try:
        j = json.loads(res.out)
    except ValueError as e:
        return "not JSON: %s" % e
    for sc in [j["calibration"]] + j["scenarios"]:
        pk = sc["peak"]
        if min(pk.values()) < 0 or sc["cached_at_peak_bytes"] < 0 or pk["allocated_bytes"] > pk["reserved_bytes"]:
            return "impossible figures for %r: %r, cached %d" % (sc["alloc_conf"], pk, sc["cached_at_peak_bytes"])
    exp = [sc for sc in j["scenarios"] if sc["alloc_conf"] == "expandable_segments:True"]
    if not exp or not exp[0]["oom"] or exp[0]["oom"]["requested_bytes"] != 3 * TiB // 2:
        return "the expandable model does not run out of memory at the 1.5 TiB request: %r" % (exp[:1],)
    return None


def _long_recorded_conf(length):
    def make(d):
        r = _Rec()
        s = r.segment(20 * MiB)
        r.alloc(s, s, 2 * MiB)
        conf = "max_split_size_mb:" + "9" * (length - 18)
        dump(os.path.join(d, "w.pickle"), r.snapshot({"PYTORCH_CUDA_ALLOC_CONF": conf}))
    return make


def _conf_cut(d, res):
    """The recorded setting quoted in at most a few hundred bytes, its length said."""
    out = res.out.decode("utf-8", "replace")
    line = [l for l in out.splitlines() if "PYTORCH_CUDA_ALLOC_CONF" in l]
    if not line:
        return "no line names the recorded PYTORCH_CUDA_ALLOC_CONF: %r" % out[:300]
    if len(line[0]) > 1000 or len(out) > 10_000:
        return "the recorded setting is echoed whole (a line of %d bytes, %d in all)" % (len(line[0]), len(out))
    if "bytes" not in line[0]:
        return "the cut value does not say its length: %r" % line[0][:600]
    return None


def _backwards_clock(first, last):
    def make(d):
        r = _Rec()
        s = r.segment(20 * MiB)
        r.alloc(s, s, 2 * MiB)
        r.ev[0]["time_us"], r.ev[1]["time_us"] = first, last
        dump(os.path.join(d, "w.pickle"), r.snapshot())
    return make


def _range_said(lo, hi):
    """The --at refusal names the earliest and latest times and their offsets
    from the first event's, each with one sign."""
    def check(d, res):
        err = res.err.decode("utf-8", "replace")
        if "+-" in err or "-+" in err or "@%d to @%d" % (lo, hi) not in err:
            return "the range is not the earliest to the latest time: %r" % err[:400]
        return None
    return check


def probes(scale):
    full = scale == "full"

    def sz(test, full_size):
        return full_size if full else test

    return [
        Probe("i37_05_whatif_empty_cache", "time",
              "40,000 free fragments no empty_cache() can release and 40,000 empty_cache() calls: each call "
              "walked every free block (30k x 30k: 20 s)",
              _fragments_and_empty_cache(sz(40_000, 100_000), sz(40_000, 100_000)),
              ["whatif", "w.pickle", "--alloc-conf", "", "--alloc-conf", "expandable_segments:True"], exit=0),
        Probe("i37_05_whatif_gc_misses", "time",
              "40,000 large free fragments and 60,000 cache misses under garbage_collection_threshold and a "
              "memory limit: each miss walked every large free block (26k x 40k: 16 s)",
              _fragments_and_misses(sz(40_000, 100_000), sz(60_000, 150_000)),
              ["whatif", "w.pickle", "--alloc-conf", "garbage_collection_threshold:0.6,max_split_size_mb:256",
               "--memory-limit", _gc_limit(sz(40_000, 100_000))], exit=0),
            Probe("i37_11_whatif_expandable_huge_request", "misc",
              "a 1.5 TiB request under expandable_segments:True (the model's ranges are 1 TiB): reserved "
              "below allocated, -50%, negative cached bytes, 'fits' a smaller limit; now an out-of-memory "
              "error of the model",
              _huge_request, ["whatif", "w.pickle", "-a", "", "-a", "expandable_segments:True", "-f", "json"],
              exit=0, check=_possible_figures),
        Probe("i37_11_whatif_expandable_huge_request_limit", "misc",
              "the same under --memory-limit 1200GiB, below the request: it 'fitted' (1 TiB mapped), now it cannot",
              _huge_request, ["whatif", "w.pickle", "-a", "expandable_segments:True", "--memory-limit", "1200GiB",
                              "-f", "json"], exit=0, check=_possible_figures),
        Probe("i37_12_whatif_long_recorded_conf", "names",
              "a recorded PYTORCH_CUDA_ALLOC_CONF of 4 MB was echoed whole in whatif's report: cut at 400 "
              "bytes, its length said",
              _long_recorded_conf(sz(4 << 20, 4 << 20)), ["whatif", "w.pickle", "-a", "", "--width", "1000"],
              exit=0, check=_conf_cut),
        Probe("i37_12_whatif_long_recorded_conf_md", "names",
              "the same in Markdown",
              _long_recorded_conf(sz(4 << 20, 4 << 20)), ["whatif", "w.pickle", "-a", "", "-f", "markdown"],
              exit=0, check=_conf_cut),
            Probe("i37_also_at_backwards_clock", "time",
              "--at on a recording whose clock runs backwards (the first event at 2^63-1 us, the last at "
              "-(2^63-1)): the range printed \"(+0 to +0.000002 s)\" (the difference wrapped); now the "
              "earliest to the latest time",
              _backwards_clock(2**63 - 1, -(2**63 - 1)), ["report", "w.pickle", "--at", "+1s"], exit=2,
              one_line=True, check=_range_said(-(2**63 - 1), 2**63 - 1)),
        Probe("i37_also_at_backwards_clock_small", "time",
              "the same with a clock 4 s backwards: \"(+0 to +-4.000000 s)\"",
              _backwards_clock(5_000_000, 1_000_000), ["report", "w.pickle", "--at", "+10s"], exit=2,
              one_line=True, check=_range_said(1_000_000, 5_000_000)),
    ]
