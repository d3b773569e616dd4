"""Session windows, pure: tuples of one key closer than `gap` to each other form a
session; it closes once time (the watermark, or the clock in processing time) passes
its last tuple + gap + grace, and is then activated once, whole.

Storm has no session window; the shape is Flink's and Kafka Streams' (merging sessions,
a grace period for late tuples). A tuple that bridges two open sessions of its key
merges them. With a grace, the bolt accepts tuples up to `grace` older than the
watermark, and a session waits that much longer before it closes, so a tuple the bolt
accepted always finds its session still open.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .spec import Duration, Expired, Output, Window, to_ms, to_seconds


@dataclass
class _Session:
    first: int
    last: int
    entries: list[tuple[int, int, Any]] = field(default_factory=list)


class SessionManager:
    def __init__(self, gap: Duration, grace: Duration | None = None):
        if gap.ms <= 0:
            raise ValueError(f"a session gap must be at least 1 ms, got {gap!r}")
        self.gap, self.grace = gap.ms, 0 if grace is None else grace.ms
        self._open: dict[Hashable, list[_Session]] = {}
        self._seq = 0

    def __len__(self) -> int:
        return sum(len(s.entries) for ss in self._open.values() for s in ss)

    def held(self) -> Iterator[Any]:
        """Every tuple in an open session."""
        for sessions in self._open.values():
            for s in sessions:
                for e in s.entries:
                    yield e[2]

    def discard(self, ids: set[int]) -> None:
        """Let go of failed tuples (by id()) still in open sessions (WindowManager.discard)."""
        for sessions in self._open.values():
            for s in sessions:
                s.entries = [e for e in s.entries if id(e[2]) not in ids]

    def add(self, item: Any, ts: Any, key: Hashable = None) -> list[Output]:
        """Put a tuple in its key's session, merging the sessions it bridges."""
        t = to_ms(ts)
        self._seq += 1
        merged = _Session(t, t, [(t, self._seq, item)])
        keep = []
        for s in self._open.get(key, []):
            if s.first - self.gap < t < s.last + self.gap:
                merged.first, merged.last = min(merged.first, s.first), max(merged.last, s.last)
                merged.entries += s.entries
            else:
                keep.append(s)
        keep.append(merged)
        self._open[key] = keep
        return []

    def end_of_input(self) -> list[Output]:
        """Every input has ended: every open session closes (the watermark at +inf)."""
        last = max((s.last for ss in self._open.values() for s in ss), default=0)
        return self.advance(to_seconds(last + self.gap + self.grace + 1))

    def advance(self, now: Any) -> list[Output]:
        """Time (watermark or clock) is `now`: activate each session it closed, oldest
        first, then give its tuples back as expired (to be acked after the activation)."""
        t = to_ms(now)
        closing = []
        for key, sessions in list(self._open.items()):
            still: list[_Session] = []
            for s in sessions:
                if s.last + self.gap + self.grace > t:
                    still.append(s)
                else:
                    closing.append((s.last, s.first, key, s))
            if still:
                self._open[key] = still
            else:
                del self._open[key]
        closing.sort(key=lambda c: (c[0], c[1], c[3].entries[0][1]))
        out: list[Output] = []
        for _, _, key, s in closing:
            items = [e[2] for e in sorted(s.entries, key=lambda e: e[:2])]
            end = to_seconds(s.last + self.gap)
            out.append(Window(items, items, [], to_seconds(s.first), end, key))
            out.append(Expired(items))
        return out
