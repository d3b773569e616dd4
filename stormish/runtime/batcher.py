"""The batches a batch-settle bolt gets (stormish.settle): formed per group (one lane of an
ordered_lanes edge from one upstream task, or one upstream task's stream), in order, cut
at `batch_size`, and flushed early when the oldest row has waited `max_wait` seconds on
the topology clock, when the task has nothing else to take, or at shutdown.

Pure logic on the executor's thread: `add` returns the batches that became full,
`due(now)` those whose time is up, `drain()` everything.
"""

from __future__ import annotations

from typing import Any

# a formed settle batch: (src_task, stream, rows, metas_or_None, late)
FormedBatch = tuple[int, str, list, Any, bool]


class _Group:
    __slots__ = ("src", "stream", "rows", "metas", "since", "late")

    def __init__(self, src: int, stream: str, tracked: bool, now: float):
        self.src, self.stream = src, stream
        self.rows: list = []
        self.metas: list | None = [] if tracked else None
        self.since = now
        self.late = False


class Batcher:
    def __init__(self, size: int, max_wait: float | None):
        self.size = size
        self.max_wait = max_wait
        self.groups: dict[Any, _Group] = {}
        self.waiting = 0  # rows held, all groups

    def add(
        self,
        key: Any,
        src: int,
        stream: str,
        rows: list,
        metas: list | None,
        now: float,
        late: bool = False,
    ) -> list[FormedBatch]:
        g = self.groups.get(key)
        if g is None:
            g = self.groups[key] = _Group(src, stream, metas is not None, now)
        elif metas is not None and g.metas is None:  # tracked rows after untracked ones
            g.metas = [None] * len(g.rows)
        if not g.rows:
            g.since = now
        g.rows.extend(rows)
        if g.metas is not None:
            g.metas.extend(metas if metas is not None else [None] * len(rows))
        g.late = g.late or late
        self.waiting += len(rows)
        out: list[FormedBatch] = []
        size = self.size
        while len(g.rows) >= size:
            out.append(self._cut(g, size))
        if g.rows:
            g.since = now if out else g.since
        return out

    def _cut(self, g: _Group, k: int) -> FormedBatch:
        rows, g.rows = g.rows[:k], g.rows[k:]
        metas = None
        if g.metas is not None:
            metas, g.metas = g.metas[:k], g.metas[k:]
        late = g.late
        g.late = False
        self.waiting -= len(rows)
        return (g.src, g.stream, rows, metas, late)

    def due(self, now: float) -> list[FormedBatch]:
        if self.max_wait is None:
            return []
        return [
            self._cut(g, len(g.rows))
            for g in self.groups.values()
            if g.rows and now - g.since >= self.max_wait
        ]

    def next_due(self) -> float | None:
        if self.max_wait is None or not self.waiting:
            return None
        return min(g.since for g in self.groups.values() if g.rows) + self.max_wait

    def drain(self) -> list[FormedBatch]:
        return [self._cut(g, len(g.rows)) for g in self.groups.values() if g.rows]
