"""Acking in simulated time, with the Storm-style test kit.

The acker must keep a tree for at least a whole message timeout wherever the tree starts
in its rotation: the spout waits 1 to 1.5 timeouts before it fails a tree, so an ack that
comes at 0.8 x the timeout must complete it. Ticked every half timeout, the acker forgot
a tree that started just before a tick after 0.5-1 x the timeout."""

from __future__ import annotations

import pytest

from stormish import Bolt, LocalCluster, Topology
from stormish.testing import FakeClock, FeederSpout, advance_time


class AckAfter(Bolt):
    """Works `secs` of the topology's clock on each tuple, then acks it."""

    def __init__(self, secs: float):
        self.secs = secs

    def prepare(self, conf, context):
        self.clock = context.clock

    def execute(self, tup):
        self.clock.sleep(self.secs)
        self.ack(tup)


@pytest.mark.parametrize("start", [0.5, 4.5, 9.5])
def test_an_ack_at_0_8_of_the_timeout_completes_the_tree_wherever_it_starts(start):
    with FeederSpout(["v"]) as feeder, LocalCluster(clock=FakeClock()) as cluster:
        t = Topology("late-ack", config={"topology.message.timeout.secs": 10})
        t.set_spout("feed", feeder)
        t.set_bolt("slow", AckAfter(8)).global_grouping("feed")
        cluster.submit(t)
        advance_time(cluster, start, step=0.5)  # the acker ticks at 5 and 10 before
        feeder.feed(["x"], 1)
        advance_time(cluster, 9, step=0.5)
        assert feeder.is_acked(1)
        advance_time(cluster, 20)
        assert not feeder.is_failed(1)


def test_a_tree_nobody_acks_still_fails_after_one_to_one_and_a_half_timeouts():
    with FeederSpout(["v"]) as feeder, LocalCluster(clock=FakeClock()) as cluster:
        t = Topology("no-ack", config={"topology.message.timeout.secs": 10})
        t.set_spout("feed", feeder)
        t.set_bolt("slow", AckAfter(1000)).global_grouping("feed")
        cluster.submit(t)
        feeder.feed(["x"], 1)
        advance_time(cluster, 9.5, step=0.5)
        assert not feeder.is_failed(1)
        advance_time(cluster, 6, step=0.5)
        assert feeder.is_failed(1)
