"""`--kernels` recordings and the sections built from them (issue 37): the
join with the snapshot and the outside-the-allocator section must cost what
the inputs hold, linear (or n log n) in their events, and stay within
--max-memory. Recordings are written here in the JSON form of a .snap
(docs/snap_format.md), as a recorder run with kernel and memory records
would convert to."""
import json
import os

from common import MiB, SEG, dump
from run import Probe

T0 = 1_733_000_000_000_000  # a Unix-epoch microsecond


def _recording(driver=None, samples=None, kernels=None, strings=None):
    j = {"format": "snapdiff.snap", "version": 2, "strings": strings or ["", "cudaMalloc", "libc10_cuda.so"],
         "frames": [], "stacks": [], "devices": []}
    if driver:
        j["driver_memory"] = driver
    if samples:
        j["device_memory"] = samples
    if kernels:
        j["kernels"] = kernels
    return j


def _deltas(times):
    out, last = [], 0
    for t in times:
        out.append(t - last)
        last = t
    return out


def _driver(times, addrs, sizes, pids=None, kinds=None, callers=None, libraries=None):
    n = len(times)
    return {"count": n, "device": [0] * n, "time_us_delta": _deltas(times), "pid": pids or [1000] * n,
            "thread": pids or [1000] * n, "kind": kinds or ["alloc"] * n, "caller": callers or ["pytorch"] * n,
            "addr": addrs, "size": sizes, "handle": [0] * n, "stream": [0] * n, "api": [1] * n,
            "library": libraries or [2] * n}


def _segment_cycles(d, n):
    """Writes s.pickle: a 20 MiB segment made and freed at SEG n times, 10 us
    apart; returns the times it was made."""
    ev, times = [], []
    for i in range(n):
        t = T0 + 10 * i
        times.append(t)
        for action, dt in (("segment_alloc", 0), ("segment_free", 5)):
            ev.append({"action": action, "addr": SEG, "size": 20 * MiB, "stream": 0, "time_us": t + dt,
                       "frames": []})
    dump(os.path.join(d, "s.pickle"), {"segments": [], "device_traces": [ev]})
    return times


def _one_address(n):
    """A snapshot that makes and frees a 20 MiB segment at one address n
    times, and a recording of the n cudaMalloc's there (a microsecond
    apart, as the snapshot's)."""
    def make(d):
        times = _segment_cycles(d, n)
        drv = _driver(times, [SEG] * n, [20 * MiB] * n)
        with open(os.path.join(d, "r.kernels.snap"), "w") as f:
            json.dump(_recording(drv), f)
    return make


def _many_processes_one_address(procs, n):
    """The snapshot of _one_address(n), and a recording in which `procs`
    processes each made one cudaMalloc at that address (the last one all n):
    each segment event was searched in every process's calls, and every
    process kept its differences."""
    def make(d):
        times = _segment_cycles(d, n)
        t_all = [T0 + 10 * (i % n) for i in range(procs)] + times
        pids = [2000 + i for i in range(procs)] + [1000] * n
        drv = _driver(t_all, [SEG] * len(t_all), [20 * MiB] * len(t_all), pids=pids)
        with open(os.path.join(d, "r.kernels.snap"), "w") as f:
            json.dump(_recording(drv), f)
    return make


def _many_holders(holders, samples):
    """One process whose driver calls come from `holders` libraries (each a
    row of the outside-the-allocator section, holding 2 MiB from the start)
    and `samples` cudaMemGetInfo samples after them, joined with a snapshot
    whose one segment the process's PyTorch cudaMalloc made."""
    def make(d):
        import gzip
        ev = [{"action": "segment_alloc", "addr": SEG, "size": 20 * MiB, "stream": 0, "time_us": T0, "frames": []},
              {"action": "alloc", "addr": SEG, "size": 2 * MiB, "stream": 0, "time_us": T0 + 1, "frames": []}]
        dump(os.path.join(d, "s.pickle"), {"segments": [], "device_traces": [ev]})
        strings = ["", "cudaMalloc", "libc10_cuda.so"] + ["lib%d.so" % i for i in range(holders)]
        n = holders + 1
        times = [T0] + [T0 + 10 + i for i in range(holders)]
        drv = _driver(times, [SEG] + [0x10_0000_0000 + i * 4 * MiB for i in range(holders)], [20 * MiB] + [2 * MiB] * holders,
                      callers=["pytorch"] + ["other"] * holders, libraries=[2] + [3 + i for i in range(holders)])
        st = [T0 + 10 + holders + i for i in range(samples)]
        smp = {"count": samples, "device": [0] * samples, "time_us_delta": _deltas(st), "pid": [1000] * samples,
               "free_bytes": [40 << 30] * samples, "total_bytes": [80 << 30] * samples,
               "reserved_bytes": [20 * MiB] * samples, "label": [0] * samples}
        assert n == len(drv["addr"])
        with gzip.open(os.path.join(d, "r.kernels.snap"), "wt") as f:
            json.dump(_recording(drv, smp, strings=strings), f)
    return make


def probes(scale):
    full = scale == "full"

    def sz(test, full_size):
        return full_size if full else test

    return [
        Probe("i37_08_kernels_join_one_address", "time",
              "a snapshot that makes and frees a segment at one address 100,000 times joined with a recording "
              "of 100,000 cudaMalloc's there: each segment event looked at every call (13 s; 0.1 s without "
              "--kernels)",
              _one_address(sz(100_000, 200_000)), ["report", "s.pickle", "--kernels", "r.kernels.snap"], exit=0),
            Probe("i37_04_outside_many_holders", "bounds",
              "15,000 holders (libraries of one process) by 15,000 cudaMemGetInfo samples from a small "
              "recording: every holder's bytes were kept at every sample (3.5 GB under --max-memory 512MiB)",
              _many_holders(sz(15_000, 15_000), sz(15_000, 15_000)),
              ["report", "s.pickle", "--kernels", "r.kernels.snap", "--max-memory", "512MiB"], exit=0,
              max_rss=512 << 20),
        Probe("i37_04_outside_many_holders_json", "bounds",
              "the same as JSON: the over-time table lists what changed at each sample, not every holder",
              _many_holders(sz(15_000, 15_000), sz(15_000, 15_000)),
              ["report", "s.pickle", "--kernels", "r.kernels.snap", "--max-memory", "512MiB", "-f", "json",
               "-o", "r.json"], exit=0, max_rss=512 << 20),
        Probe("i37_04_outside_many_holders_html", "bounds",
              "the same as HTML: the over-time table's columns and rows are bounded",
              _many_holders(sz(15_000, 15_000), sz(15_000, 15_000)),
              ["report", "s.pickle", "--kernels", "r.kernels.snap", "--max-memory", "512MiB", "-f", "html",
               "-o", "r.html"], exit=0, max_rss=512 << 20),
            Probe("i37_08_kernels_join_many_processes", "time",
              "20,000 processes with a cudaMalloc at the one address a snapshot makes and frees its segment at "
              "50,000 times: counted per process from its calls, differences kept for the process picked",
              _many_processes_one_address(sz(20_000, 50_000), sz(50_000, 100_000)),
              ["report", "s.pickle", "--kernels", "r.kernels.snap"], exit=0),
    ]
