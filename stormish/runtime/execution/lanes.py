"""Concurrent lanes (`topology.lanes.concurrency` > 1, runtime/lane_pool.py): each lane of
an ordered_lanes edge runs in order on a pool thread; the calls the bolt makes there are
recorded and replayed on the task's thread when the work completes. `Lanes` runs a
per-tuple bolt's lane batches so, and its other batches with the strategy it wraps;
`submit_batch` is a settle batch's way onto the pool.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...tuple import TrackedTuple, Tuple, TupleBatch
from ..grouping import lane_of
from ..lane_pool import LanePool
from .base import Batch, Execution


def lane_of_row(values: Any, lane: tuple[tuple[int, ...], int]) -> int:
    """The lane of a row of an ordered_lanes edge: (key indices, lanes)."""
    idx, lanes = lane
    return lane_of(values[idx[0]] if len(idx) == 1 else tuple(values[j] for j in idx), lanes)


class Lanes(Execution):
    def __init__(self, ex: Any, inner: Execution, pool: LanePool):
        super().__init__(ex)
        self.inner = inner
        self.run = inner.run  # type: ignore[method-assign]  # batches not on a lane
        self.pool = self.lane_pool = pool
        self.divert = self._divert

    def _divert(self, batches: list) -> list | None:
        lanes = self.accounts.lanes
        rest = []
        for b in batches:
            if (b[0], b[1]) in lanes:
                self._submit(b)
            else:
                rest.append(b)
        return rest or None

    def _submit(self, batch: Batch) -> None:
        """An ordered_lanes batch, per lane, to the pool: each lane's tuples run in order
        on a pool thread; emits, acks and errors are replayed here when they complete."""
        pool = self.lane_pool
        src_task, stream, values, metas = batch
        lane = self.accounts.lanes[(src_task, stream)]
        by: dict[int, list[int]] = {}
        for i, v in enumerate(values):
            by.setdefault(lane_of_row(v, lane), []).append(i)
        source = self.source(src_task, stream)
        execute, cap = self.obj.execute, pool.capture
        for ln, rows in by.items():
            part = [(values[i], metas[i] if metas is not None else None) for i in rows]

            def work(part: list = part) -> list:
                out = []
                for v, m in part:
                    t = TrackedTuple(v, source, m) if m else Tuple(v, source)
                    cap.ops, cap.current = [], t
                    try:
                        execute(t)
                        exc = None
                    except Exception as e:  # noqa: BLE001 - handed to the task's thread
                        exc = e
                    out.append((t, cap.ops, exc))
                return out

            pool.submit((src_task, stream, ln), work, self._done(src_task, stream))

    def _done(self, src_task: int, stream: str) -> Callable[[Any], None]:
        def done(result: Any) -> None:
            if isinstance(result, BaseException):
                raise result
            col = self.collector
            acks = col.acks
            for i, (t, ops, exc) in enumerate(result):
                col.current = t
                for real, args, kw, _cur in ops:
                    real(*args, **kw)
                if exc is not None:
                    self.on_error(exc, t, i)
                elif self.basic:
                    self.counts.acked += 1
                    if t.meta:
                        acks.ack(t)
            col.current = None
            self.accounts.executed(src_task, stream, len(result))

        return done

    def end(self) -> None:
        self.inner.end()
        self.ex.finish_pool(self.lane_pool)


class _PoolCurrent:
    """A TupleBatch's collector on a pool thread: the tuple it iterates is the capture's
    current tuple (what recorded emits anchor to)."""

    __slots__ = ("_cap",)

    def __init__(self, cap: Any):
        self._cap = cap

    @property
    def current(self) -> Any:
        return self._cap.current

    @current.setter
    def current(self, t: Any) -> None:
        self._cap.current = t


def submit_batch(
    pool: LanePool,
    lane: Any,
    rows: list,
    source: Any,
    metas: Any,
    obj: Any,
    col: Any,
    settle: Callable[[TupleBatch, Any], None],
) -> None:
    """A settle batch's `execute_batch` on the lane's pool thread; its recorded calls are
    replayed here, each with the tuple it was made under as the current one, and then
    `settle(batch, result or exception)`."""
    cap = pool.capture
    tb = TupleBatch(rows, source, metas, _PoolCurrent(cap))

    def work() -> tuple[Any, list]:
        cap.ops, cap.current = [], None
        try:
            r = obj.execute_batch(tb)
        except Exception as exc:  # noqa: BLE001 - settled as a failed batch
            r = exc
        return r, cap.ops

    def done(outcome: Any) -> None:
        if isinstance(outcome, BaseException):
            raise outcome
        result, ops = outcome
        for real, args, kw, cur in ops:
            col.current = cur
            real(*args, **kw)
        col.current = None
        settle(tb, result)

    pool.submit(lane, work, done)
