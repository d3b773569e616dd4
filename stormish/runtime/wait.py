"""Wait strategies: how an executor idles when it has no input or is held by backpressure.

Storm's progressive strategy spins, then yields, then sleeps. Python has no parkNanos, so
the levels map to what it has: level 1 is a bare retry (the GIL stays with this thread),
level 2 is `time.sleep(0)` (hands the GIL to a runnable thread), level 3 waits on the
queue's wake-up event for up to N ms, so new input ends the wait at once instead of after
a fixed sleep. `park` waits N us on the same event (0 = pure spin).
The strategy is stateless apart from its settings; the caller keeps the idle counter and
resets it to 0 when work arrives, as Storm's callers do.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Protocol


class Waitable(Protocol):
    def wait(self, timeout: float) -> None: ...


class Progressive:
    __slots__ = ("level1", "level2_end", "sleep_s", "name")

    def __init__(self, level1: int, level2: int, level3_millis: float):
        self.level1 = level1
        self.level2_end = level1 + level2
        self.sleep_s = level3_millis / 1000.0
        self.name = "progressive"

    def idle(self, counter: int, waitable: Waitable | None = None) -> int:
        if counter < self.level1:
            pass
        elif counter < self.level2_end:
            time.sleep(0)
        elif waitable is not None:
            waitable.wait(self.sleep_s)
        else:
            time.sleep(self.sleep_s)
        return counter + 1


class Park:
    __slots__ = ("park_s", "name")

    def __init__(self, microsec: int):
        self.park_s = microsec / 1e6
        self.name = "park"

    def idle(self, counter: int, waitable: Waitable | None = None) -> int:
        if self.park_s > 0:
            if waitable is not None:
                waitable.wait(self.park_s)
            else:
                time.sleep(self.park_s)
        return counter + 1


def from_config(conf: Mapping[str, Any], use: str) -> Progressive | Park:
    """`use` is 'backpressure', 'spout' or 'bolt'; names are looked up, never imported."""
    p = f"topology.{use}.wait"
    name = conf[f"{p}.strategy"]
    if name == "progressive":
        return Progressive(
            conf[f"{p}.progressive.level1.count"],
            conf[f"{p}.progressive.level2.count"],
            conf[f"{p}.progressive.level3.sleep.millis"],
        )
    if name == "park":
        return Park(conf[f"{p}.park.microsec"])
    raise ValueError(f"config key '{p}.strategy': unknown wait strategy {name!r}")


def park_seconds(strategy: Progressive | Park) -> float:
    """How long the strategy waits once it waits (a scheduler parks for the shortest)."""
    return strategy.sleep_s if isinstance(strategy, Progressive) else strategy.park_s


def spin_count(strategy: Progressive | Park) -> int:
    """Retries before it waits (level 1; level 2's yields have no meaning for a
    scheduler thread, which has nobody in the worker to yield to)."""
    return strategy.level1 if isinstance(strategy, Progressive) else 0
