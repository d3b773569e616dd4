"""The checkpoint protocol's pure parts as scenarios: the spout's driver on a fake clock
(ported from Storm's CheckpointSpoutTest), barrier alignment and the stateful bolt's ack
deferral (from StatefulBoltExecutorTest and CheckpointTupleForwarderTest)."""

from __future__ import annotations

import pytest

from stormish.state.protocol import (
    ACK,
    ACK_BARRIER,
    COMMIT,
    COMMIT_STATE,
    COMMITTED,
    COMMITTING,
    EXECUTE,
    FAIL,
    FAIL_BARRIER,
    FORWARD,
    INIT_STATE,
    INITSTATE,
    OLD,
    PREPARE,
    PREPARE_STATE,
    PREPARING,
    PROCESS,
    ROLLBACK,
    ROLLBACK_STATE,
    STALE,
    WAIT,
    BarrierAligner,
    CheckpointDriver,
    Emit,
    Save,
    StatefulCore,
    TxState,
    emission_number,
)
from stormish.testing import FakeClock


def emits(out):
    return [(i.txid, i.action) for i in out if isinstance(i, Emit)]


# -- TxState (Storm's CheckPointState) ----------------------------------------------------------
@pytest.mark.parametrize(
    "state, recovering, nxt, action",
    [
        (TxState(1, COMMITTED), False, TxState(2, PREPARING), PREPARE),
        (TxState(2, PREPARING), False, TxState(2, COMMITTING), PREPARE),
        (TxState(2, COMMITTING), False, TxState(2, COMMITTED), COMMIT),
        (TxState(2, PREPARING), True, TxState(1, COMMITTED), ROLLBACK),
        (TxState(2, COMMITTING), True, TxState(2, COMMITTED), COMMIT),
        (TxState(2, COMMITTED), True, TxState(2, COMMITTED), INITSTATE),
    ],
)
def test_transaction_transitions(state, recovering, nxt, action):
    assert state.next_state(recovering) == nxt
    assert state.next_action(recovering) == action


# -- the checkpoint spout's driver --------------------------------------------------------------
def test_a_fresh_spout_initialises_state_then_prepares():
    """Storm's testInitState and testPrepare: INITSTATE with txid -1 first, nothing more
    until it is acked, then PREPARE 0 (saved as PREPARING before it goes out)."""
    d = CheckpointDriver(None, 1000)
    assert emits(d.poll(0.0)) == [(-1, INITSTATE)]
    assert d.poll(0.0) == []  # one checkpoint tuple in flight at a time
    assert d.ack(-1) == []  # recovery is over; nothing saved (still COMMITTED -1)
    out = d.poll(0.0)
    assert out == [Save(TxState(0, PREPARING)), Emit(0, PREPARE)]


def test_checkpoints_follow_the_interval_on_the_clock():
    clock = FakeClock()
    d = CheckpointDriver(None, 1000)
    d.poll(clock.now())
    d.ack(-1)
    assert emits(d.poll(clock.now())) == [(0, PREPARE)]
    assert d.ack(0) == [Save(TxState(0, COMMITTING))]
    assert emits(d.poll(clock.now())) == [(0, COMMIT)]  # a commit does not wait
    assert d.ack(0) == [Save(TxState(0, COMMITTED))]
    clock.advance(0.5)
    assert d.poll(clock.now()) == []  # the next one waits for the interval
    clock.advance(0.5)
    assert emits(d.poll(clock.now())) == [(1, PREPARE)]


def test_interval_below_the_floor_is_raised_to_100ms():
    d = CheckpointDriver(TxState(3, COMMITTED), 0)
    assert d.interval == 0.1


def test_prepare_with_fail_rolls_back_then_prepares_again():
    """Storm's testPrepareWithFail: a failed PREPARE 1 starts recovery: ROLLBACK 1 (until
    it is acked; a fail repeats it), then INITSTATE 0, then PREPARE 1 again."""
    clock = FakeClock()
    d = CheckpointDriver(TxState(-1, COMMITTED), 0)
    seen = []
    for verdict, txid in [
        ("ack", -1),
        ("ack", 0),
        ("ack", 0),
        ("fail", 1),
        ("fail", 1),
        ("ack", 1),
        ("ack", 0),
    ]:
        clock.advance(0.2)
        seen += emits(d.poll(clock.now()))
        getattr(d, verdict)(txid)
    clock.advance(0.2)
    seen += emits(d.poll(clock.now()))
    assert seen == [
        (-1, INITSTATE),
        (0, PREPARE),
        (0, COMMIT),
        (1, PREPARE),
        (1, ROLLBACK),
        (1, ROLLBACK),
        (0, INITSTATE),
        (1, PREPARE),
    ]


def test_commit_that_fails_is_rolled_forward():
    """Storm's testCommit: a COMMIT that fails is not rolled back (some bolts may have
    committed): recovery sends COMMIT of the same txid again."""
    d = CheckpointDriver(None, 0)
    d.poll(0.0)
    d.ack(-1)
    d.poll(1.0)
    d.ack(0)
    assert emits(d.poll(2.0)) == [(0, COMMIT)]
    d.fail(0)
    assert emits(d.poll(3.0)) == [(0, COMMIT)]


@pytest.mark.parametrize(
    "saved, first", [(TxState(100, PREPARING), ROLLBACK), (TxState(100, COMMITTING), COMMIT)]
)
def test_restarted_spout_resolves_the_saved_transaction_first(saved, first):
    """Storm's testRecoveryRollback and testRecoveryCommit."""
    d = CheckpointDriver(saved, 0)
    assert emits(d.poll(0.0)) == [(100, first)]


def test_recovery_rollback_ack_then_initstate_then_prepare_same_txid():
    """Storm's testRecoveryRollbackAck."""
    d = CheckpointDriver(TxState(100, PREPARING), 0)
    assert emits(d.poll(0.0)) == [(100, ROLLBACK)]
    assert d.ack(100) == [Save(TxState(99, COMMITTED))]
    assert emits(d.poll(0.0)) == [(99, INITSTATE)]
    d.ack(99)
    assert emits(d.poll(1.0)) == [(100, PREPARE)]


def test_a_late_ack_of_another_txid_changes_nothing_but_frees_the_slot():
    d = CheckpointDriver(TxState(5, COMMITTED), 0)
    d.poll(0.0)
    d.ack(5)  # INITSTATE 5 done
    d.poll(1.0)  # PREPARE 6
    assert d.ack(4) == []
    assert d.tx == TxState(6, PREPARING)
    assert emits(d.poll(1.0)) == [(6, PREPARE)]  # sent again


# -- barrier alignment --------------------------------------------------------------------------
def test_acts_once_every_input_task_sent_the_barrier():
    a = BarrierAligner(3)
    assert [a.arrive(PREPARE, 1, task, 1) for task in (7, 8, 9)] == [WAIT, WAIT, PROCESS]
    assert [a.arrive(COMMIT, 1, task, 2) for task in (8, 9, 7)] == [WAIT, WAIT, PROCESS]


def test_a_task_is_blocked_from_its_copy_until_the_last_copy():
    """Its later tuples are held meanwhile: the cut of each input is at its copy."""
    a = BarrierAligner(2)
    assert not a.blocked(1)
    assert a.arrive(PREPARE, 1, task=1, emission=1) == WAIT
    assert a.blocked(1) and not a.blocked(2)
    assert a.arrive(PREPARE, 1, task=2, emission=1) == PROCESS
    assert not a.blocked(1) and not a.blocked(2)


def test_a_copy_of_a_later_emission_drops_the_alignment_whose_copy_was_lost():
    """Task 2 sent emission 2 (ROLLBACK): its copy of emission 1 (PREPARE) is lost (its
    worker died), so emission 1 can never be aligned; task 1 is let go."""
    a = BarrierAligner(2)
    assert a.arrive(PREPARE, 1, task=1, emission=1) == WAIT
    assert a.arrive(ROLLBACK, 1, task=2, emission=2) == WAIT
    assert a.abandoned == 1
    assert not a.blocked(1) and a.blocked(2)
    assert a.arrive(ROLLBACK, 1, task=1, emission=2) == PROCESS
    assert a.arrive(PREPARE, 1, task=1, emission=3) == WAIT  # the rollback lowered the mark
    assert a.arrive(PREPARE, 1, task=2, emission=3) == PROCESS


def test_a_late_copy_of_an_earlier_emission_is_stale():
    """Held for a worker while it restarted, a copy of the emission before arrives after
    a newer one started (or went round): ignored, it neither blocks nor drops anything."""
    a = BarrierAligner(2)
    assert a.arrive(ROLLBACK, 5, task=2, emission=8) == WAIT
    assert a.arrive(PREPARE, 5, task=1, emission=7) == STALE
    assert not a.blocked(1) and a.blocked(2) and a.abandoned == 0
    assert a.arrive(ROLLBACK, 5, task=1, emission=8) == PROCESS
    assert a.arrive(PREPARE, 5, task=1, emission=7) == STALE  # nothing pending: still stale
    assert not a.blocked(1) and a.stale == 2


def test_emissions_are_numbered_in_order_across_the_spouts_restarts():
    assert emission_number(1, 2**32 - 1) < emission_number(2, 1) < emission_number(2, 2)


def test_an_old_transaction_is_not_acted_on():
    a = BarrierAligner(1)
    assert a.arrive(COMMIT, 5, 1, 1) == PROCESS
    assert a.arrive(PREPARE, 4, 1, 2) == OLD
    assert a.arrive(INITSTATE, 5, 1, 3) == PROCESS


def test_a_bolt_needs_an_input_task():
    with pytest.raises(ValueError):
        BarrierAligner(0)


# -- the stateful bolt: ack deferral ------------------------------------------------------------
def test_tuples_before_a_fresh_initstate_wait_then_are_replayed():
    """Unlike Storm's executor, which runs them: INITSTATE rolls every bolt back to the
    last commit, so what came before it is failed in every bolt, a fresh one too (else
    a tree rolled back in one bolt was counted in this one, and its replay again)."""
    c = StatefulCore()
    assert c.tuple_in("t1") == []
    assert c.tuple_in("t2") == []
    assert c.checkpoint(INITSTATE, 0) == [
        (INIT_STATE, 0),
        (FAIL, "t1"),
        (FAIL, "t2"),
        (FORWARD, 0),
        (ACK_BARRIER, 0),
    ]
    assert c.tuple_in("t3") == [(EXECUTE, "t3")]


def test_a_rollback_before_initstate_keeps_the_waiting_tuples_waiting():
    c = StatefulCore()
    c.tuple_in("t1")
    assert c.checkpoint(ROLLBACK, 3) == [(ROLLBACK_STATE, 3), (FORWARD, 3), (ACK_BARRIER, 3)]
    assert (FAIL, "t1") in c.checkpoint(INITSTATE, 2)


def test_initstate_in_recovery_rolls_an_initialised_bolt_back():
    """Beyond Storm's executor (which keeps the state as it is): a worker restarted,
    every bolt returns to the last commit, and what it held is failed (replayed once)."""
    c = StatefulCore(initialized=True)
    c.acked("t1")
    c.checkpoint(PREPARE, 1)
    c.checkpoint(COMMIT, 1)
    c.acked("t2")
    assert c.checkpoint(INITSTATE, 1) == [
        (ROLLBACK_STATE, 1),
        (FAIL, "t2"),
        (FORWARD, 1),
        (ACK_BARRIER, 1),
    ]
    assert c.initialized


def test_prepare_before_initstate_fails_the_barrier():
    assert StatefulCore().checkpoint(PREPARE, 1) == [(FAIL_BARRIER, 1)]


def test_acks_are_held_until_the_commit_after_them():
    c = StatefulCore(initialized=True)
    c.acked("t1")
    assert c.checkpoint(PREPARE, 1) == [(PREPARE_STATE, 1), (FORWARD, 1), (ACK_BARRIER, 1)]
    c.acked("t2")  # after the prepare: its effect is in the next transaction
    assert c.checkpoint(COMMIT, 1) == [
        (COMMIT_STATE, 1),
        (ACK, "t1"),
        (FORWARD, 1),
        (ACK_BARRIER, 1),
    ]
    c.checkpoint(PREPARE, 2)
    assert (ACK, "t2") in c.checkpoint(COMMIT, 2)


def test_rollback_fails_prepared_and_unprepared_tuples():
    c = StatefulCore(initialized=True)
    c.acked("t1")
    c.checkpoint(PREPARE, 1)
    c.acked("t2")
    assert c.checkpoint(ROLLBACK, 1) == [
        (ROLLBACK_STATE, 1),
        (FAIL, "t1"),
        (FAIL, "t2"),
        (FORWARD, 1),
        (ACK_BARRIER, 1),
    ]
    assert c.checkpoint(COMMIT, 1) == [(COMMIT_STATE, 1), (FORWARD, 1), (ACK_BARRIER, 1)]
