"""storm-kafka-client's offset and retry tests ported to stormish's pure logic:
internal/OffsetManagerTest against stormish.offsets.OffsetTracker, and the spout tests
that are about decisions (KafkaSpoutSingleTopicTest, KafkaSpoutEmitTest,
KafkaSpoutRetryLimitTest, KafkaSpoutLogCompactionSupportTest, MaxUncommittedOffsetTest,
KafkaSpoutMessagingGuaranteeTest, KafkaSpoutRebalanceTest,
KafkaSpoutRetryExponentialBackoffTest) against stormish.kafka.core.SpoutCore, time given
by the test. Each docstring names the Storm test it ports; where stormish differs by
design, it says how.

Two differences hold throughout. A tracker's offsets are tracked in ascending order per
partition (the spout emits a partition's records in offset order; a replay stays
pending, it is not tracked again), so Storm's scenarios that emit a lower offset after a
higher one completed are ported with the emission in order. And a failed record is
replayed from the record the spout holds, not by seeking the consumer back, so a record
compacted away between its failure and its replay is replayed all the same.
"""

from __future__ import annotations

import pytest

from stormish.kafka.core import AT_MOST_ONCE, NO_GUARANTEE, Commit, DeadLetter, Pause, SpoutCore
from stormish.kafka.retry import Retry
from stormish.offsets import OffsetTracker

TP = ("t", 0)
TP2 = ("t", 1)


def records(offsets, tp=TP) -> list[tuple]:
    return [(tp[0], tp[1], o, None, f"v{o}".encode(), 0) for o in offsets]


def emitted(core: SpoutCore, now: float = 0.0, limit: int = 10_000) -> dict:
    """(partition, offset) -> message id of what the core emits now."""
    return {(r[1], r[2]): mid for r, mid in core.take(limit, now)}


def offsets(got: dict, partition: int = 0) -> list[int]:
    return sorted(o for p, o in got if p == partition)


def committed(core: SpoutCore) -> dict:
    c = core.commit_now(sync=True)
    return c.offsets if c else {}


# -- OffsetManagerTest ---------------------------------------------------------------------
def test_skip_missing_offsets_with_a_gap_in_the_middle_of_acked():
    """OffsetManagerTest.testSkipMissingOffsetsWhenFindingNextCommitOffsetWithGapInMiddleOfAcked:
    3 and 4 compacted away; 0..2 and 6 acked: the commit stops at pending 5; once 5 is
    acked it passes the gap to 7."""
    t = OffsetTracker(0)
    t.track_ascending([0, 1, 2, 5, 6])
    for o in (0, 1, 2, 6):
        t.complete(o)
    assert t.committed == 3
    assert t.complete(5) == 7


def test_skip_missing_offsets_with_a_gap_before_acked():
    """OffsetManagerTest.testSkipMissingOffsetsWhenFindingNextCommitOffsetWithGapBeforeAcked:
    0..4 compacted away: nothing to commit while 5 is pending; then past 6."""
    t = OffsetTracker(0)
    t.track_ascending([5, 6])
    assert t.complete(6) is None and t.committed == 0
    assert t.complete(5) == 7


def test_next_commit_offset_with_no_acks_one_ack_and_out_of_order_acks():
    """OffsetManagerTest.testFindNextCommittedOffsetWithNoAcks, ...WithOneAck and
    ...WithMultipleOutOfOrderAcks (emitted in order, acked 1 then 0)."""
    t = OffsetTracker(0)
    assert t.committed == 0
    t.track(0)
    assert t.complete(0) == 1  # the next offset to read: the processed one + 1
    t = OffsetTracker(0)
    t.track_ascending([0, 1])
    assert t.complete(1) is None
    assert t.complete(0) == 2


def test_next_commit_offset_with_an_acked_and_an_unacked_gap():
    """OffsetManagerTest.testFindNextCommitOffsetWithAckedOffsetGap and
    ...WithUnackedOffsetGap: an offset emitted and not acked holds every later one back."""
    t = OffsetTracker(0)
    t.track_ascending([0, 1, 2])
    t.complete(2)
    t.complete(0)
    assert t.committed == 1
    t = OffsetTracker(0)
    t.track_ascending([0, 1])
    t.complete(0)
    assert t.committed == 1
    assert t.in_flight() == 1


def test_next_commit_offset_passes_an_offset_never_emitted():
    """OffsetManagerTest.testFindNextOffsetWithAckedButNotEmittedOffsetGap: 1 was never
    emitted (it does not exist: the spout emits in order): 0 and 2 acked commit 3."""
    t = OffsetTracker(0)
    t.track_ascending([0, 2])
    t.complete(2)
    assert t.complete(0) == 3


def test_an_offset_below_the_committed_one_acked_changes_nothing():
    """OffsetManagerTest.testFindNextCommitOffsetWhenTooLowOffsetIsAcked."""
    t = OffsetTracker(10)
    assert t.complete(0) is None
    assert t.committed == 10


def test_an_offset_emitted_below_the_committed_one_is_refused():
    """Storm's OffsetManager accepts a lower offset emitted after a higher one completed
    (testFindNextCommitOffsetWithAckedOffsetGap emits 2, then 1); the tracker says that
    its offsets must be tracked in order instead of committing past it silently."""
    t = OffsetTracker(0)
    t.track(2)
    assert t.complete(2) == 3
    with pytest.raises(ValueError, match="below the committed position 3"):
        t.track(1)
    t.track(3)
    t.complete(3)
    with pytest.raises(ValueError):
        t.track_ascending([1, 2])


# -- KafkaSpoutSingleTopicTest -------------------------------------------------------------
def test_slow_double_acks_do_not_stop_the_partition():
    """KafkaSpoutSingleTopicTest.testShouldContinueWithSlowDoubleAcks: the first tuple
    acked twice (the second time after more were emitted); all are committed."""
    core = SpoutCore()
    core.assigned({TP: 0})
    core.polled(records(range(20)))
    first = emitted(core, limit=1)
    core.ack(first[(0, 0)])
    more = emitted(core, limit=10)
    core.ack(first[(0, 0)])
    rest = emitted(core)
    assert offsets(more) + offsets(rest) == list(range(1, 20))
    for mid in [*more.values(), *rest.values()]:
        core.ack(mid)
    assert committed(core) == {TP: 20}


def test_replay_in_order_failed_messages():
    """KafkaSpoutSingleTopicTest.testShouldReplayInOrderFailedMessages: 0 acked, 1
    failed; everything but 0 goes out (1 once more), and all 10 are committed."""
    core = SpoutCore(retry=Retry(delay_period_secs=0.0))
    core.assigned({TP: 0})
    core.polled(records(range(10)))
    ids = emitted(core, limit=1)
    core.ack(ids[(0, 0)])
    ids = emitted(core, limit=1)
    core.fail(ids[(0, 1)], now=0.0)
    rest = emitted(core)
    assert offsets(rest) == list(range(1, 10))
    for mid in rest.values():
        core.ack(mid)
    assert committed(core) == {TP: 10}


def test_replay_first_tuple_failed_out_of_order():
    """KafkaSpoutSingleTopicTest.testShouldReplayFirstTupleFailedOutOfOrder: 1 acked,
    then 0 failed: 0 is replayed with 2..9, and all 10 are committed."""
    core = SpoutCore(retry=Retry(delay_period_secs=0.0))
    core.assigned({TP: 0})
    core.polled(records(range(10)))
    ids = emitted(core, limit=2)
    core.ack(ids[(0, 1)])
    core.fail(ids[(0, 0)], now=0.0)
    assert committed(core) == {}
    rest = emitted(core)
    assert offsets(rest) == [0, *range(2, 10)]
    for mid in rest.values():
        core.ack(mid)
    assert committed(core) == {TP: 10}


def test_replay_all_failed_tuples_when_failed_out_of_order():
    """KafkaSpoutSingleTopicTest.testShouldReplayAllFailedTuplesWhenFailedOutOfOrder:
    fail 5 and 3, emit, fail 2: exactly those three go out again."""
    core = SpoutCore(retry=Retry(delay_period_secs=0.0))
    core.assigned({TP: 0})
    core.polled(records(range(10)))
    ids = emitted(core)
    core.fail(ids[(0, 5)], now=0.0)
    core.fail(ids[(0, 3)], now=0.0)
    again = emitted(core, limit=1)
    core.fail(ids[(0, 2)], now=0.0)
    again.update(emitted(core))
    assert offsets(again) == [2, 3, 5]
    assert set(again.values()) == {ids[(0, 2)], ids[(0, 3)], ids[(0, 5)]}
    assert emitted(core, now=100.0) == {}


def test_replay_of_the_first_does_not_emit_the_acked_ones_again():
    """KafkaSpoutSingleTopicTest.testSeekToCommittedOffsetIfConsumerPositionIsBehindWhenCommitting
    and testClearingWaitingToEmitIfConsumerPositionIsNotBehindWhenCommitting: 10 of 11
    emitted, 0 failed and 1..9 acked; the replay is 0 alone, then the commit is 10 and
    the next new record is 10."""
    core = SpoutCore(retry=Retry(delay_period_secs=0.0))
    core.assigned({TP: 0})
    core.polled(records(range(11)))
    ids = emitted(core, limit=10)
    for o in range(1, 10):
        core.ack(ids[(0, o)])
    core.fail(ids[(0, 0)], now=0.0)
    replay = emitted(core, limit=1)
    assert replay == {(0, 0): ids[(0, 0)]}
    core.ack(replay[(0, 0)])
    assert committed(core) == {TP: 10}
    last = emitted(core)
    assert offsets(last) == [10]


def test_a_record_is_dropped_after_max_retries():
    """KafkaSpoutSingleTopicTest.testShouldDropMessagesAfterMaxRetriesAreReached (3
    retries): emitted and failed 4 times, then not emitted again, and committed past."""
    core = SpoutCore(retry=Retry(delay_period_secs=0.0, max_retries=3))
    core.assigned({TP: 0})
    core.polled(records([0]))
    outs = []
    for _ in range(4):
        (mid,) = emitted(core).values()
        outs = core.fail(mid, now=0.0)
    assert [type(d) for d in outs] == [DeadLetter] and outs[0].failures == 4
    assert emitted(core, now=100.0) == {}
    assert committed(core) == {TP: 1}


# -- KafkaSpoutRetryLimitTest --------------------------------------------------------------
def test_failing_tuples_complete_after_a_retry_limit_of_zero():
    """KafkaSpoutRetryLimitTest.testFailingTupleCompletesAckAfterRetryLimitIsMet: no
    retries: 4 records all failed are given up and the commit is 4."""
    core = SpoutCore(retry=Retry(max_retries=0))
    core.assigned({TP: 0})
    core.polled(records(range(4)))
    dead = []
    for mid in emitted(core).values():
        dead += core.fail(mid, now=0.0)
    assert [d.record[2] for d in dead] == [0, 1, 2, 3]
    assert emitted(core, now=100.0) == {}
    assert committed(core) == {TP: 4}


# -- KafkaSpoutEmitTest --------------------------------------------------------------------
def test_a_limit_of_one_emits_at_most_one_tuple():
    """KafkaSpoutEmitTest.testNextTupleEmitsAtMostOneTuple: stormish's next_tuple emits
    what max.spout.pending leaves; with room for one, one."""
    core = SpoutCore()
    core.assigned({TP: 0})
    core.polled(records(range(10)))
    assert len(core.take(1, 0.0)) == 1


def test_failed_messages_are_emitted_even_when_max_uncommitted_is_reached():
    """KafkaSpoutEmitTest.testNextTupleEmitsFailedMessagesEvenWhenMaxUncommittedOffsetsIsExceeded."""
    core = SpoutCore(max_uncommitted=10, retry=Retry(initial_delay_secs=0.05))
    core.assigned({TP: 0})
    assert core.polled(records(range(10))) == [Pause((TP,))]
    ids = emitted(core)
    for mid in ids.values():
        core.fail(mid, now=0.0)
    assert emitted(core, now=0.01) == {}  # the backoff
    assert emitted(core, now=0.05) == ids


def test_partitions_at_the_limit_do_not_keep_each_other_from_retrying():
    """KafkaSpoutEmitTest.testSpoutWillSkipPartitionsAtTheMaxUncommittedOffsetsLimit: two
    partitions at the limit; a failed tuple of one is retried; nothing new from either.
    (Storm emits the second partition one past the limit, fetched in the same poll, and
    then holds back its retry; stormish emits no offset past the limit in the first place.)"""
    core = SpoutCore(max_uncommitted=10, retry=Retry(delay_period_secs=0.0))
    core.assigned({TP: 0, TP2: 0})
    core.polled(records(range(10)) + records(range(11), tp=TP2))
    ids = emitted(core)
    assert offsets(ids, 0) == list(range(10)) and offsets(ids, 1) == list(range(10))
    core.fail(ids[(0, 3)], now=0.0)
    core.fail(ids[(1, 9)], now=0.0)
    again = emitted(core)
    assert sorted(again) == [(0, 3), (1, 9)]
    assert emitted(core) == {}


# -- MaxUncommittedOffsetTest --------------------------------------------------------------
def test_more_are_emitted_when_a_commit_brings_the_partition_below_the_limit():
    """MaxUncommittedOffsetTest.testNextTupleCanEmitMoreMessagesWhenDroppingBelowMaxUncommittedOffsetsDueToCommit."""
    core = SpoutCore(max_uncommitted=10)
    core.assigned({TP: 0})
    core.polled(records(range(100)))
    ids = emitted(core)
    assert offsets(ids) == list(range(10))
    for mid in ids.values():
        core.ack(mid)
    assert offsets(emitted(core)) == list(range(10, 20))


def test_acked_but_uncommitted_tuples_still_count_against_the_limit():
    """MaxUncommittedOffsetTest.testNextTupleWillRespectMaxUncommittedOffsetsWhenThereAreAckedUncommittedTuples:
    all but the last failed (a minute's backoff), the last acked: nothing new is emitted."""
    core = SpoutCore(max_uncommitted=10, retry=Retry(initial_delay_secs=60))
    core.assigned({TP: 0})
    core.polled(records(range(100)))
    ids = emitted(core)
    for o in range(9):
        core.fail(ids[(0, o)], now=0.0)
    core.ack(ids[(0, 9)])
    assert committed(core) == {}
    assert emitted(core, now=1.0) == {}


def test_retries_below_the_limit_go_out_and_nothing_past_it():
    """MaxUncommittedOffsetTest.testNextTupleWillAllowRetryForTuplesBelowEmitLimit and
    testNextTupleWillNotEmitMoreThanMaxUncommittedOffsetsPlusMaxPollRecordsMessages: 0
    acked, 1..9 failed: the commit is 1, and the one new offset below 1 + 10 goes out
    (Storm's limit is soft by up to a poll: maxUncommittedOffsets + maxPollRecords - 1;
    stormish's is exact). After the backoff the retries go out, nothing past the limit."""
    core = SpoutCore(max_uncommitted=10, retry=Retry(initial_delay_secs=60))
    core.assigned({TP: 0})
    core.polled(records(range(100)))
    ids = emitted(core)
    for o in range(1, 10):
        core.fail(ids[(0, o)], now=0.0)
    core.ack(ids[(0, 0)])
    assert committed(core) == {TP: 1}
    second = emitted(core, now=1.0)
    assert offsets(second) == [10]
    core.fail(second[(0, 10)], now=1.0)
    third = emitted(core, now=62.0)
    assert offsets(third) == list(range(1, 11))
    assert emitted(core, now=200.0) == {}


# -- KafkaSpoutLogCompactionSupportTest ----------------------------------------------------
def test_commit_passes_offset_voids():
    """KafkaSpoutLogCompactionSupportTest.testCommitSuccessWithOffsetVoids: 0..4, 8, 9
    emitted and acked: the commit is 10."""
    core = SpoutCore()
    core.assigned({TP: 0})
    core.polled(records([0, 1, 2, 3, 4, 8, 9]))
    for mid in emitted(core).values():
        core.ack(mid)
    assert committed(core) == {TP: 10}


def test_commit_a_tuple_after_a_compaction_gap():
    """KafkaSpoutLogCompactionSupportTest.testCommitTupleAfterCompactionGap: 0 and 2
    emitted (1 compacted); 0 acked commits 1, then 2 acked commits 3."""
    core = SpoutCore()
    core.assigned({TP: 0})
    core.polled(records([0]))
    first = emitted(core)
    core.polled(records([2]))
    after = emitted(core)
    core.ack(first[(0, 0)])
    assert committed(core) == {TP: 1}
    core.ack(after[(0, 2)])
    assert committed(core) == {TP: 3}


def test_retries_of_records_compacted_away_meanwhile_still_complete():
    """KafkaSpoutLogCompactionSupportTest.testWillSkipRetriableTuplesIfOffsetsAreCompactedAway
    and ...WithoutAckingPendingTuples: Storm seeks back to replay, finds 0 and 1 gone
    and skips them; stormish replays the records it holds, so all three go out again on
    both partitions and both commit 3. A pending tuple is not acked by any of it."""
    core = SpoutCore(retry=Retry(delay_period_secs=0.0))
    core.assigned({TP: 0, TP2: 0})
    core.polled(records(range(3)) + records(range(3), tp=TP2))
    ids = emitted(core)
    for mid in ids.values():
        core.fail(mid, now=0.0)
    again = emitted(core)
    assert sorted(again) == sorted(ids)
    for mid in again.values():
        core.ack(mid)
    assert committed(core) == {TP: 3, TP2: 3}

    core = SpoutCore(retry=Retry(delay_period_secs=0.0))
    core.assigned({TP: 0})
    core.polled(records(range(3)))
    ids = emitted(core)
    core.fail(ids[(0, 0)], now=0.0)
    core.fail(ids[(0, 2)], now=0.0)
    for mid in emitted(core).values():
        core.ack(mid)
    assert committed(core) == {TP: 1}  # 1 is still pending
    core.ack(ids[(0, 1)])
    assert committed(core) == {TP: 3}


# -- KafkaSpoutMessagingGuaranteeTest ------------------------------------------------------
@pytest.mark.parametrize("guarantee", [AT_MOST_ONCE, NO_GUARANTEE])
def test_other_modes_disregard_max_uncommitted_and_never_replay(guarantee):
    """KafkaSpoutMessagingGuaranteeTest.testAtMostOnceModeDisregardsMaxUncommittedOffsets,
    testNoGuaranteeModeDisregardsMaxUncommittedOffsets and ...CannotReplayTuples: no
    pause, every record emitted, without a message id (nothing to fail or replay)."""
    core = SpoutCore(guarantee, max_uncommitted=10)
    core.assigned({TP: 0})
    decisions = core.polled(records(range(20)))
    assert not [d for d in decisions if isinstance(d, Pause)]
    got = core.take(100, 0.0)
    assert len(got) == 20 and {mid for _, mid in got} == {None}


def test_at_most_once_commits_on_poll_and_not_afterwards():
    """KafkaSpoutMessagingGuaranteeTest.testAtMostOnceModeCommitsBeforeEmit and
    testAtMostOnceModeDoesNotCommitAckedTuples."""
    core = SpoutCore(AT_MOST_ONCE, commit_interval=1.0)
    core.assigned({TP: 0})
    assert core.polled(records([0])) == [Commit({TP: 1}, sync=True)]
    core.take(10, 0.0)
    assert core.tick(5.0) is None
    assert core.commit_now(sync=True) is None


def test_no_guarantee_commits_periodically_whether_acked_or_not():
    """KafkaSpoutMessagingGuaranteeTest.testNoGuaranteeModeCommitsPolledTuples (stormish
    commits what was emitted; Storm the consumer's position)."""
    core = SpoutCore(NO_GUARANTEE, commit_interval=1.0)
    core.assigned({TP: 0})
    core.polled(records([0]))
    core.take(10, 0.0)
    assert core.tick(1.0) == Commit({TP: 1}, sync=False)


# -- KafkaSpoutRebalanceTest ---------------------------------------------------------------
def test_acks_for_a_partition_no_longer_assigned_are_not_committed():
    """KafkaSpoutRebalanceTest.spoutMustIgnoreAcksForTuplesItIsNotAssignedAfterRebalance:
    one tuple on each of two partitions, both revoked, only the second given back; the
    acks that come after only commit the partition still assigned. (stormish's revoke
    waits for the trees in flight; here it timed out, so both lanes went uncommitted.)"""
    core = SpoutCore()
    core.assigned({TP: 0, TP2: 0})
    core.polled(records([0]) + records([0], tp=TP2))
    ids = emitted(core)
    core.revoking([TP, TP2])
    assert not core.drained([TP, TP2])
    assert core.release([TP, TP2]) == Commit({}, sync=True)  # the revoke timed out
    core.assigned({TP2: 0})
    core.ack(ids[(0, 0)])
    core.ack(ids[(1, 0)])  # of the earlier assignment: the new owner reads it again
    assert committed(core) == {}
    core.polled(records([0], tp=TP2))
    (mid,) = emitted(core).values()
    core.ack(mid)
    assert committed(core) == {TP2: 1}


# -- KafkaSpoutRetryExponentialBackoffTest -------------------------------------------------
def test_a_failed_record_is_ready_only_after_its_delay_per_partition():
    """KafkaSpoutRetryExponentialBackoffTest.testCanHandleMultipleTopics and
    testCanHandleMultipleMessagesOnPartition: failures of two partitions half a second
    apart with a one-second delay each become ready one at a time (the first failure
    waits the initial delay alone, as Storm's; the n-th after it period * 2**(n-1))."""
    core = SpoutCore(retry=Retry(initial_delay_secs=1.0, delay_period_secs=0.0))
    core.assigned({TP: 0, TP2: 0})
    core.polled(records([0, 1]) + records([0], tp=TP2))
    ids = emitted(core)
    core.fail(ids[(0, 0)], now=0.0)
    core.fail(ids[(0, 1)], now=0.0)
    core.fail(ids[(1, 0)], now=0.5)
    assert emitted(core, now=0.9) == {}
    assert sorted(emitted(core, now=1.0)) == [(0, 0), (0, 1)]
    assert emitted(core, now=1.4) == {}
    assert sorted(emitted(core, now=1.5)) == [(1, 0)]
