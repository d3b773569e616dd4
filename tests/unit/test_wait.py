"""Wait strategies: level transitions of progressive and park, and from_config."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stormish import config
from stormish.runtime import wait
from stormish.runtime.wait import Park, Progressive, from_config


class FakeWaitable:
    def __init__(self):
        self.calls: list[float] = []

    def wait(self, timeout: float) -> None:
        self.calls.append(timeout)


@pytest.fixture
def sleeps(monkeypatch):
    """Record time.sleep calls made by the wait module instead of sleeping."""
    calls: list[float] = []
    monkeypatch.setattr(wait.time, "sleep", calls.append)
    return calls


def run_levels(strategy, counters, waitable=None):
    return [strategy.idle(c, waitable) for c in counters]


# -- progressive
def test_progressive_level1_is_a_bare_retry(sleeps):
    w = FakeWaitable()
    s = Progressive(3, 2, 5)
    assert run_levels(s, range(3), w) == [1, 2, 3]
    assert sleeps == []
    assert w.calls == []


def test_progressive_level2_yields_with_sleep_zero(sleeps):
    w = FakeWaitable()
    s = Progressive(3, 2, 5)
    assert run_levels(s, [3, 4], w) == [4, 5]
    assert sleeps == [0, 0]
    assert w.calls == []


def test_progressive_level3_waits_on_the_waitable_for_level3_millis(sleeps):
    w = FakeWaitable()
    s = Progressive(3, 2, 5)
    assert run_levels(s, [5, 6, 1000], w) == [6, 7, 1001]
    assert sleeps == []
    assert w.calls == [pytest.approx(0.005)] * 3


def test_progressive_level3_without_waitable_sleeps(sleeps):
    s = Progressive(1, 1, 7)
    s.idle(2)
    assert sleeps == [pytest.approx(0.007)]


def test_progressive_full_sequence_from_zero(sleeps):
    w = FakeWaitable()
    s = Progressive(2, 3, 1)
    events = []
    counter = 0
    for _ in range(8):
        before = (len(sleeps), len(w.calls))
        counter = s.idle(counter, w)
        if len(w.calls) > before[1]:
            events.append("wait")
        elif len(sleeps) > before[0]:
            events.append("yield")
        else:
            events.append("retry")
    assert events == ["retry"] * 2 + ["yield"] * 3 + ["wait"] * 3
    assert counter == 8


def test_progressive_with_zero_levels_waits_at_once(sleeps):
    w = FakeWaitable()
    s = Progressive(0, 0, 1)
    s.idle(0, w)
    assert w.calls == [pytest.approx(0.001)]
    assert sleeps == []


@settings(max_examples=100, deadline=None)
@given(l1=st.integers(0, 20), l2=st.integers(0, 20), counter=st.integers(0, 100))
def test_progressive_level_is_a_function_of_the_counter(l1, l2, counter):
    w = FakeWaitable()
    calls: list[float] = []
    original = wait.time.sleep
    wait.time.sleep = calls.append
    try:
        assert Progressive(l1, l2, 3).idle(counter, w) == counter + 1
    finally:
        wait.time.sleep = original
    if counter < l1:
        assert (calls, w.calls) == ([], [])
    elif counter < l1 + l2:
        assert (calls, w.calls) == ([0], [])
    else:
        assert (calls, w.calls) == ([], [pytest.approx(0.003)])


# -- park
def test_park_waits_microseconds_on_the_waitable(sleeps):
    w = FakeWaitable()
    s = Park(250)
    assert s.idle(0, w) == 1
    assert s.idle(41, w) == 42
    assert w.calls == [pytest.approx(0.00025)] * 2
    assert sleeps == []


def test_park_without_waitable_sleeps(sleeps):
    Park(100).idle(0)
    assert sleeps == [pytest.approx(0.0001)]


def test_park_zero_spins(sleeps):
    w = FakeWaitable()
    s = Park(0)
    assert [s.idle(c, w) for c in range(5)] == [1, 2, 3, 4, 5]
    assert s.idle(9) == 10
    assert w.calls == []
    assert sleeps == []


# -- from_config
# Storm's levels, except level 2 (Storm: 1,000 yields for bolts and backpressure), which
# is 0: measured to hurt in Python (config.py, docs/design.md)
DEFAULTS = {
    "backpressure": (1, 0, 1),
    "spout": (0, 0, 1),
    "bolt": (1, 0, 1),
}
STORM_DEFAULTS = DEFAULTS


@pytest.mark.parametrize("use", sorted(STORM_DEFAULTS))
def test_from_config_defaults_are_storms_without_yields(use):
    s = from_config(config.resolve(), use)
    assert isinstance(s, Progressive)
    assert s.name == "progressive"
    l1, l2, l3 = STORM_DEFAULTS[use]
    assert s.level1 == l1
    assert s.level2_end == l1 + l2
    assert s.sleep_s == pytest.approx(l3 / 1000.0)


@pytest.mark.parametrize("use", sorted(STORM_DEFAULTS))
def test_from_config_reads_its_own_keys_only(use):
    p = f"topology.{use}.wait.progressive"
    conf = config.resolve(
        {
            f"{p}.level1.count": 4,
            f"{p}.level2.count": 6,
            f"{p}.level3.sleep.millis": 20,
        }
    )
    s = from_config(conf, use)
    assert (s.level1, s.level2_end, s.sleep_s) == (4, 10, pytest.approx(0.02))
    for other in set(STORM_DEFAULTS) - {use}:
        o = from_config(conf, other)
        l1, l2, _ = STORM_DEFAULTS[other]
        assert (o.level1, o.level2_end) == (l1, l1 + l2)


@pytest.mark.parametrize("use", sorted(STORM_DEFAULTS))
def test_from_config_park(use):
    conf = config.resolve(
        {
            f"topology.{use}.wait.strategy": "park",
            f"topology.{use}.wait.park.microsec": 37,
        }
    )
    s = from_config(conf, use)
    assert isinstance(s, Park)
    assert s.name == "park"
    assert s.park_s == pytest.approx(37e-6)


def test_from_config_unknown_strategy_names_the_key():
    conf = dict(config.resolve())
    conf["topology.bolt.wait.strategy"] = "nap"  # bypasses resolve(): the runtime's own guard
    with pytest.raises(ValueError, match=r"topology\.bolt\.wait\.strategy.*'nap'"):
        from_config(conf, "bolt")
