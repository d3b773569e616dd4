"""Session windows (gap + grace) as scenarios and a property, on plain times."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from stormish.clock import FakeClock
from stormish.windowing.session import SessionManager
from stormish.windowing.spec import Duration, Expired, Window


def secs(n: float) -> Duration:
    return Duration(seconds=n)


def windows(outs) -> list[tuple]:
    return [(w.key, list(w.tuples), w.start, w.end) for w in outs if isinstance(w, Window)]


def test_sessions_split_on_the_gap_and_close_after_gap_plus_grace():
    m = SessionManager(secs(10), secs(2))
    for item, ts in (("a", 100), ("b", 105), ("c", 114), ("d", 130)):
        m.add(item, ts, key="u1")
    assert m.advance(125) == []  # a-c end at 114 + 10, closes at 126 with the grace
    outs = m.advance(126)
    assert windows(outs) == [("u1", ["a", "b", "c"], 100.0, 124.0)]
    assert outs[-1] == Expired(["a", "b", "c"])  # acked after the activation
    assert windows(m.advance(142)) == [("u1", ["d"], 130.0, 140.0)]
    assert len(m) == 0


def test_a_gap_of_exactly_the_gap_starts_a_new_session():
    m = SessionManager(secs(10))
    m.add(1, 0)
    m.add(2, 10)
    assert [w[1] for w in windows(m.advance(100))] == [[1], [2]]


def test_keys_have_sessions_of_their_own():
    m = SessionManager(secs(5))
    m.add("x1", 0, key="x")
    m.add("y1", 1, key="y")
    m.add("x2", 4, key="x")
    m.add("y2", 7, key="y")
    assert windows(m.advance(20)) == [
        ("y", ["y1"], 1.0, 6.0),
        ("x", ["x1", "x2"], 0.0, 9.0),
        ("y", ["y2"], 7.0, 12.0),
    ]


def test_an_out_of_order_tuple_bridges_two_sessions():
    m = SessionManager(secs(10), secs(30))
    m.add("a", 100)
    m.add("c", 118)
    m.add("b", 109)  # within the gap of both: one session a, b, c
    assert windows(m.advance(200)) == [(None, ["a", "b", "c"], 100.0, 128.0)]


def test_processing_time_sessions_on_a_fake_clock():
    clock = FakeClock(0.0)
    m = SessionManager(secs(3))
    for i in range(4):
        m.add(i, clock.now())
        clock.advance(1)
    clock.advance(1.5)
    assert m.advance(clock.now()) == []  # last tuple at 3 s, quiet until 6 s
    clock.advance(0.5)
    assert windows(m.advance(clock.now())) == [(None, [0, 1, 2, 3], 0.0, 6.0)]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 100), st.sampled_from("ab")), max_size=40),
       st.integers(1, 15))  # fmt: skip
def test_sessions_partition_each_keys_tuples_by_the_gap(events, gap):
    """Closed all at once, the sessions of a key are its tuples sorted by time, cut
    wherever two neighbours are `gap` or more apart; every tuple is in one session."""
    m = SessionManager(secs(gap))
    for n, (ts, key) in enumerate(events):
        m.add((ts, n), ts, key=key)
    outs = m.advance(10_000)
    got = {k: [] for k in "ab"}
    for w in outs:
        if isinstance(w, Window):
            got[w.key].append(list(w.tuples))
    for key in "ab":
        mine = sorted((ts, n) for n, (ts, k) in enumerate(events) if k == key)
        want: list[list] = []
        for item in mine:
            if want and item[0] - want[-1][-1][0] < gap:
                want[-1].append(item)
            else:
                want.append([item])
        assert sorted(got[key]) == want


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 200), st.booleans()), max_size=50),
       st.integers(1, 15), st.integers(0, 10), st.integers(0, 10))  # fmt: skip
def test_sessions_closed_as_the_watermark_moves_equal_those_closed_at_the_end(
    events, gap, grace, lag
):
    """With watermarks along the way and late tuples turned away (older than the
    watermark - grace), the sessions emitted are those of all accepted tuples closed at
    once at the end: no accepted tuple finds its session already closed."""
    from stormish.windowing.watermark import WatermarkGenerator

    gen = WatermarkGenerator(lag * 1000, grace_ms=grace * 1000)
    m = SessionManager(secs(gap), secs(grace))
    accepted, got = [], []
    for n, (ts, tick) in enumerate(events):
        if gen.track("s", ts * 1000):
            accepted.append((ts, n))
            m.add((ts, n), ts)
        if tick and (wm := gen.advance()) is not None:
            got += [list(w.tuples) for w in m.advance(wm / 1000) if isinstance(w, Window)]
    got += [list(w.tuples) for w in m.advance(10_000) if isinstance(w, Window)]
    whole = SessionManager(secs(gap))
    for x in accepted:
        whole.add(x, x[0])
    want = [list(w.tuples) for w in whole.advance(10_000) if isinstance(w, Window)]
    assert sorted(got) == sorted(want)
