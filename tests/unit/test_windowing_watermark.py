"""Watermarks: Storm's WaterMarkEventGeneratorTest scenarios, and the rule as a property."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from stormish.windowing.watermark import WatermarkGenerator

S1, S2 = ("s1", "default"), ("s2", "default")


def test_single_stream():
    g = WatermarkGenerator(5, [S1])
    g.track(S1, 100)
    g.track(S1, 110)
    assert g.advance() == 105


def test_single_stream_out_of_order():
    g = WatermarkGenerator(5, [S1])
    for ts in (100, 110, 104):
        g.track(S1, ts)
    assert g.advance() == 105


def test_two_streams_wait_for_both_and_take_the_slower():
    g = WatermarkGenerator(5, [S1, S2])
    g.track(S1, 100)
    g.track(S1, 110)
    assert g.advance() is None and g.missing() == [S2]
    g.track(S2, 95)
    g.track(S2, 98)
    assert g.advance() == 93


def test_no_events_no_watermark():
    assert WatermarkGenerator(5, [S1]).advance() is None
    assert WatermarkGenerator(5).advance() is None


def test_late_event():
    g = WatermarkGenerator(5, [S1])
    assert g.track(S1, 100) and g.track(S1, 110)
    assert g.advance() == 105
    assert g.track(S1, 105) and g.track(S1, 106) and g.track(S1, 115)
    assert not g.track(S1, 104)
    assert g.advance() == 110


def test_the_watermark_never_goes_back_and_is_not_repeated():
    g = WatermarkGenerator(0)
    g.track(S1, 50)
    assert g.advance() == 50
    assert g.advance() is None
    g.track(S2, 10)  # a new stream, far behind: the minimum drops, the watermark stays
    assert g.advance() is None and g.watermark == 50


def test_grace_accepts_tuples_that_much_behind_the_watermark():
    g = WatermarkGenerator(0, [S1], grace_ms=10)
    g.track(S1, 100)
    g.advance()
    assert g.track(S1, 90) and not g.track(S1, 89)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([S1, S2]), st.integers(0, 1000), st.booleans())),
       st.integers(0, 50))  # fmt: skip
def test_on_time_tuples_are_never_behind_an_earlier_watermark(events, lag):
    """A tuple accepted on time is not older than any watermark already given; each
    watermark is the minimum over both streams of the latest timestamp, less the lag."""
    g = WatermarkGenerator(lag, [S1, S2])
    latest: dict = {}
    marks = []
    for stream, ts, tick in events:
        if tick:
            wm = g.advance()
            if wm is not None:
                assert len(latest) == 2 and wm == min(latest.values()) - lag
                assert not marks or wm > marks[-1]
                marks.append(wm)
            continue
        on_time = g.track(stream, ts)
        latest[stream] = max(latest.get(stream, ts), ts)
        assert on_time == (not marks or ts >= marks[-1])
