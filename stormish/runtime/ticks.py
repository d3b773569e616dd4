"""When tick tuples are due: pure schedule logic, driven by any clock."""

from __future__ import annotations

from collections.abc import Mapping


class TickSchedule:
    """`freqs` maps task -> seconds between ticks. Missed ticks are not made up: a tick
    says "time has passed", and a burst of them after a stall says nothing more."""

    def __init__(self, freqs: Mapping[int, float], now: float):
        self.freqs = dict(freqs)
        self.next_at = {t: now + f for t, f in self.freqs.items()}

    def due(self, now: float) -> list[int]:
        out = []
        for task, at in self.next_at.items():
            if now >= at:
                out.append(task)
                f = self.freqs[task]
                self.next_at[task] = at + f if now < at + f else now + f
        return out

    def next_due(self) -> float | None:
        return min(self.next_at.values(), default=None)
