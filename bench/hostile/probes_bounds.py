"""Bounds that hold for every reader and every command (docs/reliability.md,
"Bounds"): --max-memory and --max-input-bytes are bounds on what snapdiff
holds, not predictions from the input's size that a small file can defeat.

Each probe gives a bound and expects exit 3, one error line and a peak RSS
within the --max-memory it gives. At test scale the inputs are small
(generated here, in well under a second; the largest is a few MB) and the
bound small enough that it must trip; at --scale full they have the sizes
of the original reports (issue 14).
"""
import gzip
import os
import pickle
import struct
import sys
import traceback
import zlib

from common import MiB, SEG, dump, event, frame, says as _says, small_snapshot, write
from run import Probe

GiB = 1 << 30


def _isolated(make):
    """Runs a generator in a child process: the runner's own RSS, which a
    forked snapdiff starts from (wait4's ru_maxrss counts it), stays what it
    was however much memory generating the input took."""
    def run(d):
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            try:
                make(d)
                os._exit(0)
            except BaseException:
                traceback.print_exc()
                os._exit(1)
        _, status = os.waitpid(pid, 0)
        if status != 0:
            raise RuntimeError("generating the probe's input failed")
    return run


def _block(addr, size):
    return {"address": addr, "size": size, "requested_size": size, "state": "active_allocated", "frames": []}


def _segment(addr, size, blocks, device=0):
    return {"device": device, "address": addr, "total_size": size, "allocated_size": size, "active_size": size,
            "requested_size": size, "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
            "is_expandable": False, "frames": [], "blocks": blocks}


# ---- pickles whose memo shares objects ---------------------------------------

def _shared_blocks(segments, blocks):
    """One segment listed `segments` times, holding one block `blocks` times:
    a few bytes of memo references for segments x blocks blocks."""
    def make(d):
        seg = _segment(SEG, MiB, [_block(SEG, MiB)] * blocks)
        dump(os.path.join(d, "s.pickle"), {"segments": [seg] * segments, "device_traces": [[]]})
    return make


def _shared_event(refs):
    """One trace entry referenced `refs` times (2 bytes a reference)."""
    def make(d):
        ev = event("alloc", SEG, 512, 1_000_000)
        dump(os.path.join(d, "s.pickle"), {"segments": [], "device_traces": [[ev] * refs]})
    return make


def _long_binput(indices):
    """LONG_BINPUTs of one int at the given memo indices; the pickle's value
    is that int (not a snapshot: refused after reading)."""
    def make(d):
        out = bytearray(b"\x80\x04K\x01")
        for i in indices:
            out += b"r" + struct.pack("<I", i)
        out += b"."
        write(os.path.join(d, "m.pickle"), bytes(out))
    return make


def _gzip_empty_lists(n):
    """PROTO 4, then n EMPTY_LISTs (each a container on the stack), gzip'd."""
    def make(d):
        data = b"\x80\x04" + b"]" * n + b"."
        write(os.path.join(d, "l.pickle.gz"), gzip.compress(data, 9))
    return make


def _dumps_blocks(n):
    """An ordinary pickle.dumps of a snapshot of n dumped blocks."""
    def make(d):
        blocks = [_block(SEG + i * 512, 512) for i in range(n)]
        dump(os.path.join(d, "b.pickle"), {"segments": [_segment(SEG, n * 512, blocks)], "device_traces": [[]]})
    return make


# ---- Chrome traces and memory timelines ----------------------------------------

_OP = b'{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":1000,"dur":1}'
_MEM = (b'{"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":1000,"args":{"Addr":4096,"Bytes":512,'
        b'"Total Allocated":512,"Total Reserved":2097152,"Device Id":0,"Device Type":1}}')


def _trace_spaces(n):
    """traceEvents: one event, then n spaces, then the file ends (gzip)."""
    def make(d):
        c = zlib.compressobj(9, zlib.DEFLATED, 31)
        parts = [c.compress(b'{"traceEvents": [' + _OP + b",")]
        chunk = b" " * (16 * MiB)
        left = n
        while left > 0:
            parts.append(c.compress(chunk[:min(left, len(chunk))]))
            left -= len(chunk)
        parts.append(c.flush())
        write(os.path.join(d, "t.json.gz"), b"".join(parts))
    return make


def _trace_records(n):
    """n identical cpu_op events (gzip compresses them a thousandfold)."""
    def make(d):
        write(os.path.join(d, "t.json.gz"),
              gzip.compress(b'{"traceEvents": [' + b",".join([_OP] * n) + b"]}", 6))
    return make


def _trace_member(n):
    """A top-level member besides traceEvents whose value is one string of n bytes."""
    def make(d):
        write(os.path.join(d, "t.json.gz"),
              gzip.compress(b'{"traceEvents": [' + _OP + b'], "x": "' + b"a" * n + b'"}', 9))
    return make


def _timeline_bomb(rows):
    """A small profiler trace, and a memory timeline of `rows` rows of
    zeros (about 20 bytes a row, a thousandfold in gzip)."""
    def make(d):
        write(os.path.join(d, "t.json"), b'{"traceEvents": [' + _MEM + b"]}")
        c = zlib.compressobj(9, zlib.DEFLATED, 31)
        parts = [c.compress(b"[[" + b"0," * (rows - 1) + b"0],[")]
        row = b"[0,0,0,0,0,0,0,0,0],"
        left = rows - 1
        while left > 0:
            k = min(left, 1 << 20)
            parts.append(c.compress(row * k))
            left -= k
        parts.append(c.compress(b"[0,0,0,0,0,0,0,0,0]]]"))
        parts.append(c.flush())
        write(os.path.join(d, "tl.json.gz"), b"".join(parts))
    return make


def _snap_objects(n):
    """A .snap whose DOM is n empty objects (3 bytes of text, about 80 of DOM, each)."""
    def make(d):
        write(os.path.join(d, "o.snap"),
              gzip.compress(b'{"format": "snapdiff.snap", "version": 1, "x": [' + b",".join([b"{}"] * n) + b"]}", 9))
    return make


# ---- endless inputs, FIFOs -------------------------------------------------------

def _snapshot(d):
    dump(os.path.join(d, "s.pickle"), small_snapshot())


def _fifo(d):
    _snapshot(d)
    os.mkfifo(os.path.join(d, "fifo"))


# ---- 64-bit sums ----------------------------------------------------------------

def _segments_of(sizes):
    def make(d):
        segs, addr = [], SEG
        for s in sizes:
            segs.append(_segment(addr, s, [{"address": addr, "size": s, "requested_size": 0, "state": "inactive",
                                              "frames": []}]))
            addr += s
        dump(os.path.join(d, "s.pickle"), {"segments": segs, "device_traces": [[]]})
    return make


def _allocs_of(n, size):
    def make(d):
        fr = [frame()]
        tr = [event("alloc", SEG + i * 4096, size, 1_000_000 + i, fr) for i in range(n)]
        dump(os.path.join(d, "s.pickle"), {"segments": [], "device_traces": [tr]})
    return make


# ---- gzip -----------------------------------------------------------------------

def _gzip_trailing(d):
    write(os.path.join(d, "s.pickle.gz"), gzip.compress(pickle.dumps(small_snapshot(), protocol=4)) + b"garbage!")


def _gzip_members(d):
    data = pickle.dumps(small_snapshot(), protocol=4)
    h = len(data) // 2
    write(os.path.join(d, "s.pickle.gz"), gzip.compress(data[:h]) + gzip.compress(data[h:]))


def probes(scale):
    full = scale == "full"
    mem_says = _says("needs more than the limit of", "(raise it with --max-memory)")
    p = []
    # Pickles whose memo shares objects: the reader counts what it builds.
    m = GiB if full else 100 * MiB
    p.append(Probe("memo-shared-blocks", "bounds",
                   "one segment listed 20,000 times, each holding one block 20,000 times (200 KB; 4 GB RSS under "
                   "--max-memory 1GiB)" if full else "one segment listed 2,000 times, each holding one block 2,000 times",
                   _shared_blocks(20000, 20000) if full else _shared_blocks(2000, 2000),
                   ["report", "--max-memory", str(m), "s.pickle"], max_rss=m, check=mem_says))
    m = 256 * MiB if full else 100 * MiB
    p.append(Probe("memo-shared-event", "bounds",
                   "one trace entry referenced %s times (%s MB; reported: 20 M times, 2.78 GB RSS under 256 MiB)"
                   % (("20 M", 40) if full else ("2 M", 4)),
                   _shared_event(20_000_000 if full else 2_000_000),
                   ["report", "--max-memory", str(m), "s.pickle"], max_rss=m, check=mem_says))
    m = 100 * MiB
    p.append(Probe("memo-long-binput-index", "bounds",
                   "324 bytes of LONG_BINPUTs at indices up to 2^32-1 (524 MB RSS under 100 MiB: a memo resized to the index)",
                   _long_binput([(i + 1) << 20 for i in range(63)] + [0xFFFFFFFF]),
                   ["report", "--max-memory", str(m), "m.pickle"], max_rss=m, check=_says("not a PyTorch memory snapshot")))
    m = 256 * MiB if full else 100 * MiB
    p.append(Probe("memo-long-binput-many", "bounds",
                   "%s LONG_BINPUTs at distinct far indices (the sparse memo, counted)" % ("10 M" if full else "1 M"),
                   _long_binput(range(1 << 13, (1 << 13) + (10_000_000 if full else 1_000_000))),
                   ["report", "--max-memory", str(m), "m.pickle"], max_rss=m, check=mem_says))
    m = GiB if full else 100 * MiB
    p.append(Probe("gzip-empty-lists", "bounds",
                   "a gzip of %s empty lists (%s; reported: 194 KB, 5.4 GB RSS)" % (("200 M", "194 KB") if full else ("10 M", "10 KB")),
                   _gzip_empty_lists(200_000_000 if full else 10_000_000),
                   ["report", "--max-memory", str(m), "l.pickle.gz"], max_rss=m, check=mem_says))
    m = 150 * MiB if full else 100 * MiB
    p.append(Probe("pickle-dumps-blocks", "bounds",
                   "an ordinary pickle.dumps of %s dumped blocks (346 MB RSS under 150 MiB for 1 M)" % ("1 M" if full else "400 K"),
                   _dumps_blocks(1_000_000 if full else 400_000),
                   ["report", "--max-memory", str(m), "b.pickle"], max_rss=m, check=mem_says))
    # Chrome traces and memory timelines.
    m = GiB if full else 100 * MiB
    p.append(Probe("trace-gzip-spaces", "bounds",
                   "a gzip of %s spaces inside traceEvents (reported: 5.6 GB RSS under 1 GiB, read buffers kept)"
                   % ("6 GB" if full else "150 MB"),
                   _trace_spaces((6 << 30) if full else 150 * MiB),
                   ["report", "--max-memory", str(m), "t.json.gz"], max_rss=m, check=_says("truncated input")))
    m = GiB if full else 100 * MiB
    p.append(Probe("trace-gzip-records", "bounds",
                   "a gzip of %s identical cpu_op events (the records, counted)" % ("10 M" if full else "1 M"),
                   _trace_records(10_000_000 if full else 1_000_000),
                   ["report", "--max-memory", str(m), "t.json.gz"], max_rss=m, check=mem_says))
    m = GiB if full else 100 * MiB
    p.append(Probe("trace-huge-member", "bounds",
                   "a top-level member of traceEvents' document holding one %s string" % ("1 GB" if full else "200 MB"),
                   _trace_member((1 << 30) if full else 200 * MiB),
                   ["report", "--max-memory", str(m), "t.json.gz"], max_rss=m,
                   check=_says("a single JSON value larger than", "--max-memory")))
    # The old prediction (9 times the text) passes these; the DOM takes about 18.
    m = GiB if full else 512 * MiB
    p.append(Probe("timeline-gzip-bomb", "bounds",
                   "--memory-timeline: a gzip of %s rows of zeros (reported: 6.3 GB RSS with --max-input-bytes 100000000)"
                   % ("4.5 M" if full else "1.8 M"),
                   _timeline_bomb(4_500_000 if full else 1_800_000),
                   ["report", "--max-input-bytes", "100000000", "--max-memory", str(m), "t.json", "--memory-timeline",
                    "tl.json.gz"], max_rss=m, check=_says("(raise it with --max-memory)")))
    m = GiB if full else 256 * MiB
    p.append(Probe("snap-dom-objects", "bounds",
                   "a gzip'd .snap of %s empty objects (a JSON DOM of 27 bytes a byte)" % ("20 M" if full else "5 M"),
                   _snap_objects(20_000_000 if full else 5_000_000),
                   ["report", "--max-memory", str(m), "o.snap"], max_rss=m, check=_says("(raise it with --max-memory)")))
    # Endless inputs and FIFOs: every read of a non-regular file is bounded.
    m = 128 * MiB
    p.append(Probe("endless-stdin", "bounds", "yes | snapdiff report --max-input-bytes 1000000 /dev/stdin (read to 4 GB)",
                   lambda d: None, ["report", "--max-input-bytes", "1000000", "--max-memory", str(m), "/dev/stdin"],
                   stdin="yes", max_rss=m, check=_says("more than 1000000 bytes", "--max-input-bytes")))
    m = 256 * MiB if full else 128 * MiB
    p.append(Probe("endless-dev-zero", "bounds", "snapdiff report /dev/zero (read to 4 GB)", lambda d: None,
                   ["report", "--max-memory", str(m), "/dev/zero"], max_rss=m, check=mem_says))
    m = 100 * MiB
    p.append(Probe("endless-rules", "bounds", "--rules /dev/zero (read to 4 GB)", _snapshot,
                   ["report", "--max-memory", str(m), "--rules", "/dev/zero", "s.pickle"], max_rss=m,
                   check=_says("rules file holds more than")))
    p.append(Probe("endless-budget", "bounds", "check --budget /dev/zero (read to 4 GB)", _snapshot,
                   ["check", "--max-memory", str(m), "--budget", "/dev/zero", "s.pickle"], max_rss=m,
                   check=_says("budget file holds more than")))
    p.append(Probe("fifo-rules", "bounds", "--rules FIFO without a writer (hung)", _fifo,
                   ["report", "--rules", "fifo", "s.pickle"], max_rss=m))
    p.append(Probe("fifo-budget", "bounds", "check --budget FIFO without a writer (hung)", _fifo,
                   ["check", "--budget", "fifo", "s.pickle"], max_rss=m))
    # 64-bit sums.
    p.append(Probe("sum-segments-wrap", "bounds",
                   "257 dumped segments totalling 2^64 + 1000 bytes (a reserved peak of 1000 B passed check --max-peak 1MiB)",
                   _segments_of([((1 << 64) + 1000) // 257 + (1 if i < ((1 << 64) + 1000) % 257 else 0) for i in range(257)]),
                   ["check", "--max-peak", "1MiB", "--allow-truncated", "s.pickle"], max_rss=m, check=_says("more than any device holds")))
    p.append(Probe("sum-segments-many", "bounds", "1,100 dumped segments of 1 TiB each (their sum beyond 2^50 bytes)",
                   _segments_of([1 << 40] * 1100), ["check", "--max-peak", "1MiB", "--allow-truncated", "s.pickle"], max_rss=m,
                   check=_says("sum to more than any device holds")))
    p.append(Probe("sum-allocs-wrap", "bounds",
                   "300 allocations of 2^56 - 1 bytes (allocated_bytes_at_peak -9223372036854775808)",
                   _allocs_of(300, (1 << 56) - 1), ["report", "--format", "json", "s.pickle"], max_rss=m,
                   check=_says("more than any device holds")))
    p.append(Probe("sum-allocs-many", "bounds", "1,100 allocations of 1 TiB each (the replay's total beyond 2^50 bytes)",
                   _allocs_of(1100, 1 << 40), ["report", "--format", "json", "s.pickle"], max_rss=m,
                   check=_says("event 1024", "beyond what any device holds")))
    # gzip and --max-input-bytes.
    p.append(Probe("gzip-trailing-garbage", "bounds", "8 bytes after the end of a gzip'd snapshot (ignored silently)",
                   _gzip_trailing, ["report", "s.pickle.gz"], max_rss=m,
                   check=_says("8 bytes after the end of the gzip stream")))
    p.append(Probe("gzip-two-members", "bounds", "a snapshot gzip'd as two concatenated members (legal gzip: read)",
                   _gzip_members, ["report", "s.pickle.gz"], exit=0, max_rss=m))
    p.append(Probe("max-input-bytes-plain", "bounds", "--max-input-bytes 100 on a plain pickle (ignored)", _snapshot,
                   ["report", "--max-input-bytes", "100", "s.pickle"], max_rss=m,
                   check=_says("more than 100 bytes", "--max-input-bytes")))
    p.append(Probe("max-input-bytes-zero", "bounds", "--max-input-bytes 0 on a plain pickle (ignored)", _snapshot,
                   ["report", "--max-input-bytes", "0", "s.pickle"], exit=(2, 3), max_rss=m))
    for probe in p:
        probe.make = _isolated(probe.make)
    return p
