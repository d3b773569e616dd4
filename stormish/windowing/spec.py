"""Window sizes (`Count`, `Duration`) and what a window activation carries (`Window`).

Times inside the window logic are integer milliseconds, as in Storm: window ends are
aligned to multiples of the slide (`end % slide == 0`), and float seconds would make
that test lie (0.3 % 0.1 != 0). Users give and get seconds; `to_ms` and `to_seconds`
are the only two conversions.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


def to_ms(seconds: Any, what: str = "a timestamp") -> int:
    """Seconds (int, float or an aware/naive datetime) as integer milliseconds."""
    if isinstance(seconds, datetime):
        seconds = seconds.timestamp()
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise TypeError(f"{what} must be a number of seconds or a datetime, got {seconds!r}")
    if not math.isfinite(seconds):
        raise ValueError(f"{what} must be finite, got {seconds!r}")
    return round(seconds * 1000)


def to_seconds(ms: int | None) -> float | None:
    return None if ms is None else ms / 1000.0


@dataclass(frozen=True)
class Count:
    """A window length or slide in tuples (Storm's `BaseWindowedBolt.Count`)."""

    value: int

    def __post_init__(self) -> None:
        v = self.value
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"Count needs an integer >= 1, got {v!r}")


@dataclass(frozen=True)
class Duration:
    """A window length, slide, session gap or grace in time: `Duration(seconds=20)`,
    `Duration(minutes=5)`, `Duration(milliseconds=250)` (added together). Held as
    integer milliseconds (`ms`), the resolution of every window computation."""

    ms: int = field(init=False)
    seconds: float = field(default=0.0, compare=False)
    minutes: float = field(default=0.0, compare=False)
    hours: float = field(default=0.0, compare=False)
    milliseconds: float = field(default=0.0, compare=False)

    def __post_init__(self) -> None:
        total = self.hours * 3600 + self.minutes * 60 + self.seconds + self.milliseconds / 1000.0
        ms = to_ms(total, "a Duration")
        if ms < 0:
            raise ValueError(f"a Duration cannot be negative, got {total!r} s")
        object.__setattr__(self, "ms", ms)

    @property
    def secs(self) -> float:
        return self.ms / 1000.0

    def __repr__(self) -> str:
        return f"Duration(seconds={self.secs:g})"


Size = Count | Duration


def as_size(value: Any, what: str, allow_zero: bool = False) -> Size:
    """A Count or Duration as given; a bare number is taken as seconds (Duration)."""
    if isinstance(value, Count | Duration):
        size = value
    elif isinstance(value, int | float) and not isinstance(value, bool):
        try:
            size = Duration(seconds=value)
        except ValueError as exc:  # "a Duration cannot be negative": say which one
            raise ValueError(f"{what}: {exc}") from None
    else:
        raise TypeError(f"{what} must be a Count or a Duration, got {value!r}")
    if isinstance(size, Duration) and size.ms == 0 and not allow_zero:
        raise ValueError(f"{what} must be at least 1 ms, got {size!r}")
    return size


@dataclass(frozen=True)
class Window:
    """What `execute_window` gets (Storm's `TupleWindow`).

    `tuples`: the window's tuples, oldest first (in event time: by timestamp).
    `new`: those that were not in the previous activation. `expired`: those that left
    the window since the previous activation (they were acked as they left). So
    `tuples == previous.tuples - expired + new` always holds, and an aggregate kept
    incrementally from `new` and `expired` stays exact, empty windows in between or not.
    `start`/`end` in seconds: the window covers (start, end]; for a count window
    `start` is the oldest tuple's timestamp. `key`: a session window's key, else None.
    """

    tuples: Sequence[Any]
    new: Sequence[Any]
    expired: Sequence[Any]
    start: float | None
    end: float | None
    key: Any = None

    def __iter__(self) -> Iterator[Any]:
        return iter(self.tuples)

    def __len__(self) -> int:
        return len(self.tuples)


@dataclass(frozen=True)
class Expired:
    """Tuples that left the window now: the bolt acks them (their trees may complete)."""

    items: Sequence[Any]


Output = Window | Expired
