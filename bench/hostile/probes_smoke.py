"""Two baseline probes: a good snapshot reads, a code-running pickle is refused."""
import os
import pickle

from common import dump, small_snapshot
from run import Probe


class _System:
    def __reduce__(self):
        return (os.system, ("touch pwned",))


def _evil(d):
    with open(os.path.join(d, "evil.pickle"), "wb") as f:
        f.write(pickle.dumps(_System(), protocol=2))


def _no_pwn(d, r):
    return "the pickle ran code" if os.path.exists(os.path.join(d, "pwned")) else None


def probes(scale):
    return [
        Probe("good-snapshot", "misc", "a small well-formed snapshot",
              lambda d: dump(os.path.join(d, "s.pickle"), small_snapshot()), ["report", "s.pickle"], exit=0,
              max_rss=64 << 20),
        Probe("pickle-os-system", "misc", "a pickle whose REDUCE calls os.system", _evil,
              ["report", "evil.pickle"], check=_no_pwn),
    ]
