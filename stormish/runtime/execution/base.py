"""What every execution strategy offers the bolt loop (`BoltExecutor.step`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ...component import BasicBolt
from ...tuple import Tuple
from ..plan import ACK_ACK
from ..seams import Batch

if TYPE_CHECKING:
    from ..batcher import Batcher
    from ..bolt_executor import BoltExecutor
    from ..lane_pool import LanePool


class Execution:
    """How a bolt's input runs: `run(batch)` for each batch the loop takes. A strategy
    that runs work outside the loop's executes sets `pool` (lanes on threads, replayed by
    `completed`) or `batcher` (rows waiting to form a batch, flushed by `flush_due`)."""

    pool: LanePool | None = None
    batcher: Batcher | None = None
    # with a lane pool: the turn's batches of ordered_lanes edges go to it here
    divert: Callable[[list], list | None] | None = None

    def __init__(self, ex: BoltExecutor):
        self.ex = ex
        self.obj = ex.obj
        self.collector = ex.collector
        self.counts = ex.counts
        self.source = ex.source
        self.accounts = ex.accounts
        self.screen = ex.screen
        self.basic = isinstance(self.obj, BasicBolt)
        self.fail = ex.fail_tuple  # a Bolt's tuple whose execute raised

    def run(self, batch: Batch) -> None:
        raise NotImplementedError

    def flush_due(self, idle: bool) -> bool:
        """Run what waited long enough (a settle batch); whether anything ran."""
        return False

    def end(self) -> None:
        """At shutdown: what is held runs, what is running finishes."""

    def on_error(self, exc: Exception, tup: Tuple | None, at: int) -> None:
        """`execute` raised for the tuple at index `at` of its batch (`tup`: None for an
        untracked BasicBolt's, counted acked already): it fails, or the task ends."""
        self.accounts.uncaught_at(exc, at)
        if tup is not None and not self.basic:
            self.fail(tup, error_text(exc))
            self.accounts.settled_by_bolt(tup)  # a Bolt's lane tuple that raised
        elif tup is not None:
            self.collector.acks.fail(tup, error_text(exc))
            self.counts.failed += 1
        else:
            self.counts.failed += 1
            self.counts.acked -= 1


class Raw(Execution):
    """The acker: its rows go to `execute_raw` as they are, no Tuple made. What it
    completed leaves at once: a row is a list of a whole batch's trees (acker.py), and
    each spout waits for them to emit more (topology.max.spout.pending)."""

    def __init__(self, ex: BoltExecutor):
        super().__init__(ex)
        route = self.collector.routes.get(ACK_ACK)
        self.completions = [] if route is None else list(route.outboxes)

    def run(self, batch: Batch) -> None:
        src_task, stream, values, _ = batch
        col = self.collector
        self.obj.execute_raw(stream, values, col.emit_direct_system)
        for ob in self.completions:
            if ob:
                col.flush(ob)
        self.accounts.executed(src_task, stream, len(values))


def error_text(exc: BaseException) -> str:
    """What a fail tells the spout of the error that caused it (Failure.error)."""
    return f"{type(exc).__name__}: {exc}"[:500]
