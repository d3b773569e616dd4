"""A bolt stops executing its take at the tuple after which its emits parked, as Storm's
(BoltExecutor consumes with tillNoPendingEmits, checked before each tuple), and the rest
waits at the head of its queue: what its pendingEmitQ holds stays about one tuple's
fan-out. It executed the whole take (up to the queue's budget) before: a 1:1000 fan-out
into a slow sink parked 463k tuples and its worker reached 670 MB.

Real workers: a fan-out bolt (1:FANOUT) feeds a sink slowed by work of its own through a
small receive buffer. The fan-out records the most its pendingEmitQ held (its collector's
`pending_count`, read as it executes) and the order it executed its inputs in; the sink
checks that it got every emitted tuple once, in order.
"""

from __future__ import annotations

from typing import Any

import pytest

from stormish import BasicBolt, Bolt, Spout, Topology
from stormish.testing import run_topology

pytestmark = [pytest.mark.timeout(180), pytest.mark.usefixtures("no_leaks")]

N = 300  # inputs
FANOUT = 200  # emits per input
QUEUE = 1024  # receive buffer: a take (the queue's budget) is an eighth, 128 tuples
BATCH = 64  # producer batch
BUDGET = QUEUE // 8
# one tuple's emits, and what a batch that parked held before it
BOUND = FANOUT + BATCH


class Numbers(Spout):
    """0 .. N-1, reliable (a message id) when acking is on."""

    outputs = ["i"]

    def __init__(self, reliable: bool):
        self.reliable = reliable

    def open(self, conf: Any, context: Any) -> None:
        self.next = 0
        self.acked = 0

    def next_tuple(self) -> None:
        if self.next >= N:
            if not self.reliable or self.acked == N:
                self.finish()
            return
        i = self.next
        self.next += 1
        self.emit((i,), msg_id=i if self.reliable else None)

    def ack(self, msg_id: Any) -> None:
        self.acked += 1

    def result(self) -> int:
        return self.acked


class Watch:
    """What a fan-out bolt records: its inputs in execution order, and the most its
    pendingEmitQ held when an execute began and after its emits."""

    def watch(self) -> None:
        self.seen: list[int] = []
        self.at_start = 0
        self.after = 0
        # the bolt's collector (emit_tasks is its bound method): its pendingEmitQ's count
        self.collector = self.emit_tasks.__self__  # type: ignore[attr-defined]

    def fan(self, i: int) -> None:
        col = self.collector
        self.at_start = max(self.at_start, col.pending_count)
        self.seen.append(i)
        for j in range(FANOUT):
            self.emit((i, j))  # type: ignore[attr-defined]
        self.after = max(self.after, col.pending_count)

    def result(self) -> dict[str, Any]:
        return {"seen": self.seen, "at_start": self.at_start, "after": self.after}


class BasicFanOut(Watch, BasicBolt):
    outputs = ["i", "j"]

    def prepare(self, conf: Any, context: Any) -> None:
        self.watch()

    def execute(self, tup: Any) -> None:
        self.fan(tup.values[0])


class HandFanOut(Watch, Bolt):
    """A Bolt (Python's per-tuple loop, not the compiled one): it acks by hand."""

    outputs = ["i", "j"]

    def prepare(self, conf: Any, context: Any) -> None:
        self.watch()

    def execute(self, tup: Any) -> None:
        self.fan(tup.values[0])
        self.ack(tup)


class BatchFanOut(Watch, BasicBolt):
    """The batch API: one call a batch, so it can stop only between calls."""

    outputs = ["i", "j"]

    def prepare(self, conf: Any, context: Any) -> None:
        self.watch()
        self.largest = 0

    def execute_batch(self, batch: Any) -> None:
        self.largest = max(self.largest, len(batch))
        col = self.collector
        self.at_start = max(self.at_start, col.pending_count)
        for (i,) in batch.values:
            self.seen.append(i)
            for j in range(FANOUT):
                self.emit((i, j))
        self.after = max(self.after, col.pending_count)

    def result(self) -> dict[str, Any]:
        return {**super().result(), "largest": self.largest}


class SlowSink(BasicBolt):
    """Slower than the fan-out by work of its own (never a sleep); checks the order."""

    def prepare(self, conf: Any, context: Any) -> None:
        self.got = 0
        self.out_of_order: list[tuple[int, int]] = []

    def execute(self, tup: Any) -> None:
        i, j = tup.values
        if (i, j) != divmod(self.got, FANOUT) and len(self.out_of_order) < 10:
            self.out_of_order.append((i, j))
        self.got += 1
        sum(range(300))  # a few microseconds of work a tuple

    def result(self) -> dict[str, Any]:
        return {"got": self.got, "out_of_order": self.out_of_order}


def run(fan: Watch, workers: int, acking: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    t = Topology(
        f"stops-{type(fan).__name__.lower()}-{workers}-{int(acking)}",
        config={
            "topology.workers": workers,
            "topology.acker.executors": None if acking else 0,
            "topology.executor.receive.buffer.size": QUEUE,
            "topology.producer.batch.size": BATCH,
            "topology.max.spout.pending": None,
        },
    )
    t.set_spout("numbers", Numbers(acking))
    t.set_bolt("fan", fan).shuffle_grouping("numbers")  # type: ignore[arg-type]
    t.set_bolt("sink", SlowSink()).shuffle_grouping("fan")
    out = run_topology(t, timeout=150)
    (fanned,) = out.results["fan"]
    (sunk,) = out.results["sink"]
    if acking:
        assert out.results["numbers"] == [N]
    return fanned, sunk


@pytest.mark.parametrize(
    ("bolt", "workers", "acking"),
    [
        (BasicFanOut, 1, False),  # the compiled BasicBolt loop, acking off
        (BasicFanOut, 1, True),  # ... with acking on (tracked tuples, a fold)
        (HandFanOut, 1, False),  # Python's loop
        (HandFanOut, 2, True),
        (BasicFanOut, 2, False),  # a sink in another worker: backpressure from there
    ],
)
def test_a_bolt_whose_emits_park_stops_after_that_tuple(bolt, workers, acking):
    fanned, sunk = run(bolt(), workers, acking)
    # every input executed once, in order; every emit delivered once, in order
    assert fanned["seen"] == list(range(N))
    assert sunk == {"got": N * FANOUT, "out_of_order": []}
    # the pendingEmitQ was empty whenever an input began (it flushes before the input
    # goes on) and held one tuple's fan-out at most, beyond a batch it parked before;
    # executing the take whole, it held up to the take's (128 tuples x 200 emits)
    assert 0 < fanned["after"] <= BOUND, fanned["after"]
    assert fanned["at_start"] == 0


def test_a_batch_bolt_stops_between_its_batches():
    """Producer batches of 64, a take of 128: a take holds two batches (calls). The batch
    API cannot stop inside a call, so it stops between them: a call never begins with
    emits parked, and what parks is one call's emits at most (the old loop ran the
    take's next call with the first call's emits parked)."""
    fan = BatchFanOut()
    t = Topology(
        "stops-batch",
        config={
            "topology.acker.executors": 0,
            "topology.executor.receive.buffer.size": QUEUE,
            "topology.producer.batch.size": BATCH,
        },
    )
    t.set_spout("numbers", Numbers(False))
    t.set_bolt("fan", fan).shuffle_grouping("numbers")
    t.set_bolt("sink", SlowSink()).shuffle_grouping("fan")
    out = run_topology(t, timeout=150)
    (fanned,) = out.results["fan"]
    (sunk,) = out.results["sink"]
    assert fanned["seen"] == list(range(N))
    assert sunk == {"got": N * FANOUT, "out_of_order": []}
    assert fanned["at_start"] == 0
    assert fanned["after"] <= fanned["largest"] * FANOUT + BATCH, fanned["after"]
