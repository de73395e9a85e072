"""The process runner the recorders share: each scenario in a process of its
own (allocator settings are read once per process), with its environment.

    python3 RECORDER.py OUT_DIR [NAME ...]     every scenario, or the named ones
    python3 RECORDER.py --one OUT_DIR NAME     one scenario in this process
"""
import os
import subprocess
import sys
import time


def main(script, runners, scenarios, env=None):
    env = env or {}
    if len(sys.argv) >= 4 and sys.argv[1] == "--one":
        out, name = sys.argv[2], sys.argv[3]
        import torch
        torch.manual_seed(0)
        runners[name](name, out)
        try:
            import torch.distributed as dist
            if dist.is_initialized():
                dist.destroy_process_group()
        except Exception:
            pass
        return 0
    out = sys.argv[1]
    names = sys.argv[2:] or scenarios
    os.makedirs(out, exist_ok=True)
    rc = 0
    for name in names:
        t0 = time.time()
        p = subprocess.run([sys.executable, script, "--one", out, name], env=dict(os.environ, **env.get(name, {})),
                           capture_output=True, text=True, timeout=300)
        print(f"== {name}: exit {p.returncode} in {time.time() - t0:.1f} s", flush=True)
        if p.returncode != 0:
            rc = 1
            print(p.stdout[-3000:], p.stderr[-6000:], flush=True)
    return rc
