"""Time, injected: the runtime asks a Clock, so timer logic can be tested with FakeClock.

A clock answers `now()` and makes a thread wait for a time on it (`wait_until`, `sleep`).
The worker's tick timer and components (through `context.clock`) wait on the topology's
clock, so under a FakeClock they wake exactly when a test moves time past their
deadline, as threads sleeping in Storm's simulated `Time` do (the Trio mock clock is the
other model). A FakeClock also knows which threads wait on it and until when: a test
helper (`stormish.testing.advance_time`) can then tell a thread asleep until a future
time, which is quiet, from one whose time has come and that has not yet run.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

# While a fake-clock wait has a stop event, the event is looked at this often (seconds of
# real time): a Condition cannot wait on an Event too, and a stopping worker waits this
# long at most for a thread asleep in simulated time.
STOP_POLL = 0.02


class Clock(Protocol):
    def now(self) -> float:
        """Seconds, monotonic."""
        ...

    def wait_until(self, deadline: float, stop: threading.Event | None = None) -> bool:
        """Block until `now() >= deadline` (True) or `stop` is set (False). For timer
        threads that wait again after each wake-up."""
        ...

    def sleep(self, seconds: float, stop: threading.Event | None = None) -> None:
        """Block for `seconds` of this clock's time, or until `stop` is set."""
        ...


class MonotonicClock:
    __slots__ = ()

    # the C function itself: `clock.now()` is on per-tuple paths (a spout's tree start
    # time), where a Python method around it cost ~3% of a reliable spout
    now = staticmethod(time.monotonic)

    def wait_until(self, deadline: float, stop: threading.Event | None = None) -> bool:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            if stop is None:
                time.sleep(left)
            elif stop.wait(left):
                return False

    def sleep(self, seconds: float, stop: threading.Event | None = None) -> None:
        self.wait_until(time.monotonic() + seconds, stop)


class FakeClock:
    """Moves only when told (`advance`); for timer tests that are exact and instant.

    Threads that wait on it are recorded by thread id with the time they wait for. A
    thread in `wait_until` (a timer loop) stays recorded after it wakes, as due (None),
    until it waits again or stops: between the wake-up and its next wait it is doing what
    the wake-up was for. A thread in `sleep` (a component) is forgotten once it wakes:
    what it then does is the executor's business."""

    def __init__(self, start: float = 0.0):
        self._now = start
        self._cond = threading.Condition()
        self._waits: dict[int, float | None] = {}

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a clock does not go back")
        with self._cond:
            self._now += seconds
            self._cond.notify_all()

    def wait_until(self, deadline: float, stop: threading.Event | None = None) -> bool:
        return self._block(deadline, stop, timer=True)

    def sleep(self, seconds: float, stop: threading.Event | None = None) -> None:
        """Blocks the calling thread until a test advances this clock past now + seconds
        (or `stop` is set)."""
        if seconds < 0:
            raise ValueError(f"sleep() needs seconds >= 0, got {seconds!r}")
        self._block(self._now + seconds, stop, timer=False)

    def _block(self, deadline: float, stop: threading.Event | None, timer: bool) -> bool:
        me = threading.get_ident()
        with self._cond:
            self._waits[me] = deadline
            try:
                while self._now < deadline:
                    if stop is not None and stop.is_set():
                        self._waits.pop(me, None)
                        return False
                    self._cond.wait(None if stop is None else STOP_POLL)
            except BaseException:
                self._waits.pop(me, None)
                raise
            if timer:
                self._waits[me] = None
            else:
                del self._waits[me]
            return True

    def waiting(self) -> dict[int, float | None]:
        """Thread id -> the time it waits for (None: a timer that woke and has not waited
        again). A thread is quiet while its time is still in the future."""
        with self._cond:
            return dict(self._waits)

    def sleeping_until(self, thread_id: int | None) -> float | None:
        """The time thread `thread_id` sleeps or waits for, or None when it does not."""
        with self._cond:
            return self._waits.get(thread_id) if thread_id is not None else None


class ComponentClock:
    """The topology's clock as a component sees it (`context.clock` in open/prepare):
    `now()`, and `sleep(secs)` on that clock, which under a FakeClock blocks until the
    test advances time past it. A sleep returns early when the worker stops, so a
    component asleep in simulated time cannot hold a topology's shutdown."""

    __slots__ = ("_clock", "_stop")

    def __init__(self, clock: Clock, stop: threading.Event):
        self._clock = clock
        self._stop = stop

    def now(self) -> float:
        return self._clock.now()

    def sleep(self, seconds: float) -> None:
        self._clock.sleep(seconds, self._stop)

    def __reduce__(self) -> tuple:  # it belongs to one worker, as its context does
        raise TypeError("a component's clock belongs to one worker and is not picklable")


SYSTEM_CLOCK = MonotonicClock()
