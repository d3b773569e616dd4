"""A bolt that takes part in checkpointing runs inside a shell (stormish/state/bolt.py):
the executor's per-bolt hooks (`Bolt.on_turn`, `Bolt.holds_work`) must still reach the
bolt. Found porting the CheckpointTupleForwarder scenarios (Storm's forwarder runs the
bolt it wraps unchanged): the executor looked the hooks up on the shell's class, which
has Bolt's defaults, so a bolt that emits and acks from `on_turn` (a client with its own
queue: docs, Bolt.on_turn) never did once it fed a stateful bolt, and a finite run with
it never completed."""

from __future__ import annotations

import pytest

from stormish import Bolt, Topology
from stormish.state import StatefulBolt
from stormish.testing import ListSpout, complete_topology

pytestmark = pytest.mark.timeout(120)


class Deferring:
    """Hands its input to `on_turn`, which settles each one (`settle`) on the task's
    thread, as a client with its own queue does."""

    def prepare(self, conf, context):
        self.queue: list = []

    def execute(self, tup):
        self.queue.append(tup)

    def on_turn(self):
        todo, self.queue = self.queue, []
        for tup in todo:
            self.settle(tup)
        return False

    def holds_work(self):
        return bool(self.queue)


class Deferred(Deferring, Bolt):
    """Emits each input anchored and acks it, from `on_turn`."""

    outputs = ["n"]

    def settle(self, tup):
        self.emit([tup.values[0]], anchors=[tup])
        self.ack(tup)


class Total(StatefulBolt):
    outputs = ["total"]

    def init_state(self, state):
        self.state = state

    def execute(self, tup):
        total = self.state.get("total", 0) + tup.values[0]
        self.state.put("total", total)
        self.emit([total], anchors=[tup])
        self.ack(tup)


class DeferredTotal(Deferring, Total):
    """A stateful bolt that applies its input from on_turn: its acks are held until the
    commit after them all the same."""

    def settle(self, tup):
        Total.execute(self, tup)


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("where", ["forwarded", "stateful"])
def test_on_turn_runs_in_a_bolt_that_takes_part_in_checkpoints(workers, where):
    t = Topology(
        f"on-turn-{where}",
        config={"topology.state.checkpoint.interval.ms": 100, "topology.message.timeout.secs": 20},
    )
    t.set_spout("src", ListSpout([[i] for i in range(1, 101)], ["n"]))
    if where == "forwarded":
        t.set_bolt("defer", Deferred()).shuffle_grouping("src")
        t.set_bolt("total", Total()).global_grouping("defer")
    else:
        t.set_bolt("total", DeferredTotal()).global_grouping("src")
    results = complete_topology(t, workers=workers, timeout=30)
    totals = [v[0] for v in results.read_tuples("total")]
    assert max(totals) == 5050
    assert results.stats.components["src"].acked == 100
