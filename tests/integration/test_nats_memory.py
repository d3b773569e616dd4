"""JetStreamSpout and JetStreamSink on stormish.testing.MemoryJetStream in a LocalCluster
(no server), and the spout hook a bolt's reset_timeout reaches."""

from __future__ import annotations

import sys

from stormish import BasicBolt, Bolt, LocalCluster, Topology
from stormish.nats import JetStreamSink, JetStreamSpout
from stormish.testing import FakeClock, ListSpout, MemoryJetStream


def _js(n: int, clock: FakeClock) -> MemoryJetStream:
    js = MemoryJetStream(clock=clock)
    js.add_stream("S", ["s.>"])
    for i in range(n):
        js.publish(f"s.{i % 3}", str(i).encode())
    return js


class Total(BasicBolt):
    outputs = ["value"]
    fail_once: set = set()

    def execute(self, tup):
        seq = tup["sequence"]
        if seq % 7 == 0 and seq not in Total.fail_once:
            Total.fail_once.add(seq)
            raise ValueError(f"first try of {seq}")
        self.emit([str(int(tup["value"]) * 2)])


def test_a_topology_reads_every_message_and_writes_every_result_through_memory():
    js = _js(500, FakeClock())
    js.add_stream("OUT", ["out"])
    t = Topology("mem_js", config={"topology.message.timeout.secs": 30})
    t.set_spout("in", JetStreamSpout(js, "S", "s.>", "d", nak_delay_secs=0, stop_at_end=True))
    t.set_bolt("double", Total(), parallelism=2).shuffle_grouping("in")
    t.set_bolt("out", JetStreamSink(js, subject="out")).shuffle_grouping("double")
    with LocalCluster() as cluster:
        cluster.submit(t)
        cluster.wait_complete("mem_js", timeout=60)
    out = [int(m.data) for m in js.messages("OUT")]
    assert sum(set(out)) == 2 * sum(range(500)) and len(out) >= 500
    c = js.consumer("S", "d")
    assert c.acked == set(range(1, 501)) and not c.pending
    assert Total.fail_once  # some trees failed and were redelivered


class Resets(Bolt):
    """Holds each tuple for two ticks: resets it at the first (the acker knows its tree by
    then), acks it at the second."""

    outputs = ["value"]
    component_config = {"topology.tick.tuple.freq.secs": 0.05}

    def prepare(self, conf, context):
        self.held, self.was_reset = [], []

    def execute(self, tup):
        if not tup.is_tick:
            self.held.append(tup)
            return
        for t in self.was_reset:
            self.ack(t)
        for t in self.held:
            self.reset_timeout(t)
        self.was_reset, self.held = self.held, []


class SeesResets(ListSpout):
    def timeout_reset(self, msg_id):
        sys.modules[__name__].RESETS.append(msg_id)


RESETS: list = []


def test_a_bolts_reset_timeout_reaches_the_spout_as_timeout_reset():
    t = Topology("resets")
    t.set_spout("s", SeesResets([[i] for i in range(20)]))
    t.set_bolt("b", Resets()).shuffle_grouping("s")
    with LocalCluster() as cluster:
        cluster.submit(t)
        cluster.wait_complete("resets", timeout=60)
    assert sorted(RESETS) == list(range(20))
