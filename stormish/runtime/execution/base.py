"""What every execution strategy offers the bolt loop (`BoltExecutor.step`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ...component import BasicBolt
from ...tuple import StampedRows, Tuple
from ..plan import ACK_ACK
from ..seams import Batch

if TYPE_CHECKING:
    from ..batcher import Batcher
    from ..bolt_executor import BoltExecutor
    from ..lane_pool import LanePool


class Execution:
    """How a bolt's input runs: `run(batch)` for each batch the loop takes. A strategy
    that runs work outside the loop's executes sets `pool` (lanes on threads, replayed by
    `completed`) or `batcher` (rows waiting to form a batch, flushed by `flush_due`).

    `run` returns None when the whole batch ran, or k: rows k: did not, because the
    emits of the rows before parked (the collector's pendingEmitQ is not empty and
    `stop()` says so). Storm's bolt stops consuming there (BoltExecutor's
    tillNoPendingEmits, which JCQueue.consume checks before each tuple): what it parks
    is one tuple's emits, not a whole take's (a 1:1000 fan-out parked 463k tuples and
    670 MB). The loop puts the rest back at the head of the queue. A strategy that runs
    tuples one by one checks before each (`if pending and stop()`: a truth test of the
    deque a tuple when nothing parks, ~5 ns; ~2 compiled); one that runs batches stops
    between them."""

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
        # the pendingEmitQ (truthy once emits park) and whether what it holds stops the
        # input (called only then); a stand-in executor without `stops` never stops
        stop = getattr(ex, "stops", None)
        self.stop: Callable[[], bool] = _never if stop is None else stop
        self.pending = None if stop is None else ex.collector.pending

    def run(self, batch: Batch) -> int | None:
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
    each spout waits for them to emit more (topology.max.spout.pending). A batch runs
    whole: the loop stops between batches when completions park, and they park only
    for spouts, which drain their queues whatever they hold (the acker never parks for
    good)."""

    def __init__(self, ex: BoltExecutor):
        super().__init__(ex)
        route = self.collector.routes.get(ACK_ACK)
        self.completions = [] if route is None else list(route.outboxes)

    def run(self, batch: Batch) -> int | None:
        src_task, stream, values, _ = batch
        col = self.collector
        self.obj.execute_raw(stream, values, col.emit_direct_system)
        for ob in self.completions:
            if ob:
                col.flush(ob)
        self.accounts.executed(src_task, stream, len(values))
        return None


def _never() -> bool:
    return False


def rows_part(batch: Batch, i: int, j: int | None = None) -> Batch:
    """Rows i:j of a batch, their metas with them; rows with an age keep their stamp."""
    src_task, stream, values, metas = batch
    part = values[i:j]
    if values.__class__ is StampedRows:
        part = StampedRows(part, values.born)
    return (src_task, stream, part, None if metas is None else metas[i:j])


def error_text(exc: BaseException) -> str:
    """What a fail tells the spout of the error that caused it (Failure.error)."""
    return f"{type(exc).__name__}: {exc}"[:500]
