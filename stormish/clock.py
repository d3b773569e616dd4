"""Time, injected: the runtime asks a Clock, so timer logic can be tested with FakeClock."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds, monotonic."""
        ...


class MonotonicClock:
    __slots__ = ()

    def now(self) -> float:
        return time.monotonic()


class FakeClock:
    """Moves only when told; for timer tests that are exact and instant."""

    def __init__(self, start: float = 0.0):
        self._now = start

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a clock does not go back")
        self._now += seconds


SYSTEM_CLOCK = MonotonicClock()
