"""Invocation metadata: a tuple may carry `correlation_id` and `causation_id`
(`stormish.traced`); an emit anchored to a traced tuple inherits them unless it gives its
own; they travel across workers, and replays and dead letters keep them. Acking off,
there are no anchors: nothing is inherited."""

from __future__ import annotations

import pytest

from stormish import BasicBolt, Bolt, Spout, Topology, traced
from stormish.testing import CaptureBolt, run_topology

ORDERS = [(f"o{i}", i) for i in range(40)]


class Orders(Spout):
    """Each order traced with its id as the correlation id; order 7 fails once."""

    outputs = ["order", "qty"]

    def open(self, conf, context):
        self.todo = list(ORDERS)
        self.pending: dict[str, tuple] = {}
        self.failed_once = False

    def next_tuple(self):
        if self.todo:
            order, qty = self.todo.pop(0)
            self.pending[order] = (order, qty)
            self.emit(traced([order, qty], correlation_id=order, causation_id="web"), msg_id=order)
        elif not self.pending:
            self.finish()

    def ack(self, msg_id):
        self.pending.pop(msg_id, None)

    def fail(self, msg_id):
        order, qty = self.pending[msg_id]
        self.emit(traced([order, qty], correlation_id=order, causation_id="web"), msg_id=order)


class Lines(BasicBolt):
    """Two lines per order, anchored implicitly: they inherit the order's ids."""

    outputs = ["order", "line"]

    def execute(self, tup):
        for n in range(2):
            self.emit([tup["order"], n])


class Price(Bolt):
    """Anchors by hand; line 1 of order o3 gets ids of its own; o7 fails once."""

    outputs = ["order", "line", "price"]

    def prepare(self, conf, context):
        self.failed = False

    def execute(self, tup):
        order, line = tup.values
        if order == "o7" and not self.failed:
            self.failed = True
            self.fail(tup)
            return
        values = [order, line, 10 * line]
        if order == "o3" and line == 1:
            values = traced(values, correlation_id="refund-3", causation_id=order)
        self.emit(values, anchors=[tup])
        self.ack(tup)


class Ids(BasicBolt):
    outputs = ["order", "line", "correlation", "causation"]

    def execute(self, tup):
        self.emit([tup["order"], tup["line"], tup.correlation_id, tup.causation_id])


def topology(name, workers, acking=True):
    conf = {"topology.workers": workers}
    if not acking:
        conf["topology.acker.executors"] = 0
    t = Topology(name, config=conf)
    t.set_spout("orders", Orders())
    t.set_bolt("lines", Lines(), parallelism=2).shuffle_grouping("orders")
    t.set_bolt("price", Price(), parallelism=2).fields_grouping("lines", ["order"])
    t.set_bolt("ids", Ids()).shuffle_grouping("price")
    t.set_bolt("out", CaptureBolt()).shuffle_grouping("ids")
    return t


@pytest.mark.parametrize("workers", [1, 2])
def test_ids_are_inherited_through_anchors_across_workers_and_replays(workers):
    res = run_topology(topology("corr", workers), timeout=60)
    got = {(o, line): (c, cause) for o, line, c, cause in res.captured["out"]}
    assert len(got) == 2 * len(ORDERS)
    for (order, line), ids in got.items():
        if (order, line) == ("o3", 1):
            assert ids == ("refund-3", "o3")  # given: not inherited
        else:
            assert ids == (order, "web"), (order, line, ids)
    assert res.stats.components["orders"].failed == 1  # o7's replay kept its ids


def test_a_tuple_without_ids_reads_none_and_acking_off_inherits_nothing():
    res = run_topology(topology("corr-off", 1, acking=False), timeout=60)
    rows = res.captured["out"]
    assert len(rows) == 2 * len(ORDERS) - 1  # o7's failed line is gone (acking off)
    # Lines' emits have no anchor without acking: only o3/1, traced by hand, has ids
    assert [tuple(r) for r in rows if r[2] is not None] == [("o3", 1, "refund-3", "o3")]


def test_traced_values_behave_as_the_tuple_of_values_they_are():
    t = traced(["a", 1], correlation_id="c1")
    assert t == ("a", 1) and len(t) == 2 and t[0] == "a" and t.causation_id is None
    import pickle

    back = pickle.loads(pickle.dumps(t))
    assert back == ("a", 1) and back.correlation_id == "c1"
