"""Scenarios for the backpressure state machines: a list of events, the expected instructions."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stormish.transport.tracker import (
    BackpressureStatus,
    BackpressureTracker,
    Broadcast,
    RemoteBackpressure,
    RemoteStatistics,
    SendTo,
    TrackerStatistics,
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


def test_apply_flags_and_releases_tasks():
    r = RemoteBackpressure()
    assert r.apply(status(1, {1, 2}))
    assert r.flagged == {1, 2} and r.is_flagged(1) and not r.is_flagged(3)
    assert r.apply(status(2, {2}))
    assert r.flagged == {2}


def test_stale_status_is_ignored_and_counted():
    r = RemoteBackpressure()
    assert r.apply(status(5, {1}))
    assert not r.apply(status(4, set()))
    assert not r.apply(status(5, set()))
    assert r.flagged == {1}
    assert r.statistics() == RemoteStatistics(received=3, stale_ignored=2, tasks_flagged=1)


def test_status_ids_are_compared_per_worker():
    r = RemoteBackpressure()
    assert r.apply(status(50, {1}, worker=1, tasks=(1, 2)))
    assert r.apply(status(3, {3}, worker=2, tasks=(3, 4)))
    assert r.flagged == {1, 3}


def test_forget_worker_releases_only_its_flags_and_accepts_a_restart():
    r = RemoteBackpressure()
    r.apply(status(50, {1}, worker=1, tasks=(1, 2)))
    r.apply(status(3, {3}, worker=2, tasks=(3, 4)))
    r.forget_worker(1)
    assert r.flagged == {3}
    assert r.apply(status(1, {2}, worker=1, tasks=(1, 2)))  # restarted, ids from 1 again
    assert r.flagged == {2, 3}
    r.forget_worker(42)  # never heard of: nothing to do
    assert r.statistics().tasks_flagged == 2


def test_a_task_moved_to_another_worker_follows_its_new_owner():
    r = RemoteBackpressure()
    r.apply(status(1, {1}, worker=1, tasks=(1, 2)))
    r.apply(status(1, set(), worker=2, tasks=(1, 3)))  # task 1 now lives on worker 2
    assert r.flagged == set()
    r.apply(status(2, {1}, worker=2, tasks=(1, 3)))
    r.forget_worker(1)  # its old owner goes away: the new owner's flag stays
    assert r.flagged == {1}


def test_a_task_a_worker_stops_listing_is_released():
    r = RemoteBackpressure()
    r.apply(status(1, {1, 2}, worker=1, tasks=(1, 2)))
    r.apply(status(2, set(), worker=1, tasks=(2,)))
    assert r.flagged == set()


def test_tracker_statuses_drive_the_remote_view():
    t, r = tracker(), RemoteBackpressure()
    for instruction in [*t.overflow_grew(2, 1), *t.overflow_grew(3, 1), *t.timer({2: 0, 3: 4}, {})]:
        r.apply(instruction.status)
    assert r.flagged == {3}
    first = t.peer_connected(1)[0].status
    later = t.overflow_grew(1, 1)[0].status
    assert r.apply(later) and not r.apply(first)  # delivered out of order: the older loses
    assert r.flagged == {1, 3}


def test_flag_times_count_each_spell_per_task_with_a_fake_clock():
    from stormish.testing import FakeClock

    clock = FakeClock()
    r = RemoteBackpressure()
    r.now = clock.now
    r.apply(status(1, {1, 2}))
    clock.advance(2.0)
    r.apply(status(2, {2}))  # 1 released after 2 s, 2 still flagged
    clock.advance(1.0)
    assert r.flag_times() == {1: 2.0, 2: 3.0}
    r.forget_worker(W)  # the worker went away: its flags end
    clock.advance(5.0)
    r.apply(status(1, {1}))  # a restarted worker (ids start over after forget)
    clock.advance(0.5)
    assert r.flag_times() == {1: 2.5, 2: 3.0}


def test_flags_are_not_timed_without_a_clock():
    r = RemoteBackpressure()
    r.apply(status(1, {1}))
    r.apply(status(2, set()))
    assert r.flag_times() == {}
