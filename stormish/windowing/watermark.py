"""Event-time watermarks (Storm's `WaterMarkEventGenerator`), pure.

The watermark says "every tuple stamped before this has arrived". Each input stream
(source component and stream, as Storm's GlobalStreamId) is tracked by its latest
timestamp; the watermark is the minimum of those minus the allowed lag, computed when
asked (the bolt asks on its watermark interval) and only once every input stream has
delivered something: before that, one fast stream would declare a slow one's tuples
late. It never goes back. A tuple stamped before the last watermark is late.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable


class WatermarkGenerator:
    """`lag_ms`: how far behind the latest timestamp a stream's tuples may still come.
    `streams`: the input streams to wait for (None: whichever have been seen).
    `grace_ms`: extra lateness accepted (session windows' grace)."""

    def __init__(
        self, lag_ms: int = 0, streams: Iterable[Hashable] | None = None, grace_ms: int = 0
    ):
        if lag_ms < 0 or grace_ms < 0:
            raise ValueError(f"lag and grace must be >= 0 ms, got {lag_ms}, {grace_ms}")
        self.lag_ms, self.grace_ms = lag_ms, grace_ms
        self.streams = None if streams is None else frozenset(streams)
        self.latest: dict[Hashable, int] = {}
        self.watermark: int | None = None

    def track(self, stream: Hashable, ts_ms: int) -> bool:
        """Note a tuple's timestamp; False when it is late (it must not enter a window)."""
        cur = self.latest.get(stream)
        if cur is None or ts_ms > cur:
            self.latest[stream] = ts_ms
        return self.watermark is None or ts_ms >= self.watermark - self.grace_ms

    def advance(self) -> int | None:
        """The new watermark if it moved forward, else None."""
        if not self.latest:
            return None
        if self.streams is not None and not self.streams <= self.latest.keys():
            return None
        wm = min(self.latest.values()) - self.lag_ms
        if self.watermark is not None and wm <= self.watermark:
            return None
        self.watermark = wm
        return wm

    def missing(self) -> list[Hashable]:
        """The input streams not heard from yet (what holds the first watermark back)."""
        return sorted(self.streams - self.latest.keys(), key=str) if self.streams else []
