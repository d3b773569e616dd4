"""Batch settle (stormish.settle): a bolt that sets `batch_size` gets its rows in formed
batches (`Batcher`: per upstream task and stream, or per lane of an ordered_lanes edge)
and returns one result per tuple, which settles it: ACK, FAIL, or a dead letter. A batch
formed by its edge (mode="barrier") runs whole, as it came. With concurrent lanes, a
lane's batch runs on the lane's pool thread and is settled here when it completes.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

from ...errors import TopologyError
from ...settle import ACK, BATCH_RESULT_COUNT, BATCH_RESULT_VALUE, DEAD_LETTER, FAIL
from ...tuple import TupleBatch
from ..batcher import Batcher
from ..channel import LaneChannel
from ..stats import EXECUTE_BUCKETS
from .base import Batch, Execution, error_text
from .lanes import lane_of_row, submit_batch


class SettleBatch(Execution):
    def __init__(self, ex: Any, batcher: Batcher):
        super().__init__(ex)
        self.batcher = self.held = batcher
        self.pool = ex.lane_pool()  # None unless topology.lanes.concurrency > 1
        self.now = ex.clock.now
        self.queue = ex.queue

    def run(self, batch: Batch) -> None:
        """Rows into the batcher, by lane for an ordered_lanes edge; full batches run."""
        src_task, stream, values, metas = batch
        if (src_task, stream) in self.ex.barrier_keys:  # formed by its edge: run whole
            self._run(src_task, stream, values, metas, False)
            return
        bt = self.held
        late = False
        if values.__class__ is not list:  # an edge that checks an age: judged on arrival
            judged = self.screen.judge(src_task, stream, values, metas)
            if judged is None:
                return
            late = judged
            values = list(values)
        now = self.now()
        lane = self.accounts.lanes.get((src_task, stream))
        if lane is None:
            ready = bt.add((src_task, stream), src_task, stream, values, metas, now, late)
        else:
            by: dict[int, list[int]] = {}
            for i, v in enumerate(values):
                by.setdefault(lane_of_row(v, lane), []).append(i)
            ready = []
            for ln, rows in by.items():
                part = None if metas is None else [metas[i] for i in rows]
                key = (src_task, stream, ln)
                ready += bt.add(key, src_task, stream, [values[i] for i in rows], part, now, late)
        for b in ready:
            self._run(*b)

    def flush_due(self, idle: bool) -> bool:
        """Partial batches whose wait is over; all of them when the task has nothing
        else to take and no wait is set, or when an ordered_lanes edge is at its
        in-flight bound (nothing more can come: waiting would only stall it)."""
        bt = self.held
        if idle and (bt.max_wait is None or self._lanes_full()):
            ready = bt.drain()
        else:
            due = bt.next_due()
            if due is None or self.now() < due:
                return False
            ready = bt.due(self.now())
        for b in ready:
            self._run(*b)
        return bool(ready)

    def _lanes_full(self) -> bool:
        return any(
            ch.in_flight >= ch.policy.max_in_flight
            for ch in self.queue.chan_list
            if isinstance(ch, LaneChannel)
        )

    def end(self) -> None:
        for b in self.held.drain():  # a partial batch is executed, not lost
            self._run(*b)
        if self.pool is not None:
            self.ex.finish_pool(self.pool)

    def _run(self, src_task: int, stream: str, rows: list, metas: Any, late: bool) -> None:
        """One formed batch through the bolt; its results settle it tuple by tuple."""
        source = self.source(src_task, stream)
        if late:
            source = source.late_twin()
        t0 = self.now()
        lane = self.accounts.lanes.get((src_task, stream))
        if self.pool is not None and lane is not None:
            key = (src_task, stream, lane_of_row(rows[0], lane))

            def done(tb: TupleBatch, result: Any) -> None:
                self._settle(src_task, stream, tb, rows, metas, result, t0)

            submit_batch(self.pool, key, rows, source, metas, self.obj, self.collector, done)
            return
        tb = TupleBatch(rows, source, metas, self.collector)
        try:
            result: Any = self.obj.execute_batch(tb)
        except Exception as exc:  # noqa: BLE001 - the batch fails, the worker lives
            result = exc
        self._settle(src_task, stream, tb, rows, metas, result, t0)

    def _settle(
        self,
        src_task: int,
        stream: str,
        tb: TupleBatch,
        rows: list,
        metas: Any,
        results: Any,
        t0: float,
    ) -> None:
        col, counts = self.collector, self.counts
        n = len(rows)
        error = None
        if isinstance(results, Exception):
            self.accounts.uncaught(results)
            error = error_text(results)
            results = [FAIL] * n
        elif isinstance(results, BaseException):
            raise results
        if results is None:
            results = [ACK] * n
        elif not isinstance(results, list | tuple) or len(results) != n:
            got = len(results) if isinstance(results, list | tuple) else type(results).__name__
            self.ex.report_error(
                TopologyError(
                    f"component {self.ex.component!r}: execute_batch returned {got} results "
                    f"for {n} tuples; the unmatched ones are dead-lettered ({BATCH_RESULT_COUNT})"
                )
            )
            results = list(results) if isinstance(results, list | tuple) else []
        tuples = tb.tracked() if metas is not None else None
        acks = col.acks if col.acking else None
        component = self.source(src_task, stream).component
        for i in range(n):
            r = results[i] if i < len(results) else BATCH_RESULT_COUNT
            t = tuples[i] if tuples is not None else None
            if r == ACK:
                counts.acked += 1
                if acks is not None and t is not None:
                    acks.ack(t)
            elif r == FAIL:
                counts.failed += 1
                if acks is not None and t is not None:
                    acks.fail(t, error)
            else:
                why = r if r in (DEAD_LETTER, BATCH_RESULT_COUNT) else BATCH_RESULT_VALUE
                counts.dead_lettered += 1
                if acks is not None and t is not None:
                    acks.ack(t)  # given up for good: the tree completes, no replay
                col.emit_dead_letter((None, stream, tuple(rows[i]), component, str(why), 1))
        dt = self.now() - t0
        counts.exec_seconds += dt
        if n:
            counts.exec_hist[bisect_right(EXECUTE_BUCKETS, dt / n)] += n
        self.accounts.executed(src_task, stream, n)
