"""A bolt's own `execute_batch`, once per batch the queue hands out (stormish's batch
API): the rows go in a `TupleBatch`, whose tuples are made only if the bolt iterates
them. A BasicBolt's batch is acked when the call returns and failed, whole, when it
raises; a Bolt settles its own. An edge that checks an age judges the batch once.

A call is the bolt's whole batch, as its producer made it (one `emit_many` upstream is
one batch): the loop can only stop between calls when emits park (execution/base.py), so
what parks is at most one call's emits (Storm parks one tuple's; a per-tuple bolt here
too). Batches are not cut to the queue's take: cutting a split's 4,096-word batch into
512-row calls cost the batch API word count 19% more CPU a word, and a user who sizes
`emit_many` sizes the calls downstream.
"""

from __future__ import annotations

from ...tuple import TupleBatch
from .base import Batch, Execution, error_text


class UserBatch(Execution):
    def run(self, batch: Batch) -> int | None:
        src_task, stream, values, metas = batch
        col = self.collector
        source = self.source(src_task, stream)
        if values.__class__ is not list:  # an edge that checks an age: judged once, whole
            late = self.screen.judge(src_task, stream, values, metas)
            if late is None:
                return None
            if late:
                source = source.late_twin()
            values = list(values)
        tb = TupleBatch(values, source, metas, col)
        n = len(values)
        counts = self.counts
        try:
            self.obj.execute_batch(tb)
        except Exception as exc:  # noqa: BLE001 - the batch fails, the worker lives
            try:
                self.accounts.uncaught(exc)
            except BaseException:
                counts.executed += len(tb._made) or n  # as their emits are counted
                raise
            if self.basic:
                counts.failed += n
                if metas is not None:
                    col.acks.fail_batch(tb, error_text(exc))
        else:
            if self.basic:
                counts.acked += n
                if metas is not None:
                    col.acks.ack_batch(tb)
        col.current = None
        self.accounts.executed(src_task, stream, n)
        return None
