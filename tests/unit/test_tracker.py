"""Scenarios for the backpressure state machines: a list of events, the expected instructions."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stormish.transport.tracker import (
    STATUS_ID_SPAN,
    BackpressureStatus,
    BackpressureTracker,
    Broadcast,
    Greeting,
    RemoteBackpressure,
    RemoteStatistics,
    SendTo,
    TrackerStatistics,
    Verdict,
)

W = 7  # the worker under test
TASKS = (1, 2, 3)


def status(status_id: int, bp: set[int], worker: int = W, tasks=TASKS) -> BackpressureStatus:
    return BackpressureStatus(worker, status_id, frozenset(bp), frozenset(tasks) - frozenset(bp))


def play(tracker: BackpressureTracker, scenario: list) -> None:
    """Run `(method, *args), expected_instructions` steps; report the first step that differs."""
    for step, (event, expected) in enumerate(scenario):
        method, *args = event
        got = getattr(tracker, method)(*args)
        assert got == expected, f"step {step}: {event}"


def tracker(step: int = 10, **kw) -> BackpressureTracker:
    return BackpressureTracker(W, TASKS, resend_step=step, **kw)


# ---- BackpressureTracker ---------------------------------------------------------------


def test_entering_backpressure_broadcasts_once_then_stays_quiet_within_the_step():
    play(
        tracker(),
        [
            (("overflow_grew", 1, 1), [Broadcast(status(1, {1}))]),
            (("overflow_grew", 1, 2), []),
            (("overflow_grew", 1, 11), []),
            (("overflow_grew", 2, 1), [Broadcast(status(2, {1, 2}))]),
        ],
    )


def test_resend_after_growth_beyond_the_step_then_counts_from_the_resend():
    play(
        tracker(),
        [
            (("overflow_grew", 1, 1), [Broadcast(status(1, {1}))]),
            (("overflow_grew", 1, 11), []),  # grown by exactly the step: not more
            (("overflow_grew", 1, 12), [Broadcast(status(2, {1}))]),
            (("overflow_grew", 1, 22), []),
            (("overflow_grew", 1, 23), [Broadcast(status(3, {1}))]),
        ],
    )


def test_each_task_counts_its_own_growth():
    # With one counter shared by all tasks (STORM-3510) task 2's growth would be measured
    # from task 1's last resend and the reminder at step 4 would never go out.
    play(
        tracker(),
        [
            (("overflow_grew", 1, 1), [Broadcast(status(1, {1}))]),
            (("overflow_grew", 2, 1), [Broadcast(status(2, {1, 2}))]),
            (("overflow_grew", 1, 12), [Broadcast(status(3, {1, 2}))]),
            (("overflow_grew", 2, 5), []),
            (("overflow_grew", 2, 12), [Broadcast(status(4, {1, 2}))]),
            (("overflow_grew", 1, 13), []),
        ],
    )


def test_a_shrinking_overflow_is_no_reason_to_resend():
    play(
        tracker(),
        [
            (("overflow_grew", 1, 50), [Broadcast(status(1, {1}))]),
            (("overflow_grew", 1, 3), []),
            (("overflow_grew", 1, 60), []),
            (("overflow_grew", 1, 61), [Broadcast(status(2, {1}))]),
        ],
    )


def test_a_new_connection_gets_the_full_current_status():
    play(
        tracker(),
        [
            (("peer_connected", 4), [SendTo(4, status(1, set()))]),
            (("overflow_grew", 3, 1), [Broadcast(status(2, {3}))]),
            (("peer_connected", 5), [SendTo(5, status(3, {3}))]),
        ],
    )


def test_timer_releases_drained_tasks_and_announces_once():
    play(
        tracker(),
        [
            (("overflow_grew", 1, 1), [Broadcast(status(1, {1}))]),
            (("overflow_grew", 2, 1), [Broadcast(status(2, {1, 2}))]),
            (("timer", {1: 0, 2: 4}, {}), [Broadcast(status(3, {2}))]),
            (("timer", {1: 0, 2: 4}, {}), []),
            (("timer", {2: 0}, {}), [Broadcast(status(4, set()))]),
        ],
    )


def test_timer_with_nothing_drained_says_nothing():
    play(
        tracker(),
        [
            (("timer", {}, {}), []),
            (("overflow_grew", 1, 1), [Broadcast(status(1, {1}))]),
            (("timer", {1: 9, 2: 0, 3: 0}, {1: 1.0}), []),
        ],
    )


def test_a_task_missing_from_the_timer_counts_as_drained():
    play(
        tracker(),
        [
            (("overflow_grew", 1, 1), [Broadcast(status(1, {1}))]),
            (("timer", {}, {}), [Broadcast(status(2, set()))]),
        ],
    )


def test_reentering_backpressure_measures_growth_from_the_new_entry():
    play(
        tracker(),
        [
            (("overflow_grew", 1, 100), [Broadcast(status(1, {1}))]),
            (("timer", {1: 0}, {}), [Broadcast(status(2, set()))]),
            (("overflow_grew", 1, 5), [Broadcast(status(3, {1}))]),
            (("overflow_grew", 1, 15), []),
            (("overflow_grew", 1, 16), [Broadcast(status(4, {1}))]),
        ],
    )


def test_resume_fill_keeps_a_full_queue_under_backpressure():
    play(
        tracker(resume_fill=0.5),
        [
            (("overflow_grew", 1, 1), [Broadcast(status(1, {1}))]),
            (("timer", {1: 0}, {1: 0.9}), []),
            (("timer", {1: 0}, {1: 0.5}), [Broadcast(status(2, set()))]),
        ],
    )


def test_status_ids_start_where_told():
    play(
        tracker(first_status_id=1_700_000_000_000_000_000),
        [
            (("peer_connected", 1), [SendTo(1, status(1_700_000_000_000_000_000, set()))]),
            (("overflow_grew", 2, 1), [Broadcast(status(1_700_000_000_000_000_001, {2}))]),
        ],
    )


def test_statistics_count_each_kind_of_send():
    t = tracker()
    assert t.statistics() == TrackerStatistics(0, 0, 0, 0, frozenset())
    t.overflow_grew(1, 1)
    t.overflow_grew(1, 20)
    t.overflow_grew(2, 1)
    t.peer_connected(9)
    assert t.statistics() == TrackerStatistics(2, 1, 1, 2, frozenset({1, 2}))
    t.timer({1: 0, 2: 0}, {})
    assert t.statistics() == TrackerStatistics(3, 1, 1, 0, frozenset())
    assert t.bp_tasks == frozenset()


def test_bad_arguments_name_the_value():
    with pytest.raises(ValueError, match="task 99 is not a task of worker 7"):
        tracker().overflow_grew(99, 1)
    with pytest.raises(ValueError, match="resend_step"):
        tracker(step=0)
    with pytest.raises(ValueError, match="resume_fill"):
        tracker(resume_fill=1.5)
    with pytest.raises(ValueError, match=r"tasks \[2\] both"):
        BackpressureStatus(1, 1, frozenset({1, 2}), frozenset({2}))


_events = st.lists(
    st.one_of(
        st.tuples(st.just("overflow_grew"), st.sampled_from(TASKS), st.integers(0, 100)),
        st.tuples(st.just("peer_connected"), st.integers(0, 5)),
        st.tuples(
            st.just("timer"),
            st.dictionaries(st.sampled_from(TASKS), st.integers(0, 3)),
            st.dictionaries(st.sampled_from(TASKS), st.floats(0, 1)),
        ),
    ),
    max_size=60,
)


@given(_events)
def test_every_status_is_full_consistent_and_newer_than_the_last(events):
    t = tracker(step=7, resume_fill=0.8)
    last_id = 0
    for method, *args in events:
        for instruction in getattr(t, method)(*args):
            s = instruction.status
            assert s.status_id > last_id
            last_id = s.status_id
            assert s.bp_tasks | s.non_bp_tasks == frozenset(TASKS)
            assert s.bp_tasks == t.bp_tasks
    stats = t.statistics()
    assert stats.sent + stats.resent + stats.sent_on_connect == last_id


# ---- RemoteBackpressure ----------------------------------------------------------------


def remote(*workers: int, first_id: int = 1) -> RemoteBackpressure:
    """A remote view that has heard each of `workers` say HELLO (on connection None)."""
    r = RemoteBackpressure()
    for w in workers or (W,):
        assert r.hello(w, f"inc-{w}", None, first_id) is Greeting.FIRST
    return r


def test_apply_flags_and_releases_tasks():
    r = remote()
    assert r.apply(status(1, {1, 2})) is Verdict.APPLIED
    assert r.flagged == {1, 2} and r.is_flagged(1) and not r.is_flagged(3)
    assert r.apply(status(2, {2})) is Verdict.APPLIED
    assert r.flagged == {2}


def test_stale_status_is_ignored_and_counted():
    r = remote()
    assert r.apply(status(5, {1})) is Verdict.APPLIED
    assert r.apply(status(4, set())) is Verdict.STALE
    assert r.apply(status(5, set())) is Verdict.STALE
    assert r.flagged == {1}
    assert r.statistics() == RemoteStatistics(received=3, stale_ignored=2, tasks_flagged=1)


def test_status_ids_are_compared_per_worker():
    r = remote(1, 2)
    assert r.apply(status(50, {1}, worker=1, tasks=(1, 2))) is Verdict.APPLIED
    assert r.apply(status(3, {3}, worker=2, tasks=(3, 4))) is Verdict.APPLIED
    assert r.flagged == {1, 3}


def test_forget_worker_releases_only_its_flags():
    r = remote(1, 2)
    r.apply(status(50, {1}, worker=1, tasks=(1, 2)))
    r.apply(status(3, {3}, worker=2, tasks=(3, 4)))
    r.forget_worker(1)
    assert r.flagged == {3}
    assert r.hello(1, "inc-1b", None, 1) is Greeting.RESTARTED  # restarted: ids from 1 again
    assert r.apply(status(1, {2}, worker=1, tasks=(1, 2))) is Verdict.APPLIED
    assert r.flagged == {2, 3}
    r.forget_worker(42)  # never heard of: nothing to do
    assert r.statistics().tasks_flagged == 2


def test_a_task_moved_to_another_worker_follows_its_new_owner():
    r = remote(1, 2)
    r.apply(status(1, {1}, worker=1, tasks=(1, 2)))
    r.apply(status(1, set(), worker=2, tasks=(1, 3)))  # task 1 now lives on worker 2
    assert r.flagged == set()
    r.apply(status(2, {1}, worker=2, tasks=(1, 3)))
    r.forget_worker(1)  # its old owner goes away: the new owner's flag stays
    assert r.flagged == {1}


def test_a_task_a_worker_stops_listing_is_released():
    r = remote(1)
    r.apply(status(1, {1, 2}, worker=1, tasks=(1, 2)))
    r.apply(status(2, set(), worker=1, tasks=(2,)))
    assert r.flagged == set()


def test_tracker_statuses_drive_the_remote_view():
    t, r = tracker(), remote()
    for instruction in [*t.overflow_grew(2, 1), *t.overflow_grew(3, 1), *t.timer({2: 0, 3: 4}, {})]:
        r.apply(instruction.status)
    assert r.flagged == {3}
    first = t.peer_connected(1)[0].status
    later = t.overflow_grew(1, 1)[0].status
    assert r.apply(later) is Verdict.APPLIED
    assert r.apply(first) is Verdict.STALE  # delivered out of order: the older loses
    assert r.flagged == {1, 3}


def test_flag_times_count_each_spell_per_task_with_a_fake_clock():
    from stormish.testing import FakeClock

    clock = FakeClock()
    r = remote()
    r.now = clock.now
    r.apply(status(1, {1, 2}))
    clock.advance(2.0)
    r.apply(status(2, {2}))  # 1 released after 2 s, 2 still flagged
    clock.advance(1.0)
    assert r.flag_times() == {1: 2.0, 2: 3.0}
    r.forget_worker(W)  # the worker went away: its flags end
    clock.advance(5.0)
    r.hello(W, "inc-again", None, 1)  # a restarted worker: a new epoch, ids start over
    r.apply(status(1, {1}))
    clock.advance(0.5)
    assert r.flag_times() == {1: 2.5, 2: 3.0}


def test_flags_are_not_timed_without_a_clock():
    r = remote()
    r.apply(status(1, {1}))
    r.apply(status(2, set()))
    assert r.flag_times() == {}


# ---- RemoteBackpressure: the status epoch -------------------------------------------------
# A worker's HELLO opens an epoch bound to the connection it came on, announcing where its
# status ids start; a status counts only on that connection and in that range.

BIG = 2**64 - 1  # the largest id the wire carries
BASE = 1_700_000_000_000_000_000  # a time_ns() start, as a worker link announces


def replay(r: RemoteBackpressure, scenario: list) -> None:
    """Run `(event, expected result, expected flagged tasks)` steps; an event is
    `("hello", worker, incarnation, connection, first_id)`, `("status", status,
    connection)` or `("ask", worker, connection)`. Reports the first step that differs."""
    for step, (event, expected, flagged) in enumerate(scenario):
        kind, *args = event
        method = {"hello": r.hello, "status": r.apply, "ask": r.ask_hello}[kind]
        got = method(*args)
        assert (got, r.flagged) == (expected, flagged), f"step {step}: {event}"


def test_a_status_counts_only_on_the_connection_its_worker_said_hello_on():
    replay(
        RemoteBackpressure(),
        [
            (("status", status(BASE, {1}), "c1"), Verdict.UNBOUND, set()),  # no HELLO yet
            (("hello", W, "a", "c1", BASE), Greeting.FIRST, set()),
            (("status", status(BASE, {1}), "c1"), Verdict.APPLIED, {1}),
            # a forger on another connection: neither its flags nor its id count
            (("status", status(BIG, {2}), "c9"), Verdict.UNBOUND, {1}),
            (("status", status(BASE + 1, set()), "c1"), Verdict.APPLIED, set()),
        ],
    )


def test_an_absurd_id_from_the_bound_connection_poisons_nothing():
    replay(
        RemoteBackpressure(),
        [
            (("hello", W, "a", "c1", BASE), Greeting.FIRST, set()),
            (("status", status(BASE + 3, {1}), "c1"), Verdict.APPLIED, {1}),
            (("status", status(BIG, {1, 2, 3}), "c1"), Verdict.OUT_OF_RANGE, {1}),
            (("status", status(BASE - 1, set()), "c1"), Verdict.OUT_OF_RANGE, {1}),
            (("status", status(BASE + STATUS_ID_SPAN, set()), "c1"), Verdict.OUT_OF_RANGE, {1}),
            # the real statuses that follow still count
            (("status", status(BASE + 4, set()), "c1"), Verdict.APPLIED, set()),
            (("status", status(BASE + STATUS_ID_SPAN - 1, {3}), "c1"), Verdict.APPLIED, {3}),
        ],
    )


def test_a_restarted_worker_starts_a_new_epoch_and_its_predecessor_is_refused():
    old, new = BASE, BASE + 10**12  # the restart announces a later start
    replay(
        RemoteBackpressure(),
        [
            (("hello", W, "a", "c1", old), Greeting.FIRST, set()),
            (("status", status(old + 5, {1}), "c1"), Verdict.APPLIED, {1}),
            (("hello", W, "b", "c2", new), Greeting.RESTARTED, set()),  # old flags released
            # left over from the old incarnation, read after the new HELLO
            (("status", status(old + 6, {2}), "c1"), Verdict.UNBOUND, set()),
            (("status", status(new, {3}), "c2"), Verdict.APPLIED, {3}),
        ],
    )


def test_a_restart_that_starts_its_ids_lower_is_not_stale():
    # per epoch: a new incarnation is never compared with its predecessor's ids (a clock
    # that went back, or a forged id the old epoch had seen, cannot freeze the new one)
    replay(
        RemoteBackpressure(),
        [
            (("hello", W, "a", "c1", BASE), Greeting.FIRST, set()),
            (("status", status(BASE + 1000, {1}), "c1"), Verdict.APPLIED, {1}),
            (("hello", W, "b", "c2", 1), Greeting.RESTARTED, set()),
            (("status", status(1, {2}), "c2"), Verdict.APPLIED, {2}),
        ],
    )


def test_the_same_incarnation_on_a_new_connection_moves_its_epoch_and_keeps_its_flags():
    replay(
        RemoteBackpressure(),
        [
            (("hello", W, "a", "c1", BASE), Greeting.FIRST, set()),
            (("status", status(BASE + 7, {1}), "c1"), Verdict.APPLIED, {1}),
            # its connection was re-established: statuses on it are refused until...
            (("status", status(BASE + 8, {1, 2}), "c2"), Verdict.UNBOUND, {1}),
            (("ask", W, "c2"), True, {1}),  # ...the shell asks it for a HELLO, once
            (("status", status(BASE + 9, {1, 2}), "c2"), Verdict.UNBOUND, {1}),
            (("ask", W, "c2"), False, {1}),
            (("hello", W, "a", "c2", BASE), Greeting.RECONNECTED, {1}),
            (("hello", W, "a", "c2", BASE), Greeting.KNOWN, {1}),
            (("status", status(BASE + 7, {1}), "c1"), Verdict.UNBOUND, {1}),
            (("status", status(BASE + 10, {2}), "c2"), Verdict.APPLIED, {2}),
            (("ask", W, "c3"), True, {2}),  # a HELLO since: another ask is allowed
        ],
    )


def test_epoch_refusals_are_counted():
    r = RemoteBackpressure()
    r.apply(status(1, {1}), "c1")
    r.hello(W, "a", "c1", 1)
    r.apply(status(BIG, {1}), "c1")
    r.apply(status(2, {1}), "c1")
    r.apply(status(2, {1}), "c1")
    assert r.statistics() == RemoteStatistics(
        received=4, stale_ignored=1, tasks_flagged=1, refused_unbound=1, refused_out_of_range=1
    )


@given(
    st.lists(
        st.tuples(st.sampled_from(["c1", "c2", "forger"]), st.integers(0, 2**64 - 1)),
        max_size=40,
    )
)
def test_no_status_off_the_bound_connection_or_out_of_range_changes_the_flags(forged):
    """Whatever a forger sends, and whatever absurd ids the bound peer sends, the real
    statuses that follow (ids growing from the announced start) are all applied."""
    r = RemoteBackpressure()
    r.hello(W, "a", "c1", BASE)
    r.apply(status(BASE, {1}), "c1")
    for conn, status_id in forged:
        in_epoch = conn == "c1" and BASE <= status_id < BASE + STATUS_ID_SPAN
        if not in_epoch:
            assert r.apply(status(status_id, {2, 3}), conn) is not Verdict.APPLIED
    assert r.flagged == {1}
    assert r.apply(status(BASE + 1, set()), "c1") is Verdict.APPLIED
    assert r.flagged == set()
