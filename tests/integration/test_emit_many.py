"""Batch trees end to end: a spout emits batches of rows with `emit_many` (one message
id per batch), bolts fail some rows once; every batch is acked exactly once in the end,
and a failed batch is replayed whole. On one worker and across two worker processes."""

from __future__ import annotations

from collections import Counter

import pytest

from stormish import BasicBolt, Bolt, Spout, Topology
from stormish.testing import CaptureBolt, run_topology

BATCHES, ROWS = 60, 50  # rows are (batch * ROWS + i,)


class BatchSpout(Spout):
    outputs = ["n"]

    def open(self, conf, context):
        self.todo = list(range(BATCHES))[::-1]
        self.unacked: set[int] = set()
        self.acked: Counter = Counter()
        self.failed: Counter = Counter()

    def next_tuple(self):
        if not self.todo:
            if not self.unacked:
                self.finish()
            return
        b = self.todo.pop()
        self.unacked.add(b)
        self.emit_many([(b * ROWS + i,) for i in range(ROWS)], msg_id=b)

    def ack(self, msg_id):
        self.acked[msg_id] += 1
        self.unacked.discard(msg_id)

    def fail(self, msg_id):
        self.failed[msg_id] += 1
        self.todo.append(msg_id)

    def result(self):
        return {"acked": dict(self.acked), "failed": dict(self.failed)}


class FailSomeOnce(BasicBolt):
    """Fails rows whose n % 97 == 5 the first time it sees them; passes the rest on
    with `emit_many` from `execute_batch` (anchored per tuple while iterating)."""

    outputs = ["n"]

    def prepare(self, conf, context):
        self.seen: set[int] = set()

    def execute(self, tup):
        n = tup.values[0]
        if n % 97 == 5 and n not in self.seen:
            self.seen.add(n)
            raise RuntimeError(f"injected failure for {n}")
        self.emit_many([(n,)])


class AckBatch(Bolt):
    """Takes whole batches and acks them with one call."""

    def prepare(self, conf, context):
        self.rows = 0

    def execute_batch(self, batch):
        self.rows += len(batch.values)
        self.ack_batch(batch)

    def result(self):
        return self.rows


def topology(acking: bool) -> Topology:
    t = Topology("many", config={"topology.acker.executors": 2 if acking else 0})
    t.set_spout("s", BatchSpout())
    t.set_bolt("f", FailSomeOnce()).shuffle_grouping("s")  # one task: each row fails once
    t.set_bolt("cap", CaptureBolt(), parallelism=2).shuffle_grouping("f")
    t.set_bolt("all", AckBatch()).shuffle_grouping("s")
    return t


@pytest.mark.parametrize("workers", [1, 2])
def test_batch_trees_ack_each_batch_once_and_replay_failed_batches_whole(workers):
    out = run_topology(topology(acking=True), timeout=90, workers=workers)
    (spout,) = out.results["s"]
    assert spout["acked"] == {b: 1 for b in range(BATCHES)}
    bad = {n // ROWS for n in range(BATCHES * ROWS) if n % 97 == 5}  # one bad row each
    assert spout["failed"] == {b: 1 for b in bad}  # a failed batch is replayed whole, once
    got = Counter(out.captured["cap"])
    assert set(got) == {(n,) for n in range(BATCHES * ROWS)}
    # every row of a failed batch but its bad one got through the first attempt too
    assert sum(got.values()) == BATCHES * ROWS + len(bad) * (ROWS - 1)
    assert {row for row, k in got.items() if k > 1} == {
        (n,) for n in range(BATCHES * ROWS) if n // ROWS in bad and n % 97 != 5
    }
    # the ack_batch bolt sees every emitted row, first attempts and replays
    assert sum(out.results["all"]) == (BATCHES + len(bad)) * ROWS
    assert out.stats.components["s"].acked == BATCHES * ROWS  # spout tuples, as emitted
    assert out.stats.status == "complete"


def test_batch_trees_with_acking_off_ack_on_emit():
    t = topology(acking=False)
    out = run_topology(t, timeout=60)
    (spout,) = out.results["s"]
    assert spout["acked"] == {b: 1 for b in range(BATCHES)}
    assert spout["failed"] == {}
    assert sum(out.results["all"]) == BATCHES * ROWS
