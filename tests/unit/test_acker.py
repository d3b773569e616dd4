"""AckerLedger: XOR completion in any message order, failure, reset and expiry."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stormish.runtime.ack_folder import announcement
from stormish.runtime.acker import (
    COMPLETE,
    EVERY_SPOUT,
    FAILED,
    AckerBolt,
    AckerLedger,
    rotation_period,
)
from stormish.runtime.plan import (
    ACK_ACK,
    ACK_FAIL,
    ACK_INIT,
    ACK_RESET,
    COMMITTED_ACKS,
    FIRST_DONE,
)
from stormish.tuple import TICK_STREAM

ROOT, SPOUT = 123456789, 7


def test_single_edge_tree_completes_on_ack_after_init():
    led = AckerLedger()
    assert led.init(ROOT, 0b1010, SPOUT) is None
    assert len(led) == 1
    assert led.ack(ROOT, 0b1010) == (COMPLETE, ROOT, SPOUT, None)
    assert len(led) == 0


def test_init_after_acks_completes_on_init():
    led = AckerLedger()
    e1, e2 = 0x11, 0x22
    assert led.ack(ROOT, e1) is None
    assert led.ack(ROOT, e2) is None
    assert len(led) == 1
    assert led.init(ROOT, e1 ^ e2, SPOUT) == (COMPLETE, ROOT, SPOUT, None)
    assert len(led) == 0


def test_zero_value_without_init_does_not_complete():
    """XOR 0 is not enough: the spout task must be known (the init has not arrived)."""
    led = AckerLedger()
    assert led.ack(ROOT, 5) is None
    assert led.ack(ROOT, 5) is None  # value back to 0, but no spout task yet
    assert len(led) == 1
    assert led.init(ROOT, 0, SPOUT) == (COMPLETE, ROOT, SPOUT, None)


def test_init_with_zero_value_completes_at_once():
    """A spout tuple with no consumers: the init alone completes the tree."""
    led = AckerLedger()
    assert led.init(ROOT, 0, SPOUT) == (COMPLETE, ROOT, SPOUT, None)
    assert len(led) == 0


def test_partial_acks_keep_the_tree_open():
    led = AckerLedger()
    e1, e2, e3 = 1 << 3, 1 << 17, 1 << 40
    assert led.init(ROOT, e1 ^ e2, SPOUT) is None
    # the bolt that received e1 emits e3 anchored and acks e1: sends e1 ^ e3
    assert led.ack(ROOT, e1 ^ e3) is None
    assert led.ack(ROOT, e2) is None
    assert led.ack(ROOT, e3) == (COMPLETE, ROOT, SPOUT, None)


def test_fail_after_init_reports_failed():
    led = AckerLedger()
    led.init(ROOT, 99, SPOUT)
    assert led.fail(ROOT) == (FAILED, ROOT, SPOUT, None)
    assert len(led) == 0


def test_a_fail_before_its_spout_task_is_known_is_told_at_once_to_every_spout():
    """Storm's acker tells the spout of a fail as soon as it knows the spout task, which
    its spout's init brings at once. An announced tree's init comes with its first
    tuple's ack, which a window holds for its whole length: the fail waited as long."""
    led = AckerLedger()
    assert led.fail(ROOT, ("sink", None)) == (FAILED, ROOT, EVERY_SPOUT, ("sink", None))
    assert len(led) == 0  # dropped, as Storm drops a failed tree


def test_trees_are_independent():
    led = AckerLedger()
    other = ROOT + 1
    led.init(ROOT, 4, SPOUT)
    led.init(other, 4, SPOUT + 1)
    assert led.ack(other, 4) == (COMPLETE, other, SPOUT + 1, None)
    assert len(led) == 1
    assert led.fail(ROOT) == (FAILED, ROOT, SPOUT, None)


def test_reset_unknown_root_is_none():
    assert AckerLedger().reset(ROOT) is None


def test_reset_before_init_is_none_but_keeps_the_entry():
    led = AckerLedger()
    led.ack(ROOT, 8)
    assert led.reset(ROOT) is None
    assert len(led) == 1


def test_reset_returns_spout_task_and_extends_life():
    led = AckerLedger()
    led.init(ROOT, 8, SPOUT)
    led.rotate()
    assert led.reset(ROOT) == SPOUT  # back in the newest generation
    assert led.rotate() == 0
    assert len(led) == 1
    assert led.rotate() == 1
    assert len(led) == 0


def test_untouched_entries_expire_after_two_rotations():
    """Two generations: an entry lives between one and two rotation periods."""
    led = AckerLedger()
    led.init(ROOT, 8, SPOUT)
    assert led.rotate() == 0
    assert len(led) == 1
    assert led.rotate() == 1
    assert len(led) == 0
    # a late ack for the expired tree starts a fresh, incomplete entry: no outcome
    assert led.ack(ROOT, 8) is None
    assert len(led) == 1


def test_an_entry_survives_one_rotation_with_its_state():
    led = AckerLedger()
    led.init(ROOT, 1 | 2, SPOUT)
    led.rotate()
    assert led.ack(ROOT, 1) is None
    assert led.ack(ROOT, 2) == (COMPLETE, ROOT, SPOUT, None)
    assert len(led) == 0
    assert led.rotate() == 0


def test_expiry_counts_every_expired_tree():
    led = AckerLedger()
    for r in range(5):
        led.init(r + 1, 1, SPOUT)
    led.rotate()
    led.init(100, 1, SPOUT)
    assert led.rotate() == 5
    assert led.rotate() == 1
    assert led.rotate() == 0


def test_reset_of_an_expired_tree_is_none():
    led = AckerLedger()
    led.init(ROOT, 1, SPOUT)
    led.rotate()
    led.rotate()
    assert led.reset(ROOT) is None
    assert len(led) == 0


# -- property: a random tree, messages in any order
@st.composite
def tree_messages(draw, root: int, spout: int):
    """A random tuple tree: node 0 is the spout tuple; every other node has a parent and an
    edge id. Edge ids are distinct powers of two, so no proper subset of messages can XOR
    to 0 by accident. Messages: the spout's init (XOR of its child edges) and one ack per
    delivered tuple (its edge XOR its children's edges), in a random order."""
    n_nodes = draw(st.integers(1, 12))
    parents = [draw(st.integers(0, i - 1)) for i in range(1, n_nodes)]
    bits = draw(st.permutations(list(range(64)))) if n_nodes > 1 else []
    edge = {i: 1 << bits[i - 1] for i in range(1, n_nodes)}
    children: dict[int, list[int]] = {i: [] for i in range(n_nodes)}
    for child, parent in enumerate(parents, start=1):
        children[parent].append(child)

    def xor_children(node: int) -> int:
        v = 0
        for c in children[node]:
            v ^= edge[c]
        return v

    msgs = [("init", root, xor_children(0), spout)]
    msgs += [("ack", root, edge[i] ^ xor_children(i)) for i in range(1, n_nodes)]
    return draw(st.permutations(msgs))


def deliver(led: AckerLedger, msg):
    if msg[0] == "init":
        return led.init(msg[1], msg[2], msg[3])
    return led.ack(msg[1], msg[2])


@settings(max_examples=150, deadline=None)
@given(msgs=tree_messages(ROOT, SPOUT))
def test_tree_completes_exactly_once_at_the_last_message(msgs):
    led = AckerLedger()
    outcomes = [deliver(led, m) for m in msgs]
    assert outcomes[:-1] == [None] * (len(msgs) - 1)
    assert outcomes[-1] == (COMPLETE, ROOT, SPOUT, None)
    assert len(led) == 0


@settings(max_examples=80, deadline=None)
@given(a=tree_messages(1, 3), b=tree_messages(2, 4), data=st.data())
def test_interleaved_trees_each_complete_at_their_own_last_message(a, b, data):
    order = data.draw(st.permutations([0] * len(a) + [1] * len(b)))
    streams = [iter(a), iter(b)]
    remaining = [len(a), len(b)]
    led = AckerLedger()
    done = []
    for which in order:
        out = deliver(led, next(streams[which]))
        remaining[which] -= 1
        if remaining[which] == 0:
            assert out == (COMPLETE, which + 1, which + 3, None)
            done.append(which)
        else:
            assert out is None
    assert sorted(done) == [0, 1]
    assert len(led) == 0


@settings(max_examples=60, deadline=None)
@given(msgs=tree_messages(ROOT, SPOUT), data=st.data())
def test_a_fail_anywhere_gives_failed_once_the_spout_is_known(msgs, data):
    at = data.draw(st.integers(0, len(msgs) - 1))  # the fail comes before the last message
    seq = list(msgs[:at]) + [("fail", ROOT)] + list(msgs[at:])
    led = AckerLedger()
    outcomes = []
    for m in seq:
        outcomes.append(led.fail(ROOT) if m[0] == "fail" else deliver(led, m))
    init_at = next(i for i, m in enumerate(seq) if m[0] == "init")
    told = SPOUT if init_at < at else EVERY_SPOUT
    assert outcomes[:at] == [None] * at
    assert outcomes[at] == (FAILED, ROOT, told, None)  # at once, in either case
    # no second fail; a late completion (the acks made a new entry) finds the spout's
    # in-flight map without the root, which the fail popped
    assert all(o is None or o[0] == COMPLETE for o in outcomes[at + 1 :])


def test_a_fail_after_completion_reports_nothing():
    led = AckerLedger()
    assert led.init(ROOT, 4, SPOUT) is None
    assert led.ack(ROOT, 4) == (COMPLETE, ROOT, SPOUT, None)
    # late: the tree is gone, the spout task unknown; every spout task hears it and
    # finds nothing in flight
    assert led.fail(ROOT) == (FAILED, ROOT, EVERY_SPOUT, None)


# -- the bolt around the ledger
class FakeDirect:
    def __init__(self):
        self.sent: list[tuple] = []

    def __call__(self, task, values, stream):
        self.sent.append((task, values, stream))


def prepared_acker(timeout: float = 30) -> AckerBolt:
    bolt = AckerBolt()
    bolt.spout_tasks = (SPOUT, SPOUT + 1)  # as build_plan sets them
    bolt.prepare({"topology.message.timeout.secs": timeout}, None)
    return bolt


def test_acker_bolt_routes_outcomes_to_the_spout_task():
    bolt, out = prepared_acker(), FakeDirect()
    rnd = random.Random(1)
    e = rnd.getrandbits(63)
    bolt.execute_raw(ACK_INIT, [(ROOT, e, SPOUT), (ROOT + 1, 6, SPOUT + 1)], out)
    assert out.sent == []
    bolt.execute_raw(ACK_ACK, [(ROOT, e)], out)
    bolt.execute_raw(ACK_FAIL, [(ROOT + 1, ("bolt", "ValueError: x"), 0)], out)
    assert out.sent == [
        (SPOUT, ([ROOT],), ACK_ACK),
        (SPOUT + 1, (ROOT + 1, ("bolt", "ValueError: x")), ACK_FAIL),
    ]


def test_acker_bolt_forwards_reset_to_known_spout_only():
    bolt, out = prepared_acker(), FakeDirect()
    bolt.execute_raw(ACK_INIT, [(ROOT, 5, SPOUT)], out)
    bolt.execute_raw(ACK_RESET, [(ROOT, 0), (ROOT + 1, 0)], out)
    assert out.sent == [(SPOUT, (ROOT,), ACK_RESET)]


def test_acker_bolt_tick_rotates_and_counts_expired():
    bolt, out = prepared_acker(timeout=10), FakeDirect()
    assert rotation_period(10) == pytest.approx(10.0)  # a tick per message timeout
    bolt.execute_raw(ACK_INIT, [(ROOT, 5, SPOUT)], out)
    bolt.execute_raw(TICK_STREAM, [("tick",)], out)
    assert bolt.expired == 0
    bolt.execute_raw(TICK_STREAM, [("tick",)], out)
    assert bolt.expired == 1
    assert out.sent == []


def test_acker_bolt_acks_before_init_complete_on_init():
    bolt, out = prepared_acker(), FakeDirect()
    bolt.execute_raw(ACK_ACK, [(ROOT, 3), (ROOT, 5)], out)
    assert out.sent == []
    bolt.execute_raw(ACK_INIT, [(ROOT, 3 ^ 5, SPOUT)], out)
    assert out.sent == [(SPOUT, ([ROOT],), ACK_ACK)]
    assert len(bolt.ledger) == 0


def test_acker_bolt_fail_before_init_is_told_to_every_spout_task_at_once():
    bolt, out = prepared_acker(), FakeDirect()
    bolt.execute_raw(ACK_FAIL, [(ROOT, ("bolt", None), 0)], out)
    failed = (ROOT, ("bolt", None))
    assert out.sent == [(SPOUT, failed, ACK_FAIL), (SPOUT + 1, failed, ACK_FAIL)]
    bolt.execute_raw(ACK_ACK, [(ROOT, 9)], out)
    bolt.execute_raw(ACK_INIT, [(ROOT, 9, SPOUT)], out)
    # late: the fail popped the root from the spout's in-flight map, which ignores this
    assert out.sent[2:] == [(SPOUT, ([ROOT],), ACK_ACK)]


def test_acker_bolt_ack_of_an_entry_from_the_previous_generation():
    bolt, out = prepared_acker(), FakeDirect()
    bolt.execute_raw(ACK_INIT, [(ROOT, 12, SPOUT)], out)
    bolt.execute_raw(TICK_STREAM, [("tick",)], out)
    bolt.execute_raw(ACK_ACK, [(ROOT, 12)], out)
    assert out.sent == [(SPOUT, ([ROOT],), ACK_ACK)]
    assert len(bolt.ledger) == 0


def test_a_checkpoints_acks_complete_trees_and_their_second_copy_changes_nothing():
    """A stateful task's acks of checkpoint 4, tagged (task, txid), complete the trees
    they finish; the same message again (the task restarted, not knowing whether its
    previous process sent it) is not applied: XOR would reopen a tree still pending."""
    bolt, out = prepared_acker(), FakeDirect()
    other = ROOT + 1
    bolt.execute_raw(ACK_INIT, [(ROOT, 3 ^ 5, SPOUT), (other, 6 ^ 9, SPOUT)], out)
    bolt.execute_raw(ACK_ACK, [(ROOT, 3)], out)  # a stateless bolt's ack
    tagged = (COMMITTED_ACKS, (11, 4, [(ROOT, 5), (other, 6)]))
    bolt.execute_raw(ACK_ACK, [tagged], out)
    assert out.sent == [(SPOUT, ([ROOT],), ACK_ACK)]  # `other` waits for another edge
    bolt.execute_raw(ACK_ACK, [tagged], out)  # sent again after a restart
    assert bolt.ledger.repeated == 1
    bolt.execute_raw(ACK_ACK, [(other, 9)], out)
    assert out.sent[-1] == (SPOUT, ([other],), ACK_ACK)
    assert len(bolt.ledger) == 0
    # another txid, or another task's acks of txid 4, are applied
    assert bolt.ledger.committed((11, 5, [(ROOT + 2, 1)])) == []
    assert bolt.ledger.committed((12, 4, [(ROOT + 2, 1)])) == []
    assert bolt.ledger.repeated == 1 and len(bolt.ledger) == 1


def test_a_checkpoints_tag_is_forgotten_with_the_entries():
    """A tag lives as long as an entry (two rotations): by then the trees it acked have
    completed or timed out at their spouts."""
    led = AckerLedger()
    led.committed((11, 4, [(ROOT, 5)]))
    led.rotate()
    led.committed((11, 4, [(ROOT, 5)]))
    assert led.repeated == 1
    led.rotate()
    led.rotate()
    led.committed((11, 4, [(ROOT, 5)]))
    assert led.repeated == 1


@settings(max_examples=100, deadline=None)
@given(msgs=tree_messages(ROOT, SPOUT), data=st.data())
def test_acker_bolt_batches_complete_a_tree_exactly_once(msgs, data):
    """The same messages through execute_raw, in batches split at random points."""
    bolt, out = prepared_acker(), FakeDirect()
    i = 0
    while i < len(msgs):
        kind = msgs[i][0]
        j = i
        while j < len(msgs) and msgs[j][0] == kind:
            j += 1
        j = data.draw(st.integers(i + 1, j))
        if kind == "init":
            bolt.execute_raw(ACK_INIT, [m[1:] for m in msgs[i:j]], out)
        else:
            bolt.execute_raw(ACK_ACK, [m[1:] for m in msgs[i:j]], out)
        i = j
        if i < len(msgs):
            assert out.sent == []
    assert out.sent == [(SPOUT, ([ROOT],), ACK_ACK)]
    assert len(bolt.ledger) == 0


# -- announced trees: the spout's one first delivery carries the init (ack_folder.py)
@st.composite
def announced_tree_messages(draw, root: int, spout: int):
    """As tree_messages, for a tree whose spout tuple has one delivery (node 1): its edge
    is the announcement, and the spout sends no init. Messages: one ack per tuple."""
    n_nodes = draw(st.integers(2, 12))
    parents = [0] + [draw(st.integers(1, i - 1)) for i in range(2, n_nodes)]
    bits = draw(st.permutations(list(range(63))))
    edge = {i: 1 << bits[i - 1] for i in range(2, n_nodes)}
    edge[1] = announcement(spout)
    children: dict[int, list[int]] = {i: [] for i in range(n_nodes)}
    for child, parent in enumerate(parents, start=1):
        children[parent].append(child)

    def xor_children(node: int) -> int:
        v = 0
        for c in children[node]:
            v ^= edge[c]
        return v

    msgs = [("ack", root, edge[i] ^ xor_children(i)) for i in range(1, n_nodes)]
    return draw(st.permutations(msgs))


@settings(max_examples=150, deadline=None)
@given(msgs=announced_tree_messages(ROOT, SPOUT))
def test_an_announced_tree_completes_exactly_once_at_the_last_message(msgs):
    led = AckerLedger()
    outcomes = [deliver(led, m) for m in msgs]
    assert outcomes[:-1] == [None] * (len(msgs) - 1)
    assert outcomes[-1] == (COMPLETE, ROOT, SPOUT, None)
    assert len(led) == 0


@settings(max_examples=100, deadline=None)
@given(msgs=announced_tree_messages(ROOT, SPOUT), data=st.data())
def test_an_announced_tree_through_the_bolt_in_any_batches(msgs, data):
    bolt, out = prepared_acker(), FakeDirect()
    i = 0
    while i < len(msgs):
        j = data.draw(st.integers(i + 1, len(msgs)))
        bolt.execute_raw(ACK_ACK, [m[1:] for m in msgs[i:j]], out)
        i = j
        if i < len(msgs):
            assert out.sent == []
    assert out.sent == [(SPOUT, ([ROOT],), ACK_ACK)]
    assert len(bolt.ledger) == 0


@settings(max_examples=80, deadline=None)
@given(msgs=announced_tree_messages(ROOT, SPOUT), data=st.data())
def test_a_fail_in_an_announced_tree_wins_once_the_spout_is_known(msgs, data):
    """A fail of the announced tuple (in place of its ack) names the spout task itself;
    a fail of any other tuple before the announced tuple's ack names none, and is told
    at once to every spout task."""
    announced = next(i for i, m in enumerate(msgs) if m[2] >> 64)
    if data.draw(st.booleans()):  # the announced tuple fails
        seq = list(msgs)
        seq[announced] = ("fail", SPOUT)
        first = announced
    else:
        at = data.draw(st.integers(0, len(msgs) - 1))
        seq = list(msgs[:at]) + [("fail", 0)] + list(msgs[at:])
        first = at
    led = AckerLedger()
    outcomes = []
    for m in seq:
        outcomes.append(led.fail(ROOT, None, m[1]) if m[0] == "fail" else deliver(led, m))
    known = seq[first][1] == SPOUT or any(m[2] >> 64 for m in seq[:first] if m[0] != "fail")
    assert outcomes[:first] == [None] * first
    assert outcomes[first] == (FAILED, ROOT, SPOUT if known else EVERY_SPOUT, None)
    assert all(o is None or o[0] == COMPLETE for o in outcomes[first + 1 :])


def test_announced_leaves_complete_at_once_without_an_entry_one_list_per_spout():
    bolt, out = prepared_acker(), FakeDirect()
    a, b = announcement(SPOUT), announcement(SPOUT + 1)
    bolt.execute_raw(ACK_ACK, [(ROOT, a), (ROOT + 1, b), (ROOT + 2, a)], out)
    assert out.sent == [
        (SPOUT, ([ROOT, ROOT + 2],), ACK_ACK),
        (SPOUT + 1, ([ROOT + 1],), ACK_ACK),
    ]
    assert len(bolt.ledger) == 0


def test_a_done_list_goes_to_the_spout_as_it_is():
    bolt, out = prepared_acker(), FakeDirect()
    roots = [ROOT, ROOT + 1, ROOT + 2]
    bolt.execute_raw(ACK_ACK, [(FIRST_DONE, (SPOUT, roots))], out)
    assert out.sent == [(SPOUT, (roots,), ACK_ACK)]
    assert len(bolt.ledger) == 0


def test_a_done_list_after_a_fail_of_its_root_changes_nothing_the_spout_heard():
    """A fail whose task is not known yet goes to every spout task at once; the done
    list's later ack of that root reaches the spout after the fail popped it."""
    bolt, out = prepared_acker(), FakeDirect()
    bolt.execute_raw(ACK_FAIL, [(ROOT + 1, ("bolt", None), 0)], out)
    assert [task for task, _, _ in out.sent] == [SPOUT, SPOUT + 1]
    bolt.execute_raw(ACK_ACK, [(FIRST_DONE, (SPOUT, [ROOT, ROOT + 1]))], out)
    assert out.sent[2:] == [(SPOUT, ([ROOT, ROOT + 1],), ACK_ACK)]
    assert len(bolt.ledger) == 0


def test_a_fail_of_an_announced_tuple_is_told_at_once():
    bolt, out = prepared_acker(), FakeDirect()
    bolt.execute_raw(ACK_FAIL, [(ROOT, ("bolt", "E: x"), SPOUT)], out)
    assert out.sent == [(SPOUT, (ROOT, ("bolt", "E: x")), ACK_FAIL)]
    bolt.execute_raw(ACK_ACK, [(ROOT, announcement(SPOUT))], out)  # late: a new entry
    assert out.sent[-1] == (SPOUT, ([ROOT],), ACK_ACK)  # the spout finds nothing


def test_a_reset_of_an_announced_tuple_reaches_its_spout():
    bolt, out = prepared_acker(), FakeDirect()
    bolt.execute_raw(ACK_RESET, [(ROOT, SPOUT), (ROOT + 1, 0)], out)
    assert out.sent == [(SPOUT, (ROOT,), ACK_RESET)]
    assert len(bolt.ledger) == 0


def test_committed_acks_carry_an_announcement():
    bolt, out = prepared_acker(), FakeDirect()
    tagged = (COMMITTED_ACKS, (11, 4, [(ROOT, announcement(SPOUT) ^ 6)]))
    bolt.execute_raw(ACK_ACK, [tagged], out)
    assert out.sent == []
    bolt.execute_raw(ACK_ACK, [(ROOT, 6)], out)
    assert out.sent == [(SPOUT, ([ROOT],), ACK_ACK)]
