"""The backpressure root is named, not its victims.

A chain spout -> a -> b -> slow c on two workers: c is slow, so b parks its emits and
fills, a parks and fills, the spout parks. Every component but c shows parked emits;
the root is c's task, full and not parked. Real worker processes and ZeroMQ links."""

from __future__ import annotations

import time

from stormish import BasicBolt, Spout, Topology
from stormish.local import LocalCluster, poll_for
from stormish.runtime.bp_root import backpressure_roots, describe


class Endless(Spout):
    outputs = ["n"]

    def open(self, conf, context):
        self.n = 0

    def next_tuple(self):
        for _ in range(50):
            self.n += 1
            self.emit([self.n])


class Pass(BasicBolt):
    outputs = ["n"]

    def execute(self, tup):
        self.emit(tup.values)


class SlowSink(BasicBolt):
    def execute(self, tup):
        time.sleep(0.002)


def chain(name: str) -> Topology:
    t = Topology(
        name,
        config={
            "topology.workers": 2,
            "topology.acker.executors": 0,
            "topology.executor.receive.buffer.size": 64,
        },
    )
    t.set_spout("s", Endless())
    t.set_bolt("a", Pass()).shuffle_grouping("s")
    t.set_bolt("b", Pass()).shuffle_grouping("a")
    t.set_bolt("c", SlowSink()).shuffle_grouping("b")
    return t


def test_the_root_of_backpressure_is_the_slow_task_not_the_parked_ones():
    with LocalCluster(workers=2) as cluster:
        cluster.submit(chain("bproot"))

        def roots():
            s = cluster.statistics("bproot")
            found = backpressure_roots(s.tasks.values())
            parked = {c for c, x in s.components.items() if x.pending_emits}
            return found and {"a", "b"} <= parked and (found, s)

        found, stats = poll_for(roots, 60, 0.1, "backpressure up to the spout")
        cluster.kill("bproot")
    assert [r.task.component for r in found] == ["c"], [describe(r) for r in found]
    (root,) = found
    c_task = next(t for t in stats.tasks.values() if t.component == "c")
    assert root.task.task == c_task.task and root.task.parked_seconds == 0
    assert {"a", "b"} <= set(root.parked) and root.for_seconds > 0
    line = describe(root)
    assert line.startswith(f"backpressure root: c task {c_task.task} on worker {c_task.worker}:")
    assert "parked behind it: a, b" in line, line
