"""A reliable spout's in-flight trees (runtime/inflight.py): expiry in buckets, pops in
bulk, pending counted, and complete latency from stamps."""

from __future__ import annotations

from bisect import bisect_right

from hypothesis import given, settings
from hypothesis import strategies as st

from stormish.runtime.inflight import STAMP_EVERY, InFlight, Tree, parts
from stormish.runtime.stats import COMPLETE_BUCKETS


def test_entries_expire_after_two_or_three_rotations_and_pending_counts_them():
    inf = InFlight(3)
    inf.head[1] = "a"  # as the spout's emit closure records a tree
    inf.put(2, Tree("b", 5, None, "default"))
    assert len(inf) == 2 and inf.trees == 1
    assert inf.rotate(0.0, 60.0) == {}
    inf.head[3] = "c"
    assert len(inf) == 3
    assert inf.rotate(0.0, 60.0) == {}
    dead = inf.rotate(0.0, 60.0)
    assert set(dead) == {1, 2} and inf.trees == 0
    assert len(inf) == 1
    assert set(inf.rotate(0.0, 60.0)) == {3} and len(inf) == 0


def test_the_head_is_one_mapping_for_ever():
    """The emit closure holds it: rotation copies it out, never replaces it."""
    inf = InFlight(3)
    head = inf.head
    head[1] = "a"
    inf.rotate(0.0, 60.0)
    assert inf.head is head and len(head) == 0
    assert inf.pop(1) == "a" and len(inf) == 0


def test_pop_many_finds_in_every_bucket_and_skips_what_is_gone():
    inf = InFlight(3)
    inf.head[1] = "a"
    inf.rotate(0.0, 60.0)
    inf.head[2] = "b"
    inf.put(3, Tree("c", 4, None, "s"))
    entries, roots = inf.pop_many([3, 9, 1, 2])
    assert roots == [3, 1, 2]
    assert [parts(e)[0] for e in entries] == ["c", "a", "b"]
    assert inf.extra_rows(entries) == 3 and inf.trees == 0
    assert len(inf) == 0
    assert inf.pop_many([1]) == ([], [])


def test_renew_moves_an_entry_to_the_newest_bucket():
    inf = InFlight(3)
    inf.head[1] = "a"
    inf.rotate(0.0, 60.0)
    inf.rotate(0.0, 60.0)
    assert inf.renew(1) == "a"
    assert inf.rotate(0.0, 60.0) == {} and inf.rotate(0.0, 60.0) == {}
    assert inf.rotate(0.0, 60.0) == {1: "a"}
    assert inf.renew(1) is None


def test_parts_of_an_entry():
    assert parts("m") == ("m", 1, None, "")
    assert parts(Tree("m", 3, [(1,)], "s")) == ("m", 3, [(1,)], "s")


@settings(max_examples=100, deadline=None)
@given(
    turns=st.lists(st.tuples(st.integers(0, 20), st.floats(0.0, 0.05)), min_size=1, max_size=30),
    done_at=st.floats(0.0, 5.0),
    data=st.data(),
)
def test_latency_of_each_tree_counts_from_its_turns_stamp(turns, done_at, data):
    """Trees emitted in turns (a stamp each, when at least STAMP_EVERY after the last);
    any subset completes at `now`: each counts `now - its stamp's time` in its bucket."""
    inf = InFlight(3)
    root, t = 1000, 0.0
    born: dict[int, float] = {}
    stamp_time = 0.0
    for emitted, gap in turns:
        t += gap
        inf.stamp(root, t)
        if inf.stamp_times[-1] == t:
            stamp_time = t
        for _ in range(emitted):
            born[root] = stamp_time
            root += 3
    if not born:
        return
    done = data.draw(st.lists(st.sampled_from(sorted(born)), unique=True, min_size=1))
    now = t + done_at
    hist = [0] * (len(COMPLETE_BUCKETS) + 1)
    total = inf.latency(done, now, hist, COMPLETE_BUCKETS)
    want = [0] * len(hist)
    want_total = 0.0
    for r in done:
        took = now - born[r]
        want[bisect_right(COMPLETE_BUCKETS, took)] += 1
        want_total += took
    assert hist == want
    assert abs(total - want_total) < 1e-6 * max(1.0, want_total)


def test_stamps_come_at_most_every_stamp_every_and_old_ones_go_at_rotation():
    inf = InFlight(3)
    inf.stamp(10, 0.0)
    inf.stamp(20, STAMP_EVERY / 2)  # too soon: the first stamp covers it
    assert inf.stamp_roots == [10]
    inf.stamp(20, 1.0)
    inf.stamp(20, 2.0)  # nothing emitted since: the stamp moves
    assert inf.stamp_roots == [10, 20] and inf.stamp_times == [0.0, 2.0]
    inf.stamp(30, 100.0)
    inf.rotate(100.0, 60.0)
    assert inf.stamp_roots == [30]
