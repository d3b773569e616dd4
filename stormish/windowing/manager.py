"""Sliding and tumbling windows as a pure state machine (Storm's `WindowManager` with its
trigger and eviction policies), sans I/O: events in, `Window` activations and `Expired`
tuples out. Time is what the caller says it is, so every rule is tested on plain numbers.

Four inputs drive it:
- `add(item, ts)`: a tuple arrived (in processing time `ts` is the clock's now);
- `on_watermark(wm)`: event time moved to `wm` (every tuple older than it has arrived);
- `on_timer(now)`: a processing-time slide elapsed (the bolt's tick);
- `discard(ids)`: tuples were failed and leave without being expired.

The tuples are held sorted by (timestamp, arrival), so in every mode a window is a
prefix of what is held minus an expired prefix: expiring is `del held[:n]`, and a window
is `held[:pos]`. Which triggers and evictions apply (Storm's policy pairs):

| slide \\ time | processing time                      | event time                            |
|--------------|--------------------------------------|---------------------------------------|
| Count(n)     | every n-th arrival, end = now        | every n-th tuple by timestamp up to   |
|              |                                      | the watermark, end = its timestamp    |
| Duration(s)  | every timer, end = now               | each end aligned to a multiple of s,  |
|              |                                      | once the watermark is past it         |

A Duration length L keeps the tuples in (end - L, end]; a Count length n keeps the
last n tuples up to the end. In processing time a sliding window's start is the
previous end + slide - L rather than now - L, so a tick that comes late or early does
not drop a tuple from, or repeat it in, a tumbling window (Storm's eviction delta).
"""

from __future__ import annotations

from bisect import bisect_right
from operator import itemgetter
from typing import Any

from .spec import Count, Duration, Expired, Output, Size, Window, to_ms, to_seconds

_ts = itemgetter(0)
_key = itemgetter(0, 1)
# Storm's EXPIRE_EVENTS_THRESHOLD: between triggers, expire what has left the window
# every this many arrivals, so a long slide does not hold (and leave unacked) old tuples.
COMPACT_EVERY = 100

Entry = tuple[int, int, Any]  # (timestamp ms, arrival sequence, item)


class WindowManager:
    """Sliding (slide < length), tumbling (slide == length) or hopping windows of
    `Count` or `Duration` length and slide, in processing or event time."""

    def __init__(self, length: Size, slide: Size, event_time: bool = False):
        self.length, self.slide, self.event_time = length, slide, event_time
        self._held: list[Entry] = []
        self._seq = 0
        self._prev: set[int] = set()  # arrival numbers of the last activation's tuples
        self._expired: list[Any] = []  # left since the last activation
        self._arrived = 0  # since the last count trigger (processing time)
        self._since_compact = 0
        self._last_end: int | None = None  # processing time: the previous trigger's end
        self._next_end: int | None = None  # event time, Duration slide
        self._last_key: tuple[int, int] | None = None  # event time, Count slide

    def __len__(self) -> int:
        """Tuples held: in a window now or waiting for a later one."""
        return len(self._held)

    def discard(self, ids: set[int]) -> None:
        """Let go of the tuples whose id() is in `ids` without expiring them: they were
        failed (the spout replays them) and must be neither acked nor windowed again."""
        self._held = [e for e in self._held if id(e[2]) not in ids]
        self._expired = [x for x in self._expired if id(x) not in ids]

    # -- inputs ---------------------------------------------------------------------------
    def add(self, item: Any, ts: Any) -> list[Output]:
        """A tuple with its timestamp (seconds). In event time the caller has already
        turned away late tuples (older than the watermark)."""
        self._seq += 1
        t = to_ms(ts)
        if not self.event_time and self._last_end is not None and t <= self._last_end:
            t = self._last_end + 1  # it came after that window ended: it is the next one's
        entry = (t, self._seq, item)
        held = self._held
        if held and entry[0] < held[-1][0]:
            held.insert(bisect_right(held, entry[:2], key=_key), entry)
        else:
            held.append(entry)
        if self.event_time:
            return []
        out = self._compact(entry[0])
        if isinstance(self.slide, Count):
            self._arrived += 1
            if self._arrived >= self.slide.value:
                self._arrived = 0
                out += self._fire(entry[0], len(held), self._start(entry[0]))
        return out

    def on_timer(self, now: Any) -> list[Output]:
        """A processing-time Duration slide elapsed: evaluate the window ending now."""
        if self.event_time or not isinstance(self.slide, Duration):
            return []
        end = to_ms(now)
        start = None  # the first window holds everything so far (Storm)
        if isinstance(self.length, Duration) and self._last_end is not None:
            start = self._last_end + self.slide.ms - self.length.ms
        self._last_end = end
        return self._fire(end, len(self._held), start)

    def on_watermark(self, wm: Any) -> list[Output]:
        """Event time reached `wm`: evaluate every window that ends before it. A tuple
        stamped `wm` itself is still on time (late is older than the watermark, as in
        Storm), so a Duration window ending exactly at `wm` waits for a later watermark.
        Count triggers count the tuples up to `wm`: one stamped `wm` that comes later
        sorts after them and is counted in the next window."""
        if not self.event_time:
            return []
        if isinstance(self.slide, Count):
            return self._count_windows(to_ms(wm))
        return self._duration_windows(to_ms(wm))

    def end_of_input(self) -> list[Output]:
        """Every input has ended (a finite run): time goes to its end, as Flink and Beam
        take the watermark to +inf at the end of a bounded input. Every window that
        holds a tuple is evaluated (Duration slides; a Count slide fires only on its
        n-th tuple, so a last partial count window is not run, as in Storm and Flink),
        then whatever is left expires, so every tuple is acked and a finite topology
        completes instead of timing its last trees out."""
        held = self._held
        if not held:
            return self._expire(0)
        out: list[Output] = []
        if isinstance(self.slide, Duration):
            span = self.length.ms if isinstance(self.length, Duration) else 0
            if self.event_time:
                out += self._duration_windows(held[-1][0] + span + self.slide.ms + 1)
            else:
                out += self._timer_windows_until_empty()
        elif self.event_time:
            out += self._count_windows(held[-1][0])
        return out + self._expire(len(self._held))

    def _timer_windows_until_empty(self) -> list[Output]:
        """Processing time, Duration slide: the slides a clock running on would give,
        until no window holds a tuple any more (a sliding window keeps one for up to
        length/slide slides)."""
        out: list[Output] = []
        base = self._last_end if self._last_end is not None else self._held[-1][0]
        slides = 1
        if isinstance(self.length, Duration):
            slides = -(-self.length.ms // self.slide.ms)  # type: ignore[union-attr]
        for i in range(1, slides + 1):
            if not self._held:
                break
            out += self.on_timer(to_seconds(base + i * self.slide.ms))  # type: ignore[union-attr]
        return out

    # -- event-time triggers ----------------------------------------------------------------
    def _duration_windows(self, wm: int) -> list[Output]:
        """Windows end on multiples of the slide; a stretch with no tuples is skipped by
        jumping to the window that holds the next tuple (Storm's aligned-window scan)."""
        out: list[Output] = []
        end = self._next_end
        if end is None:
            end = self._aligned_after(None, wm)
            if end is None:
                return out
        while end < wm:
            fired = self._fire(end, bisect_right(self._held, end, key=_ts), self._start(end))
            out += fired
            if fired and isinstance(fired[-1], Window):
                end += self.slide.ms  # type: ignore[union-attr]
                continue
            nxt = self._aligned_after(end, wm)
            if nxt is None:
                break
            end = nxt
        self._next_end = end
        return out

    def _aligned_after(self, after: int | None, wm: int) -> int | None:
        """The end of the first window holding a tuple stamped in (after, wm]."""
        i = 0 if after is None else bisect_right(self._held, after, key=_ts)
        if i >= len(self._held) or self._held[i][0] > wm:
            return None
        ts, slide = self._held[i][0], self.slide.ms  # type: ignore[union-attr]
        return ts if ts % slide == 0 else ts + slide - ts % slide

    def _count_windows(self, wm: int) -> list[Output]:
        """Every n-th tuple (by timestamp) up to the watermark ends a window at its own
        timestamp; the tuples after the last n-th wait for the next watermark."""
        held = self._held
        first = 0 if self._last_key is None else bisect_right(held, self._last_key, key=_key)
        last = bisect_right(held, wm, key=_ts)
        n = self.slide.value  # type: ignore[union-attr]
        ends = [held[i][:2] for i in range(first + n - 1, last, n)]
        out: list[Output] = []
        for key in ends:
            pos = bisect_right(self._held, key, key=_key)
            out += self._fire(key[0], pos, self._start(key[0]))
            self._last_key = key
        return out

    # -- evaluation -------------------------------------------------------------------------
    def _start(self, end: int) -> int | None:
        return end - self.length.ms if isinstance(self.length, Duration) else None

    def _fire(self, end: int, pos: int, start: int | None) -> list[Output]:
        """Expire what is before the window ending at `end` (held[:pos] are the tuples
        up to the end), then activate the window unless it is empty (as Storm does)."""
        n = self._expire_count(pos, start)
        out = self._expire(n)
        window = self._held[: pos - n]
        if not window:
            return out
        items = [e[2] for e in window]
        new = [e[2] for e in window if e[1] not in self._prev]
        self._prev = {e[1] for e in window}
        first = window[0][0] if start is None else start
        out.append(Window(items, new, self._expired, to_seconds(first), to_seconds(end)))
        self._expired = []
        return out

    def _expire_count(self, pos: int, start: int | None) -> int:
        """How many of held[:pos] are out of a window starting after `start`."""
        if isinstance(self.length, Count):
            return max(0, pos - self.length.value)
        if start is None:
            return 0
        return min(pos, bisect_right(self._held, start, key=_ts))

    def _expire(self, n: int) -> list[Output]:
        if n <= 0:
            return []
        items = [e[2] for e in self._held[:n]]
        del self._held[:n]
        self._expired.extend(items)
        return [Expired(items)]

    def _compact(self, now: int) -> list[Output]:
        """Processing time: every COMPACT_EVERY arrivals, expire what the next window
        cannot hold (Storm's compaction), so tuples are acked without waiting a slide."""
        self._since_compact += 1
        if self._since_compact < COMPACT_EVERY:
            return []
        self._since_compact = 0
        held = self._held
        if isinstance(self.length, Count):
            return self._expire(len(held) - self.length.value)
        if isinstance(self.slide, Duration):
            if self._last_end is None:
                return []
            start = self._last_end + self.slide.ms - self.length.ms
        else:
            start = now - self.length.ms
        return self._expire(bisect_right(held, start, key=_ts))
