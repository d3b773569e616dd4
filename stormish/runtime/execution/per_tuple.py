"""A bolt's `execute`, once per tuple: Storm's own execution.

Tuples are made without their `__init__` (a Python call, ~35 ns of ~130 a tuple): the
same two or four slots it sets, written here. A BasicBolt's tuple is acked as its
execute returns (the ack fold inlined: `ack_folder.fold`), failed when it raises; a Bolt
settles its own. A batch of an edge that checks an age runs a few rows at a time, each
tuple judged when it would be executed (`Screen.judge`).
"""

from __future__ import annotations

from typing import Any

from ...tuple import TrackedTuple, Tuple
from ..ack_folder import ANNOUNCE
from .base import Batch, Execution, error_text

_new = object.__new__  # makes a Tuple without calling its __init__
# rows of a batch with an age executed between two looks at the clock
STAMPED_STEP = 16


class PerTuple(Execution):
    def __init__(self, ex: Any):
        super().__init__(ex)
        self.late = False  # the rows executing now missed their edge's deadline
        # announced edges (ack_folder.py) come only from spout tasks: from a bolt, no
        # tuple is looked at for one
        plan = getattr(ex, "plan", None)
        self.spout_tasks: frozenset[int] | None = (
            None
            if plan is None
            else frozenset(t for t, c in plan.task_component.items() if plan.components[c].is_spout)
        )

    def run(self, batch: Batch) -> None:
        src_task, stream, values, metas = batch
        if values.__class__ is not list:
            self._stamped(batch)
            return
        source = self.source(src_task, stream)
        if self.late:
            source = source.late_twin()
        execute = self.obj.execute
        new = _new
        if metas is None:
            if self.basic and not self.collector.acking:
                for v in values:
                    t = new(Tuple)
                    t.values = v
                    t.source = source
                    try:
                        execute(t)
                    except Exception as exc:  # noqa: BLE001 - the tuple fails, the worker lives
                        self.on_error(exc, None, values, v)
                self.counts.acked += len(values)
            else:
                col = self.collector
                for v in values:
                    t = new(Tuple)
                    t.values = v
                    t.source = source
                    col.current = t
                    try:
                        execute(t)
                    except Exception as exc:  # noqa: BLE001
                        self.on_error(exc, t, values, v)
        elif self.basic:
            col = self.collector
            folder = col.acks
            fail = folder.fail
            acks = folder.acks
            get = acks.get
            failed = 0
            # an announced tuple of this batch's spout acked with nothing anchored to it
            # is its whole tree: its root joins the batch's done list (ack_folder.py)
            announced = src_task << ANNOUNCE
            from_spout = self.spout_tasks is None or src_task in self.spout_tasks
            done: list[int] = []
            for v, m in zip(values, metas, strict=True):
                if m:
                    t = new(TrackedTuple)
                    t.meta = m
                    t.ack_val = 0
                else:
                    t = new(Tuple)
                t.values = v
                t.source = source
                col.current = t
                try:
                    execute(t)
                except Exception as exc:  # noqa: BLE001
                    failed += 1
                    self.accounts.uncaught_at(exc, values, v, failed - 1)
                    fail(t, error_text(exc))
                    continue
                if m:  # AckFolder.ack(t), inlined: a call per tuple less
                    val = t.ack_val
                    if not val and from_spout and m[0][1] == announced:
                        done.append(m[0][0])
                        continue
                    for root, e in m:
                        acks[root] = get(root, 0) ^ e ^ val
            if done:
                folder.done(src_task, done)
            if len(acks) >= folder.batch_size:
                folder.flush()
            counts = self.counts
            counts.acked += len(values) - failed
            counts.failed += failed
        else:
            for v, m in zip(values, metas, strict=True):
                if m:
                    t = new(TrackedTuple)
                    t.meta = m
                    t.ack_val = 0
                else:
                    t = new(Tuple)
                t.values = v
                t.source = source
                try:
                    execute(t)
                except Exception as exc:  # noqa: BLE001
                    self.on_error(exc, t, values, v)
        self.accounts.executed(src_task, stream, len(values))

    def _stamped(self, batch: Batch) -> None:
        src_task, stream, values, metas = batch
        n, i = len(values), 0
        judge = self.screen.judge
        while i < n:
            j = min(n, i + STAMPED_STEP)
            late = judge(src_task, stream, values, metas, i, j)
            if late is None:
                return
            self.late = late
            try:
                self.run((src_task, stream, values[i:j], None if metas is None else metas[i:j]))
            finally:
                self.late = False
            i = j
