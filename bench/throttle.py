"""A throttled edge against Storm's blocking edge: complete latency under overload.

A reliable spout emits as fast as it may (max.spout.pending 20,000) into a bolt that
takes ~20 us a tuple, for --tuples tuples, one worker. With `block` the spout fills the
bolt's queue and every tuple waits behind it; with `throttle=f` the spout is slowed once
the queue has less than f free, so the queue stays shorter. Printed per configuration
(median of --rounds runs, each the whole topology): acked tuples per second, complete
latency p50 / p99 / max as the spout measures it (emit to ack), and how often the
throttle held a batch back. Issue 13, part 4.

Run: python bench/throttle.py [--tuples N] [--rounds R]
"""

from __future__ import annotations

import argparse
import statistics
import time

from stormish import BasicBolt, LocalCluster, Spout, Topology


class Stamped(Spout):
    outputs = ["n"]

    def __init__(self, count: int):
        self.count = count

    def open(self, conf, context):
        self.n = 0
        self.sent: dict[int, float] = {}
        self.lat: list[float] = []

    def next_tuple(self):
        if self.n >= self.count:
            if not self.sent:
                self.finish()
            return
        now = time.perf_counter()
        for _ in range(64):
            if self.n >= self.count:
                return
            self.sent[self.n] = now
            self.emit((self.n,), msg_id=self.n)
            self.n += 1

    def ack(self, msg_id):
        self.lat.append(time.perf_counter() - self.sent.pop(msg_id))

    def fail(self, msg_id):
        self.sent.pop(msg_id, None)

    def result(self):
        return self.lat


class Work(BasicBolt):
    """~20 us of work a tuple."""

    def execute(self, tup):
        end = time.perf_counter() + 0.00002
        while time.perf_counter() < end:
            pass


def once(tuples: int, edge: dict) -> dict:
    t = Topology("throttle", config={"topology.max.spout.pending": 20_000})
    t.set_spout("src", Stamped(tuples))
    t.set_bolt("work", Work()).shuffle_grouping("src", **edge)
    with LocalCluster() as c:
        c.submit(t)
        t0 = time.perf_counter()
        stats = c.wait_complete("throttle", timeout=600)
        secs = time.perf_counter() - t0
        (lat,) = c._get("throttle").results()["src"]
    lat.sort()
    e = stats.components["work"].edges.get("src:default", {})
    return {
        "rate": len(lat) / secs,
        "p50": lat[len(lat) // 2] * 1000,
        "p99": lat[int(len(lat) * 0.99)] * 1000,
        "max": lat[-1] * 1000,
        "throttled": e.get("throttled", 0),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tuples", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    configs = [
        ("block", {}),
        ("throttle 0.5", {"throttle": 0.5}),
        ("throttle 0.9", {"throttle": 0.9}),
    ]
    runs: dict[str, list[dict]] = {name: [] for name, _ in configs}
    for _ in range(args.rounds):  # interleaved: the machine's drift hits all alike
        for name, edge in configs:
            runs[name].append(once(args.tuples, edge))
    print(
        f"throttle vs block: {args.tuples:,} reliable tuples into a ~20 us bolt, 1 worker, "
        f"max.spout.pending 20,000; median of {args.rounds} interleaved runs"
    )
    print(f"{'edge':<14}{'acked/s':>10}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}{'throttled':>11}")
    for name, _ in configs:
        rs = runs[name]
        med = {k: statistics.median(r[k] for r in rs) for k in rs[0]}
        print(
            f"{name:<14}{med['rate']:>10,.0f}{med['p50']:>9.1f}{med['p99']:>9.1f}"
            f"{med['max']:>9.1f}{med['throttled']:>11,.0f}"
        )


if __name__ == "__main__":
    main()
