"""A component's resolved config in the runtime: what open/prepare receive, the queue and
batch each task is built with, and `topology.debug`."""

from __future__ import annotations

import logging

from stormish import Topology, rowcodec
from stormish.runtime.acker import AckerBolt
from stormish.runtime.plan import build_plan
from stormish.runtime.worker import Worker, emit_batch

from .idle import IdleBolt, IdleSpout

QUEUE = "topology.executor.receive.buffer.size"
BATCH = "topology.producer.batch.size"


class Words(IdleSpout):
    outputs = ["word"]


class Pass(IdleBolt):
    outputs = ["word"]


def plan_of(t: Topology, extra=None):
    return build_plan(t, t.validate(extra), AckerBolt())


def chain(config=None, end_config=None) -> Topology:
    """words -> mid -> end; `mid` sets its own queue."""
    t = Topology("chain", config=config)
    t.set_spout("words", Words())
    t.set_bolt("mid", Pass(), parallelism=2).shuffle_grouping("words").add_configuration(QUEUE, 64)
    end = t.set_bolt("end", Pass()).shuffle_grouping("mid")
    for k, v in (end_config or {}).items():
        end.add_configuration(k, v)
    return t


def test_component_conf_carries_application_keys_component_winning():
    t = Topology("app", config={"fake.config": 123, "app.shared": "topology"})
    t.set_spout("words", Words()).add_configuration("app.shared", "spout")
    t.set_bolt("b", Pass()).shuffle_grouping("words")
    plan = plan_of(t, {"app.cli": [1, 2]})
    spout, bolt = plan.component_conf("words"), plan.component_conf("b")
    assert spout["fake.config"] == bolt["fake.config"] == 123
    assert spout["app.shared"] == "spout" and bolt["app.shared"] == "topology"
    assert bolt["app.cli"] == [1, 2]


def test_component_conf_has_the_component_s_queue_and_a_batch_that_follows_it():
    plan = plan_of(chain())
    assert plan.component_conf("mid")[QUEUE] == 64
    assert plan.component_conf("mid")[BATCH] == 32
    assert plan.component_conf("end")[QUEUE] == 4096
    assert plan.component_conf("end")[BATCH] == 512


def test_each_task_s_queue_and_emit_batch_come_from_its_component():
    """Item 12: the queue keys set on one bolt were validated, then ignored (every queue
    had the topology's capacity, every collector the topology's batch)."""
    plan = plan_of(chain())
    w = Worker(plan, 0)
    caps = {plan.task_component[t]: q.capacity for t, q in w.queues.items()}
    assert caps == {"words": 4096, "mid": 64, "end": 4096, "__acker": 4096}
    batches = {plan.task_component[t]: ex.collector.batch_size for t, ex in w.executors.items()}
    # words publishes into mid's queue of 64: at most half of it
    assert batches == {"words": 32, "mid": 32, "end": 512, "__acker": 512}
    for t in plan.tasks["mid"]:
        assert w.executors[t].conf[QUEUE] == 64


def test_emit_batch_keeps_an_explicit_batch_that_fits_every_consumer():
    plan = plan_of(chain({BATCH: 16}))
    confs = {n: plan.component_conf(n) for n in plan.components}
    assert {n: emit_batch(plan, n, confs) for n in ("words", "mid", "end")} == {
        "words": 16,
        "mid": 16,
        "end": 16,
    }


def test_debug_off_leaves_the_collector_s_emit_bound_directly():
    plan = plan_of(chain({"topology.acker.executors": 0}))
    w = Worker(plan, 0)
    for ex in w.executors.values():
        assert _unwrapped(ex.obj.emit, ex.collector)  # the collector's own: no wrapper


def test_debug_logs_every_emit_of_the_components_that_turn_it_on(caplog):
    plan = plan_of(chain({"topology.acker.executors": 0}, {"topology.debug": True}))
    w = Worker(plan, 0)
    by_name = {ex.component: ex for ex in w.executors.values()}
    assert _unwrapped(by_name["mid"].obj.emit, by_name["mid"].collector)
    with caplog.at_level(logging.INFO, logger="stormish.debug"):
        by_name["end"].obj.emit(["cow"])
        by_name["end"].obj.emit_many([["a"], ["b"]], stream="default")
    lines = [r.getMessage() for r in caplog.records if r.name == "stormish.debug"]
    task = plan.tasks["end"][0]
    assert lines == [
        f"end[{task}] emit ['cow']",
        f"end[{task}] emit_many [['a'], ['b']], stream='default'",
    ]
    assert by_name["end"].collector.emitted() == {"default": 3}  # and still went through


def test_debug_for_the_whole_topology_wraps_every_component():
    plan = plan_of(chain({"topology.acker.executors": 0, "topology.debug": True}))
    w = Worker(plan, 0)
    for ex in w.executors.values():
        assert getattr(ex.obj.emit, "__self__", None) is None


def _unwrapped(emit, collector) -> bool:
    """The collector's bound emit, or the fast closure it made (bound_emit), no logger."""
    if getattr(emit, "__self__", None) is collector:
        return True
    if rowcodec.Emitter is not None and type(emit) is rowcodec.Emitter:
        return True  # the compiled fast emit (UntrackedCollector.bound_emit)
    return emit.__qualname__.startswith(type(collector).__name__ + ".bound_emit.")
