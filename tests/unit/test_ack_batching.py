"""Batched acking: combined acks, `emit_many` trees, `ack_batch`, checked against the
acker's ledger with real collectors and receive queues."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stormish import Topology, TopologyError
from stormish.runtime.acker import COMPLETE, FAILED, AckerBolt, AckerLedger
from stormish.runtime.emitters import make_collector
from stormish.runtime.plan import ACK_ACK, ACK_FAIL, ACK_INIT, build_plan
from stormish.runtime.queue import ReceiveQueue
from stormish.tuple import Source, TrackedTuple, Tuple, TupleBatch

from .idle import IdleBolt, IdleSpout


class Src(IdleSpout):
    outputs = ["x"]


class Mid(IdleBolt):
    outputs = ["y"]


class End(IdleBolt):
    pass


def make(mid_tasks: int = 2, batch_size: int = 4, seed: int = 1):
    t = Topology("acks", config={"topology.acker.executors": 1})
    t.set_spout("src", Src())
    t.set_bolt("mid", Mid(), parallelism=mid_tasks).shuffle_grouping("src")
    t.set_bolt("end", End()).shuffle_grouping("mid")
    plan = build_plan(t, t.validate(), AckerBolt())
    queues = {task: ReceiveQueue(1 << 20) for task in plan.task_component}

    def collector(component: str, index: int = 0):
        task = plan.tasks[component][index]
        return make_collector(
            plan, task, queues, set(queues), batch_size, random.Random(seed + task)
        )

    return plan, queues, collector


def received(q: ReceiveQueue) -> list[tuple]:
    out = []
    while True:
        batches = q.consume()
        if batches is None:
            return out
        out.extend(batches)


def tuples_of(batches, source: Source) -> list[Tuple]:
    out: list[Tuple] = []
    for _src, _stream, values, metas in batches:
        for v, m in zip(values, metas, strict=True):
            out.append(TrackedTuple(v, source, m) if m else Tuple(v, source))
    return out


def feed_acker(ledger: AckerLedger, batches) -> list[tuple[str, int, int]]:
    outcomes = []
    for _src, stream, values, _m in batches:
        for v in values:
            if stream == ACK_INIT:
                out = ledger.init(*v)
            elif stream == ACK_ACK:
                out = ledger.ack(*v)
            elif stream == ACK_FAIL:
                out = ledger.fail(*v)
            else:
                raise AssertionError(stream)
            if out is not None:
                outcomes.append(out)
    return outcomes


SRC_SOURCE = Source("src", 0, "default", ["x"])


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(0, 60),
    batch_size=st.integers(1, 9),
    seed=st.integers(0, 2**16),
    flush_every=st.integers(1, 20),
)
def test_an_emit_many_tree_completes_once_after_every_row_is_acked(
    n, batch_size, seed, flush_every
):
    plan, queues, collector = make(batch_size=batch_size, seed=seed)
    (acker,) = plan.tasks["__acker"]
    spout = collector("src")
    tracked = {}
    spout.reliable = lambda root, msg_id, *_rest: tracked.setdefault(root, msg_id)
    rows = [(i,) for i in range(n)]
    spout.emit_many(rows, msg_id="batch-1")
    spout.flush_all()
    (root,) = tracked
    ledger = AckerLedger()
    assert feed_acker(ledger, received(queues[acker])) == (
        [(COMPLETE, root, spout.task, None)] if not n else []
    )
    if not n:
        return  # an empty tree completes on its init
    delivered = []
    for i, task in enumerate(plan.tasks["mid"]):
        delivered += [(i, t) for t in tuples_of(received(queues[task]), SRC_SOURCE)]
    assert sorted(t.values for _, t in delivered) == rows  # every row once, nothing else
    random.Random(seed).shuffle(delivered)
    bolts = [collector("mid", 0), collector("mid", 1)]
    outcomes = []
    for k, (i, tup) in enumerate(delivered):
        bolts[i].ack(tup)
        if k % flush_every == 0 or k == len(delivered) - 1:
            for b in bolts:
                b.flush_all()
            outcomes += feed_acker(ledger, received(queues[acker]))
            if k < len(delivered) - 1:
                assert outcomes == []  # never before the last row
    assert outcomes == [(COMPLETE, root, spout.task, None)]
    assert len(ledger) == 0


def test_acks_for_one_root_between_flushes_are_one_message():
    plan, queues, collector = make(mid_tasks=1, batch_size=1000)
    (acker,) = plan.tasks["__acker"]
    spout = collector("src")
    spout.reliable = lambda root, msg_id, *_rest: None
    spout.emit_many([(i,) for i in range(500)], msg_id=7)
    spout.flush_all()
    (mid_task,) = plan.tasks["mid"]
    tuples = tuples_of(received(queues[mid_task]), SRC_SOURCE)
    init = received(queues[acker])
    bolt = collector("mid")
    for t in tuples:
        bolt.ack(t)
    assert bolt.buffered() == 1  # one pending (root, xor)
    bolt.flush_all()
    acks = received(queues[acker])
    assert [len(values) for _s, _st, values, _m in acks] == [1]
    ledger = AckerLedger()
    assert [o[0] for o in feed_acker(ledger, init + acks)] == [COMPLETE]


def test_ack_batch_and_anchored_emit_many_complete_the_tree():
    """mid gets a batch, emits 3 children per input with emit_many anchored to it, acks
    the batch with ack_batch; end acks the children one by one."""
    plan, queues, collector = make(mid_tasks=1, batch_size=7)
    (acker,) = plan.tasks["__acker"]
    spout = collector("src")
    spout.reliable = lambda root, msg_id, *_rest: None
    spout.emit_many([(i,) for i in range(20)], msg_id="m")
    spout.flush_all()
    ledger = AckerLedger()
    outcomes = feed_acker(ledger, received(queues[acker]))
    mid = collector("mid")
    (mid_task,) = plan.tasks["mid"]
    got = received(queues[mid_task])
    assert len(got) == 3  # 20 rows in batches of 7
    for _src, _stream, values, metas in got:
        batch = TupleBatch(values, SRC_SOURCE, metas, mid)
        for tup in list(batch)[:3]:  # iterate part of it: those carry the children's edges
            mid.emit_many([(tup.values[0] * 10 + k,) for k in range(3)], anchors=tup)
        mid.ack_batch(batch)
    mid.flush_all()
    outcomes += feed_acker(ledger, received(queues[acker]))
    assert outcomes == []
    (end_task,) = plan.tasks["end"]
    end = collector("end")
    children = tuples_of(received(queues[end_task]), Source("mid", 0, "default", ["y"]))
    assert len(children) == 3 * 3 * 3
    for t in children:
        end.ack(t)
    end.flush_all()
    outcomes += feed_acker(ledger, received(queues[acker]))
    assert [o[0] for o in outcomes] == [COMPLETE]


def test_fail_batch_fails_each_root_once():
    plan, queues, collector = make(mid_tasks=1)
    (acker,) = plan.tasks["__acker"]
    spout = collector("src")
    roots = []
    spout.reliable = lambda root, msg_id, *_rest: roots.append(root)
    spout.emit_many([(1,), (2,)], msg_id="a")
    spout.emit_many([(3,)], msg_id="b")
    spout.flush_all()
    ledger = AckerLedger()
    feed_acker(ledger, received(queues[acker]))
    (mid_task,) = plan.tasks["mid"]
    mid = collector("mid")
    batches = received(queues[mid_task])
    values = [v for b in batches for v in b[2]]
    metas = [m for b in batches for m in b[3]]
    mid.fail_batch(TupleBatch(values, SRC_SOURCE, metas, mid))
    mid.flush_all()
    fails = received(queues[acker])
    assert sorted(v for b in fails for (v, _why, _task) in b[2]) == sorted(roots)
    outcomes = feed_acker(ledger, fails)
    assert sorted(o[1] for o in outcomes) == sorted(roots)
    assert {o[0] for o in outcomes} == {FAILED}


def test_emit_many_checks_every_row_before_emitting_any():
    plan, queues, collector = make()
    spout = collector("src")
    spout.reliable = lambda root, msg_id, *_rest: pytest.fail("nothing may be tracked")
    with pytest.raises(TopologyError) as err:
        spout.emit_many([(1,), (2,), (3, 4)], msg_id=1)
    msg = str(err.value)
    assert "'src'" in msg and "row 2" in msg and "'default'" in msg and "['x']" in msg
    assert "no row was emitted" in msg
    assert spout.buffered() == 0
    with pytest.raises(TopologyError, match="undeclared stream 'nope'"):
        spout.emit_many([(1,)], stream="nope", msg_id=1)


def test_emit_many_acking_off_spreads_rows_in_order_and_acks_the_id_on_emit():
    t = Topology("off", config={"topology.acker.executors": 0})
    t.set_spout("src", Src())
    t.set_bolt("mid", Mid(), parallelism=3).shuffle_grouping("src")
    plan = build_plan(t, t.validate(), AckerBolt())
    queues = {task: ReceiveQueue(1 << 16) for task in plan.task_component}
    (src,) = plan.tasks["src"]
    coll = make_collector(plan, src, queues, set(queues), 4)
    coll.emit_many((i,) for i in range(10))  # any iterable
    coll.emit_many([(i,) for i in range(10, 12)], msg_id="z")
    coll.flush_all()
    assert coll.acked_on_emit == ["z"]
    batches = {task: received(queues[task]) for task in plan.tasks["mid"]}
    assert all(len(b[2]) <= 4 for bs in batches.values() for b in bs)  # the producer batch
    got = {task: [v for b in bs for v in b[2]] for task, bs in batches.items()}
    assert sorted(v for vs in got.values() for v in vs) == [(i,) for i in range(12)]
    for vs in got.values():
        assert vs == sorted(vs)  # each destination sees emission order
    assert coll.emitted() == {"default": 12}


meta_st = st.one_of(
    st.none(),
    st.lists(
        st.tuples(st.sampled_from([11, 12, 13]), st.integers(0, 2**63 - 1)), min_size=1, max_size=3
    ).map(tuple),
)


@settings(max_examples=100, deadline=None)
@given(metas=st.lists(meta_st, min_size=1, max_size=30), iterated=st.integers(0, 30))
def test_ack_batch_sends_what_acking_each_tuple_would(metas, iterated):
    """Any mix of rows (untracked, one root, several roots), part of it iterated and
    anchored to: ack_batch and per-tuple acks give the acker the same XOR per root."""
    plan, queues, collector = make(mid_tasks=1, batch_size=10_000)
    values = [(i,) for i in range(len(metas))]
    per_tuple, batched = collector("mid"), collector("mid")
    tb = TupleBatch(values, SRC_SOURCE, metas, batched)
    it = iter(tb)
    made = [next(it) for _ in range(min(iterated, len(metas)))]
    for k, t in enumerate(made):
        if t.meta:
            t.ack_val ^= k * 7919  # as if children were anchored to it
    batched.ack_batch(tb)
    for i, m in enumerate(metas):
        if i < len(made):
            per_tuple.ack(made[i])
        elif m:
            per_tuple.ack(TrackedTuple(values[i], SRC_SOURCE, m))
    assert batched.acks.acks == per_tuple.acks.acks


@given(st.binary(min_size=0, max_size=8 * 70).map(lambda b: b[: len(b) // 8 * 8]))
def test_xor_words_is_the_xor_of_the_64_bit_words(raw):
    from array import array
    from functools import reduce
    from operator import xor

    from stormish.runtime.ack_folder import xor_words

    assert xor_words(raw) == reduce(xor, array("Q", raw).tolist(), 0)
