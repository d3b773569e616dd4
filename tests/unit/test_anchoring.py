"""Anchoring against the acker's ledger: for any anchoring DAG (several anchors, the same
anchor twice, anchors from several trees) and any order in which the acker hears of it,
a tree completes exactly when its last edge is acked, and never while a tuple of it is
held. Real collectors and receive queues; the acker is the pure ledger.

One edge id per delivery XORed into every anchor cancelled out when two
anchors came from one tree (`anchors=[tup, tup]`, or an aggregate of two tuples of one
spout tuple), completing the tree before the child was acked.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from stormish import Topology
from stormish.runtime.acker import COMPLETE, FAILED, AckerBolt, AckerLedger
from stormish.runtime.emitters import make_collector
from stormish.runtime.plan import ACK_ACK, ACK_FAIL, ACK_INIT, build_plan
from stormish.runtime.queue import ReceiveQueue
from stormish.tuple import Source, TrackedTuple, Tuple

from .idle import IdleBolt, IdleSpout


class Src(IdleSpout):
    outputs = ["x"]


class Mid(IdleBolt):
    outputs = ["x"]


def make(seed: int):
    """src -> mid, and mid -> mid (a cycle): every tuple of the DAG lands at mid."""
    t = Topology("anchoring", config={"topology.acker.executors": 1})
    t.set_spout("src", Src())
    t.set_bolt("mid", Mid()).shuffle_grouping("src").shuffle_grouping("mid")
    plan = build_plan(t, t.validate(), AckerBolt())
    queues = {task: ReceiveQueue(1 << 20) for task in plan.task_component}

    def collector(component: str):
        task = plan.tasks[component][0]
        return make_collector(plan, task, queues, set(queues), 1 << 10, random.Random(seed + task))

    spout, mid = collector("src"), collector("mid")
    roots: dict[object, int] = {}
    spout.reliable = lambda root, msg_id, *_rest: roots.__setitem__(msg_id, root)
    return plan, queues, spout, mid, roots


def arrived(q: ReceiveQueue, source: Source) -> list[Tuple]:
    out: list[Tuple] = []
    while (batches := q.consume()) is not None:
        for _src, _stream, values, metas in batches:
            for v, m in zip(values, metas, strict=True):
                out.append(TrackedTuple(v, source, m) if m else Tuple(v, source))
    return out


def acker_messages(q: ReceiveQueue) -> list[tuple[str, tuple]]:
    out = []
    while (batches := q.consume()) is not None:
        for _src, stream, values, _m in batches:
            out.extend((stream, v) for v in values)
    return out


def deliver(ledger: AckerLedger, stream: str, v: tuple):
    if stream == ACK_INIT:
        return ledger.init(*v)
    if stream == ACK_ACK:
        return ledger.ack(*v)
    assert stream == ACK_FAIL
    return ledger.fail(*v)


SRC = Source("src", 0, "default", ["x"])
MID = Source("mid", 0, "default", ["x"])


@settings(max_examples=150, deadline=None)
@given(
    trees=st.integers(1, 3),
    steps=st.lists(st.tuples(st.sampled_from("eeeaaf"), st.integers(0, 10**6)), max_size=40),
    anchors=st.lists(st.integers(0, 10**6), min_size=1, max_size=4),
    held=st.integers(0, 10**6),
    hold=st.booleans(),
    order_seed=st.integers(0, 2**32),
    seed=st.integers(0, 2**16),
)
def test_a_tree_completes_exactly_when_its_last_edge_is_acked(
    trees, steps, anchors, held, hold, order_seed, seed
):
    plan, queues, spout, mid, roots = make(seed)
    (mid_task,) = plan.tasks["mid"]
    (acker,) = plan.tasks["__acker"]
    for k in range(trees):
        spout.emit((k,), msg_id=k)
    spout.flush_all()
    live = arrived(queues[mid_task], SRC)
    tree_of = {id(t): {r for r, _ in t.meta} for t in live}
    acked: list[Tuple] = []
    for op, pick in steps:
        if not live:
            break
        if op == "e":  # a child anchored to 1-4 live tuples, repeats allowed
            chosen = [live[(pick + a) % len(live)] for a in anchors[: 1 + pick % len(anchors)]]
            mid.emit((pick,), anchors=chosen)
            mid.flush_all()
            (child,) = arrived(queues[mid_task], MID)
            tree_of[id(child)] = {r for r, _ in child.meta}
            assert tree_of[id(child)] == set().union(*(tree_of[id(a)] for a in chosen))
            live.append(child)
        elif op == "a":
            t = live.pop(pick % len(live))
            mid.ack(t)
            acked.append(t)
        else:  # flush the folded acks at an arbitrary point
            mid.flush_all()
    held_tuple = live[held % len(live)] if hold and live else None
    for t in list(live):
        if t is not held_tuple:
            mid.ack(t)
            acked.append(t)
    mid.flush_all()
    spout.flush_all()
    messages = acker_messages(queues[acker])
    random.Random(order_seed).shuffle(messages)

    ledger = AckerLedger()
    done_at: dict[int, int] = {}
    for i, (stream, v) in enumerate(messages):
        out = deliver(ledger, stream, v)
        if out is not None:
            kind, root, _task, _why = out
            assert kind == COMPLETE and root not in done_at
            done_at[root] = i
    blocked = tree_of[id(held_tuple)] if held_tuple is not None else set()
    for root in roots.values():
        if root in blocked:
            assert root not in done_at, "a tree completed while one of its tuples was held"
        else:
            last = max(i for i, (_s, v) in enumerate(messages) if v[0] == root)
            assert done_at.get(root) == last, "a tree completed before its last edge was acked"


def _one_tree(seed: int = 3):
    plan, queues, spout, mid, roots = make(seed)
    spout.emit(("s",), msg_id="m")
    spout.flush_all()
    (root_tuple,) = arrived(queues[plan.tasks["mid"][0]], SRC)
    return plan, queues, spout, mid, roots["m"], root_tuple


class Acker:
    """The ledger fed from the acker task's queue, across several steps of a test."""

    def __init__(self, plan, queues):
        self.ledger = AckerLedger()
        self.queue = queues[plan.tasks["__acker"][0]]

    def verdicts(self) -> list[tuple[str, int, int]]:
        outs = [deliver(self.ledger, s, v) for s, v in acker_messages(self.queue)]
        return [o for o in outs if o is not None]


def test_two_children_anchored_into_one_held_output_keep_the_tree_open_until_it_is_acked():
    """Storm's aggregate case: a spout tuple -> A emits two tuples -> B anchors one output
    to both and holds it. The tree must not complete when A's tuples are acked."""
    plan, queues, spout, mid, root, t0 = _one_tree()
    mid_task = plan.tasks["mid"][0]
    mid.emit(("a",), anchors=[t0])
    mid.emit(("b",), anchors=[t0])
    mid.ack(t0)
    mid.flush_all()
    a, b = arrived(queues[mid_task], MID)
    mid.emit(("ab",), anchors=[a, b])
    mid.ack(a)
    mid.ack(b)
    mid.flush_all()
    (out,) = arrived(queues[mid_task], MID)
    spout.flush_all()
    acker = Acker(plan, queues)
    assert acker.verdicts() == []
    mid.fail(out)  # B fails the held output: the spout must hear of it
    mid.flush_all()
    assert acker.verdicts() == [(FAILED, root, plan.tasks["src"][0], ("mid", None))]


def test_anchoring_twice_to_the_same_tuple_keeps_the_tree_open():
    """Storm's test-acking-self-anchor shape: `anchors=[tup, tup]`."""
    plan, queues, spout, mid, root, t0 = _one_tree()
    mid.emit(("c",), anchors=[t0, t0])
    mid.ack(t0)
    mid.flush_all()
    spout.flush_all()
    (child,) = arrived(queues[plan.tasks["mid"][0]], MID)
    acker = Acker(plan, queues)
    assert acker.verdicts() == []
    mid.ack(child)
    mid.flush_all()
    assert acker.verdicts() == [(COMPLETE, root, plan.tasks["src"][0], None)]


def test_reset_timeout_reaches_the_acker_at_once_not_when_execute_returns():
    """The reset sat in the acker outbox until `execute` returned, so a
    bolt that resets in the middle of a long `execute` reset nothing."""
    plan, queues, spout, mid, root, t0 = _one_tree()
    spout.flush_all()
    acker_q = queues[plan.tasks["__acker"][0]]
    acker_messages(acker_q)  # the init
    mid.reset_timeout(t0)  # no flush_all: execute has not returned
    # the reset names the spout task the tuple's edge announces (ack_folder.py)
    assert acker_messages(acker_q) == [("__ack_reset", (root, plan.tasks["src"][0]))]


def test_the_acker_keeps_a_tree_a_whole_message_timeout_whenever_it_started():
    """Rotated every half timeout, the acker forgot a tree after 0.5-1 x
    the timeout, while the spout waits 1-1.5 x: an ack at 0.8 x was lost. Here the tree
    starts just before a tick, the worst case, and its last ack comes at 0.99 x."""
    from stormish.runtime.acker import rotation_period
    from stormish.runtime.ticks import TickSchedule

    timeout = 10.0
    period = rotation_period(timeout)
    sched = TickSchedule({1: period}, 0.0)
    ledger = AckerLedger()
    start = period - 0.001  # just before the first tick
    assert ledger.init(7, 5, 2) is None

    def advance_to(end: float) -> None:  # the tick loop wakes for every tick
        while (at := sched.next_due()) is not None and at <= end:
            for _task in sched.due(at):
                ledger.rotate()

    advance_to(start)
    advance_to(start + 0.99 * timeout)
    assert ledger.ack(7, 5) == (COMPLETE, 7, 2, None)
