"""The engine failing on a worker's own thread outside every task's turn (the scheduler
serving the link between turns, the link's receive or send thread where tasks have
threads of their own, the timer thread; here an injected error) fails the worker: the
run fails at once, naming the thread, the error and where it was raised. Before, the
thread died alone, the worker stopped moving tuples, and the run neither completed nor
failed (a `stormish run` hung).

The error is injected by the spout's `open`, in whatever process runs the worker (this
one, or a forked or spawned worker process): it replaces an engine method at class level
with one that raises on its 50th call. The originals are put back after each test, for
a worker that ran in this process."""

from __future__ import annotations

import time

import pytest

from stormish import BasicBolt, Spout, Topology
from stormish.errors import WorkerError
from stormish.local import LocalCluster
from stormish.runtime import ticks as ticks_mod
from stormish.transport import link as link_mod

TARGETS = {
    "between_turns": (link_mod.WorkerLink, "between_turns"),
    "_receive": (link_mod.WorkerLink, "_receive"),
    "_send": (link_mod.WorkerLink, "_send"),
    "next_due": (ticks_mod.TickSchedule, "next_due"),
}


@pytest.fixture(autouse=True)
def put_back():
    saved = {k: getattr(cls, name) for k, (cls, name) in TARGETS.items()}
    yield
    for k, (cls, name) in TARGETS.items():
        setattr(cls, name, saved[k])


class Saboteur(Spout):
    """Counts up to 1,000,000; its open makes `target` raise on its 50th call."""

    outputs = ["n"]

    def __init__(self, target: str):
        self.target = target

    def open(self, conf, context):
        self.i = 0
        cls, name = TARGETS[self.target]
        real, calls = getattr(cls, name), [0]

        def failing(obj, *args):
            calls[0] += 1
            if calls[0] == 50:
                raise RuntimeError(f"injected failure in {name}")
            return real(obj, *args)

        setattr(cls, name, failing)

    def next_tuple(self):
        if self.i >= 1_000_000:
            self.finish()
            return
        self.i += 1
        self.emit((self.i,))


class Null(BasicBolt):
    component_config = {"topology.tick.tuple.freq.secs": 0.005}  # the timer has work

    def execute(self, tup):
        pass


@pytest.mark.parametrize(
    "scheduler,target,thread",
    [
        ("cooperative", "between_turns", "scheduler thread 'worker-"),
        ("threads", "_receive", "link thread 'link-recv-"),
        ("threads", "_send", "link thread 'link-send-"),
        ("cooperative", "next_due", "timer thread"),
    ],
)
@pytest.mark.parametrize("acking", [0, 1])
def test_an_engine_error_on_a_workers_thread_fails_the_run_at_once(
    acking, scheduler, target, thread
):
    conf = {"topology.acker.executors": acking, "topology.worker.scheduler": scheduler}
    t = Topology("died", config=conf)
    t.set_spout("s", Saboteur(target), parallelism=2)
    t.set_bolt("b", Null(), parallelism=2).fields_grouping("s", ["n"])
    with LocalCluster(workers=2) as c:
        c.submit(t)
        start = time.monotonic()
        with pytest.raises(WorkerError) as caught:
            c.wait_complete("died", timeout=60)
        assert time.monotonic() - start < 30  # failed, not timed out
    text = str(caught.value)
    assert thread in text and f"RuntimeError: injected failure in {target}" in text
    assert "test_engine_thread_death.py" in text  # where it was raised


def test_a_worker_whose_scheduler_cannot_start_leaves_no_thread_behind(monkeypatch):
    """The helper threads (timer, watchdog, stuck watch) start before the scheduler's;
    when its start fails ("can't start new thread" under a limit) they end with it
    (found by review: the timer, watchdog and stuck watch ran on for good)."""
    import threading

    from stormish.runtime import scheduler
    from stormish.testing import CaptureBolt, ListSpout

    def refuse(self):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(scheduler.Scheduler, "start", refuse)
    t = Topology("start-fails", config={"topology.acker.executors": 0})
    t.set_spout("src", ListSpout([(i,) for i in range(10)]))
    t.set_bolt("a", CaptureBolt()).shuffle_grouping("src")
    t.set_bolt("b", CaptureBolt()).shuffle_grouping("src")
    before = set(threading.enumerate())
    with pytest.raises(RuntimeError, match="can't start new thread"), LocalCluster(workers=1) as c:
        c.submit(t)
    left = [th.name for th in threading.enumerate() if th not in before and th.is_alive()]
    assert left == []
