"""The locality-aware shuffle on two real worker processes: a spout task and a bolt task
in each worker, joined by a plain shuffle grouping. While the local bolt task keeps up,
no tuple crosses to the other worker; when it is backpressured (slow), tuples spill
across; either way every tuple arrives once. `topology.disable.loadaware.messaging`
gives Storm's plain round-robin, which crosses half the time."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from stormish import Bolt, Spout, Topology
from stormish.testing import run_topology

pytestmark = pytest.mark.usefixtures("no_leaks")  # no process or socket left (conftest)


class WorkerSpout(Spout):
    """`count` tuples (n, the worker it was emitted in); reliable: Storm's max pending
    bounds what is in flight."""

    outputs = ["n", "worker"]

    def __init__(self, count, reliable):
        self.count = count
        self.reliable = reliable

    def open(self, conf, context):
        self.worker = context.worker_index
        self.base = context.task_id * 10_000_000
        self.n = 0
        self.pending = 0

    def next_tuple(self):
        for _ in range(64):
            if self.n >= self.count:
                if not self.pending:
                    self.finish()
                return
            i = self.base + self.n
            self.n += 1
            if self.reliable:
                self.pending += 1
                self.emit([i, self.worker], msg_id=i)
            else:
                self.emit([i, self.worker])

    def ack(self, msg_id):
        self.pending -= 1

    def fail(self, msg_id):
        raise AssertionError(f"tuple {msg_id} failed")


class WhereFrom(Bolt):
    """Counts tuples by (this worker, the emitting worker); `slow_in` a worker index
    whose task spends `work_us` per tuple (the backpressured local task)."""

    def __init__(self, slow_in=None, work_us=0):
        self.slow_in = slow_in
        self.work = work_us / 1e6

    def prepare(self, conf, context):
        self.worker = context.worker_index
        self.slow = self.worker == self.slow_in
        self.seen = []
        self.pairs = Counter()

    def execute(self, tup):
        if self.slow:
            end = time.perf_counter() + self.work
            while time.perf_counter() < end:
                pass
        n, source = tup.values
        self.seen.append(n)
        self.pairs[(source, self.worker)] += 1
        self.ack(tup)

    def result(self):
        return {"seen": self.seen, "pairs": self.pairs}


def run(name, count, *, reliable, conf=None, slow_in=None, work_us=0):
    config = {"topology.acker.executors": 2 if reliable else 0, **(conf or {})}
    t = Topology(name, config=config)
    t.set_spout("s", WorkerSpout(count, reliable), parallelism=2)
    t.set_bolt("b", WhereFrom(slow_in, work_us), parallelism=2).shuffle_grouping("s")
    res = run_topology(t, workers=2, timeout=60)
    pairs, seen = Counter(), []
    for part in res.results["b"]:
        pairs.update(part["pairs"])
        seen.extend(part["seen"])
    sent = {t.task for t in res.stats.tasks.values() if t.component == "s"}
    expected = sorted(t * 10_000_000 + i for t in sent for i in range(count))
    assert sorted(seen) == expected, "every tuple arrives exactly once"
    crossed = sum(n for (src, dst), n in pairs.items() if src != dst)
    return crossed, pairs


def test_a_shuffle_sends_nothing_across_while_the_local_task_keeps_up():
    # at most 256 trees in flight per spout: the local queue (local producers may fill
    # 2,048 of its 4,096) never nears the higher bound, so nothing needs the other worker
    crossed, pairs = run("keepsup", 1000, reliable=True, conf={"topology.max.spout.pending": 256})
    assert crossed == 0, pairs
    assert pairs[(0, 0)] == pairs[(1, 1)] == 1000


def test_a_backpressured_local_task_spills_to_the_other_worker():
    # worker 0's bolt task takes 100 us a tuple, worker 1's is fast: worker 0's spout
    # fills its local queue and the shuffle widens to both workers
    conf = {"topology.executor.receive.buffer.size": 1024, "topology.producer.batch.size": 64}
    crossed, pairs = run("spill", 6000, reliable=False, conf=conf, slow_in=0, work_us=100)
    assert pairs[(0, 1)] > 0, pairs  # worker 0's tuples reached worker 1's task
    assert crossed == pairs[(0, 1)] + pairs[(1, 0)]


def test_load_aware_messaging_off_is_round_robin_across_both_workers():
    conf = {"topology.disable.loadaware.messaging": True, "topology.max.spout.pending": 256}
    crossed, pairs = run("roundrobin", 1000, reliable=True, conf=conf)
    assert pairs[(0, 1)] == pairs[(0, 0)] == pairs[(1, 0)] == pairs[(1, 1)] == 500
