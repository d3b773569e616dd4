"""CPU and wall time of `stormish run` on the 10-sentence word count (the topology of
`bench/peers.py --startup`), `-w 1`, `-w 2` and `-w 4`, this checkout and optionally
another (`--base DIR`, on PYTHONPATH) in the same interleaved rounds.

CPU is user + sys of the command and of every process it reaped (the fork server and,
through it, the workers): what a loaded machine turns into wall time, and steadier
than wall time when other processes share the cores. A first round warms caches and is
not counted.

Run: python bench/startup_cpu.py [--rounds 5] [--base DIR]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import peers

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--base", default=None, help="another checkout, in the same rounds")
    args = ap.parse_args()
    trees = {"stormish": str(ROOT)}
    if args.base:
        trees["base"] = args.base
    res: dict[tuple[str, int], list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="stormish-startup-") as tmp:
        work = Path(tmp)
        peers.make_data(10, work / "data.pkl")
        (work / "sm_wc.py").write_text(peers.STORMISH)
        for r in range(args.rounds + 1):
            for w in (1, 2, 4):
                for name, path in trees.items():
                    env = dict(os.environ, PYTHONPATH=path, PEERS_DATA=str(work / "data.pkl"))
                    env.update(PEERS_PAR=str(min(w, 2)), PEERS_API="tuple")
                    cmd = [sys.executable, "-m", "stormish.cli", "run", "sm_wc.py", "-w", str(w)]
                    before = resource.getrusage(resource.RUSAGE_CHILDREN)
                    t0 = os.times().elapsed
                    subprocess.run(cmd, cwd=work, env=env, check=True, capture_output=True)
                    wall = os.times().elapsed - t0
                    after = resource.getrusage(resource.RUSAGE_CHILDREN)
                    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
                    if r:
                        res.setdefault((name, w), []).append((cpu, wall))
    print(f"{'tree':<10}{'-w':>3}{'CPU s median':>14}{'CPU min-max':>16}"
          f"{'wall s median':>15}{'wall min-max':>16}")  # fmt: skip
    for (name, w), v in sorted(res.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        c, t = [x for x, _ in v], [y for _, y in v]
        print(f"{name:<10}{w:>3}{statistics.median(c):>14.3f}{min(c):>8.3f}-{max(c):.3f}"
              f"{statistics.median(t):>15.3f}{min(t):>8.3f}-{max(t):.3f}")  # fmt: skip
    print("load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
