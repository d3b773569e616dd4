"""The scheduler's watchdog judges a long turn by its calls into user code: a turn of many
quick calls (a batch of 500 tuples at 0.2 ms) is not blocking code and moves nothing; one
call that runs past the limit is, and the warning names it. The engine is a loop compiled
under a file name inside stormish/runtime, which is all the watchdog looks at; the thread
is real."""

from __future__ import annotations

import logging
import threading
import time

from stormish.runtime.error_report import ENGINE
from stormish.runtime.scheduler import Watchdog
from stormish.testing import poll_for

ENGINE_SRC = """
def turn(sched, call, n):
    sched.since = now()
    sched.current = sched.ex
    for _ in range(n):
        call()
    sched.current = None
"""
engine: dict = {"now": time.monotonic}
exec(compile(ENGINE_SRC, ENGINE + "fake_turns.py", "exec"), engine)


class Ex:
    component, task = "slow", 3


class FakeScheduler:
    def __init__(self):
        self.ex = Ex()
        self.current = None
        self.since = 0.0
        self.link = None
        self.handed_link = None
        self.executors = [self.ex, object()]
        self.thread: threading.Thread | None = None
        self.evicted = threading.Event()

    def evict(self, ex, since):
        if self.current is ex and self.since == since:
            self.evicted.set()
            return [object()]
        return None


def spin(ms: float) -> None:  # user code busy on the CPU for `ms`
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        pass


def watch(sched: FakeScheduler, target) -> Watchdog:
    dog = Watchdog(
        [sched], 0.1, lambda rest: type("S", (), {"start": lambda self: None, "link": None})()
    )  # type: ignore[arg-type]
    sched.thread = threading.Thread(target=target, daemon=True)
    sched.thread.start()
    dog.start()
    return dog


def test_a_long_turn_of_quick_calls_is_not_blocking(caplog):
    sched = FakeScheduler()
    done = threading.Event()

    def run():
        engine["turn"](sched, lambda: spin(0.2), 1500)  # ~300 ms in one turn
        done.set()

    dog = watch(sched, run)  # type: ignore[arg-type]
    try:
        poll_for(done.is_set, timeout=20, what="the turn to end")
        assert dog.rounds >= 5  # it looked during the turn
    finally:
        dog.stop.set()
    assert not sched.evicted.is_set()
    assert "has run" not in caplog.text


def test_one_call_past_the_limit_is_moved_and_named(caplog):
    sched = FakeScheduler()
    release = threading.Event()

    def blocking_call():  # the user's blocking I/O
        release.wait(20)

    dog = watch(sched, lambda: engine["turn"](sched, blocking_call, 1))  # type: ignore[arg-type]
    try:
        with caplog.at_level(logging.WARNING, "stormish.scheduler"):
            poll_for(sched.evicted.is_set, timeout=10, what="the blocked call to be moved")
            poll_for(lambda: "has run" in caplog.text, timeout=5, what="the warning")
    finally:
        release.set()
        dog.stop.set()
    assert "component 'slow' task 3: one call into its code (" in caplog.text
    assert "blocking_call at test_watchdog.py:" in caplog.text


class ExplodingScheduler(FakeScheduler):
    """Its first look raises (an engine bug the watchdog trips on)."""

    def __init__(self):
        super().__init__()
        self.looks = 0

    def __getattribute__(self, name):
        if name == "current":
            object.__setattr__(self, "looks", object.__getattribute__(self, "looks") + 1)
            if object.__getattribute__(self, "looks") == 1:
                raise RuntimeError("a look that fails")
        return object.__getattribute__(self, name)


def test_a_look_that_raises_is_logged_and_the_watchdog_looks_again(caplog):
    sched = ExplodingScheduler()
    dog = Watchdog([sched], 0.05, make=lambda rest: None)
    with caplog.at_level(logging.ERROR, logger="stormish.scheduler"):
        dog.start()
        try:
            assert poll_for(lambda: sched.looks >= 3, timeout=10)  # it went on looking
            assert dog.thread.is_alive()
        finally:
            dog.stop.set()
            dog.thread.join(5)
    assert "watchdog's look failed" in caplog.text and "a look that fails" in caplog.text


class Moved:
    """An executor moved off a blocked turn."""

    def __init__(self):
        self.running, self.done, self.failed = True, False, None

    def fail_fatally(self, exc):
        self.failed = exc


class Link:
    def __init__(self):
        self.unserved = threading.Event()

    def unserve(self):
        self.unserved.set()


def test_executors_moved_off_a_blocked_turn_that_get_no_thread_fail_and_free_the_link():
    sched = FakeScheduler()
    moved = [Moved(), Moved()]
    link = Link()

    def evict(ex, since):
        sched.handed_link = link
        sched.evicted.set()
        return moved

    sched.evict = evict
    release = threading.Event()

    def no_thread(rest):
        raise RuntimeError("can't start new thread")

    dog = Watchdog([sched], 0.1, no_thread)  # type: ignore[arg-type]
    sched.thread = threading.Thread(
        target=lambda: engine["turn"](sched, lambda: release.wait(20), 1), daemon=True
    )
    sched.thread.start()
    dog.start()
    try:
        poll_for(link.unserved.is_set, timeout=10, what="the link back to its threads")
    finally:
        release.set()
        dog.stop.set()
    assert "can't start new thread" in str(moved[0].failed)
    assert "scheduler watchdog" in str(moved[0].failed)
    assert all(not m.running and m.done for m in moved) and moved[1].failed is None
