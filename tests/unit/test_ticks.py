"""TickSchedule: due / next_due with plain float times, no burst catch-up."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from stormish.runtime.ticks import TickSchedule


def test_nothing_due_before_the_first_period():
    s = TickSchedule({1: 1.0, 2: 2.5}, now=100.0)
    assert s.next_due() == 101.0
    assert s.due(100.0) == []
    assert s.due(100.999) == []


def test_due_exactly_at_the_period():
    s = TickSchedule({1: 1.0}, now=0.0)
    assert s.due(1.0) == [1]
    assert s.next_due() == 2.0
    assert s.due(1.0) == []


def test_each_task_on_its_own_period():
    s = TickSchedule({1: 1.0, 2: 2.5}, now=0.0)
    assert s.due(1.0) == [1]
    assert s.due(2.0) == [1]
    assert s.next_due() == 2.5
    assert sorted(s.due(2.5)) == [2]
    assert s.next_due() == 3.0
    assert sorted(s.due(3.0)) == [1]
    assert s.next_due() == 4.0


def test_a_late_check_keeps_the_phase():
    s = TickSchedule({1: 1.0}, now=0.0)
    assert s.due(1.3) == [1]
    assert s.next_due() == 2.0  # not 2.3: a small delay does not drift the schedule
    assert s.due(1.9) == []
    assert s.due(2.0) == [1]


def test_no_burst_after_a_stall():
    s = TickSchedule({1: 1.0, 2: 0.5}, now=0.0)
    assert sorted(s.due(10.25)) == [1, 2]  # one tick each, not ten and twenty
    assert s.due(10.25) == []
    assert s.next_due() == 10.75
    assert s.due(10.75) == [2]
    assert sorted(s.due(11.25)) == [1, 2]


def test_after_a_stall_the_next_tick_is_a_full_period_later():
    s = TickSchedule({1: 1.0}, now=0.0)
    s.due(5.5)
    assert s.next_due() == 6.5
    assert s.due(6.4) == []
    assert s.due(6.5) == [1]


def test_empty_schedule():
    s = TickSchedule({}, now=3.0)
    assert s.next_due() is None
    assert s.due(1e9) == []


def test_freqs_are_copied():
    freqs = {1: 1.0}
    s = TickSchedule(freqs, now=0.0)
    freqs[2] = 0.1
    assert s.due(0.5) == []
    assert s.next_due() == 1.0


@settings(max_examples=100, deadline=None)
@given(
    freqs=st.dictionaries(
        st.integers(1, 6), st.sampled_from([0.25, 0.5, 1.0, 2.0, 3.0]), max_size=4
    ),
    steps=st.lists(st.sampled_from([0.0, 0.125, 0.25, 0.5, 1.0, 4.0, 10.0]), max_size=40),
)
def test_ticks_are_never_early_never_bunched(freqs, steps):
    """Each due() returns a task at most once and exactly when its time has come; a task
    never gets more ticks than whole periods elapsed; next_due is always in the future."""
    s = TickSchedule(freqs, now=0.0)
    now = 0.0
    count = dict.fromkeys(freqs, 0)
    for step in steps:
        now += step
        expected = {t for t, at in s.next_at.items() if now >= at}
        got = s.due(now)
        assert len(got) == len(set(got))
        assert set(got) == expected
        for t in got:
            count[t] += 1
        nd = s.next_due()
        if freqs:
            assert nd > now
        else:
            assert nd is None
    for t, f in freqs.items():
        assert count[t] <= math.floor(now / f + 1e-9)


@settings(max_examples=50, deadline=None)
@given(
    freqs=st.dictionaries(
        st.integers(1, 6), st.sampled_from([0.125, 0.25, 0.5, 1.0, 1.5]), min_size=1, max_size=4
    ),
    checks=st.integers(0, 80),
)
def test_checked_often_enough_no_tick_is_lost(freqs, checks):
    """Checked every 1/8 s (at least once per period), a task ticks once per whole period."""
    s = TickSchedule(freqs, now=0.0)
    count = dict.fromkeys(freqs, 0)
    for i in range(1, checks + 1):
        for t in s.due(i * 0.125):
            count[t] += 1
    now = checks * 0.125
    assert count == {t: math.floor(now / f) for t, f in freqs.items()}
