"""The simulated-time settle rule (runtime/simtime.py) as scenarios, and FakeClock's
waiting threads."""

from __future__ import annotations

import threading

import pytest

from stormish.clock import ComponentClock, FakeClock, MonotonicClock
from stormish.local import poll_for
from stormish.runtime.simtime import ExecutorView, Snapshot, settled


def view(name="b[1]", turns=10, held=False, counters=(1, 1, 1, 0, 0), idle=True, dormant=False):
    return ExecutorView(name, turns, held, counters, idle, dormant)


def snap(*executors, now=5.0, waits=None):
    return Snapshot(now, dict(waits or {}), tuple(executors))


def test_idle_executors_that_looped_twice_are_settled():
    assert settled(snap(view(turns=10)), snap(view(turns=12))) is None


def test_an_executor_that_did_not_loop_twice_is_not():
    why = settled(snap(view(turns=10)), snap(view(turns=11)))
    assert why is not None and "b[1]" in why and "looped" in why


def test_an_executor_inside_user_code_makes_no_turns_and_is_not_settled():
    assert settled(snap(view(turns=10)), snap(view(turns=10))) is not None


def test_moving_counters_or_queued_tuples_are_not_settled():
    a = snap(view(turns=1, counters=(1, 1, 1, 0, 0)))
    assert "processing" in settled(a, snap(view(turns=9, counters=(2, 1, 1, 0, 0))))
    assert "queued" in settled(a, snap(view(turns=9, idle=False)))


def test_an_executor_asleep_in_the_clock_is_settled_only_when_it_was_before_too():
    asleep = view(turns=3, held=True, idle=False)
    assert settled(snap(asleep), snap(asleep)) is None
    assert "asleep" in settled(snap(view(turns=3)), snap(asleep))


def test_a_spout_not_opened_because_inactive_is_settled():
    dormant = view(turns=0, dormant=True)
    assert settled(snap(dormant), snap(dormant)) is None


def test_clock_waiters_must_wait_for_a_future_time():
    ok = {7: 10.0}
    assert settled(snap(view(turns=0), waits=ok), snap(view(turns=2), waits=ok)) is None
    due = {7: 5.0}  # its time (now=5) has come: it is about to run
    assert "thread 7" in settled(snap(view(turns=0), waits=due), snap(view(turns=2)))
    woke = {7: None}  # a timer that woke and has not waited again
    assert "thread 7" in settled(snap(view(turns=0)), snap(view(turns=2), waits=woke))


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
