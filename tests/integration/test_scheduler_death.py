"""The engine failing on a worker's scheduler thread outside every task's turn (serving
the link between turns, here an injected error) ends the worker's tasks with that error:
the run fails at once, naming the thread and the error. Before, the thread died alone, its
tasks stayed `running`, and the run neither completed nor failed (a `stormish run` hung)."""

from __future__ import annotations

import time

import pytest

from stormish import BasicBolt, Spout, Topology
from stormish.errors import WorkerError
from stormish.local import LocalCluster
from stormish.transport import link as link_mod


class Nums(Spout):
    outputs = ["n"]

    def open(self, conf, context):
        self.i = 0

    def next_tuple(self):
        if self.i >= 1_000_000:
            self.finish()
            return
        self.i += 1
        self.emit((self.i,))


class Null(BasicBolt):
    def execute(self, tup):
        pass


@pytest.mark.parametrize("acking", [0, 1])
def test_an_engine_error_between_turns_fails_the_run_at_once(monkeypatch, acking):
    real, calls = link_mod.WorkerLink.between_turns, [0]

    def failing(self):
        calls[0] += 1
        if calls[0] == 300:
            raise RuntimeError("injected link failure")
        return real(self)

    monkeypatch.setattr(link_mod.WorkerLink, "between_turns", failing)
    t = Topology("died", config={"topology.acker.executors": acking})
    t.set_spout("s", Nums(), parallelism=2)
    t.set_bolt("b", Null(), parallelism=2).fields_grouping("s", ["n"])
    with LocalCluster(workers=2) as c:
        c.submit(t)
        start = time.monotonic()
        with pytest.raises(WorkerError) as caught:
            c.wait_complete("died", timeout=60)
        assert time.monotonic() - start < 30  # failed, not timed out
    text = str(caught.value)
    assert "scheduler thread" in text and "RuntimeError: injected link failure" in text
    assert "test_scheduler_death.py" in text  # where it was raised
