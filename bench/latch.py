"""What keeping a latched edge's last tuple on disk costs its sender, and what a `fail`
edge's credit costs an emit (issue 28).

A latched edge into another worker keeps the last tuple it published in the worker's
data directory (runtime/modes.Latching: a pickle to a temporary file, renamed over the
last), written by the worker's LatchWriter thread when it changed; the sender's publish
only marks the latch dirty and wakes the writer. Timed here: the write itself
(`Latching.save`, a new value each time, as a writer thread pays it), the publish as the
sender pays it with a writer, and the publish kept in memory only. Then the
all-or-nothing guard's reservation per emit: a local `fail` edge's room
(ReceiveQueue.reserve + unreserve) against a remote one's credit (SenderCredit.reserve
+ unreserve). Rounds interleaved; median and spread (min-max) of the rounds.

Run: python bench/latch.py [--publishes N] [--rounds R]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from stormish.edges import make_policy
from stormish.runtime.channel import EdgeChannel, EdgeStats
from stormish.runtime.credits import Reports, SenderCredit
from stormish.runtime.modes import Latching, LatchWriter
from stormish.runtime.queue import ReceiveQueue


class Sink:
    def try_publish(self, batch, n):
        return True


def publishes(lt: Latching, n: int, same: bool) -> float:
    """Seconds a publish, `n` publishes of one-row batches."""
    t0 = time.perf_counter()
    for i in range(n):
        row = [("cfg", {"threshold": 0.5, "version": 1 if same else i})]
        lt.try_publish((1, "default", row, None), 1)
    return (time.perf_counter() - t0) / n


def writes(lt: Latching, n: int) -> float:
    """Seconds a write of a changed value (the writer thread's cost)."""
    t0 = time.perf_counter()
    for i in range(n):
        lt.last = ("cfg", {"threshold": 0.5, "version": i})
        lt.save()
    return (time.perf_counter() - t0) / n


def with_writer(path: str, n: int) -> float:
    """Seconds a publish on the sender's thread, a writer thread writing behind it."""
    w = LatchWriter()
    lt = Latching(Sink(), 2, 1, 1, "s", path, w)
    w.latches = [lt]
    w.start()
    try:
        return publishes(lt, n, False)
    finally:
        w.close()


def reservations(room, n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        room.reserve(1, 1)
        room.unreserve(1, 1)
    return (time.perf_counter() - t0) / n


class LocalRoom:
    def __init__(self):
        policy = make_policy("bench", overflow="fail", capacity=1000)
        self.q = ReceiveQueue(1024)
        self.ch = EdgeChannel(policy, EdgeStats("a", "default", 2, policy), 1000)
        self.q.add_channel([(1, "default")], self.ch)

    def reserve(self, src, k):
        return self.q.reserve(self.ch, src, k)

    def unreserve(self, src, k):
        self.q.unreserve(self.ch, src, k)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--publishes", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    n = args.publishes
    runs: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as data:
        for r in range(args.rounds):
            pub, wrote = f"{data}/p-{r}.latch", f"{data}/w-{r}.latch"
            cases = {
                "latched, in memory": lambda: publishes(Latching(Sink(), 2, 1, 1, "s"), n, False),
                "latched, publish with a writer": lambda pub=pub: with_writer(pub, n),
                "latch write (writer thread)": lambda wrote=wrote: writes(
                    Latching(Sink(), 2, 1, 1, "s", wrote, LatchWriter()), n // 5
                ),
                "fail edge, local room": lambda: reservations(LocalRoom(), n * 10),
                "fail edge, remote credit": lambda: reservations(
                    SenderCredit(Sink(), 2, 1, 1, "s", 1000, Reports()), n * 10
                ),
            }
            for name, fn in cases.items():
                runs.setdefault(name, []).append(fn())
    print(
        f"latched edge on disk and fail-edge credit: {n:,} publishes "
        f"({n * 10:,} reservations) a round, median of {args.rounds} interleaved rounds"
    )
    print(f"{'case':32} {'us/op':>8} {'min':>8} {'max':>8}")
    for name, xs in runs.items():
        us = [x * 1e6 for x in xs]
        print(f"{name:32} {statistics.median(us):8.2f} {min(us):8.2f} {max(us):8.2f}")


if __name__ == "__main__":
    main()
