"""Nimbus failover, measured: kill -9 of the leader (and of one worker at the same
moment) under a running topology, on a real ZooKeeper and an HA cluster of processes on
127.0.0.1 (two nimbus, two supervisors: tests/integration/ha_cluster.py).

Per round, from the kill:
- new leader: until the follower answers `leader` saying it leads;
- adopted: until the new leader adopted the worker that ran on (its log);
- reassigned: until the new leader brought up the killed worker, restarted by its
  supervisor meanwhile (its log: `worker N restarted`).

Rounds alternate the session timeout (`nimbus.leader.failover.secs`); median and
min-max of each. Needs java and Debian's zookeeper package, and kazoo.

    python bench/failover.py [--rounds 3] [--failover 4,10]
"""

from __future__ import annotations

import argparse
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]

from stormish import BasicBolt, Spout, Topology  # noqa: E402
from stormish.testing import poll_for  # noqa: E402


class Ticks(Spout):
    """Never ends: a reliable id every millisecond or so."""

    outputs = ["n"]

    def open(self, conf, context):
        self.n = 0

    def next_tuple(self):
        import time

        time.sleep(0.001)
        self.n += 1
        self.emit([self.n], msg_id=self.n)


class Pass(BasicBolt):
    def execute(self, tup):
        pass


def topology() -> Topology:
    t = Topology("fo", config={"topology.workers": 2, "topology.max.spout.pending": 200})
    t.set_spout("s", Ticks())
    t.set_bolt("b", Pass(), parallelism=2).shuffle_grouping("s")
    return t


def one_round(zk_hosts: str, failover: float) -> tuple[float, float, float]:
    from integration.ha_cluster import HaCluster

    with tempfile.TemporaryDirectory() as tmp:
        c = HaCluster(tmp, zk_hosts, failover=failover)
        try:
            poll_for(lambda: len(c.call(0, "supervisors")) == 2, 30, 0.1, "two supervisors")
            c.call(0, "submit", (topology(), {}))
            c.wait_status(0, "fo", "running")
            poll_for(lambda: len(c.workers()) == 2, 30, 0.05, "two workers")
            victim = c.workers()[0]
            index = int(victim.cmdline()[victim.cmdline().index("--index") + 1])
            t0 = time.monotonic()
            c.kill_nimbus(0)
            victim.send_signal(signal.SIGKILL)
            c.wait_leader(not_=0, timeout=failover + 30)
            leader = time.monotonic() - t0
            poll_for(lambda: f"fo: worker {1 - index} adopted" in c.log("n1.log"), 60, 0.02,
                     "the survivor adopted")  # fmt: skip
            adopted = time.monotonic() - t0
            poll_for(lambda: f"fo: worker {index} restarted" in c.log("n1.log"), 60, 0.02,
                     "the killed worker brought up")  # fmt: skip
            return leader, adopted, time.monotonic() - t0
        finally:
            c.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--failover", default="4,10", help="session timeouts to alternate (s)")
    a = ap.parse_args()
    from zk_server import ZooKeeper

    settings = [float(x) for x in a.failover.split(",")]
    got: dict[float, list[tuple[float, float, float]]] = {f: [] for f in settings}
    zk = ZooKeeper()
    try:
        for r in range(a.rounds):
            for f in settings:
                got[f].append(one_round(zk.hosts, f))
                print(f"round {r + 1} failover {f:g}s: " + "  ".join(
                    f"{x:.2f}" for x in got[f][-1]), flush=True)  # fmt: skip
    finally:
        zk.close()
    print(f"\nkill -9 of the leader nimbus (and of one worker), {a.rounds} interleaved rounds, "
          "seconds from the kill, median (min-max):")  # fmt: skip
    for f in settings:
        cols = list(zip(*got[f], strict=True))
        cells = [f"{statistics.median(c):5.2f} ({min(c):.2f}-{max(c):.2f})" for c in cols]
        print(f"nimbus.leader.failover.secs={f:<4g} new leader {cells[0]}   survivor adopted "
              f"{cells[1]}   killed worker reassigned {cells[2]}")  # fmt: skip


if __name__ == "__main__":
    main()
