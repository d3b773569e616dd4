"""KafkaSpout records_per_tree (stormish.kafka.core): consecutive records of a partition
as one tuple tree. The commit is still the in-order completed prefix of offsets; a
failed tree replays each of its records as a tree of its own, with its own retry count
and dead letter."""

from __future__ import annotations

import pytest

from stormish.kafka import KafkaSpout
from stormish.kafka.core import DeadLetter, Pause, Resume, SpoutCore
from stormish.kafka.retry import Retry

TP = ("t", 0)


def records(n: int, start: int = 0, tp: tuple[str, int] = TP) -> list[tuple]:
    return [(tp[0], tp[1], o, None, f"v{o}".encode(), 0) for o in range(start, start + n)]


def committed(core: SpoutCore) -> dict:
    c = core.commit_now(sync=False)
    return c.offsets if c else {}


def trees(core: SpoutCore, now: float = 0.0, limit: int = 10_000) -> list[tuple[list, tuple]]:
    return core.take(limit, now)


def test_records_go_out_in_trees_of_n_in_offset_order():
    core = SpoutCore(records_per_tree=4)
    core.assigned({TP: 0})
    core.polled(records(10))
    out = trees(core)
    assert [[r[2] for r in rows] for rows, _ in out] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert [mid for _, mid in out] == [("t", 0, 0, 1, 3), ("t", 0, 4, 1, 7), ("t", 0, 8, 1, 9)]
    assert core.in_flight() == 10 and core.buffered == 0


def test_limit_counts_trees_as_max_spout_pending_does():
    core = SpoutCore(records_per_tree=3)
    core.assigned({TP: 0})
    core.polled(records(10))
    assert len(trees(core, limit=2)) == 2
    assert core.in_flight() == 6 and core.buffered == 4


def test_a_tree_acked_out_of_order_commits_only_the_completed_prefix():
    core = SpoutCore(records_per_tree=5)
    core.assigned({TP: 0})
    core.polled(records(15))
    (_, a), (_, b), (_, c) = trees(core)
    core.ack(b)
    core.ack(c)
    assert committed(core) == {}  # 0..4 still in flight holds 5..14 back
    core.ack(a)
    assert committed(core) == {TP: 15}
    assert core.in_flight() == 0
    core.ack(a)  # acked twice: nothing moves, nothing breaks
    assert committed(core) == {}


def test_a_failed_tree_replays_each_record_alone_and_nothing_later():
    core = SpoutCore(records_per_tree=4, retry=Retry(initial_delay_secs=1.0))
    core.assigned({TP: 0})
    core.polled(records(8))
    (_, first), (_, second) = trees(core)
    core.ack(second)
    assert core.fail(first, now=0.0) == []
    assert trees(core, now=0.5) == []  # the backoff is not over
    again = trees(core, now=1.0)
    # one-record trees, the per-record message id of a tree of one
    assert [(r[2], mid) for r, mid in again] == [(o, ("t", 0, o, 1)) for o in range(4)]
    for _, mid in again[:3]:
        core.ack(mid)
    assert committed(core) == {TP: 3}  # 3 is still replaying
    core.ack(again[3][1])
    assert committed(core) == {TP: 8}


def test_retry_limit_dead_letters_each_record_of_a_failed_tree():
    core = SpoutCore(records_per_tree=3, retry=Retry(max_retries=0))
    core.assigned({TP: 0})
    core.polled(records(3))
    ((_, mid),) = trees(core)
    out = core.fail(mid, now=0.0, error="boom")
    assert [(d.record[2], d.failures, d.error) for d in out if isinstance(d, DeadLetter)] == [
        (0, 1, "boom"),
        (1, 1, "boom"),
        (2, 1, "boom"),
    ]
    assert committed(core) == {TP: 3}  # given up: committed past
    assert core.dead_lettered == 3


def test_a_tree_of_an_earlier_assignment_is_ignored():
    core = SpoutCore(records_per_tree=2)
    core.assigned({TP: 0})
    core.polled(records(2))
    ((_, old),) = trees(core)
    core.revoking([TP])
    core.release([TP])
    core.assigned({TP: 0})  # assigned again: a new epoch
    core.polled(records(2))
    ((_, new),) = trees(core)
    assert core.ack(old) is None and core.fail(old, now=0.0) == []
    assert committed(core) == {}
    core.ack(new)
    assert committed(core) == {TP: 2}


def test_offsets_the_log_skipped_inside_a_tree_complete_with_it():
    core = SpoutCore(records_per_tree=10)
    core.assigned({TP: 0})
    core.polled([r for r in records(6) if r[2] != 3])  # offset 3 compacted away
    ((rows, mid),) = trees(core)
    assert mid == ("t", 0, 0, 1, 5) and len(rows) == 5
    core.ack(mid)
    assert committed(core) == {TP: 6}


def test_max_uncommitted_pauses_and_a_tree_ack_resumes():
    core = SpoutCore(max_uncommitted=4, records_per_tree=2)
    core.assigned({TP: 0})
    assert core.polled(records(4)) == [Pause((TP,))]
    out = trees(core)
    assert len(out) == 2
    assert core.ack(out[0][1]) == Resume((TP,))


@pytest.mark.parametrize(
    "kw",
    [
        {"records_per_tree": 0},
        {"records_per_tree": 2, "processing_guarantee": "at_most_once"},
        {"records_per_tree": 2, "translator": lambda r: r},
        {"records_per_tree": 2, "stream_per_topic": True},
    ],
)
def test_records_per_tree_bad_combinations_are_refused(kw):
    with pytest.raises(ValueError, match="records_per_tree"):
        KafkaSpout("127.0.0.1:9092", topics=["t"], group_id="g", **kw)


def test_offset_tracker_range_completes_as_one_and_splits_into_singles():
    from stormish.offsets import OffsetTracker

    t = OffsetTracker(0)
    t.track_range(0, 4)
    t.track_range(5, 9)
    assert t.complete(5) is None  # 0..4 still pending
    assert t.complete(0) == 10
    t.track_range(10, 14)
    t.split(10, [11, 13, 14])  # 12 the log skipped
    assert t.complete(11) is None and t.complete(10) == 12
    assert t.complete(14) is None and t.complete(13) == 15
    t.track(15)
    assert t.complete(15) == 16  # single offsets as before


def test_a_tree_failed_for_good_by_the_engine_commits_past_all_its_records():
    core = SpoutCore(records_per_tree=3)
    core.assigned({TP: 0})
    core.polled(records(6))
    (_, a), (_, b) = trees(core)
    assert core.fail(a, now=0.0, dead=True) == []  # topology.max.replays: no replay
    core.ack(b)
    assert committed(core) == {TP: 6}
    assert core.in_flight() == 0 and trees(core, now=100.0) == []


def test_a_failed_tree_with_a_skipped_offset_replays_the_records_it_has():
    core = SpoutCore(records_per_tree=10, retry=Retry(delay_period_secs=0.0))
    core.assigned({TP: 0})
    core.polled([r for r in records(5) if r[2] != 2])
    ((_, mid),) = trees(core)
    core.fail(mid, now=0.0)
    again = trees(core, now=0.0)
    assert [r[2] for r, _ in again] == [0, 1, 3, 4]
    for _, m in reversed(again):
        core.ack(m)
    assert committed(core) == {TP: 5}


def test_a_revoke_waits_for_trees_in_flight_and_commits_what_completed():
    core = SpoutCore(records_per_tree=4)
    core.assigned({TP: 0})
    core.polled(records(12))
    (_, a), (_, b) = trees(core, limit=2)  # 8..11 stay buffered
    core.revoking([TP])
    assert not core.drained([TP])
    core.ack(a)
    assert core.fail(b, now=0.0) == []  # revoking: the next owner reads it again
    assert core.drained([TP])
    assert core.release([TP]).offsets == {TP: 4}


def test_a_tree_is_one_entry_in_flight_until_it_fails_then_one_a_record():
    core = SpoutCore(records_per_tree=4, retry=Retry(delay_period_secs=0.0))
    core.assigned({TP: 0})
    core.polled(records(8))
    (_, a), (_, b) = trees(core)
    assert core.trees_in_flight() == 2 and core.in_flight() == 8
    assert core.fail(a, now=0.0) == []
    assert core.trees_in_flight() == 5 and core.in_flight() == 8  # 0..3 on their own
    # the failed tree's id again, failed or acked: nothing moves (each record is its own
    # tree now; counting its failure twice would shorten its retries)
    assert core.fail(a, now=0.0) == [] and core.ack(a) is None
    assert committed(core) == {}
    again = trees(core, now=0.0)
    assert [r[2] for r, _ in again] == [0, 1, 2, 3]
    assert [core.lanes[TP].failures[o] for o in range(4)] == [1, 1, 1, 1]
    core.ack(b)
    for _, m in again:
        core.ack(m)
    assert committed(core) == {TP: 8}
    assert core.in_flight() == 0 and core.trees_in_flight() == 0
