"""Process latency matched per batch (runtime/process_latency.py), as scenarios: batches
executed at given times with the acked + failed count after each, the figures that
come out."""

from __future__ import annotations

import pytest

from stormish.runtime.process_latency import MAX_WAITING, ProcessLatency
from stormish.runtime.stats import EXECUTE_BUCKETS


def test_tuples_settled_in_their_own_execute_count_the_execute_time():
    p = ProcessLatency(30.0)
    p.executed(0.0, 0.004, 4, 4, waits=False)  # a BasicBolt: 1 ms a tuple
    p.executed(1.0, 1.002, 2, 6, waits=True)  # a Bolt acking in execute
    assert p.count == 6
    assert p.seconds == pytest.approx(0.006)
    assert not p.waiting


def test_a_bolt_that_acks_later_counts_from_its_batch_start_to_the_ack():
    p = ProcessLatency(30.0)
    p.executed(0.0, 0.001, 10, 0, waits=True)  # kept, nothing acked
    p.executed(1.8, 1.801, 10, 0, waits=True)
    assert p.count == 0 and [e[1] for e in p.waiting] == [10, 10]
    # a tick at 2.0 acks all 20: the oldest first, each up to the tick's end
    p.executed(2.0, 2.001, 1, 20, waits=False)
    assert p.count == 20
    assert p.seconds == pytest.approx(10 * 2.001 + 10 * (2.001 - 1.8))
    assert not p.waiting
    assert p.hist[bisect(2.001)] == 10 and p.hist[bisect(0.201)] == 10


def bisect(seconds: float) -> int:
    from bisect import bisect_right

    return bisect_right(EXECUTE_BUCKETS, seconds)


def test_acks_in_a_batch_settle_older_tuples_before_its_own():
    p = ProcessLatency(30.0)
    p.executed(0.0, 0.1, 2, 0, waits=True)  # acks tuple k-1 while executing tuple k
    p.executed(1.0, 1.1, 2, 2, waits=True)
    assert p.count == 2  # the first batch's two, at the end of the second
    assert p.seconds == pytest.approx(2 * 1.1)
    assert [e[1] for e in p.waiting] == [2]


def test_settled_outside_an_execute_count_at_that_moment():
    p = ProcessLatency(30.0)
    p.executed(0.0, 0.001, 5, 0, waits=True)  # a settle batch's rows wait
    p.outside(0.25, 5)  # its timer runs the batch
    assert p.count == 5 and p.seconds == pytest.approx(5 * 0.25)
    p.outside(0.5, 7)  # nothing waits: not measured
    assert p.count == 5


def test_tuples_never_settled_stop_being_waited_for():
    p = ProcessLatency(1.0)
    p.executed(0.0, 0.001, 3, 0, waits=True)  # never acked (their trees time out)
    p.executed(5.0, 5.001, 1, 0, waits=True)
    p.executed(5.5, 5.501, 1, 1, waits=True)  # acks the one from 5.0, not a lost one
    assert p.count == 1 and p.seconds == pytest.approx(0.501)
    for _ in range(MAX_WAITING + 10):
        p.executed(6.0, 6.0, 1, 1, waits=True)
    assert len(p.waiting) == MAX_WAITING


def test_ticks_and_untracked_tuples_never_wait():
    p = ProcessLatency(30.0)
    p.executed(0.0, 0.001, 1, 0, waits=False)  # a tick nobody acks
    p.executed(1.0, 1.002, 2, 2, waits=True)
    assert p.count == 2 and p.seconds == pytest.approx(0.002)
