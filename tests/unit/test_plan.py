"""The execution plan: task ids, the acker, streams, cycles, and no mutation of the topology."""

from __future__ import annotations

import copy
import pickle

from stormish import Topology
from stormish.runtime.acker import AckerBolt
from stormish.runtime.plan import (
    ACK_ACK,
    ACK_FAIL,
    ACK_INIT,
    ACK_RESET,
    ACKER,
    build_plan,
    find_cycles,
)
from stormish.topology import Subscription
from stormish.tuple import SYSTEM_COMPONENT, TICK_STREAM

from .idle import IdleBolt, IdleSpout


class Src(IdleSpout):
    outputs = ["x"]


class Pass(IdleBolt):
    outputs = ["x"]


def plan_of(t: Topology, **conf):
    return build_plan(t, t.validate(conf or None), AckerBolt())


def linear(acking: bool = False, workers: int = 1) -> Topology:
    conf = {"topology.workers": workers}
    if not acking:
        conf["topology.acker.executors"] = 0
    t = Topology("lin", config=conf)
    t.set_spout("zsrc", Src(), parallelism=2)
    t.set_bolt("mid", Pass(), parallelism=3).shuffle_grouping("zsrc")
    t.set_bolt("end", Pass(), parallelism=1).fields_grouping("mid", ["x"])
    return t


# -- task ids
def test_task_ids_follow_sorted_component_names_from_one():
    p = plan_of(linear())
    assert p.tasks == {"end": [1], "mid": [2, 3, 4], "zsrc": [5, 6]}
    assert p.task_component == {1: "end", 2: "mid", 3: "mid", 4: "mid", 5: "zsrc", 6: "zsrc"}


def test_task_ids_do_not_depend_on_declaration_order():
    t = Topology("t", config={"topology.acker.executors": 0})
    t.set_bolt("b", Pass()).shuffle_grouping("a")
    t.set_spout("a", Src())
    assert plan_of(t).tasks == {"a": [1], "b": [2]}


def test_acker_is_added_when_acking_and_gets_ids_like_any_component():
    p = plan_of(linear(acking=True, workers=2))
    assert p.acking is True
    assert p.conf["topology.acker.executors"] == 2  # None means one per worker
    assert p.tasks[ACKER] == [1, 2]  # '__acker' sorts before lower-case names
    assert p.tasks["end"] == [3]
    assert sorted(p.task_component) == list(range(1, 9))


def test_acker_count_from_config():
    p = plan_of(linear(acking=True), **{"topology.acker.executors": 3})
    assert len(p.tasks[ACKER]) == 3


def test_no_acker_when_acking_is_off():
    p = plan_of(linear(acking=False))
    assert p.acking is False
    assert ACKER not in p.tasks
    assert ACKER not in p.components
    assert ACKER not in p.streams
    for name, streams in p.streams.items():
        if name != SYSTEM_COMPONENT:
            system = [s for s in streams if s.startswith("__")]
            # spouts: trees past max.replays; bolts: DEAD_LETTER results
            assert system == ["__dead_letter"], name


def test_acking_adds_system_streams_and_subscriptions():
    p = plan_of(linear(acking=True))
    assert ACK_INIT in p.streams["zsrc"]
    assert ACK_ACK not in p.streams["zsrc"]
    assert {ACK_ACK, ACK_FAIL, ACK_RESET} <= set(p.streams["mid"])
    assert ACK_INIT not in p.streams["mid"]
    assert set(p.streams[ACKER]) == {ACK_ACK, ACK_FAIL, ACK_RESET}
    acker_reads = {(s.source, s.stream) for s in p.components[ACKER].subscriptions}
    assert ("zsrc", ACK_INIT) in acker_reads
    assert ("mid", ACK_ACK) in acker_reads
    assert ("end", ACK_FAIL) in acker_reads
    spout_reads = {(s.source, s.stream, s.grouping) for s in p.components["zsrc"].subscriptions}
    assert spout_reads == {(ACKER, s, "direct") for s in (ACK_ACK, ACK_FAIL, ACK_RESET)}
    assert p.components["mid"].subscriptions == linear().components["mid"].subscriptions


def test_tick_stream_is_always_declared():
    """Storm's tick stream and its one field (StormCommon: `rate_secs`)."""
    for acking in (False, True):
        assert plan_of(linear(acking)).streams[SYSTEM_COMPONENT] == {TICK_STREAM: ("rate_secs",)}


def test_assignment_spreads_tasks_round_robin():
    p = plan_of(linear(workers=2))
    assert p.workers == 2
    assert set(p.assignment) == set(p.task_component)
    assert p.worker_tasks(0) == [1, 3, 5]
    assert p.worker_tasks(1) == [2, 4, 6]


def test_component_conf_layers_component_over_topology():
    t = linear()
    t.components["mid"].config["topology.tick.tuple.freq.secs"] = 5
    p = plan_of(t)
    assert p.component_conf("mid")["topology.tick.tuple.freq.secs"] == 5
    assert p.component_conf("end")["topology.tick.tuple.freq.secs"] is None


def test_plan_is_picklable():
    p = plan_of(linear(acking=True))
    q = pickle.loads(pickle.dumps(p))
    assert q.tasks == p.tasks
    assert q.on_cycle == p.on_cycle


# -- the user's topology is not mutated
def test_build_plan_does_not_mutate_the_topology():
    t = linear(acking=True)
    t.components["mid"].config["topology.tick.tuple.freq.secs"] = 1
    before_components = dict(t.components)
    before = {
        n: (copy.copy(s.subscriptions), dict(s.config), s.parallelism)
        for n, s in t.components.items()
    }
    before_config = dict(t.config)
    p = plan_of(t)
    assert ACKER in p.components
    assert t.components == before_components
    assert ACKER not in t.components
    for n, spec in t.components.items():
        assert (spec.subscriptions, spec.config, spec.parallelism) == before[n]
        assert p.components[n] is not spec
        assert p.components[n].subscriptions is not spec.subscriptions
        assert p.components[n].config is not spec.config
    assert t.config == before_config
    p.components["mid"].config["topology.debug"] = True
    assert "topology.debug" not in t.components["mid"].config


def test_building_twice_gives_the_same_plan():
    t = linear(acking=True)
    a, b = plan_of(t), plan_of(t)
    assert a.tasks == b.tasks
    assert a.streams == b.streams
    assert len(a.components["zsrc"].subscriptions) == len(b.components["zsrc"].subscriptions)


# -- cycles
def test_linear_topology_has_no_cycle():
    p = plan_of(linear(acking=True))
    assert p.on_cycle == set()
    assert p.feeds_cycle == set()


def test_two_bolt_cycle_and_the_spout_that_feeds_it():
    t = Topology("cyc", config={"topology.acker.executors": 0})
    t.set_spout("src", Src())
    t.set_spout("other", Src())
    t.set_bolt("a", Pass()).shuffle_grouping("src").shuffle_grouping("b")
    t.set_bolt("b", Pass()).shuffle_grouping("a")
    t.set_bolt("after", Pass()).shuffle_grouping("b")
    t.set_bolt("apart", Pass()).shuffle_grouping("other")
    p = plan_of(t)
    assert p.on_cycle == {"a", "b"}
    assert p.feeds_cycle == {"src"}


def test_self_loop_is_a_cycle():
    t = Topology("self", config={"topology.acker.executors": 0})
    t.set_spout("src", Src())
    t.set_bolt("loop", Pass()).shuffle_grouping("src").shuffle_grouping("loop")
    p = plan_of(t)
    assert p.on_cycle == {"loop"}
    assert p.feeds_cycle == {"src"}


def test_spout_feeding_a_cycle_through_a_chain():
    t = Topology("chain", config={"topology.acker.executors": 0})
    t.set_spout("src", Src())
    t.set_bolt("pre", Pass()).shuffle_grouping("src")
    t.set_bolt("x", Pass()).shuffle_grouping("pre").shuffle_grouping("z")
    t.set_bolt("y", Pass()).shuffle_grouping("x")
    t.set_bolt("z", Pass()).shuffle_grouping("y")
    on, feeds = find_cycles(t.components)
    assert on == {"x", "y", "z"}
    assert feeds == {"src"}


def test_acker_system_subscriptions_do_not_count_as_cycles():
    """spout -> acker -> spout is a loop in the plan, but not a cycle of the user graph."""
    p = plan_of(linear(acking=True))
    assert ACKER not in p.on_cycle
    assert "zsrc" not in p.on_cycle


def test_two_separate_cycles():
    t = Topology("two", config={"topology.acker.executors": 0})
    t.set_spout("s1", Src())
    t.set_spout("s2", Src())
    t.set_bolt("a", Pass()).shuffle_grouping("s1").shuffle_grouping("b")
    t.set_bolt("b", Pass()).shuffle_grouping("a")
    t.set_bolt("c", Pass()).shuffle_grouping("s2").shuffle_grouping("c")
    t.set_bolt("d", Pass()).shuffle_grouping("c")
    on, feeds = find_cycles(t.components)
    assert on == {"a", "b", "c"}
    assert feeds == {"s1", "s2"}


def test_long_chain_does_not_hit_the_recursion_limit():
    t = Topology("long", config={"topology.acker.executors": 0})
    t.set_spout("src", Src())
    prev = "src"
    for i in range(2000):
        t.set_bolt(f"b{i:04d}", Pass()).shuffle_grouping(prev)
        prev = f"b{i:04d}"
    t.components["b0000"].subscriptions.append(Subscription(prev, "default", "shuffle"))
    on, feeds = find_cycles(t.components)
    assert len(on) == 2000
    assert feeds == {"src"}
