"""The engine failing on a worker's own thread outside every task's turn (the scheduler
serving the link between turns, or the link's receive or send thread where tasks have
threads of their own; here an injected error) fails the worker: the run fails at once,
naming the thread, the error and where it was raised. Before, the thread died alone, the
worker stopped moving tuples, and the run neither completed nor failed (a `stormish run`
hung)."""

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


@pytest.mark.parametrize(
    "scheduler,method,thread",
    [
        ("cooperative", "between_turns", "scheduler thread 'worker-"),
        ("threads", "_receive", "link thread 'link-recv-"),
        ("threads", "_send", "link thread 'link-send-"),
    ],
)
@pytest.mark.parametrize("acking", [0, 1])
def test_an_engine_error_on_a_workers_thread_fails_the_run_at_once(
    monkeypatch, acking, scheduler, method, thread
):
    real, calls = getattr(link_mod.WorkerLink, method), [0]

    def failing(self, *args):
        calls[0] += 1
        if calls[0] == 50:
            raise RuntimeError("injected link failure")
        return real(self, *args)

    monkeypatch.setattr(link_mod.WorkerLink, method, failing)
    conf = {"topology.acker.executors": acking, "topology.worker.scheduler": scheduler}
    t = Topology("died", config=conf)
    t.set_spout("s", Nums(), parallelism=2)
    t.set_bolt("b", Null(), parallelism=2).fields_grouping("s", ["n"])
    with LocalCluster(workers=2) as c:
        c.submit(t)
        start = time.monotonic()
        with pytest.raises(WorkerError) as caught:
            c.wait_complete("died", timeout=60)
        assert time.monotonic() - start < 30  # failed, not timed out
    text = str(caught.value)
    assert thread in text and "RuntimeError: injected link failure" in text
    assert "test_engine_thread_death.py" in text  # where it was raised


class Ticked(BasicBolt):
    component_config = {"topology.tick.tuple.freq.secs": 0.01}

    def execute(self, tup):
        pass


def test_an_error_on_the_timer_thread_fails_the_run_at_once(monkeypatch):
    from stormish.runtime import worker as worker_mod

    def failing(self, sched):
        raise RuntimeError("injected timer failure")

    monkeypatch.setattr(worker_mod.Worker, "_tick_loop", failing)
    t = Topology("no-ticks")
    t.set_spout("s", Nums())
    t.set_bolt("b", Ticked()).shuffle_grouping("s")
    with LocalCluster() as c:
        c.submit(t)
        with pytest.raises(WorkerError, match="timer thread.*injected timer failure"):
            c.wait_complete("no-ticks", timeout=60)
