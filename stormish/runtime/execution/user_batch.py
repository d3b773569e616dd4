"""A bolt's own `execute_batch`, once per batch the queue hands out (stormish's batch
API): the rows go in a `TupleBatch`, whose tuples are made only if the bolt iterates
them. A BasicBolt's batch is acked when the call returns and failed, whole, when it
raises; a Bolt settles its own. An edge that checks an age judges the batch once.
"""

from __future__ import annotations

from ...tuple import TupleBatch
from .base import Batch, Execution, error_text


class UserBatch(Execution):
    def run(self, batch: Batch) -> None:
        src_task, stream, values, metas = batch
        col = self.collector
        source = self.source(src_task, stream)
        if values.__class__ is not list:  # an edge that checks an age: judged once, whole
            late = self.screen.judge(src_task, stream, values, metas)
            if late is None:
                return
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
