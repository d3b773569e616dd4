"""What a bolt executed, consumed and settled, counted in one place.

- `executed`: a batch of n tuples ran: counted executed, and consumed unless they are
  ticks (the completion rule compares what was published with what was consumed).
- Ordered lanes (stormish.edges): a lane tuple is settled exactly once, when the task is
  done with it, so its lane may take another. Who is done with it depends on the bolt:
  the engine settles it as it is executed (a BasicBolt, and every batch-settle bolt,
  whose results settle the batch), or the bolt does when it acks or fails it (a Bolt,
  which may keep a tuple and ack it later; `settle_by_bolt` wraps its ack and fail), or
  the engine fails it when its execute raised (`settled_by_bolt` from the error path).
- `uncaught_at`: an exception that ends the task ends its batch too; the tuples executed
  up to it (it included) are counted as executed, as their emits were.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...errors import TopologyError
from ...tuple import TICK_STREAM, Tuple
from ..task_counts import TaskCounts


class Accounts:
    __slots__ = ("counts", "lanes", "settle", "on_execute", "uncaught")

    def __init__(
        self,
        counts: TaskCounts,
        lanes: dict[tuple[int, str], Any],
        settle: Callable[[tuple[int, str], int], None],
        on_execute: bool,
        uncaught: Callable[[Exception], None],
    ):
        self.counts = counts
        self.lanes = lanes  # ordered_lanes edges into the task, by (src_task, stream)
        self.settle = settle  # the receive queue's: n of a lane's tuples are done with
        self.on_execute = on_execute  # the engine settles lane tuples as they execute
        self.uncaught = uncaught  # Executor._uncaught: records, or raises to end the task

    def executed(self, src_task: int, stream: str, n: int) -> None:
        counts = self.counts
        counts.executed += n
        if stream != TICK_STREAM:
            counts.consumed += n
        if self.on_execute and self.lanes and (src_task, stream) in self.lanes:
            self.settle((src_task, stream), n)

    def settled_by_bolt(self, tup: Tuple) -> None:
        """A Bolt acked or failed `tup` (or its execute raised): its lane may go on."""
        if not self.on_execute:
            key = (tup.source.task, tup.source.stream)
            if key in self.lanes:
                self.settle(key, 1)

    def settled_batch_by_bolt(self, batch: Any) -> None:
        """A Bolt acked or failed the whole of a received batch (ack_batch, fail_batch)."""
        if not self.on_execute:
            key = (batch.source.task, batch.source.stream)
            if key in self.lanes:
                self.settle(key, len(batch))

    def settle_by_bolt(self, obj: Any) -> None:
        """Wrap a Bolt's ack and fail (and ack_batch, fail_batch: all of a received
        batch) so that they settle its lane tuples."""
        ack, fail, settled = obj.ack, obj.fail, self.settled_by_bolt
        ack_batch, fail_batch = obj.ack_batch, obj.fail_batch
        settled_batch = self.settled_batch_by_bolt

        def lane_ack(tup: Tuple) -> None:
            ack(tup)
            settled(tup)

        def lane_fail(tup: Tuple, *args: Any) -> None:
            fail(tup, *args)
            settled(tup)

        def lane_ack_batch(batch: Any) -> None:
            ack_batch(batch)
            settled_batch(batch)

        def lane_fail_batch(batch: Any, *args: Any) -> None:
            fail_batch(batch, *args)
            settled_batch(batch)

        obj.ack, obj.fail = lane_ack, lane_fail
        obj.ack_batch, obj.fail_batch = lane_ack_batch, lane_fail_batch

    def uncaught_at(self, exc: Exception, at: int, failed_before: int | None = None) -> None:
        """`uncaught` for the tuple at index `at` of its batch: when it ends the task,
        the tuples executed up to it (it included) count as executed, as their emits
        were (a run that failed at a batch's 19th tuple showed `emitted 18, executed 0`).
        An index, not the row: rows may be one object more than once in a batch (typed
        rows share a one-word row, rowcodec), and the first was found for a later one."""
        try:
            self.uncaught(exc)
        except BaseException:
            self.counts.executed += at + 1
            if failed_before is not None:  # a BasicBolt's batch: the rest were acked
                self.counts.acked += at - failed_before
                self.counts.failed += failed_before  # counted after the loop, not reached
            raise


BASIC_SETTLES = (
    "a BasicBolt's tuple is acked when execute returns and failed when it raises (raise "
    "FailedException to fail it on purpose); subclass Bolt to ack and fail by hand"
)


def basic_refusals(component: str, why: str = BASIC_SETTLES) -> dict[str, Callable[..., None]]:
    """A BasicBolt's ack, fail, ack_batch and fail_batch: each refuses, saying `why` (an
    adapter says it in its own API's words). The engine acks the tuple when `execute`
    returns and fails it when it raises (Storm's BasicBolt has no ack or fail); a fail
    by hand was followed by that ack, and the spout heard the ack."""

    def refuse(name: str) -> Callable[..., None]:
        def refused(*args: Any, **kwargs: Any) -> None:
            raise TopologyError(f"BasicBolt {component!r} called {name}(): {why}")

        refused.__name__ = name
        return refused

    return {name: refuse(name) for name in ("ack", "fail", "ack_batch", "fail_batch")}


def settle_calls(counts: TaskCounts, folder: Any | None) -> dict[str, Callable[..., None]]:
    """A bolt's ack, fail, ack_batch, fail_batch and ack_committed: each counts what it
    settles and, with acking on (`folder`: the task's AckFolder), tells the ackers."""

    def count_ack(tup: Tuple) -> None:
        counts.acked += 1

    def count_fail(tup: Tuple, error: str | None = None) -> None:
        counts.failed += 1

    def count_ack_batch(batch: Any) -> None:
        counts.acked += len(batch)

    def count_fail_batch(batch: Any) -> None:
        counts.failed += len(batch)

    def count_committed(txid: int, acks: Any, tuples: int) -> None:
        counts.acked += tuples

    if folder is None:
        return {
            "ack": count_ack,
            "fail": count_fail,
            "ack_batch": count_ack_batch,
            "fail_batch": count_fail_batch,
            "ack_committed": count_committed,
        }
    ack, fail, ack_batch, fail_batch = folder.ack, folder.fail, folder.ack_batch, folder.fail_batch
    committed = folder.committed

    def ack_one(tup: Tuple) -> None:
        counts.acked += 1
        ack(tup)

    def fail_one(tup: Tuple, error: str | None = None) -> None:
        counts.failed += 1
        fail(tup, error)

    def ack_many(batch: Any) -> None:
        counts.acked += len(batch)
        ack_batch(batch)

    def fail_many(batch: Any) -> None:
        counts.failed += len(batch)
        fail_batch(batch)

    def ack_committed(txid: int, acks: Any, tuples: int) -> None:
        """A stateful bolt's acks of checkpoint `txid` (for `tuples` of its inputs)."""
        counts.acked += tuples
        committed(txid, acks)

    return {
        "ack": ack_one,
        "fail": fail_one,
        "ack_batch": ack_many,
        "fail_batch": fail_many,
        "ack_committed": ack_committed,
    }
