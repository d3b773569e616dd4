"""Wait-strategy profiles: idle CPU and latency at a low rate, measured.

For each profile that ships with stormish (stormish/profiles/): (1) idle CPU: a
topology whose spout emits nothing, CPU seconds used per wall second over a window;
(2) latency at low rate: a reliable spout emitting 200 tuples/s through two bolts,
complete latency p50/p99 from emit to ack as the spout sees it.

Run: python bench/profiles.py [--seconds 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

from stormish import BasicBolt, LocalCluster, Spout, Topology
from stormish.loader import load_profile


class Idle(Spout):
    outputs = ["n"]

    def next_tuple(self):
        pass


class Paced(Spout):
    outputs = ["n"]

    def __init__(self, rate: float, count: int):
        self.rate, self.count = rate, count

    def open(self, conf, context):
        self.sent = 0
        self.start = time.perf_counter()
        self.t0: dict[int, float] = {}
        self.lat: list[float] = []

    def next_tuple(self):
        if self.sent >= self.count:
            if not self.t0:
                self.finish()
            return
        if time.perf_counter() - self.start >= self.sent / self.rate:
            self.t0[self.sent] = time.perf_counter()
            self.emit([self.sent], msg_id=self.sent)
            self.sent += 1

    def ack(self, msg_id):
        self.lat.append(time.perf_counter() - self.t0.pop(msg_id))

    def result(self):
        return self.lat


class Pass(BasicBolt):
    outputs = ["n"]

    def execute(self, tup):
        self.emit(tup.values)


class Sink(BasicBolt):
    def execute(self, tup):
        pass


def idle_cpu(conf: dict, seconds: float) -> float:
    t = Topology("idle")
    t.set_spout("s", Idle())
    t.set_bolt("a", Pass()).shuffle_grouping("s")
    t.set_bolt("b", Sink()).shuffle_grouping("a")
    with LocalCluster(config=conf) as c:
        c.submit(t)
        time.sleep(0.5)  # benchmark warm-up, not synchronisation
        c0, w0 = time.process_time(), time.perf_counter()
        time.sleep(seconds)
        cpu = (time.process_time() - c0) / (time.perf_counter() - w0)
        c.kill("idle")
    return cpu


def latency(conf: dict, seconds: float) -> tuple[float, float]:
    rate = 200.0
    t = Topology("paced")
    t.set_spout("s", Paced(rate, int(rate * seconds)))
    t.set_bolt("a", Pass()).shuffle_grouping("s")
    t.set_bolt("b", Sink()).shuffle_grouping("a")
    with LocalCluster(config=conf) as c:
        c.submit(t)
        c.wait_complete("paced", timeout=seconds * 10 + 30)
        lat = c._get("paced").results()["s"][0]
    q = statistics.quantiles(lat, n=100)
    return q[49] * 1000, q[98] * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=3.0)
    args = ap.parse_args()
    print(f"{'profile':<12} {'idle CPU (cores)':>17} {'p50 ms @200/s':>14} {'p99 ms @200/s':>14}")
    for name in ("low-latency", "balanced", "low-cpu"):
        conf = load_profile(name)
        cpu = idle_cpu(conf, args.seconds)
        p50, p99 = latency(conf, args.seconds)
        print(f"{name:<12} {cpu:>17.3f} {p50:>14.3f} {p99:>14.3f}")


if __name__ == "__main__":
    main()
