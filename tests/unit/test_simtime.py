"""The simulated-time settle rule (local/simtime.py) as scenarios, and FakeClock's
waiting threads."""

from __future__ import annotations

import threading

import pytest

from stormish.clock import ComponentClock, FakeClock, MonotonicClock
from stormish.local import poll_for
from stormish.local.simtime import MOVED, SLOW, ExecutorView, Snapshot, settled


def view(name="b[1]", turns=10, held=False, counters=(1, 1, 1, 0, 0), idle=True, dormant=False):
    return ExecutorView(name, turns, held, counters, idle, dormant)


def snap(*executors, now=5.0, waits=None):
    return Snapshot(now, dict(waits or {}), tuple(executors))


def why(a, b):
    """What settled() says, as one text (None when settled), and the kinds it gave."""
    out = settled(a, b)
    return ("; ".join(t for _, t in out), {k for k, _ in out}) if out else (None, set())


def test_idle_executors_that_looped_twice_are_settled():
    assert settled(snap(view(turns=10)), snap(view(turns=12))) == []


def test_an_executor_that_did_not_loop_twice_is_not_and_the_first_look_is_kept():
    text, kinds = why(snap(view(turns=10)), snap(view(turns=11)))
    assert "b[1]" in text and "looped" in text
    assert kinds == {SLOW}  # nothing moved: compare the next look with the same first


def test_an_executor_inside_user_code_makes_no_turns_and_is_not_settled():
    assert why(snap(view(turns=10)), snap(view(turns=10)))[1] == {SLOW}


def test_moving_counters_or_queued_tuples_are_not_settled():
    a = snap(view(turns=1, counters=(1, 1, 1, 0, 0)))
    assert why(a, snap(view(turns=9, counters=(2, 1, 1, 0, 0)))) == ("b[1] is processing", {MOVED})
    assert "queued" in why(a, snap(view(turns=9, idle=False)))[0]


def test_an_executor_asleep_in_the_clock_is_settled_only_when_it_was_before_too():
    asleep = view(turns=3, held=True, idle=False)
    assert settled(snap(asleep), snap(asleep)) == []
    assert "asleep" in why(snap(view(turns=3)), snap(asleep))[0]


def test_a_spout_not_opened_because_inactive_is_settled():
    dormant = view(turns=0, dormant=True)
    assert settled(snap(dormant), snap(dormant)) == []


def test_clock_waiters_must_wait_for_a_future_time():
    ok = {7: 10.0}
    assert settled(snap(view(turns=0), waits=ok), snap(view(turns=2), waits=ok)) == []
    due = {7: 5.0}  # its time (now=5) has come: it is about to run
    assert "thread 7" in why(snap(view(turns=0), waits=due), snap(view(turns=2)))[0]
    woke = {7: None}  # a timer that woke and has not waited again
    assert why(snap(view(turns=0)), snap(view(turns=2), waits=woke))[1] == {MOVED}


def test_every_executor_at_work_is_named():
    a = snap(view("s[1]", turns=1), view("b[2]", turns=1))
    b = snap(view("s[1]", turns=1), view("b[2]", turns=9, idle=False))
    text, kinds = why(a, b)
    assert "s[1] has not looped" in text and "b[2] has tuples queued" in text
    assert kinds == {SLOW, MOVED}


# -- FakeClock ---------------------------------------------------------------------------------
def start(target, *args):
    t = threading.Thread(target=target, args=args, daemon=True)
    t.start()
    return t


def test_fake_sleep_blocks_until_advanced_past_and_is_recorded_meanwhile():
    clock = FakeClock()
    t = start(clock.sleep, 8)
    poll_for(lambda: t.ident in clock.waiting(), 5, what="the sleeper to register")
    assert clock.sleeping_until(t.ident) == 8
    clock.advance(7.5)
    assert t.is_alive()
    clock.advance(0.5)
    t.join(5)
    assert not t.is_alive()
    assert clock.waiting() == {}  # a sleeper is forgotten once it woke


def test_a_timer_stays_recorded_as_due_until_it_waits_again():
    clock = FakeClock()
    stop = threading.Event()
    woke = threading.Event()
    again = threading.Event()

    def timer():
        clock.wait_until(2.0, stop)
        woke.set()
        again.wait(5)
        clock.wait_until(4.0, stop)

    t = start(timer)
    poll_for(lambda: clock.waiting().get(t.ident) == 2.0, 5)
    clock.advance(2)
    assert woke.wait(5)
    assert clock.waiting()[t.ident] is None  # woke, not waiting again yet: busy
    again.set()
    poll_for(lambda: clock.waiting().get(t.ident) == 4.0, 5)
    stop.set()
    t.join(5)
    assert not t.is_alive() and clock.waiting() == {}  # stopped: forgotten


def test_a_stop_event_ends_a_fake_wait():
    clock = FakeClock()
    stop = threading.Event()
    result = []
    t = start(lambda: result.append(clock.wait_until(100.0, stop)))
    poll_for(lambda: t.ident in clock.waiting(), 5)
    stop.set()
    t.join(5)
    assert result == [False]


def test_component_clock_sleeps_on_its_clock_and_ends_with_the_worker():
    clock = FakeClock(start=3.0)
    stop = threading.Event()
    cc = ComponentClock(clock, stop)
    assert cc.now() == 3.0
    t = start(cc.sleep, 60)
    poll_for(lambda: t.ident in clock.waiting(), 5)
    stop.set()  # the worker stops: a component asleep in simulated time lets it
    t.join(5)
    assert not t.is_alive()


def test_monotonic_clock_waits_in_real_time_and_stops():
    clock = MonotonicClock()
    stop = threading.Event()
    assert clock.wait_until(clock.now() - 1, stop) is True
    stop.set()
    assert clock.wait_until(clock.now() + 60, stop) is False


def test_fake_clock_refuses_to_go_back():
    with pytest.raises(ValueError):
        FakeClock().advance(-1)
    with pytest.raises(ValueError):
        FakeClock().sleep(-1)
