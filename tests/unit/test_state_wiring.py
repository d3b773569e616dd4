"""What the plan adds for stateful bolts (stormish/state/wiring.py), as Storm's
TopologyBuilder does: the checkpoint spout, $checkpoint subscriptions along the user's
edges (the checkpoint spout standing in for user spouts), the shells, and the checks."""

from __future__ import annotations

import pytest

from stormish import BasicBolt, ConfigError, Topology, TopologyError
from stormish.runtime.acker import AckerBolt
from stormish.runtime.plan import build_plan
from stormish.state import CHECKPOINT_STREAM, StatefulBolt
from stormish.state.bolt import (
    BasicCheckpointForwarder,
    CheckpointForwarder,
    StatefulBoltExecutor,
)
from stormish.state.spout import CHECKPOINT_COMPONENT, CheckpointSpout

from .idle import IdleBasicBolt, IdleBolt, IdleSpout


class Src(IdleSpout):
    outputs = ["word"]


class Split(IdleBasicBolt):
    outputs = ["word"]


class Relay(IdleBolt):
    outputs = ["word"]


class Counter(StatefulBolt):
    outputs = ["word", "count"]

    def init_state(self, state):
        self.state = state

    def execute(self, tup):
        pass


def plan(t: Topology, **conf):
    return build_plan(t, t.validate(conf), AckerBolt())


def wordcount() -> Topology:
    t = Topology("wc")
    t.set_spout("src", Src(), 2)
    t.set_bolt("split", Split(), 3).shuffle_grouping("src")
    t.set_bolt("relay", Relay(), 2).shuffle_grouping("split")
    t.set_bolt("count", Counter(), 2).fields_grouping("relay", ["word"])
    t.set_bolt("sink", Relay(), 1).shuffle_grouping("count")
    return t


def checkpoint_sources(p, name):
    return [
        (s.source, s.grouping)
        for s in p.components[name].subscriptions
        if s.stream == CHECKPOINT_STREAM
    ]


def test_the_checkpoint_spout_and_the_barriers_follow_the_user_edges():
    p = plan(wordcount())
    spec = p.components[CHECKPOINT_COMPONENT]
    assert spec.is_spout and spec.parallelism == 1 and isinstance(spec.obj, CheckpointSpout)
    assert p.streams[CHECKPOINT_COMPONENT][CHECKPOINT_STREAM] == ("txid", "action", "emission")
    assert checkpoint_sources(p, "split") == [(CHECKPOINT_COMPONENT, "all")]
    assert checkpoint_sources(p, "relay") == [("split", "all")]
    assert checkpoint_sources(p, "count") == [("relay", "all")]
    assert checkpoint_sources(p, "sink") == []  # downstream of every stateful bolt


def test_bolts_taking_part_are_wrapped_with_their_input_task_count():
    p = plan(wordcount())
    split, relay, count = (p.components[n].obj for n in ("split", "relay", "count"))
    # not a BasicBolt to the executor: the shell acks its inputs itself (it may hold some)
    assert isinstance(split, BasicCheckpointForwarder) and not isinstance(split, BasicBolt)
    assert split.input_tasks == 1  # the checkpoint spout's one task
    assert type(relay) is CheckpointForwarder and relay.input_tasks == 3
    assert isinstance(count, StatefulBoltExecutor) and count.input_tasks == 2
    assert type(p.components["sink"].obj) is Relay
    assert CHECKPOINT_STREAM in p.streams["count"]


def test_the_users_topology_stays_as_written():
    t = wordcount()
    plan(t)
    assert type(t.components["count"].obj) is Counter
    assert CHECKPOINT_COMPONENT not in t.components
    assert all(s.stream != CHECKPOINT_STREAM for s in t.components["count"].subscriptions)


def test_a_topology_without_stateful_bolts_is_unchanged():
    t = Topology("plain")
    t.set_spout("src", Src())
    t.set_bolt("split", Split()).shuffle_grouping("src")
    p = plan(t)
    assert CHECKPOINT_COMPONENT not in p.components
    assert type(p.components["split"].obj) is Split


def test_stateful_bolts_need_acking():
    with pytest.raises(ConfigError, match="topology.acker.executors.*count"):
        plan(wordcount(), **{"topology.acker.executors": 0})


def test_a_stateful_bolt_on_a_cycle_is_refused():
    t = Topology("loop")
    t.set_spout("src", Src())
    t.set_bolt("a", Relay()).shuffle_grouping("src").shuffle_grouping("count")
    t.set_bolt("count", Counter()).shuffle_grouping("a")
    with pytest.raises(TopologyError, match="on a cycle"):
        plan(t)


class BatchCounter(StatefulBolt):
    def execute_batch(self, batch):
        self.ack_batch(batch)


def test_a_stateful_bolt_with_execute_batch_alone_is_refused_naming_execute():
    """Its execute_batch was never called: every tuple raised NotImplementedError from
    execute and was replayed for good (found by a bug hunt)."""
    t = Topology("sb")
    t.set_spout("src", Src())
    t.set_bolt("count", BatchCounter()).shuffle_grouping("src")
    said = "stateful bolt 'count' \\(BatchCounter\\) defines execute_batch but not execute"
    with pytest.raises(TopologyError, match=said):
        plan(t)


def test_the_checkpoint_stream_name_is_reserved():
    class Sneaky(Relay):
        streams = {"default": ["word"], CHECKPOINT_STREAM: ["x"]}

    t = Topology("sneaky")
    t.set_spout("src", Src())
    t.set_bolt("s", Sneaky()).shuffle_grouping("src")
    t.set_bolt("count", Counter()).shuffle_grouping("s")
    with pytest.raises(TopologyError, match="reserved"):
        plan(t)


def test_the_checkpoint_interval_must_be_below_the_message_timeout():
    conf = {"topology.state.checkpoint.interval.ms": 5000, "topology.message.timeout.secs": 5}
    with pytest.raises(ConfigError, match="checkpoint.interval.ms.*5000.*timeout.secs"):
        plan(wordcount(), **conf)
