"""What a spout whose source has offsets may commit: the highest offset below which every
tuple is complete (a Kafka partition's committed position).

Trees complete in any order; a source must not commit past one that has not: an offset
5 still in flight holds 6..N back even when they finished, so a restart replays from 5
and loses nothing. `Spout.track_offset` / `ack_offset` / `fail_offset` keep one tracker
per partition for a spout; `OffsetTracker` is the logic, usable on its own.
"""

from __future__ import annotations

import heapq


class OffsetTracker:
    """Offsets in flight per partition; `committed` is the next offset to read on a
    restart: every tracked offset below it completed."""

    __slots__ = ("committed", "_pending", "_done", "_last", "_top")

    def __init__(self, start: int = 0):
        self.committed = start
        self._pending: list[int] = []  # a heap of offsets emitted and not completed
        self._done: set[int] = set()  # completed, but behind one still pending
        self._last: dict[int, int] = {}  # a range tracked as one: first -> last offset
        self._top = -1  # the highest offset ever tracked

    def track(self, offset: int) -> None:
        """An offset emitted (again, after a fail: it stays pending)."""
        if offset < self.committed:
            raise ValueError(f"offset {offset} is below the committed position {self.committed}")
        if offset in self._done:
            raise ValueError(f"offset {offset} already completed")
        heapq.heappush(self._pending, offset)
        if offset > self._top:
            self._top = offset

    def track_ascending(self, offsets: list[int]) -> None:
        """Offsets emitted, in ascending order (a partition's new records as read). Above
        every offset tracked before (the usual case), they are appended to the heap as
        they are (a heap stays one when what is appended is not below anything in it);
        else tracked one by one."""
        if not offsets:
            return
        first = offsets[0]
        if first > self._top and first >= self.committed:
            self._pending.extend(offsets)
            self._top = offsets[-1]
        else:
            for o in offsets:
                self.track(o)

    def track_range(self, first: int, last: int) -> None:
        """Offsets first..last emitted as one (a tree of records): one entry, completed
        by `complete(first)`; offsets between them the log skipped complete with it."""
        self.track(first)
        if last != first:
            self._last[first] = last
            if last > self._top:  # split() may push any offset up to it
                self._top = last

    def split(self, first: int, offsets: list[int]) -> None:
        """The range starting at `first` goes on as single offsets: `offsets` (those of
        it still pending, past `first`) are tracked one by one (a failed tree replays
        its records one by one)."""
        if self._last.pop(first, None) is not None:
            for o in offsets:
                heapq.heappush(self._pending, o)

    def complete(self, offset: int) -> int | None:
        """Its tree completed; returns the new committed position when it moved."""
        if offset < self.committed:
            return None  # acked twice, or a replay of something older
        pending, done = self._pending, self._done
        if not done and pending and pending[0] == offset:  # in order: the oldest pending
            heapq.heappop(pending)
            while pending and pending[0] == offset:  # tracked twice (a replay): one entry
                heapq.heappop(pending)
            self.committed = (self._last.pop(offset, offset) if self._last else offset) + 1
            return self.committed
        done.add(offset)
        before = self.committed
        while pending and pending[0] in done:
            o = heapq.heappop(pending)
            while pending and pending[0] == o:  # tracked twice (a replay): one entry
                heapq.heappop(pending)
            done.discard(o)
            self.committed = (self._last.pop(o, o) if self._last else o) + 1
        return self.committed if self.committed != before else None

    def in_flight(self) -> int:
        return len(set(self._pending) - self._done)
