"""The Kafka spout's decisions (stormish.kafka.core), as scenarios: storm-kafka-client's
KafkaSpoutCommitTest, KafkaSpoutEmitTest, KafkaSpoutRetryLimitTest,
MaxUncommittedOffsetTest, KafkaSpoutRebalanceTest and the first-poll-offset rules,
ported to events in and decisions out, with time given by the test."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stormish.kafka.client import BEGINNING, END, start_offset
from stormish.kafka.core import (
    AT_MOST_ONCE,
    NO_GUARANTEE,
    Commit,
    DeadLetter,
    Pause,
    Resume,
    SpoutCore,
)
from stormish.kafka.retry import Retry

TP = ("t", 0)


def records(n: int, start: int = 0, tp: tuple[str, int] = TP) -> list[tuple]:
    return [(tp[0], tp[1], o, None, f"v{o}".encode(), 0) for o in range(start, start + n)]


def emitted(core: SpoutCore, now: float = 0.0, limit: int = 10_000) -> dict[int, object]:
    """offset -> message id of what the core emits now."""
    return {r[2]: mid for r, mid in core.take(limit, now)}


def committed(core: SpoutCore) -> dict:
    c = core.commit_now(sync=False)
    return c.offsets if c else {}


def test_fail_one_ack_the_rest_commits_only_up_to_the_failed_offset():
    # KafkaSpoutCommitTest / KafkaSpoutEmitTest: 11 records, fail offset 1, ack 2..10
    core = SpoutCore(retry=Retry(initial_delay_secs=1.0))
    core.assigned({TP: 0})
    core.polled(records(11))
    ids = emitted(core)
    assert sorted(ids) == list(range(11))
    core.ack(ids[0])
    assert core.fail(ids[1], now=0.0) == []
    for o in range(2, 11):
        core.ack(ids[o])
    assert committed(core) == {TP: 1}
    assert emitted(core, now=0.5) == {}  # the backoff is not over
    again = emitted(core, now=1.0)
    assert list(again) == [1]  # 2..10 are not emitted again
    core.ack(again[1])
    assert committed(core) == {TP: 11}
    assert core.in_flight() == 0


def test_commit_is_periodic_and_only_when_the_position_moved():
    core = SpoutCore(commit_interval=30.0)
    core.assigned({TP: 5})
    core.polled(records(3, start=5))
    ids = emitted(core)
    assert core.tick(10.0) is None  # not yet
    for mid in ids.values():
        core.ack(mid)
    got = core.tick(30.0)
    assert got == Commit({TP: 8}, sync=False)
    assert core.tick(60.0) is None  # nothing moved since


def test_retry_limit_gives_the_record_up_to_the_dead_letter_and_commits_past_it():
    # KafkaSpoutRetryLimitTest: past max_retries the offset is acked (committed past)
    core = SpoutCore(retry=Retry(max_retries=2, delay_period_secs=0.0))
    core.assigned({TP: 0})
    core.polled(records(2))
    ids = emitted(core)
    core.ack(ids[1])
    mid = ids[0]
    for attempt in (1, 2):
        assert core.fail(mid, now=0.0, error="failed: boom") == []
        assert list(emitted(core)) == [0], attempt
    out = core.fail(mid, now=0.0, error="failed: boom")
    assert out == [DeadLetter(records(1)[0], mid, 3, "failed: boom")]
    assert committed(core) == {TP: 2}
    assert core.dead_lettered == 1
    assert emitted(core, now=100.0) == {}


def test_the_engines_dead_letter_is_committed_past_and_not_emitted_again():
    core = SpoutCore()
    core.assigned({TP: 0})
    core.polled(records(1))
    (mid,) = emitted(core).values()
    assert core.fail(mid, now=0.0, dead=True) == []  # the engine emitted the dead letter
    assert committed(core) == {TP: 1}


def test_backoff_is_exponential_and_capped():
    r = Retry(initial_delay_secs=1.0, delay_period_secs=0.5, max_delay_secs=5.0)
    # storm-kafka-client's nextTime: the first failure waits the initial delay, the n-th
    # after it period * 2**(n-1) (it was initial + period * 2**(n-1) every time)
    assert [r.delay(n) for n in (1, 2, 3, 4, 5, 6)] == [1.0, 1.0, 2.0, 4.0, 5.0, 5.0]
    assert Retry(max_retries=0).may_retry(1) is False
    with pytest.raises(ValueError, match="max_retries"):
        Retry(max_retries=-1)


def test_max_uncommitted_pauses_the_partition_and_resumes_when_it_drops_below():
    # MaxUncommittedOffsetTest: with max uncommitted 250 and 250 unacked, no more polls
    core = SpoutCore(max_uncommitted=250)
    core.assigned({TP: 0, ("t", 1): 0})
    assert core.polled(records(200)) == []
    assert core.polled(records(50, start=200)) == [Pause((TP,))]
    assert core.polled(records(50, start=250)) == []  # fetched before the pause: not again
    ids = emitted(core)
    for o in range(1, 51):
        assert core.ack(ids[o]) is None  # 0 still in flight: nothing completed in order
    assert core.ack(ids[0]) == Resume((TP,))  # 300 fetched, 51 completed: 249 left
    assert core.lanes[("t", 1)].paused is False


def test_records_of_a_lane_are_emitted_in_offset_order_and_lanes_interleave():
    core = SpoutCore()
    core.assigned({("t", 0): 0, ("t", 1): 0})
    core.polled(records(3, tp=("t", 0)) + records(3, tp=("t", 1)))
    got = [(r[1], r[2]) for r, _ in core.take(100, 0.0)]
    for p in (0, 1):
        assert [o for q, o in got if q == p] == [0, 1, 2]
    assert core.buffered == 0


def test_revoke_waits_for_in_flight_trees_then_commits_and_forgets_the_partition():
    # KafkaSpoutRebalanceTest: a revoked partition's late ack is ignored, its commit
    # happens on revoke, and a re-assignment resumes from the committed position
    core = SpoutCore()
    core.assigned({TP: 0})
    core.polled(records(5))
    ids = emitted(core, limit=3)  # 3 and 4 stay buffered
    core.ack(ids[0])
    core.revoking([TP])
    assert core.take(10, 0.0) == []  # nothing more emitted for it
    assert not core.drained([TP])
    core.ack(ids[1])
    assert core.fail(ids[2], now=0.0) == []  # not replayed: the next owner reads it
    assert core.drained([TP])
    assert core.release([TP]) == Commit({TP: 2}, sync=True)
    assert core.buffered == 0
    core.assigned({TP: 2})
    core.ack(ids[2])  # a late ack from before: another epoch
    core.polled(records(3, start=2))
    assert sorted(emitted(core)) == [2, 3, 4]


def test_at_most_once_commits_before_emitting_and_never_replays():
    core = SpoutCore(AT_MOST_ONCE)
    core.assigned({TP: 0})
    assert core.polled(records(3)) == [Commit({TP: 3}, sync=True)]
    got = core.take(10, 0.0)
    assert [mid for _, mid in got] == [None, None, None]
    assert core.commit_now(sync=True) is None
    assert core.release([TP]) == Commit({}, sync=True)


def test_no_guarantee_commits_what_was_emitted_periodically():
    core = SpoutCore(NO_GUARANTEE, commit_interval=1.0)
    core.assigned({TP: 0})
    assert core.polled(records(4)) == []
    core.take(3, 0.0)
    assert core.tick(1.0) == Commit({TP: 3}, sync=False)


def test_stop_at_end_needs_every_partition_completed_up_to_its_first_high_watermark():
    core = SpoutCore()
    assert not core.at_end()  # nothing assigned yet
    core.assigned({("t", 0): BEGINNING, ("t", 1): END})
    assert not core.at_end()  # no high watermark yet
    core.set_high({("t", 0): 2, ("t", 1): 7}, stop_at_end=True)
    core.polled(records(2, tp=("t", 0)))
    ids = emitted(core)
    assert not core.at_end()
    for mid in ids.values():
        core.ack(mid)
    core.set_high({("t", 0): 9}, stop_at_end=True)  # later records: past the end
    assert core.at_end()
    assert core.lag() == {("t", 0): 7, ("t", 1): 7}


@pytest.mark.parametrize(
    "mode, committed, ours, want",
    [
        ("earliest", None, "stormish:a", BEGINNING),
        ("earliest", (5, "stormish:b"), "stormish:a", BEGINNING),  # another topology's
        ("earliest", (5, "stormish:a"), "stormish:a", 5),  # its own: resumed
        ("latest", (5, "other"), "stormish:a", END),
        ("latest", (5, "stormish:a"), "stormish:a", 5),
        ("uncommitted_earliest", None, "stormish:a", BEGINNING),
        ("uncommitted_earliest", (5, "other"), "stormish:a", 5),
        ("uncommitted_latest", None, "stormish:a", END),
        ("uncommitted_latest", (5, ""), "stormish:a", 5),
    ],
)
def test_first_poll_offset(mode, committed, ours, want):
    assert start_offset(mode, committed, ours) == want


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 19), st.booleans()), max_size=80))
def test_committed_is_the_first_offset_not_yet_completed(steps):
    """A model: offsets 0..19 emitted; each step acks or fails one. The commit never
    passes an offset that has not completed, and reaches the end once all have."""
    core = SpoutCore(retry=Retry(delay_period_secs=0.0))
    core.assigned({TP: 0})
    core.polled(records(20))
    ids = emitted(core)
    done: set[int] = set()
    for offset, ok in steps:
        if offset in done:
            continue
        if ok:
            core.ack(ids[offset])
            done.add(offset)
        else:
            core.fail(ids[offset], now=0.0)
            ids.update(emitted(core))  # replayed at once (no backoff)
        first_missing = min(set(range(20)) - done, default=20)
        assert core.lanes[TP].position() == first_missing
    for o in sorted(set(range(20)) - done):
        core.ack(ids[o])
    assert committed(core) == {TP: 20}


def test_max_uncommitted_bounds_what_is_emitted_from_the_buffer():
    core = SpoutCore(max_uncommitted=250)
    core.assigned({TP: 0})
    core.polled(records(400))  # one big fetch, before the pause could act
    ids = emitted(core)
    assert sorted(ids) == list(range(250))
    assert core.take(10, 0.0) == []  # 250 unacked: nothing more
    core.ack(ids[0])
    assert [r[2] for r, _ in core.take(10, 0.0)] == [250]


def test_between_a_revoke_and_the_next_assignment_the_spout_is_not_at_its_end():
    core = SpoutCore()
    core.assigned({TP: 0})
    core.set_high({TP: 0}, stop_at_end=True)
    assert core.at_end()
    core.revoking([TP])
    core.release([TP])
    assert not core.at_end()  # no lanes, but an assignment is on its way
    core.assigned({("t", 1): 0})
    core.set_high({("t", 1): 0}, stop_at_end=True)
    assert core.at_end()


def test_offsets_the_consumer_skipped_do_not_hold_the_commit_or_the_end_back():
    # a transactional topic: offset 2 is a commit marker, never handed over; hwm is 3
    core = SpoutCore()
    core.assigned({TP: BEGINNING})
    core.polled(records(2))
    ids = emitted(core)
    core.set_high({TP: 3}, stop_at_end=True, positions={TP: 3})  # 0 and 1 in flight
    assert core.lanes[TP].position() == 0
    for mid in ids.values():
        core.ack(mid)
    assert not core.at_end()  # completed up to 2; the end is 3
    core.set_high({TP: 3}, stop_at_end=True, positions={TP: 3})
    assert core.at_end()
    assert committed(core) == {TP: 3}
    core.polled(records(1, start=3))  # and on it goes
    assert list(emitted(core)) == [3]


def test_a_due_replay_is_emitted_even_past_max_uncommitted():
    # KafkaSpoutEmitTest: failed tuples are emitted again although the limit is reached
    core = SpoutCore(max_uncommitted=3, retry=Retry(delay_period_secs=0.0))
    core.assigned({TP: 0})
    core.polled(records(5))
    ids = emitted(core)
    assert sorted(ids) == [0, 1, 2]
    core.fail(ids[1], now=0.0)
    assert list(emitted(core)) == [1]  # the replay, and nothing new


def test_a_fail_of_a_partition_no_longer_assigned_is_ignored():
    # KafkaSpoutRebalanceTest: fails (as acks) of an earlier assignment change nothing
    core = SpoutCore(retry=Retry(delay_period_secs=0.0))
    core.assigned({TP: 0})
    core.polled(records(2))
    old = emitted(core)
    core.revoking([TP])
    core.release([TP])
    core.assigned({TP: 0})
    core.polled(records(2))
    new = emitted(core)
    assert core.fail(old[0], now=0.0) == [] and emitted(core) == {}
    core.ack(old[1])
    assert core.lanes[TP].position() == 0
    core.ack(new[0])
    core.ack(new[1])
    assert committed(core) == {TP: 2}


def test_a_poll_of_interleaved_runs_with_duplicates_and_foreign_partitions():
    # a poll hands over runs of partitions (the lane is looked up once a run): runs of
    # one partition split by another's, a redelivery of what was had, a partition that
    # is not ours; each lane keeps its records once, in offset order
    a, b = ("t", 0), ("t", 1)
    core = SpoutCore()
    core.assigned({a: 0, b: 5})
    core.polled([*records(3, 0, a), *records(2, 5, b), *records(2, 2, a), *records(2, 9, ("t", 7))])
    core.polled([*records(1, 6, b), *records(1, 4, a), *records(2, 6, b)])  # 6 of b again
    got: dict[tuple, list[int]] = {a: [], b: []}
    for r, _ in core.take(100, 0.0):
        got[(r[0], r[1])].append(r[2])
    assert got == {a: [0, 1, 2, 3, 4], b: [5, 6, 7]}
    assert core.buffered == 0
    assert core.lanes[a].fetched == 5 and core.lanes[b].fetched == 8


def test_an_ack_of_an_earlier_assignment_of_the_partition_is_ignored():
    core = SpoutCore()
    core.assigned({TP: 0})
    core.polled(records(2))
    old = emitted(core)
    core.revoking([TP])
    core.release([TP])
    core.assigned({TP: 0})  # the same partition again: a new epoch
    core.polled(records(2))
    new = emitted(core)
    assert old[0] != new[0]
    core.ack(old[0])  # late, from the first assignment: completes nothing now
    assert committed(core) == {}
    core.ack(new[0])
    assert committed(core) == {TP: 1}


def test_the_sync_commit_resends_a_position_only_an_async_commit_carried():
    # an async commit's failure is never reported back: the position it carried is not
    # known to be committed, so the next sync commit (close, deactivate, a revoke) sends
    # it again instead of skipping it as "already committed"
    core = SpoutCore(commit_interval=30.0)
    core.assigned({TP: 0, ("t", 1): 4})
    core.polled(records(3) + records(2, start=4, tp=("t", 1)))
    for mid in emitted(core).values():
        core.ack(mid)
    assert core.tick(30.0) == Commit({TP: 3, ("t", 1): 6}, sync=False)
    assert core.tick(60.0) is None  # the periodic one does not repeat itself
    assert core.commit_now(sync=True) == Commit({TP: 3, ("t", 1): 6}, sync=True)
    assert core.commit_now(sync=True) is None  # committed synchronously: done
    assert core.tick(90.0) is None


def test_a_revoke_commits_a_position_only_an_async_commit_carried():
    core = SpoutCore(commit_interval=1.0)
    core.assigned({TP: 0})
    core.polled(records(2))
    for mid in emitted(core).values():
        core.ack(mid)
    assert core.tick(1.0) == Commit({TP: 2}, sync=False)
    core.revoking([TP])
    assert core.release([TP]) == Commit({TP: 2}, sync=True)
