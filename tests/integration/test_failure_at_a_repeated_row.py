"""A task that ends at a batch's k-th tuple counts k tuples executed, also when the rows
before it are the same object (a spout emitting one tuple object again and again, or
one-word rows shared by the typed-rows reader of another worker's batches): the place
of the failing row was found by identity, so the first of equal objects was taken and a
task that failed at its 10th tuple showed 1 executed."""

from __future__ import annotations

import pytest

from stormish import BasicBolt, Spout, Topology
from stormish.errors import WorkerError
from stormish.local import LocalCluster

ROW = ("nathan",)


class Same(Spout):
    outputs = ["word"]

    def open(self, conf, context):
        self.n = 0

    def next_tuple(self):
        if self.n >= 50:
            self.finish()
            return
        self.n += 1
        self.emit(ROW)  # the one tuple object, every time


class BadAtTen(BasicBolt):
    """Ends the task at its 10th tuple (an emit of 2 values); raises at the tuples
    `failing` names first (each fails)."""

    outputs = ["word"]

    def __init__(self, failing: tuple[int, ...] = ()):
        self.failing = failing

    def prepare(self, conf, context):
        self.n = 0

    def execute(self, tup):
        self.n += 1
        if self.n in self.failing:
            raise ValueError(f"bad tuple {self.n}")
        self.emit([tup.values[0]] + ([1] if self.n == 10 else []))  # the 10th: 2 values


@pytest.mark.parametrize("acking", [0, 1])
def test_a_task_that_ends_at_its_tenth_tuple_counts_ten_executed(acking):
    t = Topology("same", config={"topology.acker.executors": acking})
    t.set_spout("s", Same())
    t.set_bolt("b", BadAtTen()).shuffle_grouping("s")
    with LocalCluster() as c:
        c.submit(t)
        with pytest.raises(WorkerError, match="emitted 2 values"):
            c.wait_complete("same", timeout=60)
        b = c.statistics("same").components["b"]
    assert (b.emitted, b.executed) == (9, 10)


def test_tuples_failed_before_the_one_that_ends_the_task_count_as_failed():
    t = Topology("fails", config={"topology.acker.executors": 1})
    t.set_spout("s", Same())
    t.set_bolt("b", BadAtTen(failing=(3, 5))).shuffle_grouping("s")
    with LocalCluster() as c:
        c.submit(t)
        with pytest.raises(WorkerError, match="emitted 2 values"):
            c.wait_complete("fails", timeout=60)
        b = c.statistics("fails").components["b"]
    assert (b.executed, b.failed, b.acked) == (10, 2, 7)


class Unprintable(Exception):
    def __str__(self):
        raise RuntimeError("no text for this error")


class RaisesUnprintable(Spout):
    outputs = ["word"]

    def next_tuple(self):
        raise Unprintable()


@pytest.mark.parametrize("scheduler", ["cooperative", "threads"])
def test_an_error_whose_str_raises_fails_its_own_task(scheduler):
    """Its report must not fail on it: the spout's error was lost, another task was
    blamed (cooperative), or the spout's thread died and the run hung (threads)."""
    t = Topology("unprintable", config={"topology.worker.scheduler": scheduler})
    t.set_spout("s", RaisesUnprintable())
    t.set_bolt("b", BadAtTen()).shuffle_grouping("s")
    with LocalCluster() as c:
        c.submit(t)
        with pytest.raises(WorkerError) as caught:
            c.wait_complete("unprintable", timeout=60)
    text = str(caught.value)
    assert "component 's'" in text and "Unprintable: <exception str() failed" in text
