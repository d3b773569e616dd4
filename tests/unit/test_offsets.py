"""Offsets a spout may commit: exactly the in-order prefix of what
completed, whatever order trees complete in, fails and replays included."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stormish import Spout
from stormish.offsets import OffsetTracker


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 40), st.integers(0, 1000), st.randoms(use_true_random=False), st.data())
def test_the_committed_position_is_exactly_the_completed_prefix(n, start, rnd, data):
    """Any completion order, with some offsets failing (replayed: tracked again) first:
    after each completion the committed position is the first offset not completed."""
    gaps = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
    offsets = [start + i * (2 if g else 1) for i, g in enumerate(gaps)]  # gaps: a compacted log
    offsets = sorted(set(offsets))
    t = OffsetTracker(offsets[0])
    for o in offsets:
        t.track(o)
    failing = set(data.draw(st.lists(st.sampled_from(offsets), max_size=5)))
    order = list(offsets)
    rnd.shuffle(order)
    done: set[int] = set()
    for o in order:
        if o in failing:  # failed: stays pending, replayed later
            failing.discard(o)
            t.track(o)  # the replay
            order.append(o)
            continue
        moved = t.complete(o)
        done.add(o)
        prefix = 0  # the longest run of offsets, from the first, all completed
        while prefix < len(offsets) and offsets[prefix] in done:
            prefix += 1
        committed = offsets[prefix - 1] + 1 if prefix else offsets[0]
        assert t.committed == committed, (o, sorted(done))
        assert moved in (None, t.committed)
    assert t.committed == offsets[-1] + 1 and t.in_flight() == 0


def test_an_offset_in_flight_holds_back_every_later_one():
    t = OffsetTracker(5)
    for o in range(5, 10):
        t.track(o)
    assert [t.complete(o) for o in (6, 7, 8, 9)] == [None] * 4
    assert t.committed == 5
    assert t.complete(5) == 10
    assert t.complete(5) is None  # acked twice: nothing moves
    with pytest.raises(ValueError, match="below the committed position 10"):
        t.track(3)


def test_a_spout_tracks_offsets_per_partition():
    s = Spout()
    for o in (100, 101, 102):
        s.track_offset(o, partition="p0")
    s.track_offset(7, partition="p1")
    assert s.ack_offset(101, "p0") is None
    assert s.ack_offset(100, "p0") == 102
    assert s.committed_offset("p0") == 102 and s.committed_offset("p1") == 7
    assert s.ack_offset(7, "p1") == 8


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 60), st.integers(0, 1000), st.randoms(use_true_random=False), st.data())
def test_ascending_runs_and_in_order_completions_keep_the_completed_prefix(n, start, rnd, data):
    """As KafkaSpout drives it: new offsets tracked in ascending runs (`track_ascending`)
    while earlier ones complete, mostly in order (the fast path), some out of order, some
    failed and tracked again first; after each completion the committed position is the
    first offset not completed."""
    gaps = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
    offsets = sorted({start + i * (2 if g else 1) for i, g in enumerate(gaps)})
    t = OffsetTracker(offsets[0])
    emitted: list[int] = []
    done: set[int] = set()
    failing = set(data.draw(st.lists(st.sampled_from(offsets), max_size=5)))
    i = 0
    while len(done) < len(offsets):
        if i < len(offsets) and (not emitted or rnd.random() < 0.5):
            k = rnd.randint(1, 8)
            run = offsets[i : i + k]
            t.track_ascending(run)
            emitted.extend(run)
            i += len(run)
            continue
        if not emitted:
            continue
        j = 0 if rnd.random() < 0.7 else rnd.randrange(len(emitted))  # mostly the oldest
        o = emitted.pop(j)
        if o in failing:  # failed: replayed (tracked again), completes later
            failing.discard(o)
            t.track(o)
            emitted.append(o)
            continue
        moved = t.complete(o)
        done.add(o)
        prefix = 0
        while prefix < len(offsets) and offsets[prefix] in done:
            prefix += 1
        assert t.committed == (offsets[prefix - 1] + 1 if prefix else offsets[0]), o
        assert moved in (None, t.committed)
    assert t.committed == offsets[-1] + 1 and t.in_flight() == 0


def test_track_ascending_below_what_was_tracked_tracks_one_by_one():
    t = OffsetTracker(0)
    t.track_ascending([0, 1, 2, 5])
    t.track_ascending([3, 4])  # below 5: the heap takes them one by one
    for o in (0, 1, 2, 3, 4):
        t.complete(o)
    assert t.committed == 5
    with pytest.raises(ValueError, match="below the committed"):
        t.track_ascending([1, 2])
    assert t.complete(5) == 6


def test_track_ascending_below_a_split_range_still_completes_in_order():
    """A range split into its single offsets pushes offsets up to its last (here 9, the
    log having skipped 1..8): a run tracked later below that is not appended as it is
    (the heap would put 9 first and hold 3 and 4 back), it is pushed one by one."""
    t = OffsetTracker(0)
    t.track_range(0, 9)
    t.split(0, [9])
    assert t.complete(0) == 1
    t.track_ascending([3, 4])
    assert t.complete(3) == 4 and t.complete(4) == 5
    assert t.complete(9) == 10 and t.in_flight() == 0
