"""The pure window manager as scenarios: events in, activations and expiries out.

Most scenarios are Storm's own (storm-client WindowManagerTest), with Storm's
millisecond timestamps read as seconds. Where stormish differs on purpose it says so:
`expired` holds what left since the previous *activation* (Storm forgets what expired
during an empty window), so tuples == previous - expired + new always holds.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from stormish.clock import FakeClock
from stormish.windowing.manager import COMPACT_EVERY, WindowManager
from stormish.windowing.spec import Count, Duration, Expired, Window


def seq(a: int, b: int | None = None) -> list[int]:
    return list(range(a, (a if b is None else b) + 1))


class Run:
    """Collects what a manager gives back, as Storm's test listener does."""

    def __init__(self, m: WindowManager):
        self.m = m
        self.windows: list[Window] = []
        self.expiries: list[list[int]] = []

    def take(self, outs):
        for o in outs:
            if isinstance(o, Expired):
                self.expiries.append(list(o.items))
            else:
                self.windows.append(o)
        return outs

    def add(self, item, ts):
        return self.take(self.m.add(item, ts))

    def watermark(self, wm):
        return self.take(self.m.on_watermark(wm))

    def timer(self, now):
        return self.take(self.m.on_timer(now))

    def clear(self):
        self.windows.clear()
        self.expiries.clear()

    @property
    def tuples(self):
        return [list(w.tuples) for w in self.windows]


def secs(n: int) -> Duration:
    return Duration(seconds=n)


# -- processing time, count windows (Storm: testCountBasedWindow, testTumblingWindow) -------
def test_sliding_count_window():
    r = Run(WindowManager(Count(5), Count(2)))
    r.add(1, 0)
    r.add(2, 0)
    assert r.expiries == []
    assert r.tuples == [seq(1, 2)] and list(r.windows[-1].new) == seq(1, 2)
    r.add(3, 0)
    r.add(4, 0)
    assert r.expiries == []
    assert r.tuples[-1] == seq(1, 4) and list(r.windows[-1].new) == seq(3, 4)
    r.add(5, 0)
    r.add(6, 0)
    assert r.expiries == [[1]]
    w = r.windows[-1]
    assert list(w.tuples) == seq(2, 6) and list(w.new) == seq(5, 6) and list(w.expired) == [1]
    r.clear()
    r.add(7, 0)
    assert r.expiries == []  # nothing expires until the trigger
    r.add(8, 0)
    assert r.expiries == [[2, 3]]
    w = r.windows[-1]
    assert list(w.tuples) == seq(4, 8) and list(w.new) == seq(7, 8)
    assert list(w.expired) == [2, 3]


def test_tumbling_count_window():
    r = Run(WindowManager(Count(3), Count(3)))
    r.add(1, 0)
    r.add(2, 0)
    assert r.windows == [] and r.expiries == []
    r.add(3, 0)
    assert r.tuples == [seq(1, 3)] and r.expiries == []
    r.clear()
    for i in (4, 5, 6):
        r.add(i, 0)
    assert r.expiries == [seq(1, 3)]
    w = r.windows[-1]
    assert list(w.tuples) == seq(4, 6) and list(w.new) == seq(4, 6)
    assert list(w.expired) == seq(1, 3)


def test_compaction_expires_between_triggers():
    """Storm's testExpireThreshold: a window that is not triggered for a long time still
    lets go of (and so acks) what can never be in it again."""
    r = Run(WindowManager(Count(5), secs(3600)))
    for i in seq(1, COMPACT_EVERY):
        r.add(i, 0)
    assert r.expiries == [seq(1, COMPACT_EVERY - 5)]
    assert len(r.m) == 5


# -- processing time, duration windows ---------------------------------------------------
def test_time_window_expiry_on_a_fake_clock():
    """Storm's testTimeBasedWindowExpiry, on a FakeClock."""
    clock = FakeClock(1000.0)
    r = Run(WindowManager(Duration(milliseconds=100), Duration(milliseconds=60)))
    for i in seq(1, 10):
        r.add(i, clock.now())
    clock.advance(0.06)
    r.timer(clock.now())
    assert r.tuples == [seq(1, 10)] and list(r.windows[-1].expired) == []
    r.clear()
    clock.advance(0.06)
    r.timer(clock.now())
    assert r.expiries == [seq(1, 10)] and r.windows == []
    clock.advance(0.06)
    r.timer(clock.now())
    assert r.windows == [] and r.expiries == [seq(1, 10)]


def test_time_window_first_window_holds_everything_then_slides():
    """After Storm's testTimeBasedWindow: the first processing-time window holds all that
    arrived before it (Storm: an unbounded first delta); the next one starts where the
    first ended, expiring the rest, and its activation lists what expired."""
    clock = FakeClock(500.0)
    r = Run(WindowManager(secs(1), secs(1)))
    for i in seq(1, 50):
        r.add(i, clock.now() - 1.0)
    for i in seq(51, 60):
        r.add(i, clock.now())
    clock.advance(0.1)
    r.timer(clock.now())
    assert r.expiries == [] and r.tuples == [seq(1, 60)]
    clock.advance(0.4)
    for i in seq(61, 70):
        r.add(i, clock.now())
    clock.advance(0.6)
    r.clear()
    r.timer(clock.now())
    assert r.expiries == [seq(1, 60)]
    assert r.tuples == [seq(61, 70)] and list(r.windows[-1].expired) == seq(1, 60)
    assert (r.windows[-1].start, r.windows[-1].end) == (500.1, 501.1)


def test_tumbling_time_window_tolerates_a_late_tick():
    """A tick that comes late widens the window instead of dropping tuples from it, and
    an early one narrows it instead of repeating them: each tuple is in exactly one
    tumbling window (Storm's eviction delta)."""
    clock = FakeClock(0.0)
    r = Run(WindowManager(secs(10), secs(10)))
    seen: list[int] = []
    item = 0
    for tick_at in (10.0, 21.5, 29.0, 40.0):
        while clock.now() < tick_at - 0.25:
            item += 1
            r.add(item, clock.now())
            clock.advance(0.5)
        clock.advance(tick_at - clock.now())
        r.timer(clock.now())
        seen += list(r.windows[-1].tuples)
    assert seen == seq(1, item)


def test_count_trigger_with_time_eviction():
    clock = FakeClock(0.0)
    r = Run(WindowManager(secs(5), Count(2)))
    for i in seq(1, 6):
        r.add(i, clock.now())
        clock.advance(2)
    # windows at t=2 {1,2}, t=6 {2..4}? (t - 5, t]: at t=6 tuples stamped 2, 4, 6 -> 2, 3, 4
    assert r.tuples == [seq(1, 2), seq(2, 4), seq(4, 6)]
    assert [w.end for w in r.windows] == [2.0, 6.0, 10.0]
    assert [w.start for w in r.windows] == [-3.0, 1.0, 5.0]


# -- event time (Storm: testEventTimeBasedWindow and the acceptance) ---------------
def test_event_time_sliding_windows():
    r = Run(WindowManager(secs(20), secs(10), event_time=True))
    r.add(1, 603)
    r.add(2, 605)
    r.add(3, 607)
    r.watermark(609)  # finds the first aligned window end (610), activates nothing
    assert r.windows == []
    r.add(4, 618)
    r.add(5, 626)
    r.add(6, 636)
    r.watermark(631)
    assert r.tuples == [seq(1, 3), seq(1, 4), [4, 5]]
    assert [list(w.expired) for w in r.windows] == [[], [], seq(1, 3)]
    assert [list(w.new) for w in r.windows] == [seq(1, 3), [4], [5]]
    assert r.expiries == [seq(1, 3)]
    assert [(w.start, w.end) for w in r.windows] == [(590, 610), (600, 620), (610, 630)]
    # a gap in time: the empty windows are skipped by jumping to the next tuple
    for i, ts in ((7, 825), (8, 826), (9, 827), (10, 839)):
        r.add(i, ts)
    r.clear()
    r.watermark(834)
    assert r.tuples == [[5, 6], [6], seq(7, 9)]
    assert [list(w.new) for w in r.windows] == [[6], [], seq(7, 9)]
    assert r.expiries == [[4], [5], [6]]
    # Storm reports [] as the third window's expired: 6 left during an empty window
    assert [list(w.expired) for w in r.windows] == [[4], [5], [6]]


def test_event_time_count_window_with_time_slide():
    """Storm's testCountBasedWindowWithEventTs."""
    r = Run(WindowManager(Count(3), secs(10), event_time=True))
    for i, ts in enumerate((603, 605, 607, 618, 626, 636), 1):
        r.add(i, ts)
    r.watermark(631)
    assert r.tuples == [seq(1, 3), seq(2, 4), seq(3, 5)]
    for i, ts in ((7, 665), (8, 666), (9, 667), (10, 679)):
        r.add(i, ts)
    r.clear()
    r.watermark(674)
    assert r.tuples == [seq(4, 6), seq(4, 6), seq(4, 6), seq(7, 9)]


def test_event_time_count_trigger_with_time_window():
    """Storm's testCountBasedTriggerWithEventTs."""
    r = Run(WindowManager(secs(20), Count(3), event_time=True))
    for i, ts in enumerate((603, 605, 607, 618, 625, 626, 629, 636), 1):
        r.add(i, ts)
    r.watermark(631)
    assert r.tuples == [seq(1, 3), seq(3, 6)]
    for i, ts in ((9, 665), (10, 666), (11, 667), (12, 669), (12, 679)):
        r.add(i, ts)
    r.clear()
    r.watermark(674)
    assert r.tuples == [[9], seq(9, 12)]


def test_event_time_count_windows_with_equal_timestamps():
    """Storm's testCountBasedTumblingWithSameEventTs and ...SlidingWithSameEventTs:
    tuples with equal timestamps keep their arrival order and are counted one by one."""
    stamps = (10, 10, 11, 12, 12, 12, 12, 13, 14, 15)
    tumbling = Run(WindowManager(Count(2), Count(2), event_time=True))
    sliding = Run(WindowManager(Count(5), Count(2), event_time=True))
    for r in (tumbling, sliding):
        for i, ts in enumerate(stamps, 1):
            r.add(i, ts)
        r.watermark(20)
    assert tumbling.tuples == [seq(1, 2), seq(3, 4), seq(5, 6), seq(7, 8), seq(9, 10)]
    assert sliding.tuples == [seq(1, 2), seq(1, 4), seq(2, 6), seq(4, 8), seq(6, 10)]


def test_event_time_lag_takes_out_of_order_tuples():
    """Storm's testEventTimeLag: a tuple that arrives out of order but within the lag
    lands in its own window, ordered by timestamp."""
    r = Run(WindowManager(secs(20), secs(10), event_time=True))
    for i, ts in enumerate((603, 605, 607, 618, 626, 632, 629, 636), 1):
        r.add(i, ts)
    r.watermark(631)
    assert r.tuples == [seq(1, 3), seq(1, 4), [4, 5, 7]]
    assert len(r.m) == 5  # 4, 5, 7 in the window; 6 (632) and 8 (636) wait


def test_nothing_expires_before_the_first_watermark():
    """Storm's testExpireThresholdWith...EvictionPolicy: event-time windows cannot judge
    before a watermark, so they keep everything until then."""
    for length in (Count(COMPACT_EVERY), secs(COMPACT_EVERY)):
        r = Run(WindowManager(length, Count(COMPACT_EVERY), event_time=True))
        for i in seq(1, COMPACT_EVERY):
            r.add(i, i)
        assert r.expiries == []
        r.watermark(COMPACT_EVERY)
        assert r.tuples == [seq(1, COMPACT_EVERY)]
        for i in seq(COMPACT_EVERY + 1, 2 * COMPACT_EVERY):
            r.add(i, i)
        r.watermark(2 * COMPACT_EVERY + 1)
        assert sum(r.expiries, []) == seq(1, COMPACT_EVERY)


def test_acceptance_storm_documented_example():
    """The issue's acceptance, on the manager: window 20 s, slide 10 s; e1..e6 at
    06:00:03 ... 06:00:36 and watermark 06:00:31 give three windows; e6 waits."""
    base = 6 * 3600
    r = Run(WindowManager(secs(20), secs(10), event_time=True))
    for name, s in (("e1", 3), ("e2", 5), ("e3", 7), ("e4", 18), ("e5", 26), ("e6", 36)):
        r.add(name, base + s)
    r.watermark(base + 31)
    assert r.tuples == [["e1", "e2", "e3"], ["e1", "e2", "e3", "e4"], ["e4", "e5"]]
    spans = [(w.start - base, w.end - base) for w in r.windows]
    assert spans == [(-10, 10), (0, 20), (10, 30)]
    assert r.m.on_watermark(base + 31) == []
    r.clear()
    r.watermark(base + 41)  # e6's window [06:00:20-06:00:40] once the watermark passes it
    assert r.tuples == [["e5", "e6"]]


# -- properties ----------------------------------------------------------------------------
events = st.lists(st.tuples(st.integers(0, 200), st.booleans()), max_size=80)
sizes = st.one_of(
    st.builds(Count, st.integers(1, 12)),
    st.builds(lambda s: Duration(seconds=s), st.integers(1, 40)),
)


@settings(max_examples=300, deadline=None)
@given(events, sizes, sizes, st.booleans())
def test_window_bookkeeping_is_exact(evs, length, slide, event_time):
    """Whatever the window and the input: tuples == previous - expired + new; every
    tuple expires at most once and only once it is out; what is held plus what expired
    is everything added; event-time windows hold only tuples at or before their end."""
    m = WindowManager(length, slide, event_time=event_time)
    added, expired, prev = [], [], []
    now = 0
    for n, (dt, tick) in enumerate(evs):
        now += dt
        outs = m.add(n, now) if not tick else []
        added += [] if tick else [n]
        if tick:
            outs = m.on_watermark(now) if event_time else m.on_timer(now)
        for o in outs:
            if isinstance(o, Expired):
                assert not set(o.items) & set(expired)
                expired += o.items
                continue
            assert set(o.tuples) == (set(prev) - set(o.expired)) | set(o.new)
            assert not set(o.tuples) & set(expired)
            if isinstance(length, Count):
                assert len(o.tuples) <= length.value
            prev = list(o.tuples)
    assert sorted(expired) + [] == sorted(set(expired))
    assert len(m) + len(expired) == len(added)


def test_discarded_tuples_are_neither_windowed_nor_expired_again():
    r = Run(WindowManager(Count(3), Count(1)))
    items = [[i] for i in range(4)]  # distinct objects, as tuples are
    for it in items[:3]:
        r.add(it, 0)
    r.m.discard({id(items[1])})
    r.clear()
    r.add(items[3], 0)
    assert r.tuples == [[items[0], items[2], items[3]]] and r.expiries == []


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from("ab"), st.integers(0, 120), st.booleans()), max_size=60),
    st.integers(1, 4),
    st.integers(1, 4),
    st.integers(0, 10),
)
def test_event_time_windows_equal_a_recount(events, length_tens, slide_tens, lag):
    """Event time end to end (watermarks from two streams, late tuples turned away):
    each window holds exactly the accepted tuples stamped in (end - length, end], and
    every such window that is not empty runs, once, when the watermark passes it."""
    from stormish.windowing.watermark import WatermarkGenerator

    length, slide = length_tens * 10, slide_tens * 10
    gen = WatermarkGenerator(lag * 1000, [("a", "s"), ("b", "s")])
    m = WindowManager(secs(length), secs(slide), event_time=True)
    accepted, windows = [], []
    for n, (stream, ts, tick) in enumerate(events):
        if gen.track((stream, "s"), ts * 1000):
            accepted.append((ts, n))
            m.add((ts, n), ts)
        if tick and (wm := gen.advance()) is not None:
            windows += [o for o in m.on_watermark(wm / 1000) if isinstance(o, Window)]
    for w in windows:
        want = sorted(x for x in accepted if w.end - length < x[0] <= w.end)
        assert list(w.tuples) == want
    if not accepted or gen.watermark is None:
        return
    first = min(ts for ts, _ in accepted)
    ends = range(-(-first // slide) * slide, gen.watermark // 1000 + 1, slide)
    expected = [
        e
        for e in ends
        if e * 1000 < gen.watermark and any(e - length < ts <= e for ts, _ in accepted)
    ]
    assert [w.end for w in windows] == expected


def test_acceptance_with_watermarks_on_a_fake_clock():
    """The issue's acceptance as the bolt runs it, without a topology: a watermark every
    second of a FakeClock (lag 5 s) over the tuples so far; the three windows at
    watermark 06:00:31, e6 waiting, then 06:00:01 turned away as late."""
    from stormish.windowing.watermark import WatermarkGenerator

    base, clock = 6 * 3600, FakeClock()
    gen = WatermarkGenerator(5000, [("events", "default")])
    r = Run(WindowManager(secs(20), secs(10), event_time=True))
    next_tick = clock.now() + 1

    def receive(name, s):
        ok = gen.track(("events", "default"), (base + s) * 1000)
        if ok:
            r.add(name, base + s)
        return ok

    def tick():
        nonlocal next_tick
        clock.advance(next_tick - clock.now())
        next_tick += 1
        if (wm := gen.advance()) is not None:
            r.watermark(wm / 1000)

    for name, s in (("e1", 3), ("e2", 5), ("e3", 7), ("e4", 18), ("e5", 26), ("e6", 36)):
        assert receive(name, s)
    assert r.windows == []  # nothing before the first watermark
    tick()
    assert gen.watermark == (base + 31) * 1000
    assert r.tuples == [["e1", "e2", "e3"], ["e1", "e2", "e3", "e4"], ["e4", "e5"]]
    assert r.expiries == [["e1", "e2", "e3"]]
    tick()
    assert len(r.windows) == 3  # e6 waits: no later tuple moved the watermark
    assert not receive("late", 1)
    assert clock.now() == 2.0


# -- the end of input: time goes to its end, every tuple leaves ----------------


def _expired_all(run: Run) -> list[int]:
    return sorted(x for e in run.expiries for x in e)


def test_end_of_input_runs_every_event_time_window_holding_a_tuple_then_expires_all():
    r = Run(WindowManager(Duration(seconds=20), Duration(seconds=10), event_time=True))
    for i, ts in enumerate([3, 5, 7, 18, 26, 36], 1):
        r.add(i, ts)
    r.watermark(31)
    assert [(w.start, w.end) for w in r.windows] == [(-10, 10), (0, 20), (10, 30)]
    r.clear()
    r.take(r.m.end_of_input())
    assert [(w.start, w.end, list(w.tuples)) for w in r.windows] == [
        (20, 40, [5, 6]),
        (30, 50, [6]),
    ]
    assert _expired_all(r) == [4, 5, 6] and len(r.m) == 0


def test_end_of_input_leaves_a_partial_count_window_unrun_but_acks_its_tuples():
    r = Run(WindowManager(Count(2), Count(2)))
    for i in range(1, 6):
        r.add(i, i)
    assert [list(w.tuples) for w in r.windows] == [[1, 2], [3, 4]]
    r.take(r.m.end_of_input())
    assert [list(w.tuples) for w in r.windows] == [[1, 2], [3, 4]]  # 5 alone: not a window
    assert 5 in _expired_all(r) and len(r.m) == 0


def test_end_of_input_in_processing_time_runs_the_slides_a_clock_would():
    r = Run(WindowManager(Duration(seconds=20), Duration(seconds=10)))
    r.timer(10)
    for i in (1, 2, 3):
        r.add(i, 12)
    r.clear()
    r.take(r.m.end_of_input())
    assert [(w.end, list(w.tuples)) for w in r.windows] == [(20, [1, 2, 3]), (30, [1, 2, 3])]
    assert _expired_all(r) == [1, 2, 3] and len(r.m) == 0


@given(
    st.lists(st.integers(0, 100), max_size=30),
    st.sampled_from([(20, 10), (10, 10), (30, 5)]),
    st.booleans(),
)
@settings(max_examples=60, deadline=None)
def test_after_the_end_of_input_nothing_is_held_and_each_tuple_expired_once(ts, size, event):
    length, slide = size
    r = Run(WindowManager(Duration(seconds=length), Duration(seconds=slide), event_time=event))
    for i, t in enumerate(ts):
        r.add(i, t)
    r.take(r.m.end_of_input())
    assert len(r.m) == 0
    assert _expired_all(r) == list(range(len(ts)))
    for w in r.windows:  # every window holds only tuples of its span
        assert all(w.start < ts[i] <= w.end for i in w.tuples) if event else True
